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
def depthwise_nchw(xp, w, bias, out, sh, sw, dh, dw, act, lo, hi):  # pragma: no cover - compiled
    """out[b, q] for the planes p = b * C·M + q in [lo, hi): 0 + x·w(tap 0) + x·w(tap 1) + ...
    over the taps in row-major order (the NCHW numpy kernel's order) from the zero-padded input
    xp [n, c, h', w'] (every tap inside it) and the filter w [kh, kw, c, m]; then, when bias has
    elements, + bias[q] and the activation `act` (0 none, 1 Relu, 2 Relu6).

    The sums build up in a buffer, one long contiguous loop per tap (which the compiler
    vectorizes): with stride 1 over the whole plane at the padded input's width (the columns
    past the output's are computed and dropped), otherwise a row at a time."""
    kh, kw, _, mult = w.shape
    _, cm, oh, ow = out.shape
    hp, wp = xp.shape[2], xp.shape[3]
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    wide = sh == 1 and sw == 1
    span = (oh - 1) * wp + ow if wide else ow
    acc = np.empty(span, out.dtype)
    for p in range(lo, hi):
        b = p // cm
        q = p - b * cm
        ci = q // mult
        m = q - ci * mult
        flat = xp[b, ci].reshape(hp * wp)
        bq = bias[q] if has_bias else zero
        for r in range(1 if wide else oh):
            for o in range(span):
                acc[o] = zero
            for i in range(kh):
                for j in range(kw):
                    wv = w[i, j, ci, m]
                    start = (r * sh + i * dh) * wp + j * dw
                    if wide:
                        src = flat[start : start + span]
                        for o in range(span):
                            acc[o] += src[o] * wv
                    else:
                        src = flat[start : start + (ow - 1) * sw + 1 : sw]
                        for o in range(ow):
                            acc[o] += src[o] * wv
            for rr in range(oh if wide else 1):
                dst = out[b, q, rr if wide else r]
                row = acc[rr * wp : rr * wp + ow] if wide else acc
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
