"""The float32 Sigmoid and Swish of the fused epilogues (rill.exec.kernels._conv_loops
re-exports them; import that module): sigmoid32, within 4 ulp of the exact value, and the loops
applying it in place.

Each loop first looks at its run: where no value is below ORDINARY_LOW (-87, where the results
are still normal floats; NaN is fine), it applies _sigmoid32_ordinary, sigmoid32 without its
branch-free handling of the far tail (the clamp at -120, the 2**64 scaling for subnormal
results), about a third less arithmetic per value and the very same bits there (tests/exec/
test_sigmoid32.py compares them over that whole range); else sigmoid32 itself. The look is one
vectorized pass over a run the loop is about to read anyway.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numba
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

# No fast-math (NaN and the infinities stay IEEE's): the fused multiply-adds are explicit
# (_fma), so that every compiled context rounds the same. numba inlines a function into its
# caller before LLVM sees either, so with LLVM free to contract (fastmath "contract") the same
# operations could be fused differently in two callers: a fresh compile gave the fused tanh
# GELU and the Tanh kernel tanh values one ulp apart.
_fjit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
_inline = numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")


@intrinsic
def _fma(typingctx, a, b, c):
    """a · b + c rounded once (llvm.fma), for float32 or float64 a, b, c of one type; LLVM
    vectorizes it (vfmadd)."""
    if not (a == b == c and isinstance(a, types.Float)):
        return None

    def codegen(context, builder, sig, args):
        ty = context.get_value_type(sig.return_type)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ty, [ty] * 3), f"llvm.fma.f{a.bitwidth}"
        )
        return builder.call(fn, args)

    return a(a, b, c), codegen


@intrinsic
def _pow2_magic(typingctx, j):
    """2**n as a float32 for j = 1.5·2**23 + n, n an integer in [-126, 127]: n is in the low
    bits of j's pattern, and (bits + 127) << 23 drops the rest (no conversion, no libm call,
    so that the loops calling it vectorize)."""
    if j != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = context.get_value_type(types.int32)
        k = builder.add(builder.bitcast(args[0], i32), context.get_constant(types.int32, 127))
        k = builder.shl(k, context.get_constant(types.int32, 23))
        return builder.bitcast(k, context.get_value_type(types.float32))

    return types.float32(types.float32), codegen


@_inline
def _exp_parts(a):  # pragma: no cover - compiled
    """exp(a) for a float32 a (clamped by the caller) as (j, n, q), exp(a) = 2**n · q:
    n = round(a / ln 2), rounded by adding 1.5·2**23 (j, which keeps n in its low bits for
    _pow2_magic), r = a - n·ln 2 in two parts (Cody and Waite), q = exp(r) by its Taylor series
    to r**7/7!, every multiply-add fused explicitly. Shared by sigmoid32, _sigmoid32_ordinary
    and _exp_tanh_loops' exp32."""
    f = np.float32
    magic = f(12582912.0)  # 1.5·2**23
    j = _fma(a, f(1.4426950408889634), magic)
    n = j - magic
    r = _fma(n, f(-0.693359375), a)
    r = _fma(n, f(2.1219444e-4), r)
    q = f(1.0 / 5040.0)
    q = _fma(q, r, f(1.0 / 720.0))
    q = _fma(q, r, f(1.0 / 120.0))
    q = _fma(q, r, f(1.0 / 24.0))
    q = _fma(q, r, f(1.0 / 6.0))
    q = _fma(q, r, f(0.5))
    q = _fma(q, r, f(1.0))
    q = _fma(q, r, f(1.0))
    return j, n, q


@_inline
def _keep_nan(x, res):  # pragma: no cover - compiled
    """res, or x (a NaN: a quiet one as it is, a signaling one quieted) where x is a NaN. Not
    x itself: stored back where x was loaded, "x where NaN, else res" let LLVM store only
    the other lanes, a masked store (vmaskmovps), microcoded on AMD CPUs: Swish over 602K
    float32 on Zen 3, 0.99 -> 0.82 ns a value."""
    return x + np.float32(0.0) if x != x else res


@_inline
def sigmoid32(x, swish):  # pragma: no cover - compiled
    """1 / (1 + exp(-x)) (or x times it, for Swish) for a float32 x, within 4 ulp of the exact
    value over float32's whole range, subnormal results included (tests/exec/
    test_sigmoid32.py checks it against float64); NaN stays the same NaN. Branch-free, so that
    the loops calling it vectorize: e = exp(-|x|) = 2**n · exp(r) with n = round(-|x|/ln 2)
    (rounded by adding 1.5·2**23, which leaves n in the low bits) and r = -|x| - n·ln 2 in two
    parts (Cody and Waite; ln 2's first part has 12 bits, so n times it is exact), exp(r) by
    its Taylor series to r**7/7! (|r| <= ln 2 / 2: the first term left out is below 1.2e-8
    relative), 2**n from its bits, as 2**(n + 64) · 2**-64 below n = -64 (n reaches -174,
    where float32 has no exponent). Sigmoid is 1 / (1 + e) for x >= 0 and e / (1 + e) for
    x < 0, the 2**-64 applied last so that a subnormal result is rounded once. -|x| is clamped
    at -120; below, x < -120 gives (-)0 (the exact values round to it), and x = -inf NaN in
    Swish, as -inf · 0 does in the unfused chain."""
    f = np.float32
    a = -np.abs(x)
    far = a < f(-120.0)
    a = a if a > f(-120.0) else f(-120.0)  # a NaN becomes -120 here, and x at the end
    j, n, q = _exp_parts(a)
    low = n < f(-64.0)
    ea = q * _pow2_magic(j + (f(64.0) if low else f(0.0)))
    sc = f(5.421010862427522e-20) if low else f(1.0)  # 2**-64
    den = f(1.0) + ea * sc
    neg = x < f(0.0)
    num = ea if neg else f(1.0)
    scale = (f(0.0) if far else sc) if neg else f(1.0)  # x < -120: the value rounds to 0
    if swish:
        num = x * num
    res = (num / den) * scale
    return _keep_nan(x, res)


