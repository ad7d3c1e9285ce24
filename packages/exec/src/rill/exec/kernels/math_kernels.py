"""Kernels for rill.graph.ops.math_ops: elementwise math, casts, sums of lists, range.

Elementwise kernels are the array module's ufuncs, returned as they are where TensorFlow's
semantics are numpy's (a step then pays one call per op); binary ones get a thin wrapper that
turns a broadcasting failure into InvalidArgumentError. Results keep the op's dtype exactly:
numpy's promotions (Python floats with bfloat16, matmul of bfloat16, ...) are undone where they
would change it. Integer arithmetic wraps, as TensorFlow's does.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import jit
from rill.exec.kernels.intra_op import parallel_for
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, UnimplementedError

_FLOATS = dtypes.FLOAT_TYPES
_COMPLEX = (dtypes.complex64, dtypes.complex128)
_INTS = dtypes.INTEGER_TYPES
_NUMBERS = dtypes.NUMBER_TYPES
_FLOAT_CPLX = _FLOATS + _COMPLEX
_HALF = (dtypes.float16, dtypes.bfloat16)


def _dims(x) -> str:
    return "[" + ",".join(str(d) for d in x.shape) + "]"


def _broadcasting(fn):
    """fn(x, y), raising InvalidArgumentError when the shapes cannot broadcast."""

    def compute(x, y):
        try:
            return fn(x, y)
        except ValueError:
            raise InvalidArgumentError(f"Incompatible shapes: {_dims(x)} vs. {_dims(y)}") from None

    return compute


def _check_divisor(x, y):
    # An empty result divides nothing (TensorFlow checks only the elements it computes): an
    # empty x over a zero scalar y is no error.
    if np.size(x) and bool((y == 0).any()):
        raise InvalidArgumentError("Integer division by zero")


def _ufunc_kernel(name: str, binary: bool):
    def factory(xp):
        fn = getattr(xp, name)
        return _broadcasting(fn) if binary else fn

    factory.__name__ = name
    return factory


# -- arithmetic that is plain ufuncs ----------------------------------------------

for _op, _ufunc in (
    ("AddV2", "add"),
    ("Sub", "subtract"),
    ("Mul", "multiply"),
    ("Maximum", "maximum"),
    ("Minimum", "minimum"),
):
    register_kernel(_op, devices=("CPU", "GPU"))(_ufunc_kernel(_ufunc, binary=True))


@register_kernel("Add", devices="CPU")
def add(xp):
    return _broadcasting(xp.add)  # on object arrays of bytes, + concatenates strings


@register_kernel("Add", devices="GPU", constraints={"T": _NUMBERS})
def add_gpu(xp):
    return _broadcasting(xp.add)


def _complex_divide(xp):
    """x / y for complex numbers, NaN where y is 0 (numpy gives inf there, TensorFlow NaN)."""
    divide, where = _broadcasting(xp.true_divide), xp.where

    def compute(x, y):
        q = divide(x, y)
        return where(y == 0, q.dtype.type(complex(np.nan, np.nan)), q)

    return compute


def _true_divide(T, xp):
    return _complex_divide(xp) if T.is_complex else _broadcasting(xp.true_divide)


@register_kernel("RealDiv", devices=("CPU", "GPU"), constraints={"T": _FLOAT_CPLX})
def real_div(T, xp):
    return _true_divide(T, xp)


@register_kernel("Div", devices=("CPU", "GPU"))
def div(T, xp):
    if not T.is_integer:
        return _true_divide(T, xp)
    floor_divide, remainder = _broadcasting(xp.floor_divide), xp.remainder
    if T.is_unsigned:

        def compute(x, y):
            _check_divisor(x, y)
            return floor_divide(x, y)

        return compute

    def compute(x, y):
        # C division truncates toward zero: one more than the floor when inexact with mixed signs.
        _check_divisor(x, y)
        q = floor_divide(x, y)
        fix = (remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return q + fix.astype(q.dtype)

    return compute


@register_kernel("FloorDiv", devices=("CPU", "GPU"), constraints={"T": _FLOATS + _INTS})
def floor_div(T, xp):
    floor_divide, floor, true_divide = _broadcasting(xp.floor_divide), xp.floor, xp.true_divide
    if T.is_integer:

        def compute(x, y):
            _check_divisor(x, y)
            return floor_divide(x, y)

        return compute
    # floor(x / y), not numpy's floor_divide, which makes inf // 2 NaN.
    return _broadcasting(lambda x, y: floor(true_divide(x, y)))


@register_kernel("FloorMod", devices=("CPU", "GPU"))
def floor_mod(T, xp):
    remainder, fmod, where = _broadcasting(xp.remainder), _broadcasting(xp.fmod), xp.where
    if T.is_integer:

        def compute(x, y):
            _check_divisor(x, y)
            return remainder(x, y)

        return compute

    def compute(x, y):
        # The truncated remainder moved into y's sign; -0.0 % 3 stays -0.0, 5 % 0 is NaN.
        m = fmod(x, y)
        return where((m != 0) & ((y < 0) != (m < 0)), m + y, m)

    return compute


@register_kernel("Pow", devices=("CPU", "GPU"))
def pow_(T, xp):
    power = _broadcasting(xp.power)
    if T.is_complex:
        # exp(y log x), as TensorFlow computes it: 0 ** 0 is NaN there, where numpy gives 1.
        exp, log, multiply = xp.exp, xp.log, _broadcasting(xp.multiply)
        return lambda x, y: exp(multiply(y, log(x)))
    if not T.is_integer:
        return power

    def compute(x, y):
        if bool((y < 0).any()):
            raise InvalidArgumentError("Integers to negative integer powers are not allowed")
        return power(x, y)

    return compute


@register_kernel("SquaredDifference", devices=("CPU", "GPU"))
def squared_difference(T, xp):
    subtract, square, multiply, conj = _broadcasting(xp.subtract), xp.square, xp.multiply, xp.conj
    if T.is_complex:

        def compute(x, y):
            d = subtract(x, y)
            return multiply(d, conj(d))

        return compute
    return lambda x, y: square(subtract(x, y))


# -- unary --------------------------------------------------------------------------------------

for _op, _ufunc in (
    ("Neg", "negative"),
    ("Abs", "absolute"),
    ("Square", "square"),
    ("Sqrt", "sqrt"),
    ("Log", "log"),
    ("Log1p", "log1p"),
    ("Cos", "cos"),
    ("Floor", "floor"),
    ("Ceil", "ceil"),
):
    register_kernel(_op, devices=("CPU", "GPU"))(_ufunc_kernel(_ufunc, binary=False))


# Elements per piece of the compiled float32 Exp / Tanh over the intra-op threads (about 30 µs).
_FLAT_GRAIN = 1 << 15


def _float32_loop(name: str):
    """The kernel of the unary `name` ("exp" or "tanh"): for float32 on the CPU with the compiled
    loops on, _exp_tanh_loops' exp32 / tanh32 (within 2 ulp; numpy's are scalar on CPUs without
    AVX-512: 1.3 and 2.6 ns a value on Zen 3, against about 0.8 and 1.0) over a copy, in
    pieces over the intra-op threads; else the array module's ufunc."""

    def factory(T, xp):
        ufunc = getattr(xp, name)
        if xp is not np or T.np != np.float32:
            return ufunc

        def compute(x):
            mod = jit.exp_tanh()
            if mod is None or not x.size:
                return ufunc(x)
            out = np.array(x, np.float32, order="C")
            flat = out.reshape(-1)
            loop = getattr(mod, name + "32_flat")
            parallel_for(flat.size, lambda lo, hi: loop(flat, lo, hi), grain=_FLAT_GRAIN)
            return out

        return compute

    factory.__name__ = name
    return factory


