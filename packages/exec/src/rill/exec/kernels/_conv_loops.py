"""The compiled loops behind rill.exec.kernels.fused_conv_kernels, conv_nchw and the NCHW max
pooling of pool_kernels (that one in _loops, re-exported here; import those modules).

The epilogue and depthwise loops do the same operations in the same order as the unfused
kernels' numpy code, so the two give bit-identical results: no fast-math, no fused multiply-add
(max_pool_nchw says where it differs; conv_nchw's loops only copy). The float32 Sigmoid and
Swish (sigmoid32 and its loops, in _sigmoid_loops, re-exported here) are the exception: their
own exp, within a stated bound of the exact value rather than numpy's bits. Arrays are C-contiguous and
channels-first (NCHW); most loops work on [lo, hi) of the flattened (image, channel) planes.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels import _depthwise_vec as _vec
from rill.exec.kernels import _spin
from rill.exec.kernels._depthwise_loops import taps_3x3, taps_5x5
from rill.exec.kernels._loops import _max, max_pool_nchw
from rill.exec.kernels._sigmoid_loops import (  # noqa: F401 - re-exported for the kernels
    sigmoid32,
    sigmoid32_flat,
    sigmoid32_planes,
    sigmoid32_span,
)

# error_model="numpy": IEEE results (inf, NaN) instead of exceptions.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def _epilogue(v, b, act, zero, six):  # pragma: no cover - compiled
    # BiasAdd's value + bias, then the activation `act`: numpy's maximum(·, 0) (Relu) and
    # minimum(·, 6) (Relu6), where a NaN stays and a tie gives the constant; 3 and 4 the
    # imported HardSigmoid chain Maximum(Minimum(AddV2(Mul(1/6, v), 1/2), 1), 0) and HardSwish,
    # v times it, each operation rounded to the dtype as the unfused kernels round it.
    # (Each clamp is two selects, no branch, so that the loops calling this vectorize.)
    v = v + b
    if act >= 3:
        one = six / six
        t = v * (one / six)  # 1/6 rounded to the dtype, as the importer's constant is
        t = t + one / (one + one)
        m = t if t < one else one
        t = t if t != t else m
        m = t if t > zero else zero
        t = t if t != t else m
        return t if act == 3 else v * t
    if act >= 1:
        m = v if v > zero else zero
        v = v if v != v else m
    if act == 2:
        m = v if v < six else six
        v = v if v != v else m
    return v


@_jit
def _phase_plane(
    plane, phases, sh, sw, top, left, hp, wq, fill, pad
):  # pragma: no cover - compiled
    """phases (flat [sh·sw, hq·wq] view, read as rows of wq) = the [h, w] plane padded with
    `fill` (top rows and left columns before it; rows from hp on are padding too), split by
    stride phase: phase (y % sh)·sw + k % sw holds padded row y, column k at row y // sh, column
    k // sw. For column strides 1 and 2 each phase row is its leading padding, a branch-free
    copy (for stride 2 one loop splits an input row's even and odd columns into its two phase
    rows) and its trailing padding: copies the compiler vectorizes."""
    h, wd = plane.shape
    hq = phases.shape[0] // (sh * sw * wq)
    src = plane.reshape(-1)
    # Phase column pc holds the input's columns k·sw + pc - left for k in [k0, k1) (pc 0) and
    # [j0, j1) (pc 1, stride 2).
    k0 = min(wq, left)
    k1 = max(k0, min(wq, left + wd))
    pairs = False
    if sw == 2:
        k0 = min(wq, (left + 1) // 2)
        k1 = max(k0, min(wq, (wd - 1 + left) // 2 + 1))
        j0 = min(wq, left // 2)
        j1 = max(j0, min(wq, (wd - 2 + left) // 2 + 1)) if wd - 2 + left >= 0 else j0
        pairs = k1 - k0 + j1 - j0 == wd
    for y in range(hq * sh):
        yy = y - top
        row0 = (y % sh) * sw * hq * wq + (y // sh) * wq  # phase (y % sh, 0)'s row y // sh
        if not (y < hp and 0 <= yy < h):
            if not pad:
                continue
            for pc in range(sw):
                d0 = row0 + pc * hq * wq
                for k in range(d0, d0 + wq):
                    phases[k] = fill
            continue
        a = np.uint64(yy * wd)  # unsigned offsets: no negative-index handling, so it vectorizes
        if sw == 1:
            if pad:
                for k in range(row0, row0 + k0):
                    phases[k] = fill
                for k in range(row0 + k1, row0 + wq):
                    phases[k] = fill
            d = np.uint64(row0 + k0)
            b = a + np.uint64(k0 - left)
            for t in range(np.uint64(k1 - k0)):
                phases[d + t] = src[b + t]
        elif sw == 2 and pairs:
            if pad:
                r1 = row0 + hq * wq
                for k in range(row0, row0 + k0):
                    phases[k] = fill
                for k in range(row0 + k1, row0 + wq):
                    phases[k] = fill
                for k in range(r1, r1 + j0):
                    phases[k] = fill
                for k in range(r1 + j1, r1 + wq):
                    phases[k] = fill
            # Input column j goes to phase (j + left) % 2 at k = (j + left) // 2: columns 2t
            # and 2t + 1 to phases e = left % 2 and 1 - e.
            e = left % 2
            de = np.uint64(row0 + e * hq * wq + left // 2)
            do = np.uint64(row0 + (1 - e) * hq * wq + (left + 1) // 2)
            two = np.uint64(2)
            for t in range(np.uint64(wd // 2)):
                phases[de + t] = src[a + two * t]
                phases[do + t] = src[a + two * t + np.uint64(1)]
            if wd % 2:
                phases[de + np.uint64(wd // 2)] = src[a + np.uint64(wd - 1)]
        else:
            for pc in range(sw):
                d0 = row0 + pc * hq * wq
                for k in range(wq):
                    kk = k * sw + pc - left
                    phases[d0 + k] = src[yy * wd + kk] if 0 <= kk < wd else fill


@_jit
def _fill_phases(plane, phases, sh, sw, top, left, hp, wq, fill, pad):  # pragma: no cover
    """phases[(y % sh)·sw + k % sw, (y // sh)·wq + k // sw] = the [h, w] plane padded with
    `fill` (top rows and left columns before it, rows from hp on are padding too; with pad
    False the padding is left as it is, already `fill`)."""
    _phase_plane(plane, phases.reshape(-1), sh, sw, top, left, hp, wq, fill, pad)


@_jit
def depthwise_nchw(
    x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, act, lo, hi
):  # pragma: no cover - compiled
    """out[b, q] for the planes p = b * C·M + q in [lo, hi): 0 + x·w(tap 0) + x·w(tap 1) + ...
    over the taps in row-major order (the NCHW numpy kernel's order) from x [n, c, h, w]
    zero-padded to [hp, wp] (top rows and left columns before it), and the filter w
    [kh, kw, c, m]; then, when bias has elements, + bias[q] and the activation `act` (0 none,
    1 Relu, 2 Relu6, 3 HardSigmoid, 4 HardSwish).

    Each channel's plane is first copied, padded, into a buffer, split into its sh × sw phases
    (rows and columns by their remainder modulo the stride): a tap's inputs for the whole output
    plane are then one contiguous run at the phase's width (the columns past the output's are
    computed and dropped). 3×3 and 5×5 filters at stride 1 or 2 (dilation 1) on rows of a
    vector or more are then summed by _depthwise_vec's blocks of rows, stored with the
    epilogue (the same operations in the same order); other filters build up the sums in a
    second buffer, one long loop per tap, which the compiler vectorizes, then copy them out."""
    kh, kw, _, mult = w.shape
    _, c, h, wd = x.shape
    _, cm, oh, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    hq = (hp + sh - 1) // sh
    wq = (wp + sw - 1) // sw
    span = (oh - 1) * wq + ow
    phases = np.zeros((sh * sw, hq * wq), out.dtype)
    flat = phases.reshape(-1)
    # 3×3 and 5×5 filters at stride 1 or 2 on rows of a vector or more: _depthwise_vec's
    # blocks of rows, straight into the output with the epilogue (no sums buffer).
    rows = (kh == kw and (kh == 3 or kh == 5) and sh == sw and (sh == 1 or sh == 2)
            and dh == 1 and dw == 1 and ow * out.itemsize >= _vec.VECTOR_BYTES)  # fmt: skip
    acc = np.empty(0 if rows else span, out.dtype)
    of = out.reshape(-1)
    weights = np.empty(kh * kw, out.dtype)
    code = act if has_bias else _vec.RAW
    last = -1
    for p in range(lo, hi):
        b = p // cm
        q = p - b * cm
        ci = q // mult
        m = q - ci * mult
        if b * c + ci != last:  # the channel's padded plane, by phase
            last = b * c + ci
            # The buffer's padding is zero from np.zeros, and the planes (all of one
            # geometry) never reach it: only their values are copied.
            _fill_phases(x[b, ci], phases, sh, sw, top, left, hp, wq, zero, False)
        if rows:
            for t in range(kh * kw):
                weights[t] = w[t // kw, t % kw, ci, m]
            bq = bias[q] if has_bias else zero
            at = p * oh * ow
            if kh == 3 and sh == 1:
                _vec.rows_3s1(flat, weights, of, 0, wq, hq * wq, oh, at, ow, bq, code)
            elif kh == 3:
                _vec.rows_3s2(flat, weights, of, 0, wq, hq * wq, oh, at, ow, bq, code)
            elif sh == 1:
                _vec.rows_5s1(flat, weights, of, 0, wq, hq * wq, oh, at, ow, bq, code)
            else:
                _vec.rows_5s2(flat, weights, of, 0, wq, hq * wq, oh, at, ow, bq, code)
            continue
        if kh == kw == 3:
            taps_3x3(flat, w, ci, m, sh, sw, dh, dw, wq, hq * wq, span, acc)
        elif kh == kw == 5:
            taps_5x5(flat, w, ci, m, sh, sw, dh, dw, wq, hq * wq, span, acc)
        else:
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
    """planes [n·C, h·w] in place, rows [lo, hi): + bias[row % C] (none when bias is empty),
    then `act` as above."""
    c = bias.shape[0]
    zero, six = planes.dtype.type(0), planes.dtype.type(6)
    for r in range(lo, hi):
        row = planes[r]
        bq = bias[r % c] if c > 0 else zero
        for o in range(row.shape[0]):
            row[o] = _epilogue(row[o], bq, act, zero, six)


@_jit
def scale_planes(x, s, out, lo, hi):  # pragma: no cover - compiled
    """out[p] = x[p] · s[p] for the planes p in [lo, hi) of x and out [planes, h·w] (s one value
    per plane: a squeeze-excite gate [n, c, 1, 1] read flat): numpy's multiply of x by s, each
    product rounded once, the same bits in one pass (numpy's broadcasting loop took 2-3×
    as long on 7×7 to 56×56 planes)."""
    for p in range(lo, hi):
        v = s[p]
        src = x[p]
        dst = out[p]
        for i in range(src.shape[0]):
            dst[i] = src[i] * v


@_jit
def bias_activation_rows(rows, bias, act, lo, hi):  # pragma: no cover - compiled
    """rows [m, n] in place, rows [lo, hi): + bias[column], then `act` as above (the epilogue
    of a _FusedMatMul with the HardSigmoid or HardSwish chain)."""
    zero, six = rows.dtype.type(0), rows.dtype.type(6)
    for r in range(lo, hi):
        row = rows[r]
        for q in range(row.shape[0]):
            row[q] = _epilogue(row[q], bias[q], act, zero, six)


@_jit
def bias_side_activation(planes, bias, side, relu, lo, hi):  # pragma: no cover - compiled
    """planes [n·C, h·w] in place, rows [lo, hi): (value + bias[row % C]) + side, then numpy's
    maximum(·, 0) when relu (a residual connection's BiasAdd, AddV2 and Relu)."""
    c = bias.shape[0]
    zero = planes.dtype.type(0)
    for r in range(lo, hi):
        row = planes[r]
        s = side[r]
        bq = bias[r % c]
        for o in range(row.shape[0]):
            v = (row[o] + bq) + s[o]
            if relu:
                v = v if (v != v or v > zero) else zero
            row[o] = v


@_jit
def sigmoid_head(planes, bias, t, lo, hi):  # pragma: no cover - compiled
    """The first pass of Sigmoid / Swish over planes [n·C, h·w] rows [lo, hi): the rows get
    + bias[row % C] (none when bias is empty) in place, and t [hi - lo, h·w] their negation,
    for numpy's exp to run on in place (the Sigmoid kernel's exp, so the bits agree)."""
    c = bias.shape[0]
    zero = planes.dtype.type(0)
    for r in range(lo, hi):
        row = planes[r]
        dst = t[r - lo]
        bq = bias[r % c] if c > 0 else zero
        for o in range(row.shape[0]):
            v = row[o] + bq if c > 0 else row[o]
            row[o] = v
            dst[o] = -v


@_jit
def sigmoid_tail(planes, t, swish, lo, hi):  # pragma: no cover - compiled
    """The last pass: with t = exp(-v), the Sigmoid kernel's 1 / (t + 1) replaces each value
    of rows [lo, hi) (or, for Swish, multiplies it). A NaN v stays as it is in Swish (numpy's
    multiply keeps its first operand's NaN, sign included)."""
    one = planes.dtype.type(1)
    for r in range(lo, hi):
        row = planes[r]
        src = t[r - lo]
        for o in range(row.shape[0]):
            s = one / (src[o] + one)
            v = row[o]
            row[o] = (v if v != v else v * s) if swish else s


@_jit
def _vec_columns(k, cols, xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c):
    """_depthwise_vec's loop for a k×k filter (3 or 5) and `cols` output columns (1 to 7)."""
    if k == 3:
        if cols == 7:
            _vec.t3_7(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        elif cols == 6:
            _vec.t3_6(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        elif cols == 5:
            _vec.t3_5(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        elif cols == 4:
            _vec.t3_4(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        elif cols == 3:
            _vec.t3_3(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        elif cols == 2:
            _vec.t3_2(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
        else:
            _vec.t3_1(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 7:
        _vec.t5_7(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 6:
        _vec.t5_6(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 5:
        _vec.t5_5(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 4:
        _vec.t5_4(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 3:
        _vec.t5_3(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    elif cols == 2:
        _vec.t5_2(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)
    else:
        _vec.t5_1(xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c)


def pairwise_program(n: int) -> np.ndarray:
    """numpy's pairwise summation of n values as a program for row_pairwise_sums: rows
    (kind, start, length), kind 0 a leaf (a run of at most 128 values) and 1 the sum of the last
    two results (numpy's split: a run of more than 128 at n2 = n // 2 rounded down to a multiple
    of 8, its first part first)."""
    ops: list = []
    todo = [(0, 0, n)]  # (kind, start, length): 0 a run to sum, 1 an addition to emit
    while todo:
        kind, s, m = todo.pop()
        if kind == 1:
            ops.append((1, 0, 0))
        elif m <= 128:
            ops.append((0, s, m))
        else:
            m2 = m // 2
            m2 -= m2 % 8
            todo += [(1, 0, 0), (0, s + m2, m - m2), (0, s, m2)]
    return np.array(ops, np.int64).reshape(-1, 3)


@_jit
def row_pairwise_sums(x, out, prog, mean, lo, hi):  # pragma: no cover - compiled
    """out[r] = 0 + numpy's pairwise sum of x[r] (divided by the row's length, in the dtype,
    where mean) for the rows r in [lo, hi) of x [rows, n] (C-contiguous), prog
    pairwise_program(n): numpy's additions in numpy's order, so its bits, LEAF_ROWS rows at a
    time (_vec.leaf_rows; past the last row the last again, unused)."""
    rows, n = x.shape
    zero = x.dtype.type(0)
    count = x.dtype.type(n)
    xf = x.reshape(-1)
    q = _vec.LEAF_ROWS
    stack = np.empty(65 * q, x.dtype)
    for r0 in range(lo, hi, q):
        r1 = min(hi, r0 + q)
        base = r0 * n
        stride = n if r1 - r0 == q else 0
        top = 0
        for t in range(prog.shape[0]):
            if prog[t, 0] == 0:
                if stride == 0:  # fewer rows than a group: one at a time, into its slot
                    # (each call writes q slots from its own; the rows after it rewrite theirs)
                    for r in range(r0, r1):
                        _vec.leaf_rows(xf, r * n, 0, prog[t, 1], prog[t, 2], stack,
                                       top * q + r - r0)  # fmt: skip
                else:
                    _vec.leaf_rows(xf, base, stride, prog[t, 1], prog[t, 2], stack, top * q)
                top += 1
            else:
                top -= 1
                for j in range(q):
                    stack[(top - 1) * q + j] = stack[(top - 1) * q + j] + stack[top * q + j]
        for r in range(r0, r1):
            v = zero + stack[r - r0]
            out[r] = v / count if mean else v


@_jit
def _window_column(x, p, y0, y1, c):  # pragma: no cover - compiled
    """The maximum down column c of plane p's rows [y0, y1): max_pool_nchw's vm[c]."""
    v = x[p, y0, c]
    for y in range(y0 + 1, y1):
        v = _max(v, x[p, y, c])
    return v


@_jit
def max_pool_3x3s2(x, out, top, left, lo, hi):  # pragma: no cover - compiled
    """max_pool_nchw (x [planes, h, w], out [planes, oh, ow], both C-contiguous) for 3×3
    windows at stride 2, the same operations in the same order, so its bits: a row of outputs
    whose windows are whole (all 3 rows and 3 columns inside x) goes a vector at a time
    (_vec.pool_3x3s2, the last vector overlapping the one before it), the rest one output at a
    time. Rows of fewer outputs than a vector: max_pool_nchw itself."""
    _, h, wd = x.shape
    _, oh, ow = out.shape
    lanes = _vec.VECTOR_BYTES // out.itemsize
    o0 = min(ow, max(0, (left + 1) // 2))  # the outputs whose windows' columns lie inside
    o1 = max(o0, min(ow, (wd - 3 + left) // 2 + 1))
    if o1 - o0 < lanes:
        max_pool_nchw(x, out, 3, 3, 2, 2, top, left, lo, hi)
        return
    lowest = x.dtype.type(-np.inf)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    for p in range(lo, hi):
        for r in range(oh):
            y0 = max(0, r * 2 - top)
            y1 = min(h, r * 2 - top + 3)
            dst = out[p, r]
            if y0 >= y1:
                for o in range(ow):
                    dst[o] = lowest
                continue
            for e in range(o0 + ow - o1):  # the windows partly outside the row (from lowest)
                o = e if e < o0 else o1 + e - o0
                acc = lowest
                for j in range(3):
                    cc = o * 2 + j - left
                    if 0 <= cc < wd:
                        acc = _max(acc, _window_column(x, p, y0, y1, cc))
                dst[o] = acc
            if y1 - y0 == 3:
                for b0 in range(o0, o1, lanes):
                    o = min(b0, o1 - lanes)
                    _vec.pool_3x3s2(xf, (p * h + y0) * wd + o * 2 - left, wd, of,
                                    (p * oh + r) * ow + o)  # fmt: skip
            else:
                for o in range(o0, o1):
                    c = o * 2 - left
                    dst[o] = _max(_max(_window_column(x, p, y0, y1, c),
                                       _window_column(x, p, y0, y1, c + 1)),
                                  _window_column(x, p, y0, y1, c + 2))  # fmt: skip


# NCHW max pooling of one image over the pool's team (_spin.team_run): a piece is a run of
# whole planes, pooled as the unsplit call pools them (each plane's outputs depend on it alone),
# so the bits are the unsplit call's. Arguments (int64 cells):
_MX, _MO, _MPLANES, _MH, _MW, _MOH, _MOW, _MKH, _MKW, _MSH, _MSW, _MTOP, _MLEFT, _MPIECES = range(
    14
)
_MNARGS = 14


@_jit
def max_pool_planes(x, out, kh, kw, sh, sw, top, left, lo, hi):  # pragma: no cover - compiled
    """max_pool_nchw, through max_pool_3x3s2 for 3×3 windows at stride 2."""
    if kh == 3 and kw == 3 and sh == 2 and sw == 2:
        max_pool_3x3s2(x, out, top, left, lo, hi)
    else:
        max_pool_nchw(x, out, kh, kw, sh, sw, top, left, lo, hi)


@_jit
def _max_pool_piece(v, p, like):  # pragma: no cover - compiled
    planes = v[_MPLANES]
    lo = planes * p // v[_MPIECES]
    hi = planes * (p + 1) // v[_MPIECES]
    if hi > lo:
        h, wd, oh, ow = v[_MH], v[_MW], v[_MOH], v[_MOW]
        x = _spin.array_at(v[_MX], planes * h * wd, like).reshape((planes, h, wd))
        out = _spin.array_at(v[_MO], planes * oh * ow, like).reshape((planes, oh, ow))
        max_pool_planes(x, out, v[_MKH], v[_MKW], v[_MSH], v[_MSW], v[_MTOP], v[_MLEFT], lo, hi)


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _max_pool32(argp, p):  # pragma: no cover - compiled
    _max_pool_piece(numba.carray(argp, _MNARGS), p, np.float32(0))


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _max_pool64(argp, p):  # pragma: no cover - compiled
    _max_pool_piece(numba.carray(argp, _MNARGS), p, np.float64(0))


def max_pool_piece_function(dtype) -> int:
    """The address of the team's max pooling piece function for `dtype`."""
    return (_max_pool32 if dtype.itemsize == 4 else _max_pool64).address


@_jit
def max_pool_team(x, out, kh, kw, sh, sw, top, left, pieces, team, fn):  # pragma: no cover
    """max_pool_planes over all planes of x [planes, h, w] into out [planes, oh, ow] (both
    C-contiguous) in `pieces` runs of planes over the team (fn: max_pool_piece_function(dtype)):
    the unsplit call's bits."""
    v = np.empty(_MNARGS, np.int64)
    v[_MX], v[_MO] = _spin.address(x), _spin.address(out)
    v[_MPLANES], v[_MH], v[_MW] = x.shape[0], x.shape[1], x.shape[2]
    v[_MOH], v[_MOW] = out.shape[1], out.shape[2]
    v[_MKH], v[_MKW], v[_MSH], v[_MSW], v[_MTOP], v[_MLEFT] = kh, kw, sh, sw, top, left
    v[_MPIECES] = max(1, min(pieces, x.shape[0]))
    _spin.team_run(team, fn, v, v[_MPIECES])


@_jit
def _out_block(has_bias, act, yf, s0, ss, bias, q0, ob, d0, ds):  # pragma: no cover - compiled
    """_vec's block_out for the bias (if any) and `act`."""
    if not has_bias:
        _vec.out_sums(yf, s0, ss, bias, q0, ob, d0, ds)
    elif act == 0:
        _vec.out_0(yf, s0, ss, bias, q0, ob, d0, ds)
    elif act == 1:
        _vec.out_1(yf, s0, ss, bias, q0, ob, d0, ds)
    elif act == 2:
        _vec.out_2(yf, s0, ss, bias, q0, ob, d0, ds)
    elif act == 3:
        _vec.out_3(yf, s0, ss, bias, q0, ob, d0, ds)
    else:
        _vec.out_4(yf, s0, ss, bias, q0, ob, d0, ds)


@_jit
def depthwise_nchw_by_channel(
    x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, act, lo, hi
):  # pragma: no cover - compiled
    """depthwise_nchw for a channel multiplier of 1 and small planes, images [lo, hi): the
    same sums in the same order (0 + x·w(tap 0) + x·w(tap 1) + ... in row-major tap order, then
    the bias and `act`), but with the channels innermost, so that each tap is one long
    vectorized loop over all channels: the image is first copied, zero-padded, channels-last,
    the sums go to a channels-last buffer, and out is copied from it with the bias and `act`;
    both copies move blocks of 8 channels × 8 positions transposed in registers
    (_depthwise_vec.block_in, block_out), the channels past the last whole block one at a
    time, element by element (the same values either way). 3×3 and 5×5 filters sum through
    _depthwise_vec's register-blocked loops, the channels padded with zeros to whole vectors
    (the padding's sums are dropped). (Where two NaNs meet in a sum, which one's sign the
    result keeps may differ.)"""
    kh, kw, c, _ = w.shape
    _, _, h, wd = x.shape
    _, _, oh, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    vec = kh == kw and (kh == 3 or kh == 5)
    lanes = _vec.VECTOR_BYTES // out.itemsize
    # The channels of the buffers: c, or (vec) c rounded up to whole vectors.
    cp = (c + lanes - 1) // lanes * lanes if vec else c
    xt = np.empty((hp, wp, cp), out.dtype)
    wt = np.zeros((kh, kw, cp), out.dtype)
    for i in range(kh):
        for j in range(kw):
            for q in range(c):
                wt[i, j, q] = w[i, j, q, 0]
    # The sums channels-last, one row of cp per output position (the taps write them there),
    # then the bias and activation over them, then out from them.
    npos = oh * ow
    yt = np.empty((npos, cp), out.dtype)
    xf = xt.reshape(-1)
    wf = wt.reshape(-1)
    yf = yt.reshape(-1)
    # The padding of xt (rows above and below the image, columns beside it): zero once.
    for y in range(hp):
        for k in range(wp):
            if top <= y < top + h and left <= k < left + wd:
                for q in range(c, cp):  # the padded channels of the image's positions
                    xt[y, k, q] = zero
                continue
            dst = xt[y, k]
            for q in range(cp):
                dst[q] = zero
    hw = np.uint64(h * wd)
    # Whole blocks of 8 channels go in and out transposed in registers (_vec.block_in,
    # _out_block), 8 positions at a time (a ragged last run of positions overlaps the run
    # before it); the channels past them one at a time.
    blk = _vec.BLOCK
    cin = c // blk * blk if h * wd >= blk else 0
    cout = c // blk * blk if npos >= blk else 0
    doff = np.empty(h * wd, np.int64)  # each input position's place in xf (channel 0)
    for y in range(h):
        for k in range(wd):
            doff[y * wd + k] = ((y + top) * wp + k + left) * cp
    for b in range(lo, hi):
        xb = x[b].reshape(-1)
        for q0 in range(0, cin, blk):
            for r0 in range(0, h * wd, blk):
                p0 = min(r0, h * wd - blk)
                _vec.block_in(xb, q0 * h * wd + p0, h * wd, xf, doff, p0, q0)
        for y in range(h):  # xt's interior, the other channels (contiguous writes)
            for k in range(wd):
                dst = xt[y + top, k + left]
                s0 = np.uint64(y * wd + k)
                for q in range(np.uint64(cin), np.uint64(c)):
                    dst[q] = xb[s0 + q * hw]
        if vec:
            for o0 in range(0, ow, _vec.MAX_COLUMNS):
                cols = min(_vec.MAX_COLUMNS, ow - o0)
                _vec_columns(kh, cols, xf, wf, yf, o0 * sw * cp, sh * wp * cp, dh * wp * cp,
                             dw * cp, sw * cp, o0 * cp, ow * cp, oh, cp // lanes, cp)  # fmt: skip
        else:
            for r in range(oh):
                for o in range(ow):
                    acc = yt[r * ow + o]
                    for q in range(c):
                        acc[q] = zero
                    for i in range(kh):
                        for j in range(kw):
                            src = xt[r * sh + i * dh, o * sw + j * dw]
                            wv = wt[i, j]
                            for q in range(c):
                                acc[q] += src[q] * wv[q]
        # out[b, q] from column q of yt, with the bias and `act`.
        ob = out[b].reshape(-1)
        for q0 in range(0, cout, blk):
            for r0 in range(0, npos, blk):
                p0 = min(r0, npos - blk)
                _out_block(has_bias, act, yf, p0 * cp + q0, cp, bias, q0, ob, q0 * npos + p0,
                           npos)  # fmt: skip
        cu = np.uint64(cp)
        for q in range(cout, c):  # the other channels (contiguous writes)
            d0 = np.uint64(q * npos)
            bq = bias[q] if has_bias else zero
            for t in range(np.uint64(npos)):
                v = yf[t * cu + np.uint64(q)]
                ob[d0 + t] = _epilogue(v, bq, act, zero, six) if has_bias else v


# -- conv_nchw: the input's padded stride phases ([c, sh·sw, hq·wq]: rows and columns by their
# remainder modulo the stride), so that every filter tap reads, for a run of output rows, one
# contiguous run of a phase plane at the phase's width wq (the wq - ow columns past each output
# row are computed and dropped).


@_jit
def conv_phases(x, b, ph, hq, wq, sh, sw, top, left):  # pragma: no cover - compiled
    """ph[ci, (y % sh)·sw + (k % sw), (y // sh)·wq + k // sw] = the zero-padded x[b, ci] at
    padded row y and column k (top rows and left columns of padding before the input)."""
    c = x.shape[1]
    zero = ph.dtype.type(0)
    for ci in range(c):
        _phase_plane(x[b, ci], ph[ci].reshape(-1), sh, sw, top, left, hq * sh, wq, zero, True)


@_jit
def conv_tiles(x, b, p, kh, kw, oh, ow):  # pragma: no cover - compiled
    """p[(i·kw + j)·c + ci, y·ow + k] = x[b, ci, y·kh + i, k·kw + j]: the patch matrix of a
    convolution whose windows tile the image (stride = window, no padding or dilation: a
    vision transformer's patch embedding), rows in the [kh·kw·c, o] filter matrix's order,
    from each input row read once in order."""
    c = x.shape[1]
    for ci in range(c):
        for y in range(oh):
            for i in range(kh):
                src = x[b, ci, y * kh + i]
                for j in range(kw):
                    row = p[(i * kw + j) * c + ci]
                    at = y * ow
                    for k in range(ow):
                        row[at + k] = src[k * kw + j]


@_jit
def conv_patches(ph, p, wq, kh, kw, sh, sw, dh, dw, a, length):  # pragma: no cover - compiled
    """p[(i·kw + j)·c + ci, :length] = the run of tap (i, j) of channel ci (the rows of the
    [kh·kw·c, o] filter matrix) from column `a` of the output positions at the phase width: one
    contiguous copy per row of p."""
    c = ph.shape[0]
    for i in range(kh):
        ri = i * dh
        for j in range(kw):
            cj = j * dw
            for ci in range(c):
                plane = ph[ci, (ri % sh) * sw + cj % sw]
                start = (ri // sh) * wq + cj // sw + a
                row = p[(i * kw + j) * c + ci]
                for o in range(length):
                    row[o] = plane[start + o]


@_jit
def conv_crop(e, out, b, bias, act, r0, r1, wq):  # pragma: no cover - compiled
    """out[b, oc, r] for r in [r0, r1) = e[oc, (r - r0)·wq :][:ow] (+ bias[oc] and the
    activation `act`, as _conv_loops' epilogue, when bias has elements)."""
    _, co, _, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    for oc in range(co):
        src = e[oc]
        bq = bias[oc] if has_bias else zero
        for r in range(r0, r1):
            dst = out[b, oc, r]
            base = (r - r0) * wq
            if has_bias:
                for o in range(ow):
                    dst[o] = _epilogue(src[base + o], bq, act, zero, six)
            else:
                for o in range(ow):
                    dst[o] = src[base + o]


@_jit
def conv_patch_rows(ph, p, wq, kh, kw, sh, sw, dh, dw, r0, r1, ow):  # pragma: no cover - compiled
    """p[(i·kw + j)·c + ci, (r - r0)·ow + o] = tap (i, j) of channel ci at output row r in
    [r0, r1), column o < ow: conv_patches without the wq - ow columns past each output row,
    so that the band's product is the output band itself."""
    c = ph.shape[0]
    for i in range(kh):
        ri = i * dh
        for j in range(kw):
            cj = j * dw
            for ci in range(c):
                plane = ph[ci, (ri % sh) * sw + cj % sw]
                start = (ri // sh) * wq + cj // sw
                row = p[(i * kw + j) * c + ci]
                for r in range(r0, r1):
                    src = plane[start + r * wq : start + r * wq + ow]
                    dst = row[(r - r0) * ow : (r - r0 + 1) * ow]
                    for o in range(ow):
                        dst[o] = src[o]


@_jit
def bias_activation_span(out, b, bias, act, lo, hi):  # pragma: no cover - compiled
    """out[b, oc] (read flat) elements [lo, hi) of every channel oc, in place: + bias[oc], then
    `act` (the epilogue of conv_crop, on a band the product wrote in place)."""
    _, co, oh, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    flat = out.reshape(out.shape[0], co, oh * ow)
    for oc in range(co):
        row = flat[b, oc, lo:hi]
        bq = bias[oc]
        for o in range(hi - lo):
            row[o] = _epilogue(row[o], bq, act, zero, six)


@_jit
def tanh_gelu_head(x, u, a, b, lo, hi):  # pragma: no cover - compiled
    """u[i] = b · (x + a · (x · (x · x))) for i in [lo, hi) of the flat x: the operations of the
    tanh-GELU chain before its Tanh (Mul, Mul, Mul, AddV2, Mul), each rounded to the dtype."""
    xs, us = x[lo:hi], u[lo:hi]  # indices from 0: no negative-index test, the loop vectorizes
    for i in range(hi - lo):
        v = xs[i]
        us[i] = b * (v + a * (v * (v * v)))


@_jit
def tanh_gelu_tail(x, t, c, d, lo, hi):  # pragma: no cover - compiled
    """t[i] = d · (x · (c + t)) in place for i in [lo, hi): the chain's ops after its Tanh."""
    xs, ts = x[lo:hi], t[lo:hi]
    for i in range(hi - lo):
        ts[i] = d * (xs[i] * (c + ts[i]))


# The by-channel depthwise convolution split through the intra-op pool's team
# (_spin.team_run): a piece is a run of whole vectors of channels of one image, each a
# depthwise convolution of its own (its channels' input planes, filter columns, bias and output
# planes), so the pieces' sums are the unsplit call's. Its arguments (int64 cells):
(_DX, _DW, _DB, _DO, _DC, _DH, _DWD, _DKH, _DKW, _DOH, _DOW, _DNB, _DSH, _DSW, _DDH, _DDW, _DTOP,
 _DLEFT, _DHP, _DWP, _DACT, _DSWISH, _DGROUPS, _DPIECES, _DN) = range(25)  # fmt: skip
_DNARGS = 25


@_jit
def _by_channel_piece(v, p, like):  # pragma: no cover - compiled
    """Piece p of the team's by-channel depthwise convolution (image p // the pieces per
    image), on the operands at v's addresses (elements of like's type); its output planes and
    their channels [q0, q1)."""
    c, h, wd, oh, ow, kh, kw = v[_DC], v[_DH], v[_DWD], v[_DOH], v[_DOW], v[_DKH], v[_DKW]
    image, p = divmod(p, v[_DPIECES])
    isz = _spin.array_at(v[_DO], 1, like).itemsize
    out = _spin.array_at(v[_DO] + image * c * oh * ow * isz, c * oh * ow, like)
    lanes = _vec.VECTOR_BYTES // out.itemsize
    q0 = v[_DGROUPS] * p // v[_DPIECES] * lanes
    q1 = min(c, v[_DGROUPS] * (p + 1) // v[_DPIECES] * lanes)
    if q1 <= q0:
        return out[:0].reshape((0, oh * ow)), q0, q0
    xs = _spin.array_at(v[_DX] + image * c * h * wd * isz, c * h * wd, like)[
        q0 * h * wd : q1 * h * wd
    ]
    ws = _spin.array_at(v[_DW], kh * kw * c, like).reshape((kh, kw, c, 1))[:, :, q0:q1]
    bs = _spin.array_at(v[_DB], v[_DNB] * c, like)[q0 * v[_DNB] : q1 * v[_DNB]]
    planes = out[q0 * oh * ow : q1 * oh * ow].reshape((q1 - q0, oh * ow))
    depthwise_nchw_by_channel(xs.reshape((1, q1 - q0, h, wd)), ws, bs,
                              planes.reshape((1, q1 - q0, oh, ow)), v[_DSH], v[_DSW], v[_DDH],
                              v[_DDW], v[_DTOP], v[_DLEFT], v[_DHP], v[_DWP], v[_DACT], 0, 1)  # fmt: skip
    return planes, q0, q1


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _by_channel32(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _DNARGS)
    planes, q0, q1 = _by_channel_piece(v, p, np.float32(0))
    if v[_DSWISH] >= 0 and q1 > q0:  # float32 Sigmoid / Swish over the piece's planes
        sigmoid32_planes(planes, planes[0, :0], v[_DSWISH] == 1, 0, q1 - q0)


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _by_channel64(argp, p):  # pragma: no cover - compiled
    _by_channel_piece(numba.carray(argp, _DNARGS), p, np.float64(0))


def by_channel_piece_function(dtype) -> int:
    """The address of the team's by-channel depthwise piece function for `dtype`."""
    return (_by_channel32 if dtype.itemsize == 4 else _by_channel64).address


@_jit
def depthwise_by_channel_team(x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, act, swish,
                              pieces, team, fn):  # fmt: skip  # pragma: no cover - compiled
    """depthwise_nchw_by_channel of x [n, c, h, w] (C-contiguous, and out likewise; w
    [kh, kw, c, 1] C-contiguous) in `pieces` runs of whole vectors of channels per image over
    the team (fn: by_channel_piece_function(dtype)); then, with swish 0 or 1 (float32),
    sigmoid32 (Swish's value when 1) over each piece's planes. The unsplit call's bits."""
    n, c, h, wd = x.shape
    kh, kw, _, _ = w.shape
    _, _, oh, ow = out.shape
    lanes = _vec.VECTOR_BYTES // out.itemsize
    v = np.empty(_DNARGS, np.int64)
    v[_DX], v[_DW], v[_DB], v[_DO] = (_spin.address(x), _spin.address(w), _spin.address(bias),
                                      _spin.address(out))  # fmt: skip
    v[_DC], v[_DH], v[_DWD], v[_DKH], v[_DKW], v[_DOH], v[_DOW] = c, h, wd, kh, kw, oh, ow
    v[_DNB] = 1 if bias.shape[0] > 0 else 0
    v[_DSH], v[_DSW], v[_DDH], v[_DDW], v[_DTOP], v[_DLEFT] = sh, sw, dh, dw, top, left
    v[_DHP], v[_DWP], v[_DACT], v[_DSWISH] = hp, wp, act, swish
    v[_DGROUPS] = (c + lanes - 1) // lanes
    v[_DPIECES] = max(1, min(pieces, v[_DGROUPS]))
    v[_DN] = n
    _spin.team_run(team, fn, v, v[_DPIECES] * n)


# depthwise_nchw over the team: a piece is a run of whole planes (the planes' sums do not
# depend on which thread computes them), then float32 Sigmoid / Swish over them. Arguments:
(_PX, _PW, _PB, _PO, _PN, _PC, _PH, _PWD, _PKH, _PKW, _PM, _POH, _POW, _PNB, _PSH, _PSW, _PDH,
 _PDW, _PTOP, _PLEFT, _PHP, _PWP, _PACT, _PSWISH, _PPIECES) = range(25)  # fmt: skip
_PNARGS = 25


@_jit
def _planes_piece(v, p, like):  # pragma: no cover - compiled
    """Piece p of the team's depthwise_nchw, on the operands at v's addresses (elements of
    like's type); the output planes [total, oh·ow] and the piece's [lo, hi)."""
    n, c, m, oh, ow = v[_PN], v[_PC], v[_PM], v[_POH], v[_POW]
    total = n * c * m
    out = _spin.array_at(v[_PO], total * oh * ow, like)
    lo = total * p // v[_PPIECES]
    hi = total * (p + 1) // v[_PPIECES]
    if hi > lo:
        x = _spin.array_at(v[_PX], n * c * v[_PH] * v[_PWD], like)
        w = _spin.array_at(v[_PW], v[_PKH] * v[_PKW] * c * m, like)
        depthwise_nchw(x.reshape((n, c, v[_PH], v[_PWD])), w.reshape((v[_PKH], v[_PKW], c, m)),
                       _spin.array_at(v[_PB], v[_PNB], like), out.reshape((n, c * m, oh, ow)),
                       v[_PSH], v[_PSW], v[_PDH], v[_PDW], v[_PTOP], v[_PLEFT], v[_PHP],
                       v[_PWP], v[_PACT], lo, hi)  # fmt: skip
    return out.reshape((total, oh * ow)), lo, hi


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _planes32(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _PNARGS)
    planes, lo, hi = _planes_piece(v, p, np.float32(0))
    if v[_PSWISH] >= 0 and hi > lo:  # float32 Sigmoid / Swish over the piece's planes
        sigmoid32_planes(planes, planes[0, :0], v[_PSWISH] == 1, lo, hi)


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _planes64(argp, p):  # pragma: no cover - compiled
    _planes_piece(numba.carray(argp, _PNARGS), p, np.float64(0))


def planes_piece_function(dtype) -> int:
    """The address of the team's depthwise_nchw piece function for `dtype`."""
    return (_planes32 if dtype.itemsize == 4 else _planes64).address


@_jit
def depthwise_planes_team(x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, act, swish,
                          pieces, team, fn):  # fmt: skip  # pragma: no cover - compiled
    """depthwise_nchw over all planes (x, w, bias, out C-contiguous) in `pieces` runs of planes
    over the team (fn: planes_piece_function(dtype)); then, with swish 0 or 1 (float32),
    sigmoid32 over each piece's planes. The unsplit call's bits."""
    n, c, h, wd = x.shape
    kh, kw, _, m = w.shape
    _, _, oh, ow = out.shape
    v = np.empty(_PNARGS, np.int64)
    v[_PX], v[_PW], v[_PB], v[_PO] = (_spin.address(x), _spin.address(w), _spin.address(bias),
                                      _spin.address(out))  # fmt: skip
    v[_PN], v[_PC], v[_PH], v[_PWD], v[_PKH], v[_PKW], v[_PM] = n, c, h, wd, kh, kw, m
    v[_POH], v[_POW], v[_PNB] = oh, ow, bias.shape[0]
    v[_PSH], v[_PSW], v[_PDH], v[_PDW], v[_PTOP], v[_PLEFT] = sh, sw, dh, dw, top, left
    v[_PHP], v[_PWP], v[_PACT], v[_PSWISH] = hp, wp, act, swish
    v[_PPIECES] = max(1, min(pieces, n * c * m))
    _spin.team_run(team, fn, v, v[_PPIECES])


# An epilogue over planes [rows, cols] (C-contiguous) split over the team in runs of rows:
# bias_activation_planes (kind 0, `code` its activation) or float32 sigmoid32_planes (kind 1,
# `code` 1 for Swish). Arguments:
_EP, _ER, _ECOLS, _EB, _ENB, _EKIND, _ECODE, _EPIECES = range(8)
_ENARGS = 8


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _epilogue32(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _ENARGS)
    rows, cols, f32 = v[_ER], v[_ECOLS], np.float32(0)
    planes = _spin.array_at(v[_EP], rows * cols, f32).reshape((rows, cols))
    bias = _spin.array_at(v[_EB], v[_ENB], f32)
    lo, hi = rows * p // v[_EPIECES], rows * (p + 1) // v[_EPIECES]
    if hi > lo:
        if v[_EKIND] == 1:
            sigmoid32_planes(planes, bias, v[_ECODE] == 1, lo, hi)
        else:
            bias_activation_planes(planes, bias, v[_ECODE], lo, hi)


def epilogue_piece_function() -> int:
    """The address of the team's float32 planes epilogue piece function."""
    return _epilogue32.address


@_jit
def epilogue_team(planes, bias, kind, code, pieces, team, fn):  # pragma: no cover - compiled
    """The float32 epilogue (kind 0: bias_activation_planes with `code`; 1: sigmoid32_planes,
    Swish where code is 1) over planes [rows, cols] in `pieces` runs of rows over the team
    (fn: epilogue_piece_function()). The unsplit call's bits."""
    v = np.empty(_ENARGS, np.int64)
    v[_EP], v[_ER], v[_ECOLS] = _spin.address(planes), planes.shape[0], planes.shape[1]
    v[_EB], v[_ENB], v[_EKIND], v[_ECODE] = _spin.address(bias), bias.shape[0], kind, code
    v[_EPIECES] = max(1, min(pieces, planes.shape[0]))
    _spin.team_run(team, fn, v, v[_EPIECES])
