"""The depthwise convolution of the whole-subgraph programs (rill.mobile.kernels._program_loops,
which applies the fused activation after it where this does not): multiplier 1 in the direct
register tiles of kernels._program_direct, box by box (the outputs whose windows lie inside, then
the border rows and columns on their taps inside), other multipliers one by one, and a padded
copy of small inputs. Compiled as _program_loops (float32, reassociation and fused
multiply-adds allowed, no reference counting).
"""

from __future__ import annotations

import numba
import numpy as np

from rill.mobile.kernels._program_direct import direct as _direct
from rill.mobile.kernels._program_direct import inside as _inside
from rill.mobile.kernels._program_direct import taps as _taps

# Outputs with a side below this run one by one: nearly every one is a border output, and the
# boxes of one output each would run 4-output tiles for one (MobileNetV2's 3x3x336 layers:
# ~1.6 us one by one, ~3.4 us in boxes).
TILES_MIN_SIDE = 4

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                  fastmath={"reassoc", "contract"}, _nrt=False)  # fmt: skip


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
def _depthwise_boxes(m, xo, wo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl,
                     act):  # fmt: skip
    """A depthwise convolution with multiplier 1 in the direct tiles, box by box: the outputs
    whose windows lie inside, then each border row and column (rows, or columns, of one window
    part inside: the band of inside columns of a border row, the band of inside rows of a
    border column, the corners one by one), on the taps inside."""
    oy0, oy1 = _inside(oh, sh, pt, (kh - 1) * dh, h)
    ox0, ox1 = _inside(ow, sw, pl, (kw - 1) * dw, w_)
    ry = 0
    while ry < oh:
        ya, yb = (oy0, oy1) if ry == oy0 and oy0 < oy1 else (ry, ry + 1)
        ky0, ky1 = _taps(ya, sh, pt, dh, kh, h)
        rx = 0
        while rx < ow:
            xa, xb = (ox0, ox1) if rx == ox0 and ox0 < ox1 else (rx, rx + 1)
            kx0, kx1 = _taps(xa, sw, pl, dw, kw, w_)
            _direct(m, xo + (ky0 * dh * w_ + kx0 * dw) * ci, wo + (ky0 * kw + kx0) * co, bo, yo,
                    nb, h, w_, ci, oh, ow, co, ky1 - ky0, kx1 - kx0, kw, sh, sw, dh, dw, pt, pl,
                    (ya, yb, xa, xb), act, True)  # fmt: skip
            rx = xb
        ry = yb


@_jit
def depthwise_raw(m, p):  # pragma: no cover - compiled
    """A depthwise NHWC convolution; w is [KH, KW, CO] (CO = CI · multiplier). p: x, w, bias
    (-1: none), y, batch, H, W, CI, OH, OW, CO, KH, KW, stride h/w, dilation h/w, pad
    top/left, the multiplier, activation, two unused parameters (-1), then a scratch area (-1:
    none) into which the input is first copied with its zero padding, so that every window lies
    inside (small images with few channels, rill.mobile.program.depthwise_padded; padding adds
    zero products, as the numpy path's padded copy does). Multiplier 1, both output sides at
    least TILES_MIN_SIDE: in the direct register tiles (kernels._program_direct), box by box
    (`_depthwise_boxes`), with the activation applied, which it returns True for. Otherwise one
    by one, without the activation (False)."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, mult = p[11], p[12], p[13], p[14], p[15], p[16], p[17], \
        p[18], p[19]  # fmt: skip
    act = p[20]
    if p[23] >= 0:
        hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
        _pad_input(m, xo, p[23], nb, h, w_, ci, hp, wp, pt, pl)
        xo, h, w_, pt, pl = p[23], hp, wp, 0, 0
    if mult == 1 and min(oh, ow) >= TILES_MIN_SIDE:
        _depthwise_boxes(m, xo, wo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw,
                         pt, pl, act)  # fmt: skip
        return True
    x = m[xo : xo + nb * h * w_ * ci].reshape((nb * h * w_, ci))
    w = m[wo : wo + kh * kw * co].reshape((kh * kw, co))
    y = m[yo : yo + nb * oh * ow * co].reshape((nb * oh * ow, co))
    hasb = bo >= 0
    bias = m[bo : bo + co] if hasb else m[0:co]
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                r = (b * oh + oy) * ow + ox
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
