"""One-input element-wise math: NEG, ABS, EXP, LOG, SQRT, RSQRT, SQUARE, FLOOR, HARD_SWISH, GELU,
ELU, float32 (and int32 where TFLite has it); int8 as below. The two-input operators are in
binary_math.py.

int8 one-input operators are 256-entry tables made in prepare (kernels/lut.py):

- EXP, LOG, SQRT, RSQRT, GELU, ELU: as LiteRT's LUTPopulate (SQRT truncates instead) — the float32 function of the
  dequantized value s_in · (q − zp_in), times the float32 1 / s_out, rounded half away from
  zero, plus zp_out, clamped;
- ABS: |q − zp_in| rescaled by MultiplyByQuantizedMultiplier(s_in / s_out) when the scales
  differ, plus zp_out;
- HARD_SWISH: the reference kernel's 16-bit fixed-point arithmetic (see `_hard_swish_int8`).

int16 EXP, LOG and GELU use LiteRT's interpolated 513-entry table (`lut_populate_int16`),
expanded here to all 65536 inputs.
"""

from __future__ import annotations

import math

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.lut import INT8_VALUES, table_from_int8, table_run
from rill.mobile.quant import multiply_by_quantized_multiplier, quantize_multiplier

__all__ = ["lut_populate", "erf"]

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, element by element (C's erf through Python's math module)."""
    return _erf(np.asarray(x, np.float64)).astype(np.float64)


def _round_half_away(v):
    return np.trunc(v + np.copysign(np.asarray(0.5, v.dtype), v))


def lut_populate(fn, s_in: float, zp_in: int, s_out: float, zp_out: int,
                 truncate: bool = False) -> np.ndarray:  # fmt: skip
    """LiteRT's LUTPopulate for int8, in float32: the table indexed by uint8 bit patterns.
    truncate=True truncates toward zero instead of rounding (int8 SQRT's kernel does)."""
    f32 = np.float32
    q = INT8_VALUES.astype(np.int32)
    with np.errstate(all="ignore"):
        deq = f32(s_in) * (q - zp_in).astype(f32)
        y = np.asarray(fn(deq), f32)
        inv = f32(1.0) / f32(s_out)
        r = np.trunc(y / f32(s_out)) if truncate else _round_half_away((y * inv).astype(f32))
        v = r + f32(zp_out)
        v = np.where(np.isnan(v), 0, v)
        v = np.clip(v, -128, 127)
    return np.ascontiguousarray(v.astype(np.int8))


def lut_populate_int16(fn, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """LiteRT's int16 LUTPopulate (float32): 513 samples of fn over the input range, each biased
    by half the error of linear interpolation at the midpoint; then LUTLookup for every int16
    value (base + (slope · low 7 bits + 64) >> 7), as a 65536-entry table by uint16 pattern."""
    f32 = np.float32
    s_in, s_out = f32(s_in), f32(s_out)
    imin, imax = s_in * f32(-32768 - zp_in), s_in * f32(32767 - zp_in)
    omin, omax = s_out * f32(-32768 - zp_out), s_out * f32(32767 - zp_out)
    step = f32((imax - imin) / f32(512))
    half = f32(step / f32(2))
    inv = f32(f32(65536) / f32(omax - omin))
    i = np.arange(512, dtype=f32)
    with np.errstate(all="ignore"):
        at = (imin + (i * step).astype(f32)).astype(f32)
        val = np.asarray(fn(at), f32)
        mid = np.asarray(fn((at + half).astype(f32)), f32)
        nxt = np.asarray(fn((imin + ((i + 1) * step).astype(f32)).astype(f32)), f32)
        sample = _round_half_away((val * inv).astype(f32))
        interp = _round_half_away((((nxt * inv).astype(f32) + sample) / f32(2)).astype(f32))
        bias = _round_half_away(((interp - _round_half_away((mid * inv).astype(f32))) / f32(2))
                                .astype(f32))  # fmt: skip
        lut = (sample - bias).astype(f32)
        last = _round_half_away((np.asarray(fn(np.array([imax], f32)), f32) * inv).astype(f32))
        lut = np.concatenate([lut, last])
        # NaN (log of a non-positive value) lands on the minimum, as the C++ cast does here.
        lut = np.where(np.isnan(lut), -32768, np.clip(lut, -32768, 32767)).astype(np.int64)
    v = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16).astype(np.int64)
    idx, off = 256 + (v >> 7), v & 0x7F
    out = lut[idx] + (((lut[idx + 1] - lut[idx]) * off + 64) >> 7)
    return np.clip(out, -32768, 32767).astype(np.int16)


def _gelu(x):
    """Exact-erf GELU (C's erf), for the 256-entry int8 table."""
    x = np.asarray(x, np.float32)
    return (np.float32(0.5) * x * (np.float32(1) + erf(x * np.float32(math.sqrt(0.5))).astype(
        np.float32))).astype(np.float32)  # fmt: skip


_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
         1.48851587, -0.82215223, 0.17087277)  # fmt: skip


