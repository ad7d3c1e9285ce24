"""The compiled direct convolution loops behind rill.exec.kernels.conv_direct (import that
module).

Written by tools/gen_direct_conv_loops.py; do not edit by hand.

Arrays are flat and C-contiguous: xp the zero-padded NHWC input, w the [taps, o] filter matrix,
out / dy the NHWC output (gradient). offs[t] is filter tap t's offset in xp from its window's
first element; an output pixel's window starts at image * img + y * rs + x * cs. Indices are
unsigned, so the compiler drops negative-index handling. Each loop keeps Q channels of a few
pixels (or taps) in named scalars, which the compiler packs into vector registers (the loops are
compiled with the superword-level vectorizer on; conv_direct does that). Every sum runs in a
fixed order (taps in order; pixels in order within a block), so the bits do not depend on the
threads; multiply-adds may be fused.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba.core.compiler_lock import global_compiler_lock

_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"}
)
U = np.uint64
_lock = threading.Lock()
_ready: set = set()


def compiled(name: str, args: tuple):
    """The loop `name` compiled for `args`' types with the superword-level vectorizer on (or
    loaded from numba's cache, where an earlier process compiled it so), under numba's compiler
    lock so that no other compilation sees the setting; a numba without it compiles as it is."""
    fn = globals()[name]
    sig = tuple(numba.typeof(a) for a in args)
    if (name, sig) in _ready:
        return fn
    with _lock, global_compiler_lock:
        old = getattr(numba.config, "SLP_VECTORIZE", None)
        if old is not None:
            numba.config.SLP_VECTORIZE = 1
        try:
            fn.compile(sig)
        finally:
            if old is not None:
                numba.config.SLP_VECTORIZE = old
    _ready.add((name, sig))
    return fn


# fmt: off


@_jit
def forward_q32(xp, w, offs, out, zero, oh, ow, rs, cs, o, img, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """Output channels q0 .. q0 + 32 of images [n0, n1), rows [y0, y1): 4 pixels a pass."""
    taps = U(len(offs))
    oo = U(o)
    width = U(ow)
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            dst = (b * U(oh) + y) * width * oo + U(q0)
            x = U(0)
            while x + U(4) <= width:
                s0, s1, s2, s3 = first + (x + U(0)) * U(cs), first + (x + U(1)) * U(cs), first + (x + U(2)) * U(cs), first + (x + U(3)) * U(cs)
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                for t in range(taps):
                    off = offs[t]
                    row = t * oo + U(q0)
                    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15, w16, w17, w18, w19, w20, w21, w22, w23, w24, w25, w26, w27, w28, w29, w30, w31 = w[row + U(0)], w[row + U(1)], w[row + U(2)], w[row + U(3)], w[row + U(4)], w[row + U(5)], w[row + U(6)], w[row + U(7)], w[row + U(8)], w[row + U(9)], w[row + U(10)], w[row + U(11)], w[row + U(12)], w[row + U(13)], w[row + U(14)], w[row + U(15)], w[row + U(16)], w[row + U(17)], w[row + U(18)], w[row + U(19)], w[row + U(20)], w[row + U(21)], w[row + U(22)], w[row + U(23)], w[row + U(24)], w[row + U(25)], w[row + U(26)], w[row + U(27)], w[row + U(28)], w[row + U(29)], w[row + U(30)], w[row + U(31)]
                    v0, v1, v2, v3 = xp[s0 + off], xp[s1 + off], xp[s2 + off], xp[s3 + off]
                    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = a0_0 + v0 * w0, a0_1 + v0 * w1, a0_2 + v0 * w2, a0_3 + v0 * w3, a0_4 + v0 * w4, a0_5 + v0 * w5, a0_6 + v0 * w6, a0_7 + v0 * w7, a0_8 + v0 * w8, a0_9 + v0 * w9, a0_10 + v0 * w10, a0_11 + v0 * w11, a0_12 + v0 * w12, a0_13 + v0 * w13, a0_14 + v0 * w14, a0_15 + v0 * w15, a0_16 + v0 * w16, a0_17 + v0 * w17, a0_18 + v0 * w18, a0_19 + v0 * w19, a0_20 + v0 * w20, a0_21 + v0 * w21, a0_22 + v0 * w22, a0_23 + v0 * w23, a0_24 + v0 * w24, a0_25 + v0 * w25, a0_26 + v0 * w26, a0_27 + v0 * w27, a0_28 + v0 * w28, a0_29 + v0 * w29, a0_30 + v0 * w30, a0_31 + v0 * w31
                    a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31 = a1_0 + v1 * w0, a1_1 + v1 * w1, a1_2 + v1 * w2, a1_3 + v1 * w3, a1_4 + v1 * w4, a1_5 + v1 * w5, a1_6 + v1 * w6, a1_7 + v1 * w7, a1_8 + v1 * w8, a1_9 + v1 * w9, a1_10 + v1 * w10, a1_11 + v1 * w11, a1_12 + v1 * w12, a1_13 + v1 * w13, a1_14 + v1 * w14, a1_15 + v1 * w15, a1_16 + v1 * w16, a1_17 + v1 * w17, a1_18 + v1 * w18, a1_19 + v1 * w19, a1_20 + v1 * w20, a1_21 + v1 * w21, a1_22 + v1 * w22, a1_23 + v1 * w23, a1_24 + v1 * w24, a1_25 + v1 * w25, a1_26 + v1 * w26, a1_27 + v1 * w27, a1_28 + v1 * w28, a1_29 + v1 * w29, a1_30 + v1 * w30, a1_31 + v1 * w31
                    a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31 = a2_0 + v2 * w0, a2_1 + v2 * w1, a2_2 + v2 * w2, a2_3 + v2 * w3, a2_4 + v2 * w4, a2_5 + v2 * w5, a2_6 + v2 * w6, a2_7 + v2 * w7, a2_8 + v2 * w8, a2_9 + v2 * w9, a2_10 + v2 * w10, a2_11 + v2 * w11, a2_12 + v2 * w12, a2_13 + v2 * w13, a2_14 + v2 * w14, a2_15 + v2 * w15, a2_16 + v2 * w16, a2_17 + v2 * w17, a2_18 + v2 * w18, a2_19 + v2 * w19, a2_20 + v2 * w20, a2_21 + v2 * w21, a2_22 + v2 * w22, a2_23 + v2 * w23, a2_24 + v2 * w24, a2_25 + v2 * w25, a2_26 + v2 * w26, a2_27 + v2 * w27, a2_28 + v2 * w28, a2_29 + v2 * w29, a2_30 + v2 * w30, a2_31 + v2 * w31
                    a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31 = a3_0 + v3 * w0, a3_1 + v3 * w1, a3_2 + v3 * w2, a3_3 + v3 * w3, a3_4 + v3 * w4, a3_5 + v3 * w5, a3_6 + v3 * w6, a3_7 + v3 * w7, a3_8 + v3 * w8, a3_9 + v3 * w9, a3_10 + v3 * w10, a3_11 + v3 * w11, a3_12 + v3 * w12, a3_13 + v3 * w13, a3_14 + v3 * w14, a3_15 + v3 * w15, a3_16 + v3 * w16, a3_17 + v3 * w17, a3_18 + v3 * w18, a3_19 + v3 * w19, a3_20 + v3 * w20, a3_21 + v3 * w21, a3_22 + v3 * w22, a3_23 + v3 * w23, a3_24 + v3 * w24, a3_25 + v3 * w25, a3_26 + v3 * w26, a3_27 + v3 * w27, a3_28 + v3 * w28, a3_29 + v3 * w29, a3_30 + v3 * w30, a3_31 + v3 * w31
                d = dst + (x + U(0)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)], out[d + U(16)], out[d + U(17)], out[d + U(18)], out[d + U(19)], out[d + U(20)], out[d + U(21)], out[d + U(22)], out[d + U(23)], out[d + U(24)], out[d + U(25)], out[d + U(26)], out[d + U(27)], out[d + U(28)], out[d + U(29)], out[d + U(30)], out[d + U(31)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31
                d = dst + (x + U(1)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)], out[d + U(16)], out[d + U(17)], out[d + U(18)], out[d + U(19)], out[d + U(20)], out[d + U(21)], out[d + U(22)], out[d + U(23)], out[d + U(24)], out[d + U(25)], out[d + U(26)], out[d + U(27)], out[d + U(28)], out[d + U(29)], out[d + U(30)], out[d + U(31)] = a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31
                d = dst + (x + U(2)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)], out[d + U(16)], out[d + U(17)], out[d + U(18)], out[d + U(19)], out[d + U(20)], out[d + U(21)], out[d + U(22)], out[d + U(23)], out[d + U(24)], out[d + U(25)], out[d + U(26)], out[d + U(27)], out[d + U(28)], out[d + U(29)], out[d + U(30)], out[d + U(31)] = a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31
                d = dst + (x + U(3)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)], out[d + U(16)], out[d + U(17)], out[d + U(18)], out[d + U(19)], out[d + U(20)], out[d + U(21)], out[d + U(22)], out[d + U(23)], out[d + U(24)], out[d + U(25)], out[d + U(26)], out[d + U(27)], out[d + U(28)], out[d + U(29)], out[d + U(30)], out[d + U(31)] = a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31
                x += U(4)
            while x < width:
                s = first + x * U(cs)
                a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                for t in range(taps):
                    v = xp[s + offs[t]]
                    row = t * oo + U(q0)
                    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31 = a0 + v * w[row + U(0)], a1 + v * w[row + U(1)], a2 + v * w[row + U(2)], a3 + v * w[row + U(3)], a4 + v * w[row + U(4)], a5 + v * w[row + U(5)], a6 + v * w[row + U(6)], a7 + v * w[row + U(7)], a8 + v * w[row + U(8)], a9 + v * w[row + U(9)], a10 + v * w[row + U(10)], a11 + v * w[row + U(11)], a12 + v * w[row + U(12)], a13 + v * w[row + U(13)], a14 + v * w[row + U(14)], a15 + v * w[row + U(15)], a16 + v * w[row + U(16)], a17 + v * w[row + U(17)], a18 + v * w[row + U(18)], a19 + v * w[row + U(19)], a20 + v * w[row + U(20)], a21 + v * w[row + U(21)], a22 + v * w[row + U(22)], a23 + v * w[row + U(23)], a24 + v * w[row + U(24)], a25 + v * w[row + U(25)], a26 + v * w[row + U(26)], a27 + v * w[row + U(27)], a28 + v * w[row + U(28)], a29 + v * w[row + U(29)], a30 + v * w[row + U(30)], a31 + v * w[row + U(31)]
                d = dst + x * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)], out[d + U(16)], out[d + U(17)], out[d + U(18)], out[d + U(19)], out[d + U(20)], out[d + U(21)], out[d + U(22)], out[d + U(23)], out[d + U(24)], out[d + U(25)], out[d + U(26)], out[d + U(27)], out[d + U(28)], out[d + U(29)], out[d + U(30)], out[d + U(31)] = a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31
                x += U(1)


@_jit
def forward_q16(xp, w, offs, out, zero, oh, ow, rs, cs, o, img, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """Output channels q0 .. q0 + 16 of images [n0, n1), rows [y0, y1): 4 pixels a pass."""
    taps = U(len(offs))
    oo = U(o)
    width = U(ow)
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            dst = (b * U(oh) + y) * width * oo + U(q0)
            x = U(0)
            while x + U(4) <= width:
                s0, s1, s2, s3 = first + (x + U(0)) * U(cs), first + (x + U(1)) * U(cs), first + (x + U(2)) * U(cs), first + (x + U(3)) * U(cs)
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                for t in range(taps):
                    off = offs[t]
                    row = t * oo + U(q0)
                    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 = w[row + U(0)], w[row + U(1)], w[row + U(2)], w[row + U(3)], w[row + U(4)], w[row + U(5)], w[row + U(6)], w[row + U(7)], w[row + U(8)], w[row + U(9)], w[row + U(10)], w[row + U(11)], w[row + U(12)], w[row + U(13)], w[row + U(14)], w[row + U(15)]
                    v0, v1, v2, v3 = xp[s0 + off], xp[s1 + off], xp[s2 + off], xp[s3 + off]
                    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = a0_0 + v0 * w0, a0_1 + v0 * w1, a0_2 + v0 * w2, a0_3 + v0 * w3, a0_4 + v0 * w4, a0_5 + v0 * w5, a0_6 + v0 * w6, a0_7 + v0 * w7, a0_8 + v0 * w8, a0_9 + v0 * w9, a0_10 + v0 * w10, a0_11 + v0 * w11, a0_12 + v0 * w12, a0_13 + v0 * w13, a0_14 + v0 * w14, a0_15 + v0 * w15
                    a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15 = a1_0 + v1 * w0, a1_1 + v1 * w1, a1_2 + v1 * w2, a1_3 + v1 * w3, a1_4 + v1 * w4, a1_5 + v1 * w5, a1_6 + v1 * w6, a1_7 + v1 * w7, a1_8 + v1 * w8, a1_9 + v1 * w9, a1_10 + v1 * w10, a1_11 + v1 * w11, a1_12 + v1 * w12, a1_13 + v1 * w13, a1_14 + v1 * w14, a1_15 + v1 * w15
                    a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15 = a2_0 + v2 * w0, a2_1 + v2 * w1, a2_2 + v2 * w2, a2_3 + v2 * w3, a2_4 + v2 * w4, a2_5 + v2 * w5, a2_6 + v2 * w6, a2_7 + v2 * w7, a2_8 + v2 * w8, a2_9 + v2 * w9, a2_10 + v2 * w10, a2_11 + v2 * w11, a2_12 + v2 * w12, a2_13 + v2 * w13, a2_14 + v2 * w14, a2_15 + v2 * w15
                    a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15 = a3_0 + v3 * w0, a3_1 + v3 * w1, a3_2 + v3 * w2, a3_3 + v3 * w3, a3_4 + v3 * w4, a3_5 + v3 * w5, a3_6 + v3 * w6, a3_7 + v3 * w7, a3_8 + v3 * w8, a3_9 + v3 * w9, a3_10 + v3 * w10, a3_11 + v3 * w11, a3_12 + v3 * w12, a3_13 + v3 * w13, a3_14 + v3 * w14, a3_15 + v3 * w15
                d = dst + (x + U(0)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15
                d = dst + (x + U(1)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)] = a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15
                d = dst + (x + U(2)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)] = a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15
                d = dst + (x + U(3)) * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)] = a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15
                x += U(4)
            while x < width:
                s = first + x * U(cs)
                a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
                for t in range(taps):
                    v = xp[s + offs[t]]
                    row = t * oo + U(q0)
                    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 = a0 + v * w[row + U(0)], a1 + v * w[row + U(1)], a2 + v * w[row + U(2)], a3 + v * w[row + U(3)], a4 + v * w[row + U(4)], a5 + v * w[row + U(5)], a6 + v * w[row + U(6)], a7 + v * w[row + U(7)], a8 + v * w[row + U(8)], a9 + v * w[row + U(9)], a10 + v * w[row + U(10)], a11 + v * w[row + U(11)], a12 + v * w[row + U(12)], a13 + v * w[row + U(13)], a14 + v * w[row + U(14)], a15 + v * w[row + U(15)]
                d = dst + x * oo
                out[d + U(0)], out[d + U(1)], out[d + U(2)], out[d + U(3)], out[d + U(4)], out[d + U(5)], out[d + U(6)], out[d + U(7)], out[d + U(8)], out[d + U(9)], out[d + U(10)], out[d + U(11)], out[d + U(12)], out[d + U(13)], out[d + U(14)], out[d + U(15)] = a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15
                x += U(1)


@_jit
def filter_q32_t5(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t0 .. t0 + 5, q0 .. q0 + 32] = the sum over the pixels of images [n0, n1), rows
    [y0, y1) of the tap's input times dy, pixel by pixel in order."""
    oo = U(o)
    width = U(ow)
    o0, o1, o2, o3, o4 = offs[U(t0 + 0)], offs[U(t0 + 1)], offs[U(t0 + 2)], offs[U(t0 + 3)], offs[U(t0 + 4)]
    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15, a4_16, a4_17, a4_18, a4_19, a4_20, a4_21, a4_22, a4_23, a4_24, a4_25, a4_26, a4_27, a4_28, a4_29, a4_30, a4_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            src = (b * U(oh) + y) * width * oo + U(q0)
            for x in range(width):
                s = first + x * U(cs)
                g = src + x * oo
                g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25, g26, g27, g28, g29, g30, g31 = dy[g + U(0)], dy[g + U(1)], dy[g + U(2)], dy[g + U(3)], dy[g + U(4)], dy[g + U(5)], dy[g + U(6)], dy[g + U(7)], dy[g + U(8)], dy[g + U(9)], dy[g + U(10)], dy[g + U(11)], dy[g + U(12)], dy[g + U(13)], dy[g + U(14)], dy[g + U(15)], dy[g + U(16)], dy[g + U(17)], dy[g + U(18)], dy[g + U(19)], dy[g + U(20)], dy[g + U(21)], dy[g + U(22)], dy[g + U(23)], dy[g + U(24)], dy[g + U(25)], dy[g + U(26)], dy[g + U(27)], dy[g + U(28)], dy[g + U(29)], dy[g + U(30)], dy[g + U(31)]
                v0, v1, v2, v3, v4 = xp[s + o0], xp[s + o1], xp[s + o2], xp[s + o3], xp[s + o4]
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = a0_0 + v0 * g0, a0_1 + v0 * g1, a0_2 + v0 * g2, a0_3 + v0 * g3, a0_4 + v0 * g4, a0_5 + v0 * g5, a0_6 + v0 * g6, a0_7 + v0 * g7, a0_8 + v0 * g8, a0_9 + v0 * g9, a0_10 + v0 * g10, a0_11 + v0 * g11, a0_12 + v0 * g12, a0_13 + v0 * g13, a0_14 + v0 * g14, a0_15 + v0 * g15, a0_16 + v0 * g16, a0_17 + v0 * g17, a0_18 + v0 * g18, a0_19 + v0 * g19, a0_20 + v0 * g20, a0_21 + v0 * g21, a0_22 + v0 * g22, a0_23 + v0 * g23, a0_24 + v0 * g24, a0_25 + v0 * g25, a0_26 + v0 * g26, a0_27 + v0 * g27, a0_28 + v0 * g28, a0_29 + v0 * g29, a0_30 + v0 * g30, a0_31 + v0 * g31
                a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31 = a1_0 + v1 * g0, a1_1 + v1 * g1, a1_2 + v1 * g2, a1_3 + v1 * g3, a1_4 + v1 * g4, a1_5 + v1 * g5, a1_6 + v1 * g6, a1_7 + v1 * g7, a1_8 + v1 * g8, a1_9 + v1 * g9, a1_10 + v1 * g10, a1_11 + v1 * g11, a1_12 + v1 * g12, a1_13 + v1 * g13, a1_14 + v1 * g14, a1_15 + v1 * g15, a1_16 + v1 * g16, a1_17 + v1 * g17, a1_18 + v1 * g18, a1_19 + v1 * g19, a1_20 + v1 * g20, a1_21 + v1 * g21, a1_22 + v1 * g22, a1_23 + v1 * g23, a1_24 + v1 * g24, a1_25 + v1 * g25, a1_26 + v1 * g26, a1_27 + v1 * g27, a1_28 + v1 * g28, a1_29 + v1 * g29, a1_30 + v1 * g30, a1_31 + v1 * g31
                a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31 = a2_0 + v2 * g0, a2_1 + v2 * g1, a2_2 + v2 * g2, a2_3 + v2 * g3, a2_4 + v2 * g4, a2_5 + v2 * g5, a2_6 + v2 * g6, a2_7 + v2 * g7, a2_8 + v2 * g8, a2_9 + v2 * g9, a2_10 + v2 * g10, a2_11 + v2 * g11, a2_12 + v2 * g12, a2_13 + v2 * g13, a2_14 + v2 * g14, a2_15 + v2 * g15, a2_16 + v2 * g16, a2_17 + v2 * g17, a2_18 + v2 * g18, a2_19 + v2 * g19, a2_20 + v2 * g20, a2_21 + v2 * g21, a2_22 + v2 * g22, a2_23 + v2 * g23, a2_24 + v2 * g24, a2_25 + v2 * g25, a2_26 + v2 * g26, a2_27 + v2 * g27, a2_28 + v2 * g28, a2_29 + v2 * g29, a2_30 + v2 * g30, a2_31 + v2 * g31
                a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31 = a3_0 + v3 * g0, a3_1 + v3 * g1, a3_2 + v3 * g2, a3_3 + v3 * g3, a3_4 + v3 * g4, a3_5 + v3 * g5, a3_6 + v3 * g6, a3_7 + v3 * g7, a3_8 + v3 * g8, a3_9 + v3 * g9, a3_10 + v3 * g10, a3_11 + v3 * g11, a3_12 + v3 * g12, a3_13 + v3 * g13, a3_14 + v3 * g14, a3_15 + v3 * g15, a3_16 + v3 * g16, a3_17 + v3 * g17, a3_18 + v3 * g18, a3_19 + v3 * g19, a3_20 + v3 * g20, a3_21 + v3 * g21, a3_22 + v3 * g22, a3_23 + v3 * g23, a3_24 + v3 * g24, a3_25 + v3 * g25, a3_26 + v3 * g26, a3_27 + v3 * g27, a3_28 + v3 * g28, a3_29 + v3 * g29, a3_30 + v3 * g30, a3_31 + v3 * g31
                a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15, a4_16, a4_17, a4_18, a4_19, a4_20, a4_21, a4_22, a4_23, a4_24, a4_25, a4_26, a4_27, a4_28, a4_29, a4_30, a4_31 = a4_0 + v4 * g0, a4_1 + v4 * g1, a4_2 + v4 * g2, a4_3 + v4 * g3, a4_4 + v4 * g4, a4_5 + v4 * g5, a4_6 + v4 * g6, a4_7 + v4 * g7, a4_8 + v4 * g8, a4_9 + v4 * g9, a4_10 + v4 * g10, a4_11 + v4 * g11, a4_12 + v4 * g12, a4_13 + v4 * g13, a4_14 + v4 * g14, a4_15 + v4 * g15, a4_16 + v4 * g16, a4_17 + v4 * g17, a4_18 + v4 * g18, a4_19 + v4 * g19, a4_20 + v4 * g20, a4_21 + v4 * g21, a4_22 + v4 * g22, a4_23 + v4 * g23, a4_24 + v4 * g24, a4_25 + v4 * g25, a4_26 + v4 * g26, a4_27 + v4 * g27, a4_28 + v4 * g28, a4_29 + v4 * g29, a4_30 + v4 * g30, a4_31 + v4 * g31
    d = U(t0 + 0) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31
    d = U(t0 + 1) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15, a1_16, a1_17, a1_18, a1_19, a1_20, a1_21, a1_22, a1_23, a1_24, a1_25, a1_26, a1_27, a1_28, a1_29, a1_30, a1_31
    d = U(t0 + 2) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15, a2_16, a2_17, a2_18, a2_19, a2_20, a2_21, a2_22, a2_23, a2_24, a2_25, a2_26, a2_27, a2_28, a2_29, a2_30, a2_31
    d = U(t0 + 3) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15, a3_16, a3_17, a3_18, a3_19, a3_20, a3_21, a3_22, a3_23, a3_24, a3_25, a3_26, a3_27, a3_28, a3_29, a3_30, a3_31
    d = U(t0 + 4) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15, a4_16, a4_17, a4_18, a4_19, a4_20, a4_21, a4_22, a4_23, a4_24, a4_25, a4_26, a4_27, a4_28, a4_29, a4_30, a4_31


