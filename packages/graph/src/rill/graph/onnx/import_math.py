"""ONNX import rules: elementwise arithmetic, trigonometric and bitwise ops, comparisons, logic,
Where and Cast.

ONNX's elementwise ops broadcast as numpy does, and so do TensorFlow's; most map one to one.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype, static

_BINARY = {
    "Add": "AddV2",
    "Sub": "Sub",
    "Mul": "Mul",
    "BitwiseAnd": "BitwiseAnd",
    "BitwiseOr": "BitwiseOr",
    "BitwiseXor": "BitwiseXor",
}
_COMPARE = {
    "Equal": "Equal",
    "Less": "Less",
    "Greater": "Greater",
    "LessOrEqual": "LessEqual",
    "GreaterOrEqual": "GreaterEqual",
}
_UNARY = {
    "Neg": "Neg",
    "Abs": "Abs",
    "Sign": "Sign",
    "Floor": "Floor",
    "Ceil": "Ceil",
    "Round": "Round",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Erf": "Erf",
    "Tanh": "Tanh",
    "Sigmoid": "Sigmoid",
    "Cos": "Cos",
    "Sin": "Sin",
    "Tan": "Tan",
    "Asin": "Asin",
    "Acos": "Acos",
    "Atan": "Atan",
    "Sinh": "Sinh",
    "Cosh": "Cosh",
    "Asinh": "Asinh",
    "Acosh": "Acosh",
    "Atanh": "Atanh",
    "BitwiseNot": "Invert",
}


def _binary(tf_op: str):
    def rule(n, a, b):
        return op(tf_op, [a, b])

    return rule


def _unary(tf_op: str):
    def rule(n, x):
        return op(tf_op, [x])

    return rule


for _onnx, _tf in _BINARY.items():
    register_onnx_import(_onnx)(_binary(_tf))
for _onnx, _tf in _COMPARE.items():
    register_onnx_import(_onnx)(_binary(_tf))
for _onnx, _tf in _UNARY.items():
    register_onnx_import(_onnx)(_unary(_tf))


@register_onnx_import("Div")
def div(n, a, b):
    """Integers divide truncating toward zero, as TensorFlow's Div does; floats divide exactly."""
    return op("Div" if a.dtype.is_integer else "RealDiv", [a, b])


@register_onnx_import("Mod")
def mod(n, a, b, *, fmod=0):
    """fmod=0: the remainder has the divisor's sign (FloorMod); fmod=1: the dividend's (C fmod)."""
    r = op("FloorMod", [a, b])
    if not fmod or a.dtype.is_unsigned:
        return r
    zero = const(0, a.dtype)
    # Where the floored remainder's sign differs from the dividend's, the truncated one is r - b.
    differ = op("LogicalAnd", [op("NotEqual", [r, zero]),
                               op("NotEqual", [op("Less", [r, zero]), op("Less", [a, zero])])])  # fmt: skip
    return op("SelectV2", [differ, op("Sub", [r, b]), r])


@register_onnx_import("Reciprocal")
def reciprocal(n, x):
    return op("Reciprocal", [x])


@register_onnx_import("Pow")
def pow_(n, x, y):
    """The result has the base's type; a float exponent on an integer base computes in float64."""
    if x.dtype.is_integer and not y.dtype.is_integer:
        f = op("Pow", [op("Cast", [x], {"DstT": dtypes.float64}),
                       op("Cast", [y], {"DstT": dtypes.float64})])  # fmt: skip
        return op("Cast", [f], {"DstT": x.dtype})
    if y.dtype != x.dtype:
        y = op("Cast", [y], {"DstT": x.dtype})
    return op("Pow", [x, y])


