"""More elementwise math: float classification, trigonometric and hyperbolic functions, special
functions (gamma family, incomplete gamma and beta, inverse erf), safe divisions and
logarithms, truncating integer division, clipping, approximate equality and the bitwise ops.

Declarations follow TensorFlow's op registry (names, inputs, attrs, type sets); builders follow
`tf.math`. Binary ops broadcast like AddV2.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 3])
...     y = xlogy(x, atan2(x, rg.constant([1.0, 2.0, 3.0])))
...     f = is_finite(y)
>>> y.op.type, y.shape, f.dtype
('Xlogy', TensorShape([None, 3]), rill.bool)
"""

from __future__ import annotations

from rill.graph import shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

_FLOAT = "bfloat16, float16, float32, float64"
_CPLX = "complex64, complex128"
_INTS = "int8, int16, int32, int64, uint8, uint16, uint32, uint64"
_NUMBER = "numbertypes"

_UNARY = (
    # name, type set, doc
    ("Sin", f"{_FLOAT}, {_CPLX}", "sin(x)."),
    ("Tan", f"{_FLOAT}, {_CPLX}", "tan(x)."),
    ("Asin", f"{_FLOAT}, {_CPLX}", "arcsin(x), in [-π/2, π/2]."),
    ("Acos", f"{_FLOAT}, {_CPLX}", "arccos(x), in [0, π]."),
    ("Atan", f"{_FLOAT}, {_CPLX}", "arctan(x)."),
    ("Sinh", f"{_FLOAT}, {_CPLX}", "sinh(x)."),
    ("Cosh", f"{_FLOAT}, {_CPLX}", "cosh(x)."),
    ("Asinh", f"{_FLOAT}, {_CPLX}", "arsinh(x)."),
    ("Acosh", f"{_FLOAT}, {_CPLX}", "arcosh(x) (NaN below 1)."),
    ("Atanh", f"{_FLOAT}, {_CPLX}", "artanh(x) (±inf at ±1, NaN outside)."),
    ("Expm1", f"{_FLOAT}, {_CPLX}", "exp(x) - 1, accurate for small x."),
    ("Erfc", _FLOAT, "1 - erf(x), accurate in the upper tail."),
    ("Erfinv", _FLOAT, "The inverse of erf on (-1, 1) (±inf at ±1)."),
    ("Lgamma", _FLOAT, "log|Γ(x)|."),
    ("Digamma", _FLOAT, "ψ(x) = d/dx log Γ(x)."),
)
for _name, _types, _doc in _UNARY:
    defop(
        _name,
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=[f"T: {{{_types}}}"],
        shape=shape_fns.unchanged,
        doc=f"{_doc} Elementwise.",
    )

for _name, _doc in (
    ("IsFinite", "Whether x is neither infinite nor NaN."),
    ("IsNan", "Whether x is NaN."),
    ("IsInf", "Whether x is +inf or -inf."),
):
    defop(
        _name,
        inputs=["x: T"],
        outputs=["y: bool"],
        attrs=[f"T: {{{_FLOAT}}}"],
        shape=shape_fns.unchanged,
        doc=f"{_doc} Elementwise.",
    )

