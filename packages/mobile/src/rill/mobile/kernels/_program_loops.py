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

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                  fastmath={"reassoc", "contract"})  # fmt: skip

# Fused activations (TFLite's ActivationFunctionType): 0 none, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6.
# Binary operations.
ADD, SUB, MUL, DIV, SQDIFF, MAXIMUM, MINIMUM = range(7)
# Unary operations.
(NEG, RSQRT, SQRT, EXP, ABS, SQUARE, TANH, LOGISTIC, RELU, RELU6, RELU_N1_TO_1, GELU,
 GELU_TANH, LOG) = range(14)  # fmt: skip
# Operator codes of a program row.
OP_GEMM, OP_CONV, OP_DW, OP_BINARY, OP_UNARY, OP_MEAN, OP_SOFTMAX, OP_TRANSPOSE, OP_BMM, \
    OP_POOL, OP_COPY = range(11)  # fmt: skip


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


@_jit
def gemm(m, p):  # pragma: no cover - compiled
    """y[r, :] = x[r, :] @ w + bias, then the activation; w is [K, N] (row k holds every output
    channel's weight for input k). Rows go four at a time so each weight row is loaded once for
    four outputs."""
    xo, wo, bo, yo, rows, k_, n_, act = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    x = m[xo : xo + rows * k_].reshape((rows, k_))
    w = m[wo : wo + k_ * n_].reshape((k_, n_))
    y = m[yo : yo + rows * n_].reshape((rows, n_))
    r = 0
    while r + 4 <= rows:
        y0, y1, y2, y3 = y[r], y[r + 1], y[r + 2], y[r + 3]
        if bo >= 0:
            b = m[bo : bo + n_]
            for j in range(n_):
                y0[j] = b[j]
                y1[j] = b[j]
                y2[j] = b[j]
                y3[j] = b[j]
        else:
            for j in range(n_):
                y0[j] = 0.0
                y1[j] = 0.0
                y2[j] = 0.0
                y3[j] = 0.0
        x0, x1, x2, x3 = x[r], x[r + 1], x[r + 2], x[r + 3]
        for k in range(k_):
            a0, a1, a2, a3 = x0[k], x1[k], x2[k], x3[k]
            wk = w[k]
            for j in range(n_):
                wv = wk[j]
                y0[j] += a0 * wv
                y1[j] += a1 * wv
                y2[j] += a2 * wv
                y3[j] += a3 * wv
        r += 4
    while r < rows:
        yr, xr = y[r], x[r]
        for j in range(n_):
            yr[j] = m[bo + j] if bo >= 0 else 0.0
        for k in range(k_):
            a, wk = xr[k], w[k]
            for j in range(n_):
                yr[j] += a * wk[j]
        r += 1
    _act_range(m, yo, rows * n_, act)