def _erfc_abs(z: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0 in float64, to a relative error below 1.2e-7 (the Chebyshev fit
    of Numerical Recipes' erfcc): vectorized, for GELU on float tensors."""
    t = 1.0 / (1.0 + 0.5 * z)
    poly = _ERFC[-1]
    for c in _ERFC[-2::-1]:
        poly = c + t * poly
    return t * np.exp(-z * z + poly)


def _gelu_fast(x):
    """GELU for float tensors: 0.5 x (1 + erf(x/√2)), written with erfc(|x|/√2) so that the
    relative error stays ~1e-7 in both tails (well inside float32 agreement at 1e-5)."""
    xd = np.asarray(x, np.float64)
    e = _erfc_abs(np.abs(xd) * math.sqrt(0.5))
    return (0.5 * xd * np.where(xd < 0, e, 2.0 - e)).astype(np.float32)


def _gelu_tanh(x):
    x = np.asarray(x, np.float32)
    c = np.float32(math.sqrt(2.0 / math.pi))
    inner = c * (x + np.float32(0.044715) * x * x * x)
    return (np.float32(0.5) * x * (np.float32(1) + np.tanh(inner))).astype(np.float32)


def _elu(x):
    x = np.asarray(x, np.float32)
    return np.where(x < 0, np.expm1(x), x).astype(np.float32)


def _hard_swish_float(x):
    return x * np.minimum(np.maximum(x + np.float32(3), 0), 6) / np.float32(6)


class _Elementwise(Kernel):
    """One input, same-shape output; float32 through `float_fn`, int8 through a table."""

    float_fn = None
    int_types = ()  # integer types (beside int8) computed by float_fn on the values
    int16_lut = False  # int16 through LiteRT's interpolated 513-entry table (EXP, LOG, GELU)

    def prepare(self, inputs, outputs):
        if not inputs or inputs[0] is None:
            raise self.fail("needs one input")
        x, out = inputs[0], outputs[0]
        self.expect_dtype(x, [np.float32, np.int8, *self.int_types])
        self.expect_same_dtype(x, out)
        self.int8 = x.dtype == np.int8
        self.table16 = None
        if self.int8:
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.table = self.int8_table(x, out)
        elif x.dtype == np.int16 and self.int16_lut:
            self.expect_quantized(x)
            self.expect_quantized(out)
            self.table16 = lut_populate_int16(self.int16_fn(), x.scale, x.zero_point, out.scale,
                                              out.zero_point)  # fmt: skip
        return [tuple(x.shape)]

    def int16_fn(self):
        return self.fn()

    def fn(self):
        return type(self).float_fn

    def int8_table(self, x, out) -> np.ndarray:
        return lut_populate(self.fn(), x.scale, x.zero_point, out.scale, out.zero_point)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if self.table16 is not None:
            return table_run(self.table16, x, out)
        if self.int8:
            return table_run(self.table, x, out)
        fn = self.fn()
        if isinstance(fn, np.ufunc) and x.dtype == out.dtype:
            return lambda: fn(x, out=out)  # (Subgraph.invoke silences float warnings)

        def run():
            with np.errstate(all="ignore"):
                np.copyto(out, fn(x), casting="unsafe")

        return run


@register("NEG", max_version=3)
class Neg(_Elementwise):
    float_fn = staticmethod(np.negative)
    int_types = (np.int32, np.int64)

    def int8_table(self, x, out):
        return table_from_int8(lambda q: np.clip(-(q - x.zero_point) + out.zero_point, -128, 127),
                               np.int8)  # fmt: skip


@register("ABS", max_version=5)
class Abs(_Elementwise):
    float_fn = staticmethod(np.abs)

    int_types = (np.int32, np.int16)

    def prepare(self, inputs, outputs):
        shapes = super().prepare(inputs, outputs)
        x, out = inputs[0], outputs[0]
        self.int16 = x.dtype == np.int16 and x.quant is not None
        if self.int16:  # the same arithmetic over the 65536 int16 values
            q = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16)
            self.table16 = self._abs(q.astype(np.int64), x, out, -32768, 32767).astype(np.int16)
        return shapes

    @staticmethod
    def _abs(q, x, out, qmin, qmax):
        v = np.abs(q - x.zero_point)
        if np.float32(x.scale) != np.float32(out.scale):
            m0, shift = quantize_multiplier(float(np.float64(x.scale) / np.float64(out.scale)))
            v = multiply_by_quantized_multiplier(v, m0, shift)
        return np.clip(v + out.zero_point, qmin, qmax)

    def int8_table(self, x, out):
        return table_from_int8(lambda q: self._abs(q, x, out, -128, 127), np.int8)

    def bind(self, inputs, outputs, scratch):
        if self.int16:
            table, xu, out = self.table16, inputs[0].view(np.uint16), outputs[0]
            return lambda: np.take(table, xu, out=out)
        return super().bind(inputs, outputs, scratch)


@register("EXP", max_version=2)
class Exp(_Elementwise):
    float_fn = staticmethod(np.exp)
    int_types = (np.int16,)
    int16_lut = True


@register("LOG", max_version=2)
class Log(_Elementwise):
    float_fn = staticmethod(np.log)
    int_types = (np.int16,)
    int16_lut = True


@register("SQRT", max_version=2)
class Sqrt(_Elementwise):
    float_fn = staticmethod(np.sqrt)

    def int8_table(self, x, out):
        return lut_populate(np.sqrt, x.scale, x.zero_point, out.scale, out.zero_point, True)


@register("RSQRT", max_version=3)
class Rsqrt(_Elementwise):
    @staticmethod
    def float_fn(x):
        return np.float32(1) / np.sqrt(x)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if self.int8 or x.dtype != np.float32:
            return super().bind(inputs, outputs, scratch)
        one = np.float32(1)

        def run():  # the same two float32 operations, in place
            np.sqrt(x, out=out)
            np.divide(one, out, out=out)

        return run


@register("SQUARE", max_version=1)
class Square(_Elementwise):
    float_fn = staticmethod(np.square)


@register("FLOOR", max_version=2)
class Floor(_Elementwise):
    float_fn = staticmethod(np.floor)


@register("ROUND", max_version=1)
class Round(_Elementwise):
    float_fn = staticmethod(np.round)  # half to even, as TFLite's RoundToNearest


@register("ELU", max_version=1)
class Elu(_Elementwise):
    float_fn = staticmethod(_elu)


@register("GELU", max_version=2)
class Gelu(_Elementwise):
    int_types = (np.int16,)
    int16_lut = True

    def int16_fn(self):
        return _gelu_tanh if self.options.get("approximate", False) else _gelu

    def fn(self):
        return _gelu_tanh if self.options.get("approximate", False) else _gelu_fast

    def int8_table(self, x, out):
        fn = _gelu_tanh if self.options.get("approximate", False) else _gelu
        return lut_populate(fn, x.scale, x.zero_point, out.scale, out.zero_point)

    def prepare(self, inputs, outputs):
        shapes = super().prepare(inputs, outputs)
        x = inputs[0]
        self.fast = x.dtype == np.float32 and not self.options.get("approximate", False)
        if self.fast:  # _gelu_fast's float64 temporaries, planned in the arena
            self.bufs = [self.scratch(x.shape, np.float64) for _ in range(4)]
            self.neg = self.scratch(x.shape, np.bool_)
        return shapes

    def bind(self, inputs, outputs, scratch):
        if not self.fast:
            return super().bind(inputs, outputs, scratch)
        x, out = inputs[0], outputs[0]
        xd, z, t, p = (scratch[k] for k in self.bufs)
        neg, rest = scratch[self.neg], _ERFC[-2::-1]
        loops = jit.loops()
        if loops is not None:  # the same float64 operations in two loops around np.exp
            head, tail, c_last = loops.gelu_head, loops.gelu_tail, _ERFC[-1]
            coeffs = tuple(float(c) for c in rest)
            xf, tf, pf, of = x.reshape(-1), t.reshape(-1), p.reshape(-1), out.reshape(-1)

            def run_compiled():
                head(xf, c_last, coeffs, tf, pf)
                np.exp(pf, out=pf)
                tail(xf, tf, pf, of)

            return run_compiled

        def run():  # _gelu_fast's operations, in place
            np.copyto(xd, x)
            np.abs(xd, out=z)
            np.multiply(z, math.sqrt(0.5), out=z)
            np.multiply(z, 0.5, out=t)
            np.add(t, 1.0, out=t)
            np.divide(1.0, t, out=t)
            np.multiply(t, _ERFC[-1], out=p)
            np.add(p, rest[0], out=p)
            for c in rest[1:]:
                np.multiply(t, p, out=p)
                np.add(p, c, out=p)
            np.multiply(z, z, out=z)
            np.subtract(p, z, out=p)  # −z·z + poly
            np.exp(p, out=p)
            np.multiply(t, p, out=p)  # erfc(|x|/√2)
            np.subtract(2.0, p, out=z)
            np.less(xd, 0, out=neg)
            np.copyto(z, p, where=neg)  # erfc(−x/√2) = 2 − erfc(|x|/√2) for x >= 0
            np.multiply(xd, 0.5, out=xd)
            np.multiply(xd, z, out=xd)
            np.copyto(out, xd, casting="unsafe")

        return run


def _srdhm16(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16."""
    if a == b == -32768:
        return 32767
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return int(math.trunc((ab + nudge) / (1 << 15)))


def _sdhm16(a: int, b: int) -> int:
    """SaturatingDoublingHighMul on int16 (truncating, as the reference HARD_SWISH)."""
    if a == b == -32768:
        return 32767
    return int(math.trunc(a * b / (1 << 15)))


def _sat_left_shift16(v: int, amount: int) -> int:
    return max(-32768, min(32767, v * (1 << amount)))


def _rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _downscale16(m: int) -> int:
    if m >= 2**31 - 1 - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


def _hard_swish_int8(x, out) -> np.ndarray:
    """The reference int8 HARD_SWISH, value by value: the input on a 2^7-finer scale, a
    "relu-ish" factor in [0, 1] from the input rescaled so that 3.0 is 2^15, and their product
    on the output scale, all in 16-bit fixed point."""
    f32 = np.float32
    hires = f32(1.0 / 128.0) * f32(x.scale)
    out_m, out_e = quantize_multiplier(float(f32(hires / f32(out.scale))))
    out_m16 = _downscale16(out_m)
    relu_m, relu_e = quantize_multiplier(float(f32(hires / f32(3.0 / 32768.0))))
    relu_m16 = _downscale16(relu_m)
    if out_e > 0:
        raise ValueError(f"the output multiplier exponent {out_e} must be <= 0")
    table = np.zeros(256, np.int8)
    for k, q in enumerate(INT8_VALUES):
        v = int(q) - x.zero_point
        v_hires = v * 128
        v_pre = _srdhm16(v_hires, out_m16)
        r = v_hires
        if relu_e > 0:
            r = _sat_left_shift16(r, relu_e - 1)
        r = _srdhm16(r, relu_m16)
        if relu_e > 0:
            r = _sat_left_shift16(r, 1)
        if relu_e < 0:
            r = _rdbpot(r, -relu_e)
        r = (r + (1 << 15)) >> 1
        y = _rdbpot(_sdhm16(r, v_pre), -out_e) + out.zero_point
        table[k] = max(-128, min(127, y))
    return table


@register("HARD_SWISH", max_version=1)
class HardSwish(_Elementwise):
    float_fn = staticmethod(_hard_swish_float)

    def int8_table(self, x, out):
        try:
            return _hard_swish_int8(x, out)
        except ValueError as e:
            raise self.fail(str(e)) from None
