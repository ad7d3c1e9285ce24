"""Math ops: elementwise arithmetic, casts, sums of lists and ranges.

Comparisons, logic and selection live in logic_ops, reductions, arg-max/min and cumulative
sums in reduction_ops, matrix products in matmul_ops. Builders follow TensorFlow-1's
Python API (`tf.add`, `tf.truediv`, `tf.matmul`, ...), op names included; the Python operators on
Tensor build the same ops under TensorFlow's operator names (`x * 2.0` makes `mul/y` and `mul`).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.int32, [None, 3], name="x")
...     y = x / 2
>>> y.op.type, y.dtype, [t.op.name for t in y.op.inputs]
('RealDiv', rill.float64, ['truediv/Cast', 'truediv/Cast_1'])
"""

from __future__ import annotations

import builtins

import numpy as np

from rill.graph import dtypes, shape_fns
from rill.graph.errors import GraphTypeError
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = [
    "add",
    "subtract",
    "multiply",
    "scalar_mul",
    "divide",
    "truediv",
    "realdiv",
    "div",
    "floordiv",
    "floormod",
    "mod",
    "negative",
    "abs",
    "sign",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "cos",
    "log",
    "log1p",
    "pow",
    "maximum",
    "minimum",
    "reciprocal",
    "tanh",
    "sigmoid",
    "erf",
    "floor",
    "ceil",
    "round",
    "conj",
    "squared_difference",
    "cast",
    "to_float",
    "to_double",
    "to_int32",
    "to_int64",
    "add_n",
    "range",
]

# Type sets, spelled as TensorFlow's op registry has them (rill has no quantized types).
_FLOAT = "bfloat16, float16, float32, float64"
_CPLX = "complex64, complex128"
_SINT = "int8, int16, int32, int64"
_UINT = "uint8, uint16, uint32, uint64"
_REAL = f"{_FLOAT}, {_SINT}, {_UINT}"
_NUM = f"{_REAL}, {_CPLX}"
_FLOAT_CPLX = f"{_FLOAT}, {_CPLX}"
_SIGNED = f"{_FLOAT}, {_SINT}, {_CPLX}"


# -- shape functions ------------------------------------------------------------------------------