register_kernel("Exp", devices=("CPU", "GPU"))(_float32_loop("exp"))
register_kernel("Tanh", devices=("CPU", "GPU"))(_float32_loop("tanh"))


@register_kernel("Sign", devices="CPU")
def sign(xp):
    return xp.sign  # numpy 2: x / |x| for complex, NaN for NaN, +0 for -0


@register_kernel("Reciprocal", devices=("CPU", "GPU"), constraints={"T": _FLOAT_CPLX})
def reciprocal(xp):
    return xp.reciprocal


@register_kernel("Rsqrt", devices=("CPU", "GPU"))
def rsqrt(xp):
    rec, sqrt = xp.reciprocal, xp.sqrt
    return lambda x: rec(sqrt(x))


@register_kernel(
    "Round", devices=("CPU", "GPU"), constraints={"T": _FLOATS + (dtypes.int32, dtypes.int64)}
)
def round_(T, xp):
    if T.is_integer:
        # TensorFlow 2.21's integer Round kernel returns zeros (a bug); integers round to
        # themselves here, as tf.round treats them.
        return lambda x: x
    return xp.rint  # halves to even, as TensorFlow rounds


@register_kernel("Conj", devices=("CPU", "GPU"), constraints={"T": _COMPLEX})
def conj(xp):
    return xp.conj


