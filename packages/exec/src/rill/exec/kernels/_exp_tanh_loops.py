"""The float32 Exp and Tanh of the compiled paths: exp32 and tanh32, within 2 ulp of the exact
value over float32's whole range (tests/exec/test_exp_tanh32.py measures them against float64),
and the loops applying them in place.

numpy's float32 tanh and exp run scalar on CPUs without AVX-512 (Zen 3: 2.6 and 1.5 ns a value):
a ViT-small step at batch 1 spent a fifth of its time in the tanh of its GELUs and the exp of
its attention's Softmax. These are branch-free, so that their loops vectorize (about 0.3 ns a
value there). Like TensorFlow's own (Eigen's) float32 tanh and exp, they are not correctly
rounded: the Tanh kernel, the fused tanh GELU and the Softmax of float32 with the compiled loops
on give these values, with them off (RILL_JIT=0) numpy's, to an ulp or two.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels import _spin
from rill.exec.kernels._conv_loops import tanh_gelu_head, tanh_gelu_tail
from rill.exec.kernels._loops import row_maximum
from rill.exec.kernels._sigmoid_loops import _exp_parts, _fma, _keep_nan, _pow2_magic

# No fast-math at all: the fused multiply-adds are explicit (_sigmoid_loops._fma), so that every
# compiled context (a loop's vector body or its scalar rest, a caller it is inlined into)
# rounds the same.
_fjit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
_inline = numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
# A sum in any order (its lanes side by side): Softmax's row sum.
_sum_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"reassoc"}
)

# exp32's range: above EXP_HIGH the result overflows to inf (exp(88.7228) is float32's largest),
# below EXP_LOW it rounds to 0 (exp(-104) < 2**-150, half the smallest subnormal).
EXP_HIGH, EXP_LOW = 89.0, -104.0
# tanh32 takes the polynomial below TANH_SMALL in magnitude, 1 - 2 / (exp(2|x|) + 1) above;
# 2|x| is clamped at TANH_CLAMP (tanh is 1 in float32 from |x| = 9.02).
TANH_SMALL, TANH_CLAMP = 0.625, 40.0
# tanh(x) = x + x·x²·P(x²) for |x| < TANH_SMALL: P's coefficients, lowest degree first (a
# least-squares fit of the relative error at Chebyshev nodes against float64 tanh, rounded to
# float32: tools/fit_tanh.py; 0.84 ulp at most evaluated in float32 with fused multiply-adds).
_P = (
    -0.3333328068256378,
    0.13331381976604462,
    -0.05373531952500343,
    0.020626291632652283,
    -0.005691985599696636,
)


@_inline
def exp32(x):  # pragma: no cover - compiled
    """exp(x) for a float32 x: 2**n · exp(r) (_sigmoid_loops._exp_parts: n = round(x / ln 2),
    r = x - n·ln 2 in two parts, exp(r) by its Taylor series), x clamped to [EXP_LOW, EXP_HIGH].
    2**n is formed as 2**(n ∓ 64) · 2**±64 beyond ±64, the power 2**±64 applied last, so that
    a subnormal result is rounded once and an overflow gives inf. NaN stays the same NaN (a
    signaling one quieted)."""
    f = np.float32
    a = x if x < f(EXP_HIGH) else f(EXP_HIGH)  # a NaN becomes EXP_HIGH here, and x at the end
    a = a if a > f(EXP_LOW) else f(EXP_LOW)
    j, n, q = _exp_parts(a)
    low = n < f(-64.0)
    high = n > f(64.0)
    shift = f(64.0) if low else (f(-64.0) if high else f(0.0))
    scale = f(5.421010862427522e-20) if low else (f(1.8446744073709552e19) if high else f(1.0))
    return _keep_nan(x, (q * _pow2_magic(j + shift)) * scale)


@_inline
def tanh32(x):  # pragma: no cover - compiled
    """tanh(x) for a float32 x: x + x·x²·P(x²) for |x| < TANH_SMALL (±0 kept), else
    ±(1 - 2 / (e + 1)) with e = exp(2|x|) (2|x| clamped at TANH_CLAMP: ±inf gives ±1), both
    computed and one selected, so that the loops vectorize. NaN stays the same NaN."""
    f = np.float32
    s = x * x
    p = f(_P[4])
    p = _fma(p, s, f(_P[3]))
    p = _fma(p, s, f(_P[2]))
    p = _fma(p, s, f(_P[1]))
    p = _fma(p, s, f(_P[0]))
    small = _fma(x * s, p, x)
    small = x if np.abs(x) < f(2.0**-12) else small  # tanh(x) rounds to x; -0 stays -0
    a = f(2.0) * np.abs(x)
    a = a if a < f(TANH_CLAMP) else f(TANH_CLAMP)
    j, _, q = _exp_parts(a)
    big = f(1.0) - f(2.0) / (q * _pow2_magic(j) + f(1.0))
    big = -big if x < f(0.0) else big
    return _keep_nan(x, small if np.abs(x) < f(TANH_SMALL) else big)


@_inline
def _exp32_nonpositive(x):  # pragma: no cover - compiled
    """exp32(x) for x <= 0 or NaN (Softmax's x - max): the same operations less the overflow's
    (n <= 0)."""
    f = np.float32
    a = f(EXP_LOW) if x < f(EXP_LOW) else x  # a NaN kept: every step after it gives it back
    j, n, q = _exp_parts(a)
    low = n < f(-64.0)
    scale = f(5.421010862427522e-20) if low else f(1.0)
    return (q * _pow2_magic(j + (f(64.0) if low else f(0.0)))) * scale


@_sum_jit
def _row_sum(v, n):  # pragma: no cover - compiled
    s = v.dtype.type(0)
    for k in range(n):
        s += v[k]
    return s


@_fjit
def softmax32_rows(x, out, lo, hi):  # pragma: no cover - compiled
    """out[r] = softmax(x[r]) for the rows r in [lo, hi) of float32 x [rows, n] (n >= 1): e =
    exp32(x - max) (max: _loops.row_maximum, numpy's maximum), then e / the sum of the row's
    e, summed in vector lanes side by side (each row its own order, whatever the split)."""
    n = x.shape[1]
    for r in range(lo, hi):
        row, dst = x[r], out[r]
        m = row_maximum(row, n)
        for k in range(n):
            dst[k] = _exp32_nonpositive(row[k] - m)
        s = _row_sum(dst, n)
        for k in range(n):
            dst[k] = dst[k] / s


@_fjit
def exp32_flat(a, lo, hi):  # pragma: no cover - compiled
    """a[lo:hi] = exp32(a[lo:hi]), a 1-D float32 array, in place (one array read and written at
    the same index: no overlap check for LLVM to send to the scalar loop)."""
    v = a[lo:hi]
    for o in range(v.shape[0]):
        v[o] = exp32(v[o])


@_fjit
def tanh32_flat(a, lo, hi):  # pragma: no cover - compiled
    """a[lo:hi] = tanh32(a[lo:hi]), a 1-D float32 array, in place."""
    v = a[lo:hi]
    for o in range(v.shape[0]):
        v[o] = tanh32(v[o])


# Values per step of tanh_gelu32: its three passes over a step run while it is in L1.
GELU_STEP = 2048


@_fjit
def tanh_gelu32(x, out, a, b, c, d, lo, hi):  # pragma: no cover - compiled
    """out[lo:hi] = d · (x · (c + tanh32(b · (x + a · (x · (x · x)))))) for the flat float32 x
    and out, each operation rounded to float32 in that order as the unfused chain's kernels
    compute it (_conv_loops' head and tail, tanh32 between them), GELU_STEP values at a time."""
    for s in range(lo, hi, GELU_STEP):
        e = min(hi, s + GELU_STEP)
        tanh_gelu_head(x, out, a, b, s, e)
        tanh32_flat(out, s, e)
        tanh_gelu_tail(x, out, c, d, s, e)


# -- Over the intra-op pool's team (rill.exec.kernels.intra_op.team): runs of values or rows per
# piece, run by the caller and the polling workers with no Python in the hand-off. Each value
# or row is computed as the unsplit call computes it, so the bits never depend on the split.
# A piece's arguments (int64 cells): the operands' addresses, the values (GELU) or the rows and
# their length (Softmax), the pieces, and for the GELU the address of its four coefficients.
_TX, _TOUT, _TN, _TCOLS, _TPIECES, _TCOEF = range(6)
_TNARGS = 6


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _gelu_piece(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _TNARGS)
    n, f32 = v[_TN], np.float32(0)
    x, out = _spin.array_at(v[_TX], n, f32), _spin.array_at(v[_TOUT], n, f32)
    k = _spin.array_at(v[_TCOEF], 4, f32)
    lo, hi = n * p // v[_TPIECES], n * (p + 1) // v[_TPIECES]
    if hi > lo:
        tanh_gelu32(x, out, k[0], k[1], k[2], k[3], lo, hi)


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _softmax_piece(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _TNARGS)
    rows, cols, f32 = v[_TN], v[_TCOLS], np.float32(0)
    x = _spin.array_at(v[_TX], rows * cols, f32).reshape((rows, cols))
    out = _spin.array_at(v[_TOUT], rows * cols, f32).reshape((rows, cols))
    lo, hi = rows * p // v[_TPIECES], rows * (p + 1) // v[_TPIECES]
    if hi > lo:
        softmax32_rows(x, out, lo, hi)


def gelu_piece_function() -> int:
    """The address of tanh_gelu32_team's piece function."""
    return _gelu_piece.address


def softmax_piece_function() -> int:
    """The address of softmax32_team's piece function."""
    return _softmax_piece.address


@_fjit
def tanh_gelu32_team(x, out, coefficients, pieces, team, fn):  # pragma: no cover - compiled
    """tanh_gelu32 over all of the flat float32 x (into out, as long) with coefficients
    [a, b, c, d] (float32) in `pieces` runs of values over the team (fn:
    gelu_piece_function()): the unsplit call's bits."""
    if out.shape[0] != x.shape[0] or coefficients.shape[0] != 4:
        raise ValueError("tanh_gelu32_team: out as long as x and four coefficients")
    if x.shape[0] == 0:
        return
    v = np.empty(_TNARGS, np.int64)
    v[_TX], v[_TOUT], v[_TN] = _spin.address(x), _spin.address(out), x.shape[0]
    v[_TCOLS], v[_TCOEF] = 1, _spin.address(coefficients)
    v[_TPIECES] = max(1, min(pieces, x.shape[0]))
    _spin.team_run(team, fn, v, v[_TPIECES])


@_fjit
def softmax32_team(x, out, pieces, team, fn):  # pragma: no cover - compiled
    """softmax32_rows over all rows of the C-contiguous float32 x [rows, n] (into out, of its
    shape) in `pieces` runs of rows over the team (fn: softmax_piece_function()): the unsplit
    call's bits."""
    if out.shape != x.shape:
        raise ValueError("softmax32_team: out of x's shape")
    if x.shape[0] == 0 or x.shape[1] == 0:
        return
    v = np.empty(_TNARGS, np.int64)
    v[_TX], v[_TOUT] = _spin.address(x), _spin.address(out)
    v[_TN], v[_TCOLS], v[_TCOEF] = x.shape[0], x.shape[1], 0
    v[_TPIECES] = max(1, min(pieces, x.shape[0]))
    _spin.team_run(team, fn, v, v[_TPIECES])