def range_length(start, limit, delta) -> int:
    """The number of elements of Range(start, limit, delta), computed in the values' own type as
    TensorFlow's kernel does; ValueError for a range that the kernel rejects."""
    if delta == 0:
        raise ValueError(f"requires delta != 0, got delta={delta}")
    if delta > 0 and start > limit:
        raise ValueError(f"requires start <= limit when delta > 0, got {start} and {limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"requires start >= limit when delta < 0, got {start} and {limit}")
    if isinstance(start, (np.integer, int)):
        span, step = builtins.abs(int(limit) - int(start)), builtins.abs(int(delta))
        return (span + step - 1) // step
    return int(np.ceil(np.abs((limit - start) / delta)))


def _range_shape(op) -> TensorShape:
    vals = []
    for name, t in zip(("start", "limit", "delta"), op._inputs):
        if t.shape.rank is not None and t.shape.rank != 0:
            raise ValueError(f"{name} has shape {t.shape}; it must be a scalar")
        vals.append(constant_value(t))
    if any(v is None for v in vals):
        return TensorShape([None])
    return TensorShape([range_length(*(np.asarray(v)[()] for v in vals))])


# -- declarations ---------------------------------------------------------------------------------

_BINARY = (
    # name, T, doc, commutative, aggregate
    ("AddV2", _NUM, "x + y, with broadcasting.", True, True),
    ("Add", f"{_FLOAT}, uint8, {_SINT}, {_CPLX}, string", "x + y, with broadcasting.", False, False),
    ("Sub", _NUM, "x - y, with broadcasting.", False, False),
    ("Mul", _NUM, "x * y, with broadcasting.", True, False),
    ("RealDiv", _NUM, "x / y for real and complex types, with broadcasting.", False, False),
    ("Div", _NUM, "x / y; integers truncate toward zero.", False, False),
    ("FloorDiv", _NUM, "floor(x / y), with broadcasting.", False, False),
    ("FloorMod", _REAL, "x - floor(x / y) * y: the remainder takes the sign of y.", False, False),
    ("Pow", _SIGNED, "x ** y, with broadcasting.", False, False),
    ("Maximum", _REAL, "max(x, y), with broadcasting; NaN propagates.", False, False),
    ("Minimum", _REAL, "min(x, y), with broadcasting; NaN propagates.", False, False),
    ("SquaredDifference", f"{_FLOAT}, int32, int64, {_CPLX}", "(x - y) * conj(x - y).", True, False),
)  # fmt: skip
for _name, _types, _doc, _comm, _agg in _BINARY:
    defop(
        _name,
        inputs=["x: T", "y: T"],
        outputs=["z: T"],
        attrs=[f"T: {{{_types}}}"],
        shape=shape_fns.broadcast_binary,
        commutative=_comm,
        aggregate=_agg,
        doc=_doc,
    )

_UNARY = (
    ("Neg", _SIGNED, "-x."),
    ("Abs", f"{_FLOAT}, {_SINT}", "|x| (the most negative integer stays itself)."),
    ("Sign", _SIGNED, "-1, 0 or 1 by the sign of x (x / |x| for complex; NaN stays NaN)."),
    ("Square", _NUM, "x * x."),
    ("Sqrt", _FLOAT_CPLX, "The square root of x."),
    ("Rsqrt", _FLOAT_CPLX, "1 / sqrt(x)."),
    ("Exp", _FLOAT_CPLX, "e ** x."),
    ("Log", _FLOAT_CPLX, "The natural logarithm of x."),
    ("Log1p", _FLOAT_CPLX, "log(1 + x), accurate for small x."),
    ("Reciprocal", _SIGNED, "1 / x."),
    ("Tanh", _FLOAT_CPLX, "The hyperbolic tangent of x."),
    ("Cos", _FLOAT_CPLX, "The cosine of x (radians)."),
    ("Sigmoid", _FLOAT_CPLX, "1 / (1 + exp(-x))."),
    ("Erf", _FLOAT, "The Gauss error function of x."),
    ("Floor", _FLOAT, "The largest integer not greater than x."),
    ("Ceil", _FLOAT, "The smallest integer not less than x."),
    ("Round", _SIGNED, "x rounded to the nearest integer, halves to even."),
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

defop(
    "Conj",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=[f"T: {{{_CPLX}, variant}} = complex64"],
    shape=shape_fns.unchanged,
    doc="The complex conjugate of each element.",
)

defop(
    "ComplexAbs",
    inputs=["x: T"],
    outputs=["y: Tout"],
    attrs=[f"T: {{{_CPLX}}} = complex64", "Tout: {float32, float64} = float32"],
    shape=shape_fns.unchanged,
    doc="|x| of complex x, as a real number.",
)

# Gradient helpers: z = f'(x) * dy written in terms of the forward output y = f(x).
for _name, _doc in (
    ("TanhGrad", "dy * (1 - y * y)"),
    ("SigmoidGrad", "dy * y * (1 - y)"),
    ("SqrtGrad", "dy * 0.5 / conj(y)"),
    ("RsqrtGrad", "dy * -0.5 * conj(y) ** 3"),
    ("ReciprocalGrad", "-dy * conj(y) ** 2"),
):
    defop(
        _name,
        inputs=["y: T", "dy: T"],
        outputs=["z: T"],
        attrs=[f"T: {{{_FLOAT_CPLX}}}"],
        shape=shape_fns.merge_all_inputs,
        doc=f"z = {_doc}, where y is the forward op's output (no broadcasting).",
    )

defop(
    "Cast",
    inputs=["x: SrcT"],
    outputs=["y: DstT"],
    attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
    shape=shape_fns.unchanged,
    doc="x converted to DstT. Truncate drops extra mantissa bits instead of rounding.",
)

defop(
    "AddN",
    inputs=["inputs: N * T"],
    outputs=["sum: T"],
    attrs=["N: int >= 1", f"T: {{{_NUM}, variant}}"],
    shape=shape_fns.merge_all_inputs,
    commutative=True,
    aggregate=True,
    doc="The sum of N tensors of one shape (no broadcasting).",
)

defop(
    "Range",
    inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
    outputs=["output: Tidx"],
    attrs=[f"Tidx: {{{_FLOAT}, {_SINT}, uint16, uint32, uint64}} = int32"],
    shape=_range_shape,
    doc="start, start + delta, ... up to but excluding limit.",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type: str, inputs, attrs: dict | None = None, name: str | None = None) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _convert_pair(x, y, names=("x", "y")) -> tuple[Tensor, Tensor]:
    """Converts Python and numpy values among x and y to tensors named `names` in the current
    name scope, taking the dtype of the other operand when that is a tensor."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x, dtype=y.dtype if isinstance(y, Tensor) else None, name=names[0])
    if not isinstance(y, Tensor):
        y = convert_to_tensor(y, dtype=x.dtype, name=names[1])
    return x, y


def add(x, y, name: str | None = None) -> Tensor:
    """x + y with broadcasting (AddV2; Add for strings).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     rg.add(rg.placeholder(rg.float32, [None, 3]), [1.0, 2.0, 3.0])
    <Tensor 'Add:0' f32[?,3]>
    """
    t = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
    op_type = "Add" if t is not None and t.dtype is dtypes.string else "AddV2"
    return _op(op_type, [x, y], name=name or "Add")


def subtract(x, y, name: str | None = None) -> Tensor:
    """x - y with broadcasting (Sub)."""
    return _op("Sub", [x, y], name=name)


def multiply(x, y, name: str | None = None) -> Tensor:
    """x * y with broadcasting (Mul)."""
    return _op("Mul", [x, y], name=name)


def scalar_mul(scalar, x, name: str | None = None) -> Tensor:
    """scalar * x, where scalar must be a 0-d value (converted to x's dtype as "scalar")."""
    x = convert_to_tensor(x, name="x")
    s = convert_to_tensor(scalar, dtype=x.dtype, name="scalar")
    if s.shape.rank != 0:
        raise ValueError(f"scalar_mul needs a scalar, got shape {s.shape}")
    return _op("Mul", [s, x], name=name)


# The floating type that `/` computes in for integer operands (TensorFlow's truediv table).
_TRUEDIV_TYPES = {
    dtypes.int8: dtypes.float32,
    dtypes.uint8: dtypes.float32,
    dtypes.int16: dtypes.float32,
    dtypes.uint16: dtypes.float32,
    dtypes.int32: dtypes.float64,
    dtypes.uint32: dtypes.float64,
    dtypes.int64: dtypes.float64,
    dtypes.uint64: dtypes.float64,
}


def truediv(x, y, name: str | None = None) -> Tensor:
    """x / y as true division (RealDiv); integers are first cast to float32 (8 and 16 bits) or
    float64 (32 and 64 bits), so the result is always floating or complex.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     rg.truediv(rg.placeholder(rg.int16, [2]), 3).dtype
    rill.float32
    """
    g = get_default_graph()
    with g.name_scope(name or "truediv") as scope:
        x, y = _convert_pair(x, y)
        if x.dtype is not y.dtype:
            raise GraphTypeError(
                f"truediv: x and y must have the same dtype, got {x.dtype.name} ({x.name}) and "
                f"{y.dtype.name} ({y.name})"
            )
        if x.dtype.is_integer:
            x = cast(x, _TRUEDIV_TYPES[x.dtype])
            y = cast(y, _TRUEDIV_TYPES[y.dtype])
        elif not (x.dtype.is_floating or x.dtype.is_complex):
            raise GraphTypeError(f"truediv: invalid dtype {x.dtype.name} ({x.name})")
        return _op("RealDiv", [x, y], name=scope)


def divide(x, y, name: str | None = None) -> Tensor:
    """x / y as Python 3 division; see truediv."""
    return truediv(x, y, name=name)


def realdiv(x, y, name: str | None = None) -> Tensor:
    """x / y for floating and complex types (RealDiv)."""
    return _op("RealDiv", [x, y], name=name)


def div(x, y, name: str | None = None) -> Tensor:
    """x / y as Python 2 division: true division for floats, floor division for integers."""
    g = get_default_graph()
    with g.name_scope(name or "div") as scope:
        x, y = _convert_pair(x, y)
        if x.dtype.is_floating or x.dtype.is_complex:
            return _op("RealDiv", [x, y], name=scope)
        return _op("FloorDiv", [x, y], name=scope)


def floordiv(x, y, name: str | None = None) -> Tensor:
    """floor(x / y) (FloorDiv); for integers this is Python's //."""
    return _op("FloorDiv", [x, y], name=name or "floordiv")


def floormod(x, y, name: str | None = None) -> Tensor:
    """The remainder of floor division, with the sign of y, as Python's % (FloorMod)."""
    return _op("FloorMod", [x, y], name=name)


mod = floormod


def pow(x, y, name: str | None = None) -> Tensor:
    """x ** y (Pow). Integer x to a negative integer power is a run-time error."""
    return _op("Pow", [x, y], name=name)


def maximum(x, y, name: str | None = None) -> Tensor:
    """The elementwise maximum of x and y, with broadcasting (Maximum)."""
    return _op("Maximum", [x, y], name=name)


def minimum(x, y, name: str | None = None) -> Tensor:
    """The elementwise minimum of x and y, with broadcasting (Minimum)."""
    return _op("Minimum", [x, y], name=name)


def squared_difference(x, y, name: str | None = None) -> Tensor:
    """(x - y) * conj(x - y) (SquaredDifference)."""
    return _op("SquaredDifference", [x, y], name=name)


def negative(x, name: str | None = None) -> Tensor:
    """-x (Neg)."""
    return _op("Neg", [x], name=name)


def abs(x, name: str | None = None) -> Tensor:
    """|x| (Abs); for complex x, the real magnitude (ComplexAbs)."""
    x = convert_to_tensor(x, name="x")
    if x.dtype.is_complex:
        return _op("ComplexAbs", [x], {"Tout": x.dtype.real_dtype}, name=name)
    return _op("Abs", [x], name=name)


def sign(x, name: str | None = None) -> Tensor:
    """-1, 0 or 1 by the sign of x (Sign)."""
    return _op("Sign", [x], name=name)


def square(x, name: str | None = None) -> Tensor:
    """x * x (Square)."""
    return _op("Square", [x], name=name)


def sqrt(x, name: str | None = None) -> Tensor:
    """The square root of x (Sqrt)."""
    return _op("Sqrt", [x], name=name)


def rsqrt(x, name: str | None = None) -> Tensor:
    """1 / sqrt(x) (Rsqrt)."""
    return _op("Rsqrt", [x], name=name)


def cos(x, name: str | None = None) -> Tensor:
    """The cosine of x, in radians (Cos)."""
    return _op("Cos", [x], name=name)


def exp(x, name: str | None = None) -> Tensor:
    """e ** x (Exp)."""
    return _op("Exp", [x], name=name)


def log(x, name: str | None = None) -> Tensor:
    """The natural logarithm of x (Log)."""
    return _op("Log", [x], name=name)


def log1p(x, name: str | None = None) -> Tensor:
    """log(1 + x) (Log1p)."""
    return _op("Log1p", [x], name=name)


def reciprocal(x, name: str | None = None) -> Tensor:
    """1 / x (Reciprocal)."""
    return _op("Reciprocal", [x], name=name)


def tanh(x, name: str | None = None) -> Tensor:
    """The hyperbolic tangent of x (Tanh)."""
    return _op("Tanh", [x], name=name)


def sigmoid(x, name: str | None = None) -> Tensor:
    """1 / (1 + exp(-x)) (Sigmoid)."""
    return _op("Sigmoid", [x], name=name)


def erf(x, name: str | None = None) -> Tensor:
    """The Gauss error function of x (Erf)."""
    return _op("Erf", [x], name=name)


def floor(x, name: str | None = None) -> Tensor:
    """The largest integer not greater than x (Floor)."""
    return _op("Floor", [x], name=name)


def ceil(x, name: str | None = None) -> Tensor:
    """The smallest integer not less than x (Ceil)."""
    return _op("Ceil", [x], name=name)


def round(x, name: str | None = None) -> Tensor:
    """x rounded half to even (Round); an integer tensor is returned as it is.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     i = rg.placeholder(rg.int32, [2])
    ...     rg.round(i) is i, rg.round(rg.placeholder(rg.float32, [2])).op.type
    (True, 'Round')
    """
    x = convert_to_tensor(x, name="x")
    if x.dtype.is_integer:
        return x
    return _op("Round", [x], name=name)


def conj(x, name: str | None = None) -> Tensor:
    """The complex conjugate of x (Conj); a real tensor is returned as it is."""
    x = convert_to_tensor(x, name="x")
    if x.dtype.is_complex or x.dtype is dtypes.variant:
        return _op("Conj", [x], name=name)
    if not x.dtype.is_numeric:
        raise TypeError(f"conj expects a numeric tensor, got {x.dtype.name}")
    return x


def cast(x, dtype, name: str | None = None) -> Tensor:
    """x converted to `dtype` (Cast); a tensor that already has that dtype is returned as it is.

    Floats become integers by truncation toward zero; numbers become bools by `!= 0`.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     rg.cast(rg.placeholder(rg.float32, [None]), rg.int64)
    <Tensor 'Cast:0' i64[?]>
    """
    dtype = dtypes.as_dtype(dtype)
    if isinstance(x, Tensor):
        if x.dtype is dtype:
            return x
        return _op("Cast", [x], {"DstT": dtype}, name=name)
    g = get_default_graph()
    with g.name_scope(name or "Cast") as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype is dtype:
            return x
        return _op("Cast", [x], {"DstT": dtype}, name=scope)


def to_float(x, name: str = "ToFloat") -> Tensor:
    """cast(x, float32)."""
    return cast(x, dtypes.float32, name=name)


def to_double(x, name: str = "ToDouble") -> Tensor:
    """cast(x, float64)."""
    return cast(x, dtypes.float64, name=name)


def to_int32(x, name: str = "ToInt32") -> Tensor:
    """cast(x, int32)."""
    return cast(x, dtypes.int32, name=name)


def to_int64(x, name: str = "ToInt64") -> Tensor:
    """cast(x, int64)."""
    return cast(x, dtypes.int64, name=name)


def add_n(inputs, name: str | None = None) -> Tensor:
    """The sum of a list of tensors of one shape and dtype (AddN).

    A single input is returned as it is (through an Identity named `name` when one is given).
    """
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("add_n expects a non-empty list of tensors")
    if len(inputs) == 1:
        x = convert_to_tensor(inputs[0])
        return _op("Identity", [x], name=name) if name else x
    return _op("AddN", [list(inputs)], name=name)


def tanh_grad(y, dy, name: str | None = None) -> Tensor:
    """dy * (1 - y * y) (TanhGrad), for gradient functions."""
    return _op("TanhGrad", [y, dy], name=name)


def sigmoid_grad(y, dy, name: str | None = None) -> Tensor:
    """dy * y * (1 - y) (SigmoidGrad), for gradient functions."""
    return _op("SigmoidGrad", [y, dy], name=name)


def sqrt_grad(y, dy, name: str | None = None) -> Tensor:
    """dy * 0.5 / conj(y) (SqrtGrad), for gradient functions."""
    return _op("SqrtGrad", [y, dy], name=name)


def rsqrt_grad(y, dy, name: str | None = None) -> Tensor:
    """dy * -0.5 * conj(y) ** 3 (RsqrtGrad), for gradient functions."""
    return _op("RsqrtGrad", [y, dy], name=name)


def reciprocal_grad(y, dy, name: str | None = None) -> Tensor:
    """-dy * conj(y) ** 2 (ReciprocalGrad), for gradient functions."""
    return _op("ReciprocalGrad", [y, dy], name=name)


_RANGE_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def range(start, limit=None, delta=1, dtype=None, name: str = "range") -> Tensor:
    """start, start + delta, ... up to but excluding limit (Range); range(n) counts from 0.

    Without `dtype`, the widest of the operands' types (int32 < int64 < float32 < float64) wins
    and the others are cast to it.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     r = rg.range(1, 10, 3)
    ...     r, rg.range(1.0, 4).dtype
    (<Tensor 'range:0' i32[3]>, rill.float32)
    """
    if limit is None:
        start, limit = 0, start
    g = get_default_graph()
    with g.name_scope(name) as scope:
        args = []
        for v, n in ((start, "start"), (limit, "limit"), (delta, "delta")):
            args.append(v if isinstance(v, Tensor) else convert_to_tensor(v, dtype=dtype, name=n))
        if dtype is None:
            ranks = [_RANGE_TYPES.index(t.dtype) if t.dtype in _RANGE_TYPES else -1 for t in args]
            want = args[ranks.index(max(ranks))].dtype
        else:
            want = dtypes.as_dtype(dtype)
        args = [cast(t, want) for t in args]
        return _op("Range", args, name=scope)


# -- Python operators on Tensor ---------------------------------------------------------------------
# As in TensorFlow-1, `/` is truediv. logic_ops adds the comparisons and `& | ^ ~`, matmul_ops `@`.


def _in_graph_of(t: Tensor, build):
    g = t.graph
    default = get_default_graph()
    # A graph tracing a function (tf.data's) captures outer tensors: build there, as TF does.
    if g is default or default._capture_by_default:
        return build()
    with g.as_default():
        return build()


def _binary_operator(fn, op_name: str):
    def forward(x, y):
        return _in_graph_of(x, lambda: fn(x, y, name=op_name))

    def reverse(y, x):
        return _in_graph_of(y, lambda: fn(x, y, name=op_name))

    forward.__name__, reverse.__name__ = f"__{op_name}__", f"__r{op_name}__"
    return forward, reverse


def _scoped(fn):
    """For builders that make several ops: converts Python operands inside the operator's own
    name scope (`xor/y`), as TensorFlow does, and names the result after the scope."""

    def build(x, y, name):
        with get_default_graph().name_scope(name) as scope:
            x, y = _convert_pair(x, y)
            return fn(x, y, name=scope)

    return build


for _dunder, _fn in (
    ("add", add),
    ("sub", subtract),
    ("mul", multiply),
    ("truediv", truediv),
    ("floordiv", floordiv),
    ("mod", floormod),
    ("pow", pow),
):
    _f, _r = _binary_operator(_fn, _dunder)
    Tensor._override_operator(f"__{_dunder}__", _f)
    Tensor._override_operator(f"__r{_dunder}__", _r)

for _dunder, _fn in (("neg", negative), ("abs", abs)):
    Tensor._override_operator(f"__{_dunder}__", lambda x, _fn=_fn: _in_graph_of(x, lambda: _fn(x)))


_IN_LOGIC_OPS = frozenset(
    {
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "select",
        "select_v2",
    }
)


def __getattr__(name: str):
    # TensorFlow keeps comparisons and selection in math_ops; rill declares them in logic_ops
    # (which imports this module, hence the lazy lookup).
    if name in _IN_LOGIC_OPS:
        from rill.graph.ops import logic_ops

        return getattr(logic_ops, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
