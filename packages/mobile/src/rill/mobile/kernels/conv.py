"""CONV_2D and DEPTHWISE_CONV_2D, float32 and int8 (per-channel or per-tensor weights).

Both run on a padded copy of the input that the kernel owns (its border, 0 or the input zero
point, is written once in prepare) and on strided patch views built once in bind. CONV_2D is an
im2col product (one BLAS call, exact for int8, see common.QuantizedGemm); DEPTHWISE_CONV_2D is a
sum of broadcast products, one per window tap, over strided views of the padded input. int8 results follow the reference kernels: the
accumulator Σ (q_in − zp_in) · q_w + bias, MultiplyByQuantizedMultiplier with the per-channel
multiplier s_in · s_w[c] / s_out (computed in double), + zp_out, clamped to the fused
activation's range. Float inputs with int8 filters (dynamic-range models) run LiteRT's hybrid
arithmetic (kernels/hybrid.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rill.mobile import threads
from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, TensorSpec, register
from rill.mobile.kernels.common import (
    PADDING_SAME,
    PADDING_VALID,
    OutputStage,
    QuantizedGemm,
    activation_mode,
    apply_float_activation,
    float_activation,
    out_size,
    pad_before,
    patches,
    quantized_activation,
    requant_arrays,
)
from rill.mobile.kernels.hybrid import HybridConv, HybridDepthwise
from rill.mobile.kernels.int16 import int16_conv, int16_depthwise

__all__ = ["Conv2D", "DepthwiseConv2D"]


def _per_channel_multipliers(x: TensorSpec, w: TensorSpec, out: TensorSpec, channels: int):
    ws = np.asarray(w.quant.scale, np.float64)
    if ws.size == 1:
        ws = np.repeat(ws, channels)
    return np.float64(x.scale) * ws / np.float64(out.scale)


class _ConvBase(Kernel):
    """Geometry shared by both convolutions: padding, output size, the padded input copy."""

    def _geometry(self, x: TensorSpec, kh: int, kw: int):
        o = self.options
        padding = o.get("padding", PADDING_SAME)
        if padding not in (PADDING_SAME, PADDING_VALID):
            raise self.fail(f"unknown padding {padding}")
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        dh, dw = o.get("dilation_h_factor", 1) or 1, o.get("dilation_w_factor", 1) or 1
        if min(sh, sw, dh, dw) < 1:
            raise self.fail(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be >= 1")
        n, h, w, c = x.shape
        oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
        if oh <= 0 or ow <= 0:
            raise self.fail(f"a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the {h}x{w} "
                            f"input {x} with VALID padding")  # fmt: skip
        self.geom = (n, h, w, c, oh, ow, kh, kw, sh, sw, dh, dw)
        self.pads = (pad_before(h, kh, sh, dh, oh), pad_before(w, kw, sw, dw, ow))
        return n, oh, ow

    def _padded(self, dtype, fill):
        """A persistent padded input buffer, or None when no padding is needed."""
        n, h, w, c = self.geom[:4]
        (pt, pb), (pl, pr) = self.pads
        if pt == pb == pl == pr == 0:
            return None
        return self.persistent((n, h + pt + pb, w + pl + pr, c), dtype, fill)

    def _source(self, x: np.ndarray, padded: np.ndarray | None):
        """(interior view to copy the input into or None, the array the windows read)."""
        if padded is None:
            return None, x
        n, h, w, c = self.geom[:4]
        (pt, _), (pl, _) = self.pads
        return padded[:, pt : pt + h, pl : pl + w, :], padded

    def _windows(self, src: np.ndarray) -> np.ndarray:
        n, h, w, c, oh, ow, kh, kw, sh, sw, dh, dw = self.geom
        return patches(src, oh, ow, kh, kw, sh, sw, dh, dw)


@register("CONV_2D", max_version=8)
class Conv2D(_ConvBase):
    def prepare(self, inputs, outputs):
        x, w, b = (list(inputs) + [None])[:3]
        out = outputs[0]
        if x is None or w is None:
            raise self.fail("needs an input and a filter")
        if len(x.shape) != 4 or len(w.shape) != 4:
            raise self.fail(f"input {x} and filter {w} must be 4-D (NHWC and OHWI)")
        cout, kh, kw, cin = w.shape
        if b is not None and b.shape != (cout,):
            raise self.fail(f"bias {b} must have shape [{cout}]")
        wdata = self.expect_const(w, "filter")
        self.grouped = None
        if cin != x.shape[3]:
            groups = x.shape[3] // cin if cin and x.shape[3] % cin == 0 else 0
            if not groups or cout % groups:
                raise self.fail(f"the filter {w} takes {cin} input channels per group: the "
                                f"input {x}'s {x.shape[3]} channels and the filter's {cout} "
                                "output channels must both be whole numbers of groups")  # fmt: skip
            self.grouped = _Grouped(self, x, w, b, out, groups)
            return self.grouped.shapes
        n, oh, ow = self._geometry(x, kh, kw)
        rows, k = n * oh * ow, kh * kw * cin
        act = self.options.get("fused_activation_function", 0)
        self.i16 = None
        if x.dtype == np.int16:  # 16x8: kernels/int16.py
            self.expect_dtype(w, [np.int8], "filter")
            self.i16 = int16_conv(self, x, w, b, out, self.geom, self.pads, act)
            return [(n, oh, ow, cout)]
        self.expect_dtype(x, [np.float32, np.int8])
        # im2col is filled fastest as [K, M] when there are few channels (long runs along the
        # output width) and as [M, K] otherwise (runs of C contiguous values).
        self.transposed = cin < 8
        if x.dtype == np.float32:
            self.int8 = False
            self.expect_dtype(out, [np.float32], "output")
            bdata = None if b is None else self.expect_const(b, "bias").astype(np.float32)
            self.lo, self.hi = float_activation(self, act)
            self.hybrid = None
            if w.dtype == np.int8:  # dynamic range: LiteRT's hybrid arithmetic
                self.expect_quantized(w, per_channel_ok=True)
                self.hybrid = HybridConv(self, w, bdata, self.geom, self.pads, self.lo, self.hi)
                return [(n, oh, ow, cout)]
            self.expect_dtype(w, [np.float32], "filter")
            wk = np.ascontiguousarray(wdata.reshape(cout, k).T, np.float32)
            # A 1x1 window at stride 1 without padding reads each input pixel once: the input
            # itself is the im2col matrix (no copy); the bias is added after the product.
            self.direct = (kh == kw == 1 and self.geom[8:10] == (1, 1)
                           and self.pads == ((0, 0), (0, 0)))  # fmt: skip
            if self.direct:
                self.w, self.bias = wk, bdata
                return [(n, oh, ow, cout)]
            if bdata is not None:
                wk = np.vstack([wk, bdata[None, :]])
            self.w = wk
            kk = wk.shape[0]
            self.cols = self.scratch((kk, rows) if self.transposed else (rows, kk), np.float32)
            self.padded = self._padded(np.float32, 0.0)
        else:
            self.int8 = True
            self.expect_dtype(w, [np.int8], "filter")
            self.expect_dtype(out, [np.int8], "output")
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.expect_quantized(w, per_channel_ok=True)
            if w.quant.per_channel and (w.quant.quantized_dimension != 0
                                        or w.quant.scale.size != cout):  # fmt: skip
                raise self.fail(f"per-channel filter {w} must have {cout} scales along "
                                "dimension 0")  # fmt: skip
            if np.any(w.quant.zero_point != 0):
                raise self.fail(f"int8 filter {w} must be symmetric (zero point 0)")
            bdata = None
            if b is not None:
                self.expect_dtype(b, [np.int32], "bias")
                bdata = self.expect_const(b, "bias")
            lo, hi = quantized_activation(self, act, out)
            self.gemm = QuantizedGemm(self, wdata.reshape(cout, k).T, bdata, x.zero_point, rows,
                                      _per_channel_multipliers(x, w, out, cout),
                                      out.zero_point, lo, hi, self.transposed)  # fmt: skip
            self.padded = self._padded(np.int8, x.zero_point)
        self.k = k
        return [(n, oh, ow, cout)]

    def bind(self, inputs, outputs, scratch):
        if self.grouped is not None:
            return self.grouped.bind(inputs, outputs, scratch)
        if self.i16 is not None:
            return self.i16(inputs[0], outputs[0])
        if not self.int8 and self.hybrid is not None:
            return self.hybrid.bind(inputs[0], outputs[0])
        n, h, w, c, oh, ow, kh, kw = self.geom[:8]
        x = inputs[0]
        if not self.int8 and self.direct:
            return self._bind_direct(x, outputs[0])
        interior, src = self._source(x, self.padded)
        windows = self._windows(src)
        if self.transposed:
            windows = windows.transpose(3, 4, 5, 0, 1, 2)
        out2d = outputs[0].reshape(n * oh * ow, -1)
        if self.int8:
            fill, gemm = self.gemm.bind(scratch, out2d)
        else:
            cols, k = scratch[self.cols], self.k
            fill, ones = (cols[:k], cols[k:]) if self.transposed else (cols[:, :k], cols[:, k:])
        fill = fill.reshape(windows.shape)
        if self.int8:

            def run():
                if interior is not None:
                    np.copyto(interior, x)
                np.copyto(fill, windows, casting="unsafe")
                gemm()

            return run
        a = cols.T if self.transposed else cols
        wk, lo, hi = self.w, self.lo, self.hi

        def run():
            if interior is not None:
                np.copyto(interior, x)
            np.copyto(fill, windows)
            ones.fill(1.0)  # the bias row (absent when the filter has no bias: an empty view)
            threads.matmul(a, wk, out=out2d)
            apply_float_activation(out2d, lo, hi)

        return run

    def _bind_direct(self, x, out):
        n, h, w, c = self.geom[:4]
        x2d, out2d = x.reshape(n * h * w, c), out.reshape(n * h * w, -1)
        wk, bias, lo, hi = self.w, self.bias, self.lo, self.hi

        def run():
            threads.matmul(x2d, wk, out=out2d)
            if bias is not None:
                np.add(out2d, bias, out=out2d)
            apply_float_activation(out2d, lo, hi)

        return run


def _quant_slice(q, lo: int, hi: int, axis: int = 0):
    """A per-channel quantization's channels [lo, hi) (per-tensor ones as they are)."""
    if q is None or not q.per_channel:
        return q
    return dataclasses.replace(q, scale=q.scale[lo:hi], zero_point=q.zero_point[lo:hi],
                               quantized_dimension=axis)  # fmt: skip


