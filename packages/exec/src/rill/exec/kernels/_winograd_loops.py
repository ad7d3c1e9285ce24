"""The compiled tile transforms behind rill.exec.kernels.conv_winograd (import that module).

Written by tools/gen_winograd_loops.py from conv_winograd's matrices; do not edit by hand.

Each loop works on a range [t0, t1) of the output tiles, numbered image by image, tile row by tile
row; the innermost loops run over the channels (the contiguous axis of NHWC), which the compiler
vectorizes where a loop stores to one array (the output transforms write one transformed value a
loop: with several stores a loop, the checks that the arrays do not overlap outgrew the
vectorizer's limit and the loops ran scalar). A tile's values are summed in a fixed order, so
the bits do not depend on the threads; multiply-adds may be fused.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels._conv_loops import _epilogue

_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"}
)
# The copy-out: no fast-math at all. It promises the unfused pass's bits, and a jitted function
# it calls (_conv_loops' _epilogue) is compiled with the flags of its first caller: compiled
# first from a contracting loop, the epilogue fused multiply-adds for every caller after.
_exact_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_exact_jit
def to_channels_first(src, dst, bias, act, side):  # pragma: no cover - compiled
    """dst[k, y, x] = src[y, x, k] for src [rows, w, c] (channels-last output rows made in cache)
    and dst [c, rows, w] (one image's rows of a channels-first output); where bias has elements,
    + bias[k] and then `act` (_conv_loops' epilogue, the operations of bias_activation_planes),
    or, where side [c, rows, w] has elements too, (+ bias[k]) + side, then Relu when act is 1
    (those of bias_side_activation: a residual): a fused convolution's epilogue, the same bits as
    that pass after the copy. Writing the channels-first output from the tile loops directly
    stores one value per cache line; this reads the rows back with the stores contiguous."""
    rows, w, c = src.shape
    zero, six = dst.dtype.type(0), dst.dtype.type(6)
    if bias.shape[0] == 0:
        for y in range(rows):
            for k in range(c):
                for x in range(w):
                    dst[k, y, x] = src[y, x, k]
    elif side.size:
        for y in range(rows):
            for k in range(c):
                bq = bias[k]
                for x in range(w):
                    v = (src[y, x, k] + bq) + side[k, y, x]
                    if act == 1:
                        v = v if (v != v or v > zero) else zero
                    dst[k, y, x] = v
    else:
        for y in range(rows):
            for k in range(c):
                bq = bias[k]
                for x in range(w):
                    dst[k, y, x] = _epilogue(src[y, x, k], bq, act, zero, six)


@_jit
def input_tiles_4(x, m, pt, pl, tw, tpi, t0, t1, v):  # pragma: no cover - compiled
    """v[xi * 4 + nu, t - t0, :] = (B^T d B)[xi, nu] for the tiles t in [t0, t1) (whole
    tile rows): d is the 4 × 4 window of x [n, h, w, c] at rows t_y * m - pt, columns
    t_x * m - pl (zero outside x; 0 <= pl); tw tiles per tile row, tpi per image.

    Tiles above one another share input rows: each input row's transforms (d B, per tile
    column) are computed once, from a zero-padded copy of the row, for all its tiles."""
    _, h, wd, c = x.shape
    wp = (tw - 1) * m + 4
    inside = max(0, min(wd, wp - pl))
    prow = np.zeros((wp, c), v.dtype)
    most = (min(t1 - t0, tpi) // tw - 1) * m + 4
    rows = np.empty((most, tw, 4, c), v.dtype)
    t = t0
    while t < t1:
        b = t // tpi
        ty0 = (t - b * tpi) // tw
        end = min(t1, (b + 1) * tpi)
        ty1 = (end - b * tpi) // tw
        y0 = ty0 * m - pt
        for r in range((ty1 - ty0 - 1) * m + 4):
            y = y0 + r
            if y < 0 or y >= h:
                rows[r] = 0
                continue
            for xx in range(inside):
                for k in range(c):
                    prow[pl + xx, k] = x[b, y, xx, k]
            for tx in range(tw):
                x0 = tx * m
                for k in range(c):
                    d0 = prow[x0 + 0, k]
                    d1 = prow[x0 + 1, k]
                    d2 = prow[x0 + 2, k]
                    d3 = prow[x0 + 3, k]
                    rows[r, tx, 0, k] = -d0 + d2
                    rows[r, tx, 1, k] = d1 + d2
                    rows[r, tx, 2, k] = -d1 + d2
                    rows[r, tx, 3, k] = -d1 + d3
        for ty in range(ty0, ty1):
            r0 = (ty - ty0) * m
            for tx in range(tw):
                tt = b * tpi + ty * tw + tx - t0
                for nu in range(4):
                    for k in range(c):
                        d0 = rows[r0 + 0, tx, nu, k]
                        d1 = rows[r0 + 1, tx, nu, k]
                        d2 = rows[r0 + 2, tx, nu, k]
                        d3 = rows[r0 + 3, tx, nu, k]
                        v[0 + nu, tt, k] = -d0 + d2
                        v[4 + nu, tt, k] = d1 + d2
                        v[8 + nu, tt, k] = -d1 + d2
                        v[12 + nu, tt, k] = -d1 + d3
        t = end


@_jit
def output_tiles_4_2(mm, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled
    """out[n, t_y * 2 + i, t_x * 2 + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1)
    (the parts inside out), from mm [16, t1 - t0, o]."""
    o = out.shape[3]
    cols = np.empty((4, 2, o), out.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 2
        x0 = (q - ty * tw) * 2
        tt = t - t0
        ni = min(2, oh - y0)
        nj = min(2, ow - x0)
        for xi in range(4):
            r = xi * 4
            for k in range(o):
                cols[xi, 0, k] = mm[r + 0, tt, k] + mm[r + 1, tt, k] + mm[r + 2, tt, k]
            for k in range(o):
                cols[xi, 1, k] = mm[r + 1, tt, k] - mm[r + 2, tt, k] + mm[r + 3, tt, k]
        for j in range(nj):
            xx = x0 + j
            for k in range(o):
                out[b, y0 + 0, xx, k] = cols[0, j, k] + cols[1, j, k] + cols[2, j, k]
            if ni > 1:
                for k in range(o):
                    out[b, y0 + 1, xx, k] = cols[1, j, k] - cols[2, j, k] + cols[3, j, k]


@_jit
def gradient_tiles_4_2(dy, tw, tpi, t0, t1, z):  # pragma: no cover - compiled
    """z[xi * 4 + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is
    the 2 × 2 tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""
    _, oh, ow, o = dy.shape
    rows = np.empty((2, 4, o), z.dtype)
    g = np.empty((2, o), z.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 2
        x0 = (q - ty * tw) * 2
        for i in range(2):
            y = y0 + i
            for j in range(2):
                xx = x0 + j
                if y < oh and xx < ow:
                    for k in range(o):
                        g[j, k] = dy[b, y, xx, k]
                else:
                    for k in range(o):
                        g[j, k] = 0
            for k in range(o):
                d0 = g[0, k]
                d1 = g[1, k]
                rows[i, 0, k] = d0
                rows[i, 1, k] = d0 + d1
                rows[i, 2, k] = d0 - d1
                rows[i, 3, k] = d1
        tt = t - t0
        for nu in range(4):
            for k in range(o):
                d0 = rows[0, nu, k]
                d1 = rows[1, nu, k]
                z[0 + nu, tt, k] = d0
                z[4 + nu, tt, k] = d0 + d1
                z[8 + nu, tt, k] = d0 - d1
                z[12 + nu, tt, k] = d1


@_jit
def input_tiles_6(x, m, pt, pl, tw, tpi, t0, t1, v):  # pragma: no cover - compiled
    """v[xi * 6 + nu, t - t0, :] = (B^T d B)[xi, nu] for the tiles t in [t0, t1) (whole
    tile rows): d is the 6 × 6 window of x [n, h, w, c] at rows t_y * m - pt, columns
    t_x * m - pl (zero outside x; 0 <= pl); tw tiles per tile row, tpi per image.

    Tiles above one another share input rows: each input row's transforms (d B, per tile
    column) are computed once, from a zero-padded copy of the row, for all its tiles."""
    k2 = v.dtype.type(2.0)
    k4 = v.dtype.type(4.0)
    k5 = v.dtype.type(5.0)
    _, h, wd, c = x.shape
    wp = (tw - 1) * m + 6
    inside = max(0, min(wd, wp - pl))
    prow = np.zeros((wp, c), v.dtype)
    most = (min(t1 - t0, tpi) // tw - 1) * m + 6
    rows = np.empty((most, tw, 6, c), v.dtype)
    t = t0
    while t < t1:
        b = t // tpi
        ty0 = (t - b * tpi) // tw
        end = min(t1, (b + 1) * tpi)
        ty1 = (end - b * tpi) // tw
        y0 = ty0 * m - pt
        for r in range((ty1 - ty0 - 1) * m + 6):
            y = y0 + r
            if y < 0 or y >= h:
                rows[r] = 0
                continue
            for xx in range(inside):
                for k in range(c):
                    prow[pl + xx, k] = x[b, y, xx, k]
            for tx in range(tw):
                x0 = tx * m
                for k in range(c):
                    d0 = prow[x0 + 0, k]
                    d1 = prow[x0 + 1, k]
                    d2 = prow[x0 + 2, k]
                    d3 = prow[x0 + 3, k]
                    d4 = prow[x0 + 4, k]
                    d5 = prow[x0 + 5, k]
                    rows[r, tx, 0, k] = k4 * d0 - k5 * d2 + d4
                    rows[r, tx, 1, k] = -k4 * d1 - k4 * d2 + d3 + d4
                    rows[r, tx, 2, k] = k4 * d1 - k4 * d2 - d3 + d4
                    rows[r, tx, 3, k] = -k2 * d1 - d2 + k2 * d3 + d4
                    rows[r, tx, 4, k] = k2 * d1 - d2 - k2 * d3 + d4
                    rows[r, tx, 5, k] = k4 * d1 - k5 * d3 + d5
        for ty in range(ty0, ty1):
            r0 = (ty - ty0) * m
            for tx in range(tw):
                tt = b * tpi + ty * tw + tx - t0
                for nu in range(6):
                    for k in range(c):
                        d0 = rows[r0 + 0, tx, nu, k]
                        d1 = rows[r0 + 1, tx, nu, k]
                        d2 = rows[r0 + 2, tx, nu, k]
                        d3 = rows[r0 + 3, tx, nu, k]
                        d4 = rows[r0 + 4, tx, nu, k]
                        d5 = rows[r0 + 5, tx, nu, k]
                        v[0 + nu, tt, k] = k4 * d0 - k5 * d2 + d4
                        v[6 + nu, tt, k] = -k4 * d1 - k4 * d2 + d3 + d4
                        v[12 + nu, tt, k] = k4 * d1 - k4 * d2 - d3 + d4
                        v[18 + nu, tt, k] = -k2 * d1 - d2 + k2 * d3 + d4
                        v[24 + nu, tt, k] = k2 * d1 - d2 - k2 * d3 + d4
                        v[30 + nu, tt, k] = k4 * d1 - k5 * d3 + d5
        t = end


@_jit
def output_tiles_6_2(mm, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled
    """out[n, t_y * 2 + i, t_x * 2 + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1)
    (the parts inside out), from mm [36, t1 - t0, o]."""
    k2 = out.dtype.type(2.0)
    o = out.shape[3]
    cols = np.empty((6, 2, o), out.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 2
        x0 = (q - ty * tw) * 2
        tt = t - t0
        ni = min(2, oh - y0)
        nj = min(2, ow - x0)
        for xi in range(6):
            r = xi * 6
            for k in range(o):
                cols[xi, 0, k] = (
                    mm[r + 0, tt, k]
                    + mm[r + 1, tt, k]
                    + mm[r + 2, tt, k]
                    + mm[r + 3, tt, k]
                    + mm[r + 4, tt, k]
                )
            for k in range(o):
                cols[xi, 1, k] = (
                    mm[r + 1, tt, k]
                    - mm[r + 2, tt, k]
                    + k2 * mm[r + 3, tt, k]
                    - k2 * mm[r + 4, tt, k]
                    + mm[r + 5, tt, k]
                )
        for j in range(nj):
            xx = x0 + j
            for k in range(o):
                out[b, y0 + 0, xx, k] = (
                    cols[0, j, k] + cols[1, j, k] + cols[2, j, k] + cols[3, j, k] + cols[4, j, k]
                )
            if ni > 1:
                for k in range(o):
                    out[b, y0 + 1, xx, k] = (
                        cols[1, j, k]
                        - cols[2, j, k]
                        + k2 * cols[3, j, k]
                        - k2 * cols[4, j, k]
                        + cols[5, j, k]
                    )


@_jit
def gradient_tiles_6_2(dy, tw, tpi, t0, t1, z):  # pragma: no cover - compiled
    """z[xi * 6 + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is
    the 2 × 2 tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""
    k2 = z.dtype.type(2.0)
    _, oh, ow, o = dy.shape
    rows = np.empty((2, 6, o), z.dtype)
    g = np.empty((2, o), z.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 2
        x0 = (q - ty * tw) * 2
        for i in range(2):
            y = y0 + i
            for j in range(2):
                xx = x0 + j
                if y < oh and xx < ow:
                    for k in range(o):
                        g[j, k] = dy[b, y, xx, k]
                else:
                    for k in range(o):
                        g[j, k] = 0
            for k in range(o):
                d0 = g[0, k]
                d1 = g[1, k]
                rows[i, 0, k] = d0
                rows[i, 1, k] = d0 + d1
                rows[i, 2, k] = d0 - d1
                rows[i, 3, k] = d0 + k2 * d1
                rows[i, 4, k] = d0 - k2 * d1
                rows[i, 5, k] = d1
        tt = t - t0
        for nu in range(6):
            for k in range(o):
                d0 = rows[0, nu, k]
                d1 = rows[1, nu, k]
                z[0 + nu, tt, k] = d0
                z[6 + nu, tt, k] = d0 + d1
                z[12 + nu, tt, k] = d0 - d1
                z[18 + nu, tt, k] = d0 + k2 * d1
                z[24 + nu, tt, k] = d0 - k2 * d1
                z[30 + nu, tt, k] = d1


@_jit
def output_tiles_6_4(mm, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled
    """out[n, t_y * 4 + i, t_x * 4 + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1)
    (the parts inside out), from mm [36, t1 - t0, o]."""
    k2 = out.dtype.type(2.0)
    k4 = out.dtype.type(4.0)
    k8 = out.dtype.type(8.0)
    o = out.shape[3]
    cols = np.empty((6, 4, o), out.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 4
        x0 = (q - ty * tw) * 4
        tt = t - t0
        ni = min(4, oh - y0)
        nj = min(4, ow - x0)
        for xi in range(6):
            r = xi * 6
            for k in range(o):
                cols[xi, 0, k] = (
                    mm[r + 0, tt, k]
                    + mm[r + 1, tt, k]
                    + mm[r + 2, tt, k]
                    + mm[r + 3, tt, k]
                    + mm[r + 4, tt, k]
                )
            for k in range(o):
                cols[xi, 1, k] = (
                    mm[r + 1, tt, k]
                    - mm[r + 2, tt, k]
                    + k2 * mm[r + 3, tt, k]
                    - k2 * mm[r + 4, tt, k]
                )
            for k in range(o):
                cols[xi, 2, k] = (
                    mm[r + 1, tt, k]
                    + mm[r + 2, tt, k]
                    + k4 * mm[r + 3, tt, k]
                    + k4 * mm[r + 4, tt, k]
                )
            for k in range(o):
                cols[xi, 3, k] = (
                    mm[r + 1, tt, k]
                    - mm[r + 2, tt, k]
                    + k8 * mm[r + 3, tt, k]
                    - k8 * mm[r + 4, tt, k]
                    + mm[r + 5, tt, k]
                )
        for j in range(nj):
            xx = x0 + j
            for k in range(o):
                out[b, y0 + 0, xx, k] = (
                    cols[0, j, k] + cols[1, j, k] + cols[2, j, k] + cols[3, j, k] + cols[4, j, k]
                )
            if ni > 1:
                for k in range(o):
                    out[b, y0 + 1, xx, k] = (
                        cols[1, j, k] - cols[2, j, k] + k2 * cols[3, j, k] - k2 * cols[4, j, k]
                    )
            if ni > 2:
                for k in range(o):
                    out[b, y0 + 2, xx, k] = (
                        cols[1, j, k] + cols[2, j, k] + k4 * cols[3, j, k] + k4 * cols[4, j, k]
                    )
            if ni > 3:
                for k in range(o):
                    out[b, y0 + 3, xx, k] = (
                        cols[1, j, k]
                        - cols[2, j, k]
                        + k8 * cols[3, j, k]
                        - k8 * cols[4, j, k]
                        + cols[5, j, k]
                    )


@_jit
def gradient_tiles_6_4(dy, tw, tpi, t0, t1, z):  # pragma: no cover - compiled
    """z[xi * 6 + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is
    the 4 × 4 tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""
    k2 = z.dtype.type(2.0)
    k4 = z.dtype.type(4.0)
    k8 = z.dtype.type(8.0)
    _, oh, ow, o = dy.shape
    rows = np.empty((4, 6, o), z.dtype)
    g = np.empty((4, o), z.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 4
        x0 = (q - ty * tw) * 4
        for i in range(4):
            y = y0 + i
            for j in range(4):
                xx = x0 + j
                if y < oh and xx < ow:
                    for k in range(o):
                        g[j, k] = dy[b, y, xx, k]
                else:
                    for k in range(o):
                        g[j, k] = 0
            for k in range(o):
                d0 = g[0, k]
                d1 = g[1, k]
                d2 = g[2, k]
                d3 = g[3, k]
                rows[i, 0, k] = d0
                rows[i, 1, k] = d0 + d1 + d2 + d3
                rows[i, 2, k] = d0 - d1 + d2 - d3
                rows[i, 3, k] = d0 + k2 * d1 + k4 * d2 + k8 * d3
                rows[i, 4, k] = d0 - k2 * d1 + k4 * d2 - k8 * d3
                rows[i, 5, k] = d3
        tt = t - t0
        for nu in range(6):
            for k in range(o):
                d0 = rows[0, nu, k]
                d1 = rows[1, nu, k]
                d2 = rows[2, nu, k]
                d3 = rows[3, nu, k]
                z[0 + nu, tt, k] = d0
                z[6 + nu, tt, k] = d0 + d1 + d2 + d3
                z[12 + nu, tt, k] = d0 - d1 + d2 - d3
                z[18 + nu, tt, k] = d0 + k2 * d1 + k4 * d2 + k8 * d3
                z[24 + nu, tt, k] = d0 - k2 * d1 + k4 * d2 - k8 * d3
                z[30 + nu, tt, k] = d3


@_jit
def input_tiles_8(x, m, pt, pl, tw, tpi, t0, t1, v):  # pragma: no cover - compiled
    """v[xi * 8 + nu, t - t0, :] = (B^T d B)[xi, nu] for the tiles t in [t0, t1) (whole
    tile rows): d is the 8 × 8 window of x [n, h, w, c] at rows t_y * m - pt, columns
    t_x * m - pl (zero outside x; 0 <= pl); tw tiles per tile row, tpi per image.

    Tiles above one another share input rows: each input row's transforms (d B, per tile
    column) are computed once, from a zero-padded copy of the row, for all its tiles."""
    k0_25 = v.dtype.type(0.25)
    k0_5 = v.dtype.type(0.5)
    k1_25 = v.dtype.type(1.25)
    k2 = v.dtype.type(2.0)
    k2_5 = v.dtype.type(2.5)
    k4 = v.dtype.type(4.0)
    k4_25 = v.dtype.type(4.25)
    k5 = v.dtype.type(5.0)
    k5_25 = v.dtype.type(5.25)
    _, h, wd, c = x.shape
    wp = (tw - 1) * m + 8
    inside = max(0, min(wd, wp - pl))
    prow = np.zeros((wp, c), v.dtype)
    most = (min(t1 - t0, tpi) // tw - 1) * m + 8
    rows = np.empty((most, tw, 8, c), v.dtype)
    t = t0
    while t < t1:
        b = t // tpi
        ty0 = (t - b * tpi) // tw
        end = min(t1, (b + 1) * tpi)
        ty1 = (end - b * tpi) // tw
        y0 = ty0 * m - pt
        for r in range((ty1 - ty0 - 1) * m + 8):
            y = y0 + r
            if y < 0 or y >= h:
                rows[r] = 0
                continue
            for xx in range(inside):
                for k in range(c):
                    prow[pl + xx, k] = x[b, y, xx, k]
            for tx in range(tw):
                x0 = tx * m
                for k in range(c):
                    d0 = prow[x0 + 0, k]
                    d1 = prow[x0 + 1, k]
                    d2 = prow[x0 + 2, k]
                    d3 = prow[x0 + 3, k]
                    d4 = prow[x0 + 4, k]
                    d5 = prow[x0 + 5, k]
                    d6 = prow[x0 + 6, k]
                    d7 = prow[x0 + 7, k]
                    rows[r, tx, 0, k] = -d0 + k5_25 * d2 - k5_25 * d4 + d6
                    rows[r, tx, 1, k] = d1 + d2 - k4_25 * d3 - k4_25 * d4 + d5 + d6
                    rows[r, tx, 2, k] = -d1 + d2 + k4_25 * d3 - k4_25 * d4 - d5 + d6
                    rows[r, tx, 3, k] = (
                        k0_5 * d1 + k0_25 * d2 - k2_5 * d3 - k1_25 * d4 + k2 * d5 + d6
                    )
                    rows[r, tx, 4, k] = (
                        -k0_5 * d1 + k0_25 * d2 + k2_5 * d3 - k1_25 * d4 - k2 * d5 + d6
                    )
                    rows[r, tx, 5, k] = k2 * d1 + k4 * d2 - k2_5 * d3 - k5 * d4 + k0_5 * d5 + d6
                    rows[r, tx, 6, k] = -k2 * d1 + k4 * d2 + k2_5 * d3 - k5 * d4 - k0_5 * d5 + d6
                    rows[r, tx, 7, k] = -d1 + k5_25 * d3 - k5_25 * d5 + d7
        for ty in range(ty0, ty1):
            r0 = (ty - ty0) * m
            for tx in range(tw):
                tt = b * tpi + ty * tw + tx - t0
                for nu in range(8):
                    for k in range(c):
                        d0 = rows[r0 + 0, tx, nu, k]
                        d1 = rows[r0 + 1, tx, nu, k]
                        d2 = rows[r0 + 2, tx, nu, k]
                        d3 = rows[r0 + 3, tx, nu, k]
                        d4 = rows[r0 + 4, tx, nu, k]
                        d5 = rows[r0 + 5, tx, nu, k]
                        d6 = rows[r0 + 6, tx, nu, k]
                        d7 = rows[r0 + 7, tx, nu, k]
                        v[0 + nu, tt, k] = -d0 + k5_25 * d2 - k5_25 * d4 + d6
                        v[8 + nu, tt, k] = d1 + d2 - k4_25 * d3 - k4_25 * d4 + d5 + d6
                        v[16 + nu, tt, k] = -d1 + d2 + k4_25 * d3 - k4_25 * d4 - d5 + d6
                        v[24 + nu, tt, k] = (
                            k0_5 * d1 + k0_25 * d2 - k2_5 * d3 - k1_25 * d4 + k2 * d5 + d6
                        )
                        v[32 + nu, tt, k] = (
                            -k0_5 * d1 + k0_25 * d2 + k2_5 * d3 - k1_25 * d4 - k2 * d5 + d6
                        )
                        v[40 + nu, tt, k] = k2 * d1 + k4 * d2 - k2_5 * d3 - k5 * d4 + k0_5 * d5 + d6
                        v[48 + nu, tt, k] = (
                            -k2 * d1 + k4 * d2 + k2_5 * d3 - k5 * d4 - k0_5 * d5 + d6
                        )
                        v[56 + nu, tt, k] = -d1 + k5_25 * d3 - k5_25 * d5 + d7
        t = end


@_jit
def output_tiles_8_4(mm, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled
    """out[n, t_y * 4 + i, t_x * 4 + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1)
    (the parts inside out), from mm [64, t1 - t0, o]."""
    k0_125 = out.dtype.type(0.125)
    k0_25 = out.dtype.type(0.25)
    k0_5 = out.dtype.type(0.5)
    k2 = out.dtype.type(2.0)
    k4 = out.dtype.type(4.0)
    k8 = out.dtype.type(8.0)
    o = out.shape[3]
    cols = np.empty((8, 4, o), out.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 4
        x0 = (q - ty * tw) * 4
        tt = t - t0
        ni = min(4, oh - y0)
        nj = min(4, ow - x0)
        for xi in range(8):
            r = xi * 8
            for k in range(o):
                cols[xi, 0, k] = (
                    mm[r + 0, tt, k]
                    + mm[r + 1, tt, k]
                    + mm[r + 2, tt, k]
                    + mm[r + 3, tt, k]
                    + mm[r + 4, tt, k]
                    + mm[r + 5, tt, k]
                    + mm[r + 6, tt, k]
                )
            for k in range(o):
                cols[xi, 1, k] = (
                    mm[r + 1, tt, k]
                    - mm[r + 2, tt, k]
                    + k2 * mm[r + 3, tt, k]
                    - k2 * mm[r + 4, tt, k]
                    + k0_5 * mm[r + 5, tt, k]
                    - k0_5 * mm[r + 6, tt, k]
                )
            for k in range(o):
                cols[xi, 2, k] = (
                    mm[r + 1, tt, k]
                    + mm[r + 2, tt, k]
                    + k4 * mm[r + 3, tt, k]
                    + k4 * mm[r + 4, tt, k]
                    + k0_25 * mm[r + 5, tt, k]
                    + k0_25 * mm[r + 6, tt, k]
                )
            for k in range(o):
                cols[xi, 3, k] = (
                    mm[r + 1, tt, k]
                    - mm[r + 2, tt, k]
                    + k8 * mm[r + 3, tt, k]
                    - k8 * mm[r + 4, tt, k]
                    + k0_125 * mm[r + 5, tt, k]
                    - k0_125 * mm[r + 6, tt, k]
                    + mm[r + 7, tt, k]
                )
        for j in range(nj):
            xx = x0 + j
            for k in range(o):
                out[b, y0 + 0, xx, k] = (
                    cols[0, j, k]
                    + cols[1, j, k]
                    + cols[2, j, k]
                    + cols[3, j, k]
                    + cols[4, j, k]
                    + cols[5, j, k]
                    + cols[6, j, k]
                )
            if ni > 1:
                for k in range(o):
                    out[b, y0 + 1, xx, k] = (
                        cols[1, j, k]
                        - cols[2, j, k]
                        + k2 * cols[3, j, k]
                        - k2 * cols[4, j, k]
                        + k0_5 * cols[5, j, k]
                        - k0_5 * cols[6, j, k]
                    )
            if ni > 2:
                for k in range(o):
                    out[b, y0 + 2, xx, k] = (
                        cols[1, j, k]
                        + cols[2, j, k]
                        + k4 * cols[3, j, k]
                        + k4 * cols[4, j, k]
                        + k0_25 * cols[5, j, k]
                        + k0_25 * cols[6, j, k]
                    )
            if ni > 3:
                for k in range(o):
                    out[b, y0 + 3, xx, k] = (
                        cols[1, j, k]
                        - cols[2, j, k]
                        + k8 * cols[3, j, k]
                        - k8 * cols[4, j, k]
                        + k0_125 * cols[5, j, k]
                        - k0_125 * cols[6, j, k]
                        + cols[7, j, k]
                    )


@_jit
def gradient_tiles_8_4(dy, tw, tpi, t0, t1, z):  # pragma: no cover - compiled
    """z[xi * 8 + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is
    the 4 × 4 tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""
    k0_125 = z.dtype.type(0.125)
    k0_25 = z.dtype.type(0.25)
    k0_5 = z.dtype.type(0.5)
    k2 = z.dtype.type(2.0)
    k4 = z.dtype.type(4.0)
    k8 = z.dtype.type(8.0)
    _, oh, ow, o = dy.shape
    rows = np.empty((4, 8, o), z.dtype)
    g = np.empty((4, o), z.dtype)
    for t in range(t0, t1):
        b = t // tpi
        q = t - b * tpi
        ty = q // tw
        y0 = ty * 4
        x0 = (q - ty * tw) * 4
        for i in range(4):
            y = y0 + i
            for j in range(4):
                xx = x0 + j
                if y < oh and xx < ow:
                    for k in range(o):
                        g[j, k] = dy[b, y, xx, k]
                else:
                    for k in range(o):
                        g[j, k] = 0
            for k in range(o):
                d0 = g[0, k]
                d1 = g[1, k]
                d2 = g[2, k]
                d3 = g[3, k]
                rows[i, 0, k] = d0
                rows[i, 1, k] = d0 + d1 + d2 + d3
                rows[i, 2, k] = d0 - d1 + d2 - d3
                rows[i, 3, k] = d0 + k2 * d1 + k4 * d2 + k8 * d3
                rows[i, 4, k] = d0 - k2 * d1 + k4 * d2 - k8 * d3
                rows[i, 5, k] = d0 + k0_5 * d1 + k0_25 * d2 + k0_125 * d3
                rows[i, 6, k] = d0 - k0_5 * d1 + k0_25 * d2 - k0_125 * d3
                rows[i, 7, k] = d3
        tt = t - t0
        for nu in range(8):
            for k in range(o):
                d0 = rows[0, nu, k]
                d1 = rows[1, nu, k]
                d2 = rows[2, nu, k]
                d3 = rows[3, nu, k]
                z[0 + nu, tt, k] = d0
                z[8 + nu, tt, k] = d0 + d1 + d2 + d3
                z[16 + nu, tt, k] = d0 - d1 + d2 - d3
                z[24 + nu, tt, k] = d0 + k2 * d1 + k4 * d2 + k8 * d3
                z[32 + nu, tt, k] = d0 - k2 * d1 + k4 * d2 - k8 * d3
                z[40 + nu, tt, k] = d0 + k0_5 * d1 + k0_25 * d2 + k0_125 * d3
                z[48 + nu, tt, k] = d0 - k0_5 * d1 + k0_25 * d2 - k0_125 * d3
                z[56 + nu, tt, k] = d3
