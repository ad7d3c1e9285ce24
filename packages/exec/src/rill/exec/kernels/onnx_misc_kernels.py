"""CPU kernels for rill.graph.ops.onnx_misc_ops: ONNX's BitCast, MaxRoiPool and DeformConv, as
the ONNX specification describes them (numpy; DeformConv interpolates and accumulates in float64
and rounds to the input's dtype once at the end)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.onnx_misc_ops import bit_width
from rill.graph.shapes import TensorShape


def _shape(a) -> TensorShape:
    return TensorShape(np.shape(a))


# -- BitCast ------------------------------------------------------------------------------------


@register_kernel("_OnnxBitCast")
def onnx_bitcast(T, out_type):
    if bit_width(T) is None or bit_width(T) != bit_width(out_type):
        raise InvalidArgumentError(
            f"BitCast: {T.name} ({bit_width(T)} bits) and {out_type.name} "
            f"({bit_width(out_type)} bits) differ in width"
        )
    # numpy keeps every narrow (4- and 2-bit) value in the low bits of its own byte, so a view
    # reinterprets those bits too. A bool must be a canonical 0 or 1 byte, hence the compare.
    to_bool = out_type.is_bool

    def compute(x):
        a = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d x 1-d)
        if to_bool:
            return a.view(np.uint8) != 0
        return a.view(out_type.np)

    return compute


# -- MaxRoiPool ---------------------------------------------------------------------------------


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _bins(start: int, size: int, count: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of `count` bins splitting `size` pixels from `start`: [begin, end) within [0, limit)."""
    step = size / count
    k = np.arange(count)
    begin = np.clip(np.floor(k * step).astype(np.int64) + start, 0, limit)
    end = np.clip(np.ceil((k + 1) * step).astype(np.int64) + start, 0, limit)
    return begin, end


