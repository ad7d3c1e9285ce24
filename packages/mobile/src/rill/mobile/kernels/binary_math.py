"""Two-input element-wise math with numpy broadcasting: SQUARED_DIFFERENCE, POW, DIV, FLOOR_DIV,
FLOOR_MOD, MAXIMUM, MINIMUM, and PRELU; float32 (and int32 where TFLite has it), int8 as below
(the one-input operators are in math_ops.py).

int8 MAXIMUM and MINIMUM compare the raw values (inputs and output share quantization); int8
SQUARED_DIFFERENCE rescales each input like int8 ADD (a 7-bit left shift), squares the
difference and requantizes.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import apply_float_activation, float_activation
from rill.mobile.kernels.elementwise import compiled_pairs
from rill.mobile.kernels.lut import table_from_int8
from rill.mobile.quant import multiply_by_quantized_multiplier, quantize_multiplier

# -- two inputs --------------------------------------------------------------------------------


class _Binary(Kernel):
    float_fn = None
    types = (np.float32,)
    int8_ok = False
    activation = False

    def prepare(self, inputs, outputs):
        if len(inputs) != 2 or None in inputs:
            raise self.fail("needs two inputs")
        a, b = inputs
        out = outputs[0]
        try:
            shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        except ValueError:
            raise self.fail(f"shapes of {a} and {b} do not broadcast") from None
        allowed = [*self.types, *((np.int8,) if self.int8_ok else ())]
        self.expect_dtype(a, allowed)
        self.expect_same_dtype(a, b)
        self.kind = a.dtype
        self.lo, self.hi = -np.inf, np.inf
        if self.activation and a.dtype == np.float32:
            self.lo, self.hi = float_activation(self, self.options.get("fused_activation_function",
                                                                       0))  # fmt: skip
        if a.dtype == np.int8:
            self.prepare_int8(a, b, out, shape)
        return [shape]

    def prepare_int8(self, a, b, out, shape) -> None:
        pass

    def bind(self, inputs, outputs, scratch):
        a, b = inputs
        out = outputs[0]
        if self.kind == np.int8:
            return self.bind_int8(a, b, out, scratch)
        fn, lo, hi = type(self).float_fn, self.lo, self.hi

        def run():
            with np.errstate(all="ignore"):
                np.copyto(out, fn(a, b), casting="unsafe")
            apply_float_activation(out, lo, hi)

        return run


class _MinMax(_Binary):
    types = (np.float32, np.int32, np.int64, np.int16)
    int8_ok = True

    def prepare_int8(self, a, b, out, shape):
        self.expect_same_quant(a, out)
        self.expect_same_quant(b, out)

    def bind_int8(self, a, b, out, scratch):
        fn = type(self).float_fn
        return lambda: fn(a, b, out=out)


@register("MAXIMUM", max_version=4)
class Maximum(_MinMax):
    float_fn = staticmethod(np.maximum)


@register("MINIMUM", max_version=4)
class Minimum(_MinMax):
    float_fn = staticmethod(np.minimum)


@register("SQUARED_DIFFERENCE", max_version=2)
class SquaredDifference(_Binary):
    types = (np.float32, np.int32)
    int8_ok = True

    @staticmethod
    def float_fn(a, b):
        d = a - b
        return d * d

    def bind(self, inputs, outputs, scratch):
        a, b = inputs
        out = outputs[0]
        if self.kind == np.int8 or out.dtype != a.dtype:
            return super().bind(inputs, outputs, scratch)

        def run():  # (a − b)², in place in the output
            np.subtract(a, b, out=out)
            np.multiply(out, out, out=out)

        return run

    def prepare_int8(self, a, b, out, shape):
        for t in (a, b, out):
            self.expect_quantized(t)
        left = 7
        twice_max = 2.0 * max(float(a.scale), float(b.scale))
        m1 = quantize_multiplier(float(a.scale) / twice_max)
        m2 = quantize_multiplier(float(b.scale) / twice_max)
        mo = quantize_multiplier(twice_max * twice_max / ((1 << (2 * left)) * float(out.scale)))
        self.t1 = table_from_int8(lambda q: multiply_by_quantized_multiplier(
            (q - a.zero_point) << left, *m1), np.int64)  # fmt: skip
        self.t2 = table_from_int8(lambda q: multiply_by_quantized_multiplier(
            (q - b.zero_point) << left, *m2), np.int64)  # fmt: skip
        # Every pair of int8 inputs' result, by (a << 8 | b) as uint16 bits.
        ua = np.repeat(np.arange(256), 256)
        ub = np.tile(np.arange(256), 256)
        d = self.t1[ua] - self.t2[ub]
        v = multiply_by_quantized_multiplier(d * d, *mo) + out.zero_point
        self.pair = np.clip(v, -128, 127).astype(np.int8)
        self.idx = self.scratch(shape, np.uint16)

    def bind_int8(self, a, b, out, scratch):
        idx, pair = scratch[self.idx], self.pair
        au, bu = a.view(np.uint8), b.view(np.uint8)
        loops = jit.loops()
        if loops is not None and out.ndim <= 4:
            return compiled_pairs(loops, pair, au, bu, out, out.shape)

        def run():
            np.copyto(idx, au)
            np.left_shift(idx, 8, out=idx)
            np.bitwise_or(idx, bu, out=idx)
            np.take(pair, idx, out=out)

        return run


@register("POW", max_version=1)
class Pow(_Binary):
    types = (np.float32, np.int32)
    float_fn = staticmethod(np.power)


@register("DIV", max_version=2)
class Div(_Binary):
    types = (np.float32, np.int32)
    activation = True

    def prepare(self, inputs, outputs):
        shapes = super().prepare(inputs, outputs)
        if self.kind == np.int32:
            b = inputs[1]
            if b.data is not None and np.any(b.data == 0):
                raise self.fail(f"divides by zero ({b})")
        return shapes

    @staticmethod
    def float_fn(a, b):
        if a.dtype.kind in "iu":
            if np.any(b == 0):
                raise ValueError("DIV: division by zero")
            return np.trunc(a / b)
        return a / b


@register("FLOOR_DIV", max_version=3)
class FloorDiv(_Binary):
    types = (np.float32, np.int32, np.int16, np.int8)

    @staticmethod
    def float_fn(a, b):
        if a.dtype.kind in "iu":
            if np.any(b == 0):
                raise ValueError("FLOOR_DIV: division by zero")
            return np.floor_divide(a, b)
        return np.floor(a / b)


@register("FLOOR_MOD", max_version=2)
class FloorMod(_Binary):
    types = (np.float32, np.int32, np.int64, np.int16)

    @staticmethod
    def float_fn(a, b):
        if a.dtype.kind in "iu":
            if np.any(b == 0):
                raise ValueError("FLOOR_MOD: division by zero")
            return np.mod(a, b)
        r = np.fmod(a, b)
        return np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@register("PRELU", max_version=1)
class Prelu(Kernel):
    """x for x >= 0, alpha · x below (alpha broadcast against x). int8 as the reference kernel:
    with v = q − zp_in, MBQM(v, s_in / s_out) where v >= 0, else MBQM(v · (q_alpha − zp_alpha),
    s_in · s_alpha / s_out); + zp_out, clamped."""

    def prepare(self, inputs, outputs):
        x, alpha = inputs[0], inputs[1]
        out = outputs[0]
        try:
            shape = np.broadcast_shapes(tuple(x.shape), tuple(alpha.shape))
        except ValueError:
            raise self.fail(f"alpha {alpha} does not broadcast against {x}") from None
        self.expect_dtype(x, [np.float32, np.int8])
        self.expect_same_dtype(x, alpha)
        self.int8 = x.dtype == np.int8
        if self.int8:
            for t in (x, alpha, out):
                self.expect_quantized(t)
            f64 = np.float64
            self.m1 = quantize_multiplier(float(f64(x.scale) / f64(out.scale)))
            self.m2 = quantize_multiplier(float(f64(x.scale) * f64(alpha.scale) / f64(out.scale)))
            self.zps = (x.zero_point, alpha.zero_point, out.zero_point)
        return [shape]

    def bind(self, inputs, outputs, scratch):
        x, alpha, out = inputs[0], inputs[1], outputs[0]
        if not self.int8:
            return lambda: np.copyto(out, np.where(x >= 0, x, x * alpha))
        m1, m2 = self.m1, self.m2
        zx, za, zo = self.zps

        def run():
            v = x.astype(np.int64) - zx
            pos = multiply_by_quantized_multiplier(v, *m1)
            neg = multiply_by_quantized_multiplier(v * (alpha.astype(np.int64) - za), *m2)
            np.copyto(out, np.clip(np.where(v >= 0, pos, neg) + zo, -128, 127), casting="unsafe")

        return run
