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
