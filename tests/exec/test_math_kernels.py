"""CPU kernels of the math ops against references written here from the definitions.

Where numpy's own semantics are TensorFlow's (float arithmetic, comparisons) numpy is the
reference; where they differ (integer division and remainders, rounding, casts, overflow, NaN
handling) the reference is computed element by element in Python from TensorFlow's definition.
"""

import math

import ml_dtypes
import numpy as np
import pytest

import rill.exec  # noqa: F401 - registers the kernels
import rill.graph as rg
from rill.exec.kernel_registry import find_kernel, instantiate
from rill.exec.testing import _CPU, run_kernel
from rill.graph.errors import InvalidArgumentError, UnimplementedError

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS


def op_for(op_type, *arrays, attrs=None, dtypes=None):
    g = rg.Graph()
    with g.as_default():
        dts = dtypes or [np.asarray(a).dtype for a in arrays]
        phs = [rg.placeholder(rg.as_dtype(d), None) for d in dts]
        if op_type == "AddN":
            phs = [phs]
        return g.create_op(op_type, phs, attrs)


def run(op_type, *arrays, attrs=None, dtypes=None):
    """Runs op_type's kernel on arrays; run_kernel checks the output dtypes."""
    op = op_for(op_type, *arrays, attrs=attrs, dtypes=dtypes)
    outs = run_kernel(op, *arrays)
    return outs[0] if len(outs) == 1 else outs


def wrap(values, dtype):
    """Python ints (a possibly nested list) to `dtype` with two's-complement wrap-around."""
    info = np.iinfo(dtype)
    span = 1 << info.bits

    def fit(v):
        if isinstance(v, (list, tuple)):
            return [fit(u) for u in v]
        return ((int(v) - info.min) % span) + info.min

    return np.array(fit(values), dtype=dtype)