@_jit
def conv(m, p):  # pragma: no cover - compiled
    """A direct NHWC convolution; w is [KH, KW, CI, CO]. p: x, w, bias (-1: none), y, batch,
    H, W, CI, OH, OW, CO, KH, KW, stride h/w, dilation h/w, pad top/left, activation."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, act = p[11], p[12], p[13], p[14], p[15], p[16], p[17], \
        p[18], p[19]  # fmt: skip
    x = m[xo : xo + nb * h * w_ * ci].reshape((nb, h, w_, ci))
    w = m[wo : wo + kh * kw * ci * co].reshape((kh, kw, ci, co))
    y = m[yo : yo + nb * oh * ow * co].reshape((nb, oh, ow, co))
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                yr = y[b, oy, ox]
                for j in range(co):
                    yr[j] = m[bo + j] if bo >= 0 else 0.0
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dw
                        if ix < 0 or ix >= w_:
                            continue
                        xr = x[b, iy, ix]
                        wk = w[ky, kx]
                        for c in range(ci):
                            a, wr = xr[c], wk[c]
                            for j in range(co):
                                yr[j] += a * wr[j]
    _act_range(m, yo, nb * oh * ow * co, act)


@_jit
def depthwise(m, p):  # pragma: no cover - compiled
    """A depthwise NHWC convolution; w is [KH, KW, CO] (CO = CI · multiplier). p as conv's,
    then the multiplier before the activation."""
    xo, wo, bo, yo = p[0], p[1], p[2], p[3]
    nb, h, w_, ci, oh, ow, co = p[4], p[5], p[6], p[7], p[8], p[9], p[10]
    kh, kw, sh, sw, dh, dw, pt, pl, mult, act = p[11], p[12], p[13], p[14], p[15], p[16], \
        p[17], p[18], p[19], p[20]  # fmt: skip
    x = m[xo : xo + nb * h * w_ * ci].reshape((nb, h, w_, ci))
    w = m[wo : wo + kh * kw * co].reshape((kh, kw, co))
    y = m[yo : yo + nb * oh * ow * co].reshape((nb, oh, ow, co))
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                yr = y[b, oy, ox]
                for j in range(co):
                    yr[j] = m[bo + j] if bo >= 0 else 0.0
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dw
                        if ix < 0 or ix >= w_:
                            continue
                        xr, wk = x[b, iy, ix], w[ky, kx]
                        if mult == 1:
                            for j in range(co):
                                yr[j] += xr[j] * wk[j]
                        else:
                            for j in range(co):
                                yr[j] += xr[j // mult] * wk[j]
    _act_range(m, yo, nb * oh * ow * co, act)


@_jit
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


@_jit
def binary(m, p):  # pragma: no cover - compiled
    """y = a (op) b with numpy broadcasting over 4 dimensions (stride 0 on a broadcast one).
    p: a, b, y, op, activation, the 4 output dimensions, a's 4 strides, b's 4 strides."""
    ao, bo, yo, op, act = p[0], p[1], p[2], p[3], p[4]
    d0, d1, d2, d3 = p[5], p[6], p[7], p[8]
    sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3 = p[9], p[10], p[11], p[12], p[13], p[14], p[15], \
        p[16]  # fmt: skip
    y = yo
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                a = ao + i0 * sa0 + i1 * sa1 + i2 * sa2
                b = bo + i0 * sb0 + i1 * sb1 + i2 * sb2
                if sa3 == 1 and sb3 == 1:
                    if op == ADD:
                        for j in range(d3):
                            m[y + j] = m[a + j] + m[b + j]
                    elif op == MUL:
                        for j in range(d3):
                            m[y + j] = m[a + j] * m[b + j]
                    else:
                        for j in range(d3):
                            m[y + j] = _binary1(op, m[a + j], m[b + j])
                else:
                    for j in range(d3):
                        m[y + j] = _binary1(op, m[a + j * sa3], m[b + j * sb3])
                y += d3
    _act_range(m, yo, d0 * d1 * d2 * d3, act)


@_jit
def _gelu(v, approximate):  # pragma: no cover - compiled
    x = np.float64(v)
    if approximate:
        return np.float32(0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))))
    return np.float32(0.5 * x * (1.0 + math.erf(x * 0.7071067811865476)))


@_jit
def unary(m, p):  # pragma: no cover - compiled
    """y = f(x) elementwise. p: x, y, count, the operation."""
    xo, yo, n, op = p[0], p[1], p[2], p[3]
    for i in range(n):
        v = m[xo + i]
        if op == NEG:
            r = -v
        elif op == RSQRT:
            r = np.float32(1.0) / np.sqrt(v)
        elif op == SQRT:
            r = np.sqrt(v)
        elif op == EXP:
            r = np.exp(v)
        elif op == LOG:
            r = np.log(v)
        elif op == ABS:
            r = abs(v)
        elif op == SQUARE:
            r = v * v
        elif op == TANH:
            r = np.tanh(v)
        elif op == LOGISTIC:
            r = np.float32(1.0 / (1.0 + math.exp(-np.float64(v))))
        elif op == RELU:
            r = np.float32(0.0) if v < 0 else v
        elif op == RELU6:
            r = np.float32(0.0) if v < 0 else (np.float32(6.0) if v > 6 else v)
        elif op == RELU_N1_TO_1:
            r = np.float32(-1.0) if v < -1 else (np.float32(1.0) if v > 1 else v)
        elif op == GELU:
            r = _gelu(v, False)
        else:
            r = _gelu(v, True)
        m[yo + i] = r


@_jit
def mean(m, p):  # pragma: no cover - compiled
    """y[o, i] = mean over r of x[o, r, i]. p: x, y, outer, reduced, inner."""
    xo, yo, outer, red, inner = p[0], p[1], p[2], p[3], p[4]
    inv = np.float32(red)
    for o in range(outer):
        y = yo + o * inner
        if inner == 1:
            s = np.float32(0.0)
            x = xo + o * red
            for r in range(red):
                s += m[x + r]
            m[y] = s / inv
            continue
        for i in range(inner):
            m[y + i] = 0.0
        for r in range(red):
            x = xo + (o * red + r) * inner
            for i in range(inner):
                m[y + i] += m[x + i]
        for i in range(inner):
            m[y + i] = m[y + i] / inv


@_jit
def softmax(m, p):  # pragma: no cover - compiled
    """Softmax over the last axis, exp(beta · (x − max)) / sum. p: x, y, rows, depth, the
    offset of beta in m."""
    xo, yo, rows, depth = p[0], p[1], p[2], p[3]
    beta = m[p[4]]
    for r in range(rows):
        x, y = xo + r * depth, yo + r * depth
        top = m[x]
        for j in range(1, depth):
            v = m[x + j]
            if v > top or v != v:
                top = v
        s = np.float32(0.0)
        for j in range(depth):
            e = np.exp((m[x + j] - top) * beta)
            m[y + j] = e
            s += e
        for j in range(depth):
            m[y + j] = m[y + j] / s


@_jit
def transpose(m, p):  # pragma: no cover - compiled
    """y (contiguous, 4 dimensions) = x read with the strides of the permuted axes.
    p: x, y, the 4 output dimensions, x's stride for each."""
    xo, yo = p[0], p[1]
    d0, d1, d2, d3, s0, s1, s2, s3 = p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]
    y = yo
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                x = xo + i0 * s0 + i1 * s1 + i2 * s2
                for j in range(d3):
                    m[y + j] = m[x + j * s3]
                y += d3