@register_kernel("_OnnxMaxRoiPool", expensive=True)
def onnx_max_roi_pool(T, pooled_height, pooled_width, spatial_scale):
    def compute(x, rois):
        if x.ndim != 4:
            raise InvalidArgumentError(f"MaxRoiPool: X must be 4-D [N, C, H, W], got {_shape(x)}")
        if rois.ndim != 2 or rois.shape[1] != 5:
            raise InvalidArgumentError(
                f"MaxRoiPool: rois must be [num_rois, 5] rows [batch_id, x1, y1, x2, y2], got "
                f"{_shape(rois)}"
            )
        n, c, h, w = x.shape
        r = np.asarray(rois, np.float64)
        batch = r[:, 0]
        bad = ~np.isfinite(batch) | (batch != np.floor(batch)) | (batch < 0) | (batch >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(
                f"MaxRoiPool: roi {i} names batch {batch[i]:g}, not an image index in [0, {n})"
            )
        corners = r[:, 1:] * np.float64(spatial_scale)
        if not np.isfinite(corners).all():
            raise InvalidArgumentError("MaxRoiPool: rois hold non-finite coordinates")
        corners = _round_half_away(corners).astype(np.int64)
        out = np.zeros((r.shape[0], c, pooled_height, pooled_width), x.dtype)
        for i, (b, (x1, y1, x2, y2)) in enumerate(zip(batch.astype(np.int64), corners)):
            hb, he = _bins(y1, max(y2 - y1 + 1, 1), pooled_height, h)
            wb, we = _bins(x1, max(x2 - x1 + 1, 1), pooled_width, w)
            for ph in range(pooled_height):
                if he[ph] <= hb[ph]:
                    continue
                rows = x[b, :, hb[ph] : he[ph], :].max(axis=1)
                for pw in range(pooled_width):
                    if we[pw] > wb[pw]:
                        out[i, :, ph, pw] = rows[:, wb[pw] : we[pw]].max(axis=1)
        return out

    return compute


# -- DeformConv ---------------------------------------------------------------------------------


def _check_deform_shapes(x, w, offset, mask, r, group, offset_group, out_spatial) -> None:
    n, c = x.shape[:2]
    k = math.prod(w.shape[2:])
    if c % group or c // group != w.shape[1] or w.shape[0] % group:
        raise InvalidArgumentError(
            f"DeformConv: X has {c} channels and W is {_shape(w)}: with group {group}, W must "
            f"be [oC, C / group = {c // group if not c % group else '?'}, ...] with oC and C "
            "multiples of group"
        )
    if c % offset_group:
        raise InvalidArgumentError(
            f"DeformConv: offset_group {offset_group} does not divide X's {c} channels"
        )
    want = (n, offset_group * k * r, *out_spatial)
    if offset.shape != want:
        raise InvalidArgumentError(
            f"DeformConv: offset must be [N, offset_group · prod(kernel) · {r}, *output] = "
            f"{list(want)} for X {_shape(x)} and W {_shape(w)}, got {_shape(offset)}"
        )
    want = (n, offset_group * k, *out_spatial)
    if mask.size != 1 and mask.shape != want:
        raise InvalidArgumentError(
            f"DeformConv: mask must be [N, offset_group · prod(kernel), *output] = {list(want)}, "
            f"got {_shape(mask)}"
        )


@register_kernel("_OnnxDeformConv", expensive=True)
def onnx_deform_conv(T, strides, pads, dilations, group, offset_group):
    r = len(strides)
    if len(dilations) != r or len(pads) != 2 * r:
        raise InvalidArgumentError(
            f"DeformConv: strides {list(strides)}, dilations {list(dilations)} and pads "
            f"{list(pads)} must describe the same {r} spatial axes (pads twice)"
        )
    stride = np.asarray(strides, np.int64)
    dilation = np.asarray(dilations, np.int64)
    pad_begin = np.asarray(pads[:r], np.int64)

    def compute(x, w, offset, mask):
        for name, t in (("X", x), ("W", w), ("offset", offset)):
            if t.ndim != r + 2:
                raise InvalidArgumentError(
                    f"DeformConv: {name} must be {r + 2}-D for {r} spatial axes, got {_shape(t)}"
                )
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        kernel = w.shape[2:]
        span = [dilations[i] * (kernel[i] - 1) + 1 for i in range(r)]
        out_spatial = [
            (spatial[i] + pads[i] + pads[r + i] - span[i]) // strides[i] + 1 for i in range(r)
        ]
        if min(spatial, default=1) < 1 or min(out_spatial, default=1) < 1:
            raise InvalidArgumentError(
                f"DeformConv: the kernel {list(kernel)} (dilations {list(dilations)}) does not "
                f"fit X's spatial shape {list(spatial)} padded by {list(pads)}"
            )
        _check_deform_shapes(x, w, offset, mask, r, group, offset_group, out_spatial)
        oc = w.shape[0]
        taps, cells = math.prod(kernel), math.prod(out_spatial)
        # The regular position of tap k at output cell o, per axis: o·stride − pad + k·dilation.
        tap_at = np.indices(kernel).reshape(r, taps, 1)
        cell_at = np.indices(out_spatial).reshape(r, 1, cells)
        regular = cell_at * stride[:, None, None] - pad_begin[:, None, None]
        regular = regular + tap_at * dilation[:, None, None]  # [r, taps, cells]
        pos = offset.astype(np.float64).reshape(n, offset_group, taps, r, cells)
        pos = pos + np.moveaxis(regular, 0, 1)
        lows, fracs = [], []
        for i, size in enumerate(spatial):
            # Beyond one pixel outside, both neighbours are outside: clipping there changes no
            # weight, keeps indices small, and leaves NaN positions NaN (their weight too).
            p = np.clip(pos[:, :, :, i, :], -2.0, size + 1.0)
            low = np.floor(np.nan_to_num(p, nan=-2.0)).astype(np.int64)
            lows.append(low)
            fracs.append(p - low)
        group_channels = c // offset_group
        flat_x = x.astype(np.float64).reshape(n, offset_group, group_channels, -1)
        sampled = np.zeros((n, offset_group, group_channels, taps * cells), np.float64)
        for corner in itertools.product((0, 1), repeat=r):
            flat, weight = 0, 1.0
            for i, (size, up) in enumerate(zip(spatial, corner, strict=True)):
                idx = lows[i] + up
                inside = (idx >= 0) & (idx < size)
                weight = weight * (fracs[i] if up else 1.0 - fracs[i]) * inside
                flat = flat * size + np.clip(idx, 0, size - 1)
            at = flat.reshape(n, offset_group, 1, taps * cells)
            sampled += np.take_along_axis(flat_x, at, axis=3) * weight.reshape(at.shape)
        m = mask.astype(np.float64)
        sampled *= m.reshape(n, offset_group, 1, taps * cells) if m.size != 1 else m.reshape(())
        columns = sampled.reshape(n, group, (c // group) * taps, cells)
        filters = w.astype(np.float64).reshape(group, oc // group, (c // group) * taps)
        y = np.matmul(filters[None], columns)  # [n, group, oc / group, cells]
        return y.reshape(n, oc, *out_spatial).astype(x.dtype)

    return compute
