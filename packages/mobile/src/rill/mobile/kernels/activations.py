"""RELU, RELU6, LEAKY_RELU, LOGISTIC, TANH and SOFTMAX, float32 and int8.

The int8 element-wise activations are 256-entry tables computed in prepare (kernels/lut.py):
RELU, RELU6 and LEAKY_RELU with the reference kernels' integer arithmetic; LOGISTIC and TANH by
rounding (half away from zero) the float function of the dequantized input. int8 SOFTMAX takes
the exponentials of the 256 possible differences from the row maximum from a table too, and
rounds the normalized probabilities. LiteRT's reference kernels for these three compute in float
as well, as far as measured: the results agree exactly on every value tried (the guarantee the
tests hold to); its optimized kernels differ from both by one quantum on some values.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.jit import nan_cast
from rill.mobile.kernels.lut import table_from_int8, table_run
from rill.mobile.quant import (
    INT8_MAX,
    INT8_MIN,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    quantize_value,
)

__all__ = ["Relu", "Relu6", "LeakyRelu", "Logistic", "Tanh", "Softmax"]


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.trunc(v + np.copysign(0.5, v))


class _Unary(Kernel):
    """An element-wise operator with one input and an output of the same shape."""

    float_ok = True
    int16_ok = False  # RELU and RELU6 (int8_fn takes the int16 range then)

    def prepare(self, inputs, outputs):
        if not inputs or inputs[0] is None:
            raise self.fail("needs one input")
        x, out = inputs[0], outputs[0]
        self.expect_dtype(x, [np.float32, np.int8, *((np.int16,) if self.int16_ok else ())])
        self.expect_same_dtype(x, out)
        self.int8 = x.dtype == np.int8
        self.int16 = x.dtype == np.int16
        if self.int8:
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.table = table_from_int8(lambda q: self.int8_fn(q, x, out), np.int8)
        elif self.int16:  # the same arithmetic over the 65536 int16 values
            self.expect_quantized(x)
            self.expect_quantized(out)
            q = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16)
            self.table = np.clip(self.int8_fn(q.astype(np.int64), x, out, (-32768, 32767)),
                                 -32768, 32767).astype(np.int16)  # fmt: skip
        else:
            self.prepare_float(x)
        return [x.shape]

    def prepare_float(self, x) -> None:
        pass

    def int8_fn(self, q: np.ndarray, x, out) -> np.ndarray:
        raise NotImplementedError

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if self.int16 or self.int8:
            return table_run(self.table, x, out)
        return self.float_run(x, out)


def _requantize_clamped(q, x, out, lo_real: float | None, hi_real: float | None,
                        bounds=(INT8_MIN, INT8_MAX)):  # fmt: skip
    """QuantizedReluX: MBQM(q − zp_in, s_in / s_out) + zp_out, clamped to the quantized range."""
    qmin, qmax = bounds
    m0, shift = quantize_multiplier(float(np.float64(x.scale) / np.float64(out.scale)))
    v = multiply_by_quantized_multiplier(q - x.zero_point, m0, shift) + out.zero_point
    lo = qmin if lo_real is None else max(qmin, quantize_value(lo_real, out.scale,
                                                               out.zero_point))  # fmt: skip
    hi = qmax if hi_real is None else min(qmax, quantize_value(hi_real, out.scale,
                                                               out.zero_point))  # fmt: skip
    return np.clip(v, lo, hi)


@register("RELU", max_version=3)
class Relu(_Unary):
    int16_ok = True

    def int8_fn(self, q, x, out, bounds=(INT8_MIN, INT8_MAX)):
        return _requantize_clamped(q, x, out, 0.0, None, bounds)

    def float_run(self, x, out):
        return lambda: np.maximum(x, 0.0, out=out)


@register("RELU6", max_version=3)
class Relu6(_Unary):
    int16_ok = True

    def int8_fn(self, q, x, out, bounds=(INT8_MIN, INT8_MAX)):
        return _requantize_clamped(q, x, out, 0.0, 6.0, bounds)

    def float_run(self, x, out):
        return lambda: np.clip(x, 0.0, 6.0, out=out)


@register("LEAKY_RELU", max_version=2)
class LeakyRelu(_Unary):
    def int8_fn(self, q, x, out):
        alpha = np.float32(self.options.get("alpha", 0.2))
        s_in, s_out = np.float64(x.scale), np.float64(out.scale)
        m_id = quantize_multiplier(float(s_in / s_out))
        m_alpha = quantize_multiplier(float(s_in * np.float64(alpha) / s_out))
        v = q - x.zero_point
        pos = multiply_by_quantized_multiplier(v, *m_id)
        neg = multiply_by_quantized_multiplier(v, *m_alpha)
        return np.clip(np.where(v >= 0, pos, neg) + out.zero_point, INT8_MIN, INT8_MAX)

    def float_run(self, x, out):
        alpha = np.float32(self.options.get("alpha", 0.2))

        def run():
            np.copyto(out, x)
            np.multiply(x, alpha, out=out, where=x < 0)

        return run


def _float_table(kernel, q, x, out, fn):
    real = np.float32(x.scale) * (q - x.zero_point).astype(np.float32)
    with np.errstate(over="ignore"):
        y = fn(real.astype(np.float64))
    return np.clip(_round_half_away(y / np.float64(out.scale)) + out.zero_point,
                   INT8_MIN, INT8_MAX)  # fmt: skip


@register("LOGISTIC", max_version=3)
class Logistic(_Unary):
    def int8_fn(self, q, x, out):
        return _float_table(self, q, x, out, lambda v: 1.0 / (1.0 + np.exp(-v)))

    def float_run(self, x, out):
        hi, lo = np.float32(16.619047164916992188), np.float32(-9.0)

        def run():
            with np.errstate(over="ignore"):
                np.negative(x, out=out)
                np.exp(out, out=out)
                np.add(out, 1.0, out=out)
                np.divide(1.0, out, out=out)
            # The reference kernel's cut-offs: exactly 1 above hi, exp(x) below lo.
            np.copyto(out, 1.0, where=x > hi)
            small = x < lo
            if small.any():
                np.exp(x, out=out, where=small)

        return run


@register("TANH", max_version=3)
class Tanh(_Unary):
    def int8_fn(self, q, x, out):
        return _float_table(self, q, x, out, np.tanh)

    def float_run(self, x, out):
        return lambda: np.tanh(x, out=out)


@register("SOFTMAX", max_version=3)
class Softmax(Kernel):
    """Softmax over the last axis: exp((x − max) · beta) / Σ."""

    def prepare(self, inputs, outputs):
        if not inputs or inputs[0] is None:
            raise self.fail("needs one input")
        x, out = inputs[0], outputs[0]
        if len(x.shape) < 1:
            raise self.fail(f"input {x} must have rank >= 1")
        self.expect_dtype(x, [np.float32, np.int8])
        self.expect_same_dtype(x, out)
        self.beta = np.float32(self.options.get("beta", 1.0))
        self.int8 = x.dtype == np.int8
        rows = int(np.prod(x.shape[:-1], dtype=np.int64))
        depth = x.shape[-1]
        self.shape2 = (rows, depth)
        if self.int8:
            self.expect_quantized(x)
            self.expect_quantized(out)
            # Differences q − max(q) take 256 values: their exponentials are a table too.
            d = np.arange(-255, 1, dtype=np.float64)
            with np.errstate(over="ignore"):
                self.exp_table = np.exp(d * np.float64(x.scale) * np.float64(self.beta))
            self.out_q = (np.float64(out.scale), out.zero_point)
            self.diff = self.scratch(self.shape2, np.intp)
            self.mx = self.scratch((rows, 1), np.intp)
            self.e = self.scratch(self.shape2, np.float64)
            self.s = self.scratch((rows, 1), np.float64)
        else:
            self.m = self.scratch((rows, 1), np.float32)
        return [x.shape]

    def bind(self, inputs, outputs, scratch):
        x = inputs[0].reshape(self.shape2)
        out = outputs[0].reshape(self.shape2)
        if not self.int8:
            m, beta = scratch[self.m], self.beta
            loops = jit.loops()
            if loops is not None:  # the max and shift in one loop; the rest as below
                shift, scale = loops.softmax_shift, bool(beta != 1.0)
                if self.shape2[1] <= 128:  # the sums and division too, in numpy's order
                    normalize = loops.softmax_normalize

                    def run_short():
                        shift(x, beta, scale, out)
                        np.exp(out, out=out)
                        normalize(out)

                    return run_short

                def run_compiled():
                    shift(x, beta, scale, out)
                    np.exp(out, out=out)
                    np.add.reduce(out, axis=1, keepdims=True, out=m)
                    np.divide(out, m, out=out)

                return run_compiled

            def run():
                np.maximum.reduce(x, axis=1, keepdims=True, out=m)  # np.max, np.sum
                np.subtract(x, m, out=out)  # without their Python wrappers
                if beta != 1.0:
                    np.multiply(out, beta, out=out)
                np.exp(out, out=out)
                np.add.reduce(out, axis=1, keepdims=True, out=m)
                np.divide(out, m, out=out)

            return run
        diff, mx, e, s = (scratch[k] for k in (self.diff, self.mx, self.e, self.s))
        table = self.exp_table
        scale, zp = self.out_q
        inv = 1.0 / scale
        loops = jit.loops()
        if loops is not None:  # the same float64 operations; the row sums stay numpy's
            head, tail, nan_value = (
                loops.softmax_int8_head,
                loops.softmax_int8_tail,
                nan_cast(np.int8),
            )

            if self.shape2[1] <= 128:  # the row sums too, in numpy's pairwise order
                whole, offset = loops.softmax_int8, 0.5 + zp
                return lambda: whole(x, table, e, inv, offset, INT8_MIN, INT8_MAX, nan_value, out)

            def run_compiled():
                head(x, table, e)
                np.add.reduce(e, axis=1, keepdims=True, out=s)
                tail(e, s, inv, 0.5 + zp, INT8_MIN, INT8_MAX, nan_value, out)

            return run_compiled

        def run():
            np.maximum.reduce(x, axis=1, keepdims=True, out=mx)
            np.subtract(x, mx, out=diff)
            np.add(diff, 255, out=diff)
            np.take(table, diff, out=e)
            np.add.reduce(e, axis=1, keepdims=True, out=s)
            np.divide(e, s, out=e)
            np.multiply(e, inv, out=e)
            np.add(e, 0.5 + zp, out=e)  # non-negative before the zero point: floor rounds
            np.floor(e, out=e)
            np.clip(e, INT8_MIN, INT8_MAX, out=e)
            np.copyto(out, e, casting="unsafe")

        return run