def _nested(kernel: Kernel, cls):
    """A kernel of class `cls` for `kernel`'s operator that requests its scratch buffers as
    `kernel`'s own (the interpreter plans one list per operator)."""
    sub = cls(kernel.op)
    sub.interp, sub.eager = kernel.interp, kernel.eager
    sub._scratch = kernel._scratch
    return sub


class _Grouped:
    """CONV_2D with a filter of C_in / groups input channels (TensorFlow's Conv2D with groups,
    LiteRT's grouped convolution): output channel o reads input channels g·C_g .. (g+1)·C_g − 1
    of its group g = o // (C_out / groups), as LiteRT's reference kernels compute it.

    - One input channel per group (ConvNeXt's 7×7 layers) is a depthwise convolution (output
      channel c·m + j reads input channel c): the filter [C_out, KH, KW, 1] is run as the
      DEPTHWISE_CONV_2D filter [1, KH, KW, C_out], float32, int8 (the same integer sums and
      per-channel requantization: the same bits) and int16;
    - dynamic-range (float input, int8 filter) runs LiteRT's hybrid arithmetic with the image
      quantized as a whole, one product per group (HybridConv's groups);
    - otherwise each group is a CONV_2D of its own (a contiguous copy of its input channels in,
      its output channels copied out)."""

    def __init__(self, kernel, x, w, b, out, groups: int):
        cout, kh, kw, cin = w.shape
        wdata = w.data
        self.groups, self.cin, self.cog = groups, cin, cout // groups
        self.mode = "groups"
        if x.dtype == np.float32 and w.dtype == np.int8:
            kernel.expect_quantized(w, per_channel_ok=True)
            n, oh, ow = kernel._geometry(x, kh, kw)
            lo, hi = float_activation(kernel, kernel.options.get("fused_activation_function", 0))
            bdata = None if b is None else kernel.expect_const(b, "bias").astype(np.float32)
            self.mode = "hybrid"
            self.hybrid = HybridConv(kernel, w, bdata, kernel.geom, kernel.pads, lo, hi, groups)
            self.shapes = [(n, oh, ow, cout)]
            return
        if cin == 1:
            self.mode = "depthwise"
            self.sub = _nested(kernel, DepthwiseConv2D)
            wq = w.quant
            if wq is not None and wq.per_channel:
                wq = dataclasses.replace(wq, quantized_dimension=3)
            dw = dataclasses.replace(w, shape=(1, kh, kw, cout), quant=wq,
                                     data=np.ascontiguousarray(wdata.transpose(3, 1, 2, 0)))  # fmt: skip
            self.shapes = self.sub.prepare([x, dw, b], [out])
            kernel.persistent_bytes += self.sub.persistent_bytes
            return
        n, h, wd, _ = x.shape
        cog = self.cog
        self.subs = []
        shapes = None
        for g in range(groups):
            sub = _nested(kernel, Conv2D)
            xs = dataclasses.replace(x, shape=(n, h, wd, cin), data=None if x.data is None
                                     else np.ascontiguousarray(x.data[..., g * cin:(g + 1) * cin]))  # fmt: skip
            ws = dataclasses.replace(w, shape=(cog, kh, kw, cin),
                                     data=wdata[g * cog:(g + 1) * cog],
                                     quant=_quant_slice(w.quant, g * cog, (g + 1) * cog))  # fmt: skip
            bs = None if b is None else dataclasses.replace(
                b, shape=(cog,), data=None if b.data is None else b.data[g * cog:(g + 1) * cog],
                quant=_quant_slice(b.quant, g * cog, (g + 1) * cog))  # fmt: skip
            os_ = dataclasses.replace(out, shape=None if out.shape is None
                                      else tuple(out.shape[:3]) + (cog,))  # fmt: skip
            shapes = sub.prepare([xs, ws, bs], [os_])
            kernel.persistent_bytes += sub.persistent_bytes
            self.subs.append(sub)
        n_, oh, ow, _ = shapes[0]
        self.shapes = [(n_, oh, ow, cout)]
        self.x_group = kernel.scratch((n, h, wd, cin), x.dtype)
        self.y_group = kernel.scratch((n_, oh, ow, cog), out.dtype or x.dtype)

    def bind(self, inputs, outputs, scratch):
        if self.mode == "hybrid":
            return self.hybrid.bind(inputs[0], outputs[0])
        if self.mode == "depthwise":
            return self.sub.bind(inputs, outputs, scratch)
        x, out = inputs[0], outputs[0]
        xg, yg = scratch[self.x_group], scratch[self.y_group]
        cin, cog = self.cin, self.cog
        steps = []
        for g, sub in enumerate(self.subs):
            run = sub.bind([xg] + list(inputs[1:]), [yg], scratch)
            steps.append((x[..., g * cin : (g + 1) * cin], run, out[..., g * cog : (g + 1) * cog]))

        def run():
            for src, compute, dst in steps:
                np.copyto(xg, src)
                compute()
                np.copyto(dst, yg)

        return run


