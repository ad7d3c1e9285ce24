"""The compiled loops behind rill.exec.kernels.fused_conv_kernels (import that module).

Each loop does the same operations in the same order as the unfused kernels' numpy code, so the
two give bit-identical results: no fast-math, no fused multiply-add. Arrays are C-contiguous and
channels-first (NCHW); each loop works on [lo, hi) of the flattened (image, channel) planes.
"""

from __future__ import annotations

import numba
import numpy as np

# error_model="numpy": IEEE results (inf, NaN) instead of exceptions.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def _epilogue(v, b, act, zero, six):  # pragma: no cover - compiled
    # BiasAdd's value + bias, then numpy's maximum(·, 0) (Relu) and minimum(·, 6) (Relu6): a NaN
    # stays, a tie gives the constant.
    v = v + b
    if act >= 1:
        v = v if (v != v or v > zero) else zero
    if act == 2:
        v = v if (v != v or v < six) else six
    return v


@_jit
def depthwise_nchw(
    x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, act, lo, hi
):  # pragma: no cover - compiled
    """out[b, q] for the planes p = b * C·M + q in [lo, hi): 0 + x·w(tap 0) + x·w(tap 1) + ...
    over the taps in row-major order (the NCHW numpy kernel's order) from x [n, c, h, w]
    zero-padded to [hp, wp] (top rows and left columns before it), and the filter w
    [kh, kw, c, m]; then, when bias has elements, + bias[q] and the activation `act` (0 none,
    1 Relu, 2 Relu6).

    Each channel's plane is first copied, padded, into a buffer, split into its sh × sw phases
    (rows and columns by their remainder modulo the stride): a tap's inputs for the whole output
    plane are then one contiguous run at the phase's width (the columns past the output's are
    computed and dropped). The sums build up in a second buffer, one long loop per tap, which
    the compiler vectorizes."""
    kh, kw, _, mult = w.shape
    _, c, h, wd = x.shape
    _, cm, oh, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    hq = (hp + sh - 1) // sh
    wq = (wp + sw - 1) // sw
    span = (oh - 1) * wq + ow
    acc = np.empty(span, out.dtype)
    phases = np.zeros((sh * sw, hq * wq), out.dtype)
    last = -1
    for p in range(lo, hi):
        b = p // cm
        q = p - b * cm
        ci = q // mult
        m = q - ci * mult
        if b * c + ci != last:  # the channel's padded plane, by phase
            last = b * c + ci
            for y in range(hq * sh):
                yy = y - top
                inside = y < hp and 0 <= yy < h
                for pc in range(sw):
                    dst = phases[(y % sh) * sw + pc, (y // sh) * wq : (y // sh + 1) * wq]
                    for k in range(wq):
                        kk = k * sw + pc - left
                        if inside and 0 <= kk < wd:
                            dst[k] = x[b, ci, yy, kk]
                        else:
                            dst[k] = zero
        for o in range(span):
            acc[o] = zero
        for i in range(kh):
            ri = i * dh
            for j in range(kw):
                cj = j * dw
                wv = w[i, j, ci, m]
                start = (ri // sh) * wq + cj // sw
                src = phases[(ri % sh) * sw + cj % sw, start : start + span]
                for o in range(span):
                    acc[o] += src[o] * wv
        bq = bias[q] if has_bias else zero
        for r in range(oh):
            dst = out[b, q, r]
            row = acc[r * wq : r * wq + ow]
            if has_bias:
                for o in range(ow):
                    dst[o] = _epilogue(row[o], bq, act, zero, six)
            else:
                for o in range(ow):
                    dst[o] = row[o]


@_jit
def bias_activation_planes(planes, bias, act, lo, hi):  # pragma: no cover - compiled
    """planes [n·C, h·w] in place, rows [lo, hi): + bias[row % C], then `act` as above."""
    c = bias.shape[0]
    zero, six = planes.dtype.type(0), planes.dtype.type(6)
    for r in range(lo, hi):
        row = planes[r]
        bq = bias[r % c]
        for o in range(row.shape[0]):
            row[o] = _epilogue(row[o], bq, act, zero, six)