# The lowest value _sigmoid32_ordinary takes: exp(-87) = 1.6e-38 is still a normal float32 (the
# smallest is 1.18e-38), so are e / (1 + e) and x times it; 2**n stays a normal float32 too
# (n >= -126).
ORDINARY_LOW = -87.0


@_inline
def _sigmoid32_ordinary(x, swish):  # pragma: no cover - compiled
    """sigmoid32(x, swish) for x >= ORDINARY_LOW (or NaN): the same operations, less the tail's.
    -|x| is clamped at -87 instead of -120 (for x > 87 both give 1, or x in Swish: 1 + e
    rounds to 1), and 2**n is formed directly: where sigmoid32 forms 2**(n + 64) and scales by
    2**-64 (n < -64), every value involved is a normal float32 here, so the scaling by a power
    of two changes no rounding, and the bits are sigmoid32's."""
    f = np.float32
    a = -np.abs(x)
    a = a if a > f(ORDINARY_LOW) else f(ORDINARY_LOW)
    j, n, q = _exp_parts(a)
    ea = q * _pow2_magic(j)
    den = f(1.0) + ea
    num = ea if x < f(0.0) else f(1.0)
    if swish:
        num = x * num
    res = num / den
    return _keep_nan(x, res)


# ORDINARY_LOW's bit pattern: a float32 below it (or -inf, or a NaN with its sign bit set) has
# a larger pattern read as uint32, every other value a smaller or equal one.
_LOW_BITS = np.uint32(0xC2AE0000)


@numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy", inline="always")
def ordinary(v):  # pragma: no cover - compiled
    """Whether no value of the contiguous 1-D float32 run v is below ORDINARY_LOW (nor -inf, nor
    a NaN with its sign bit set): the largest bit pattern read as uint32, an integer maximum
    that vectorizes (a float compare and count took 2.5 times as long)."""
    u = v.view(np.uint32)
    m = np.uint32(0)
    for o in range(u.shape[0]):
        t = u[o]
        m = t if t > m else m
    return m <= _LOW_BITS


@_fjit
def _apply(v, swish):  # pragma: no cover - compiled
    """v = sigmoid32(v) in place (Swish's value when swish), a contiguous 1-D float32 run."""
    if ordinary(v):
        # Four quarters side by side: each value's operations are a chain of some 55 cycles
        # (seven fused multiply-adds, a division), and one chain a vector kept too few in
        # flight (Zen 3: 0.82 -> 0.66 ns a value; two halves, 0.70).
        n = v.shape[0]
        q = n // 4
        a, b, c, d = v[:q], v[q : 2 * q], v[2 * q : 3 * q], v[3 * q : 4 * q]
        for o in range(q):
            a[o] = _sigmoid32_ordinary(a[o], swish)
            b[o] = _sigmoid32_ordinary(b[o], swish)
            c[o] = _sigmoid32_ordinary(c[o], swish)
            d[o] = _sigmoid32_ordinary(d[o], swish)
        for o in range(4 * q, n):
            v[o] = _sigmoid32_ordinary(v[o], swish)
    else:
        for o in range(v.shape[0]):  # from 0: no negative-index select, no gather
            v[o] = sigmoid32(v[o], swish)


@_fjit
def sigmoid32_flat(a, swish, lo, hi):  # pragma: no cover - compiled
    """a[lo:hi] = sigmoid32(a[lo:hi]) (Swish's value when swish), a 1-D float32 array, in place
    (one array read and written at the same index: separate input and output arrays would need
    LLVM's overlap check, which sends an in-place call to the scalar loop, 8x slower)."""
    _apply(a[lo:hi], swish)


@_fjit
def sigmoid32_planes(planes, bias, swish, lo, hi):  # pragma: no cover - compiled
    """planes [n·C, h·w] float32 (C-contiguous) in place, rows [lo, hi): + bias[row % C] (none
    when bias is empty), then sigmoid32 (Swish's value when swish) over the rows as one run:
    a loop per row would leave each short row's tail (up to 31 values of a 7×7 plane) to the
    scalar loop, several times slower."""
    c = bias.shape[0]
    if c > 0:
        for r in range(lo, hi):
            row = planes[r]
            bq = bias[r % c]
            for o in range(row.shape[0]):
                row[o] = row[o] + bq
    w = planes.shape[1]
    _apply(planes.reshape(-1)[lo * w : hi * w], swish)


@_fjit
def sigmoid32_span(out, b, swish, lo, hi):  # pragma: no cover - compiled
    """out[b, oc] (float32 [n, C, h, w], read flat) elements [lo, hi) of every channel oc, in
    place: sigmoid32 (Swish's value when swish), on a band conv_nchw's product wrote."""
    _, co, oh, ow = out.shape
    flat = out.reshape(out.shape[0], co, oh * ow)
    for oc in range(co):
        _apply(flat[b, oc, lo:hi], swish)
