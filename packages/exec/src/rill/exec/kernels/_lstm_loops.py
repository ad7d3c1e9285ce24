"""The compiled LSTM cell passes behind rill.exec.kernels.rnn_kernels (import that module).

Each loop does the same operations in the same order as the kernel's numpy path, so the two give
bit-identical results: float32 arithmetic throughout, the gate nonlinearities included, as
TensorFlow computes them. The sigmoid and tanh go through one exp written out on both paths
(`exp_parts`: Cody-Waite reduction and a Taylor polynomial, nothing but +, *, /, floor and exact
powers of two; libm's exp and numpy's vectorized one differ in the last bit, this one is the same
code on both paths). No fast-math, no fused multiply-add.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels._lstm_consts import (
    EXP_HI,
    EXP_LO,
    HALF,
    LN2_HI,
    LN2_LO,
    LOG2E,
    ONE,
    P1,
    P2,
    P3,
    P4,
    P5,
    P6,
    TWO,
    ZERO,
)

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def exp_parts(x, m, s, bits):  # pragma: no cover - compiled
    """For float32 rows x: m and s with exp(x) = s·m + s and exp(x) - 1 = s·m + (s - 1), where
    s = 2^k is built from its exponent bits (`bits`, int32 scratch of x's length: exact, as the
    power of two is). A NaN's m is the NaN itself (s is 1)."""
    n = x.shape[0]
    for j in range(n):
        v = x[j]
        v = v if v == v else ZERO
        v = min(max(v, EXP_LO), EXP_HI)
        k = np.floor(v * LOG2E + HALF)
        r = (v - k * LN2_HI) - k * LN2_LO
        p = P6
        p = p * r + P5
        p = p * r + P4
        p = p * r + P3
        p = p * r + P2
        p = p * r + P1
        p = p * r + ONE
        m[j] = r * p
        bits[j] = (np.int32(k) + np.int32(127)) << np.int32(23)
    scale = bits.view(np.float32)
    for j in range(n):
        v = x[j]
        nan = v != v
        m[j] = v if nan else m[j]
        s[j] = ONE if nan else scale[j]


@_jit
def cell_forward(gates, has_xw, xw, b, cs_prev, wci, wcf, wco, forget_bias, cell_clip, peephole,
                 i, cs, f, o, ci, co, h, lo, hi):  # fmt: skip  # pragma: no cover - compiled
    """The gate nonlinearities and state update of one LSTM step, over rows [lo, hi); `gates`
    holds the four gates' products side by side, [batch, 4n]; with has_xw, the input's products
    xw (the same layout) are added to them first (in place, as the numpy path's `gates += xw`).

    Row by row in stages over the units: the pre-activations, the exps (exp_parts), then the
    gates and the new state, all in float32: sigmoid(v) = 1 / (1 + exp(-v)) (0 where -v is
    past EXP_HI), tanh(v) = the sign of v times e / (e + 2) with e = exp(2|v|) - 1 (no
    cancellation for small v). Each
    stage is a short loop over one row's views that reads and writes few arrays, so that the
    compiler vectorizes every one of them (with many arrays in one loop it cannot rule out
    their overlap and leaves the loop scalar)."""
    n = cs_prev.shape[1]
    arg = np.empty(3 * n, np.float32)
    em = np.empty(3 * n, np.float32)
    es = np.empty(3 * n, np.float32)
    bits = np.empty(3 * n, np.int32)
    arg2 = np.empty(2 * n, np.float32)
    em2 = np.empty(2 * n, np.float32)
    es2 = np.empty(2 * n, np.float32)
    bits2 = np.empty(2 * n, np.int32)
    bi, bc, bf, bo = b[:n], b[n : 2 * n], b[2 * n : 3 * n], b[3 * n :]
    for r in range(lo, hi):
        g = gates[r]
        if has_xw:
            xr = xw[r]
            for j in range(4 * n):
                g[j] = g[j] + xr[j]
        gi, gc, gf, go = g[:n], g[n : 2 * n], g[2 * n : 3 * n], g[3 * n :]
        cp = cs_prev[r]
        ir, cir, fr, csr, orow, cor, hr = i[r], ci[r], f[r], cs[r], o[r], co[r], h[r]
        if peephole:
            for j in range(n):
                arg[j] = -((gi[j] + bi[j]) + cp[j] * wci[j])  # sigmoid: exp(-v)
            for j in range(n):
                arg[2 * n + j] = -(((gf[j] + bf[j]) + forget_bias) + cp[j] * wcf[j])
        else:
            for j in range(n):
                arg[j] = -(gi[j] + bi[j])
            for j in range(n):
                arg[2 * n + j] = -((gf[j] + bf[j]) + forget_bias)
        for j in range(n):
            pc = gc[j] + bc[j]
            arg[n + j] = TWO * abs(pc)  # tanh: exp(2|v|) - 1
        exp_parts(arg, em, es, bits)
        for j in range(n):
            v = ONE / (ONE + (es[j] * em[j] + es[j]))
            ir[j] = ZERO if arg[j] > EXP_HI else v
        for j in range(n):
            v = ONE / (ONE + (es[2 * n + j] * em[2 * n + j] + es[2 * n + j]))
            fr[j] = ZERO if arg[2 * n + j] > EXP_HI else v
        for j in range(n):
            pc = gc[j] + bc[j]
            e = es[n + j] * em[n + j] + (es[n + j] - ONE)
            cir[j] = np.copysign(e / (e + TWO), pc)
        for j in range(n):
            csr[j] = cir[j] * ir[j] + cp[j] * fr[j]
        if cell_clip > 0:
            for j in range(n):
                csr[j] = min(max(csr[j], -cell_clip), cell_clip)
        if peephole:
            for j in range(n):
                arg2[j] = -((go[j] + bo[j]) + csr[j] * wco[j])
        else:
            for j in range(n):
                arg2[j] = -(go[j] + bo[j])
        for j in range(n):
            arg2[n + j] = TWO * abs(csr[j])
        exp_parts(arg2, em2, es2, bits2)
        for j in range(n):
            v = ONE / (ONE + (es2[j] * em2[j] + es2[j]))
            orow[j] = ZERO if arg2[j] > EXP_HI else v
        for j in range(n):
            e = es2[n + j] * em2[n + j] + (es2[n + j] - ONE)
            cor[j] = np.copysign(e / (e + TWO), csr[j])
        for j in range(n):
            hr[j] = cor[j] * orow[j]


