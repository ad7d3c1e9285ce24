"""Comparisons (LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL), LOGICAL_AND,
LOGICAL_OR, LOGICAL_NOT, SELECT and SELECT_V2, with numpy broadcasting.

int8 comparisons follow the reference kernel: each input, offset by its zero point and shifted
left by 8 bits, is rescaled by MultiplyByQuantizedMultiplier(its own scale) (a table over its
256 values), and the rescaled values are compared. SELECT moves bytes (the branches and the
output share quantization).
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.lut import table_from_int8
from rill.mobile.quant import multiply_by_quantized_multiplier, quantize_multiplier

__all__ = ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd",
           "LogicalOr", "LogicalNot", "Select", "SelectV2"]  # fmt: skip

_LEFT_SHIFT = 8


def _broadcast(kernel, a, b):
    try:
        return np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise kernel.fail(f"shapes of {a} and {b} do not broadcast") from None


class _Compare(Kernel):
    ufunc = None

    def prepare(self, inputs, outputs):
        if len(inputs) != 2 or None in inputs:
            raise self.fail("needs two inputs")
        a, b = inputs
        shape = _broadcast(self, a, b)
        self.expect_dtype(a, [np.float32, np.int32, np.int64, np.int8, np.int16, np.uint8,
                              np.bool_])  # fmt: skip
        self.expect_same_dtype(a, b)
        self.expect_dtype(outputs[0], [np.bool_], "output")
        self.tables = None
        if a.dtype == np.int8 and a.quant is not None and b.quant is not None:
            tables = []
            for t in (a, b):
                m0, shift = quantize_multiplier(float(t.scale))
                tables.append(table_from_int8(lambda q, t=t, m0=m0, shift=shift: (
                    multiply_by_quantized_multiplier((q - t.zero_point) << _LEFT_SHIFT, m0,
                                                     shift)), np.int64))  # fmt: skip
            self.tables = tables
        return [shape]

    def bind(self, inputs, outputs, scratch):
        a, b = inputs
        out, ufunc = outputs[0], type(self).ufunc
        if self.tables is not None:
            t1, t2 = self.tables
            au, bu = a.view(np.uint8), b.view(np.uint8)
            return lambda: ufunc(np.take(t1, au), np.take(t2, bu), out=out)
        return lambda: ufunc(a, b, out=out)


@register("LESS", max_version=3)
class Less(_Compare):
    ufunc = np.less


@register("LESS_EQUAL", max_version=3)
class LessEqual(_Compare):
    ufunc = np.less_equal


@register("GREATER", max_version=3)
class Greater(_Compare):
    ufunc = np.greater


@register("GREATER_EQUAL", max_version=3)
class GreaterEqual(_Compare):
    ufunc = np.greater_equal


@register("EQUAL", max_version=4)
class Equal(_Compare):
    ufunc = np.equal


@register("NOT_EQUAL", max_version=3)
class NotEqual(_Compare):
    ufunc = np.not_equal


class _Logical(Kernel):
    ufunc = None

    def prepare(self, inputs, outputs):
        for t in inputs:
            self.expect_dtype(t, [np.bool_])
        if len(inputs) == 1:
            return [tuple(inputs[0].shape)]
        return [_broadcast(self, *inputs)]

    def bind(self, inputs, outputs, scratch):
        ufunc, out, args = type(self).ufunc, outputs[0], tuple(inputs)
        return lambda: ufunc(*args, out=out)


@register("LOGICAL_AND", max_version=1)
class LogicalAnd(_Logical):
    ufunc = np.logical_and


@register("LOGICAL_OR", max_version=1)
class LogicalOr(_Logical):
    ufunc = np.logical_or


@register("LOGICAL_NOT", max_version=1)
class LogicalNot(_Logical):
    ufunc = np.logical_not


class _SelectBase(Kernel):
    def prepare(self, inputs, outputs):
        if len(inputs) != 3 or None in inputs:
            raise self.fail("needs condition, x and y")
        c, x, y = inputs
        out = outputs[0]
        self.expect_dtype(c, [np.bool_], "condition")
        self.expect_same_dtype(x, y)
        self.expect_same_dtype(x, out)
        if x.dtype in (np.int8, np.int16) and x.quant is not None:
            self.expect_same_quant(x, out)
            self.expect_same_quant(y, out)
        return [self.out_shape(c, x, y)]

    def bind(self, inputs, outputs, scratch):
        c, x, y = inputs
        out = outputs[0]
        if c.ndim == 1 and x.ndim > 1 and c.shape[0] == x.shape[0] and self.rank_one:
            c = c.reshape((c.shape[0],) + (1,) * (x.ndim - 1))
        return lambda: np.copyto(out, np.where(c, x, y))


@register("SELECT", max_version=4)
class Select(_SelectBase):
    """TensorFlow's Select: same shapes, or a rank-1 condition choosing rows."""

    rank_one = True

    def out_shape(self, c, x, y):
        if tuple(x.shape) != tuple(y.shape):
            raise self.fail(f"{x} and {y} must have the same shape")
        if tuple(c.shape) != tuple(x.shape) and not (
            len(c.shape) == 1 and len(x.shape) >= 1 and c.shape[0] == x.shape[0]
        ):
            raise self.fail(f"the condition {c} must have the shape of {x} or be its rows")
        return tuple(x.shape)


@register("SELECT_V2", max_version=2)
class SelectV2(_SelectBase):
    rank_one = False

    def out_shape(self, c, x, y):
        try:
            return np.broadcast_shapes(tuple(c.shape), tuple(x.shape), tuple(y.shape))
        except ValueError:
            raise self.fail(f"{c}, {x} and {y} do not broadcast") from None