def assert_same(got, want, rtol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    if rtol:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def rand(shape, dtype, seed=0, lo=-10, hi=10):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(lo, hi, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


# -- binary arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(
    "op_type,ref",
    [
        ("AddV2", lambda a, b: a + b),
        ("Add", lambda a, b: a + b),
        ("Sub", lambda a, b: a - b),
        ("Mul", lambda a, b: a * b),
        ("Maximum", max),
        ("Minimum", min),
        ("SquaredDifference", lambda a, b: (a - b) * (a - b)),
    ],
)
def test_arithmetic_with_broadcasting(op_type, ref, dtype):
    x, y = rand((2, 1, 3), dtype, 1), rand((4, 1), dtype, 2)
    bx, by = np.broadcast_arrays(x, y)
    if np.dtype(dtype).kind == "i":
        want = wrap([ref(int(a), int(b)) for a, b in zip(bx.ravel(), by.ravel())], dtype)
    else:
        want = np.array([ref(float(a), float(b)) for a, b in zip(bx.ravel(), by.ravel())], dtype)
    assert_same(run(op_type, x, y), want.reshape(2, 4, 3), rtol=1e-6 if dtype is np.float32 else 0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_integer_arithmetic_wraps(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max, 3], dtype)
    y = np.array([1, 1, 2, info.max], dtype)
    for op_type, ref in (
        ("AddV2", lambda a, b: a + b),
        ("Sub", lambda a, b: a - b),
        ("Mul", lambda a, b: a * b),
    ):
        want = wrap([ref(int(a), int(b)) for a, b in zip(x, y)], dtype)
        assert_same(run(op_type, x, y), want)
    if info.min < 0:
        assert_same(run("Neg", x[1:2]), x[1:2])  # -min wraps to min
        assert_same(run("Abs", x[1:2]), x[1:2])
    assert_same(run("Square", x[:1]), wrap([int(info.max) ** 2], dtype))


def test_add_concatenates_strings():
    x = np.array([b"a", b"bc"], dtype=object)
    y = np.array([b"-"], dtype=object)
    assert run("Add", x, y).tolist() == [b"a-", b"bc-"]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_floor_div_and_mod_follow_python(dtype):
    vals = [7, -7, 6, -6, 0, 1, -1, np.iinfo(dtype).max, np.iinfo(dtype).min]
    divs = [2, -2, 3, -3, 1, -1, 5, 7, -7]
    x, y = np.meshgrid(np.array(vals, dtype), np.array(divs, dtype))
    pairs = list(zip(x.ravel().tolist(), y.ravel().tolist()))
    assert_same(run("FloorDiv", x, y), wrap([a // b for a, b in pairs], dtype).reshape(x.shape))
    assert_same(run("FloorMod", x, y), wrap([a % b for a, b in pairs], dtype).reshape(x.shape))

    def trunc_div(a, b):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    assert_same(run("Div", x, y), wrap([trunc_div(a, b) for a, b in pairs], dtype).reshape(x.shape))


def test_unsigned_division():
    x, y = np.array([7, 250, 3], np.uint8), np.array([2, 7, 5], np.uint8)
    assert_same(run("Div", x, y), np.array([3, 35, 0], np.uint8))
    assert_same(run("FloorMod", x, y), np.array([1, 5, 3], np.uint8))


@pytest.mark.parametrize("op_type", ["FloorDiv", "FloorMod", "Div"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_division_by_zero_is_an_error(op_type, dtype):
    with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
        run(op_type, np.array([1, 2], dtype), np.array([1, 0], dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_floor_div_and_mod(dtype):
    x = np.array([7, -7, 7, -7, 0, 5, np.inf, 1, -1, -0.0, 1.0, -1e-30], dtype)
    y = np.array([2, 2, -2, -2, 3, 0, 2, np.inf, np.inf, 3, 0.1, 3], dtype)

    def floor_mod(a, b):  # TensorFlow: the truncated remainder moved to the divisor's sign
        if b == 0 or math.isinf(a):
            return math.nan
        r = math.fmod(a, b)
        return r + b if r != 0 and (r < 0) != (b < 0) else r

    def floor_div(a, b):  # floor(x / y) with the quotient rounded to the operands' type
        with np.errstate(all="ignore"):
            return float(np.floor(dtype(a) / dtype(b)))

    pairs = list(zip(x.tolist(), y.tolist()))
    want_div = np.array([floor_div(a, b) for a, b in pairs], dtype)
    got = run("FloorDiv", x, y)
    assert_same(got, want_div)
    assert got[6] == np.inf  # inf // 2 is inf (numpy's floor_divide says NaN)
    want_mod = np.array([floor_mod(a, b) for a, b in pairs], dtype)
    got = run("FloorMod", x, y)
    assert_same(got, want_mod, rtol=1e-6)
    assert math.copysign(1, got[9]) == -1  # -0.0 % 3 keeps its sign
    assert got[11] == 3  # tiny negative % 3 rounds up to the divisor


@pytest.mark.parametrize("dtype", FLOATS + [np.complex64])
def test_real_div_and_div_on_floats(dtype):
    x, y = rand((3, 4), np.float64, 3).astype(dtype), rand((4,), np.float64, 4).astype(dtype)
    want = x.astype(np.complex128) / y.astype(np.complex128)
    want = (want if np.dtype(dtype).kind == "c" else want.real).astype(dtype)
    assert_same(run("RealDiv", x, y), want, rtol=1e-6)
    assert_same(run("Div", x, y), want, rtol=1e-6)


def test_division_by_zero_floats_and_complex():
    with np.errstate(all="ignore"):
        got = run("RealDiv", np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    c = run("RealDiv", np.array([1 + 1j, 0j], np.complex64), np.zeros(2, np.complex64))
    assert np.isnan(c.real).all() and np.isnan(c.imag).all()  # TensorFlow: NaN, not inf


def test_real_div_and_reciprocal_have_no_integer_kernels():
    for op_type, args in (
        ("RealDiv", (np.ones(2, np.int32),) * 2),
        ("Reciprocal", (np.ones(2, np.int32),)),
    ):
        op = op_for(op_type, *args)
        assert find_kernel(op_type, "CPU", op.attrs) is None


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_integer_pow(dtype):
    x = np.array([2, -2, 3, 0, 1, -1, 7], dtype)
    y = np.array([10, 3, 40, 0, 5, 3, 0], dtype)
    want = wrap([int(a) ** int(b) for a, b in zip(x.tolist(), y.tolist())], dtype)
    assert_same(run("Pow", x, y), want)
    with pytest.raises(InvalidArgumentError, match="negative integer powers"):
        run("Pow", x, np.array([1, 1, 1, 1, -1, 1, 1], dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_pow(dtype):
    x = np.array([2, 0, -8, -2, 0.5, 9], dtype)
    y = np.array([-1, 0, 1 / 3, 0.5, 2, 0.5], dtype)
    with np.errstate(all="ignore"):
        want = np.array([float(np.float64(a) ** np.float64(b)) for a, b in zip(x, y)], dtype)
    assert_same(run("Pow", x, y), want, rtol=1e-6)


def test_complex_pow_is_exp_of_y_log_x():
    x = np.array([1 + 1j, 2j, 0j], np.complex128)
    y = np.array([2, 0.5 + 1j, 0], np.complex128)
    got = run("Pow", x, y)
    np.testing.assert_allclose(got[:2], [2j, (2j) ** (0.5 + 1j)], rtol=1e-14)
    assert np.isnan(got[2])  # TensorFlow: exp(0 * log 0) is NaN, where numpy says 1


def test_maximum_minimum_propagate_nan():
    x = np.array([np.nan, 1, np.nan, 2], np.float32)
    y = np.array([1, np.nan, np.nan, 3], np.float32)
    assert np.isnan(run("Maximum", x, y)[:3]).all() and run("Maximum", x, y)[3] == 3
    assert np.isnan(run("Minimum", x, y)[:3]).all() and run("Minimum", x, y)[3] == 2


def test_squared_difference_of_complex_is_real_valued():
    x, y = np.array([1 + 2j, 3j], np.complex64), np.array([0j, 1 + 1j], np.complex64)
    assert_same(run("SquaredDifference", x, y), np.array([5 + 0j, 5 + 0j], np.complex64))


def test_incompatible_runtime_shapes_are_invalid_argument():
    for op_type in ("AddV2", "Mul", "FloorDiv", "Less", "Maximum", "SquaredDifference"):
        with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes: \[3\] vs. \[2\]"):
            run(op_type, np.ones(3, np.float32), np.ones(2, np.float32))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        run("LogicalAnd", np.ones(3, bool), np.ones(2, bool))


# -- comparisons and logic ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC)
def test_comparisons(dtype):
    x, y = rand((3, 1), dtype, 5, -3, 3), rand((4,), dtype, 6, -3, 3)
    bx, by = np.broadcast_arrays(x, y)
    for op_type, ref in (
        ("Less", lambda a, b: a < b),
        ("LessEqual", lambda a, b: a <= b),
        ("Greater", lambda a, b: a > b),
        ("GreaterEqual", lambda a, b: a >= b),
        ("Equal", lambda a, b: a == b),
        ("NotEqual", lambda a, b: a != b),
    ):
        want = np.array([ref(a, b) for a, b in zip(bx.ravel(), by.ravel())]).reshape(3, 4)
        assert_same(run(op_type, x, y), want)


def test_equal_on_nan_strings_and_incompatible_shapes():
    assert_same(run("Equal", np.array([np.nan, 1.0]), np.array([np.nan, 1.0])), [False, True])
    s = np.array([b"a", b"b"], dtype=object)
    assert_same(run("Equal", s, np.array([b"a", b"c"], dtype=object)), np.array([True, False]))
    attrs = {"incompatible_shape_error": False}
    a, b = np.ones(3, np.float32), np.ones(2, np.float32)
    assert_same(run("Equal", a, b, attrs=attrs), np.array(False))
    assert_same(run("NotEqual", a, b, attrs=attrs), np.array(True))
    assert_same(run("Equal", a, np.ones(1, np.float32), attrs=attrs), np.ones(3, bool))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        run("Equal", a, b)


def test_logical_ops():
    x = np.array([[True], [False]])
    y = np.array([True, False])
    assert_same(run("LogicalAnd", x, y), np.array([[True, False], [False, False]]))
    assert_same(run("LogicalOr", x, y), np.array([[True, True], [True, False]]))
    assert_same(run("LogicalNot", y), np.array([False, True]))


# -- unary -------------------------------------------------------------------------------------------

UNARY_FLOAT = [
    ("Neg", lambda v: -v),
    ("Abs", abs),
    ("Square", lambda v: v * v),
    ("Sqrt", lambda v: math.sqrt(v) if v >= 0 else math.nan),
    ("Rsqrt", lambda v: 1 / math.sqrt(v) if v > 0 else (math.inf if v == 0 else math.nan)),
    ("Exp", lambda v: math.exp(v) if v < 700 else math.inf),
    ("Log", lambda v: math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)),
    ("Log1p", lambda v: math.log1p(v) if v > -1 else (-math.inf if v == -1 else math.nan)),
    ("Reciprocal", lambda v: 1 / v if v else math.inf),
    ("Tanh", math.tanh),
    ("Cos", math.cos),
    ("Sigmoid", lambda v: 1 / (1 + math.exp(-v)) if v > -700 else 0.0),
    ("Erf", math.erf),
    ("Floor", math.floor),
    ("Ceil", math.ceil),
    ("Round", round),  # Python rounds halves to even, as TensorFlow does
    ("Sign", lambda v: (v > 0) - (v < 0)),
]


@pytest.mark.parametrize("op_type,ref", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float_ops(op_type, ref, dtype):
    vals = [0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 1e-3, 20.0, -20.0, -1.0, 100.0, -100.0]
    x = np.array(vals, dtype).reshape(2, 7)
    with np.errstate(all="ignore"):
        want = np.array([ref(float(v)) for v in x.ravel()], np.float64).astype(dtype).reshape(2, 7)
    tol = 0 if op_type in ("Neg", "Abs", "Floor", "Ceil", "Round", "Sign") else 2e-7
    got = run(op_type, x)
    if dtype is np.float32 and op_type in ("Exp", "Sigmoid"):
        # float32 results under the smallest normal are denormal here; TensorFlow flushes them.
        tiny = np.abs(want) < 1e-37
        got, want = np.where(tiny, 0, got).astype(dtype), np.where(tiny, 0, want).astype(dtype)
    assert_same(got, want, rtol=tol)


def test_round_halves_to_even_and_integers_stay():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, np.nan, -np.inf], np.float32)
    got = run("Round", x)
    assert got[:6].tolist() == [0, 2, 2, -0.0, -2, 0] and np.isnan(got[6]) and got[7] == -np.inf
    assert_same(run("Round", np.array([3, -3, 7], np.int32)), np.array([3, -3, 7], np.int32))


def test_sign_edge_cases():
    got = run("Sign", np.array([np.nan, -0.0, 0.0, -np.inf, np.inf], np.float64))
    assert np.isnan(got[0]) and got[1:].tolist() == [0, 0, -1, 1]
    assert math.copysign(1, got[1]) == 1
    assert_same(run("Sign", np.array([-5, 0, 9], np.int64)), np.array([-1, 0, 1], np.int64))
    c = run("Sign", np.array([3 + 4j, 0j], np.complex128))
    np.testing.assert_allclose(c, [0.6 + 0.8j, 0], rtol=1e-15)


def test_sigmoid_is_stable_at_both_ends():
    got = run("Sigmoid", np.array([-800, -100, 0, 100, 800], np.float64))
    np.testing.assert_allclose(
        got, [0, math.exp(-100) / (1 + math.exp(-100)), 0.5, 1, 1], rtol=1e-14
    )
    assert run("Sigmoid", np.array([-20], np.float32))[0] == pytest.approx(2.0611537e-09, rel=1e-6)


def test_erf_matches_math_erf_in_float64():
    x = np.linspace(-7, 7, 2001)
    got = run("Erf", x)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=4e-15, atol=1e-300)
    edge = run("Erf", np.array([np.nan, np.inf, -np.inf, -0.0]))
    assert np.isnan(edge[0]) and edge[1:3].tolist() == [1, -1] and math.copysign(1, edge[3]) == -1


@pytest.mark.parametrize(
    "op_type", ["Exp", "Sigmoid", "Erf", "Tanh", "Sqrt", "Square", "Floor", "Round", "Neg"]
)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_unary_keeps_dtype(op_type, dtype):
    x = np.array([0.25, 1.5, 2.0, -0.5], np.float32)
    if op_type == "Sqrt":
        x = np.abs(x)
    got = run(op_type, x.astype(dtype))
    ref = dict(UNARY_FLOAT)[op_type]
    want = np.array([ref(float(v)) for v in x.astype(dtype).astype(np.float64)]).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("dtype", INTS + [np.int8])
def test_integer_unary(dtype):
    x = np.array([-3, 0, 5, -1], dtype)
    assert_same(run("Neg", x), np.array([3, 0, -5, 1], dtype))
    assert_same(run("Abs", x), np.array([3, 0, 5, 1], dtype))
    assert_same(run("Sign", x), np.array([-1, 0, 1, -1], dtype))
    assert_same(run("Square", x), np.array([9, 0, 25, 1], dtype))


def test_complex_unary():
    z = np.array([3 + 4j, -1j], np.complex64)
    assert_same(run("Conj", z), np.array([3 - 4j, 1j], np.complex64))
    assert_same(run("ComplexAbs", z), np.array([5, 1], np.float32))
    got = run("ComplexAbs", z.astype(np.complex128), attrs={"Tout": rg.float64})
    assert_same(got, np.array([5, 1], np.float64))
    np.testing.assert_allclose(run("Exp", z), np.exp(z.astype(np.complex128)), rtol=1e-6)


@pytest.mark.parametrize(
    "op_type",
    ["Neg", "Abs", "Sign", "Square", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Erf", "Round"],
)
def test_unary_on_empty(op_type):
    got = run(op_type, np.zeros((0, 3), np.float32))
    assert got.shape == (0, 3) and got.dtype == np.float32


@pytest.mark.parametrize("op_type", ["AddV2", "FloorMod", "Pow", "Less", "Div", "FloorDiv"])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_on_empty(op_type, dtype):
    got = run(op_type, np.zeros((0, 3), dtype), np.ones((1, 3), dtype))
    assert got.shape == (0, 3)


# -- gradient helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_gradient_helpers(dtype):
    y = np.array([0.5, -0.25, 2.0, 4.0], dtype)
    dy = np.array([3.0, 1.0, -2.0, 0.5], dtype)
    refs = {
        "TanhGrad": lambda a, d: d * (1 - a * a),
        "SigmoidGrad": lambda a, d: d * a * (1 - a),
        "SqrtGrad": lambda a, d: d * 0.5 / a,
        "RsqrtGrad": lambda a, d: -0.5 * d * a**3,
        "ReciprocalGrad": lambda a, d: -d * a * a,
    }
    for op_type, ref in refs.items():
        want = np.array([ref(float(a), float(d)) for a, d in zip(y, dy)], dtype)
        assert_same(run(op_type, y, dy), want, rtol=1e-6)


def test_gradient_helpers_are_zero_where_dy_is_zero():
    y = np.array([0.0, np.inf, np.nan], np.float64)
    dy = np.zeros(3, np.float64)
    for op_type in ("SqrtGrad", "RsqrtGrad", "ReciprocalGrad"):
        assert_same(run(op_type, y, dy), np.zeros(3))
    assert np.isinf(run("SqrtGrad", np.zeros(1), np.ones(1))[0])


def test_gradient_helpers_on_complex_use_the_conjugate():
    y, dy = np.array([1 + 1j]), np.array([2 + 0j])
    assert_same(run("TanhGrad", y, dy), np.array([2 - 4j]))  # dy (1 - y^2)
    assert_same(run("SigmoidGrad", y, dy), np.array([2 - 2j]))
    assert_same(run("SqrtGrad", y, dy), np.array([0.5 + 0.5j]))  # dy / (2 conj y)
    assert_same(run("RsqrtGrad", y, dy), np.array([2 + 2j]))
    assert_same(run("ReciprocalGrad", y, dy), np.array([4j]))


def test_gradient_helpers_need_equal_sizes():
    with pytest.raises(InvalidArgumentError, match="same number of elements, got 2 and 1"):
        run("TanhGrad", np.ones(2, np.float32), np.ones(1, np.float32))


def test_float16_rsqrt_grad_does_not_overflow_in_between():
    got = run("RsqrtGrad", np.array([100.0], np.float16), np.array([0.1], np.float16))
    assert got.dtype == np.float16 and got[0] == np.float16(-0.5 * 0.1 * 1e6)


# -- casts ----------------------------------------------------------------------------------------


def cast(x, dst, truncate=False):
    return run("Cast", x, attrs={"DstT": rg.as_dtype(dst), "Truncate": truncate})


@pytest.mark.parametrize("src", FLOATS + [np.float16])
@pytest.mark.parametrize("dst", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16])
def test_float_to_int_truncates_toward_zero(src, dst):
    vals = [0.0, -0.0, 1.7, -1.7, 2.5, -2.5, 99.99, -99.99, 127.9, -128.9]
    if np.dtype(dst).kind == "u":
        vals = [v for v in vals if v > -1]
    x = np.array(vals, src)
    assert_same(cast(x, dst), np.array([math.trunc(float(v)) for v in x], dst))


def test_float_to_int_out_of_range():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20], np.float32)
    lowest32 = np.iinfo(np.int32).min
    assert_same(cast(x, np.int32), np.full(6, lowest32, np.int32))
    want64 = [np.iinfo(np.int64).min] * 3 + [3_000_000_000, -3_000_000_000, np.iinfo(np.int64).min]
    assert_same(cast(x, np.int64), np.array(want64, np.int64))
    # 8- and 16-bit results saturate through int32.
    y = np.array([300.5, -300.5, 65504.0, np.nan], np.float32)
    assert_same(cast(y, np.int8), np.array([127, -128, 127, -128], np.int8))
    assert_same(cast(y, np.uint8), np.array([255, 0, 255, 0], np.uint8))
    z = np.array([3e9, -1.7, np.nan, 1e20], np.float64)
    assert_same(cast(z, np.uint32), np.array([3_000_000_000, 2**32 - 1, 2**31, 2**31], np.uint32))
    w = np.array([1.5e19, -1.0, np.nan, 3.5], np.float64)
    assert_same(cast(w, np.uint64), np.array([15 * 10**18, 2**64 - 1, 2**63, 3], np.uint64))


@pytest.mark.parametrize("src", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("dst", [np.int8, np.int32, np.uint8, np.uint32, np.int64])
def test_int_to_int_wraps(src, dst):
    info = np.iinfo(src)
    x = np.array([info.min, -1 if info.min else 0, 0, 200, 300 % (info.max + 1), info.max], src)
    assert_same(cast(x, dst), wrap([int(v) for v in x], dst))


def test_casts_to_and_from_bool_and_complex():
    assert_same(
        cast(np.array([0.0, -0.0, 2.5, np.nan], np.float32), np.bool_),
        np.array([False, False, True, True]),
    )
    assert_same(cast(np.array([0, 3, -1], np.int32), np.bool_), np.array([False, True, True]))
    assert_same(cast(np.array([True, False]), np.float32), np.array([1, 0], np.float32))
    z = np.array([1.7 + 2j, -3 - 1j, 1j], np.complex64)
    assert_same(cast(z, np.float32), np.array([1.7, -3, 0], np.float32))
    assert_same(cast(z, np.int32), np.array([1, -3, 0], np.int32))
    assert_same(cast(z, np.bool_), np.array([True, True, False]))  # the real part decides
    assert_same(cast(np.array([1.5], np.float32), np.complex128), np.array([1.5 + 0j]))


def test_float_casts_round_unless_truncating():
    x = np.array([1 + 2**-11 + 2**-20, -(1 + 2**-11 + 2**-20), 65535.5, np.nan], np.float32)
    nearest = cast(x, np.float16)
    assert nearest[:2].tolist() == [1 + 2**-10, -(1 + 2**-10)] and nearest[2] == np.inf
    cut = cast(x, np.float16, truncate=True)
    assert cut[:3].tolist() == [1.0, -1.0, 65504.0] and np.isnan(cut[3])
    b = cast(np.array([1 + 2**-8 + 2**-12], np.float32), ml_dtypes.bfloat16, truncate=True)
    assert b.dtype == ml_dtypes.bfloat16 and float(b[0]) == 1.0
    d = cast(np.array([-1.7, 1e300], np.float64), np.float32, truncate=True)
    assert d[0] == np.nextafter(np.float32(-1.7), np.float32(0)) and d[1] == np.inf
    assert_same(
        cast(np.array([1e300, -1e300, 1e-300]), np.float32),
        np.array([np.inf, -np.inf, 0], np.float32),
    )


def test_cast_between_strings_and_numbers_is_unimplemented():
    with pytest.raises(UnimplementedError, match="Cast string to int32"):
        cast(np.array([b"1"], dtype=object), np.int32)


def test_cast_to_same_type_is_the_identity():
    x = np.arange(3, dtype=np.float32)
    assert cast(x, np.float32) is x


def test_cast_to_float8_rounds_to_nearest_even_and_does_not_saturate():
    x = np.array([1.0625, 1.1875, 0.3, 464.0, 480.0, 1e6, -np.inf, np.nan, -0.0], np.float32)
    e4m3 = cast(x, ml_dtypes.float8_e4m3fn)
    assert e4m3.dtype == ml_dtypes.float8_e4m3fn
    # Ties go to the even mantissa (1.000, 1.010; 448 is 1.110·2⁸); E4M3FN has no Inf, so
    # overflow and ±Inf are NaN.
    got = e4m3.astype(np.float32)
    assert got[:4].tolist() == [1.0, 1.25, 0.3125, 448.0] and np.isnan(got[4:8]).all()
    assert np.signbit(got[8])
    e5m2 = cast(x, ml_dtypes.float8_e5m2).astype(np.float32)
    assert e5m2[5] == np.inf and e5m2[6] == -np.inf and np.isnan(e5m2[7])
    fnuz = cast(x, ml_dtypes.float8_e4m3fnuz)
    assert fnuz.view(np.uint8)[8] == 0  # no negative zero
    assert_same(
        cast(np.array([0.25, -7.0, 100.0], np.float16), ml_dtypes.float4_e2m1fn),
        np.array([0.0, -6.0, 6.0], ml_dtypes.float4_e2m1fn),  # float4 has no Inf or NaN
    )


def test_cast_from_float8_is_exact_then_follows_the_float_rules():
    f8 = np.array([0.4375, -448.0, 3.75, np.nan], ml_dtypes.float8_e4m3fn)
    assert_same(cast(f8, np.float32), np.array([0.4375, -448.0, 3.75, np.nan], np.float32))
    assert_same(cast(f8, np.float16), np.array([0.4375, -448.0, 3.75, np.nan], np.float16))
    # To integers as from float32: truncation, NaN the most negative int32, 8-bit saturating.
    assert_same(cast(f8, np.int32), np.array([0, -448, 3, -(2**31)], np.int32))
    assert_same(cast(f8, np.int8), np.array([0, -128, 3, -128], np.int8))
    assert_same(cast(f8, np.bool_), np.array([True, True, True, True]))
    # Between narrow types (ml_dtypes has no direct float4 → e8m0 conversion).
    e8m0 = cast(np.array([0.5, 6.0], ml_dtypes.float4_e2m1fn), ml_dtypes.float8_e8m0fnu)
    assert e8m0.dtype == ml_dtypes.float8_e8m0fnu and e8m0.astype(np.float32).tolist() == [0.5, 8]
    assert_same(
        cast(f8[:3], ml_dtypes.float8_e5m2), np.array([0.4375, -448, 4], ml_dtypes.float8_e5m2)
    )


def test_cast_to_and_from_4_and_2_bit_integers_wraps():
    assert_same(
        cast(np.array([-9, -8, 7, 8, 15, 300], np.int32), ml_dtypes.int4),
        np.array([7, -8, 7, -8, -1, -4], ml_dtypes.int4),
    )
    assert_same(
        cast(np.array([1.7, -1.7, -9.5, 2.5], np.float32), ml_dtypes.int4),
        np.array([1, -1, 7, 2], ml_dtypes.int4),  # truncation toward zero, then the low 4 bits
    )
    assert_same(
        cast(np.array([-3, 3, 4], np.int64), ml_dtypes.uint2), np.array([1, 3, 0], ml_dtypes.uint2)
    )
    i4 = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    assert_same(cast(i4, np.uint8), np.array([248, 255, 0, 7], np.uint8))
    assert_same(cast(i4, np.float16), np.array([-8, -1, 0, 7], np.float16))
    assert_same(
        cast(i4, ml_dtypes.float8_e4m3fn), np.array([-8, -1, 0, 7], ml_dtypes.float8_e4m3fn)
    )
    assert_same(cast(np.array([3, 0], ml_dtypes.uint2), np.bool_), np.array([True, False]))


# -- selection, sums ----------------------------------------------------------------------------


def test_select_tensorflow1_semantics():
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    e = -t
    assert_same(run("Select", np.array([True, False]), t, e), np.stack([t[0], e[1]]))
    same = np.array([[True, False, True], [False, True, False]])
    want = np.array([[t[i, j] if same[i, j] else e[i, j] for j in range(3)] for i in range(2)])
    assert_same(run("Select", same, t, e), want)
    assert_same(run("Select", np.array(False), t, e), e)
    assert_same(
        run("Select", np.zeros(0, bool), np.zeros((0, 3)), np.zeros((0, 3))), np.zeros((0, 3))
    )
    for c, tt, ee, what in (
        (np.array([True, False, True]), t, e, "Number of batches"),
        (np.array([True, False]), t, e[:, :1], "same size"),
        (np.array([True]), np.float32(1), np.float32(2), "at least a vector"),
        (np.array([[True], [False]]), t, e, "condition must be"),
    ):
        with pytest.raises(InvalidArgumentError, match=what):
            run("Select", c, tt, ee)


def test_select_v2_broadcasts():
    c = np.array([True, False, True])
    t = np.arange(6, dtype=np.int32).reshape(2, 3)
    want = np.array([[t[i, j] if c[j] else 5 for j in range(3)] for i in range(2)], np.int32)
    assert_same(run("SelectV2", c, t, np.int32(5)), want)
    assert run("SelectV2", np.array([[True], [False]]), np.arange(3.0), np.float64(9)).shape == (
        2,
        3,
    )
    with pytest.raises(InvalidArgumentError, match="must be broadcastable"):
        run("SelectV2", np.array([True, False]), t, np.int32(5))


@pytest.mark.parametrize("dtype", NUMERIC)
def test_add_n(dtype):
    xs = [rand((2, 3), dtype, s) for s in range(4)]
    if np.dtype(dtype).kind == "i":
        want = wrap([sum(int(x.ravel()[k]) for x in xs) for k in range(6)], dtype).reshape(2, 3)
    else:
        want = np.array([sum(float(x.ravel()[k]) for x in xs) for k in range(6)], dtype).reshape(
            2, 3
        )
    assert_same(run("AddN", *xs), want, rtol=1e-6 if dtype is np.float32 else 0)
    assert_same(run("AddN", xs[0]), xs[0])
    scalars = [np.array(v, dtype) for v in (1, 2, 3)]
    assert_same(run("AddN", *scalars), np.array(6, dtype))


def test_add_n_wraps_and_checks_shapes():
    big = np.array([2**31 - 1], np.int32)
    assert_same(run("AddN", big, np.array([1], np.int32)), np.array([-(2**31)], np.int32))
    with pytest.raises(InvalidArgumentError, match=r"Input 0: \[3\] != input 1: \[1\]"):
        run("AddN", np.ones(3, np.float32), np.ones(1, np.float32))


# -- matrix products ------------------------------------------------------------------------------


def matmul_ref(a, b):
    n, k = a.shape
    m = b.shape[1]
    return np.array(
        [[sum(a[i, p] * b[p, j] for p in range(k)) for j in range(m)] for i in range(n)]
    ).reshape(n, m)


@pytest.mark.parametrize("dtype", NUMERIC + [np.complex64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(dtype, ta, tb):
    a, b = rand((2, 3), dtype, 1), rand((3, 4), dtype, 2)
    if np.dtype(dtype).kind == "c":
        a, b = a + 1j * rand((2, 3), np.float32, 3), b - 2j
    x = a.T.copy() if ta else a
    y = b.T.copy() if tb else b
    got = run("MatMul", x, y, attrs={"transpose_a": ta, "transpose_b": tb})
    want = matmul_ref(a.astype(object), b.astype(object)).astype(dtype)
    assert_same(got, want, rtol=1e-5 if np.dtype(dtype).itemsize <= 8 else 0)


def test_matmul_edge_cases():
    a = np.array([[2**20, 2**20]], np.int32)
    b = np.array([[2**12], [2**12]], np.int32)
    assert_same(run("MatMul", a, b), wrap([[2 * 2**32]], np.int32))  # wraps like TensorFlow
    assert_same(
        run("MatMul", np.ones((2, 0), np.float32), np.ones((0, 3), np.float32)),
        np.zeros((2, 3), np.float32),
    )
    bf = np.ones((2, 2), ml_dtypes.bfloat16)
    assert run("MatMul", bf, bf).dtype == ml_dtypes.bfloat16
    with pytest.raises(InvalidArgumentError, match=r"Matrix size-incompatible: In\[0\]: \[2,3\]"):
        run("MatMul", np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match="needs matrices"):
        run("MatMul", np.ones(3, np.float32), np.ones((3, 1), np.float32))


def test_batch_matmul_broadcasts_and_takes_adjoints():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 1, 3, 4)) + 1j * rng.standard_normal((2, 1, 3, 4))
    y = rng.standard_normal((5, 4, 2)) + 1j * rng.standard_normal((5, 4, 2))
    want = np.empty((2, 5, 3, 2), complex)
    for i in range(2):
        for j in range(5):
            want[i, j] = matmul_ref(x[i, 0].astype(object), y[j].astype(object)).astype(complex)
    np.testing.assert_allclose(run("BatchMatMulV2", x, y), want, rtol=1e-12)
    xa = np.conj(np.swapaxes(x, -1, -2)).copy()
    ya = np.conj(np.swapaxes(y, -1, -2)).copy()
    got = run("BatchMatMulV2", xa, ya, attrs={"adj_x": True, "adj_y": True})
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert run(
        "BatchMatMulV2", np.ones((0, 2, 3), np.float32), np.ones((3, 1), np.float32)
    ).shape == (0, 2, 1)
    with pytest.raises(InvalidArgumentError, match="compatible batch dimensions"):
        run("BatchMatMulV2", np.ones((2, 3, 4)), np.ones((3, 4, 2)))
    with pytest.raises(InvalidArgumentError, match="rank >= 2"):
        run("BatchMatMulV2", np.ones(4), np.ones((4, 2)))
    with pytest.raises(InvalidArgumentError, match="size-incompatible"):
        run("BatchMatMulV2", np.ones((2, 3, 4)), np.ones((2, 3, 2)))


# -- range ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start,limit,delta,dtype",
    [
        (0, 10, 3, np.int32),
        (10, 0, -3, np.int64),
        (3, 3, 1, np.int32),
        (-(2**31), 2**31 - 1, 2**30, np.int32),
        (0.0, 1.0, 0.1, np.float32),
        (0.5, 100.0, 0.3, np.float64),
        (1.0, -3.5, -0.7, np.float64),
    ],
)
def test_range(start, limit, delta, dtype):
    s, lim, d = (np.array(v, dtype) for v in (start, limit, delta))
    if np.dtype(dtype).kind == "i":
        want = np.array(list(range(int(start), int(limit), int(delta))), dtype)
    else:
        n = math.ceil(abs((lim - s) / d))  # in the range's own type, as TensorFlow computes it
        want = np.array([s + dtype(i) * d for i in range(n)], dtype)
    assert_same(run("Range", s, lim, d), want)


def test_range_errors():
    for args, what in (
        ((5, 0, 1), "start <= limit"),
        ((0, 5, -1), "start >= limit"),
        ((0, 5, 0), "delta != 0"),
    ):
        with pytest.raises(InvalidArgumentError, match=what):
            run("Range", *(np.array(a, np.int32) for a in args))
    assert_same(
        run("Range", np.array([2], np.int32), np.array(5, np.int32), np.array(1, np.int32)),
        np.arange(2, 5, dtype=np.int32),
    )
    with pytest.raises(InvalidArgumentError, match="must be a scalar"):
        run("Range", np.array([0, 1], np.int32), np.array(5, np.int32), np.array(1, np.int32))


# -- cost --------------------------------------------------------------------------------------------


def test_unary_kernels_are_the_ufuncs_themselves():
    op = op_for("Exp", np.zeros(2, np.float64))
    assert instantiate(find_kernel("Exp", "CPU", op.attrs), op, _CPU) is np.exp
    # (float32 Exp and Tanh are compiled loops: tests/exec/test_exp_tanh32.py)
    op = op_for("Tanh", np.zeros(2, np.float32))
    assert instantiate(find_kernel("Tanh", "CPU", op.attrs), op, _CPU) is not np.tanh
    op = op_for("Neg", np.zeros(2, np.int32))
    assert instantiate(find_kernel("Neg", "CPU", op.attrs), op, _CPU) is np.negative
