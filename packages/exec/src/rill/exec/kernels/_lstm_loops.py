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
def cell_forward(gates, b, cs_prev, wci, wcf, wco, forget_bias, cell_clip, peephole,
                 i, cs, f, o, ci, co, h, lo, hi):  # fmt: skip  # pragma: no cover - compiled
    """The gate nonlinearities and state update of one LSTM step, over rows [lo, hi); `gates`
    holds the four gates' products, [4, batch, n].

    Row by row in stages over the units, each a loop the compiler vectorizes: the
    pre-activations (storage-type arithmetic), then the exps in float64 (exp64_rows), then the
    gates and the new state; the operations and their order are exp64/sigmoid64/tanh64's."""
    n = cs_prev.shape[1]
    arg = np.empty(3 * n, np.float64)
    ex = np.empty(3 * n, np.float64)
    bits = np.empty(3 * n, np.int64)
    arg2 = np.empty(2 * n, np.float64)
    ex2 = np.empty(2 * n, np.float64)
    bits2 = np.empty(2 * n, np.int64)
    for r in range(lo, hi):
        gi, gc, gf, go = gates[0, r], gates[1, r], gates[2, r], gates[3, r]
        cp = cs_prev[r]
        for j in range(n):
            c0 = cp[j]
            pi = gi[j] + b[j]
            pf = gf[j] + b[2 * n + j] + forget_bias
            if peephole:
                pi = pi + c0 * wci[j]
                pf = pf + c0 * wcf[j]
            pc = np.float64(gc[j] + b[n + j])
            arg[j] = -np.float64(pi)  # sigmoid: exp(-x)
            arg[n + j] = min(2.0 * abs(pc), 700.0)  # tanh: exp(min(2|x|, 700))
            arg[2 * n + j] = -np.float64(pf)
        exp64_rows(arg, ex, bits)
        for j in range(n):
            c0 = cp[j]
            ig = np.float32(1.0 / (1.0 + ex[j]))
            pc = np.float64(gc[j] + b[n + j])
            t = 1.0 - 2.0 / (ex[n + j] + 1.0)
            t = t if pc >= 0 else -t
            t = pc if not abs(pc) >= 1e-4 else t  # small or NaN: x itself
            cig = np.float32(t)
            fg = np.float32(1.0 / (1.0 + ex[2 * n + j]))
            c = cig * ig + c0 * fg
            if cell_clip > 0:
                c = min(max(c, -cell_clip), cell_clip)
            po = go[j] + b[3 * n + j]
            if peephole:
                po = po + c * wco[j]
            i[r, j] = ig
            ci[r, j] = cig
            f[r, j] = fg
            cs[r, j] = c
            arg2[j] = -np.float64(po)
            c64 = np.float64(c)
            arg2[n + j] = min(2.0 * abs(c64), 700.0)
        exp64_rows(arg2, ex2, bits2)
        for j in range(n):
            og = np.float32(1.0 / (1.0 + ex2[j]))
            c64 = np.float64(cs[r, j])
            t = 1.0 - 2.0 / (ex2[n + j] + 1.0)
            t = t if c64 >= 0 else -t
            t = c64 if not abs(c64) >= 1e-4 else t
            cog = np.float32(t)
            o[r, j] = og
            co[r, j] = cog
            h[r, j] = cog * og


@_jit
def cell_backward(cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad, one, peephole,
                  cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad):  # fmt: skip  # pragma: no cover
    """LSTMBlockCellGrad's elementwise pass; the peephole sums run over rows in order."""
    batch, n = cs_prev.shape
    for r in range(batch):
        d = dicfo[r]
        for j in range(n):
            og, cog, ig, fg, cig = o[r, j], co[r, j], i[r, j], f[r, j], ci[r, j]
            hg = h_grad[r, j]
            c0 = cs_prev[r, j]
            do = og * (one - og) * hg * cog
            dcs = (one - cog * cog) * hg * og + cs_grad[r, j]
            if peephole:
                dcs = dcs + do * wco[j]
            dci = (one - cig * cig) * dcs * ig
            df = fg * (one - fg) * dcs * c0
            di = ig * (one - ig) * dcs * cig
            d[j] = di
            d[n + j] = dci
            d[2 * n + j] = df
            d[3 * n + j] = do
            g = dcs * fg
            if peephole:
                g = g + di * wci[j] + df * wcf[j]
            cs_prev_grad[r, j] = g
            if peephole:
                pi, pf, po = di * c0, df * c0, do * cs[r, j]
                if r == 0:
                    wci_grad[j], wcf_grad[j], wco_grad[j] = pi, pf, po
                else:
                    wci_grad[j] += pi
                    wcf_grad[j] += pf
                    wco_grad[j] += po
