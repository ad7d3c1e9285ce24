"""The fused LSTM cell (LSTMBlockCell, LSTMBlockCellGrad): against its formulas, compiled and
numpy paths bit-identical, gradients against numeric differences, bad shapes rejected."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import compute_gradient_error, gradients
from rill.exec import Session
from rill.exec.kernels import jit, rnn_kernels
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.rnn_ops import lstm_block_cell

B, I, N = 5, 3, 4
SHAPES = [(B, I), (B, N), (B, N), (I + N, 4 * N), (N,), (N,), (N,), (4 * N,)]


def _values(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _reference(vals, forget_bias, clip, peep):
    x, c, h, w, wci, wcf, wco, b = (v.astype(np.float64) for v in vals)
    if not peep:
        wci = wcf = wco = np.zeros(N)

    def sig(z):
        return 1 / (1 + np.exp(-z))

    g = np.concatenate([x, h], 1) @ w + b
    i = sig(g[:, :N] + wci * c)
    ci = np.tanh(g[:, N : 2 * N])
    f = sig(g[:, 2 * N : 3 * N] + forget_bias + wcf * c)
    cs = ci * i + c * f
    if clip > 0:
        cs = np.clip(cs, -clip, clip)
    o = sig(g[:, 3 * N :] + wco * cs)
    co = np.tanh(cs)
    return [i, cs, f, o, ci, co, co * o]


def _run(vals, forget_bias=1.0, clip=-1.0, peep=False, dtype=rg.float32):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(dtype, v.shape) for v in vals]
        outs = lstm_block_cell(*phs, forget_bias=forget_bias, cell_clip=clip, use_peephole=peep)
        rng = np.random.default_rng(9)
        k1 = rg.constant(rng.standard_normal((B, N)).astype(vals[0].dtype))
        k2 = rg.constant(rng.standard_normal((B, N)).astype(vals[0].dtype))
        loss = rg.reduce_sum(outs[6] * k1) + rg.reduce_sum(outs[1] * k2)
        grads = gradients(loss, phs)
    with Session(graph=g) as s:
        return s.run(outs + grads, dict(zip(phs, vals)))


@pytest.fixture
def jit_off():
    old = jit.set_enabled(False)
    yield
    jit.set_enabled(old)


CASES = [(1.0, -1.0, False), (0.5, -1.0, True), (1.0, 0.3, False), (0.0, 0.3, True)]


@pytest.mark.parametrize("forget_bias, clip, peep", CASES)
def test_forward_matches_the_formulas(forget_bias, clip, peep):
    vals = _values()
    got = _run(vals, forget_bias, clip, peep)[:7]
    for name, a, want in zip(
        ["i", "cs", "f", "o", "ci", "co", "h"], got, _reference(vals, forget_bias, clip, peep)
    ):
        assert a.dtype == np.float32 and a.shape == (B, N)
        np.testing.assert_allclose(a, want, rtol=2e-6, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("forget_bias, clip, peep", CASES)
def test_compiled_and_numpy_paths_are_bit_identical(forget_bias, clip, peep):
    if jit.loops() is None:
        pytest.skip("numba unavailable: only the numpy path exists")
    vals = _values(1)
    vals[0][0, 0] = 30.0  # saturated gates and a tiny tanh argument take other branches
    vals[1][1, 1] = 1e-6
    compiled = _run(vals, forget_bias, clip, peep)
    old = jit.set_enabled(False)
    try:
        numpy_path = _run(vals, forget_bias, clip, peep)
    finally:
        jit.set_enabled(old)
    assert len(compiled) == 15
    for a, b in zip(compiled, numpy_path):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def test_float16_runs_the_numpy_path():
    vals = _values(2, np.float16)
    got = _run(vals, dtype=rg.float16)
    want = _reference(vals, 1.0, -1.0, False)
    np.testing.assert_allclose(got[6].astype(np.float64), want[6], atol=3e-3)
    assert got[6].dtype == np.float16


def test_float64_nonlinearities_are_accurate_and_handle_extremes():
    """The float16 cell's (numpy path only): in float64, rounded once."""
    x = np.concatenate([np.linspace(-30, 30, 20001), [0.0, -0.0, 1e-9, -1e-5, 800.0, -800.0]])
    # Far more accurate than float16 needs (the results are rounded to the storage type).
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(rnn_kernels.sigmoid64(x), want, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(rnn_kernels.tanh64(x), np.tanh(x), rtol=1e-10, atol=1e-300)
    assert np.isnan(rnn_kernels.tanh64(np.array([np.nan])))[0]
    assert np.isnan(rnn_kernels.sigmoid64(np.array([np.nan])))[0]
    assert rnn_kernels.sigmoid64(np.array([-np.inf, np.inf])).tolist()[1] == 1.0


def _ulps(got, want):
    """|got - want| in units of the last place of want rounded to float32."""
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want.astype(np.float32)))


