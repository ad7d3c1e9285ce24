"""FULLY_CONNECTED and BATCH_MATMUL, float32 and int8.

FULLY_CONNECTED flattens its input to [M, K] (K = the weights' second dimension) and computes
x · Wᵀ + bias; keep_num_dims keeps the input's leading dimensions. int8 uses the same exact
product as CONV_2D (common.QuantizedGemm) with per-tensor or per-channel weight scales, but
requantizes with a single rounding, (acc · M0 + 2^(30 − shift)) >> (31 − shift), which is what
LiteRT's reference kernel does (measured on tie-rich layers: the double rounding of CONV_2D
differs from it about once per thousand outputs).
BATCH_MATMUL multiplies the last two dimensions (adj_x / adj_y transpose them) and broadcasts
the others; int8 computes Σ (lhs − zp_lhs)(rhs − zp_rhs) exactly in float64 and requantizes.
Float inputs with int8 weights (dynamic-range models) run LiteRT's hybrid arithmetic
(kernels/hybrid.py).
"""

from __future__ import annotations

import numpy as np

from rill.mobile import threads
from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import (
    QuantizedGemm,
    apply_float_activation,
    float_activation,
    quantized_activation,
    requant_arrays,
)
from rill.mobile.kernels.hybrid import HybridBatchMatMul, HybridFullyConnected
from rill.mobile.kernels.int16 import Int16Stage, int16_fully_connected
from rill.mobile.quant import Requantizer

__all__ = ["FullyConnected", "BatchMatMul"]


def _conv_multiplier(x, w, out) -> float:
    """GetQuantizedConvolutionMultipler: the product of the two scales is taken in float32
    before the division in double, as the reference kernels do for per-tensor weights."""
    return float(np.float64(np.float32(x.scale) * np.float32(w.scale)) / np.float64(out.scale))


@register("FULLY_CONNECTED", max_version=13)
class FullyConnected(Kernel):
    def prepare(self, inputs, outputs):
        x, w, b = (list(inputs) + [None])[:3]
        out = outputs[0]
        if x is None or w is None:
            raise self.fail("needs an input and weights")
        if self.options.get("weights_format", 0) != 0:
            raise self.fail("only the DEFAULT weights format is supported (not shuffled)")
        if len(w.shape) != 2:
            raise self.fail(f"weights {w} must be 2-D [units, input depth]")
        cout, k = w.shape
        size = int(np.prod(x.shape, dtype=np.int64))
        if k == 0 or size % k:
            raise self.fail(f"the input {x} cannot be flattened into rows of the weights' "
                            f"depth {k}")  # fmt: skip
        rows = size // k
        if self.options.get("keep_num_dims", False):
            if x.shape[-1] != k:
                raise self.fail(f"keep_num_dims needs the input's last dimension {x.shape[-1]} "
                                f"to equal the weights' depth {k}")  # fmt: skip
            out_shape = tuple(x.shape[:-1]) + (cout,)
        else:
            out_shape = (rows, cout)
        if b is not None and b.shape != (cout,):
            raise self.fail(f"bias {b} must have shape [{cout}]")
        wdata = self.expect_const(w, "weights")
        act = self.options.get("fused_activation_function", 0)
        self.rows, self.k = rows, k
        self.i16 = None
        if x.dtype == np.int16:  # 16x8: kernels/int16.py
            self.expect_dtype(w, [np.int8], "weights")
            self.i16 = int16_fully_connected(self, x, w, b, out, rows, k, act)
            return [out_shape]
        self.expect_dtype(x, [np.float32, np.int8])
        if x.dtype == np.float32:
            self.int8 = False
            self.expect_dtype(out, [np.float32], "output")
            self.bias = None if b is None else self.expect_const(b, "bias").astype(np.float32)
            self.lo, self.hi = float_activation(self, act)
            self.hybrid = None
            if w.dtype == np.int8:  # dynamic range: LiteRT's hybrid arithmetic
                self.expect_quantized(w, per_channel_ok=True)
                self.hybrid = HybridFullyConnected(self, w, self.bias, rows, k, self.lo, self.hi)
                return [out_shape]
            self.expect_dtype(w, [np.float32], "weights")
            self.w = np.ascontiguousarray(wdata.T, np.float32)
        else:
            self.int8 = True
            self.expect_dtype(w, [np.int8], "weights")
            self.expect_dtype(out, [np.int8], "output")
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.expect_quantized(w, per_channel_ok=True)
            if np.any(w.quant.zero_point != 0):
                raise self.fail(f"int8 weights {w} must be symmetric (zero point 0)")
            if w.quant.per_channel:
                if w.quant.quantized_dimension != 0 or w.quant.scale.size != cout:
                    raise self.fail(f"per-channel weights {w} must have {cout} scales along "
                                    "dimension 0")  # fmt: skip
                mult = (np.float64(x.scale) * w.quant.scale.astype(np.float64)
                        / np.float64(out.scale))  # fmt: skip
            else:
                mult = [_conv_multiplier(x, w, out)]
            bdata = None
            if b is not None:
                self.expect_dtype(b, [np.int32], "bias")
                bdata = self.expect_const(b, "bias")
            lo, hi = quantized_activation(self, act, out)
            self.multipliers = mult  # also read by rill.mobile.program_int8
            # LiteRT's reference FULLY_CONNECTED rounds once (unlike CONV_2D): measured, see
            # quant.py.
            self.gemm = QuantizedGemm(self, wdata.T, bdata, x.zero_point, rows, mult,
                                      out.zero_point, lo, hi, single_rounding=True)  # fmt: skip
        return [out_shape]

    def bind(self, inputs, outputs, scratch):
        if self.i16 is not None:
            return self.i16(inputs[0], outputs[0])
        if not self.int8 and self.hybrid is not None:
            return self.hybrid.bind(inputs[0], outputs[0])
        x2d = inputs[0].reshape(self.rows, self.k)
        out2d = outputs[0].reshape(self.rows, -1)
        if self.int8:
            fill, gemm = self.gemm.bind(scratch, out2d)

            def run():
                np.copyto(fill, x2d, casting="unsafe")
                gemm()

            return run
        w, bias, lo, hi = self.w, self.bias, self.lo, self.hi

        def run():
            threads.matmul(x2d, w, out=out2d)
            if bias is not None:
                np.add(out2d, bias, out=out2d)
            apply_float_activation(out2d, lo, hi)

        return run


