"""The compiled tile transforms behind rill.exec.kernels.conv_winograd (import that module).

The tiles are 6 × 6 inputs (the interpolation points 0, ±1, ±2 and ∞): 2 × 2 outputs of a 5 × 5
filter, or 4 × 4 outputs of a 3 × 3 one; the transforms are written out (conv_winograd checks
them against the matrices it builds). Each loop works on a range [t0, t1) of the output tiles,
numbered image by image, tile row by tile row; the innermost loops run over the channels (the
contiguous axis of NHWC), which the compiler vectorizes. A tile's values are summed in a fixed
order, so the bits do not depend on the threads; multiply-adds may be fused.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"}
)


@_jit
def _window(x, b, y0, x0, buf):  # pragma: no cover - compiled
    """buf [1, 6, 6, c] = the 6 × 6 window of x [n, h, w, c] at (y0, x0), zero outside x."""
    _, h, wd, c = x.shape
    for i in range(6):
        y = y0 + i
        for j in range(6):
            xx = x0 + j
            if 0 <= y < h and 0 <= xx < wd:
                for k in range(c):
                    buf[0, i, j, k] = x[b, y, xx, k]
            else:
                for k in range(c):
                    buf[0, i, j, k] = 0


@_jit
def _in_tile(src, b, y0, x0, rows, v, tt):  # pragma: no cover - compiled
    """v[xi * 6 + nu, tt] = (B^T d B)[xi, nu] for d = src[b, y0:y0+6, x0:x0+6] (inside src)."""
    f2, f4, f5 = rows.dtype.type(2), rows.dtype.type(4), rows.dtype.type(5)
    c = src.shape[3]
    # rows[i, nu] = (d B)[i, nu]: each input row's transform
    for i in range(6):
        y = y0 + i
        for k in range(c):
            d0 = src[b, y, x0, k]
            d1 = src[b, y, x0 + 1, k]
            d2 = src[b, y, x0 + 2, k]
            d3 = src[b, y, x0 + 3, k]
            d4 = src[b, y, x0 + 4, k]
            d5 = src[b, y, x0 + 5, k]
            rows[i, 0, k] = f4 * d0 - f5 * d2 + d4
            rows[i, 1, k] = -f4 * d1 - f4 * d2 + d3 + d4
            rows[i, 2, k] = f4 * d1 - f4 * d2 - d3 + d4
            rows[i, 3, k] = -f2 * d1 - d2 + f2 * d3 + d4
            rows[i, 4, k] = f2 * d1 - d2 - f2 * d3 + d4
            rows[i, 5, k] = f4 * d1 - f5 * d3 + d5
    for nu in range(6):
        for k in range(c):
            d0 = rows[0, nu, k]
            d1 = rows[1, nu, k]
            d2 = rows[2, nu, k]
            d3 = rows[3, nu, k]
            d4 = rows[4, nu, k]
            d5 = rows[5, nu, k]
            v[nu, tt, k] = f4 * d0 - f5 * d2 + d4
            v[6 + nu, tt, k] = -f4 * d1 - f4 * d2 + d3 + d4
            v[12 + nu, tt, k] = f4 * d1 - f4 * d2 - d3 + d4
            v[18 + nu, tt, k] = -f2 * d1 - d2 + f2 * d3 + d4
            v[24 + nu, tt, k] = f2 * d1 - d2 - f2 * d3 + d4
            v[30 + nu, tt, k] = f4 * d1 - f5 * d3 + d5


@_jit
def input_tiles(x, m, pt, pl, tw, tpi, t0, t1, v):  # pragma: no cover - compiled
    """v[xi * 6 + nu, t - t0, :] = (B^T d B)[xi, nu] for the tiles t in [t0, t1): d is the 6 × 6
    window of x [n, h, w, c] at rows t_y * m - pt, columns t_x * m - pl (zero outside x); tw
    tiles per tile row, tpi per image."""
    _, h, wd, c = x.shape
    rows = np.empty((6, 6, c), v.dtype)
    buf = np.empty((1, 6, 6, c), v.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * m - pt
        x0 = (q - ty * tw) * m - pl
        if y0 >= 0 and x0 >= 0 and y0 + 6 <= h and x0 + 6 <= wd:
            _in_tile(x, b, y0, x0, rows, v, t - t0)
        else:
            _window(x, b, y0, x0, buf)
            _in_tile(buf, 0, 0, 0, rows, v, t - t0)


@_jit
def output_tiles(mm, m, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled
    """out[n, t_y * m + i, t_x * m + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1) (the
    parts inside out; m is 2 or 4), from mm [36, t1 - t0, o]."""
    f2, f4, f8 = out.dtype.type(2), out.dtype.type(4), out.dtype.type(8)
    o = out.shape[3]
    cols = np.empty((6, 4, o), out.dtype)
    ys = np.empty((4, o), out.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * m
        x0 = (q - ty * tw) * m
        tt = t - t0
        # cols[xi, j] = (M A)[xi, j]
        for xi in range(6):
            r = xi * 6
            for k in range(o):
                m0 = mm[r, tt, k]
                m1 = mm[r + 1, tt, k]
                m2 = mm[r + 2, tt, k]
                m3 = mm[r + 3, tt, k]
                m4 = mm[r + 4, tt, k]
                m5 = mm[r + 5, tt, k]
                if m == 2:
                    cols[xi, 0, k] = m0 + m1 + m2 + m3 + m4
                    cols[xi, 1, k] = m1 - m2 + f2 * m3 - f2 * m4 + m5
                else:
                    cols[xi, 0, k] = m0 + m1 + m2 + m3 + m4
                    cols[xi, 1, k] = m1 - m2 + f2 * m3 - f2 * m4
                    cols[xi, 2, k] = m1 + m2 + f4 * m3 + f4 * m4
                    cols[xi, 3, k] = m1 - m2 + f8 * m3 - f8 * m4 + m5
        for j in range(m):
            xx = x0 + j
            if xx >= ow:
                break
            for k in range(o):
                m0 = cols[0, j, k]
                m1 = cols[1, j, k]
                m2 = cols[2, j, k]
                m3 = cols[3, j, k]
                m4 = cols[4, j, k]
                m5 = cols[5, j, k]
                if m == 2:
                    ys[0, k] = m0 + m1 + m2 + m3 + m4
                    ys[1, k] = m1 - m2 + f2 * m3 - f2 * m4 + m5
                else:
                    ys[0, k] = m0 + m1 + m2 + m3 + m4
                    ys[1, k] = m1 - m2 + f2 * m3 - f2 * m4
                    ys[2, k] = m1 + m2 + f4 * m3 + f4 * m4
                    ys[3, k] = m1 - m2 + f8 * m3 - f8 * m4 + m5
            for i in range(m):
                y = y0 + i
                if y >= oh:
                    break
                for k in range(o):
                    out[b, y, xx, k] = ys[i, k]


@_jit
def gradient_tiles(dy, m, tw, tpi, t0, t1, z):  # pragma: no cover - compiled
    """z[xi * 6 + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is the
    m × m tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""
    f2, f4, f8 = z.dtype.type(2), z.dtype.type(4), z.dtype.type(8)
    _, oh, ow, o = dy.shape
    rows = np.zeros((4, 6, o), z.dtype)
    d = np.zeros((4, o), z.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * m
        x0 = (q - ty * tw) * m
        # rows[i, nu] = (dY A^T)[i, nu]
        for i in range(m):
            y = y0 + i
            for j in range(m):
                xx = x0 + j
                if y < oh and xx < ow:
                    for k in range(o):
                        d[j, k] = dy[b, y, xx, k]
                else:
                    for k in range(o):
                        d[j, k] = 0
            for k in range(o):
                if m == 2:
                    d0 = d[0, k]
                    d1 = d[1, k]
                    rows[i, 0, k] = d0
                    rows[i, 1, k] = d0 + d1
                    rows[i, 2, k] = d0 - d1
                    rows[i, 3, k] = d0 + f2 * d1
                    rows[i, 4, k] = d0 - f2 * d1
                    rows[i, 5, k] = d1
                else:
                    d0 = d[0, k]
                    d1 = d[1, k]
                    d2 = d[2, k]
                    d3 = d[3, k]
                    rows[i, 0, k] = d0
                    rows[i, 1, k] = d0 + d1 + d2 + d3
                    rows[i, 2, k] = d0 - d1 + d2 - d3
                    rows[i, 3, k] = d0 + f2 * d1 + f4 * d2 + f8 * d3
                    rows[i, 4, k] = d0 - f2 * d1 + f4 * d2 - f8 * d3
                    rows[i, 5, k] = d3
        tt = t - t0
        for nu in range(6):
            for k in range(o):
                if m == 2:
                    d0 = rows[0, nu, k]
                    d1 = rows[1, nu, k]
                    z[nu, tt, k] = d0
                    z[6 + nu, tt, k] = d0 + d1
                    z[12 + nu, tt, k] = d0 - d1
                    z[18 + nu, tt, k] = d0 + f2 * d1
                    z[24 + nu, tt, k] = d0 - f2 * d1
                    z[30 + nu, tt, k] = d1
                else:
                    d0 = rows[0, nu, k]
                    d1 = rows[1, nu, k]
                    d2 = rows[2, nu, k]
                    d3 = rows[3, nu, k]
                    z[nu, tt, k] = d0
                    z[6 + nu, tt, k] = d0 + d1 + d2 + d3
                    z[12 + nu, tt, k] = d0 - d1 + d2 - d3
                    z[18 + nu, tt, k] = d0 + f2 * d1 + f4 * d2 + f8 * d3
                    z[24 + nu, tt, k] = d0 - f2 * d1 + f4 * d2 - f8 * d3
                    z[30 + nu, tt, k] = d3
