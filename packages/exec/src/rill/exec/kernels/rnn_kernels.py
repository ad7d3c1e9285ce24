"""Kernels for rill.graph.ops.rnn_ops: the fused LSTM cell LSTMBlockCell and its gradient.

The forward pass is one GEMM per gate ([x, h_prev] · w's four column blocks, written in place
and shared by the intra-op threads; one call on one thread) and one pass that adds the bias,
applies the nonlinearities and updates the state; the gradient is one elementwise pass. For
float32 the passes are compiled (`_lstm_loops`, numba); the numpy path below does the same
operations in the same order (bit-identical; it runs without numba and with `RILL_JIT=0`). In
float32 the sigmoid and tanh are computed in float32, as TensorFlow's kernels do, by one exp
written out on both paths (`_lstm_loops.exp_parts`, `exp_parts32` here); float16 (numpy path
only) computes them in float64 (`exp64`) and rounds once to the storage type.
"""

from __future__ import annotations

import importlib

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import _lstm_consts as _k
from rill.exec.kernels import jit
from rill.exec.kernels.intra_op import parallel_blocks, parallel_for, pool_threads
from rill.exec.threads import threads_for
from rill.graph.errors import InvalidArgumentError

_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10
# Units of the compiled forward pass per thread, at least: about 0.12 ms (float32
# nonlinearities; 64 x 512 units, the LSTM 512x64x50 step's, take 0.25 ms), several thread
# hand-offs.
_CELL_GRAIN = 16384
# The same for the gradient's pass, about six times cheaper per unit (0.06 ms for 64 x 512):
# the LSTM 512x64x50 step's 64 rows stay on one thread.
_GRAD_GRAIN = 1 << 17
_TAYLOR = [1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5,
           1.0, 1.0]  # fmt: skip


_LSTM_LOOPS: list = []  # the compiled module, once imported (an import per call costs ~1 µs)


def _loops():
    """The compiled LSTM passes, or None where the numpy path runs."""
    if jit.loops() is None:
        return None
    if not _LSTM_LOOPS:
        _LSTM_LOOPS.append(importlib.import_module("rill.exec.kernels._lstm_loops"))
    return _LSTM_LOOPS[0]


def exp64(x: np.ndarray) -> np.ndarray:
    """exp of a float64 array (the float16 cell's, computed in float64): Cody-Waite reduction
    and a Taylor polynomial of degree 9, exact powers of two."""
    x = np.clip(x, -700.0, 700.0)
    k = np.floor(x * _LOG2E + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = np.full_like(r, 1.0 / 362880.0)
    for coef in _TAYLOR:
        p = p * r + coef
    with np.errstate(invalid="ignore"):
        kk = np.nan_to_num(k).astype(np.int32)
    return np.ldexp(p, kk)


def sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + exp64(-x))