@register_kernel("ComplexAbs", devices=("CPU", "GPU"))
def complex_abs(Tout, xp):
    absolute, want = xp.absolute, Tout.np
    return lambda x: absolute(x).astype(want, copy=False)


@register_kernel("Sigmoid", devices=("CPU", "GPU"))
def sigmoid(T, xp):
    if T.is_complex:
        one = T.np.type(1)
        return lambda x: one / (one + xp.exp(-x))
    exp, logaddexp = xp.exp, xp.logaddexp
    if T in _HALF:
        return lambda x: exp(-logaddexp(0, -x.astype(np.float32))).astype(T.np)
    one = T.np.type(1)
    negative, reciprocal = xp.negative, xp.reciprocal

    def compute(x):
        # 1 / (1 + exp(-x)): three vectorized passes. Exact in both tails — exp(-x) overflowing
        # to inf (x < -88 in float32) gives 0, as the true value rounds to; steps run under
        # np.errstate(all="ignore").
        out = exp(negative(x))
        out += one
        return reciprocal(out, out=out)

    return compute


_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


def erf_float64(xp, x):
    """The error function in float64 (about 1e-15 relative error), from two expansions:
    the series erf(x) = 2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (2n+1)!! for |x| < 2, and the
    continued fraction of erfc for |x| >= 2."""
    x = xp.asarray(x, dtype=np.float64)
    a = xp.abs(x)
    small = a < 2.0
    s = xp.where(small, a, 0.0)
    s2 = s * s
    term = s.copy()
    total = s.copy()
    for n in range(1, 40):
        term = term * (2.0 * s2) / (2 * n + 1)
        total += term
    near = _TWO_OVER_SQRT_PI * xp.exp(-s2) * total
    b = xp.where(small, 2.0, a)
    f = b.copy()
    for k in range(60, 0, -1):
        f = b + (k / 2.0) / f
    far = 1.0 - xp.exp(-b * b) / (np.sqrt(np.pi) * f)
    return xp.copysign(xp.where(small, near, far), x)


@register_kernel("Erf", devices=("CPU", "GPU"))
def erf(T, xp):
    want = T.np
    return lambda x: erf_float64(xp, x).astype(want)


# -- gradient helpers ------------------------------------------------------------------------------


def _same_size(y, dy):
    if y.shape != dy.shape:
        if y.size != dy.size:
            raise InvalidArgumentError(
                "The two arguments to a cwise op must have same number of elements, got "
                f"{y.size} and {dy.size}"
            )
        dy = dy.reshape(y.shape)
    return dy


@register_kernel("TanhGrad", devices=("CPU", "GPU"))
def tanh_grad(T, xp):
    one = T.np.type(1)
    return lambda y, dy: _same_size(y, dy) * (one - y * y)


@register_kernel("SigmoidGrad", devices=("CPU", "GPU"))
def sigmoid_grad(T, xp):
    one = T.np.type(1)
    return lambda y, dy: _same_size(y, dy) * (y * (one - y))


# The next three give 0 wherever dy is 0, whatever y is (inf, 0, NaN), as TensorFlow's do.


