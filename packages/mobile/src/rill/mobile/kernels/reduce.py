"""MEAN over constant axes, float32 and int8.

int8 follows the reference kernel (QuantizedMeanOrSum): the int32 sum of (q − zp_in) over the
n reduced elements is rescaled by one fixed-point multiplier that includes the division by n —
QuantizeMultiplier(s_in / s_out) = (M0, shift), then with k = min(floor(log2 n), 32, 31 + shift):
M0' = (M0 · 2^k) div n, shift' = shift − k — then offset by zp_out and clamped.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.array_ops import _axis, _int_vector
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import requant_arrays
from rill.mobile.quant import Requantizer, quantize_multiplier

__all__ = ["Mean", "Sum", "ReduceMax", "ReduceMin", "ReduceProd", "ArgMax", "ArgMin", "Cumsum"]


@register("MEAN", max_version=3)
class Mean(Kernel):
    def prepare(self, inputs, outputs):
        x, a = inputs[0], inputs[1] if len(inputs) > 1 else None
        if x is None:
            raise self.fail("needs an input")
        rank = len(x.shape)
        axes = sorted({_axis(self, v, rank) for v in _int_vector(self, a, "axis")})
        keep = bool(self.options.get("keep_dims", False))
        out = outputs[0]
        self.expect_dtype(x, [np.float32, np.int8])
        self.expect_same_dtype(x, out)
        self.axes = tuple(axes)
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
        self.keep_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
        self.int8 = x.dtype == np.int8
        if self.int8:
            self.expect_quantized(x)
            self.expect_quantized(out)
            if count == 0:
                raise self.fail(f"cannot average over an empty axis of {x}")
            m0, shift = quantize_multiplier(float(np.float64(x.scale) / np.float64(out.scale)))
            k = min(count.bit_length() - 1, 32, 31 + shift)
            fixed = ((m0 << k) // count, shift - k)
            self.offset = x.zero_point * count
            self.requant = Requantizer(None, out.zero_point, fixed=fixed)
            self.acc = self.scratch(self.keep_shape, np.int64)
            self.compiled = jit.loops()
            if self.compiled is not None:  # the same integer arithmetic, one loop
                self.consts = requant_arrays(None, out.zero_point, 1, fixed=fixed)
            else:
                self.tmp = self.scratch(self.keep_shape, np.int64)
        return [shape]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0].reshape(self.keep_shape)
        axes = self.axes
        if not self.int8:
            count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
            loops = jit.loops()
            trailing = axes == tuple(range(x.ndim - len(axes), x.ndim))
            if (loops is not None and axes and trailing and 0 < count <= 128
                    and x.flags.c_contiguous and out.flags.c_contiguous):  # fmt: skip
                # One loop with numpy's summation order (its reduce over a contiguous row of
                # at most 128 terms, see _loops._pairwise_sum): the same bits.
                loop, x2, out1 = loops.mean_float_rows, x.reshape(-1, count), out.reshape(-1)
                fcount = x.dtype.type(count)
                return lambda: loop(x2, fcount, out1)

            def run_float():  # np.mean's own two steps, without its Python wrapper
                np.add.reduce(x, axis=axes, keepdims=True, out=out)
                np.divide(out, count, out=out)

            return run_float
        acc, offset = scratch[self.acc], self.offset
        if self.compiled is not None and axes and axes == tuple(range(axes[0], axes[-1] + 1)):
            # Reduced axes in one run: x is [outer, count, inner]; sum and stage in one loop.
            shape = x.shape
            outer = int(np.prod(shape[: axes[0]], dtype=np.int64))
            inner = int(np.prod(shape[axes[-1] + 1 :], dtype=np.int64))
            x3 = x.reshape(outer, -1, inner)
            out2 = out.reshape(outer, inner)
            loop, (m0, right, add, negfix) = self.compiled.mean_int8, self.consts
            return lambda: loop(x3, offset, m0[0], right[0], add[0], negfix[0], out2)
        if self.compiled is not None:
            loop, (m0, right, add, negfix) = self.compiled.requant_rows, self.consts
            acc2, out2 = acc.reshape(-1, 1), out.reshape(-1, 1)

            def run_compiled():
                np.add.reduce(x, axis=axes, keepdims=True, dtype=np.int64, out=acc)
                np.subtract(acc, offset, out=acc)
                loop(acc2, m0, right, add, negfix, -128, 127, out2)

            return run_compiled
        tmp, requant = scratch[self.tmp], self.requant

        def run():
            np.sum(x, axis=axes, keepdims=True, dtype=np.int64, out=acc)
            np.subtract(acc, offset, out=acc)
            requant.apply(acc, tmp)
            np.copyto(out, acc, casting="unsafe")

        return run


class _Reduce(Kernel):
    """SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD over constant axes."""

    ufunc = None
    int8_ok = True
    types = (np.float32, np.int32, np.int64, np.int8, np.int16)

    def prepare(self, inputs, outputs):
        x, a = inputs[0], inputs[1] if len(inputs) > 1 else None
        if x is None:
            raise self.fail("needs an input")
        rank = len(x.shape)
        axes = sorted({_axis(self, v, rank) for v in _int_vector(self, a, "axis")})
        keep = bool(self.options.get("keep_dims", False))
        out = outputs[0]
        self.expect_dtype(x, self.types)
        self.expect_same_dtype(x, out)
        self.axes = tuple(axes)
        self.keep_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        self.count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
        self.quantized = x.dtype in (np.int8, np.int16) and x.quant is not None
        if self.quantized:
            self.expect_quantized(out)
            self.prepare_quantized(x, out)
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
        return [shape]

    def prepare_quantized(self, x, out) -> None:
        self.expect_same_quant(x, out)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0].reshape(self.keep_shape)
        ufunc, axes = type(self).ufunc, self.axes
        return lambda: ufunc.reduce(x, axis=axes, keepdims=True, out=out)


@register("SUM", max_version=2)
class Sum(_Reduce):
    """int8 with a rescale (input and output quantization differ): the int32 sum of the raw
    values, then, as LiteRT's kernel, in float32: round(sum · (s_in / s_out) − zp_in ·
    (s_in / s_out) · n) + zp_out, clamped. int8 with the same quantization on both sides, and
    int16 (which LiteRT requires to have it): Σ (q − zp) + zp, saturated to the type's range —
    the same formula with a scale of 1, in integers. (LiteRT 2.21's BUILTIN_REF SUM disagrees with both its builtin kernel and its own
    source on int8/int16; the fixtures hold the builtin kernel's outputs, see
    tools/fixtures/make_tflite_op_fixtures.py.)"""

    ufunc = np.add
    types = (np.float32, np.int32, np.int64, np.int8, np.int16)

    def prepare_quantized(self, x, out):
        self.same = x.scale == out.scale and x.zero_point == out.zero_point
        if x.dtype == np.int16 and not self.same:
            raise self.fail(f"int16 input {x} and output {out} must share quantization")
        info = np.iinfo(x.dtype)
        self.range = (int(info.min), int(info.max))
        self.acc = self.scratch(self.keep_shape, np.int64)
        f32 = np.float32
        self.scale = f32(f32(x.scale) / f32(out.scale))
        self.bias = f32(f32(-x.zero_point) * self.scale * f32(self.count))
        self.zp_out = out.zero_point
        if not self.same:
            self.v = self.scratch(self.keep_shape, np.float32)

    def bind(self, inputs, outputs, scratch):
        if not self.quantized:
            return super().bind(inputs, outputs, scratch)
        x, out = inputs[0], outputs[0].reshape(self.keep_shape)
        axes, acc, (lo, hi) = self.axes, scratch[self.acc], self.range
        if self.same:
            offset = self.zp_out * (self.count - 1)

            def run_same():
                np.sum(x, axis=axes, keepdims=True, dtype=np.int64, out=acc)
                np.subtract(acc, offset, out=acc)
                np.clip(acc, lo, hi, out=acc)
                np.copyto(out, acc, casting="unsafe")

            return run_same
        scale, bias, zp, v = self.scale, self.bias, np.float32(self.zp_out), scratch[self.v]
        half = np.float32(0.5)

        def run():
            np.sum(x, axis=axes, keepdims=True, dtype=np.int64, out=acc)
            np.copyto(v, acc, casting="unsafe")  # the int32 sum, exactly, as float32 does
            np.multiply(v, scale, out=v)
            np.add(v, bias, out=v)
            # TfLiteRound: half away from zero
            np.add(v, np.copysign(half, v), out=v)
            np.trunc(v, out=v)
            np.add(v, zp, out=v)
            np.clip(v, lo, hi, out=v)
            np.copyto(out, v, casting="unsafe")

        return run


@register("REDUCE_MAX", max_version=3)
class ReduceMax(_Reduce):
    ufunc = np.maximum


@register("REDUCE_MIN", max_version=3)
class ReduceMin(_Reduce):
    ufunc = np.minimum


@register("REDUCE_PROD", max_version=2)
class ReduceProd(_Reduce):
    """int8/int16 as the reference QuantizedReduceProd: with the per-step scale
    s = s_in / s_out^(1/n) (QuantizeMultiplier of it, applied by the int64
    MultiplyByQuantizedMultiplier with its 16-bit reduced multiplier), each output starts at
    q_0 − zp_in, then t ← MBQM(t · (q_k − zp_in)) over the reduced elements in row-major order,
    and finally MBQM(t) + zp_out, clamped."""

    ufunc = np.multiply
    types = (np.float32, np.int32, np.int64, np.int8, np.int16)

    def prepare_quantized(self, x, out):
        from rill.mobile.kernels.int16 import Int16Stage

        scale = np.float64(x.scale) / np.power(np.float64(out.scale), 1.0 / self.count)
        info = np.iinfo(x.dtype)
        # Int16Stage is that int64 MBQM (zero point 0, no clamp), reused step by step.
        self.step = Int16Stage([scale], 0, -(2**62), 2**62)
        self.final = Int16Stage([scale], out.zero_point, int(info.min), int(info.max))
        self.zp_in = x.zero_point

    def bind(self, inputs, outputs, scratch):
        if not self.quantized:
            return super().bind(inputs, outputs, scratch)
        x, out = inputs[0], outputs[0]
        axes, zp, step, final = self.axes, self.zp_in, self.step, self.final
        rest = [d for d in range(x.ndim) if d not in axes]
        out_flat = out.reshape(-1)

        def run():
            v = np.transpose(x, rest + list(axes)).reshape(out_flat.size, -1).astype(np.int64)
            v -= zp
            t = v[:, 0].copy()
            buf = np.empty_like(t)
            for k in range(1, v.shape[1]):
                step(t * v[:, k], buf)
                t = buf.copy()
            final(t, out_flat)

        return run


class _ArgMinMax(Kernel):
    fn = None

    def prepare(self, inputs, outputs):
        x = inputs[0]
        axis = _int_vector(self, inputs[1], "axis")
        if len(axis) != 1:
            raise self.fail(f"the axis {inputs[1]} must hold one value")
        self.axis = _axis(self, axis[0], len(x.shape))
        self.expect_dtype(outputs[0], [np.int32, np.int64], "output")
        return [tuple(d for a, d in enumerate(x.shape) if a != self.axis)]

    def bind(self, inputs, outputs, scratch):
        x, out, axis, fn = inputs[0], outputs[0], self.axis, type(self).fn
        return lambda: np.copyto(out, fn(x, axis=axis), casting="unsafe")


@register("ARG_MAX", max_version=3)
class ArgMax(_ArgMinMax):
    fn = staticmethod(np.argmax)  # the first of equal maxima, as TFLite


@register("ARG_MIN", max_version=3)
class ArgMin(_ArgMinMax):
    fn = staticmethod(np.argmin)


@register("CUMSUM", max_version=1)
class Cumsum(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        axis = _int_vector(self, inputs[1], "axis")
        self.axis = _axis(self, axis[0], len(x.shape))
        self.expect_dtype(x, [np.float32, np.int32, np.int64])
        self.exclusive = bool(self.options.get("exclusive", False))
        self.reverse = bool(self.options.get("reverse", False))
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        x, out, axis = inputs[0], outputs[0], self.axis
        exclusive, reverse = self.exclusive, self.reverse

        def run():
            v = np.flip(x, axis) if reverse else x
            c = np.cumsum(v, axis=axis, dtype=x.dtype)
            if exclusive:
                c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)),
                                    np.take(c, np.arange(c.shape[axis] - 1), axis=axis)],
                                   axis=axis)  # fmt: skip
            np.copyto(out, np.flip(c, axis) if reverse else c)

        return run