@register("DEPTHWISE_CONV_2D", max_version=7)
class DepthwiseConv2D(_ConvBase):
    def prepare(self, inputs, outputs):
        x, w, b = (list(inputs) + [None])[:3]
        out = outputs[0]
        if x is None or w is None:
            raise self.fail("needs an input and a filter")
        if len(x.shape) != 4 or len(w.shape) != 4 or w.shape[0] != 1:
            raise self.fail(f"input {x} must be NHWC and filter {w} [1, KH, KW, C·multiplier]")
        _, kh, kw, cout = w.shape
        cin = x.shape[3]
        if cin == 0 or cout % cin:
            raise self.fail(f"filter {w} has {cout} output channels, not a multiple of the "
                            f"input's {cin}")  # fmt: skip
        mult = cout // cin
        dm = self.options.get("depth_multiplier", 0)
        if dm and dm != mult:
            raise self.fail(f"depth_multiplier {dm} disagrees with the filter's {mult}")
        if b is not None and b.shape != (cout,):
            raise self.fail(f"bias {b} must have shape [{cout}]")
        wdata = self.expect_const(w, "filter")
        n, oh, ow = self._geometry(x, kh, kw)
        rows, taps = n * oh * ow, kh * kw
        act = self.options.get("fused_activation_function", 0)
        self.mult = mult
        self.i16 = None
        if x.dtype == np.int16:  # 16x8: kernels/int16.py
            self.expect_dtype(w, [np.int8], "filter")
            self.i16 = int16_depthwise(self, x, w, b, out, self.geom, self.pads, mult, act)
            return [(n, oh, ow, cout)]
        self.expect_dtype(x, [np.float32, np.int8])
        if x.dtype == np.float32:
            self.int8 = False
            self.expect_dtype(out, [np.float32], "output")
            self.lo, self.hi = float_activation(self, act)
            self.hybrid = None
            if w.dtype == np.int8:  # dynamic range: LiteRT's hybrid arithmetic
                self.expect_quantized(w, per_channel_ok=True)
                bdata = None if b is None else self.expect_const(b, "bias")
                self.hybrid = HybridDepthwise(self, w, bdata, self.geom, self.pads, mult,
                                              self.lo, self.hi)  # fmt: skip
                return [(n, oh, ow, cout)]
            self.expect_dtype(w, [np.float32], "filter")
            ctype = np.dtype(np.float32)
            bias = (np.zeros(cout, np.float32) if b is None
                    else self.expect_const(b, "bias").astype(np.float32))  # fmt: skip
            self.padded = self._padded(np.float32, 0.0)
            self.compiled = jit.loops()
            if self.compiled is not None:  # the same float32 operations, compiled
                self.jit_args = (np.ascontiguousarray(wdata.reshape(kh, kw, cout), np.float32),
                                 np.ascontiguousarray(bias, np.float32),
                                 activation_mode(self.lo, self.hi),
                                 np.float32(self.lo), np.float32(self.hi))  # fmt: skip
                return [(n, oh, ow, cout)]
        else:
            self.int8 = True
            self.expect_dtype(w, [np.int8], "filter")
            self.expect_dtype(out, [np.int8], "output")
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.expect_quantized(w, per_channel_ok=True)
            if w.quant.per_channel and (w.quant.quantized_dimension != 3
                                        or w.quant.scale.size != cout):  # fmt: skip
                raise self.fail(f"per-channel filter {w} must have {cout} scales along "
                                "dimension 3")  # fmt: skip
            if np.any(w.quant.zero_point != 0):
                raise self.fail(f"int8 filter {w} must be symmetric (zero point 0)")
            braw = np.zeros(cout, np.int64)
            if b is not None:
                self.expect_dtype(b, [np.int32], "bias")
                braw = self.expect_const(b, "bias").astype(np.int64)
            self.padded = self._padded(np.int8, x.zero_point)
            self.compiled = jit.loops()
            w64 = wdata.reshape(kh, kw, cout).astype(np.int64)
            if np.max(128 * np.abs(w64).sum(axis=(0, 1)) + np.abs(braw), initial=0) >= 2**31:
                self.compiled = None  # int32 could overflow: the numpy path's int64
            if self.compiled is not None:  # the reference arithmetic itself, compiled
                lo, hi = quantized_activation(self, act, out)
                mults = _per_channel_multipliers(x, w, out, cout)
                self.jit_args = (np.ascontiguousarray(w64, np.int32), braw.astype(np.int32),
                                 np.int32(x.zero_point),
                                 *requant_arrays(mults, out.zero_point, cout), int(lo), int(hi))  # fmt: skip
                return [(n, oh, ow, cout)]
            wint = wdata.reshape(taps, cout).astype(np.int64)
            bias = braw - x.zero_point * wint.sum(axis=0)
            bound = 128 * np.abs(wint).sum(axis=0) + np.abs(bias)
            lo, hi = quantized_activation(self, act, out)
            self.stage = OutputStage(self, _per_channel_multipliers(x, w, out, cout), bound,
                                     out.zero_point, lo, hi, (rows, cout))  # fmt: skip
            ctype = self.stage.acc_dtype
            if self.stage.fold is not None:  # the multiplier rides on the weights, exactly
                wdata = wint * self.stage.fold
                bias = bias * self.stage.fold + self.stage.bias_offset
        self.compiled = None
        self.ctype = ctype
        # w[tap, ic, m]: output channel ic·mult + m, as the [C·mult] filter axis is laid out.
        self.w = wdata.reshape(taps, cin, mult).astype(ctype)
        self.bias = np.asarray(bias).reshape(cin, mult).astype(ctype)
        self.tmp = self.scratch((n, oh, ow, cin, mult), ctype)
        if self.int8:
            self.acc_f = self.scratch((n, oh, ow, cin, mult), ctype)
        return [(n, oh, ow, cout)]

    def bind(self, inputs, outputs, scratch):
        if self.i16 is not None:
            return self.i16(inputs[0], outputs[0])
        if not self.int8 and self.hybrid is not None:
            return self.hybrid.bind(inputs[0], outputs[0])
        if self.compiled is not None:
            return self._bind_compiled(inputs[0], outputs[0])
        n, h, w, c, oh, ow, kh, kw = self.geom[:8]
        x = inputs[0]
        interior, src = self._source(x, self.padded)
        windows = self._windows(src)
        wk, bias, mult = self.w, self.bias, self.mult
        # One strided view [N, OH, OW, C, 1] of the input per tap: the convolution is a sum of
        # KH·KW broadcast products, no window copy (exact for int8: integers in float64).
        taps = [windows[:, :, :, ky, kx, :, None] for ky in range(kh) for kx in range(kw)]
        tmp = scratch[self.tmp]
        out = outputs[0]
        out5 = out.reshape(n, oh, ow, c, mult)
        rows = n * oh * ow
        acc = scratch[self.acc_f] if self.int8 else out5

        def accumulate():
            if interior is not None:
                np.copyto(interior, x)
            np.multiply(taps[0], wk[0], out=acc)
            for t in range(1, len(taps)):
                np.multiply(taps[t], wk[t], out=tmp)
                np.add(acc, tmp, out=acc)
            np.add(acc, bias, out=acc)

        if self.int8:
            acc2d = acc.reshape(rows, -1)
            stage = self.stage.bind(scratch)
            out2d = out.reshape(rows, -1)

            def run():
                accumulate()
                stage(acc2d, out2d)

            return run
        lo, hi = self.lo, self.hi

        def run():
            accumulate()
            apply_float_activation(out5, lo, hi)

        return run

    def _bind_compiled(self, x, out):
        sh, sw, dh, dw = self.geom[8:]
        interior, src = self._source(x, self.padded)
        mult, args = self.mult, self.jit_args
        if self.int8:
            loop = self.compiled.depthwise_int8
            w, bias, zp, m0, right, add, negfix, lo, hi = args

            def run():
                if interior is not None:
                    np.copyto(interior, x)
                loop(src, w, bias, zp, sh, sw, dh, dw, mult, m0, right, add, negfix, lo, hi, out)

            return run
        loop = self.compiled.depthwise_float
        w, bias, mode, lo, hi = args

        def run():
            if interior is not None:
                np.copyto(interior, x)
            loop(src, w, bias, sh, sw, dh, dw, mult, mode, lo, hi, out)

        return run
