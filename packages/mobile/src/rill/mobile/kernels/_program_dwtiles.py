"""The depthwise tiles of the programs' direct convolutions (rill.mobile.kernels._program_direct,
which calls them): 4 output pixels x 16 or 8 channels, the sums in registers across the whole
window; the 3x3 ones have constant-length tap loops, which LLVM unrolls. This file is generated
by tools/gen_program_gemm.py.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.mobile.kernels._program_gemm import _clamp

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                  fastmath={"contract"}, _nrt=False)  # fmt: skip
_u = np.uint64


@_jit
def _dw_4x16(
    m, x0, x1, x2, x3, y0, y1, y2, y3, w, b, hasb, kh, kw, wk, rs, cs, ws, lo, hi
):  # pragma: no cover
    """m[y_i + j] (pixel i < 4, channel j < 16) = the window at m[x_i] (taps ky·rs + kx·cs,
    16 input channels) times the weights at w + tap·ws, plus the bias at b when hasb, clamped to
    [lo, hi]; the 64 sums are held in locals."""
    s0_0 = m[b + _u(0)] if hasb else np.float32(0.0)
    s0_1 = m[b + _u(1)] if hasb else np.float32(0.0)
    s0_2 = m[b + _u(2)] if hasb else np.float32(0.0)
    s0_3 = m[b + _u(3)] if hasb else np.float32(0.0)
    s0_4 = m[b + _u(4)] if hasb else np.float32(0.0)
    s0_5 = m[b + _u(5)] if hasb else np.float32(0.0)
    s0_6 = m[b + _u(6)] if hasb else np.float32(0.0)
    s0_7 = m[b + _u(7)] if hasb else np.float32(0.0)
    s0_8 = m[b + _u(8)] if hasb else np.float32(0.0)
    s0_9 = m[b + _u(9)] if hasb else np.float32(0.0)
    s0_10 = m[b + _u(10)] if hasb else np.float32(0.0)
    s0_11 = m[b + _u(11)] if hasb else np.float32(0.0)
    s0_12 = m[b + _u(12)] if hasb else np.float32(0.0)
    s0_13 = m[b + _u(13)] if hasb else np.float32(0.0)
    s0_14 = m[b + _u(14)] if hasb else np.float32(0.0)
    s0_15 = m[b + _u(15)] if hasb else np.float32(0.0)
    s1_0 = s2_0 = s3_0 = s0_0
    s1_1 = s2_1 = s3_1 = s0_1
    s1_2 = s2_2 = s3_2 = s0_2
    s1_3 = s2_3 = s3_3 = s0_3
    s1_4 = s2_4 = s3_4 = s0_4
    s1_5 = s2_5 = s3_5 = s0_5
    s1_6 = s2_6 = s3_6 = s0_6
    s1_7 = s2_7 = s3_7 = s0_7
    s1_8 = s2_8 = s3_8 = s0_8
    s1_9 = s2_9 = s3_9 = s0_9
    s1_10 = s2_10 = s3_10 = s0_10
    s1_11 = s2_11 = s3_11 = s0_11
    s1_12 = s2_12 = s3_12 = s0_12
    s1_13 = s2_13 = s3_13 = s0_13
    s1_14 = s2_14 = s3_14 = s0_14
    s1_15 = s2_15 = s3_15 = s0_15
    for ky in range(kh):
        for kx in range(kw):
            t = _u(ky * rs + kx * cs)
            wt = w + _u((ky * wk + kx) * ws)
            v0 = m[wt + _u(0)]
            v1 = m[wt + _u(1)]
            v2 = m[wt + _u(2)]
            v3 = m[wt + _u(3)]
            v4 = m[wt + _u(4)]
            v5 = m[wt + _u(5)]
            v6 = m[wt + _u(6)]
            v7 = m[wt + _u(7)]
            v8 = m[wt + _u(8)]
            v9 = m[wt + _u(9)]
            v10 = m[wt + _u(10)]
            v11 = m[wt + _u(11)]
            v12 = m[wt + _u(12)]
            v13 = m[wt + _u(13)]
            v14 = m[wt + _u(14)]
            v15 = m[wt + _u(15)]
            a = x0 + t
            s0_0 += m[a + _u(0)] * v0
            s0_1 += m[a + _u(1)] * v1
            s0_2 += m[a + _u(2)] * v2
            s0_3 += m[a + _u(3)] * v3
            s0_4 += m[a + _u(4)] * v4
            s0_5 += m[a + _u(5)] * v5
            s0_6 += m[a + _u(6)] * v6
            s0_7 += m[a + _u(7)] * v7
            s0_8 += m[a + _u(8)] * v8
            s0_9 += m[a + _u(9)] * v9
            s0_10 += m[a + _u(10)] * v10
            s0_11 += m[a + _u(11)] * v11
            s0_12 += m[a + _u(12)] * v12
            s0_13 += m[a + _u(13)] * v13
            s0_14 += m[a + _u(14)] * v14
            s0_15 += m[a + _u(15)] * v15
            a = x1 + t
            s1_0 += m[a + _u(0)] * v0
            s1_1 += m[a + _u(1)] * v1
            s1_2 += m[a + _u(2)] * v2
            s1_3 += m[a + _u(3)] * v3
            s1_4 += m[a + _u(4)] * v4
            s1_5 += m[a + _u(5)] * v5
            s1_6 += m[a + _u(6)] * v6
            s1_7 += m[a + _u(7)] * v7
            s1_8 += m[a + _u(8)] * v8
            s1_9 += m[a + _u(9)] * v9
            s1_10 += m[a + _u(10)] * v10
            s1_11 += m[a + _u(11)] * v11
            s1_12 += m[a + _u(12)] * v12
            s1_13 += m[a + _u(13)] * v13
            s1_14 += m[a + _u(14)] * v14
            s1_15 += m[a + _u(15)] * v15
            a = x2 + t
            s2_0 += m[a + _u(0)] * v0
            s2_1 += m[a + _u(1)] * v1
            s2_2 += m[a + _u(2)] * v2
            s2_3 += m[a + _u(3)] * v3
            s2_4 += m[a + _u(4)] * v4
            s2_5 += m[a + _u(5)] * v5
            s2_6 += m[a + _u(6)] * v6
            s2_7 += m[a + _u(7)] * v7
            s2_8 += m[a + _u(8)] * v8
            s2_9 += m[a + _u(9)] * v9
            s2_10 += m[a + _u(10)] * v10
            s2_11 += m[a + _u(11)] * v11
            s2_12 += m[a + _u(12)] * v12
            s2_13 += m[a + _u(13)] * v13
            s2_14 += m[a + _u(14)] * v14
            s2_15 += m[a + _u(15)] * v15
            a = x3 + t
            s3_0 += m[a + _u(0)] * v0
            s3_1 += m[a + _u(1)] * v1
            s3_2 += m[a + _u(2)] * v2
            s3_3 += m[a + _u(3)] * v3
            s3_4 += m[a + _u(4)] * v4
            s3_5 += m[a + _u(5)] * v5
            s3_6 += m[a + _u(6)] * v6
            s3_7 += m[a + _u(7)] * v7
            s3_8 += m[a + _u(8)] * v8
            s3_9 += m[a + _u(9)] * v9
            s3_10 += m[a + _u(10)] * v10
            s3_11 += m[a + _u(11)] * v11
            s3_12 += m[a + _u(12)] * v12
            s3_13 += m[a + _u(13)] * v13
            s3_14 += m[a + _u(14)] * v14
            s3_15 += m[a + _u(15)] * v15
    m[y0 + _u(0)] = _clamp(s0_0, lo, hi)
    m[y0 + _u(1)] = _clamp(s0_1, lo, hi)
    m[y0 + _u(2)] = _clamp(s0_2, lo, hi)
    m[y0 + _u(3)] = _clamp(s0_3, lo, hi)
    m[y0 + _u(4)] = _clamp(s0_4, lo, hi)
    m[y0 + _u(5)] = _clamp(s0_5, lo, hi)
    m[y0 + _u(6)] = _clamp(s0_6, lo, hi)
    m[y0 + _u(7)] = _clamp(s0_7, lo, hi)
    m[y0 + _u(8)] = _clamp(s0_8, lo, hi)
    m[y0 + _u(9)] = _clamp(s0_9, lo, hi)
    m[y0 + _u(10)] = _clamp(s0_10, lo, hi)
    m[y0 + _u(11)] = _clamp(s0_11, lo, hi)
    m[y0 + _u(12)] = _clamp(s0_12, lo, hi)
    m[y0 + _u(13)] = _clamp(s0_13, lo, hi)
    m[y0 + _u(14)] = _clamp(s0_14, lo, hi)
    m[y0 + _u(15)] = _clamp(s0_15, lo, hi)
    m[y1 + _u(0)] = _clamp(s1_0, lo, hi)
    m[y1 + _u(1)] = _clamp(s1_1, lo, hi)
    m[y1 + _u(2)] = _clamp(s1_2, lo, hi)
    m[y1 + _u(3)] = _clamp(s1_3, lo, hi)
    m[y1 + _u(4)] = _clamp(s1_4, lo, hi)
    m[y1 + _u(5)] = _clamp(s1_5, lo, hi)
    m[y1 + _u(6)] = _clamp(s1_6, lo, hi)
    m[y1 + _u(7)] = _clamp(s1_7, lo, hi)
    m[y1 + _u(8)] = _clamp(s1_8, lo, hi)
    m[y1 + _u(9)] = _clamp(s1_9, lo, hi)
    m[y1 + _u(10)] = _clamp(s1_10, lo, hi)
    m[y1 + _u(11)] = _clamp(s1_11, lo, hi)
    m[y1 + _u(12)] = _clamp(s1_12, lo, hi)
    m[y1 + _u(13)] = _clamp(s1_13, lo, hi)
    m[y1 + _u(14)] = _clamp(s1_14, lo, hi)
    m[y1 + _u(15)] = _clamp(s1_15, lo, hi)
    m[y2 + _u(0)] = _clamp(s2_0, lo, hi)
    m[y2 + _u(1)] = _clamp(s2_1, lo, hi)
    m[y2 + _u(2)] = _clamp(s2_2, lo, hi)
    m[y2 + _u(3)] = _clamp(s2_3, lo, hi)
    m[y2 + _u(4)] = _clamp(s2_4, lo, hi)
    m[y2 + _u(5)] = _clamp(s2_5, lo, hi)
    m[y2 + _u(6)] = _clamp(s2_6, lo, hi)
    m[y2 + _u(7)] = _clamp(s2_7, lo, hi)
    m[y2 + _u(8)] = _clamp(s2_8, lo, hi)
    m[y2 + _u(9)] = _clamp(s2_9, lo, hi)
    m[y2 + _u(10)] = _clamp(s2_10, lo, hi)
    m[y2 + _u(11)] = _clamp(s2_11, lo, hi)
    m[y2 + _u(12)] = _clamp(s2_12, lo, hi)
    m[y2 + _u(13)] = _clamp(s2_13, lo, hi)
    m[y2 + _u(14)] = _clamp(s2_14, lo, hi)
    m[y2 + _u(15)] = _clamp(s2_15, lo, hi)
    m[y3 + _u(0)] = _clamp(s3_0, lo, hi)
    m[y3 + _u(1)] = _clamp(s3_1, lo, hi)
    m[y3 + _u(2)] = _clamp(s3_2, lo, hi)
    m[y3 + _u(3)] = _clamp(s3_3, lo, hi)
    m[y3 + _u(4)] = _clamp(s3_4, lo, hi)
    m[y3 + _u(5)] = _clamp(s3_5, lo, hi)
    m[y3 + _u(6)] = _clamp(s3_6, lo, hi)
    m[y3 + _u(7)] = _clamp(s3_7, lo, hi)
    m[y3 + _u(8)] = _clamp(s3_8, lo, hi)
    m[y3 + _u(9)] = _clamp(s3_9, lo, hi)
    m[y3 + _u(10)] = _clamp(s3_10, lo, hi)
    m[y3 + _u(11)] = _clamp(s3_11, lo, hi)
    m[y3 + _u(12)] = _clamp(s3_12, lo, hi)
    m[y3 + _u(13)] = _clamp(s3_13, lo, hi)
    m[y3 + _u(14)] = _clamp(s3_14, lo, hi)
    m[y3 + _u(15)] = _clamp(s3_15, lo, hi)


@_jit
def _dw_4x8(
    m, x0, x1, x2, x3, y0, y1, y2, y3, w, b, hasb, kh, kw, wk, rs, cs, ws, lo, hi
):  # pragma: no cover
    """m[y_i + j] (pixel i < 4, channel j < 8) = the window at m[x_i] (taps ky·rs + kx·cs,
    8 input channels) times the weights at w + tap·ws, plus the bias at b when hasb, clamped to
    [lo, hi]; the 32 sums are held in locals."""
    s0_0 = m[b + _u(0)] if hasb else np.float32(0.0)
    s0_1 = m[b + _u(1)] if hasb else np.float32(0.0)
    s0_2 = m[b + _u(2)] if hasb else np.float32(0.0)
    s0_3 = m[b + _u(3)] if hasb else np.float32(0.0)
    s0_4 = m[b + _u(4)] if hasb else np.float32(0.0)
    s0_5 = m[b + _u(5)] if hasb else np.float32(0.0)
    s0_6 = m[b + _u(6)] if hasb else np.float32(0.0)
    s0_7 = m[b + _u(7)] if hasb else np.float32(0.0)
    s1_0 = s2_0 = s3_0 = s0_0
    s1_1 = s2_1 = s3_1 = s0_1
    s1_2 = s2_2 = s3_2 = s0_2
    s1_3 = s2_3 = s3_3 = s0_3
    s1_4 = s2_4 = s3_4 = s0_4
    s1_5 = s2_5 = s3_5 = s0_5
    s1_6 = s2_6 = s3_6 = s0_6
    s1_7 = s2_7 = s3_7 = s0_7
    for ky in range(kh):
        for kx in range(kw):
            t = _u(ky * rs + kx * cs)
            wt = w + _u((ky * wk + kx) * ws)
            v0 = m[wt + _u(0)]
            v1 = m[wt + _u(1)]
            v2 = m[wt + _u(2)]
            v3 = m[wt + _u(3)]
            v4 = m[wt + _u(4)]
            v5 = m[wt + _u(5)]
            v6 = m[wt + _u(6)]
            v7 = m[wt + _u(7)]
            a = x0 + t
            s0_0 += m[a + _u(0)] * v0
            s0_1 += m[a + _u(1)] * v1
            s0_2 += m[a + _u(2)] * v2
            s0_3 += m[a + _u(3)] * v3
            s0_4 += m[a + _u(4)] * v4
            s0_5 += m[a + _u(5)] * v5
            s0_6 += m[a + _u(6)] * v6
            s0_7 += m[a + _u(7)] * v7
            a = x1 + t
            s1_0 += m[a + _u(0)] * v0
            s1_1 += m[a + _u(1)] * v1
            s1_2 += m[a + _u(2)] * v2
            s1_3 += m[a + _u(3)] * v3
            s1_4 += m[a + _u(4)] * v4
            s1_5 += m[a + _u(5)] * v5
            s1_6 += m[a + _u(6)] * v6
            s1_7 += m[a + _u(7)] * v7
            a = x2 + t
            s2_0 += m[a + _u(0)] * v0
            s2_1 += m[a + _u(1)] * v1
            s2_2 += m[a + _u(2)] * v2
            s2_3 += m[a + _u(3)] * v3
            s2_4 += m[a + _u(4)] * v4
            s2_5 += m[a + _u(5)] * v5
            s2_6 += m[a + _u(6)] * v6
            s2_7 += m[a + _u(7)] * v7
            a = x3 + t
            s3_0 += m[a + _u(0)] * v0
            s3_1 += m[a + _u(1)] * v1
            s3_2 += m[a + _u(2)] * v2
            s3_3 += m[a + _u(3)] * v3
            s3_4 += m[a + _u(4)] * v4
            s3_5 += m[a + _u(5)] * v5
            s3_6 += m[a + _u(6)] * v6
            s3_7 += m[a + _u(7)] * v7
    m[y0 + _u(0)] = _clamp(s0_0, lo, hi)
    m[y0 + _u(1)] = _clamp(s0_1, lo, hi)
    m[y0 + _u(2)] = _clamp(s0_2, lo, hi)
    m[y0 + _u(3)] = _clamp(s0_3, lo, hi)
    m[y0 + _u(4)] = _clamp(s0_4, lo, hi)
    m[y0 + _u(5)] = _clamp(s0_5, lo, hi)
    m[y0 + _u(6)] = _clamp(s0_6, lo, hi)
    m[y0 + _u(7)] = _clamp(s0_7, lo, hi)
    m[y1 + _u(0)] = _clamp(s1_0, lo, hi)
    m[y1 + _u(1)] = _clamp(s1_1, lo, hi)
    m[y1 + _u(2)] = _clamp(s1_2, lo, hi)
    m[y1 + _u(3)] = _clamp(s1_3, lo, hi)
    m[y1 + _u(4)] = _clamp(s1_4, lo, hi)
    m[y1 + _u(5)] = _clamp(s1_5, lo, hi)
    m[y1 + _u(6)] = _clamp(s1_6, lo, hi)
    m[y1 + _u(7)] = _clamp(s1_7, lo, hi)
    m[y2 + _u(0)] = _clamp(s2_0, lo, hi)
    m[y2 + _u(1)] = _clamp(s2_1, lo, hi)
    m[y2 + _u(2)] = _clamp(s2_2, lo, hi)
    m[y2 + _u(3)] = _clamp(s2_3, lo, hi)
    m[y2 + _u(4)] = _clamp(s2_4, lo, hi)
    m[y2 + _u(5)] = _clamp(s2_5, lo, hi)
    m[y2 + _u(6)] = _clamp(s2_6, lo, hi)
    m[y2 + _u(7)] = _clamp(s2_7, lo, hi)
    m[y3 + _u(0)] = _clamp(s3_0, lo, hi)
    m[y3 + _u(1)] = _clamp(s3_1, lo, hi)
    m[y3 + _u(2)] = _clamp(s3_2, lo, hi)
    m[y3 + _u(3)] = _clamp(s3_3, lo, hi)
    m[y3 + _u(4)] = _clamp(s3_4, lo, hi)
    m[y3 + _u(5)] = _clamp(s3_5, lo, hi)
    m[y3 + _u(6)] = _clamp(s3_6, lo, hi)
    m[y3 + _u(7)] = _clamp(s3_7, lo, hi)


@_jit
def _dw3_4x16(
    m, x0, x1, x2, x3, y0, y1, y2, y3, w, b, hasb, rs, cs, ws, lo, hi
):  # pragma: no cover
    """m[y_i + j] (pixel i < 4, channel j < 16) = the window at m[x_i] (taps ky·rs + kx·cs,
    16 input channels, 3x3 taps) times the weights at w + tap·ws, plus the bias at b when hasb, clamped to
    [lo, hi]; the 64 sums are held in locals."""
    s0_0 = m[b + _u(0)] if hasb else np.float32(0.0)
    s0_1 = m[b + _u(1)] if hasb else np.float32(0.0)
    s0_2 = m[b + _u(2)] if hasb else np.float32(0.0)
    s0_3 = m[b + _u(3)] if hasb else np.float32(0.0)
    s0_4 = m[b + _u(4)] if hasb else np.float32(0.0)
    s0_5 = m[b + _u(5)] if hasb else np.float32(0.0)
    s0_6 = m[b + _u(6)] if hasb else np.float32(0.0)
    s0_7 = m[b + _u(7)] if hasb else np.float32(0.0)
    s0_8 = m[b + _u(8)] if hasb else np.float32(0.0)
    s0_9 = m[b + _u(9)] if hasb else np.float32(0.0)
    s0_10 = m[b + _u(10)] if hasb else np.float32(0.0)
    s0_11 = m[b + _u(11)] if hasb else np.float32(0.0)
    s0_12 = m[b + _u(12)] if hasb else np.float32(0.0)
    s0_13 = m[b + _u(13)] if hasb else np.float32(0.0)
    s0_14 = m[b + _u(14)] if hasb else np.float32(0.0)
    s0_15 = m[b + _u(15)] if hasb else np.float32(0.0)
    s1_0 = s2_0 = s3_0 = s0_0
    s1_1 = s2_1 = s3_1 = s0_1
    s1_2 = s2_2 = s3_2 = s0_2
    s1_3 = s2_3 = s3_3 = s0_3
    s1_4 = s2_4 = s3_4 = s0_4
    s1_5 = s2_5 = s3_5 = s0_5
    s1_6 = s2_6 = s3_6 = s0_6
    s1_7 = s2_7 = s3_7 = s0_7
    s1_8 = s2_8 = s3_8 = s0_8
    s1_9 = s2_9 = s3_9 = s0_9
    s1_10 = s2_10 = s3_10 = s0_10
    s1_11 = s2_11 = s3_11 = s0_11
    s1_12 = s2_12 = s3_12 = s0_12
    s1_13 = s2_13 = s3_13 = s0_13
    s1_14 = s2_14 = s3_14 = s0_14
    s1_15 = s2_15 = s3_15 = s0_15
    for ky in range(3):
        for kx in range(3):
            t = _u(ky * rs + kx * cs)
            wt = w + _u((ky * 3 + kx) * ws)
            v0 = m[wt + _u(0)]
            v1 = m[wt + _u(1)]
            v2 = m[wt + _u(2)]
            v3 = m[wt + _u(3)]
            v4 = m[wt + _u(4)]
            v5 = m[wt + _u(5)]
            v6 = m[wt + _u(6)]
            v7 = m[wt + _u(7)]
            v8 = m[wt + _u(8)]
            v9 = m[wt + _u(9)]
            v10 = m[wt + _u(10)]
            v11 = m[wt + _u(11)]
            v12 = m[wt + _u(12)]
            v13 = m[wt + _u(13)]
            v14 = m[wt + _u(14)]
            v15 = m[wt + _u(15)]
            a = x0 + t
            s0_0 += m[a + _u(0)] * v0
            s0_1 += m[a + _u(1)] * v1
            s0_2 += m[a + _u(2)] * v2
            s0_3 += m[a + _u(3)] * v3
            s0_4 += m[a + _u(4)] * v4
            s0_5 += m[a + _u(5)] * v5
            s0_6 += m[a + _u(6)] * v6
            s0_7 += m[a + _u(7)] * v7
            s0_8 += m[a + _u(8)] * v8
            s0_9 += m[a + _u(9)] * v9
            s0_10 += m[a + _u(10)] * v10
            s0_11 += m[a + _u(11)] * v11
            s0_12 += m[a + _u(12)] * v12
            s0_13 += m[a + _u(13)] * v13
            s0_14 += m[a + _u(14)] * v14
            s0_15 += m[a + _u(15)] * v15
            a = x1 + t
            s1_0 += m[a + _u(0)] * v0
            s1_1 += m[a + _u(1)] * v1
            s1_2 += m[a + _u(2)] * v2
            s1_3 += m[a + _u(3)] * v3
            s1_4 += m[a + _u(4)] * v4
            s1_5 += m[a + _u(5)] * v5
            s1_6 += m[a + _u(6)] * v6
            s1_7 += m[a + _u(7)] * v7
            s1_8 += m[a + _u(8)] * v8
            s1_9 += m[a + _u(9)] * v9
            s1_10 += m[a + _u(10)] * v10
            s1_11 += m[a + _u(11)] * v11
            s1_12 += m[a + _u(12)] * v12
            s1_13 += m[a + _u(13)] * v13
            s1_14 += m[a + _u(14)] * v14
            s1_15 += m[a + _u(15)] * v15
            a = x2 + t
            s2_0 += m[a + _u(0)] * v0
            s2_1 += m[a + _u(1)] * v1
            s2_2 += m[a + _u(2)] * v2
            s2_3 += m[a + _u(3)] * v3
            s2_4 += m[a + _u(4)] * v4
            s2_5 += m[a + _u(5)] * v5
            s2_6 += m[a + _u(6)] * v6
            s2_7 += m[a + _u(7)] * v7
            s2_8 += m[a + _u(8)] * v8
            s2_9 += m[a + _u(9)] * v9
            s2_10 += m[a + _u(10)] * v10
            s2_11 += m[a + _u(11)] * v11
            s2_12 += m[a + _u(12)] * v12
            s2_13 += m[a + _u(13)] * v13
            s2_14 += m[a + _u(14)] * v14
            s2_15 += m[a + _u(15)] * v15
            a = x3 + t
            s3_0 += m[a + _u(0)] * v0
            s3_1 += m[a + _u(1)] * v1
            s3_2 += m[a + _u(2)] * v2
            s3_3 += m[a + _u(3)] * v3
            s3_4 += m[a + _u(4)] * v4
            s3_5 += m[a + _u(5)] * v5
            s3_6 += m[a + _u(6)] * v6
            s3_7 += m[a + _u(7)] * v7
            s3_8 += m[a + _u(8)] * v8
            s3_9 += m[a + _u(9)] * v9
            s3_10 += m[a + _u(10)] * v10
            s3_11 += m[a + _u(11)] * v11
            s3_12 += m[a + _u(12)] * v12
            s3_13 += m[a + _u(13)] * v13
            s3_14 += m[a + _u(14)] * v14
            s3_15 += m[a + _u(15)] * v15
    m[y0 + _u(0)] = _clamp(s0_0, lo, hi)
    m[y0 + _u(1)] = _clamp(s0_1, lo, hi)
    m[y0 + _u(2)] = _clamp(s0_2, lo, hi)
    m[y0 + _u(3)] = _clamp(s0_3, lo, hi)
    m[y0 + _u(4)] = _clamp(s0_4, lo, hi)
    m[y0 + _u(5)] = _clamp(s0_5, lo, hi)
    m[y0 + _u(6)] = _clamp(s0_6, lo, hi)
    m[y0 + _u(7)] = _clamp(s0_7, lo, hi)
    m[y0 + _u(8)] = _clamp(s0_8, lo, hi)
    m[y0 + _u(9)] = _clamp(s0_9, lo, hi)
    m[y0 + _u(10)] = _clamp(s0_10, lo, hi)
    m[y0 + _u(11)] = _clamp(s0_11, lo, hi)
    m[y0 + _u(12)] = _clamp(s0_12, lo, hi)
    m[y0 + _u(13)] = _clamp(s0_13, lo, hi)
    m[y0 + _u(14)] = _clamp(s0_14, lo, hi)
    m[y0 + _u(15)] = _clamp(s0_15, lo, hi)
    m[y1 + _u(0)] = _clamp(s1_0, lo, hi)
    m[y1 + _u(1)] = _clamp(s1_1, lo, hi)
    m[y1 + _u(2)] = _clamp(s1_2, lo, hi)
    m[y1 + _u(3)] = _clamp(s1_3, lo, hi)
    m[y1 + _u(4)] = _clamp(s1_4, lo, hi)
    m[y1 + _u(5)] = _clamp(s1_5, lo, hi)
    m[y1 + _u(6)] = _clamp(s1_6, lo, hi)
    m[y1 + _u(7)] = _clamp(s1_7, lo, hi)
    m[y1 + _u(8)] = _clamp(s1_8, lo, hi)
    m[y1 + _u(9)] = _clamp(s1_9, lo, hi)
    m[y1 + _u(10)] = _clamp(s1_10, lo, hi)
    m[y1 + _u(11)] = _clamp(s1_11, lo, hi)
    m[y1 + _u(12)] = _clamp(s1_12, lo, hi)
    m[y1 + _u(13)] = _clamp(s1_13, lo, hi)
    m[y1 + _u(14)] = _clamp(s1_14, lo, hi)
    m[y1 + _u(15)] = _clamp(s1_15, lo, hi)
    m[y2 + _u(0)] = _clamp(s2_0, lo, hi)
    m[y2 + _u(1)] = _clamp(s2_1, lo, hi)
    m[y2 + _u(2)] = _clamp(s2_2, lo, hi)
    m[y2 + _u(3)] = _clamp(s2_3, lo, hi)
    m[y2 + _u(4)] = _clamp(s2_4, lo, hi)
    m[y2 + _u(5)] = _clamp(s2_5, lo, hi)
    m[y2 + _u(6)] = _clamp(s2_6, lo, hi)
    m[y2 + _u(7)] = _clamp(s2_7, lo, hi)
    m[y2 + _u(8)] = _clamp(s2_8, lo, hi)
    m[y2 + _u(9)] = _clamp(s2_9, lo, hi)
    m[y2 + _u(10)] = _clamp(s2_10, lo, hi)
    m[y2 + _u(11)] = _clamp(s2_11, lo, hi)
    m[y2 + _u(12)] = _clamp(s2_12, lo, hi)
    m[y2 + _u(13)] = _clamp(s2_13, lo, hi)
    m[y2 + _u(14)] = _clamp(s2_14, lo, hi)
    m[y2 + _u(15)] = _clamp(s2_15, lo, hi)
    m[y3 + _u(0)] = _clamp(s3_0, lo, hi)
    m[y3 + _u(1)] = _clamp(s3_1, lo, hi)
    m[y3 + _u(2)] = _clamp(s3_2, lo, hi)
    m[y3 + _u(3)] = _clamp(s3_3, lo, hi)
    m[y3 + _u(4)] = _clamp(s3_4, lo, hi)
    m[y3 + _u(5)] = _clamp(s3_5, lo, hi)
    m[y3 + _u(6)] = _clamp(s3_6, lo, hi)
    m[y3 + _u(7)] = _clamp(s3_7, lo, hi)
    m[y3 + _u(8)] = _clamp(s3_8, lo, hi)
    m[y3 + _u(9)] = _clamp(s3_9, lo, hi)
    m[y3 + _u(10)] = _clamp(s3_10, lo, hi)
    m[y3 + _u(11)] = _clamp(s3_11, lo, hi)
    m[y3 + _u(12)] = _clamp(s3_12, lo, hi)
    m[y3 + _u(13)] = _clamp(s3_13, lo, hi)
    m[y3 + _u(14)] = _clamp(s3_14, lo, hi)
    m[y3 + _u(15)] = _clamp(s3_15, lo, hi)
