"""The compiled loops behind rill.mobile.kernels.jit (import that module, not this one).

Each loop gives exactly what the kernel's numpy path gives: the int8 loops do the reference
kernels' integer arithmetic (int64 accumulators, MultiplyByQuantizedMultiplier with the shifts
and nudges of rill.mobile.quant), the float loops do the numpy path's float32 operations in the
same order (no fast-math, so no fused multiply-add and no reassociation). Arrays are
C-contiguous unless a docstring says otherwise; 4-D ones are NHWC.
"""

from __future__ import annotations

import numba
import numpy as np

# error_model="numpy": IEEE results (inf, NaN) instead of exceptions, as numpy gives.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def _requant(acc, m0, right, add, negfix, lo, hi):  # pragma: no cover - compiled
    # MultiplyByQuantizedMultiplier (double rounding) + zero point + clamp, as
    # quant.Requantizer.apply: y = (acc · M0' + 2^30) >> 31, then (y + add − [y < 0]) >> right.
    y = (acc * m0 + (1 << 30)) >> 31
    if y < 0:
        y -= negfix
    y = (y + add) >> right
    if y < lo:
        return lo
    if y > hi:
        return hi
    return y


@_jit
def requant_rows(acc, m0, right, add, negfix, lo, hi, out):  # pragma: no cover - compiled
    """out[r, c] = requant(int(acc[r, c])) with channel c's constants (int64 arrays [C]);
    acc holds integers (any numeric type in which they are exact)."""
    rows, c = out.shape
    for r in range(rows):
        for q in range(c):
            out[r, q] = _requant(int(acc[r, q]), m0[q], right[q], add[q], negfix[q], lo, hi)


@_jit
def requant_folded(acc, fold, offset, step, threshold, correct, lo, hi, out):  # pragma: no cover
    """common.OutputStage's folded float64 requantization, one element at a time in the numpy
    path's operations: p = acc · fold[c] + offset[c] (exact), the negative-tie correction
    p − min(max(p · −2^31 + threshold, 0), step[c]) when `correct`, floor, clamp to [lo, hi]."""
    rows, c = out.shape
    if correct:  # two loops, so that neither branches per element (and both vectorize)
        for r in range(rows):
            a, o = acc[r], out[r]
            for q in range(c):
                p = np.float64(a[q]) * fold[q] + offset[q]
                t = min(max(p * -2147483648.0 + threshold, 0.0), step[q])
                p = min(max(np.floor(p - t), lo), hi)  # p is finite: an exact integer · fold
                o[q] = np.int32(p)
    else:
        for r in range(rows):
            a, o = acc[r], out[r]
            for q in range(c):
                p = min(max(np.floor(np.float64(a[q]) * fold[q] + offset[q]), lo), hi)
                o[q] = np.int32(p)


@_jit
def requant_rows_single(acc, m0, right, add, lo, hi, out):  # pragma: no cover - compiled
    """The single-rounding variant (FULLY_CONNECTED): (acc · M0 + add) >> right, clamped."""
    rows, c = out.shape
    for r in range(rows):
        for q in range(c):
            y = (int(acc[r, q]) * m0[q] + add[q]) >> right[q]
            out[r, q] = lo if y < lo else (hi if y > hi else y)