@register("BATCH_MATMUL", max_version=4)
class BatchMatMul(Kernel):
    def prepare(self, inputs, outputs):
        if len(inputs) != 2 or None in inputs:
            raise self.fail("needs two inputs")
        lhs, rhs = inputs
        out = outputs[0]
        if len(lhs.shape) < 2 or len(rhs.shape) < 2:
            raise self.fail(f"inputs {lhs} and {rhs} must have rank >= 2")
        adj_x, adj_y = bool(self.options.get("adj_x")), bool(self.options.get("adj_y"))
        m, k1 = lhs.shape[-2:][::-1] if adj_x else lhs.shape[-2:]
        k2, n = rhs.shape[-2:][::-1] if adj_y else rhs.shape[-2:]
        if k1 != k2:
            raise self.fail(f"contracted dimensions differ: {k1} ({lhs}, adj_x={adj_x}) vs {k2} "
                            f"({rhs}, adj_y={adj_y})")  # fmt: skip
        try:
            batch = np.broadcast_shapes(tuple(lhs.shape[:-2]), tuple(rhs.shape[:-2]))
        except ValueError:
            raise self.fail(f"batch dimensions of {lhs} and {rhs} do not broadcast") from None
        self.adj = (adj_x, adj_y)
        self.expect_dtype(lhs, [np.float32, np.int8, np.int16])
        shape = tuple(batch) + (m, n)
        self.hybrid = self.i16 = None
        if lhs.dtype == np.int16:  # 16x16 → 16, the reduced multiplier (kernels/int16.py)
            self.expect_same_dtype(lhs, rhs)
            self.expect_same_dtype(lhs, out)
            for t in (lhs, rhs, out):
                self.expect_quantized(t)
            self.int8 = False
            self.i16 = Int16Stage([_conv_multiplier(lhs, rhs, out)], out.zero_point, -32768,
                                  32767)  # fmt: skip
            return [shape]
        if lhs.dtype == np.float32 and rhs.dtype == np.int8:  # dynamic range
            self.expect_const(rhs, "int8 right-hand side of a hybrid BATCH_MATMUL")
            self.expect_quantized(rhs)
            self.int8 = False
            self.hybrid = HybridBatchMatMul(self, rhs, adj_y)
            return [shape]
        self.expect_same_dtype(lhs, rhs)
        self.expect_same_dtype(lhs, out)
        self.int8 = lhs.dtype == np.int8
        if self.int8:
            for t in (lhs, rhs, out):
                self.expect_quantized(t)
            self.zps = (float(lhs.zero_point), float(rhs.zero_point))
            mult = _conv_multiplier(lhs, rhs, out)
            self.requant = Requantizer([mult], out.zero_point)
            # Σ (l − zl)(r − zr) over K terms is below K · 256²: exact in float32 while that
            # stays under 2^24, in float64 otherwise (far below 2^53 for any realistic K).
            self.compiled = jit.loops()
            ftype = np.float32 if self.compiled is not None and k1 * 256**2 < 2**24 else np.float64
            self.lf = self.scratch(lhs.shape, ftype)
            self.rf = self.scratch(rhs.shape, ftype)
            self.acc_f = self.scratch(shape, ftype)
            if self.compiled is not None:  # the Requantizer's integers, one loop
                self.consts = requant_arrays([mult], out.zero_point, n)
            else:
                self.acc = self.scratch(shape, np.int64)
                self.tmp = self.scratch(shape, np.int64)
        return [shape]

    def bind(self, inputs, outputs, scratch):
        adj_x, adj_y = self.adj
        out = outputs[0]
        if self.i16 is not None:
            stage = self.i16
            a16 = inputs[0].swapaxes(-1, -2) if adj_x else inputs[0]
            b16 = inputs[1].swapaxes(-1, -2) if adj_y else inputs[1]

            def run16():
                # |Σ a·b| <= K · 2^30: exact in float64 for any realistic K (< 2^23)
                acc = np.matmul(a16.astype(np.float64), b16.astype(np.float64))
                stage(acc.astype(np.int64), out)

            return run16
        if self.hybrid is not None:
            return self.hybrid.bind(inputs[0], out, adj_x)
        if not self.int8:
            a = inputs[0].swapaxes(-1, -2) if adj_x else inputs[0]
            b = inputs[1].swapaxes(-1, -2) if adj_y else inputs[1]

            def run():
                threads.matmul(a, b, out=out)

            return run
        lhs, rhs = inputs
        lf, rf, acc_f = scratch[self.lf], scratch[self.rf], scratch[self.acc_f]
        a = lf.swapaxes(-1, -2) if adj_x else lf
        b = rf.swapaxes(-1, -2) if adj_y else rf
        zl, zr = self.zps
        if (self.compiled is not None and lhs.shape[:-2] == rhs.shape[:-2]
                and lhs.shape[-1] * 255**2 < 2**31):  # fmt: skip
            # Same batch dimensions: the products, int32 sums (exact) and stage in one loop.
            loop, (m0, right, add, negfix) = self.compiled.bmm_int8, self.consts
            l3 = lhs.reshape((-1,) + lhs.shape[-2:])
            r3 = rhs.reshape((-1,) + rhs.shape[-2:])
            l3 = l3.swapaxes(-1, -2) if adj_x else l3
            r3 = r3.swapaxes(-1, -2) if adj_y else r3
            o3 = out.reshape((-1,) + out.shape[-2:])
            izl, izr = int(zl), int(zr)
            return lambda: loop(l3, r3, izl, izr, m0, right, add, negfix, o3)
        if self.compiled is not None:
            loop, (m0, right, add, negfix) = self.compiled.requant_rows, self.consts
            acc2, out2 = acc_f.reshape(-1, out.shape[-1]), out.reshape(-1, out.shape[-1])

            def run_compiled():
                np.subtract(lhs, zl, out=lf)
                np.subtract(rhs, zr, out=rf)
                np.matmul(a, b, out=acc_f)
                loop(acc2, m0, right, add, negfix, -128, 127, out2)

            return run_compiled
        acc, tmp, requant = scratch[self.acc], scratch[self.tmp], self.requant

        def run():
            # Σ (l − zl)(r − zr) ≤ K · 255² stays far below 2^53: float64 BLAS is exact.
            np.subtract(lhs, zl, out=lf)
            np.subtract(rhs, zr, out=rf)
            np.matmul(a, b, out=acc_f)
            np.copyto(acc, acc_f, casting="unsafe")
            requant.apply(acc, tmp)
            np.copyto(out, acc, casting="unsafe")

        return run