_BINARY = (
    # name, (input names), type set, commutative, doc
    ("Atan2", ("y", "x"), _FLOAT, False, "The angle of the point (x, y): arctan(y / x) by quadrant."),
    ("Igamma", ("a", "x"), _FLOAT, False, "The regularized lower incomplete gamma P(a, x)."),
    ("Igammac", ("a", "x"), _FLOAT, False, "The regularized upper incomplete gamma Q(a, x)."),
    ("Polygamma", ("a", "x"), "float32, float64", False, "ψ⁽ᵃ⁾(x), for integer a >= 0."),
    ("Zeta", ("x", "q"), "float32, float64", False, "The Hurwitz zeta function ζ(x, q)."),
    ("IgammaGradA", ("a", "x"), "float32, float64", False, "∂P(a, x)/∂a (Igamma's gradient in a)."),
    ("DivNoNan", ("x", "y"), f"float16, float32, bfloat16, float64, {_CPLX}", False,
     "x / y, and 0 where y is 0."),
    ("MulNoNan", ("x", "y"), f"{_FLOAT}, {_CPLX}", False, "x * y, and 0 where y is 0 (even if x "
     "is inf or NaN)."),
    ("Xlogy", ("x", "y"), f"float16, bfloat16, float32, float64, {_CPLX}", False,
     "x * log(y), and 0 where x is 0."),
    ("Xdivy", ("x", "y"), f"float16, bfloat16, float32, float64, {_CPLX}", False,
     "x / y, and 0 where x is 0."),
    ("Xlog1py", ("x", "y"), f"float16, bfloat16, float32, float64, {_CPLX}", False,
     "x * log1p(y), and 0 where x is 0."),
    ("TruncateDiv", ("x", "y"), f"{_FLOAT}, uint8, int8, uint16, int16, int32, uint32, uint64, "
     f"int64, {_CPLX}", False, "x / y rounded toward zero (C's integer division)."),
    ("TruncateMod", ("x", "y"), f"int32, int64, {_FLOAT}", False,
     "The remainder of TruncateDiv: it takes the sign of x (C's fmod)."),
    ("BitwiseAnd", ("x", "y"), _INTS, True, "x & y."),
    ("BitwiseOr", ("x", "y"), _INTS, True, "x | y."),
    ("BitwiseXor", ("x", "y"), _INTS, True, "x ^ y."),
    ("LeftShift", ("x", "y"), _INTS, False,
     "x << y, the count clamped to [0, bits - 1] as TensorFlow's kernel does."),
    ("RightShift", ("x", "y"), _INTS, False,
     "x >> y, arithmetic for signed types; the count clamped to [0, bits - 1]."),
)  # fmt: skip
for _name, (_a, _b), _types, _comm, _doc in _BINARY:
    defop(
        _name,
        inputs=[f"{_a}: T", f"{_b}: T"],
        outputs=["z: T"],
        attrs=[f"T: {{{_types}}}"],
        shape=shape_fns.broadcast_binary,
        commutative=_comm,
        doc=f"{_doc} Elementwise, with broadcasting.",
    )

defop(
    "Invert",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=[f"T: {{{_INTS}}}"],
    shape=shape_fns.unchanged,
    doc="~x: every bit flipped. Elementwise.",
)
defop(
    "PopulationCount",
    inputs=["x: T"],
    outputs=["y: uint8"],
    attrs=[f"T: {{{_INTS}}}"],
    shape=shape_fns.unchanged,
    doc="The number of set bits of each element.",
)
defop(
    "ApproximateEqual",
    inputs=["x: T", "y: T"],
    outputs=["z: bool"],
    attrs=[f"T: {_NUMBER}", "tolerance: float = 1e-05"],
    shape=shape_fns.merge_all_inputs,
    commutative=True,
    doc="|x - y| < tolerance, elementwise (x and y have one shape).",
)


def _betainc_shape(op):
    shapes = [t.shape for t in op._inputs]
    out = TensorShape(None)
    for s in shapes:
        if s.rank == 0:
            continue
        if not out.is_compatible_with(s):
            raise ValueError(
                f"a, b and x must be scalars or have one shape, got {', '.join(map(str, shapes))}"
            )
        out = out.merge_with(s)
    if all(s.rank == 0 for s in shapes):
        return [TensorShape([])]
    return [out]


defop(
    "Betainc",
    inputs=["a: T", "b: T", "x: T"],
    outputs=["z: T"],
    attrs=["T: {float32, float64}"],
    shape=_betainc_shape,
    doc="The regularized incomplete beta function I_x(a, b); a, b, x scalars or of one shape.",
)


def _clip_shape(op):
    t, lo, hi = (x.shape for x in op._inputs)
    for name, s in (("clip_value_min", lo), ("clip_value_max", hi)):
        if s.rank not in (None, 0) and not s.is_compatible_with(t):
            raise ValueError(f"{name} has shape {s}; it must be a scalar or have t's shape {t}")
    return [t]


