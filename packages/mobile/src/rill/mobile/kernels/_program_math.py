"""exp and GELU for the whole-subgraph programs' loops (rill.mobile.kernels._program_loops)
without libm: a libm call per element keeps LLVM from vectorising a loop, and was most of
SOFTMAX's and GELU's time. Both work in float64 and round once to float32 at the end, so the
float32 result is the correctly rounded one except within ~1e-9 of a rounding boundary
(tests/mobile/test_program_math.py checks them over float32's whole range)."""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def _from_bits(typingctx, k):
    """The float64 whose bit pattern is the int64 k."""
    if k != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def exp(v):  # pragma: no cover - compiled
    """exp(v) for a float64 v, relative error below 3e-10 (enough for a float32 result), for
    v clamped to [-200, 200] (float32 exp is 0 below -104 and inf above 89); NaN stays NaN.
    v = n·ln 2 + r with |r| <= ln 2 / 2: exp(v) = 2**n · exp(r), exp(r) by its Taylor series to
    r**9/9! (the first term left out is below 2.2e-11 relative), 2**n made from its bits.
    Inlined into its callers (numba IR), so their loops vectorise; it has no step that their
    fast-math flags (reassociation, contraction) could change beyond float64 rounding."""
    c = v
    if c < -200.0:
        c = -200.0
    if c > 200.0:
        c = 200.0
    n = np.floor(c * 1.4426950408889634 + 0.5)
    r = c - n * 0.6931471805599453
    q = 1.0 / 362880.0
    q = q * r + 1.0 / 40320.0
    q = q * r + 1.0 / 5040.0
    q = q * r + 1.0 / 720.0
    q = q * r + 1.0 / 120.0
    q = q * r + 1.0 / 24.0
    q = q * r + 1.0 / 6.0
    q = q * r + 0.5
    q = q * r + 1.0
    q = q * r + 1.0
    e = q * _from_bits((np.int64(n) + 1023) << 52)
    return e if v == v else v


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def gelu_erf(x):  # pragma: no cover - compiled
    """GELU, x/2 · (1 + erf(x/√2)), for a float64 x, as x/2 · erfc(-x/√2) (no cancellation for
    negative x: the result keeps its relative accuracy down to float32's smallest values).
    erfc(a) for a = |x|/√2 <= 10.5 is t · exp(-a² + P(t)), t = 2 / (2 + a), P a degree-12
    polynomial (tools/fit_erfc.py: a least-squares fit at Chebyshev nodes to float64
    math.erfc) with relative error below 2e-10 there; beyond, erfc(a) < 1e-49 and GELU rounds
    to ±0 in float32, so erfc is taken as 0; NaN stays NaN."""
    z = x * 0.7071067811865476
    a = abs(z)
    t = 2.0 / (2.0 + a)
    p = 0.18581161730970863
    p = p * t - 1.3723492748916413
    p = p * t + 4.391175681170659
    p = p * t - 7.866346679298776
    p = p * t + 8.517234533608635
    p = p * t - 5.732661159526002
    p = p * t + 2.6492571575561894
    p = p * t - 1.065682370777576
    p = p * t + 0.13302166924929354
    p = p * t + 0.0474253748966975
    p = p * t + 0.3788636296665922
    p = p * t + 0.9997550215902586
    p = p * t - 1.2655052003816867
    e = t * exp(p - a * a)
    if not a <= 10.5:
        e = 0.0
    one_plus_erf = e if z < 0.0 else 2.0 - e
    return 0.5 * x * one_plus_erf
