"""TRANSPOSE_CONV, float32 and int8 (and CONV_3D, float32, at the end) (per-channel weights, optional bias from version 3).

Inputs: the output shape (a constant int32 [4]), the weights [C_out, KH, KW, C_in], the input
[N, H, W, C_in] and an optional bias. Each input pixel's contribution, x[n, y, x, :] · W, lands
at output rows y · stride − pad_top + ky (and columns likewise), as the reference kernel's
scatter loop; here one matrix product gives every contribution, [N·H·W, C_in] × [C_in,
KH·KW·C_out], and KH·KW strided slice additions place them. The padding is TFLite's
ComputePaddingHeightWidth for a convolution from the output shape back to the input.

Float input with int8 weights (dynamic range) quantizes each image symmetrically (scale
max|x| / 127, as LiteRT's hybrid kernel), sums q_x · q_w exactly and scales the sum by
s_x · s_w[c] in float32, then adds the bias.

int8 sums (q_in − zp_in) · q_w exactly (in float64 products of integers far below 2^53, or
int64), adds the bias, and requantizes per output channel with s_in · s_w[c] / s_out.
"""

from __future__ import annotations

import numpy as np

from rill.mobile import threads
from rill.mobile.kernels.array_ops import _int_vector
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import (
    apply_float_activation,
    float_activation,
    out_size,
    pad_before,
    quantized_activation,
)
from rill.mobile.kernels.hybrid import quantize_rows
from rill.mobile.kernels.int16 import _stage as _stage16
from rill.mobile.quant import Requantizer

__all__ = ["TransposeConv", "Conv3D"]


@register("TRANSPOSE_CONV", max_version=4)
class TransposeConv(Kernel):
    def prepare(self, inputs, outputs):
        if len(inputs) < 3 or None in inputs[:3]:
            raise self.fail("needs output shape, weights and input")
        shape_t, w, x = inputs[:3]
        bias = inputs[3] if len(inputs) > 3 else None
        oshape = _int_vector(self, shape_t, "output shape")
        wdata = self.expect_const(w, "weights")
        if len(x.shape) != 4 or len(w.shape) != 4 or len(oshape) != 4:
            raise self.fail(f"needs 4-D input {x}, weights {w} and output shape {oshape}")
        n, h, wd, cin = x.shape
        cout, kh, kw, wcin = w.shape
        if wcin != cin or oshape[0] != n or oshape[3] != cout:
            raise self.fail(f"weights {w} do not fit input {x} and output shape {oshape}")
        sh, sw = int(self.options.get("stride_h", 1)), int(self.options.get("stride_w", 1))
        padding = int(self.options.get("padding", 0))
        oh, ow = oshape[1], oshape[2]
        # The forward convolution maps [oh, ow] to [h, w]; its padding is ours.
        if out_size(padding, oh, kh, sh) != h or out_size(padding, ow, kw, sw) != wd:
            raise self.fail(f"output shape {oshape} does not give input {x} under a forward "
                            f"convolution with stride {sh}x{sw}")  # fmt: skip
        self.pt, _ = pad_before(oh, kh, sh, 1, h)
        self.pl, _ = pad_before(ow, kw, sw, 1, wd)
        self.geom = (n, h, wd, cin, cout, kh, kw, sh, sw, oh, ow)
        act = self.options.get("fused_activation_function", 0)
        out = outputs[0]
        self.int8 = x.dtype == np.int8
        # [C_in, KH·KW·C_out]: column (ky, kx, c) is W[c, ky, kx, :].
        wmat = wdata.transpose(3, 1, 2, 0).reshape(cin, kh * kw * cout)
        bdata = None if bias is None else self.expect_const(bias, "bias")
        self.hybrid = x.dtype == np.float32 and w.dtype == np.int8
        self.i16 = None
        if x.dtype == np.int16:  # 16x8, as CONV_2D's (kernels/int16.py)
            self.expect_dtype(w, [np.int8], "weights")
            self.i16 = _stage16(self, x, w, out, cout, act)
            self.w = wmat.astype(np.float64)
            self.bias = None if bdata is None else bdata.astype(np.int64)
        elif self.hybrid:  # dynamic range: LiteRT's hybrid arithmetic, see the module docstring
            self.expect_quantized(w, per_channel_ok=True)
            self.scales = np.broadcast_to(w.quant.scale.astype(np.float32), (cout,)).copy()
            self.lo, self.hi = float_activation(self, act)
            self.w = wmat.astype(np.float64)
            self.bias = None if bdata is None else bdata.astype(np.float32)
        elif self.int8:
            self.expect_dtype(w, [np.int8], "weights")
            for t in (x, out):
                self.expect_quantized(t)
            self.expect_quantized(w, per_channel_ok=True)
            s_w = np.broadcast_to(w.quant.scale.astype(np.float64), (cout,))
            mult = np.float64(np.float32(x.scale)) * s_w / np.float64(np.float32(out.scale))
            lo, hi = quantized_activation(self, act, out)
            self.requant = Requantizer(mult, out.zero_point, lo, hi)
            self.zp_in = x.zero_point
            bound = 256 * np.abs(wdata.astype(np.int64)).sum()
            self.dtype = np.float64 if bound < 2**53 else np.int64
            self.w = wmat.astype(self.dtype)
            self.bias = None if bdata is None else bdata.astype(np.int64)
        else:
            self.expect_dtype(x, [np.float32])
            self.lo, self.hi = float_activation(self, act)
            self.w = wmat.astype(np.float32)
            self.bias = None if bdata is None else bdata.astype(np.float32)
        return [tuple(oshape)]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[2], outputs[0]
        n, h, wd, cin, cout, kh, kw, sh, sw, oh, ow = self.geom
        pt, pl, wmat, bias = self.pt, self.pl, self.w, self.bias
        ph = max((h - 1) * sh + kh, pt + oh)
        pw = max((wd - 1) * sw + kw, pl + ow)
        integer = self.int8 or self.i16 is not None
        acc_dtype = np.int64 if integer else np.float64 if self.hybrid else np.float32
        buf = np.zeros((n, ph, pw, cout), acc_dtype)
        window = buf[:, pt : pt + oh, pl : pl + ow]
        int8 = self.int8

        def scatter(cols):
            buf.fill(0)
            cols = cols.reshape(n, h, wd, kh, kw, cout)
            for ky in range(kh):
                for kx in range(kw):
                    buf[:, ky : ky + (h - 1) * sh + 1 : sh, kx : kx + (wd - 1) * sw + 1 : sw] += (
                        cols[:, :, :, ky, kx])  # fmt: skip

        if self.i16 is not None:
            stage = self.i16

            def run_int16():
                scatter((x.reshape(-1, cin).astype(np.float64) @ wmat).astype(np.int64))
                acc = np.array(window)
                if bias is not None:
                    acc += bias
                stage(acc.reshape(-1, cout), out.reshape(-1, cout))

            return run_int16
        if self.hybrid:
            lo, hi, scales = self.lo, self.hi, self.scales
            f32 = np.float32

            def run_hybrid():
                q, sf, _ = quantize_rows(x.reshape(n, -1), True)
                scatter(q.reshape(-1, cin) @ wmat)
                mul = (sf[:, None] * scales[None, :]).astype(f32)[:, None, None, :]
                v = (window.astype(f32) * mul).astype(f32)
                if bias is not None:
                    v = v + bias
                np.copyto(out, v)
                apply_float_activation(out, lo, hi)

            return run_hybrid
        if not int8:
            lo, hi = self.lo, self.hi

            def run():
                scatter(threads.matmul(x.reshape(-1, cin), wmat))
                v = window if bias is None else window + bias
                np.copyto(out, v)
                apply_float_activation(out, lo, hi)

            return run
        zp, requant, dtype = self.zp_in, self.requant, self.dtype

        def run_int8():
            xs = x.reshape(-1, cin).astype(dtype) - dtype(zp)
            scatter((xs @ wmat).astype(np.int64))
            acc = np.array(window)
            if bias is not None:
                acc += bias
            requant.apply(acc, np.empty_like(acc))
            np.copyto(out, acc, casting="unsafe")

        return run_int8