@_jit
def bmm(m, p):  # pragma: no cover - compiled
    """z[b] = x[b] @ y[b] with strided operands (adjoints and broadcast batches are strides).
    p: x, y, z, batches, rows, depth, columns, x's batch/row/depth strides, y's
    batch/depth/column strides."""
    xo, yo, zo, nb, rows, depth, cols = p[0], p[1], p[2], p[3], p[4], p[5], p[6]
    xb, xr, xk, yb, yk, yc = p[7], p[8], p[9], p[10], p[11], p[12]
    for b in range(nb):
        for i in range(rows):
            z = zo + (b * rows + i) * cols
            for j in range(cols):
                m[z + j] = 0.0
            for k in range(depth):
                a = m[xo + b * xb + i * xr + k * xk]
                y = yo + b * yb + k * yk
                if yc == 1:
                    for j in range(cols):
                        m[z + j] += a * m[y + j]
                else:
                    for j in range(cols):
                        m[z + j] += a * m[y + j * yc]


@_jit
def pool(m, p):  # pragma: no cover - compiled
    """AVERAGE_POOL_2D (kind 0, over the window's cells inside the input) or MAX_POOL_2D
    (kind 1). p: x, y, batch, H, W, C, OH, OW, KH, KW, stride h/w, pad top/left, kind,
    activation."""
    xo, yo, nb, h, w_, c, oh, ow = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    kh, kw, sh, sw, pt, pl, kind, act = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    for b in range(nb):
        for oy in range(oh):
            y0 = max(0, oy * sh - pt)
            y1 = min(h, oy * sh - pt + kh)
            for ox in range(ow):
                x0 = max(0, ox * sw - pl)
                x1 = min(w_, ox * sw - pl + kw)
                y = yo + ((b * oh + oy) * ow + ox) * c
                for j in range(c):
                    m[y + j] = 0.0 if kind == 0 else -np.inf
                for iy in range(y0, y1):
                    for ix in range(x0, x1):
                        x = xo + ((b * h + iy) * w_ + ix) * c
                        if kind == 0:
                            for j in range(c):
                                m[y + j] += m[x + j]
                        else:
                            for j in range(c):
                                v = m[x + j]
                                if v > m[y + j] or v != v:
                                    m[y + j] = v
                if kind == 0:
                    cnt = np.float32(max(1, (y1 - y0) * (x1 - x0)))
                    for j in range(c):
                        m[y + j] = m[y + j] / cnt
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
        else:
            for i in range(p[2]):
                m[p[1] + i] = m[p[0] + i]
        pc += 2 + k
