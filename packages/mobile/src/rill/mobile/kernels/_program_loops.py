"""The compiled float32 kernels of a whole-subgraph program (rill.mobile.program; import that
module, not this one).

Every kernel reads and writes one flat float32 array `m` (the tensor arena followed by the
program's constants) at offsets given in its parameter row `p` (an int64 array), so one call of
`run` executes a whole subgraph: no per-operator Python, no allocation. Tensors are C-contiguous;
4-D ones are NHWC. The arithmetic is float32 with reassociation and fused multiply-adds allowed
(fast-math "reassoc" and "contract" only: NaN, inf and signed zeros keep IEEE semantics), so
results agree with the numpy path to float rounding, not bit for bit.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from rill.mobile.kernels._program_direct import direct as _direct
from rill.mobile.kernels._program_dw import _pad_input
from rill.mobile.kernels._program_dw import depthwise_raw as _depthwise_raw
from rill.mobile.kernels._program_gemm import gemm2d as _gemm2d
from rill.mobile.kernels._program_math import exp as _exp
from rill.mobile.kernels._program_math import gelu_erf as _gelu_erf

# _nrt=False: no reference counting of the array views the kernels make (the arrays belong to
# the caller for the whole call and nothing here allocates): a view costs two atomic updates
# otherwise, about 100 ns a program row, more than the arithmetic of a small operator.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                  fastmath={"reassoc", "contract"}, _nrt=False)  # fmt: skip

# Fused activations (TFLite's ActivationFunctionType): 0 none, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6.
# Binary operations.
ADD, SUB, MUL, DIV, SQDIFF, MAXIMUM, MINIMUM = range(7)
# Unary operations.
(NEG, RSQRT, SQRT, EXP, ABS, SQUARE, TANH, LOGISTIC, RELU, RELU6, _UNUSED, GELU,
 GELU_TANH, LOG) = range(14)  # fmt: skip
# Operator codes of a program row.
OP_GEMM, OP_CONV, OP_DW, OP_BINARY, OP_UNARY, OP_MEAN, OP_SOFTMAX, OP_TRANSPOSE, OP_BMM, \
    OP_POOL, OP_COPY, OP_CONV_TAPS = range(12)  # fmt: skip


@_jit
def _act_range(m, o, n, act):  # pragma: no cover - compiled
    if act == 0:
        return
    lo, hi = np.float32(0.0), np.float32(np.inf)
    if act == 2:
        lo, hi = np.float32(-1.0), np.float32(1.0)
    elif act == 3:
        hi = np.float32(6.0)
    y = m[o : o + n]
    for i in range(n):
        v = y[i]
        if v < lo:
            v = lo
        if v > hi:
            v = hi
        y[i] = v


# Views are made once per kernel: a view made inside a loop costs two atomic reference-count
# updates, more than the arithmetic of a small row. Indices are loop counters from 0 (or
# unsigned), so LLVM drops numba's negative-index wrap-around and vectorises.


@_jit
def gemm(m, p):  # pragma: no cover - compiled
    """y[r, :] = x[r, :] @ w + bias, then the activation; w is [K, N] (row k holds every output
    channel's weight for input k). p: x, w, bias (-1: none), y, rows, K, N, activation."""
    xo, wo, bo, yo, rows, k_, n_, act = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    x = m[xo : xo + rows * k_].reshape((rows, k_))
    w = m[wo : wo + k_ * n_].reshape((k_, n_))
    y = m[yo : yo + rows * n_].reshape((rows, n_))
    b = m[bo : bo + n_] if bo >= 0 else m[0:n_]
    _gemm2d(x, w, b, bo >= 0, y, act)


@_jit
def conv(m, p):  # pragma: no cover - compiled
    """An NHWC convolution as a product: each output cell's receptive field is gathered into a
    row of the scratch area (zeros for padding), then rows @ w; w is [KH·KW·CI, CO].
    p: x, w, bias (-1: none), y, batch, H, W, CI, OH, OW, CO, KH, KW, stride h/w,
    dilation h/w, pad top/left, activation, scratch."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, act, so = p[11], p[12], p[13], p[14], p[15], p[16], \
        p[17], p[18], p[19], p[20]  # fmt: skip
    depth = kh * kw * ci
    rows = nb * oh * ow
    u = np.uint64
    cols = m[so : so + rows * depth]
    span = kw * ci  # one window row: contiguous in the input when no column is padding
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                r = u(((b * oh + oy) * ow + ox) * depth)
                ix0 = ox * sw - pl
                inside = ix0 >= 0 and ix0 + (kw - 1) * dw < w_ and dw == 1
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    q = r + u(ky * span)
                    if iy < 0 or iy >= h:
                        for c in range(u(span)):
                            cols[q + c] = 0.0
                    elif inside:
                        src = u(xo + ((b * h + iy) * w_ + ix0) * ci)
                        for c in range(u(span)):
                            cols[q + c] = m[src + c]
                    else:
                        for kx in range(kw):
                            ix = ix0 + kx * dw
                            at = q + u(kx * ci)
                            if ix < 0 or ix >= w_:
                                for c in range(u(ci)):
                                    cols[at + c] = 0.0
                            else:
                                src = u(xo + ((b * h + iy) * w_ + ix) * ci)
                                for c in range(u(ci)):
                                    cols[at + c] = m[src + c]
    w = m[wo : wo + depth * co].reshape((depth, co))
    y = m[yo : yo + rows * co].reshape((rows, co))
    bias = m[bo : bo + co] if bo >= 0 else m[0:co]
    _gemm2d(m[so : so + rows * depth].reshape((rows, depth)), w, bias, bo >= 0, y, act)


@_jit
def _taps_range(o_n, s, pad, k_off, n):  # pragma: no cover - compiled
    """The outputs o in [lo, hi) whose input o·s − pad + k_off lies in [0, n)."""
    lo = pad - k_off
    lo = 0 if lo <= 0 else (lo + s - 1) // s
    hi = n - 1 + pad - k_off
    hi = 0 if hi < 0 else min(o_n, hi // s + 1)
    return lo, hi


@_jit
def _conv_by_taps(m, p):  # pragma: no cover - compiled
    """An NHWC convolution with few input channels and a multiple of 8 output channels, tap by
    tap, without gathering windows or copying the input (`conv_taps` runs those with an odd
    number of 8-channel blocks here: with 8 channels a direct tile holds too few sums): y starts from the bias; for each tap (ky, kx, c) every
    output whose input lies inside (a rectangle, found once per tap) takes x · w[tap, :] in
    blocks of 16 or 8 channels (constant-length loops LLVM turns into one SIMD multiply-add).
    Each output's updates are independent, so they run at the machine's throughput, not at its
    multiply-add latency. Sums run in the gathered product's order (bias, then the taps).
    p: as `conv`'s, without the scratch."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, act = p[11], p[12], p[13], p[14], p[15], p[16], p[17], \
        p[18], p[19]  # fmt: skip
    rows = nb * oh * ow
    x = m[xo : xo + nb * h * w_ * ci]
    w = m[wo : wo + kh * kw * ci * co]
    y = m[yo : yo + rows * co]
    for r in range(rows):
        for j in range(co):
            y[r * co + j] = m[bo + j] if bo >= 0 else np.float32(0.0)
    u = np.uint64
    wide = co % 16 == 0
    for b in range(nb):
        for ky in range(kh):
            oy0, oy1 = _taps_range(oh, sh, pt, ky * dh, h)
            for kx in range(kw):
                ox0, ox1 = _taps_range(ow, sw, pl, kx * dw, w_)
                for c in range(ci):
                    wr = u(((ky * kw + kx) * ci + c) * co)
                    if wide:
                        for j0 in range(u(0), u(co), u(16)):
                            w0 = w[wr + j0 + u(0)]
                            w1 = w[wr + j0 + u(1)]
                            w2 = w[wr + j0 + u(2)]
                            w3 = w[wr + j0 + u(3)]
                            w4 = w[wr + j0 + u(4)]
                            w5 = w[wr + j0 + u(5)]
                            w6 = w[wr + j0 + u(6)]
                            w7 = w[wr + j0 + u(7)]
                            w8 = w[wr + j0 + u(8)]
                            w9 = w[wr + j0 + u(9)]
                            w10 = w[wr + j0 + u(10)]
                            w11 = w[wr + j0 + u(11)]
                            w12 = w[wr + j0 + u(12)]
                            w13 = w[wr + j0 + u(13)]
                            w14 = w[wr + j0 + u(14)]
                            w15 = w[wr + j0 + u(15)]
                            for ox in range(ox0, ox1):
                                xr = ((b * h - pt + ky * dh) * w_ + ox * sw - pl + kx * dw) * ci + c
                                yr = (b * oh * ow + ox) * co
                                for oy in range(oy0, oy1):
                                    v = x[u(xr + oy * sh * w_ * ci)]
                                    q = u(yr + oy * ow * co) + j0
                                    y[q + u(0)] += v * w0
                                    y[q + u(1)] += v * w1
                                    y[q + u(2)] += v * w2
                                    y[q + u(3)] += v * w3
                                    y[q + u(4)] += v * w4
                                    y[q + u(5)] += v * w5
                                    y[q + u(6)] += v * w6
                                    y[q + u(7)] += v * w7
                                    y[q + u(8)] += v * w8
                                    y[q + u(9)] += v * w9
                                    y[q + u(10)] += v * w10
                                    y[q + u(11)] += v * w11
                                    y[q + u(12)] += v * w12
                                    y[q + u(13)] += v * w13
                                    y[q + u(14)] += v * w14
                                    y[q + u(15)] += v * w15
                    else:
                        for j0 in range(u(0), u(co), u(8)):
                            w0 = w[wr + j0 + u(0)]
                            w1 = w[wr + j0 + u(1)]
                            w2 = w[wr + j0 + u(2)]
                            w3 = w[wr + j0 + u(3)]
                            w4 = w[wr + j0 + u(4)]
                            w5 = w[wr + j0 + u(5)]
                            w6 = w[wr + j0 + u(6)]
                            w7 = w[wr + j0 + u(7)]
                            for ox in range(ox0, ox1):
                                xr = ((b * h - pt + ky * dh) * w_ + ox * sw - pl + kx * dw) * ci + c
                                yr = (b * oh * ow + ox) * co
                                for oy in range(oy0, oy1):
                                    v = x[u(xr + oy * sh * w_ * ci)]
                                    q = u(yr + oy * ow * co) + j0
                                    y[q + u(0)] += v * w0
                                    y[q + u(1)] += v * w1
                                    y[q + u(2)] += v * w2
                                    y[q + u(3)] += v * w3
                                    y[q + u(4)] += v * w4
                                    y[q + u(5)] += v * w5
                                    y[q + u(6)] += v * w6
                                    y[q + u(7)] += v * w7
    _act_range(m, yo, rows * co, act)


@_jit
def conv_taps(m, p):  # pragma: no cover - compiled
    """An NHWC convolution with few input channels (rill.mobile.program.TAPS_MAX_CI), directly
    (kernels._program_direct: register tiles of 4 output pixels x 16 or 8 output channels,
    each tap's input value times a run of weights), after copying the input, padded, to the
    scratch area when a window reaches outside it; with 1-2 input channels and 8, 24, 40...
    output channels tap by tap instead (`_conv_by_taps`; the small CNN's 28x28x1 -> 8 stem:
    ~4.1 us there, ~5.6 in 4x8 tiles). p: as `conv`'s (the scratch: -1 for none)."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, act = p[11], p[12], p[13], p[14], p[15], p[16], p[17], \
        p[18], p[19]  # fmt: skip
    if co % 16 == 8 and ci <= 2:
        _conv_by_taps(m, p)
        return
    if p[20] >= 0:
        hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
        _pad_input(m, xo, p[20], nb, h, w_, ci, hp, wp, pt, pl)
        xo, h, w_ = p[20], hp, wp
    _direct(m, xo, wo, bo, yo, nb, h, w_, ci, oh, ow, co, kh, kw, kw, sh, sw, dh, dw, 0, 0,
            (0, oh, 0, ow), act, False)  # fmt: skip


@_jit
def depthwise(m, p):  # pragma: no cover - compiled
    """DEPTHWISE_CONV_2D (kernels._program_dw.depthwise_raw), then its fused activation.
    p: see depthwise_raw."""
    if not _depthwise_raw(m, p):  # else it applied the activation
        _act_range(m, p[3], p[4] * p[8] * p[9] * p[10], p[20])


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _binary1(op, a, b):  # pragma: no cover - compiled
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if op == DIV:
        return a / b
    if op == SQDIFF:
        d = a - b
        return d * d
    if op == MAXIMUM:
        return a if (a >= b or a != a) else b
    return a if (a <= b or a != a) else b


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _binary_rows(m, p, op):  # pragma: no cover - compiled
    """`binary`'s loops for one operation: inlined (numba IR) with op a constant, so each
    inner loop holds one arithmetic operation and vectorises, a broadcast operand (stride 0
    on the last axis: layer norm's mean and scale) included."""
    u = np.uint64
    ao, bo, yo = u(p[0]), u(p[1]), u(p[2])
    d0, d1, d2, d3 = u(p[5]), u(p[6]), u(p[7]), u(p[8])
    sa0, sa1, sa2, sa3 = u(p[9]), u(p[10]), u(p[11]), u(p[12])
    sb0, sb1, sb2, sb3 = u(p[13]), u(p[14]), u(p[15]), u(p[16])
    y = yo
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                a = ao + i0 * sa0 + i1 * sa1 + i2 * sa2
                b = bo + i0 * sb0 + i1 * sb1 + i2 * sb2
                if sa3 == 1 and sb3 == 1:
                    for j in range(d3):
                        m[y + j] = _binary1(op, m[a + j], m[b + j])
                elif sa3 == 1 and sb3 == 0:
                    bs = m[b]
                    for j in range(d3):
                        m[y + j] = _binary1(op, m[a + j], bs)
                elif sa3 == 0 and sb3 == 1:
                    as_ = m[a]
                    for j in range(d3):
                        m[y + j] = _binary1(op, as_, m[b + j])
                else:
                    for j in range(d3):
                        m[y + j] = _binary1(op, m[a + j * sa3], m[b + j * sb3])
                y += d3


@_jit
def binary(m, p):  # pragma: no cover - compiled
    """y = a (op) b with numpy broadcasting over 4 dimensions (stride 0 on a broadcast one).
    p: a, b, y, op, activation, the 4 output dimensions, a's 4 strides, b's 4 strides."""
    op = p[3]
    if op == ADD:
        _binary_rows(m, p, ADD)
    elif op == SUB:
        _binary_rows(m, p, SUB)
    elif op == MUL:
        _binary_rows(m, p, MUL)
    elif op == DIV:
        _binary_rows(m, p, DIV)
    elif op == SQDIFF:
        _binary_rows(m, p, SQDIFF)
    elif op == MAXIMUM:
        _binary_rows(m, p, MAXIMUM)
    else:
        _binary_rows(m, p, MINIMUM)
    _act_range(m, p[2], p[5] * p[6] * p[7] * p[8], p[4])


@_jit
def unary(m, p):  # pragma: no cover - compiled
    """y = f(x) elementwise. p: x, y, count, the operation. The operations whose loops call no
    libm function (exp, logistic, GELU and the simple ones) run as loops of their own, which
    LLVM vectorises."""
    xo, yo, n, op = p[0], p[1], p[2], p[3]
    x, y = m[xo : xo + n], m[yo : yo + n]
    if op == EXP:
        for i in range(n):
            y[i] = np.float32(_exp(np.float64(x[i])))
        return
    if op == LOGISTIC:
        for i in range(n):
            y[i] = np.float32(1.0 / (1.0 + _exp(-np.float64(x[i]))))
        return
    if op == GELU:
        for i in range(n):
            y[i] = np.float32(_gelu_erf(np.float64(x[i])))
        return
    for i in range(n):
        v = x[i]
        if op == NEG:
            r = -v
        elif op == RSQRT:
            r = np.float32(1.0) / np.sqrt(v)
        elif op == SQRT:
            r = np.sqrt(v)
        elif op == LOG:
            r = np.log(v)
        elif op == ABS:
            r = abs(v)
        elif op == SQUARE:
            r = v * v
        elif op == TANH:
            r = np.tanh(v)
        elif op == RELU:
            r = np.float32(0.0) if v < 0 else v
        elif op == RELU6:
            r = np.float32(0.0) if v < 0 else (np.float32(6.0) if v > 6 else v)
        else:  # GELU_TANH
            w = np.float64(v)
            th = math.tanh(0.7978845608028654 * (w + 0.044715 * w * w * w))
            r = np.float32(0.5 * w * (1.0 + th))
        y[i] = r


@_jit
def mean(m, p):  # pragma: no cover - compiled
    """y[o, i] = mean over r of x[o, r, i]. p: x, y, outer, reduced, inner."""
    xo, yo, outer, red, inner = p[0], p[1], p[2], p[3], p[4]
    inv = np.float32(red)
    x = m[xo : xo + outer * red * inner].reshape((outer * red, inner))
    y = m[yo : yo + outer * inner].reshape((outer, inner))
    for o in range(outer):
        if inner == 1:
            s = np.float32(0.0)
            for r in range(red):
                s += x[o * red + r, 0]
            y[o, 0] = s / inv
            continue
        for i in range(inner):
            y[o, i] = 0.0
        for r in range(red):
            q = o * red + r
            for i in range(inner):
                y[o, i] += x[q, i]
        for i in range(inner):
            y[o, i] = y[o, i] / inv


@_jit
def softmax(m, p):  # pragma: no cover - compiled
    """Softmax over the last axis, exp(beta · (x − max)) / sum. p: x, y, rows, depth, the
    offset of beta in m. Three passes: (x − max) · beta row by row into y, exp over all of y
    in one loop (short rows — attention's 16 — vectorise badly one by one), then each row's
    sum and division."""
    xo, yo, rows, depth = p[0], p[1], p[2], p[3]
    beta = m[p[4]]
    x = m[xo : xo + rows * depth].reshape((rows, depth))
    y = m[yo : yo + rows * depth].reshape((rows, depth))
    for r in range(rows):
        top = x[r, 0]
        nan = False
        for j in range(depth):  # a select reduction (vectorises) and a NaN flag apart
            v = x[r, j]
            top = v if v > top else top
            nan |= v != v
        if nan:
            top = np.float32(np.nan)
        for j in range(depth):
            y[r, j] = (x[r, j] - top) * beta
    f = m[yo : yo + rows * depth]
    for i in range(rows * depth):
        f[i] = np.float32(_exp(np.float64(f[i])))
    for r in range(rows):
        s = np.float32(0.0)
        for j in range(depth):
            s += y[r, j]
        for j in range(depth):
            y[r, j] = y[r, j] / s


@_jit
def transpose(m, p):  # pragma: no cover - compiled
    """y (contiguous, 4 dimensions) = x read with the strides of the permuted axes.
    p: x, y, the 4 output dimensions, x's stride for each."""
    u = np.uint64
    xo, y = u(p[0]), u(p[1])
    d0, d1, d2, d3, s0, s1, s2, s3 = u(p[2]), u(p[3]), u(p[4]), u(p[5]), u(p[6]), u(p[7]), \
        u(p[8]), u(p[9])  # fmt: skip
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                x = xo + i0 * s0 + i1 * s1 + i2 * s2
                for j in range(d3):
                    m[y + j] = m[x + j * s3]
                y += d3


@_jit
def bmm(m, p):  # pragma: no cover - compiled
    """z[b] = x[b]' @ y[b]' (' : transposed where adj_x / adj_y), a batch of 1 broadcast.
    p: x, y, z, x's batches/rows/columns as stored, y's likewise, adj_x, adj_y, batches,
    rows, depth, columns."""
    xo, yo, zo, xn, xa, xc, yn, ya, yc = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
    adj_x, adj_y, nb, rows, depth, cols = p[9], p[10], p[11], p[12], p[13], p[14]
    x = m[xo : xo + xn * xa * xc].reshape((xn, xa, xc))
    y = m[yo : yo + yn * ya * yc].reshape((yn, ya, yc))
    z = m[zo : zo + nb * rows * cols].reshape((nb, rows, cols))
    for b in range(nb):
        bx = 0 if xn == 1 else b
        by = 0 if yn == 1 else b
        if not adj_x and not adj_y:
            _gemm2d(x[bx], y[by], m[0:cols], False, z[b], 0)
            continue
        for i in range(rows):
            if adj_y:
                for j in range(cols):
                    s = np.float32(0.0)
                    if adj_x:
                        for k in range(depth):
                            s += x[bx, k, i] * y[by, j, k]
                    else:
                        for k in range(depth):
                            s += x[bx, i, k] * y[by, j, k]
                    z[b, i, j] = s
            else:
                for j in range(cols):
                    z[b, i, j] = 0.0
                for k in range(depth):
                    a = x[bx, k, i] if adj_x else x[bx, i, k]
                    for j in range(cols):
                        z[b, i, j] += a * y[by, k, j]


@_jit
def pool(m, p):  # pragma: no cover - compiled
    """AVERAGE_POOL_2D (kind 0, over the window's cells inside the input) or MAX_POOL_2D
    (kind 1). p: x, y, batch, H, W, C, OH, OW, KH, KW, stride h/w, pad top/left, kind,
    activation."""
    xo, yo, nb, h, w_, c, oh, ow = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    kh, kw, sh, sw, pt, pl, kind, act = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    x = m[xo : xo + nb * h * w_ * c].reshape((nb * h * w_, c))
    y = m[yo : yo + nb * oh * ow * c].reshape((nb * oh * ow, c))
    for b in range(nb):
        for oy in range(oh):
            y0 = max(0, oy * sh - pt)
            y1 = min(h, oy * sh - pt + kh)
            for ox in range(ow):
                x0 = max(0, ox * sw - pl)
                x1 = min(w_, ox * sw - pl + kw)
                r = (b * oh + oy) * ow + ox
                for j in range(c):
                    y[r, j] = 0.0 if kind == 0 else -np.inf
                for iy in range(y0, y1):
                    for ix in range(x0, x1):
                        q = (b * h + iy) * w_ + ix
                        if kind == 0:
                            for j in range(c):
                                y[r, j] += x[q, j]
                        else:
                            for j in range(c):
                                v = x[q, j]
                                if v > y[r, j] or v != v:
                                    y[r, j] = v
                if kind == 0:
                    cnt = np.float32(max(1, (y1 - y0) * (x1 - x0)))
                    for j in range(c):
                        y[r, j] = y[r, j] / cnt
    _act_range(m, yo, nb * oh * ow * c, act)


@_jit
def run(prog, m):  # pragma: no cover - compiled
    """Runs a program: rows of (operator code, parameter count, parameters...)."""
    pc, n = 0, prog.shape[0]
    while pc < n:
        code, k = prog[pc], prog[pc + 1]
        p = prog[pc + 2 : pc + 2 + k]
        if code == OP_GEMM:
            gemm(m, p)
        elif code == OP_CONV:
            conv(m, p)
        elif code == OP_DW:
            depthwise(m, p)
        elif code == OP_BINARY:
            binary(m, p)
        elif code == OP_UNARY:
            unary(m, p)
        elif code == OP_MEAN:
            mean(m, p)
        elif code == OP_SOFTMAX:
            softmax(m, p)
        elif code == OP_TRANSPOSE:
            transpose(m, p)
        elif code == OP_BMM:
            bmm(m, p)
        elif code == OP_POOL:
            pool(m, p)
        elif code == OP_CONV_TAPS:
            conv_taps(m, p)
        else:
            for i in range(p[2]):
                m[p[1] + i] = m[p[0] + i]
        pc += 2 + k


def compile_run() -> None:
    """Compiles `run` (or loads it from numba's cache) with LLVM's SLP vectoriser on: numba
    leaves it off by default (numba#8705, a miscompilation), but the register tiles of
    `_program_gemm` need it to become SIMD code (about 4x on 8-channel layers, 1.3x on
    MobileNetV2). The setting is numba's global one, so it is changed only under numba's
    compiler lock, for this compile, and put back; tests/mobile/test_program.py checks every
    kernel against the numpy path."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        old = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = 1
        try:
            run(np.zeros(0, np.int64), np.zeros(1, np.float32))
        finally:
            config.SLP_VECTORIZE = old
