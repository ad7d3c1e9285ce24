"""A loop's LSTM input projection hoisted out of the loop (rill.exec.executor.hoist): the
structured path computes x · w_x for every TensorArray element in one GEMM; it agrees with the
dataflow executor (which runs the cell as it is), keeps its bits with and without the compiled
loops and on any thread count, and falls back to the plain cell where it does not apply."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff import gradients
from rill.exec import ConfigProto, Session
from rill.exec.executor import hoist
from rill.exec.kernels import jit
from rill.graph.ops.rnn_ops import lstm_block_cell

T, B, D, N = 7, 4, 3, 5


@pytest.fixture
def projections(monkeypatch):
    """Every iteration's use of a projection: True where the cell took its rows, else False."""
    used = []
    real = hoist.InputProjection._rows

    def watch(self, *args):
        rows = real(self, *args)
        used.append(rows is not None)
        return rows

    monkeypatch.setattr(hoist.InputProjection, "_rows", watch)
    return used


def _rnn(batch=B):
    g = rg.Graph()
    with g.as_default():
        g.seed = 3
        x = rg.placeholder(rg.float32, [T, batch, D], name="x")
        cell = rt.BasicLSTMCell(N, forget_bias=0.5)
        out, state = rt.dynamic_rnn(cell, x, dtype=rg.float32, time_major=True)
        loss = rg.reduce_sum(rg.square(out)) + rg.reduce_sum(state[0])
        fetches = [out, state[0], *gradients(loss, [x, *cell.trainable_variables])]
        init = rg.global_variables_initializer()
    return g, x, fetches, init


def _run(g, x, fetches, init, xv, disable=False, threads=0):
    cfg = ConfigProto(intra_op_parallelism_threads=threads)
    cfg.rill.disable_compiled_path = disable
    with Session(graph=g, config=cfg) as s:
        s.run(init)
        return s.run(fetches, {x: xv})


def test_dynamic_rnn_projection_agrees_with_the_cell(projections):
    g, x, fetches, init = _rnn()
    assert sum(op.type == "LSTMBlockCell" for op in g.get_operations()) == 1
    xv = np.random.default_rng(0).standard_normal((T, B, D)).astype(np.float32)
    got = _run(g, x, fetches, init, xv)
    assert projections == [True] * T  # every iteration took its rows of the projection
    projections.clear()
    want = _run(g, x, fetches, init, xv, disable=True)
    assert projections == []  # the dataflow executor runs the cell as it is
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_projection_bits_do_not_depend_on_the_compiled_loops_or_threads(monkeypatch, projections):
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    # Small products split over the threads too (the fold test's settings).
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1)
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    # 20 x 7 = 140 rows: the projection splits in two row blocks.
    g, x, fetches, init = _rnn(batch=20)
    assert threads.gemm_pieces(T * 20, D, 4 * N) == (0, 2)
    xv = np.random.default_rng(1).standard_normal((T, 20, D)).astype(np.float32)
    runs = []
    for free, compiled in ((1, True), (2, True), (2, False), (1, False)):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        old = jit.set_enabled(compiled)
        try:
            runs.append(_run(g, x, fetches, init, xv, threads=free))
        finally:
            jit.set_enabled(old)
    assert projections == [True] * (4 * T)
    for r in runs[1:]:
        for a, b in zip(runs[0], r):
            assert np.array_equal(a, b)


