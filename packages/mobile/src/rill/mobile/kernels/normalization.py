"""LOG_SOFTMAX, L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION over the last axis, float32;
L2_NORMALIZATION also int8, in the reference kernel's fixed point; LOG_SOFTMAX also int8.

- LOG_SOFTMAX: x − max − log Σ exp(x − max); int8 (output scale 16/256, zero point 127, as
  LiteRT requires): d = (q − max q) · s_in in float64, round(d − log Σ exp d) / s_out) + 127,
  halves away from zero, clamped — it agrees with LiteRT's BUILTIN_REF on every value tried
  (192,000 random inputs, tests/mobile/test_kernels_array.py tries other input scales);
- L2_NORMALIZATION: x / max(sqrt(Σ x²), 1e-6);
- LOCAL_RESPONSE_NORMALIZATION: x · (bias + alpha · Σ_{c − radius <= d < c + radius} x_d²)^(−beta)
  (LiteRT's reference window, whose end is exclusive).
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.base import Kernel, register
from rill.mobile.quant import multiply_by_quantized_multiplier

__all__ = ["LogSoftmax", "L2Normalization", "LocalResponseNormalization"]


class _LastAxis(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        if x is None or not x.shape:
            raise self.fail("needs an input of rank >= 1")
        if x.dtype != np.float32:
            raise self.fail(f"the input {x} is {x.type_name}; only FLOAT32 is implemented (the "
                            "quantized kernel's fixed-point arithmetic is not)")  # fmt: skip
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        x, out, fn = inputs[0], outputs[0], self.compute
        return lambda: np.copyto(out, fn(x))


@register("LOG_SOFTMAX", max_version=2)
class LogSoftmax(_LastAxis):
    @staticmethod
    def compute(x):
        shifted = x - x.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        self.int8 = x is not None and x.dtype == np.int8
        if not self.int8:
            return super().prepare(inputs, outputs)
        if not x.shape:
            raise self.fail("needs an input of rank >= 1")
        self.expect_same_dtype(x, out)
        self.expect_quantized(x)
        self.expect_quantized(out)
        if np.float32(out.scale) != np.float32(16.0 / 256) or out.zero_point != 127:
            raise self.fail(f"the int8 output {out} must have scale 16/256 and zero point 127 "
                            f"(found {out.scale}, {out.zero_point})")  # fmt: skip
        # q − max q takes 256 values: their exponentials are a table.
        self.d_table = np.arange(-255, 1, dtype=np.float64) * np.float64(x.scale)
        self.e_table = np.exp(self.d_table)
        self.s_out = np.float64(out.scale)
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        if not self.int8:
            return super().bind(inputs, outputs, scratch)
        x, out = inputs[0], outputs[0]
        d_table, e_table, s_out = self.d_table, self.e_table, self.s_out

        def run():
            k = x.astype(np.intp)
            k -= k.max(axis=-1, keepdims=True)
            k += 255
            v = d_table[k] - np.log(e_table[k].sum(axis=-1, keepdims=True))
            v /= s_out
            v = np.trunc(v + np.copysign(0.5, v)) + 127
            np.copyto(out, np.clip(v, -128, 127), casting="unsafe")

        return run


_I32_MAX, _I32_MIN = 2**31 - 1, -(2**31)


def _srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32."""
    if a == b == _I32_MIN:
        return _I32_MAX
    v = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    return -((-v) >> 31) if v < 0 else v >> 31  # division truncating toward zero


def _mul_pot(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOT: a saturating left shift, or a rounding right shift."""
    if exponent > 0:
        return max(_I32_MIN, min(_I32_MAX, x * (1 << exponent)))
    e = -exponent
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1): 1/sqrt(value) as (M0, shift)
    for MultiplyByQuantizedMultiplier, by five Newton-Raphson steps in gemmlowp's 32-bit fixed
    point with 3 integer bits, as TFLite computes it."""
    if value <= 1:
        return _I32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = _mul_pot(value >> 1, -1)
    half_three = (1 << 28) + (1 << 27)  # 1.5 with 3 integer bits
    x = 1 << 28  # 1.0
    for _ in range(5):
        x3 = _mul_pot(_srdhm(_srdhm(x, x), x), 6)
        x = _mul_pot(_srdhm(half_three, x) - _srdhm(half_input, x3), 3)
    x = _srdhm(x, 1518500250)  # · sqrt(2)/2
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, -shift


@register("L2_NORMALIZATION", max_version=2)
class L2Normalization(_LastAxis):
    """int8 as the reference kernel: per row, acc = Σ (q − zp)², (M0, shift) = 1/sqrt(acc) in
    fixed point (`inv_sqrt_multiplier`), each output MBQM(q − zp, M0, shift + 7), clamped (the
    output scale is 1/128, zero point 0)."""

    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        self.int8 = x is not None and x.dtype == np.int8
        if not self.int8:
            return super().prepare(inputs, outputs)
        self.expect_quantized(x)
        self.expect_quantized(out)
        if out.scale != 1.0 / 128 or out.zero_point != 0:
            raise self.fail(f"the int8 output {out} must have scale 1/128 and zero point 0")
        self.zp = x.zero_point
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        if not self.int8:
            return super().bind(inputs, outputs, scratch)
        x, out, zp = inputs[0], outputs[0], self.zp
        depth = x.shape[-1]

        def run():
            v = x.reshape(-1, depth).astype(np.int64) - zp
            acc = (v * v).sum(axis=1)
            res = np.empty_like(v)
            for r in range(v.shape[0]):
                m0, shift = inv_sqrt_multiplier(int(acc[r]))
                res[r] = multiply_by_quantized_multiplier(v[r], m0, shift + 7)
            np.copyto(out, np.clip(res, -128, 127).reshape(out.shape), casting="unsafe")

        return run

    @staticmethod
    def compute(x):
        norm = np.sqrt(np.square(x).sum(axis=-1, keepdims=True))
        return x / np.maximum(norm, np.float32(1e-6))


@register("LOCAL_RESPONSE_NORMALIZATION", max_version=1)
class LocalResponseNormalization(_LastAxis):
    def prepare(self, inputs, outputs):
        shapes = super().prepare(inputs, outputs)
        o = self.options
        self.radius = int(o.get("radius", 5))
        self.bias, self.alpha, self.beta = (np.float32(o.get(k, d)) for k, d in
                                            (("bias", 1.0), ("alpha", 1.0), ("beta", 0.5)))  # fmt: skip
        return shapes

    def compute(self, x):
        sq = np.square(x)
        c = x.shape[-1]
        csum = np.concatenate([np.zeros(x.shape[:-1] + (1,), np.float32),
                               np.cumsum(sq, axis=-1, dtype=np.float32)], axis=-1)  # fmt: skip
        idx = np.arange(c)
        # [c − radius, c + radius): the reference kernel's window (its end is exclusive).
        lo, hi = np.maximum(idx - self.radius, 0), np.minimum(idx + self.radius, c)
        accum = csum[..., hi] - csum[..., lo]
        return x * np.power(self.bias + self.alpha * accum, -self.beta)
