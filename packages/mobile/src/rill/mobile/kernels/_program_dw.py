"""The depthwise convolution of the whole-subgraph programs (rill.mobile.kernels._program_loops,
which applies the fused activation after it): whole-row passes over tiled weights for few
channels, 3x3 windows in register tiles, the per-tap loop for the rest, and a padded copy of
small inputs so that their windows take the fast paths. Compiled as _program_loops (float32,
reassociation and fused multiply-adds allowed, no reference counting).
"""

from __future__ import annotations

import numba
import numpy as np

from rill.mobile.kernels._program_direct import direct as _direct
from rill.mobile.kernels._program_gemm import depthwise3x3 as _depthwise3x3

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                  fastmath={"reassoc", "contract"}, _nrt=False)  # fmt: skip


@_jit
def _depthwise_rows(
    m, xo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, pt, pl, wto, bto
):  # pragma: no cover
    """Stride 1, no dilation, multiplier 1: the inside of an output row is one contiguous run
    of (columns · channels) values, and so is each window tap's input run; the weights and bias
    are stored tiled along a row, so each window row is one long vectorised pass. Returns the
    columns it did; those whose window reaches into padding are left to the per-pixel loop."""
    lo = min(max(0, pl), ow)
    hi = max(min(ow, w_ - kw + 1 + pl), lo)
    n = (hi - lo) * co
    if n == 0:
        return lo, hi
    x = m[xo : xo + nb * h * w_ * ci].reshape((nb * h, w_ * ci))
    y = m[yo : yo + nb * oh * ow * co].reshape((nb * oh, ow * co))
    wt = m[wto : wto + kh * kw * ow * co].reshape((kh * kw, ow * co))
    bt = m[bto : bto + ow * co] if bo >= 0 else m[0 : ow * co]
    for b in range(nb):
        for oy in range(oh):
            yr = y[b * oh + oy, lo * co : hi * co]
            for i in range(n):
                yr[i] = bt[i] if bo >= 0 else np.float32(0.0)
            for ky in range(kh):
                iy = oy - pt + ky
                if iy < 0 or iy >= h:
                    continue
                xr = x[b * h + iy, (lo - pl) * co :]
                q = ky * kw
                if kw == 3:
                    x1, x2 = xr[co:], xr[2 * co :]
                    w0, w1, w2 = wt[q], wt[q + 1], wt[q + 2]
                    for i in range(n):
                        yr[i] += xr[i] * w0[i] + x1[i] * w1[i] + x2[i] * w2[i]
                else:
                    for kx in range(kw):
                        xk, wk = xr[kx * co :], wt[q + kx]
                        for i in range(n):
                            yr[i] += xk[i] * wk[i]
    return lo, hi


@_jit
def _pad_input(m, xo, so, nb, h, w_, c, hp, wp, pt, pl):  # pragma: no cover - compiled
    """m[so:] = the input at xo [nb, h, w_, c] placed at (pt, pl) in a zeroed [nb, hp, wp, c]."""
    u = np.uint64
    for b in range(nb):
        for py in range(hp):
            iy = py - pt
            row = u(so + ((b * hp + py) * wp) * c)
            if iy < 0 or iy >= h:
                for i in range(u(wp * c)):
                    m[row + i] = 0.0
                continue
            left = u(min(max(pl, 0), wp) * c)
            for i in range(left):
                m[row + i] = 0.0
            n = u(max(min(w_, wp - pl), 0) * c)
            src = u(xo + ((b * h + iy) * w_) * c)
            for i in range(n):
                m[row + left + i] = m[src + i]
            for i in range(left + n, u(wp * c)):
                m[row + i] = 0.0


@_jit
def depthwise_raw(m, p):  # pragma: no cover - compiled
    """A depthwise NHWC convolution without its activation; w is [KH, KW, CO] (CO = CI ·
    multiplier). p: x, w, bias (-1: none), y, batch, H, W, CI, OH, OW, CO, KH, KW, stride h/w,
    dilation h/w, pad top/left, the multiplier, activation (applied by the caller), the
    offsets of the weights and bias tiled along an output row (-1: none; `_depthwise_rows`),
    then a scratch area (-1: none) into which the input is first copied with its zero padding,
    so that every window lies inside and takes the fast paths (small images with few channels,
    rill.mobile.program.depthwise_padded; padding adds zero products, as the numpy path's
    padded copy does)."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, mult = p[11], p[12], p[13], p[14], p[15], p[16], p[17], \
        p[18], p[19]  # fmt: skip
    if p[23] >= 0:
        hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
        _pad_input(m, xo, p[23], nb, h, w_, ci, hp, wp, pt, pl)
        xo, h, w_, pt, pl = p[23], hp, wp, 0, 0
        if mult == 1:  # every window inside: register tiles, the activation as they are stored
            _direct(m, xo, wo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, p[20],
                    True)  # fmt: skip
            return True
    x = m[xo : xo + nb * h * w_ * ci].reshape((nb * h * w_, ci))
    w = m[wo : wo + kh * kw * co].reshape((kh * kw, co))
    y = m[yo : yo + nb * oh * ow * co].reshape((nb * oh * ow, co))
    hasb = bo >= 0
    bias = m[bo : bo + co] if hasb else m[0:co]
    lo, hi = 0, 0  # the columns the row passes did
    if p[21] >= 0:
        lo, hi = _depthwise_rows(m, xo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, pt, pl, p[21],
                                 p[22])  # fmt: skip
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                if lo <= ox < hi:
                    continue
                r = (b * oh + oy) * ow + ox
                iy, ix = oy * sh - pt, ox * sw - pl
                if (kh == 3 and kw == 3 and mult == 1 and iy >= 0 and iy + 2 * dh < h
                        and ix >= 0 and ix + 2 * dw < w_):  # fmt: skip
                    # A 3x3 window inside the input: nine taps in one pass over the row.
                    s0 = (b * h + iy) * w_ + ix
                    _depthwise3x3(x, w, bias, hasb, y, r, s0, dh * w_, dw, co)
                    continue
                for j in range(co):
                    y[r, j] = bias[j] if hasb else np.float32(0.0)
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dw
                        if ix < 0 or ix >= w_:
                            continue
                        src, q = (b * h + iy) * w_ + ix, ky * kw + kx
                        if mult == 1:
                            for j in range(co):
                                y[r, j] += x[src, j] * w[q, j]
                        else:
                            for j in range(co):
                                y[r, j] += x[src, j // mult] * w[q, j]
    return False
