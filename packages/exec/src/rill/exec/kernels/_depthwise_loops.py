"""The written-out depthwise tap loops behind rill.exec.kernels._conv_loops (import that module).

Written by tools/gen_depthwise_loops.py; do not edit by hand.

Each window's sum is 0 + x·w(tap 0) + x·w(tap 1) + ... over the taps in row-major order, as in
the generic loops and the numpy kernel (no fused multiply-add, no reassociation), so the results
are bit-identical to theirs. Offsets are unsigned, so the compiler drops negative-index handling
and vectorizes the loops; every input is read from one array, so one overlap check suffices.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def taps_3x3(ph, w, ci, m, sh, sw, dh, dw, wq, plane, span, acc):  # pragma: no cover
    """acc[o] = the sum of the 9 taps at position o of the phase planes ph (flat,
    plane elements each, rows wq long) for channel ci, multiplier m of w [kh, kw, c, m]."""
    zero = acc.dtype.type(0)
    s0 = np.uint64(
        ((0 * dh) % sh * sw + (0 * dw) % sw) * plane + (0 * dh) // sh * wq + (0 * dw) // sw
    )
    w0 = w[0, 0, ci, m]
    s1 = np.uint64(
        ((0 * dh) % sh * sw + (1 * dw) % sw) * plane + (0 * dh) // sh * wq + (1 * dw) // sw
    )
    w1 = w[0, 1, ci, m]
    s2 = np.uint64(
        ((0 * dh) % sh * sw + (2 * dw) % sw) * plane + (0 * dh) // sh * wq + (2 * dw) // sw
    )
    w2 = w[0, 2, ci, m]
    s3 = np.uint64(
        ((1 * dh) % sh * sw + (0 * dw) % sw) * plane + (1 * dh) // sh * wq + (0 * dw) // sw
    )
    w3 = w[1, 0, ci, m]
    s4 = np.uint64(
        ((1 * dh) % sh * sw + (1 * dw) % sw) * plane + (1 * dh) // sh * wq + (1 * dw) // sw
    )
    w4 = w[1, 1, ci, m]
    s5 = np.uint64(
        ((1 * dh) % sh * sw + (2 * dw) % sw) * plane + (1 * dh) // sh * wq + (2 * dw) // sw
    )
    w5 = w[1, 2, ci, m]
    s6 = np.uint64(
        ((2 * dh) % sh * sw + (0 * dw) % sw) * plane + (2 * dh) // sh * wq + (0 * dw) // sw
    )
    w6 = w[2, 0, ci, m]
    s7 = np.uint64(
        ((2 * dh) % sh * sw + (1 * dw) % sw) * plane + (2 * dh) // sh * wq + (1 * dw) // sw
    )
    w7 = w[2, 1, ci, m]
    s8 = np.uint64(
        ((2 * dh) % sh * sw + (2 * dw) % sw) * plane + (2 * dh) // sh * wq + (2 * dw) // sw
    )
    w8 = w[2, 2, ci, m]
    for o in range(np.uint64(span)):
        v = zero + ph[s0 + o] * w0
        v = v + ph[s1 + o] * w1
        v = v + ph[s2 + o] * w2
        v = v + ph[s3 + o] * w3
        v = v + ph[s4 + o] * w4
        v = v + ph[s5 + o] * w5
        v = v + ph[s6 + o] * w6
        v = v + ph[s7 + o] * w7
        v = v + ph[s8 + o] * w8
        acc[o] = v


@_jit
def chan_3x3(xt, wt, base, row, col, c, acc):  # pragma: no cover
    """acc[q] = the sum of the 9 taps of channel q at one output position: xt is the
    channels-last padded image (flat), base the first tap's offset, row and col the offsets between taps
    down and across; wt the [k, k, c] filter (flat)."""
    zero = acc.dtype.type(0)
    b = np.uint64(base)
    r = np.uint64(row)
    cc = np.uint64(col)
    n = np.uint64(c)
    x0 = b + np.uint64(0) * r + np.uint64(0) * cc
    f0 = np.uint64(0) * n
    x1 = b + np.uint64(0) * r + np.uint64(1) * cc
    f1 = np.uint64(1) * n
    x2 = b + np.uint64(0) * r + np.uint64(2) * cc
    f2 = np.uint64(2) * n
    x3 = b + np.uint64(1) * r + np.uint64(0) * cc
    f3 = np.uint64(3) * n
    x4 = b + np.uint64(1) * r + np.uint64(1) * cc
    f4 = np.uint64(4) * n
    x5 = b + np.uint64(1) * r + np.uint64(2) * cc
    f5 = np.uint64(5) * n
    x6 = b + np.uint64(2) * r + np.uint64(0) * cc
    f6 = np.uint64(6) * n
    x7 = b + np.uint64(2) * r + np.uint64(1) * cc
    f7 = np.uint64(7) * n
    x8 = b + np.uint64(2) * r + np.uint64(2) * cc
    f8 = np.uint64(8) * n
    for q in range(n):
        v = zero + xt[x0 + q] * wt[f0 + q]
        v = v + xt[x1 + q] * wt[f1 + q]
        v = v + xt[x2 + q] * wt[f2 + q]
        v = v + xt[x3 + q] * wt[f3 + q]
        v = v + xt[x4 + q] * wt[f4 + q]
        v = v + xt[x5 + q] * wt[f5 + q]
        v = v + xt[x6 + q] * wt[f6 + q]
        v = v + xt[x7 + q] * wt[f7 + q]
        v = v + xt[x8 + q] * wt[f8 + q]
        acc[q] = v


@_jit
def taps_5x5(ph, w, ci, m, sh, sw, dh, dw, wq, plane, span, acc):  # pragma: no cover
    """acc[o] = the sum of the 25 taps at position o of the phase planes ph (flat,
    plane elements each, rows wq long) for channel ci, multiplier m of w [kh, kw, c, m]."""
    zero = acc.dtype.type(0)
    s0 = np.uint64(
        ((0 * dh) % sh * sw + (0 * dw) % sw) * plane + (0 * dh) // sh * wq + (0 * dw) // sw
    )
    w0 = w[0, 0, ci, m]
    s1 = np.uint64(
        ((0 * dh) % sh * sw + (1 * dw) % sw) * plane + (0 * dh) // sh * wq + (1 * dw) // sw
    )
    w1 = w[0, 1, ci, m]
    s2 = np.uint64(
        ((0 * dh) % sh * sw + (2 * dw) % sw) * plane + (0 * dh) // sh * wq + (2 * dw) // sw
    )
    w2 = w[0, 2, ci, m]
    s3 = np.uint64(
        ((0 * dh) % sh * sw + (3 * dw) % sw) * plane + (0 * dh) // sh * wq + (3 * dw) // sw
    )
    w3 = w[0, 3, ci, m]
    s4 = np.uint64(
        ((0 * dh) % sh * sw + (4 * dw) % sw) * plane + (0 * dh) // sh * wq + (4 * dw) // sw
    )
    w4 = w[0, 4, ci, m]
    s5 = np.uint64(
        ((1 * dh) % sh * sw + (0 * dw) % sw) * plane + (1 * dh) // sh * wq + (0 * dw) // sw
    )
    w5 = w[1, 0, ci, m]
    s6 = np.uint64(
        ((1 * dh) % sh * sw + (1 * dw) % sw) * plane + (1 * dh) // sh * wq + (1 * dw) // sw
    )
    w6 = w[1, 1, ci, m]
    s7 = np.uint64(
        ((1 * dh) % sh * sw + (2 * dw) % sw) * plane + (1 * dh) // sh * wq + (2 * dw) // sw
    )
    w7 = w[1, 2, ci, m]
    s8 = np.uint64(
        ((1 * dh) % sh * sw + (3 * dw) % sw) * plane + (1 * dh) // sh * wq + (3 * dw) // sw
    )
    w8 = w[1, 3, ci, m]
    s9 = np.uint64(
        ((1 * dh) % sh * sw + (4 * dw) % sw) * plane + (1 * dh) // sh * wq + (4 * dw) // sw
    )
    w9 = w[1, 4, ci, m]
    s10 = np.uint64(
        ((2 * dh) % sh * sw + (0 * dw) % sw) * plane + (2 * dh) // sh * wq + (0 * dw) // sw
    )
    w10 = w[2, 0, ci, m]
    s11 = np.uint64(
        ((2 * dh) % sh * sw + (1 * dw) % sw) * plane + (2 * dh) // sh * wq + (1 * dw) // sw
    )
    w11 = w[2, 1, ci, m]
    s12 = np.uint64(
        ((2 * dh) % sh * sw + (2 * dw) % sw) * plane + (2 * dh) // sh * wq + (2 * dw) // sw
    )
    w12 = w[2, 2, ci, m]
    s13 = np.uint64(
        ((2 * dh) % sh * sw + (3 * dw) % sw) * plane + (2 * dh) // sh * wq + (3 * dw) // sw
    )
    w13 = w[2, 3, ci, m]
    s14 = np.uint64(
        ((2 * dh) % sh * sw + (4 * dw) % sw) * plane + (2 * dh) // sh * wq + (4 * dw) // sw
    )
    w14 = w[2, 4, ci, m]
    s15 = np.uint64(
        ((3 * dh) % sh * sw + (0 * dw) % sw) * plane + (3 * dh) // sh * wq + (0 * dw) // sw
    )
    w15 = w[3, 0, ci, m]
    s16 = np.uint64(
        ((3 * dh) % sh * sw + (1 * dw) % sw) * plane + (3 * dh) // sh * wq + (1 * dw) // sw
    )
    w16 = w[3, 1, ci, m]
    s17 = np.uint64(
        ((3 * dh) % sh * sw + (2 * dw) % sw) * plane + (3 * dh) // sh * wq + (2 * dw) // sw
    )
    w17 = w[3, 2, ci, m]
    s18 = np.uint64(
        ((3 * dh) % sh * sw + (3 * dw) % sw) * plane + (3 * dh) // sh * wq + (3 * dw) // sw
    )
    w18 = w[3, 3, ci, m]
    s19 = np.uint64(
        ((3 * dh) % sh * sw + (4 * dw) % sw) * plane + (3 * dh) // sh * wq + (4 * dw) // sw
    )
    w19 = w[3, 4, ci, m]
    s20 = np.uint64(
        ((4 * dh) % sh * sw + (0 * dw) % sw) * plane + (4 * dh) // sh * wq + (0 * dw) // sw
    )
    w20 = w[4, 0, ci, m]
    s21 = np.uint64(
        ((4 * dh) % sh * sw + (1 * dw) % sw) * plane + (4 * dh) // sh * wq + (1 * dw) // sw
    )
    w21 = w[4, 1, ci, m]
    s22 = np.uint64(
        ((4 * dh) % sh * sw + (2 * dw) % sw) * plane + (4 * dh) // sh * wq + (2 * dw) // sw
    )
    w22 = w[4, 2, ci, m]
    s23 = np.uint64(
        ((4 * dh) % sh * sw + (3 * dw) % sw) * plane + (4 * dh) // sh * wq + (3 * dw) // sw
    )
    w23 = w[4, 3, ci, m]
    s24 = np.uint64(
        ((4 * dh) % sh * sw + (4 * dw) % sw) * plane + (4 * dh) // sh * wq + (4 * dw) // sw
    )
    w24 = w[4, 4, ci, m]
    for o in range(np.uint64(span)):
        v = zero + ph[s0 + o] * w0
        v = v + ph[s1 + o] * w1
        v = v + ph[s2 + o] * w2
        v = v + ph[s3 + o] * w3
        v = v + ph[s4 + o] * w4
        v = v + ph[s5 + o] * w5
        v = v + ph[s6 + o] * w6
        v = v + ph[s7 + o] * w7
        v = v + ph[s8 + o] * w8
        v = v + ph[s9 + o] * w9
        v = v + ph[s10 + o] * w10
        v = v + ph[s11 + o] * w11
        v = v + ph[s12 + o] * w12
        v = v + ph[s13 + o] * w13
        v = v + ph[s14 + o] * w14
        v = v + ph[s15 + o] * w15
        v = v + ph[s16 + o] * w16
        v = v + ph[s17 + o] * w17
        v = v + ph[s18 + o] * w18
        v = v + ph[s19 + o] * w19
        v = v + ph[s20 + o] * w20
        v = v + ph[s21 + o] * w21
        v = v + ph[s22 + o] * w22
        v = v + ph[s23 + o] * w23
        v = v + ph[s24 + o] * w24
        acc[o] = v


@_jit
def chan_5x5(xt, wt, base, row, col, c, acc):  # pragma: no cover
    """acc[q] = the sum of the 25 taps of channel q at one output position: xt is the
    channels-last padded image (flat), base the first tap's offset, row and col the offsets between taps
    down and across; wt the [k, k, c] filter (flat)."""
    zero = acc.dtype.type(0)
    b = np.uint64(base)
    r = np.uint64(row)
    cc = np.uint64(col)
    n = np.uint64(c)
    x0 = b + np.uint64(0) * r + np.uint64(0) * cc
    f0 = np.uint64(0) * n
    x1 = b + np.uint64(0) * r + np.uint64(1) * cc
    f1 = np.uint64(1) * n
    x2 = b + np.uint64(0) * r + np.uint64(2) * cc
    f2 = np.uint64(2) * n
    x3 = b + np.uint64(0) * r + np.uint64(3) * cc
    f3 = np.uint64(3) * n
    x4 = b + np.uint64(0) * r + np.uint64(4) * cc
    f4 = np.uint64(4) * n
    x5 = b + np.uint64(1) * r + np.uint64(0) * cc
    f5 = np.uint64(5) * n
    x6 = b + np.uint64(1) * r + np.uint64(1) * cc
    f6 = np.uint64(6) * n
    x7 = b + np.uint64(1) * r + np.uint64(2) * cc
    f7 = np.uint64(7) * n
    x8 = b + np.uint64(1) * r + np.uint64(3) * cc
    f8 = np.uint64(8) * n
    x9 = b + np.uint64(1) * r + np.uint64(4) * cc
    f9 = np.uint64(9) * n
    x10 = b + np.uint64(2) * r + np.uint64(0) * cc
    f10 = np.uint64(10) * n
    x11 = b + np.uint64(2) * r + np.uint64(1) * cc
    f11 = np.uint64(11) * n
    x12 = b + np.uint64(2) * r + np.uint64(2) * cc
    f12 = np.uint64(12) * n
    x13 = b + np.uint64(2) * r + np.uint64(3) * cc
    f13 = np.uint64(13) * n
    x14 = b + np.uint64(2) * r + np.uint64(4) * cc
    f14 = np.uint64(14) * n
    x15 = b + np.uint64(3) * r + np.uint64(0) * cc
    f15 = np.uint64(15) * n
    x16 = b + np.uint64(3) * r + np.uint64(1) * cc
    f16 = np.uint64(16) * n
    x17 = b + np.uint64(3) * r + np.uint64(2) * cc
    f17 = np.uint64(17) * n
    x18 = b + np.uint64(3) * r + np.uint64(3) * cc
    f18 = np.uint64(18) * n
    x19 = b + np.uint64(3) * r + np.uint64(4) * cc
    f19 = np.uint64(19) * n
    x20 = b + np.uint64(4) * r + np.uint64(0) * cc
    f20 = np.uint64(20) * n
    x21 = b + np.uint64(4) * r + np.uint64(1) * cc
    f21 = np.uint64(21) * n
    x22 = b + np.uint64(4) * r + np.uint64(2) * cc
    f22 = np.uint64(22) * n
    x23 = b + np.uint64(4) * r + np.uint64(3) * cc
    f23 = np.uint64(23) * n
    x24 = b + np.uint64(4) * r + np.uint64(4) * cc
    f24 = np.uint64(24) * n
    for q in range(n):
        v = zero + xt[x0 + q] * wt[f0 + q]
        v = v + xt[x1 + q] * wt[f1 + q]
        v = v + xt[x2 + q] * wt[f2 + q]
        v = v + xt[x3 + q] * wt[f3 + q]
        v = v + xt[x4 + q] * wt[f4 + q]
        v = v + xt[x5 + q] * wt[f5 + q]
        v = v + xt[x6 + q] * wt[f6 + q]
        v = v + xt[x7 + q] * wt[f7 + q]
        v = v + xt[x8 + q] * wt[f8 + q]
        v = v + xt[x9 + q] * wt[f9 + q]
        v = v + xt[x10 + q] * wt[f10 + q]
        v = v + xt[x11 + q] * wt[f11 + q]
        v = v + xt[x12 + q] * wt[f12 + q]
        v = v + xt[x13 + q] * wt[f13 + q]
        v = v + xt[x14 + q] * wt[f14 + q]
        v = v + xt[x15 + q] * wt[f15 + q]
        v = v + xt[x16 + q] * wt[f16 + q]
        v = v + xt[x17 + q] * wt[f17 + q]
        v = v + xt[x18 + q] * wt[f18 + q]
        v = v + xt[x19 + q] * wt[f19 + q]
        v = v + xt[x20 + q] * wt[f20 + q]
        v = v + xt[x21 + q] * wt[f21 + q]
        v = v + xt[x22 + q] * wt[f22 + q]
        v = v + xt[x23 + q] * wt[f23 + q]
        v = v + xt[x24 + q] * wt[f24 + q]
        acc[q] = v