def tanh64(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    t = 1.0 - 2.0 / (exp64(np.minimum(2.0 * a, 700.0)) + 1.0)
    return np.where(a < 1e-4, x, np.where(x >= 0, t, -t))


def exp_parts32(x: np.ndarray):
    """(m, s) with exp(x) = s·m + s and exp(x) - 1 = s·m + (s - 1) for a float32 array: the
    operations of _lstm_loops.exp_parts, elementwise (its constants)."""
    v = np.where(x == x, x, _k.ZERO)
    v = np.minimum(np.maximum(v, _k.EXP_LO), _k.EXP_HI)
    k = np.floor(v * _k.LOG2E + _k.HALF)
    r = (v - k * _k.LN2_HI) - k * _k.LN2_LO
    p = np.full_like(r, _k.P6)
    for coef in (_k.P5, _k.P4, _k.P3, _k.P2, _k.P1, _k.ONE):
        p = p * r + coef
    m = r * p
    with np.errstate(invalid="ignore"):
        s = ((k.astype(np.int32) + np.int32(127)) << np.int32(23)).view(np.float32)
    nan = x != x
    return np.where(nan, x, m), np.where(nan, _k.ONE, s)


def sigmoid32(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) in float32, 0 where -x is past the exp's range (the compiled pass's
    operations)."""
    a = -x
    m, s = exp_parts32(a)
    v = np.float32(1.0) / (np.float32(1.0) + (s * m + s))
    return np.where(a > _k.EXP_HI, np.float32(0.0), v)


def tanh32(x: np.ndarray) -> np.ndarray:
    """tanh in float32: x's sign times e / (e + 2), e = exp(2|x|) - 1 (the compiled pass's
    operations; no cancellation for small x)."""
    m, s = exp_parts32(np.float32(2.0) * np.abs(x))
    e = s * m + (s - np.float32(1.0))
    return np.copysign(e / (e + np.float32(2.0)), x)


def _check(x, cs_prev, h_prev, w, wci, wcf, wco, b, op="LSTMBlockCell"):
    if x.ndim != 2 or cs_prev.ndim != 2 or h_prev.ndim != 2 or w.ndim != 2:
        raise InvalidArgumentError(
            f"{op}: x, cs_prev, h_prev and w must be matrices, got shapes {x.shape}, "
            f"{cs_prev.shape}, {h_prev.shape}, {w.shape}"
        )
    batch, n = cs_prev.shape
    if h_prev.shape != (batch, n) or x.shape[0] != batch:
        raise InvalidArgumentError(
            f"{op}: x {x.shape}, cs_prev {cs_prev.shape} and h_prev {h_prev.shape} must have "
            "the same batch size and cs_prev and h_prev the same cell size"
        )
    if w.shape != (x.shape[1] + n, 4 * n):
        raise InvalidArgumentError(
            f"{op}: w must be [input size + cell size, 4 * cell size] = "
            f"[{x.shape[1] + n}, {4 * n}], got {list(w.shape)}"
        )
    for name, v in (("wci", wci), ("wcf", wcf), ("wco", wco)):
        if v.shape != (n,):
            raise InvalidArgumentError(f"{op}: {name} must be [{n}], got {list(v.shape)}")
    if b.shape != (4 * n,):
        raise InvalidArgumentError(f"{op}: b must be [{4 * n}], got {list(b.shape)}")
    return batch, n


def _gate_products(xh: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """[x, h] · w, [batch, 4n]: one GEMM per gate, each written in place into its column block
    (BLAS takes the row stride; no copy of a block of w) and run on the intra-op threads where
    the product is large. Each is the same single-threaded BLAS call on whichever thread runs
    it.

    Where the four would all run on this thread and one call gives their very bits
    (_one_call_exact), it is that one call: each gate's call repacks all of [x, h] and reads
    its column block of w with a stride (the LSTM 512x64x50 step's [64, 512] x [512, 2048]:
    about 1.2 ms in one call, 1.3 in four)."""
    batch, k = xh.shape
    work = batch * k * 4 * n
    out = np.empty((batch, 4 * n), np.result_type(xh, w))
    # The verdict first, whatever the threads: its trial then falls in a first step.
    if _one_call_exact(xh, w, n) and min(threads_for(work, 4), pool_threads()) < 2:
        return np.matmul(xh, w, out=out)

    def one(k):
        s = slice(k * n, (k + 1) * n)
        np.matmul(xh, w[:, s], out=out[:, s])

    parallel_blocks(4, one, work)
    return out


_EXACT: dict = {}  # (shapes, dtypes) -> whether one call gives the four gates' bits


def _one_call_exact(xh: np.ndarray, w: np.ndarray, n: int) -> bool:
    """Whether xh · w in one BLAS call gives the bits of its four column blocks' calls on this
    machine's BLAS, for row-major operands of these shapes and types. A BLAS routine's
    arithmetic is chosen by the shapes and layouts, never the values: each is tried once on
    random operands and the verdict kept (OpenBLAS's sums over k do not depend on the columns
    a call covers, except where a small-product kernel takes a thin block)."""
    if not (xh.flags.c_contiguous and w.flags.c_contiguous):
        return False
    key = (xh.shape, w.shape, xh.dtype.str, w.dtype.str)
    verdict = _EXACT.get(key)
    if verdict is None:
        rng = np.random.default_rng(len(_EXACT))
        a = rng.standard_normal(xh.shape).astype(xh.dtype)
        b = rng.standard_normal(w.shape).astype(w.dtype)
        one = np.matmul(a, b)
        verdict = all(
            np.array_equal(one[:, k * n : (k + 1) * n], np.matmul(a, b[:, k * n : (k + 1) * n]))
            for k in range(4)
        )
        _EXACT[key] = verdict
    return verdict


def _check_grad(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad):
    """LSTMBlockCellGrad's argument checks (the cell's, then the saved gates' and the incoming
    gradients' shapes): (batch, units)."""
    batch, n = _check(x, cs_prev, h_prev, w, wci, wcf, wco, b, "LSTMBlockCellGrad")
    for name, v in (("i", i), ("cs", cs), ("f", f), ("o", o), ("ci", ci), ("co", co),
                    ("cs_grad", cs_grad), ("h_grad", h_grad)):  # fmt: skip
        if v.shape != (batch, n):
            raise InvalidArgumentError(
                f"LSTMBlockCellGrad: {name} must be [{batch}, {n}], got {list(v.shape)}"
            )
    return batch, n


