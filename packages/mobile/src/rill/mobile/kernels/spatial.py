"""Spatial data movement: DEPTH_TO_SPACE, SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND,
MIRROR_PAD, PADV2 (any type; int8/int16 keep their quantization), and RESIZE_BILINEAR and
RESIZE_NEAREST_NEIGHBOR (float32, int8, int16).

Resizes follow the reference kernels: the source coordinate of output index i is
(i + 1/2) · scale − 1/2 with half-pixel centers, i · scale otherwise, where scale is
(in − 1) / (out − 1) with align_corners and in / out without, in float32. Bilinear int8/int16
use the reference kernel's integer arithmetic (see ResizeBilinear); nearest rounds (align
corners) or floors (i + 1/2) · scale (i · scale without half-pixel centers), clamped.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.array_ops import _int_vector
from rill.mobile.kernels.base import Kernel, register

__all__ = ["DepthToSpace", "SpaceToDepth", "SpaceToBatchNd", "BatchToSpaceNd", "MirrorPad",
           "PadV2", "ResizeBilinear", "ResizeNearestNeighbor"]  # fmt: skip


def _same_quant(kernel, x, out):
    if x.dtype is not None and x.dtype.kind in "iu" and x.quant is not None:
        kernel.expect_same_quant(x, out)


class _Rearrange(Kernel):
    """Output = a fixed reshape/transpose/reshape of the input (a view set up in bind)."""

    def bind(self, inputs, outputs, scratch):
        x, out, view = inputs[0], outputs[0], self.view
        return lambda: np.copyto(out, view(x))  # the final reshape copies: done per run


@register("DEPTH_TO_SPACE", max_version=2)
class DepthToSpace(_Rearrange):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        b = int(self.options.get("block_size", 0))
        if len(x.shape) != 4 or b < 1 or x.shape[3] % (b * b):
            raise self.fail(f"cannot move the depth of {x} into {b}x{b} blocks")
        _same_quant(self, x, outputs[0])
        self.b = b
        n, h, w, c = x.shape
        return [(n, h * b, w * b, c // (b * b))]

    def view(self, x):
        n, h, w, c = x.shape
        b = self.b
        return x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(
            n, h * b, w * b, c // (b * b))  # fmt: skip


@register("SPACE_TO_DEPTH", max_version=2)
class SpaceToDepth(_Rearrange):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        b = int(self.options.get("block_size", 0))
        if len(x.shape) != 4 or b < 1 or x.shape[1] % b or x.shape[2] % b:
            raise self.fail(f"cannot move {b}x{b} blocks of {x} into its depth")
        _same_quant(self, x, outputs[0])
        self.b = b
        n, h, w, c = x.shape
        return [(n, h // b, w // b, c * b * b)]

    def view(self, x):
        n, h, w, c = x.shape
        b = self.b
        return x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(
            n, h // b, w // b, b * b * c)  # fmt: skip


@register("SPACE_TO_BATCH_ND", max_version=4)
class SpaceToBatchNd(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        block = _int_vector(self, inputs[1], "block shape")
        pads = _int_vector(self, inputs[2], "paddings")
        m = len(block)
        if len(pads) != 2 * m or len(x.shape) < m + 1:
            raise self.fail(f"block {block} and paddings {pads} do not fit {x}")
        padded = [x.shape[1 + i] + pads[2 * i] + pads[2 * i + 1] for i in range(m)]
        if any(p % b for p, b in zip(padded, block)) or any(b < 1 for b in block):
            raise self.fail(f"the padded spatial shape {padded} is not a multiple of {block}")
        _same_quant(self, x, outputs[0])
        self.block, self.pads, self.padded = block, pads, padded
        self.pad_value = outputs[0].zero_point if x.dtype == np.int8 and x.quant else 0
        n = x.shape[0] * int(np.prod(block))
        return [(n, *[p // b for p, b in zip(padded, block)], *x.shape[m + 1 :])]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        block, pads, padded, m = self.block, self.pads, self.padded, len(self.block)
        buf = np.zeros((x.shape[0], *padded, *x.shape[m + 1 :]), x.dtype)
        inner = (slice(None),) + tuple(slice(pads[2 * i], pads[2 * i] + x.shape[1 + i])
                                       for i in range(m))  # fmt: skip
        rest = x.shape[m + 1 :]
        # [N, p1/b1, b1, p2/b2, b2, ...rest] → [b1, b2, N, p1/b1, p2/b2, ...rest]
        split = (x.shape[0], *[v for p, b in zip(padded, block) for v in (p // b, b)], *rest)
        perm = ([2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
                + list(range(1 + 2 * m, 1 + 2 * m + len(rest))))  # fmt: skip
        moved = out.reshape(tuple(split[p] for p in perm))
        value = self.pad_value

        def run():
            buf.fill(value)
            buf[inner] = x
            np.copyto(moved, buf.reshape(split).transpose(perm))

        return run


@register("BATCH_TO_SPACE_ND", max_version=4)
class BatchToSpaceNd(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        block = _int_vector(self, inputs[1], "block shape")
        crops = _int_vector(self, inputs[2], "crops")
        m = len(block)
        prod = int(np.prod(block))
        if len(crops) != 2 * m or len(x.shape) < m + 1 or x.shape[0] % prod:
            raise self.fail(f"block {block} and crops {crops} do not fit {x}")
        _same_quant(self, x, outputs[0])
        self.block, self.crops = block, crops
        full = [x.shape[1 + i] * block[i] for i in range(m)]
        out_sp = [full[i] - crops[2 * i] - crops[2 * i + 1] for i in range(m)]
        if any(v < 0 for v in out_sp):
            raise self.fail(f"crops {crops} are larger than the spatial shape {full}")
        return [(x.shape[0] // prod, *out_sp, *x.shape[m + 1 :])]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        block, crops, m = self.block, self.crops, len(self.block)
        n = x.shape[0] // int(np.prod(block))
        rest = x.shape[m + 1 :]
        # [b1, b2, N, s1, s2, ...rest] → [N, s1, b1, s2, b2, ...rest]
        split = (*block, n, *x.shape[1 : m + 1], *rest)
        perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(
            range(2 * m + 1, 2 * m + 1 + len(rest)))  # fmt: skip
        shape = (n, *[x.shape[1 + i] * block[i] for i in range(m)], *rest)
        idx = (slice(None),) + tuple(slice(crops[2 * i], crops[2 * i] + out.shape[1 + i])
                                     for i in range(m))  # fmt: skip
        return lambda: np.copyto(out, x.reshape(split).transpose(perm).reshape(shape)[idx])


@register("MIRROR_PAD", max_version=3)
class MirrorPad(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        pads = _int_vector(self, inputs[1], "paddings")
        rank = len(x.shape)
        if len(pads) != 2 * rank:
            raise self.fail(f"paddings {pads} must have shape [{rank}, 2]")
        self.mode = "reflect" if self.options.get("mode", 0) == 0 else "symmetric"
        limit = 0 if self.mode == "reflect" else 1
        for d in range(rank):
            for p in pads[2 * d : 2 * d + 2]:
                if p < 0 or p > x.shape[d] - 1 + limit:
                    raise self.fail(f"padding {p} is too large for dimension {d} of {x} in "
                                    f"{self.mode.upper()} mode")  # fmt: skip
        _same_quant(self, x, outputs[0])
        self.pairs = [(pads[2 * d], pads[2 * d + 1]) for d in range(rank)]
        return [tuple(d + a + b for d, (a, b) in zip(x.shape, self.pairs))]

    def bind(self, inputs, outputs, scratch):
        x, out, pairs, mode = inputs[0], outputs[0], self.pairs, self.mode
        return lambda: np.copyto(out, np.pad(x, pairs, mode=mode))


@register("PADV2", max_version=4)
class PadV2(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        pads = _int_vector(self, inputs[1], "paddings")
        rank = len(x.shape)
        if len(pads) != 2 * rank:
            raise self.fail(f"paddings {pads} must have shape [{rank}, 2]")
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(rank)]
        if any(a < 0 or b < 0 for a, b in pairs):
            raise self.fail(f"paddings {pairs} must be >= 0")
        value = inputs[2] if len(inputs) > 2 else None
        if value is not None:
            self.expect_same_dtype(x, value)
            if value.data is None:
                raise self.fail(f"the constant value {value} must be a constant")
            if x.dtype == np.int8 and x.quant is not None:
                self.expect_same_quant(x, value)
            self.value = value.data.reshape(-1)[0]
        else:
            self.value = outputs[0].zero_point if x.quant is not None else 0
        _same_quant(self, x, outputs[0])
        self.inner = tuple(slice(a, a + d) for (a, _), d in zip(pairs, x.shape))
        return [tuple(d + a + b for d, (a, b) in zip(x.shape, pairs))]

    def bind(self, inputs, outputs, scratch):
        x, out, value = inputs[0], outputs[0], self.value
        inner = out[self.inner]

        def run():
            out.fill(value)
            np.copyto(inner, x)

        return run


class _Resize(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        size = _int_vector(self, inputs[1], "size")
        if len(x.shape) != 4 or len(size) != 2 or min(size) < 1:
            raise self.fail(f"cannot resize {x} to {size}")
        self.expect_dtype(x, [np.float32, np.int8, np.int16, np.uint8])
        self.expect_same_dtype(x, outputs[0])
        _same_quant(self, x, outputs[0])
        self.align = bool(self.options.get("align_corners", False))
        self.half = bool(self.options.get("half_pixel_centers", False))
        n, h, w, c = x.shape
        self.coords = [self.source(i, o) for i, o in ((h, size[0]), (w, size[1]))]
        return [(n, size[0], size[1], c)]

    def scale(self, inp: int, out: int):
        f32 = np.float32
        if self.align and out > 1:
            return f32(inp - 1) / f32(out - 1)
        return f32(inp) / f32(out)


@register("RESIZE_BILINEAR", max_version=4)
class ResizeBilinear(_Resize):
    """float32: ComputeInterpolationValues (lower = max(floor(v), 0), upper = min(ceil(v),
    in − 1), weight v − lower); int8/int16: the reference integer kernel, coordinates in 1/1024
    units and the four products summed in int64, rounded half away from zero by 2^20."""

    def source(self, inp: int, out: int):
        if self.integer:
            if self.align and out > 1:
                s10 = ((1 << 10) * (inp - 1) + (out - 1) // 2) // (out - 1)
            else:
                s10 = ((1 << 10) * inp + out // 2) // out
            i = np.arange(out, dtype=np.int64)
            v = i * s10 + (s10 // 2 - (1 << 9) if self.half else 0)
            lo = np.maximum(np.trunc(v / 1024).astype(np.int64), 0)
            hi = np.minimum(np.trunc((v + 1023) / 1024).astype(np.int64), inp - 1)
            return lo, hi, v - 1024 * lo
        f32 = np.float32
        s = self.scale(inp, out)
        i = np.arange(out, dtype=f32)
        v = ((i + f32(0.5)) * s - f32(0.5)) if self.half else i * s
        v = v.astype(f32)
        lo = np.maximum(np.floor(v), 0).astype(np.int64)
        hi = np.minimum(np.ceil(v).astype(np.int64), inp - 1)
        return lo, hi, (v - lo.astype(f32)).astype(f32)

    def prepare(self, inputs, outputs):
        self.integer = inputs[0].dtype is not None and inputs[0].dtype.kind in "iu"
        return super().prepare(inputs, outputs)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        (y0, y1, fy), (x0, x1, fx) = self.coords
        fy = fy[None, :, None, None]
        fx = fx[None, None, :, None]
        if self.integer:
            one = 1 << 10

            def run_int():
                xi = x.astype(np.int64)
                top, bot = xi[:, y0], xi[:, y1]
                v = (top[:, :, x0] * (one - fy) * (one - fx) + bot[:, :, x0] * fy * (one - fx)
                     + top[:, :, x1] * (one - fy) * fx + bot[:, :, x1] * fy * fx)  # fmt: skip
                r = np.where(v > 0, 1 << 19, -(1 << 19))
                q = v + r
                np.copyto(out, np.sign(q) * (np.abs(q) >> 20), casting="unsafe")

            return run_int
        f32 = np.float32

        def run():
            top, bot = x[:, y0], x[:, y1]
            one = f32(1)
            v = (top[:, :, x0] * (one - fy) * (one - fx) + bot[:, :, x0] * fy * (one - fx)
                 + top[:, :, x1] * (one - fy) * fx + bot[:, :, x1] * fy * fx)  # fmt: skip
            np.copyto(out, v, casting="unsafe")

        return run


@register("RESIZE_NEAREST_NEIGHBOR", max_version=4)
class ResizeNearestNeighbor(_Resize):
    def source(self, inp: int, out: int):
        f32 = np.float32
        s = self.scale(inp, out)
        v = ((np.arange(out, dtype=f32) + (f32(0.5) if self.half else f32(0))) * s).astype(f32)
        idx = np.trunc(v + f32(0.5)) if self.align else np.floor(v)
        return np.clip(idx.astype(np.int64), 0, inp - 1)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        ys, xs = self.coords
        return lambda: np.copyto(out, x[:, ys][:, :, xs])
