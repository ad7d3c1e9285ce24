"""Gradient samples for the math op family (math_ops, logic_ops, matmul_ops, reduction_ops).

Inputs stay away from the points where an op is not differentiable (|x| and sign at 0, max and
min ties, integer crossings of floor_mod) and inside each function's domain (positive bases for
Pow and roots, divisors away from 0). `partial(x, shape)` hides static dimensions behind a
PlaceholderWithDefault, so that the gradients' run-time shape paths are checked as well.
"""

import numpy as np

import rill.graph as rg
from op_samples import rand, sample
from rill.graph.ops import extra_ops, math_ops


def partial(x, shape):
    """x with only the static shape `shape` (None for unknown dimensions, None for unknown rank)."""
    return rg.placeholder_with_default(x, shape)


def raw(op_type, *inputs, **attrs):
    """One op of this type, for ops that no builder makes from float inputs (Add, Div)."""
    return rg.get_default_graph().create_op(op_type, list(inputs), attrs or None).outputs[0]


def signed(*shape, lo=0.2, hi=1.0):
    """Values with random signs and magnitudes in [lo, hi): away from 0."""
    return rand(*shape, lo=lo, hi=hi) * np.where(rand(*shape) < 0, -1.0, 1.0)


def distinct(*shape):
    """Values at least 0.05 apart, so small perturbations never change which one is largest."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(11)
    return ((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(0, 0.01, n)).reshape(shape)


def positive(*shape):
    return rand(*shape, lo=0.5, hi=1.5)


# -- broadcasting binary ops --------------------------------------------------------------------

_BINARY = {
    "AddV2": lambda x, y: rg.add(x, y),
    "Sub": lambda x, y: rg.subtract(x, y),
    "Mul": lambda x, y: rg.multiply(x, y),
    "RealDiv": lambda x, y: rg.realdiv(x, y),
    "SquaredDifference": lambda x, y: rg.squared_difference(x, y),
}
_SHAPE_CASES = [
    ("", (2, 3), (2, 3)),
    ("row", (2, 3), (3,)),
    ("outer", (2, 1), (1, 3)),
    ("scalar_x", (), (2, 3)),
    ("rank3_keep_and_drop", (4, 1, 3), (2, 1)),
]
for _op, _fn in _BINARY.items():
    for _name, _sx, _sy in _SHAPE_CASES:
        _y = positive(*_sy) if _op == "RealDiv" else rand(*_sy)
        sample(_op, [rand(*_sx), _y], _fn, name=_name)
    # An unknown batch dimension that the other operand does not stretch: static axes still.
    sample(
        _op,
        [rand(4, 3), positive(3)],
        lambda x, y, f=_fn: f(partial(x, [None, 3]), y),
        name="partial_batch",
    )
    # Unknown dimensions on both sides: the reduction axes come from BroadcastGradientArgs.
    sample(
        _op,
        [rand(4, 1), positive(1, 3)],
        lambda x, y, f=_fn: f(partial(x, [None, None]), partial(y, [None, 3])),
        name="runtime_shapes",
    )
    sample(
        _op,
        [rand(2, 3), positive(3)],
        lambda x, y, f=_fn: rg.reshape(f(partial(x, None), y), [2, 3]),
        name="unknown_rank",
    )

sample("Add", [rand(2, 3), rand(3)], lambda x, y: raw("Add", x, y))
sample("Div", [rand(2, 3), positive(2, 1)], lambda x, y: raw("Div", x, y))
sample("Div", [rand(3), positive(3)], lambda x, y: raw("Div", x, y), name="same_shape")

# floor(x / y) is 2 throughout, 0.05 away from the jumps at 2 and 3.
_fm_y = rand(3, lo=1.0, hi=1.5)
_fm_x = _fm_y * rand(2, 3, lo=2.05, hi=2.95)
sample("FloorMod", [_fm_x, np.broadcast_to(_fm_y, (2, 3))], lambda x, y: rg.floormod(x, y))
sample("FloorMod", [_fm_x, _fm_y], lambda x, y: rg.floormod(x, y), name="broadcast")

sample("Pow", [positive(2, 3), rand(2, 3)], lambda x, y: rg.pow(x, y))
sample("Pow", [positive(2, 3), rand(3)], lambda x, y: rg.pow(x, y), name="broadcast_exponent")
sample("Pow", [positive(3), rand(2, 1)], lambda x, y: rg.pow(x, y), name="outer")
sample("Pow", [positive(2, 3), rand()], lambda x, y: rg.pow(x, y), name="scalar_exponent")

_mx = distinct(2, 3)
_my = _mx + np.where(rand(2, 3) < 0, -0.03, 0.03)  # never equal to x
for _op, _fn in (("Maximum", rg.maximum), ("Minimum", rg.minimum)):
    sample(_op, [_mx, _my], _fn)
    sample(_op, [distinct(2, 3), np.array([0.013, -0.021, 0.037])], _fn, name="row")
    sample(_op, [distinct(4, 1), distinct(1, 3) + 0.005], _fn, name="outer")

# -- unary ops ----------------------------------------------------------------------------------

_UNARY = {
    "Neg": (rg.negative, rand),
    "Abs": (rg.abs, signed),
    "Sign": (rg.sign, signed),
    "Square": (rg.square, rand),
    "Sqrt": (rg.sqrt, positive),
    "Rsqrt": (rg.rsqrt, positive),
    "Exp": (rg.exp, rand),
    "Log": (rg.log, positive),
    "Log1p": (rg.log1p, rand),
    "Reciprocal": (rg.reciprocal, signed),
    "Tanh": (rg.tanh, lambda *s: rand(*s, lo=-2.0, hi=2.0)),
    "Sigmoid": (rg.sigmoid, lambda *s: rand(*s, lo=-3.0, hi=3.0)),
    "Erf": (rg.erf, rand),
}
for _op, (_fn, _values) in _UNARY.items():
    sample(_op, [_values(2, 3)], _fn)
sample("Log1p", [rand(4, lo=-0.9, hi=-0.5)], rg.log1p, name="near_minus_one")

# Complex values only appear in between: the samples' inputs and outputs are real.
_C128 = rg.complex128
sample(
    "Conj",
    [rand(2, 3, lo=-1.5, hi=-0.5), rand(2, 3)],
    lambda x, y: rg.abs(
        rg.conj(rg.sqrt(rg.cast(x, _C128))) + rg.cast(y, _C128) * rg.sqrt(rg.cast(x, _C128))
    ),
)
sample("ComplexAbs", [signed(2, 3)], lambda x: rg.abs(rg.cast(x, _C128)))
sample(
    "ComplexAbs",
    [rand(4, lo=-1.5, hi=-0.5), rand(4)],
    lambda x, y: rg.abs(rg.sqrt(rg.cast(x, _C128)) + rg.cast(y, _C128)),
    name="off_axis",
)
sample("Cast", [rand(2, 3)], lambda x: rg.cast(rg.cast(x, _C128), rg.float64), name="via_complex")
sample("Cast", [rand(3)], lambda x: rg.cast(x, rg.float32), name="to_float32", delta=1e-2, tol=1e-4)

# -- the gradient helpers (their own gradients are second derivatives) --------------------------

_HELPERS = {
    "TanhGrad": (math_ops.tanh_grad, lambda: rand(2, 3, lo=-0.9, hi=0.9)),
    "SigmoidGrad": (math_ops.sigmoid_grad, lambda: rand(2, 3, lo=0.1, hi=0.9)),
    "SqrtGrad": (math_ops.sqrt_grad, lambda: positive(2, 3)),
    "RsqrtGrad": (math_ops.rsqrt_grad, lambda: positive(2, 3)),
    "ReciprocalGrad": (math_ops.reciprocal_grad, lambda: signed(2, 3)),
}
for _op, (_fn, _values) in _HELPERS.items():
    sample(_op, [_values(), rand(2, 3)], _fn)
# Second derivatives through the forward op: d/dx of (d/dx f(x)) · g.
sample("TanhGrad", [rand(3)], lambda x: _second(rg.tanh, x), name="through_tanh")
sample("SigmoidGrad", [rand(3)], lambda x: _second(rg.sigmoid, x), name="through_sigmoid")
sample("SqrtGrad", [positive(3)], lambda x: _second(rg.sqrt, x), name="through_sqrt")
sample("RsqrtGrad", [positive(3)], lambda x: _second(rg.rsqrt, x), name="through_rsqrt")
sample(
    "ReciprocalGrad", [signed(3)], lambda x: _second(rg.reciprocal, x), name="through_reciprocal"
)


def _second(f, x):
    from rill.autodiff import gradients

    (dx,) = gradients(rg.reduce_sum(f(x) * x), [x])
    return dx


# -- sums of lists, selection ---------------------------------------------------------------------

sample("AddN", [rand(2, 3), rand(2, 3), rand(2, 3)], lambda a, b, c: rg.add_n([a, b, c]))

_cond = np.array([[True, False, True], [False, False, True]])
sample("Select", [rand(2, 3), rand(2, 3)], lambda a, b: rg.select(_cond, a, b))
sample(
    "Select",
    [rand(2, 3), rand(2, 3)],
    lambda a, b: rg.select(np.array([False, True]), a, b),
    name="row_condition",
)
sample("Select", [rand(3), rand(3)], lambda a, b: rg.select(True, a, b), name="scalar_condition")
sample("SelectV2", [rand(2, 3), rand(2, 3)], lambda a, b: rg.select_v2(_cond, a, b))
sample(
    "SelectV2",
    [rand(3), rand(2, 1)],
    lambda a, b: rg.select_v2(np.array([True, False, True]), a, b),
    name="broadcast",
)
sample(
    "SelectV2",
    [rand(2, 1), rand()],
    lambda a, b: rg.select_v2(_cond, a, b),
    name="condition_broadcasts",
)
sample(
    "SelectV2",
    [rand(4, 3), rand(4, 1)],
    lambda a, b: rg.select_v2(rg.greater(a, 0.0), partial(a, [None, 3]), partial(b, [None, None])),
    name="runtime_shapes",
)

# -- reductions ---------------------------------------------------------------------------------

_REDUCE = {
    "Sum": (rg.reduce_sum, rand),
    "Mean": (rg.reduce_mean, rand),
    "Max": (rg.reduce_max, distinct),
    "Min": (rg.reduce_min, distinct),
    "Prod": (rg.reduce_prod, signed),
}
_AXES = [
    ("", None, False),
    ("axis1", 1, False),
    ("axis0", 0, False),
    ("keepdims", [0, 2], True),
    ("inner_axes", [0, 2], False),
    ("negative", -1, False),
    ("no_axes", [], False),
]
for _op, (_fn, _values) in _REDUCE.items():
    for _name, _axis, _keep in _AXES:
        sample(
            _op,
            [_values(2, 3, 4)],
            lambda x, f=_fn, a=_axis, k=_keep: f(x, a, keepdims=k),
            name=_name,
        )
    sample(
        _op,
        [_values(3, 2, 4)],
        lambda x, f=_fn: f(partial(x, [None, 2, None]), [0, 1]),
        name="partial_shape",
    )
    sample(
        _op,
        [_values(3, 2, 4)],
        lambda x, f=_fn: f(partial(x, [None, 2, 4]), 2),
        name="partial_one_unknown",
    )
    sample(
        _op,
        [_values(2, 3)],
        lambda x, f=_fn: rg.reshape(f(partial(x, None), 1), [2]),
        name="unknown_rank",
    )
    sample(
        _op,
        [_values(2, 3, 4)],
        lambda x, f=_fn: rg.reshape(f(x, partial(np.array([2, 0], np.int32), [None])), [3]),
        name="runtime_axes",
    )
    sample(
        _op,
        [_values(2, 3)],
        lambda x, f=_fn: f(x, partial(np.array([-1], np.int64), [None]), keepdims=True),
        name="runtime_axes_keepdims",
    )

# Prod is multilinear, so its gradient is exact at zeros as well: one zero gets the product of
# the others, and with two zeros in a reduction every gradient is 0.
_with_zeros = signed(3, 4)
_with_zeros[0, 1] = 0.0
_with_zeros[1, 0] = _with_zeros[1, 3] = 0.0
sample("Prod", [_with_zeros], lambda x: rg.reduce_prod(x, 1), name="zeros")
sample("Prod", [_with_zeros], lambda x: rg.reduce_prod(x, 0, keepdims=True), name="zeros_axis0")
sample("Prod", [_with_zeros], lambda x: rg.reduce_prod(x), name="zeros_all")

for _exclusive in (False, True):
    for _reverse in (False, True):
        sample(
            "Cumsum",
            [rand(3, 4)],
            lambda x, e=_exclusive, r=_reverse: rg.cumsum(x, 1, exclusive=e, reverse=r),
            name=f"exclusive{int(_exclusive)}_reverse{int(_reverse)}",
        )
sample("Cumsum", [rand(3, 2)], lambda x: rg.cumsum(x, -2), name="axis_neg")

# -- matrix products ----------------------------------------------------------------------------

for _ta in (False, True):
    for _tb in (False, True):
        _a = rand(3, 2) if _ta else rand(2, 3)
        _b = rand(4, 3) if _tb else rand(3, 4)
        sample(
            "MatMul",
            [_a, _b],
            lambda a, b, ta=_ta, tb=_tb: rg.matmul(a, b, transpose_a=ta, transpose_b=tb),
            name=f"ta{int(_ta)}_tb{int(_tb)}",
        )
sample(
    "MatMul",
    [rand(2, 3), rand(3, 4)],
    lambda a, b: rg.matmul(partial(a, [None, 3]), b),
    name="partial_batch",
)

for _ax in (False, True):
    for _ay in (False, True):
        _x = rand(2, 3, 2) if _ax else rand(2, 2, 3)
        _y = rand(2, 4, 3) if _ay else rand(2, 3, 4)
        sample(
            "BatchMatMulV2",
            [_x, _y],
            lambda x, y, a=_ax, b=_ay: rg.matmul(x, y, adjoint_a=a, adjoint_b=b),
            name=f"adj_x{int(_ax)}_adj_y{int(_ay)}",
        )
sample(
    "BatchMatMulV2",
    [rand(2, 1, 2, 3), rand(4, 3, 2)],
    lambda x, y: rg.matmul(x, y),
    name="broadcast_batch",
)
sample(
    "BatchMatMulV2",
    [rand(2, 3), rand(5, 3, 2)],
    lambda x, y: rg.matmul(x, y),
    name="matrix_times_batch",
)
sample(
    "BatchMatMulV2",
    [rand(3, 1, 2, 3), rand(4, 2, 3)],
    lambda x, y: rg.matmul(x, y, transpose_b=True),
    name="broadcast_transpose_b",
)
sample(
    "BatchMatMulV2",
    [rand(3, 1, 2, 3), rand(4, 3, 2)],
    lambda x, y: rg.matmul(partial(x, [None, None, 2, 3]), partial(y, [None, 3, 2])),
    name="runtime_batch",
)

# Cross (rill.graph.ops.extra_ops): both inputs' gradients, batched 3-vectors.
sample("Cross", [rand(4, 3), rand(4, 3)], lambda a, b: extra_ops.cross(a, b))