@register_kernel("LSTMBlockCell", expensive=True)
def lstm_block_cell(forget_bias, cell_clip, use_peephole, T):
    dt = np.dtype(T.np)
    fb, clip = dt.type(forget_bias), dt.type(cell_clip)

    def compute(x, cs_prev, h_prev, w, wci, wcf, wco, b, xw=None):
        """xw: x · w[:input size] computed beforehand ([batch, 4n], w's dtype: a loop's input
        projection, see rill.exec.executor.hoist), or None. With it the gates are h's products
        with the rest of w plus xw's column blocks, added in the elementwise pass."""
        batch, n = _check(x, cs_prev, h_prev, w, wci, wcf, wco, b)
        if xw is None:
            gates = _gate_products(np.concatenate([x, h_prev], axis=1), w, n)
        else:
            if xw.shape != (batch, 4 * n) or xw.dtype != w.dtype or not xw.flags.c_contiguous:
                raise InvalidArgumentError(
                    f"LSTMBlockCell: the input projection must be a row-major [{batch}, "
                    f"{4 * n}] {w.dtype} matrix, got {list(xw.shape)} {xw.dtype}"
                )
            gates = _gate_products(h_prev, w[x.shape[1] :], n)
        outs = [np.empty((batch, n), dt) for _ in range(7)]
        i, cs, f, o, ci, co, h = outs
        loops = _loops() if dt == np.float32 else None
        if loops is not None:
            has_xw = xw is not None
            args = (gates, has_xw, xw if has_xw else gates, np.ascontiguousarray(b),
                    np.ascontiguousarray(cs_prev), wci, wcf, wco, fb, clip, bool(use_peephole),
                    i, cs, f, o, ci, co, h)  # fmt: skip
            # Rows are independent: split them over the intra-op threads where each share
            # holds about _CELL_GRAIN units (the same operations per row on any thread).
            grain = max(1, -(-_CELL_GRAIN // max(n, 1)))
            parallel_for(batch, lambda lo, hi: loops.cell_forward(*args, lo, hi), grain=grain)
            return tuple(outs)
        if xw is not None:
            gates += xw
        if dt == np.float32:
            sig, tanh = sigmoid32, tanh32
        else:  # float16: in float64, rounded once

            def sig(v):
                return sigmoid64(v.astype(np.float64))

            def tanh(v):
                return tanh64(v.astype(np.float64))

        pi = gates[:, :n] + b[:n]
        pf = gates[:, 2 * n : 3 * n] + b[2 * n : 3 * n] + fb
        if use_peephole:
            pi = pi + cs_prev * wci
            pf = pf + cs_prev * wcf
        i[...] = sig(pi)
        ci[...] = tanh(gates[:, n : 2 * n] + b[n : 2 * n])
        f[...] = sig(pf)
        c = ci * i + cs_prev * f
        if clip > 0:
            c = np.minimum(np.maximum(c, -clip), clip)
        cs[...] = c
        po = gates[:, 3 * n :] + b[3 * n :]
        if use_peephole:
            po = po + cs * wco
        o[...] = sig(po)
        co[...] = tanh(cs)
        np.multiply(co, o, out=h)
        return tuple(outs)

    return compute


@register_kernel("LSTMBlockCellGrad", expensive=True)
def lstm_block_cell_grad(use_peephole, T):
    dt = np.dtype(T.np)
    one = dt.type(1)

    def compute(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad):
        batch, n = _check_grad(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                               cs_grad, h_grad)  # fmt: skip
        cs_prev_grad = np.empty((batch, n), dt)
        dicfo = np.empty((batch, 4 * n), dt)
        wg = [np.zeros(n, dt) for _ in range(3)]
        loops = _loops() if dt == np.float32 and batch > 0 else None
        if loops is not None:
            c = np.ascontiguousarray
            rows = [c(a) for a in (cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad)]
            if use_peephole:  # the peephole sums run over all rows in order: one pass
                loops.cell_backward(rows[0], wci, wcf, wco, *rows[1:], one, True, cs_prev_grad,
                                    dicfo, *wg)  # fmt: skip
                return (cs_prev_grad, dicfo, *wg)

            # Without peepholes rows are independent: large batches split over the intra-op
            # threads (each share _GRAD_GRAIN units at least; the same operations per row).
            def part(lo, hi):
                loops.cell_backward(*(a[lo:hi] for a in rows[:1]), wci, wcf, wco,
                                    *(a[lo:hi] for a in rows[1:]), one, False,
                                    cs_prev_grad[lo:hi], dicfo[lo:hi], *wg)  # fmt: skip

            parallel_for(batch, part, grain=max(1, -(-_GRAD_GRAIN // max(n, 1))))
            return (cs_prev_grad, dicfo, *wg)
        do = o * (one - o) * h_grad * co
        dcs = (one - co * co) * h_grad * o + cs_grad
        if use_peephole:
            dcs = dcs + do * wco
        dci = (one - ci * ci) * dcs * i
        df = f * (one - f) * dcs * cs_prev
        di = i * (one - i) * dcs * ci
        for k, d in enumerate((di, dci, df, do)):
            dicfo[:, k * n : (k + 1) * n] = d
        g = dcs * f
        if use_peephole:
            g = g + di * wci + df * wcf
            # Summed over rows in order, as the compiled pass does.
            for acc, prod in zip(wg, (di * cs_prev, df * cs_prev, do * cs)):
                if batch:
                    acc[...] = prod[0]
                for r in range(1, batch):
                    acc += prod[r]
        cs_prev_grad[...] = g
        return (cs_prev_grad, dicfo, *wg)

    return compute