defop(
    "ClipByValue",
    inputs=["t: T", "clip_value_min: T", "clip_value_max: T"],
    outputs=["output: T"],
    attrs=["T: numbertypes"],
    shape=_clip_shape,
    doc="min(max(t, clip_value_min), clip_value_max); the bounds are scalars or t's shape.",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type: str, inputs, attrs=None, name=None) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _unary(op_type: str):
    def build(x, name=None) -> Tensor:
        return _op(op_type, [convert_to_tensor(x, name="x")], name=name)

    build.__name__ = op_type.lower()
    build.__doc__ = f"{op_type}(x), elementwise."
    return build


def _binary(op_type: str):
    def build(x, y, name=None) -> Tensor:
        if not isinstance(x, Tensor):
            x = convert_to_tensor(x, dtype=y.dtype if isinstance(y, Tensor) else None, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
        return _op(op_type, [x, y], name=name)

    build.__name__ = op_type.lower()
    build.__doc__ = f"{op_type}(x, y), elementwise with broadcasting."
    return build


sin, tan, asin, acos, atan = map(_unary, ("Sin", "Tan", "Asin", "Acos", "Atan"))
sinh, cosh, asinh, acosh, atanh = map(_unary, ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh"))
expm1, erfc, erfinv, lgamma, digamma = map(_unary, ("Expm1", "Erfc", "Erfinv", "Lgamma", "Digamma"))
is_finite, is_nan, is_inf = map(_unary, ("IsFinite", "IsNan", "IsInf"))
invert, population_count = _unary("Invert"), _unary("PopulationCount")
atan2, igamma, igammac = _binary("Atan2"), _binary("Igamma"), _binary("Igammac")
polygamma, zeta = _binary("Polygamma"), _binary("Zeta")
igamma_grad_a = _binary("IgammaGradA")
div_no_nan, multiply_no_nan = _binary("DivNoNan"), _binary("MulNoNan")
xlogy, xdivy, xlog1py = _binary("Xlogy"), _binary("Xdivy"), _binary("Xlog1py")
truncatediv, truncatemod = _binary("TruncateDiv"), _binary("TruncateMod")
bitwise_and, bitwise_or, bitwise_xor = map(_binary, ("BitwiseAnd", "BitwiseOr", "BitwiseXor"))
left_shift, right_shift = _binary("LeftShift"), _binary("RightShift")


def betainc(a, b, x, name=None) -> Tensor:
    """The regularized incomplete beta function I_x(a, b) (Betainc)."""
    x = convert_to_tensor(x, name="x")
    a = convert_to_tensor(a, dtype=x.dtype, name="a")
    b = convert_to_tensor(b, dtype=x.dtype, name="b")
    return _op("Betainc", [a, b, x], name=name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None) -> Tensor:
    """t clipped to [clip_value_min, clip_value_max] (ClipByValue)."""
    t = convert_to_tensor(t, name="t")
    lo = convert_to_tensor(clip_value_min, dtype=t.dtype, name="clip_value_min")
    hi = convert_to_tensor(clip_value_max, dtype=t.dtype, name="clip_value_max")
    return _op("ClipByValue", [t, lo, hi], name=name)


def approximate_equal(x, y, tolerance: float = 1e-5, name=None) -> Tensor:
    """|x - y| < tolerance (ApproximateEqual)."""
    x = convert_to_tensor(x, name="x")
    y = convert_to_tensor(y, dtype=x.dtype, name="y")
    return _op("ApproximateEqual", [x, y], {"tolerance": float(tolerance)}, name=name)


__all__ = [
    "sin", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1",
    "erfc", "erfinv", "lgamma", "digamma", "is_finite", "is_nan", "is_inf", "invert",
    "population_count", "atan2", "igamma", "igammac", "polygamma", "zeta", "div_no_nan",
    "multiply_no_nan", "xlogy", "xdivy", "xlog1py", "truncatediv", "truncatemod", "bitwise_and",
    "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "betainc", "clip_by_value",
    "approximate_equal",
]  # fmt: skip
