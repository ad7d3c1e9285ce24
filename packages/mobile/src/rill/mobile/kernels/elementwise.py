"""ADD, SUB and MUL with numpy broadcasting and fused activations, float32 and int8 (int32 too,
for shape arithmetic).

int8 results come from a 65536-entry table over every pair of input values, built in prepare
from the reference arithmetic below (one table lookup per element at run time).

int8 ADD/SUB follow the reference kernels: each input, offset by its zero point, is shifted left
by 20 bits and rescaled by s_i / (2 · max(s1, s2)); the sum (difference) is rescaled by
2 · max(s1, s2) / (2^20 · s_out), offset and clamped. Each input's rescaling depends on its int8
value alone, so it is a 256-entry table made in prepare. int8 MUL rescales
(q1 − zp1) · (q2 − zp2) by s1 · s2 / s_out.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import (
    apply_float_activation,
    float_activation,
    quantized_activation,
)
from rill.mobile.kernels.int16 import int16_activation
from rill.mobile.kernels.lut import table_from_int8
from rill.mobile.quant import Requantizer, multiply_by_quantized_multiplier, quantize_multiplier

__all__ = ["Add", "Sub", "Mul", "compiled_pairs"]

LEFT_SHIFT = 20  # the reference int8 ADD/SUB headroom


def compiled_pairs(loops, pair, au, bu, out, shape):
    """The compiled pair-table lookup out = pair[a << 8 | b] over a and b (uint8 views)
    broadcast to `shape` (at most 4-D)."""
    shape4 = (1,) * (4 - len(shape)) + tuple(shape)

    def view4(v):  # leading 1s (a view of the contiguous array), then broadcast
        return np.broadcast_to(v.reshape((1,) * (4 - v.ndim) + v.shape), shape4)

    a4, b4, out4, loop = view4(au), view4(bu), out.reshape(shape4), loops.pair_lookup
    return lambda: loop(a4, b4, pair, out4)


class _Binary(Kernel):
    ufunc = None
    int16_types = ()  # MUL: int16 (16x8 models) with the int8 arithmetic and int16 clamps

    def prepare(self, inputs, outputs):
        if len(inputs) != 2 or None in inputs:
            raise self.fail("needs two inputs")
        a, b = inputs
        out = outputs[0]
        try:
            shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        except ValueError:
            raise self.fail(f"shapes of {a} and {b} do not broadcast") from None
        self.expect_dtype(a, [np.float32, np.int8, np.int32, np.int64, *self.int16_types])
        self.expect_same_dtype(a, b)
        self.expect_same_dtype(a, out)
        act = self.options.get("fused_activation_function", 0)
        self.kind = a.dtype
        if a.dtype == np.int16:  # 16-bit activations: the int8 arithmetic, int16 clamps
            for t in (a, b, out):
                self.expect_quantized(t)
            lo, hi = int16_activation(self, act, out)
            self.prepare_int8(a, b, out, lo, hi, shape)
            self.kind = np.dtype(np.int8)  # (the same bind)
        elif a.dtype == np.int8:
            for t in (a, b, out):
                self.expect_quantized(t)
            lo, hi = quantized_activation(self, act, out)
            self.prepare_int8(a, b, out, lo, hi, shape)
        elif a.dtype == np.float32:
            self.lo, self.hi = float_activation(self, act)
        else:
            if act:
                raise self.fail("fused activations apply to float and int8 only")
            self.lo, self.hi = -np.inf, np.inf
        return [shape]

    def request(self, a, b, shape) -> None:
        """int8: one 65536-entry table of the result for every pair of input values (built
        from the same integer arithmetic, so exact), indexed by (a << 8 | b) as uint16 bits;
        int16: the element-wise arithmetic, in int64 scratch buffers."""
        self.pair = None
        if a.dtype == np.int8:
            ua = np.repeat(np.arange(256, dtype=np.int64), 256)
            ub = np.tile(np.arange(256, dtype=np.int64), 256)
            self.pair = np.ascontiguousarray(self.pair_values(ua, ub).astype(np.int8))
            # Compiled: one loop reads both inputs (broadcast views) and the table.
            self.compiled = jit.loops() if len(shape) <= 4 else None
            if self.compiled is None:
                self.idx = self.scratch(shape, np.uint16)
            self.shape = tuple(shape)
            return
        self.v1 = self.scratch(a.shape, np.int64)
        self.v2 = self.scratch(b.shape, np.int64)
        self.acc = self.scratch(shape, np.int64)
        self.tmp = self.scratch(shape, np.int64)

    def bind_pairs(self, a, b, out, scratch):
        pair = self.pair
        au, bu = a.view(np.uint8), b.view(np.uint8)
        if self.compiled is not None:
            return compiled_pairs(self.compiled, pair, au, bu, out, self.shape)
        idx = scratch[self.idx]

        def run():
            np.copyto(idx, au)  # broadcast to the output's shape
            np.left_shift(idx, 8, out=idx)
            np.bitwise_or(idx, bu, out=idx)
            np.take(pair, idx, out=out)

        return run

    def bind(self, inputs, outputs, scratch):
        a, b = inputs
        out = outputs[0]
        if self.kind == np.int8:
            return self.bind_int8(a, b, out, scratch)
        ufunc, lo, hi = self.ufunc, self.lo, self.hi
        act = self.kind == np.float32 and (lo > -np.inf or hi < np.inf)

        def run():
            ufunc(a, b, out=out)
            if act:
                apply_float_activation(out, lo, hi)

        return run


class _AddSub(_Binary):
    sign = 1

    def prepare_int8(self, a, b, out, lo, hi, shape):
        s1, s2, so = (np.float64(np.float32(t.scale)) for t in (a, b, out))
        twice_max = 2.0 * max(s1, s2)
        m1, m2 = quantize_multiplier(s1 / twice_max), quantize_multiplier(s2 / twice_max)
        # The tables hold each input's rescaled, shifted value; SUB negates the second one.
        self.t1 = table_from_int8(lambda q: multiply_by_quantized_multiplier(
            (q - a.zero_point) << LEFT_SHIFT, *m1), np.int64)  # fmt: skip
        self.t2 = table_from_int8(lambda q: self.sign * multiply_by_quantized_multiplier(
            (q - b.zero_point) << LEFT_SHIFT, *m2), np.int64)  # fmt: skip
        self.requant = Requantizer([twice_max / ((1 << LEFT_SHIFT) * so)], out.zero_point, lo, hi)
        self.request(a, b, shape)

    def pair_values(self, ua: np.ndarray, ub: np.ndarray) -> np.ndarray:
        acc = self.t1[ua] + self.t2[ub]
        return self.requant.apply(acc, np.empty_like(acc))

    def bind_int8(self, a, b, out, scratch):
        if self.pair is not None:
            return self.bind_pairs(a, b, out, scratch)
        v1, v2, acc, tmp = (scratch[k] for k in (self.v1, self.v2, self.acc, self.tmp))
        t1, t2, requant = self.t1, self.t2, self.requant
        au, bu = a.view(np.uint8), b.view(np.uint8)

        def run():
            np.take(t1, au, out=v1)
            np.take(t2, bu, out=v2)
            np.add(v1, v2, out=acc)
            requant.apply(acc, tmp)
            np.copyto(out, acc, casting="unsafe")

        return run


@register("ADD", max_version=5)
class Add(_AddSub):
    ufunc = np.add
    sign = 1


@register("SUB", max_version=5)
class Sub(_AddSub):
    ufunc = np.subtract
    sign = -1


@register("MUL", max_version=7)
class Mul(_Binary):
    ufunc = np.multiply
    int16_types = (np.int16,)

    def prepare_int8(self, a, b, out, lo, hi, shape):
        m = np.float64(a.scale) * np.float64(b.scale) / np.float64(out.scale)
        self.requant = Requantizer([m], out.zero_point, lo, hi)
        self.zps = (a.zero_point, b.zero_point)
        self.request(a, b, shape)

    def pair_values(self, ua: np.ndarray, ub: np.ndarray) -> np.ndarray:
        qa = ua.astype(np.uint8).view(np.int8).astype(np.int64)
        qb = ub.astype(np.uint8).view(np.int8).astype(np.int64)
        acc = (qa - self.zps[0]) * (qb - self.zps[1])
        return self.requant.apply(acc, np.empty_like(acc))

    def bind_int8(self, a, b, out, scratch):
        if self.pair is not None:
            return self.bind_pairs(a, b, out, scratch)
        v1, v2, acc, tmp = (scratch[k] for k in (self.v1, self.v2, self.acc, self.tmp))
        z1, z2 = self.zps
        requant = self.requant

        def run():
            np.subtract(a, z1, out=v1, dtype=np.int64)
            np.subtract(b, z2, out=v2, dtype=np.int64)
            np.multiply(v1, v2, out=acc)
            requant.apply(acc, tmp)
            np.copyto(out, acc, casting="unsafe")

        return run