def _in_float32(T, factory):
    """A half-precision gradient computed in float32 and rounded once, as TensorFlow computes
    RsqrtGrad (y ** 3 of a float16 y overflows long before the gradient does)."""

    def wrapped(xp):
        if T not in _HALF:
            return factory(T, xp)
        inner, want = factory(dtypes.float32, xp), T.np
        return lambda y, dy: inner(y.astype(np.float32), dy.astype(np.float32)).astype(want)

    return wrapped


@register_kernel("SqrtGrad", devices=("CPU", "GPU"))
def sqrt_grad(T, xp):
    half, zero, conj, where = T.np.type(0.5), T.np.type(0), xp.conj, xp.where
    divide = _complex_divide(xp) if T.is_complex else xp.true_divide

    def compute(y, dy):
        dy = _same_size(y, dy)
        return where(dy == 0, zero, divide(half * dy, conj(y)))

    return compute


@register_kernel("RsqrtGrad", devices=("CPU", "GPU"))
def rsqrt_grad(T, xp):
    return _in_float32(T, _rsqrt_grad)(xp)


def _rsqrt_grad(T, xp):
    c, zero, conj, where = T.np.type(-0.5), T.np.type(0), xp.conj, xp.where

    def compute(y, dy):
        dy, yc = _same_size(y, dy), conj(y)
        return where(dy == 0, zero, c * dy * (yc * yc * yc))

    return compute


@register_kernel("ReciprocalGrad", devices=("CPU", "GPU"))
def reciprocal_grad(T, xp):
    zero, conj, where = T.np.type(0), xp.conj, xp.where

    def compute(y, dy):
        dy, yc = _same_size(y, dy), conj(y)
        return where(dy == 0, zero, -dy * (yc * yc))

    return compute


# -- casts --------------------------------------------------------------------------------------

_MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
_UINT_VIEW = {8: np.uint64, 4: np.uint32, 2: np.uint16}


def _truncate_mantissa(xp, x, keep_bits: int):
    """x with its mantissa cut to `keep_bits` bits (round toward zero), NaN kept a NaN."""
    drop = _MANTISSA_BITS[dtypes.as_dtype(x.dtype).name] - keep_bits
    u = _UINT_VIEW[x.dtype.itemsize]
    mask = u(~((1 << drop) - 1) & ((1 << (8 * x.dtype.itemsize)) - 1))
    cut = (xp.array(x, copy=True).view(u) & mask).view(x.dtype)
    return xp.where(xp.isnan(x), x, cut)


def _float_to_int(xp, x, src: dtypes.DType, dst: dtypes.DType):
    """Float to integer as TensorFlow's (vectorized) CPU kernels convert on x86: truncation
    toward zero; NaN and values out of range become the most negative int32/int64, 2**31 for
    uint32 and 2**63 for uint64; 8- and 16-bit results go through int32 and saturate.

    C++ leaves out-of-range conversions undefined, so TensorFlow's own results for them vary
    with the platform and even with an element's position (vector body or scalar tail); this
    is the rule most elements follow."""
    t = xp.trunc(x.astype(np.float64))
    if dst in (dtypes.int32, dtypes.int64):
        lo, hi = float(dst.min), float(dst.max) + 1
        ok = (t >= lo) & (t < hi)
        return xp.where(ok, t, lo).astype(dst.np)
    if dst.size <= 2:
        i32 = _float_to_int(xp, t, dtypes.float64, dtypes.int32)
        return xp.clip(i32, dst.min, dst.max).astype(dst.np)
    if dst is dtypes.uint32:
        ok = (t >= -(2.0**31)) & (t < 2.0**32)
        return xp.where(ok, t, 2.0**31).astype(np.int64).astype(np.uint32)
    ok = (t >= -(2.0**63)) & (t < 2.0**64)
    t = xp.where(ok, t, 2.0**63)
    high = t >= 2.0**63  # past int64: convert t - 2**63 and add the top bit back
    low = xp.where(high, t - 2.0**63, t).astype(np.int64).astype(np.uint64)
    return low + (high.astype(np.uint64) << np.uint64(63))