def test_float32_nonlinearities_are_within_a_few_ulps_and_handle_extremes():
    """The float32 cell's sigmoid and tanh (both paths' operations) against float64: within 3
    units of the last place (numpy's float32 1 / (1 + exp(-x)) is 3.4 off here) down to
    sigmoid(-87) = 1.6e-38, 0 below, exact at the limits, NaN through."""
    x = np.concatenate([np.linspace(-87, 90, 400001), np.geomspace(1e-30, 20, 20001)])
    x = np.concatenate([x, -x]).astype(np.float32)
    x64 = x.astype(np.float64)
    sig, tanh = rnn_kernels.sigmoid32(x), rnn_kernels.tanh32(x)
    assert sig.dtype == tanh.dtype == np.float32
    normal = x >= -87
    assert _ulps(sig[normal], 1 / (1 + np.exp(-x64[normal]))).max() <= 3
    assert np.all(sig[~normal] == 0)
    assert _ulps(tanh, np.tanh(x64)).max() <= 3
    assert sig[normal].min() > 1e-38 and sig.max() == 1 and np.abs(tanh).max() == 1
    ext = np.array([-np.inf, -1e30, -100, 100, 1e30, np.inf, 0.0, -0.0, 1e-40, -1e-40],
                   np.float32)  # fmt: skip
    assert rnn_kernels.sigmoid32(ext).tolist()[:6] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert rnn_kernels.sigmoid32(ext).tolist()[6:8] == [0.5, 0.5]
    t = rnn_kernels.tanh32(ext)
    assert t.tolist()[:6] == [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    assert t[6] == 0 and np.signbit(t[7]) and t[8] == np.float32(1e-40) and t[9] == -t[8]
    nan = np.array([np.nan], np.float32)
    assert np.isnan(rnn_kernels.sigmoid32(nan))[0] and np.isnan(rnn_kernels.tanh32(nan))[0]


@pytest.mark.parametrize("peep", [False, True])
def test_gradients_match_numeric_differences(peep):
    vals = [v.astype(np.float32) * 0.5 for v in _values(3)]
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.float32, v.shape) for v in vals]
        outs = lstm_block_cell(*phs, forget_bias=1.0, use_peephole=peep)
        y = outs[6] * 2.0 + outs[1]
        xs = [t for k, t in enumerate(phs) if peep or k not in (4, 5, 6)]
        inits = [v for k, v in enumerate(vals) if peep or k not in (4, 5, 6)]
        feed = {t: v for t, v in zip(phs, vals) if t not in xs}
        with Session(graph=g) as s:
            err = compute_gradient_error(
                xs, [v.shape for v in inits], y, [B, N], x_init_value=inits, delta=1e-2,
                extra_feed_dict=feed, session=s,
            )  # fmt: skip
    assert err < 5e-3


def test_bad_shapes_are_rejected():
    vals = _values()
    with pytest.raises(ValueError, match="w's first dimension"):
        with rg.Graph().as_default():
            bad = [rg.placeholder(rg.float32, v.shape) for v in vals]
            bad[3] = rg.placeholder(rg.float32, [I + N + 1, 4 * N])
            lstm_block_cell(*bad)
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.float32, None) for _ in vals]
        out = lstm_block_cell(*phs)[6]
    vals[7] = vals[7][:-1]
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError, match="b must be"):
        s.run(out, dict(zip(phs, vals)))