def _fold(tf_op: str, xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = op(tf_op, [acc, x])
    return acc


@register_onnx_import("Max")
def max_(n, *xs):
    return op("Identity", [xs[0]]) if len(xs) == 1 else _fold("Maximum", xs)


@register_onnx_import("Min")
def min_(n, *xs):
    return op("Identity", [xs[0]]) if len(xs) == 1 else _fold("Minimum", xs)


@register_onnx_import("Sum")
def sum_(n, *xs):
    return op("Identity", [xs[0]]) if len(xs) == 1 else _fold("AddV2", xs)


@register_onnx_import("Mean")
def mean(n, *xs):
    s = op("Identity", [xs[0]]) if len(xs) == 1 else _fold("AddV2", xs)
    return op("RealDiv" if s.dtype.is_floating else "Div", [s, const(len(xs), s.dtype)])


@register_onnx_import("Clip")
def clip(n, x, lo=None, hi=None):
    """min(max(x, lo), hi): with lo > hi every element is hi, as ONNX specifies. An absent
    bound of a floating clip is the type's lowest or largest finite value, as ONNX defines it
    (so +inf clipped from below only becomes the largest float, as in onnxruntime). A clip of a
    floating tensor to [0, 6] is Relu6 (the same ufuncs, one op, which the remapper fuses into a
    preceding convolution)."""
    if x.dtype.is_floating:
        lo_v = None if lo is None else static(lo)
        hi_v = None if hi is None else static(hi)
        zero_lo = lo_v is not None and lo_v.shape == () and lo_v == 0 and not np.signbit(lo_v)
        if zero_lo and hi_v is not None and hi_v.shape == () and hi_v == 6:
            return op("Relu6", [x])
        if (lo is None) != (hi is None):
            finfo = ml_dtypes.finfo(x.dtype.np)  # (numpy's finfo does not know bfloat16)
            if lo is None:
                lo = const(float(finfo.min), x.dtype)
            else:
                hi = const(float(finfo.max), x.dtype)
    y = x
    if lo is not None:
        y = op("Maximum", [y, lo])
    if hi is not None:
        y = op("Minimum", [y, hi])
    return op("Identity", [y]) if y is x else y


@register_onnx_import("And")
def and_(n, a, b):
    return op("LogicalAnd", [a, b])


@register_onnx_import("Or")
def or_(n, a, b):
    return op("LogicalOr", [a, b])


@register_onnx_import("Xor")
def xor(n, a, b):
    return op("NotEqual", [a, b])


@register_onnx_import("Not")
def not_(n, x):
    return op("LogicalNot", [x])


@register_onnx_import("Where")
def where(n, c, x, y):
    return op("SelectV2", [c, x, y])


@register_onnx_import("IsNaN")
def is_nan(n, x):
    return op("NotEqual", [x, x])


@register_onnx_import("IsInf")
def is_inf(n, x, *, detect_negative=1, detect_positive=1):
    inf = const(np.inf, x.dtype)
    if detect_negative and detect_positive:
        return op("Equal", [op("Abs", [x]), inf])
    if detect_positive:
        return op("Equal", [x, inf])
    if detect_negative:
        return op("Equal", [x, op("Neg", [inf])])
    return op("ZerosLike", [op("Cast", [x], {"DstT": dtypes.bool_})])


def cast_to(x, dt: dtypes.DType, saturate: int = 1, round_mode: str = "up"):
    """x as `dt` by ONNX's Cast rules; an Identity when it already is (every ONNX output is its
    own op).

    rill's Cast converts as ml_dtypes does, which is ONNX's `saturate=0`. With `saturate=1` (the
    default) a float8 target first clamps to its finite range, so ±Inf and finite values past
    ±max become ±max and NaN stays NaN; float8e8m0 rounds to a power of two by `round_mode`.
    """
    if x.dtype == dt:
        return op("Identity", [x])
    if x.dtype == dtypes.string or dt == dtypes.string:
        raise OnnxImportError(f"Cast between {x.dtype.name} and {dt.name} is not supported")
    if dt is dtypes.float8_e8m0fnu:
        return _to_e8m0(x, saturate, round_mode)
    if saturate and dt in _SATURATING and not _fits(x.dtype, dt):
        if x.dtype.is_narrow or not x.dtype.is_floating:
            x = op("Cast", [x], {"DstT": dtypes.float32})  # exact for narrow types
        x = op("Maximum", [op("Minimum", [x, const(dt.max, x.dtype)]), const(dt.min, x.dtype)])
    return op("Cast", [x], {"DstT": dt})


# The float8 types ONNX's `saturate` applies to (float8e8m0 has its own rule).
_SATURATING = (
    dtypes.float8_e4m3fn, dtypes.float8_e4m3fnuz, dtypes.float8_e5m2, dtypes.float8_e5m2fnuz,
)  # fmt: skip


def _fits(src: dtypes.DType, dst: dtypes.DType) -> bool:
    """Every value of src, infinities included, lies in dst's finite range."""
    if src.is_bool:
        return True
    if src.is_complex:
        return False
    has_inf = src.is_floating and np.isinf(np.array(np.inf).astype(src.np))
    return not has_inf and dst.min <= src.min and src.max <= dst.max


_E8M0_MIN, _E8M0_MAX = 2.0**-127, 2.0**127


def _to_e8m0(x, saturate: int, round_mode: str):
    """x to float8e8m0 (powers of two 2**-127 .. 2**127, and NaN), by ONNX's rules.

    The magnitude decides (ONNX leaves negative inputs unspecified). rill's Cast rounds |x|,
    clamped to the range, to the nearest power of two; comparing that one with |x| in float64
    (exact for every power of two and every input type) moves it to the one `round_mode` asks
    for: `up` the smallest power of two >= |x|, `down` the largest <= |x|, `nearest` the nearer
    with ties up. With `saturate`, |x| is clamped to the range first (0 gives 2**-127, Inf
    2**127); without it, Inf and a result out of the range are NaN."""
    if round_mode not in ("up", "down", "nearest"):
        raise OnnxImportError(f"Cast round_mode must be up, down or nearest, got {round_mode!r}")
    f64 = dtypes.float64
    a = x if x.dtype is f64 else op("Cast", [x], {"DstT": f64})
    a = op("Abs", [a])
    clamped = op("Maximum", [op("Minimum", [a, const(_E8M0_MAX, f64)]), const(_E8M0_MIN, f64)])
    if saturate:
        a = clamped
    near = op("Cast", [op("Cast", [clamped], {"DstT": dtypes.float8_e8m0fnu})], {"DstT": f64})
    two = const(2.0, f64)
    if round_mode == "up":
        r = op("SelectV2", [op("Less", [near, a]), op("Mul", [near, two]), near])
    else:
        r = op("SelectV2", [op("Greater", [near, a]), op("Mul", [near, const(0.5, f64)]), near])
        if round_mode == "nearest":  # r is the largest power of two <= |x|
            tie = op("Mul", [r, const(1.5, f64)])
            r = op("SelectV2", [op("GreaterEqual", [a, tie]), op("Mul", [r, two]), r])
    if not saturate:
        below = op("Less", [r, const(_E8M0_MIN, f64)])
        above = op("Greater", [r, const(_E8M0_MAX, f64)])
        inf = op("Equal", [a, const(np.inf, f64)])
        out = op("LogicalOr", [op("LogicalOr", [below, above]), inf])
        r = op("SelectV2", [out, const(np.nan, f64), r])
    return op("Cast", [r], {"DstT": dtypes.float8_e8m0fnu})


@register_onnx_import("Cast")
def cast(n, x, *, to, saturate=1, round_mode="up"):
    return cast_to(x, rill_dtype(to), saturate, round_mode)


@register_onnx_import("CastLike")
def cast_like(n, x, target, *, saturate=1, round_mode="up"):
    return cast_to(x, target.dtype, saturate, round_mode)