@_jit
def cell_backward(cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad, one, peephole,
                  cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad):  # fmt: skip  # pragma: no cover
    """LSTMBlockCellGrad's elementwise pass; the peephole sums run over rows in order.

    Row by row in stages over the units, each a short loop over a few of the row's views (as
    cell_forward's): the compiler vectorizes them, where one loop over all the arrays stayed
    scalar (0.22 -> 0.08 ms for 64 x 512). The operations and their order are the numpy path's."""
    batch, n = cs_prev.shape
    dcs = np.empty(n, cs_prev.dtype)
    for r in range(batch):
        d = dicfo[r]
        d_i, d_ci, d_f, d_o = d[:n], d[n : 2 * n], d[2 * n : 3 * n], d[3 * n :]
        orow, corow, irow, frow, cirow = o[r], co[r], i[r], f[r], ci[r]
        hg, csg, c0, g = h_grad[r], cs_grad[r], cs_prev[r], cs_prev_grad[r]
        for j in range(n):
            d_o[j] = orow[j] * (one - orow[j]) * hg[j] * corow[j]
        for j in range(n):
            dcs[j] = (one - corow[j] * corow[j]) * hg[j] * orow[j] + csg[j]
        if peephole:
            for j in range(n):
                dcs[j] = dcs[j] + d_o[j] * wco[j]
        for j in range(n):
            d_ci[j] = (one - cirow[j] * cirow[j]) * dcs[j] * irow[j]
        for j in range(n):
            d_f[j] = frow[j] * (one - frow[j]) * dcs[j] * c0[j]
        for j in range(n):
            d_i[j] = irow[j] * (one - irow[j]) * dcs[j] * cirow[j]
        for j in range(n):
            g[j] = dcs[j] * frow[j]
        if peephole:
            for j in range(n):
                g[j] = g[j] + d_i[j] * wci[j] + d_f[j] * wcf[j]
            csr = cs[r]
            if r == 0:
                for j in range(n):
                    wci_grad[j] = d_i[j] * c0[j]
                for j in range(n):
                    wcf_grad[j] = d_f[j] * c0[j]
                for j in range(n):
                    wco_grad[j] = d_o[j] * csr[j]
            else:
                for j in range(n):
                    wci_grad[j] += d_i[j] * c0[j]
                for j in range(n):
                    wcf_grad[j] += d_f[j] * c0[j]
                for j in range(n):
                    wco_grad[j] += d_o[j] * csr[j]