def _manual_loop(written: int, order=None):
    """A while loop over a TensorArray of T elements of which the first `written` are scattered
    before it (the rest read as zeros), each iteration one LSTMBlockCell on the element (element
    order[t] at iteration t where given)."""
    rng = np.random.default_rng(4)
    g = rg.Graph()
    with g.as_default():
        xs = rg.placeholder(rg.float32, [written, B, D], name="xs")
        w = rg.constant(rng.standard_normal((D + N, 4 * N)).astype(np.float32) * 0.5)
        b = rg.constant(rng.standard_normal(4 * N).astype(np.float32) * 0.1)
        zero = rg.zeros([N])
        ta = rg.TensorArray(rg.float32, size=T, element_shape=[B, D])
        ta = ta.scatter(rg.range(written), xs)

        def body(t, c, h):
            at = t if order is None else rg.gather(rg.constant(np.int32(order)), t)
            outs = lstm_block_cell(ta.read(at), c, h, w, zero, zero, zero, b)
            return t + 1, outs[1], outs[6]

        _, c, h = rg.while_loop(lambda t, c, h: t < T, body,
                                (0, rg.zeros([B, N]), rg.zeros([B, N])))  # fmt: skip
    return g, xs, [c, h]


@pytest.mark.parametrize("written", [T, T - 2])
def test_a_hand_built_loop_projects_only_where_every_element_is_there(written, projections):
    g, xs, fetches = _manual_loop(written)
    xv = np.random.default_rng(2).standard_normal((written, B, D)).astype(np.float32)
    with Session(graph=g) as s:
        got = s.run(fetches, {xs: xv})
    assert projections == [written == T] * T
    cfg = ConfigProto()
    cfg.rill.disable_compiled_path = True
    with Session(graph=g, config=cfg) as s:
        want = s.run(fetches, {xs: xv})
    for a, b in zip(got, want):
        if written == T:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        else:  # the plain cell on both paths: the same bits
            assert np.array_equal(a, b)


def test_projection_made_in_blocks_as_the_loop_reaches_them(monkeypatch, projections):
    """Blocks of two iterations (BLOCK_BYTES made small): four products of 2, 2, 2 and 1
    elements' rows, the same results as the plain cells give (to rounding)."""
    from rill.exec import threads

    made = []
    real = threads.matmul

    def watch(a, b, out=None):
        if b.shape == (D, 4 * N):  # the projection's product (x's width by the gates)
            made.append(a.shape[0])
        return real(a, b, out)

    monkeypatch.setattr(threads, "matmul", watch)
    monkeypatch.setattr(hoist, "BLOCK_BYTES", 2 * B * 4 * N * 4)
    g, x, fetches, init = _rnn()
    xv = np.random.default_rng(5).standard_normal((T, B, D)).astype(np.float32)
    got = _run(g, x, fetches, init, xv)
    assert made == [2 * B, 2 * B, 2 * B, B] and projections == [True] * T
    want = _run(g, x, fetches, init, xv, disable=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_loop_that_goes_back_to_a_block_runs_the_plain_cell_from_there(monkeypatch, projections):
    monkeypatch.setattr(hoist, "BLOCK_BYTES", 2 * B * 4 * N * 4)
    order = [0, 2, 1, 3, 4, 5, 6]  # element 1 is in block 0, left for block 1 at iteration 1
    g, xs, fetches = _manual_loop(T, order)
    xv = np.random.default_rng(6).standard_normal((T, B, D)).astype(np.float32)
    with Session(graph=g) as s:
        got = s.run(fetches, {xs: xv})
    assert projections == [True, True] + [False] * (T - 2)
    cfg = ConfigProto()
    cfg.rill.disable_compiled_path = True
    with Session(graph=g, config=cfg) as s:
        want = s.run(fetches, {xs: xv})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_elements_of_one_scatter_are_projected_without_a_copy():
    """Consecutive elements lying one below the other in one buffer (a scatter's rows) are
    stacked as a view of it; any other elements are concatenated. The same values."""
    value = np.random.default_rng(8).standard_normal((6, 3, 4)).astype(np.float32)
    parts = [value[i] for i in range(6)]
    view = hoist._stacked(parts[1:5])
    assert np.shares_memory(view, value) and np.array_equal(view, value[1:5].reshape(12, 4))
    for others in ([parts[0], parts[2]], [parts[1], parts[0]], [parts[0], parts[1].copy()]):
        got = hoist._stacked(others)
        assert not np.shares_memory(got, value) and np.array_equal(got, np.concatenate(others))