@_jit
def depthwise_int8(x, w, bias, zp, sh, sw, dh, dw, mult, m0, right, add, negfix, lo, hi, out):
    """int8 DEPTHWISE_CONV_2D on the padded input x [N, H, W, C] (its border holds zp):
    acc[o] = bias[o] + Σ_taps (x − zp) · w[ky, kx, o], o = c · mult + m, then the output stage.
    w is int32 [KH, KW, C·mult], bias int32 [C·mult]; the caller has checked that no partial
    sum reaches 2^31 (128 · Σ|w| + |bias| < 2^31), so int32 accumulators are exact. One output
    row at a time: the taps' products accumulate into a row buffer [OW, C·mult]."""
    n_, oh, ow, co = out.shape
    kh, kw = w.shape[0], w.shape[1]
    acc = np.empty((ow, co), np.int32)
    for n in range(n_):
        for i in range(oh):
            for j in range(ow):
                for o in range(co):
                    acc[j, o] = bias[o]
            for ky in range(kh):
                xr = x[n, i * sh + ky * dh]
                for kx in range(kw):
                    wt = w[ky, kx]
                    for j in range(ow):
                        src, a = xr[j * sw + kx * dw], acc[j]
                        if mult == 1:
                            for o in range(co):
                                a[o] += (np.int32(src[o]) - zp) * wt[o]
                        else:
                            for o in range(co):
                                a[o] += (np.int32(src[o // mult]) - zp) * wt[o]
            orow = out[n, i]
            for j in range(ow):
                a, dst = acc[j], orow[j]
                for o in range(co):
                    dst[o] = _requant(np.int64(a[o]), m0[o], right[o], add[o], negfix[o], lo, hi)


@_jit
def depthwise_float(x, w, bias, sh, sw, dh, dw, mult, mode, lo, hi, out):  # pragma: no cover
    """float32 DEPTHWISE_CONV_2D on the padded input x, in the numpy path's order: the first
    tap's product, then + each further tap's product (taps in row-major order), + bias, then
    the activation as common.apply_float_activation does it (`mode` 0: none; 1: np.maximum
    with lo, which turns −0 into +0; 2: np.clip to [lo, hi], which keeps −0; NaN stays NaN).
    w [KH, KW, C·mult], bias [C·mult], lo and hi float32. The output row accumulates."""
    n_, oh, ow, co = out.shape
    kh, kw = w.shape[0], w.shape[1]
    for n in range(n_):
        for i in range(oh):
            orow = out[n, i]
            for t in range(kh * kw):
                ky, kx = t // kw, t % kw
                xr, wt = x[n, i * sh + ky * dh], w[ky, kx]
                for j in range(ow):
                    src, dst = xr[j * sw + kx * dw], orow[j]
                    if mult != 1:
                        for o in range(co):
                            p = src[o // mult] * wt[o]
                            dst[o] = p if t == 0 else dst[o] + p
                    elif t == 0:
                        for o in range(co):
                            dst[o] = src[o] * wt[o]
                    else:
                        for o in range(co):
                            dst[o] = dst[o] + src[o] * wt[o]
            for j in range(ow):
                dst = orow[j]
                for o in range(co):
                    v = dst[o] + bias[o]
                    if mode == 1:
                        if v == v and not v > lo:
                            v = lo
                    elif mode == 2:
                        if v < lo:
                            v = lo
                        elif v > hi:
                            v = hi
                    dst[o] = v


@_jit
def pair_lookup(a, b, table, out):  # pragma: no cover - compiled
    """out[i, j, k, l] = table[(a[...] << 8) | b[...]] over 4-D uint8 views a and b broadcast
    to out's shape (any strides, 0 where broadcast); out is C-contiguous."""
    d0, d1, d2, d3 = out.shape
    for i in range(d0):
        for j in range(d1):
            for k in range(d2):
                ra, rb, ro = a[i, j, k], b[i, j, k], out[i, j, k]
                for q in range(d3):
                    ro[q] = table[(np.int32(ra[q]) << 8) | np.int32(rb[q])]


@_jit
def gelu_head(x, c_last, rest, t, p):  # pragma: no cover - compiled
    """The first half of math_ops.Gelu's float64 operations, element by element in the same
    order (flat arrays): z = |x| · √½, t = 1 / (z · 0.5 + 1), p = the erfc polynomial in t
    (Horner: c_last, then p · t + c for c in rest) − z · z. np.exp(p) comes next."""
    s = np.sqrt(0.5)
    for i in range(x.size):
        xd = np.float64(x[i])
        z = abs(xd) * s
        ti = 1.0 / (z * 0.5 + 1.0)
        pi = ti * c_last + rest[0]
        for k in range(1, len(rest)):  # rest: a tuple, so the loop unrolls
            pi = ti * pi + rest[k]
        t[i] = ti
        p[i] = pi - z * z


@_jit
def gelu_tail(x, t, p, out):  # pragma: no cover - compiled
    """The rest after p = exp(p): e = t · p (erfc(|x|/√2)); out = x · 0.5 · (e if x < 0 else
    2 − e), rounded to float32."""
    for i in range(x.size):
        xd = np.float64(x[i])
        e = t[i] * p[i]
        z = e if xd < 0 else 2.0 - e
        out[i] = np.float32(xd * 0.5 * z)


@_jit
def softmax_shift(x, beta, scale, out):  # pragma: no cover - compiled
    """out[r, :] = x[r, :] − max(x[r, :]) (NaN when the row holds one, as np.maximum.reduce),
    then · beta when `scale`: Softmax's float32 operations before np.exp."""
    rows, d = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, d):
            v = x[r, j]
            if v > m or v != v:
                m = v
            if m != m:
                break
        for j in range(d):
            v = x[r, j] - m
            out[r, j] = v * beta if scale else v


@_jit
def quantize_float(x, scale, zp, qmin, qmax, nan_value, out):  # pragma: no cover - compiled
    """QUANTIZE float32 → int8/int16 over flat arrays, in quantize.Quantize's operations:
    t = x / scale in float32, rounded half away from zero in float64, + zp, clamped; NaN gives
    `nan_value` (what numpy's unsafe cast of NaN gives on this machine)."""
    for i in range(x.size):
        t = np.float64(x[i] / scale)
        if t != t:
            out[i] = nan_value
            continue
        t = np.trunc(t + (0.5 if t >= 0 else -0.5)) + zp
        if t < qmin:
            t = qmin
        elif t > qmax:
            t = qmax
        out[i] = int(t)


@_jit
def softmax_int8_head(x, table, e):  # pragma: no cover - compiled
    """e[r, j] = table[x[r, j] − max(x[r, :]) + 255] (int8 Softmax before the row sums)."""
    rows, d = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, d):
            if x[r, j] > m:
                m = x[r, j]
        for j in range(d):
            e[r, j] = table[np.int32(x[r, j]) - np.int32(m) + 255]


@_jit
def softmax_int8_tail(e, s, inv, offset, lo, hi, nan_value, out):  # pragma: no cover
    """out = clamp(floor(e / s[r] · inv + offset)) as int8, in float64 (after the row sums);
    NaN (an overflowed table) gives `nan_value`, as numpy's cast."""
    rows, d = e.shape
    for r in range(rows):
        sr = s[r, 0]
        for j in range(d):
            v = np.floor(e[r, j] / sr * inv + offset)
            if v != v:
                out[r, j] = nan_value
                continue
            if v < lo:
                v = lo
            elif v > hi:
                v = hi
            out[r, j] = int(v)


@_jit
def lookup(table, bits, out):  # pragma: no cover - compiled
    """out[i] = table[bits[i]] over flat arrays (uint8 or uint16 bit patterns)."""
    for i in range(bits.size):
        out[i] = table[bits[i]]


@_jit
def mean_int8(x, offset, m0, right, add, negfix, out):  # pragma: no cover - compiled
    """int8 MEAN of x [outer, count, inner] over its middle axis: the int64 sum − offset
    (zp_in · count), then the fixed-point output stage (one multiplier), as reduce.Mean."""
    outer, count, inner = x.shape
    if inner == 1:  # trailing axes: one running sum per row
        for a in range(outer):
            t = np.int64(0)
            for k in range(count):
                t += x[a, k, 0]
            out[a, 0] = _requant(t - offset, m0, right, add, negfix, -128, 127)
        return
    acc = np.zeros(inner, np.int64)
    for a in range(outer):
        for c in range(inner):
            acc[c] = 0
        for k in range(count):
            row = x[a, k]
            for c in range(inner):
                acc[c] += row[c]
        for c in range(inner):
            out[a, c] = _requant(acc[c] - offset, m0, right, add, negfix, -128, 127)


@_jit
def bmm_int8(a, b, zl, zr, m0, right, add, negfix, out):  # pragma: no cover - compiled
    """int8 BATCH_MATMUL: out[i] = stage(Σ_k (a[i, :, k] − zl)(b[i, k, :] − zr)) for a [B, M, K]
    and b [B, K, N] (any strides); the int32 sums are exact (K · 255² < 2^31, checked by the
    caller); the stage is requant_rows' (per-column constants)."""
    nb, m, k = a.shape
    n = b.shape[2]
    acc = np.empty(n, np.int32)
    for i in range(nb):
        for r in range(m):
            for c in range(n):
                acc[c] = 0
            for t in range(k):
                lv = np.int32(a[i, r, t]) - zl
                brow = b[i, t]
                for c in range(n):
                    acc[c] += lv * (np.int32(brow[c]) - zr)
            orow = out[i, r]
            for c in range(n):
                orow[c] = _requant(np.int64(acc[c]), m0[c], right[c], add[c], negfix[c], -128, 127)


@_jit
def _pairwise_sum(a, n):  # pragma: no cover - compiled
    """numpy's pairwise summation of a row a[:n] of at most 128 terms (its reduce inner loop
    for a contiguous float row, numpy/_core/src/umath/loops_utils.h.src): below 8 terms one
    by one; else eight running sums combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) +
    (r6 + r7)), then the remainder one by one. (Longer rows recurse there: not compiled here,
    numba's cache cannot reload a recursive function.)"""
    if n < 8:
        res = a.dtype.type(0)
        for i in range(n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
    r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
    i = 8
    end = n - n % 8
    while i < end:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[i]
        i += 1
    return res


@_jit
def mean_float_rows(x, count, out):  # pragma: no cover - compiled
    """Float MEAN over trailing axes, x [rows, n <= 128] C-contiguous: out[r] = (0 + Σ x[r, :])
    / count with numpy's own summation order (np.add.reduce starts from its identity, +0), so
    the same bits as the numpy path's add.reduce and divide."""
    rows, n = x.shape
    zero = x.dtype.type(0)
    for r in range(rows):
        out[r] = (zero + _pairwise_sum(x[r], n)) / count


@_jit
def avgpool_int8(x, counts, kh, kw, sh, sw, lo, hi, out):  # pragma: no cover - compiled
    """int8 AVERAGE_POOL_2D on the (zero-)padded input x [N, H, W, C]: the exact sum of each
    window, q = sum / counts[i, j] in float64 rounded half away from zero (trunc(q ± 0.5)),
    clamped to [lo, hi] — pooling.AveragePool2D's numpy operations."""
    n_, oh, ow, c = out.shape
    acc = np.empty(c, np.int32)
    for n in range(n_):
        for i in range(oh):
            for j in range(ow):
                for q in range(c):
                    acc[q] = 0
                for a in range(kh):
                    row = x[n, i * sh + a]
                    for b in range(kw):
                        src = row[j * sw + b]
                        for q in range(c):
                            acc[q] += np.int32(src[q])
                cnt = counts[i, j]
                dst = out[n, i, j]
                for q in range(c):
                    v = np.float64(acc[q]) / cnt
                    v = np.trunc(v + (0.5 if v >= 0 else -0.5))
                    if v < lo:
                        v = lo
                    elif v > hi:
                        v = hi
                    dst[q] = int(v)


@_jit
def softmax_normalize(out):  # pragma: no cover - compiled
    """out[r, :] /= (0 + Σ out[r, :]) for rows of at most 128 values, the sum in numpy's
    pairwise order (see _pairwise_sum): Softmax's np.add.reduce and np.divide after np.exp."""
    rows, d = out.shape
    zero = out.dtype.type(0)
    for r in range(rows):
        row = out[r]
        s = zero + _pairwise_sum(row, d)
        for j in range(d):
            row[j] = row[j] / s


@_jit
def softmax_int8(x, table, e, inv, offset, lo, hi, nan_value, out):  # pragma: no cover
    """The whole int8 Softmax for rows of at most 128 values: softmax_int8_head, the row sums
    in numpy's pairwise order, softmax_int8_tail."""
    softmax_int8_head(x, table, e)
    rows, d = e.shape
    s = np.empty((rows, 1), np.float64)
    for r in range(rows):
        s[r, 0] = 0.0 + _pairwise_sum(e[r], d)
    softmax_int8_tail(e, s, inv, offset, lo, hi, nan_value, out)


@_jit
def requant_folded_bias(acc, bias, fold, offset, step, threshold, correct, lo, hi, out):
    """requant_folded of acc + bias[c]: the integer bias (float64) added to the exact
    accumulator first, which gives the same exact sum as a product with a bias row."""
    rows, c = out.shape
    if correct:
        for r in range(rows):
            a, o = acc[r], out[r]
            for q in range(c):
                p = (np.float64(a[q]) + bias[q]) * fold[q] + offset[q]
                t = min(max(p * -2147483648.0 + threshold, 0.0), step[q])
                p = min(max(np.floor(p - t), lo), hi)
                o[q] = np.int32(p)
    else:
        for r in range(rows):
            a, o = acc[r], out[r]
            for q in range(c):
                p = min(max(np.floor((np.float64(a[q]) + bias[q]) * fold[q] + offset[q]), lo), hi)
                o[q] = np.int32(p)