@_jit
def filter_q32_t1(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t0 .. t0 + 1, q0 .. q0 + 32] = the sum over the pixels of images [n0, n1), rows
    [y0, y1) of the tap's input times dy, pixel by pixel in order."""
    oo = U(o)
    width = U(ow)
    o0 = offs[U(t0 + 0)]
    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            src = (b * U(oh) + y) * width * oo + U(q0)
            for x in range(width):
                s = first + x * U(cs)
                g = src + x * oo
                g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25, g26, g27, g28, g29, g30, g31 = dy[g + U(0)], dy[g + U(1)], dy[g + U(2)], dy[g + U(3)], dy[g + U(4)], dy[g + U(5)], dy[g + U(6)], dy[g + U(7)], dy[g + U(8)], dy[g + U(9)], dy[g + U(10)], dy[g + U(11)], dy[g + U(12)], dy[g + U(13)], dy[g + U(14)], dy[g + U(15)], dy[g + U(16)], dy[g + U(17)], dy[g + U(18)], dy[g + U(19)], dy[g + U(20)], dy[g + U(21)], dy[g + U(22)], dy[g + U(23)], dy[g + U(24)], dy[g + U(25)], dy[g + U(26)], dy[g + U(27)], dy[g + U(28)], dy[g + U(29)], dy[g + U(30)], dy[g + U(31)]
                v0 = xp[s + o0]
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31 = a0_0 + v0 * g0, a0_1 + v0 * g1, a0_2 + v0 * g2, a0_3 + v0 * g3, a0_4 + v0 * g4, a0_5 + v0 * g5, a0_6 + v0 * g6, a0_7 + v0 * g7, a0_8 + v0 * g8, a0_9 + v0 * g9, a0_10 + v0 * g10, a0_11 + v0 * g11, a0_12 + v0 * g12, a0_13 + v0 * g13, a0_14 + v0 * g14, a0_15 + v0 * g15, a0_16 + v0 * g16, a0_17 + v0 * g17, a0_18 + v0 * g18, a0_19 + v0 * g19, a0_20 + v0 * g20, a0_21 + v0 * g21, a0_22 + v0 * g22, a0_23 + v0 * g23, a0_24 + v0 * g24, a0_25 + v0 * g25, a0_26 + v0 * g26, a0_27 + v0 * g27, a0_28 + v0 * g28, a0_29 + v0 * g29, a0_30 + v0 * g30, a0_31 + v0 * g31
    d = U(t0 + 0) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)], part[d + U(16)], part[d + U(17)], part[d + U(18)], part[d + U(19)], part[d + U(20)], part[d + U(21)], part[d + U(22)], part[d + U(23)], part[d + U(24)], part[d + U(25)], part[d + U(26)], part[d + U(27)], part[d + U(28)], part[d + U(29)], part[d + U(30)], part[d + U(31)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, a0_16, a0_17, a0_18, a0_19, a0_20, a0_21, a0_22, a0_23, a0_24, a0_25, a0_26, a0_27, a0_28, a0_29, a0_30, a0_31


@_jit
def filter_block_q32(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t, q] (every tap, every channel; o a multiple of 32) = the sum over the block's
    pixels of tap t's input times dy[..., q]."""
    taps = len(offs)
    for q0 in range(0, o, 32):
        t0 = 0
        while t0 + 5 <= taps:
            filter_q32_t5(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1)
            t0 += 5
        while t0 < taps:
            filter_q32_t1(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1)
            t0 += 1


@_jit
def filter_q16_t5(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t0 .. t0 + 5, q0 .. q0 + 16] = the sum over the pixels of images [n0, n1), rows
    [y0, y1) of the tap's input times dy, pixel by pixel in order."""
    oo = U(o)
    width = U(ow)
    o0, o1, o2, o3, o4 = offs[U(t0 + 0)], offs[U(t0 + 1)], offs[U(t0 + 2)], offs[U(t0 + 3)], offs[U(t0 + 4)]
    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            src = (b * U(oh) + y) * width * oo + U(q0)
            for x in range(width):
                s = first + x * U(cs)
                g = src + x * oo
                g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15 = dy[g + U(0)], dy[g + U(1)], dy[g + U(2)], dy[g + U(3)], dy[g + U(4)], dy[g + U(5)], dy[g + U(6)], dy[g + U(7)], dy[g + U(8)], dy[g + U(9)], dy[g + U(10)], dy[g + U(11)], dy[g + U(12)], dy[g + U(13)], dy[g + U(14)], dy[g + U(15)]
                v0, v1, v2, v3, v4 = xp[s + o0], xp[s + o1], xp[s + o2], xp[s + o3], xp[s + o4]
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = a0_0 + v0 * g0, a0_1 + v0 * g1, a0_2 + v0 * g2, a0_3 + v0 * g3, a0_4 + v0 * g4, a0_5 + v0 * g5, a0_6 + v0 * g6, a0_7 + v0 * g7, a0_8 + v0 * g8, a0_9 + v0 * g9, a0_10 + v0 * g10, a0_11 + v0 * g11, a0_12 + v0 * g12, a0_13 + v0 * g13, a0_14 + v0 * g14, a0_15 + v0 * g15
                a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15 = a1_0 + v1 * g0, a1_1 + v1 * g1, a1_2 + v1 * g2, a1_3 + v1 * g3, a1_4 + v1 * g4, a1_5 + v1 * g5, a1_6 + v1 * g6, a1_7 + v1 * g7, a1_8 + v1 * g8, a1_9 + v1 * g9, a1_10 + v1 * g10, a1_11 + v1 * g11, a1_12 + v1 * g12, a1_13 + v1 * g13, a1_14 + v1 * g14, a1_15 + v1 * g15
                a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15 = a2_0 + v2 * g0, a2_1 + v2 * g1, a2_2 + v2 * g2, a2_3 + v2 * g3, a2_4 + v2 * g4, a2_5 + v2 * g5, a2_6 + v2 * g6, a2_7 + v2 * g7, a2_8 + v2 * g8, a2_9 + v2 * g9, a2_10 + v2 * g10, a2_11 + v2 * g11, a2_12 + v2 * g12, a2_13 + v2 * g13, a2_14 + v2 * g14, a2_15 + v2 * g15
                a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15 = a3_0 + v3 * g0, a3_1 + v3 * g1, a3_2 + v3 * g2, a3_3 + v3 * g3, a3_4 + v3 * g4, a3_5 + v3 * g5, a3_6 + v3 * g6, a3_7 + v3 * g7, a3_8 + v3 * g8, a3_9 + v3 * g9, a3_10 + v3 * g10, a3_11 + v3 * g11, a3_12 + v3 * g12, a3_13 + v3 * g13, a3_14 + v3 * g14, a3_15 + v3 * g15
                a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15 = a4_0 + v4 * g0, a4_1 + v4 * g1, a4_2 + v4 * g2, a4_3 + v4 * g3, a4_4 + v4 * g4, a4_5 + v4 * g5, a4_6 + v4 * g6, a4_7 + v4 * g7, a4_8 + v4 * g8, a4_9 + v4 * g9, a4_10 + v4 * g10, a4_11 + v4 * g11, a4_12 + v4 * g12, a4_13 + v4 * g13, a4_14 + v4 * g14, a4_15 + v4 * g15
    d = U(t0 + 0) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15
    d = U(t0 + 1) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a1_0, a1_1, a1_2, a1_3, a1_4, a1_5, a1_6, a1_7, a1_8, a1_9, a1_10, a1_11, a1_12, a1_13, a1_14, a1_15
    d = U(t0 + 2) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a2_0, a2_1, a2_2, a2_3, a2_4, a2_5, a2_6, a2_7, a2_8, a2_9, a2_10, a2_11, a2_12, a2_13, a2_14, a2_15
    d = U(t0 + 3) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a3_0, a3_1, a3_2, a3_3, a3_4, a3_5, a3_6, a3_7, a3_8, a3_9, a3_10, a3_11, a3_12, a3_13, a3_14, a3_15
    d = U(t0 + 4) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a4_0, a4_1, a4_2, a4_3, a4_4, a4_5, a4_6, a4_7, a4_8, a4_9, a4_10, a4_11, a4_12, a4_13, a4_14, a4_15


@_jit
def filter_q16_t1(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t0 .. t0 + 1, q0 .. q0 + 16] = the sum over the pixels of images [n0, n1), rows
    [y0, y1) of the tap's input times dy, pixel by pixel in order."""
    oo = U(o)
    width = U(ow)
    o0 = offs[U(t0 + 0)]
    a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero
    for b in range(U(n0), U(n1)):
        for y in range(U(y0), U(y1)):
            first = b * U(img) + y * U(rs)
            src = (b * U(oh) + y) * width * oo + U(q0)
            for x in range(width):
                s = first + x * U(cs)
                g = src + x * oo
                g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15 = dy[g + U(0)], dy[g + U(1)], dy[g + U(2)], dy[g + U(3)], dy[g + U(4)], dy[g + U(5)], dy[g + U(6)], dy[g + U(7)], dy[g + U(8)], dy[g + U(9)], dy[g + U(10)], dy[g + U(11)], dy[g + U(12)], dy[g + U(13)], dy[g + U(14)], dy[g + U(15)]
                v0 = xp[s + o0]
                a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15 = a0_0 + v0 * g0, a0_1 + v0 * g1, a0_2 + v0 * g2, a0_3 + v0 * g3, a0_4 + v0 * g4, a0_5 + v0 * g5, a0_6 + v0 * g6, a0_7 + v0 * g7, a0_8 + v0 * g8, a0_9 + v0 * g9, a0_10 + v0 * g10, a0_11 + v0 * g11, a0_12 + v0 * g12, a0_13 + v0 * g13, a0_14 + v0 * g14, a0_15 + v0 * g15
    d = U(t0 + 0) * oo + U(q0)
    part[d + U(0)], part[d + U(1)], part[d + U(2)], part[d + U(3)], part[d + U(4)], part[d + U(5)], part[d + U(6)], part[d + U(7)], part[d + U(8)], part[d + U(9)], part[d + U(10)], part[d + U(11)], part[d + U(12)], part[d + U(13)], part[d + U(14)], part[d + U(15)] = a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15


@_jit
def filter_block_q16(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, n0, n1, y0, y1):  # pragma: no cover - compiled
    """part[t, q] (every tap, every channel; o a multiple of 16) = the sum over the block's
    pixels of tap t's input times dy[..., q]."""
    taps = len(offs)
    for q0 in range(0, o, 16):
        t0 = 0
        while t0 + 5 <= taps:
            filter_q16_t5(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1)
            t0 += 5
        while t0 < taps:
            filter_q16_t1(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, n1, y0, y1)
            t0 += 1
# fmt: on