@register("CONV_3D", max_version=1)
class Conv3D(Kernel):
    """CONV_3D, float32: input [N, D, H, W, C_in], filter [KD, KH, KW, C_in, C_out], optional
    bias; TFLite's padding per spatial axis; one matrix product over strided windows."""

    def prepare(self, inputs, outputs):
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        self.expect_dtype(x, [np.float32])
        wdata = self.expect_const(w, "filter")
        if len(x.shape) != 5 or len(w.shape) != 5 or w.shape[3] != x.shape[4]:
            raise self.fail(f"input {x} must be NDHWC and filter {w} [KD, KH, KW, C_in, C_out]")
        o = self.options
        strides = [int(o.get(f"stride_{a}", 1)) for a in "dhw"]
        dil = [int(o.get(f"dilation_{a}_factor", 1) or 1) for a in "dhw"]
        padding = int(o.get("padding", 0))
        ks = w.shape[:3]
        outs, pads = [], []
        for size, k, s, d in zip(x.shape[1:4], ks, strides, dil):
            n_out = out_size(padding, size, k, s, d)
            outs.append(n_out)
            pads.append(pad_before(size, k, s, d, n_out))
        if min(outs) <= 0:
            raise self.fail(f"the filter {w} does not fit the input {x}")
        self.strides, self.dil, self.outs, self.pads = strides, dil, outs, pads
        self.w = np.ascontiguousarray(wdata.reshape(-1, w.shape[4]), np.float32)
        self.bias = None if bias is None else self.expect_const(bias, "bias").astype(np.float32)
        self.lo, self.hi = float_activation(self, o.get("fused_activation_function", 0))
        return [(x.shape[0], *outs, w.shape[4])]

    def bind(self, inputs, outputs, scratch):
        from numpy.lib.stride_tricks import as_strided

        x, out = inputs[0], outputs[0]
        kd, kh, kw = inputs[1].shape[:3]
        strides, dil, outs, pads = self.strides, self.dil, self.outs, self.pads
        wmat, bias, lo, hi = self.w, self.bias, self.lo, self.hi
        n, c = x.shape[0], x.shape[4]

        def run():
            xp = np.pad(x, ((0, 0), *pads, (0, 0)))
            s = xp.strides
            win = as_strided(xp, (n, *outs, kd, kh, kw, c),
                             (s[0], s[1] * strides[0], s[2] * strides[1], s[3] * strides[2],
                              s[1] * dil[0], s[2] * dil[1], s[3] * dil[2], s[4]),
                             writeable=False)  # fmt: skip
            v = threads.matmul(win.reshape(n * int(np.prod(outs)), -1), wmat)
            if bias is not None:
                v += bias
            np.copyto(out, v.reshape(out.shape))
            apply_float_activation(out, lo, hi)

        return run