def test_compiled_and_numpy_paths_agree_on_extreme_pre_activations():
    """Rows whose pre-activations are NaN, infinite, saturating, tiny or signed zeros (through
    the bias, on rows where x and h are zero), with and without peepholes and clipping."""
    if jit.loops() is None:
        pytest.skip("numba unavailable: only the numpy path exists")
    vals = _values(4)
    x, c, h, w, wci, wcf, wco, b = vals
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    x[3:], h[3:] = 0.0, 0.0
    b[:] = np.array([1e-6, -0.0, 0.0, 800.0, -800.0, 3e-5, -2e-5, 40.0] * 2, np.float32)
    c[4] = np.array([np.nan, 1e-6, -0.0, 50.0], np.float32)
    for forget_bias, clip, peep in CASES:
        compiled = _run(vals, forget_bias, clip, peep)
        old = jit.set_enabled(False)
        try:
            numpy_path = _run(vals, forget_bias, clip, peep)
        finally:
            jit.set_enabled(old)
        for a, bb in zip(compiled, numpy_path):
            assert a.dtype == bb.dtype and np.array_equal(a, bb, equal_nan=True)


def test_forward_rows_split_over_threads_keep_their_bits(monkeypatch):
    """The compiled forward pass, and the gradient pass without peepholes, split over two
    threads (one row each at least) give the numpy path's bits."""
    if jit.loops() is None:
        pytest.skip("numba unavailable: only the numpy path exists")
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    calls = []
    real = intra_op.parallel_for

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        calls.append((n, grain))
        return real(n, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(rnn_kernels, "_CELL_GRAIN", 1)
    monkeypatch.setattr(rnn_kernels, "_GRAD_GRAIN", 1)
    monkeypatch.setattr(rnn_kernels, "parallel_for", watch)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    vals = _values(5)
    for forget_bias, clip, peep in CASES:
        calls.clear()
        split = _run(vals, forget_bias, clip, peep)
        # B rows, any number per thread: the forward pass, and the gradient's without peepholes
        assert calls.count((B, 1)) == (1 if peep else 2)
        old = jit.set_enabled(False)
        try:
            numpy_path = _run(vals, forget_bias, clip, peep)
        finally:
            jit.set_enabled(old)
        for a, b in zip(split, numpy_path):
            assert np.array_equal(a, b, equal_nan=True)


def test_gate_products_have_the_same_bits_on_any_thread_count(monkeypatch):
    """The four gates' GEMMs, written in place and shared over the threads: each gate is the
    same single-threaded product of its column block of w, whichever thread runs it."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    rng = np.random.default_rng(3)
    xh = rng.standard_normal((64, 640)).astype(np.float32)
    w = rng.standard_normal((640, 4 * 256)).astype(np.float32)
    assert threads.GEMM_GRAIN <= 64 * 640 * 4 * 256  # large enough to split
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    results = []
    with threads.blas_owned():
        for free in (1, 2, 4):
            monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
            monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
            results.append(rnn_kernels._gate_products(xh, w, 256))
        want = np.concatenate([xh @ w[:, k * 256 : (k + 1) * 256] for k in range(4)], axis=1)
    for r in results:
        assert r.shape == (64, 4 * 256) and np.array_equal(r, want)


def test_gate_products_on_one_thread_are_one_call_where_it_gives_their_bits(monkeypatch):
    """On one thread the four gates' GEMMs are one [batch, 4n] call where this BLAS gives the
    blocks' bits for it (tried once per shape); else the four."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    rng = np.random.default_rng(4)
    xh = rng.standard_normal((64, 640)).astype(np.float32)
    w = rng.standard_normal((640, 4 * 256)).astype(np.float32)
    # The blocks as the kernel computes them: single-threaded BLAS calls (a product split over
    # BLAS's own threads may round otherwise: OpenBLAS's Haswell kernels do here).
    with threads.blas_owned():
        want = np.concatenate([xh @ w[:, k * 256 : (k + 1) * 256] for k in range(4)], axis=1)
    monkeypatch.setattr(intra_op, "_THREADS", 1)
    monkeypatch.setattr(rnn_kernels, "_EXACT", {})
    calls = []
    real = np.matmul

    def watch(a, b, out=None):
        calls.append(b.shape)
        return real(a, b, out=out)

    with threads.blas_owned():
        rnn_kernels._gate_products(xh, w, 256)  # the trial
        (exact,) = rnn_kernels._EXACT.values()
        monkeypatch.setattr(rnn_kernels.np, "matmul", watch)
        got = rnn_kernels._gate_products(xh, w, 256)
        assert calls == ([(640, 1024)] if exact else [(640, 256)] * 4)
        monkeypatch.setattr(rnn_kernels, "_EXACT", {next(iter(rnn_kernels._EXACT)): False})
        calls.clear()
        four = rnn_kernels._gate_products(xh, w, 256)
    assert calls == [(640, 256)] * 4
    assert np.array_equal(got, want) and np.array_equal(four, want)
