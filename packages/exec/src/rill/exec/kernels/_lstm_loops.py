"""The compiled LSTM cell passes behind rill.exec.kernels.rnn_kernels (import that module).

Each loop does the same operations in the same order as the kernel's numpy path, so the two give
bit-identical results: storage-type (float32) arithmetic where the numpy path has it, and the
gate nonlinearities in float64 through the same exp (`exp64`: Cody-Waite reduction and a Taylor
polynomial, nothing but +, *, floor and exact powers of two) — libm's exp and numpy's vectorized
one differ in the last bit, this one is the same code on both paths. No fast-math, no fused
multiply-add.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238
LN2_LO = 1.9082149292705877e-10


@_jit
def exp64(x):  # pragma: no cover - compiled
    if x != x:
        return x
    x = min(max(x, -700.0), 700.0)
    k = np.floor(x * LOG2E + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * 2.0**k


@_jit
def sigmoid64(x):  # pragma: no cover - compiled
    return 1.0 / (1.0 + exp64(-x))


@_jit
def tanh64(x):  # pragma: no cover - compiled
    if x != x:
        return x
    a = abs(x)
    if a < 1e-4:
        return x
    t = 1.0 - 2.0 / (exp64(min(2.0 * a, 700.0)) + 1.0)
    return t if x >= 0 else -t


@_jit
def exp64_rows(x, out, bits):  # pragma: no cover - compiled
    """out[j] = exp64(x[j]) for float64 rows, in loops the compiler vectorizes: the same
    operations as exp64, with 2**k built from its exponent bits (`bits`, int64 scratch of x's
    length) — exact, as the power of two is — and NaN passed through by a select."""
    n = x.shape[0]
    scale = bits.view(np.float64)
    for j in range(n):
        v = x[j]
        v = v if v == v else 0.0  # a NaN's result is the NaN itself (below)
        v = min(max(v, -700.0), 700.0)
        k = np.floor(v * LOG2E + 0.5)
        r = (v - k * LN2_HI) - k * LN2_LO
        p = 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        out[j] = p
        bits[j] = (np.int64(k) + 1023) << 52
    for j in range(n):
        v = x[j]
        e = out[j] * scale[j]
        out[j] = v if v != v else e


@_jit
def cell_forward(gates, has_xw, xw, b, cs_prev, wci, wcf, wco, forget_bias, cell_clip, peephole,
                 i, cs, f, o, ci, co, h, lo, hi):  # fmt: skip  # pragma: no cover - compiled
    """The gate nonlinearities and state update of one LSTM step, over rows [lo, hi); `gates`
    holds the four gates' products, [4, batch, n]; with has_xw, the input's products xw
    ([batch, 4n]) are added to them first (in place, as the numpy path's `gates += xw`).

    Row by row in stages over the units: the pre-activations (storage-type arithmetic), the
    exps in float64 (exp64_rows), then the gates and the new state; the operations and their
    order are exp64/sigmoid64/tanh64's. Each stage is a short loop over one row's views that
    reads and writes few arrays, so that the compiler vectorizes every one of them (with many
    arrays in one loop it cannot rule out their overlap and leaves the loop scalar)."""
    n = cs_prev.shape[1]
    arg = np.empty(3 * n, np.float64)
    ex = np.empty(3 * n, np.float64)
    bits = np.empty(3 * n, np.int64)
    arg2 = np.empty(2 * n, np.float64)
    ex2 = np.empty(2 * n, np.float64)
    bits2 = np.empty(2 * n, np.int64)
    bi, bc, bf, bo = b[:n], b[n : 2 * n], b[2 * n : 3 * n], b[3 * n :]
    for r in range(lo, hi):
        gi, gc, gf, go = gates[0, r], gates[1, r], gates[2, r], gates[3, r]
        if has_xw:
            xr = xw[r]
            for j in range(n):
                gi[j] = gi[j] + xr[j]
            for j in range(n):
                gc[j] = gc[j] + xr[n + j]
            for j in range(n):
                gf[j] = gf[j] + xr[2 * n + j]
            for j in range(n):
                go[j] = go[j] + xr[3 * n + j]
        cp = cs_prev[r]
        ir, cir, fr, csr, orow, cor, hr = i[r], ci[r], f[r], cs[r], o[r], co[r], h[r]
        if peephole:
            for j in range(n):
                arg[j] = -np.float64((gi[j] + bi[j]) + cp[j] * wci[j])  # sigmoid: exp(-x)
            for j in range(n):
                arg[2 * n + j] = -np.float64(((gf[j] + bf[j]) + forget_bias) + cp[j] * wcf[j])
        else:
            for j in range(n):
                arg[j] = -np.float64(gi[j] + bi[j])
            for j in range(n):
                arg[2 * n + j] = -np.float64((gf[j] + bf[j]) + forget_bias)
        for j in range(n):
            pc = np.float64(gc[j] + bc[j])
            arg[n + j] = min(2.0 * abs(pc), 700.0)  # tanh: exp(min(2|x|, 700))
        exp64_rows(arg, ex, bits)
        for j in range(n):
            ir[j] = np.float32(1.0 / (1.0 + ex[j]))
        for j in range(n):
            fr[j] = np.float32(1.0 / (1.0 + ex[2 * n + j]))
        for j in range(n):
            pc = np.float64(gc[j] + bc[j])
            t = 1.0 - 2.0 / (ex[n + j] + 1.0)
            t = t if pc >= 0 else -t
            t = pc if not abs(pc) >= 1e-4 else t  # small or NaN: x itself
            cir[j] = np.float32(t)
        for j in range(n):
            csr[j] = cir[j] * ir[j] + cp[j] * fr[j]
        if cell_clip > 0:
            for j in range(n):
                csr[j] = min(max(csr[j], -cell_clip), cell_clip)
        if peephole:
            for j in range(n):
                arg2[j] = -np.float64((go[j] + bo[j]) + csr[j] * wco[j])
        else:
            for j in range(n):
                arg2[j] = -np.float64(go[j] + bo[j])
        for j in range(n):
            arg2[n + j] = min(2.0 * abs(np.float64(csr[j])), 700.0)
        exp64_rows(arg2, ex2, bits2)
        for j in range(n):
            orow[j] = np.float32(1.0 / (1.0 + ex2[j]))
        for j in range(n):
            c64 = np.float64(csr[j])
            t = 1.0 - 2.0 / (ex2[n + j] + 1.0)
            t = t if c64 >= 0 else -t
            t = c64 if not abs(c64) >= 1e-4 else t
            cor[j] = np.float32(t)
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