def _widened(dtype: dtypes.DType) -> dtypes.DType:
    """The standard type that holds every value of a narrow type exactly."""
    return dtypes.float32 if dtype.is_floating else dtypes.int32


@register_kernel("Cast", devices="CPU")
def cast(SrcT, DstT, Truncate, xp):
    """Narrow types convert as ml_dtypes' astype does: to nearest, ties to even, without
    saturating (overflow is NaN for a float8 without infinities, Inf for float8_e5m2; float4,
    with neither, clamps to ±6); a 4- or 2-bit integer keeps the low bits. A narrow source is
    first widened exactly, so it then follows the standard rules (float to integer below)."""
    src, dst = SrcT, DstT
    want = dst.np
    if src is dst:
        return lambda x: x
    if (src.np == np.dtype(object)) != (want == np.dtype(object)):
        message = f"Cast {src.name} to {dst.name} is not supported"

        def unsupported(x):
            raise UnimplementedError(message)

        return unsupported
    if src.is_narrow:
        wide = _widened(src)
        inner = cast(SrcT=wide, DstT=dst, Truncate=Truncate, xp=xp)
        return lambda x: inner(x.astype(wide.np))
    real = xp.real
    if src.is_complex and not dst.is_complex:
        if dst.is_bool:
            return lambda x: real(x) != 0  # TensorFlow looks at the real part only
        inner = cast(SrcT=src.real_dtype, DstT=dst, Truncate=Truncate, xp=xp)
        return lambda x: inner(real(x))
    if dst.is_narrow:
        return lambda x: x.astype(want)
    if src.is_floating and dst.is_integer:
        return lambda x: _float_to_int(xp, x, src, dst)
    if Truncate and src.is_floating and dst.is_floating:
        keep = _MANTISSA_BITS[dst.name]
        if keep < _MANTISSA_BITS[src.name]:
            return lambda x: _truncate_mantissa(xp, x, keep).astype(want)
    return lambda x: x.astype(want)


# -- sums ----------------------------------------------------------------------------------------


@register_kernel("AddN", devices=("CPU", "GPU"), constraints={"T": _NUMBERS})
def add_n(xp):
    add = xp.add

    def compute(*xs):
        first = xs[0]
        for i, x in enumerate(xs[1:], 1):
            if x.shape != first.shape:
                raise InvalidArgumentError(
                    "Inputs to operation AddN must have the same size and shape.  Input 0: "
                    f"{_dims(first)} != input {i}: {_dims(x)}"
                )
        if len(xs) == 1:
            return first
        total = add(xs[0], xs[1])
        for x in xs[2:]:
            total += x  # in place on the fresh array (a 0-d result just rebinds)
        return total

    return compute


# -- range ------------------------------------------------------------------------------------------


def _scalar_arg(v, name: str):
    if v.ndim == 0 or (v.ndim == 1 and v.shape[0] == 1):
        return v.reshape(())[()]
    raise InvalidArgumentError(f"{name} must be a scalar, not shape {_dims(v)}")


@register_kernel("Range", devices="CPU")
def range_(Tidx, xp):
    want = Tidx.np

    def compute(start, limit, delta):
        start = _scalar_arg(start, "start")
        limit = _scalar_arg(limit, "limit")
        delta = _scalar_arg(delta, "delta")
        if delta == 0:
            raise InvalidArgumentError(f"Requires delta != 0: {delta}")
        if delta > 0 and start > limit:
            raise InvalidArgumentError(f"Requires start <= limit when delta > 0: {start}/{limit}")
        if delta < 0 and start < limit:
            raise InvalidArgumentError(f"Requires start >= limit when delta < 0: {start}/{limit}")
        if Tidx.is_integer:
            span, step = abs(int(limit) - int(start)), abs(int(delta))
            n = (span + step - 1) // step
            return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(want)
        # Computed in the range's own type, as TensorFlow does: start + T(i) * delta.
        n = int(np.ceil(np.abs((limit - start) / delta)))
        return start + np.arange(n).astype(want) * delta

    return compute
