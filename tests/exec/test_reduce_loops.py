"""Sum and Mean over a C-contiguous float array's trailing axes (a global average pool) run
compiled row loops (_conv_loops.row_pairwise_sums, four rows' leaves side by side) that repeat
numpy's pairwise summation: the results must be numpy's bit for bit, with RILL_JIT=0 as the
reference (signed zeros, NaN, infinities, every row length from 1 to 520: numpy's leaves below
8 values and up to 128, its splits above 128 and above 256, keep_dims, rows in groups of four
and the rest), and every other case must still take numpy's path. The rows split over the
threads in blocks, with numpy's bits over the whole array."""

from __future__ import annotations

import numpy as np
import pytest

from rill.exec.kernels import jit, reduction_kernels

RNG = np.random.default_rng(77)


def _both(fn, x, axes, keep):
    old = jit.set_enabled(True)
    try:
        with np.errstate(all="ignore"):  # inf - inf in the sums
            compiled = fn(np, x, axes, keep)
            jit.set_enabled(False)
            reference = fn(np, x, axes, keep)
    finally:
        jit.set_enabled(old)
    return compiled, reference


def _assert_same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8))
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [reduction_kernels._mean, reduction_kernels._sum])
def test_every_row_length_is_numpys_pairwise_sum(fn, dtype):
    for n in range(1, 521):
        x = (RNG.standard_normal((3 + n % 5, n)) * RNG.uniform(0.1, 1e4)).astype(dtype)
        got, want = _both(fn, x, (1,), False)
        _assert_same_bits(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [reduction_kernels._mean, reduction_kernels._sum])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize(
    "shape, axes",
    [((2, 576, 7, 7), (2, 3)), ((1, 96, 3, 5), (3, 2)), ((4, 2, 3, 4), (1, 2, 3)), ((5, 8), (1,)),
     ((3, 1, 1), (1, 2)), ((2, 3, 11, 11), (2, 3)), ((1, 20, 13, 13), (2, 3)),
     ((2, 5, 14, 14), (2, 3)), ((1, 4, 15, 15), (3, 2)), ((3, 248), (1,))],
)  # fmt: skip
def test_global_pools_with_special_values_are_numpys_bits(shape, axes, keep, fn, dtype):
    x = (RNG.standard_normal(shape) * 50).astype(dtype)
    flat = x.reshape(-1)
    flat[RNG.choice(flat.size, flat.size // 3, replace=False)] = -0.0
    flat[RNG.choice(flat.size, max(1, flat.size // 50), replace=False)] = np.inf
    flat[RNG.choice(flat.size, max(1, flat.size // 60), replace=False)] = -np.inf
    flat[RNG.choice(flat.size, max(1, flat.size // 70), replace=False)] = np.nan
    x[0, 0] = -0.0  # a row of -0 only
    got, want = _both(fn, x, axes, keep)
    _assert_same_bits(got, want)


def test_the_loops_run_only_where_they_apply():
    # Leading axes, another layout, integers: numpy's own path (no compiled call); trailing
    # axes of contiguous floats, short rows or long: the row loops.
    called = []
    loops = pytest.importorskip("rill.exec.kernels._conv_loops")
    if jit.loops() is None:
        pytest.skip("compiled loops are off")
    orig = loops.row_pairwise_sums
    loops.row_pairwise_sums = lambda *a: called.append(1) or orig(*a)
    try:
        x = RNG.standard_normal((2, 3, 12, 12)).astype(np.float32)
        reduction_kernels._mean(np, x[:, :, :5, :5].copy(), (0, 1), False)  # leading axes
        reduction_kernels._mean(np, x[:, :, :5, :5], (2, 3), False)  # not contiguous
        reduction_kernels._mean(np, np.ones((2, 3, 4), np.int32), (2,), False)
        assert called == []
        got = reduction_kernels._mean(np, x[:, :, :5, :5].copy(), (2, 3), False)
        assert called == [1] and got.shape == (2, 3)
        np.testing.assert_allclose(got, x[:, :, :5, :5].mean(axis=(2, 3)), rtol=1e-6)
        long = RNG.standard_normal((2, 3, 999)).astype(np.float32)
        got = reduction_kernels._sum(np, long, (2,), True)
        assert called == [1, 1] and got.shape == (2, 3, 1)
        np.testing.assert_allclose(got, long.sum(axis=2, keepdims=True), rtol=1e-5)
    finally:
        loops.row_pairwise_sums = orig


def test_numpys_pairwise_program():
    from rill.exec.kernels import _conv_loops

    # (kind, start, length): leaves of at most 128, each split at n // 2 rounded down to 8
    assert _conv_loops.pairwise_program(128).tolist() == [[0, 0, 128]]
    assert _conv_loops.pairwise_program(129).tolist() == [[0, 0, 64], [0, 64, 65], [1, 0, 0]]
    assert _conv_loops.pairwise_program(300).tolist() == [
        [0, 0, 72],
        [0, 72, 72],
        [1, 0, 0],
        [0, 144, 72],
        [0, 216, 84],
        [1, 0, 0],
        [1, 0, 0],
    ]


def test_the_mean_of_a_graph_uses_the_loops_and_keeps_errors():
    import rill.graph as rg
    from rill.exec import Session
    from rill.graph.errors import InvalidArgumentError
    from rill.graph.ops.reduction_ops import reduce_mean

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4, 3, 3], name="x")
        m = reduce_mean(x, axis=[2, 3], keepdims=True)
        axes = rg.placeholder(rg.int32, [2], name="axes")
        fed = reduce_mean(x, axis=axes)
    sess = Session(graph=g)
    v = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    got = sess.run(m, {x: v})
    _assert_same_bits(got, np.true_divide(np.sum(v, axis=(2, 3), dtype=np.float32,
                                                 keepdims=True), np.float32(9)))  # fmt: skip
    _assert_same_bits(sess.run(fed, {x: v, axes: np.array([3, 2], np.int32)}), got[:, :, 0, 0])
    with pytest.raises(InvalidArgumentError, match="duplicate"):
        sess.run(fed, {x: v, axes: np.array([2, 2], np.int32)})


@pytest.mark.parametrize("fn", [reduction_kernels._mean, reduction_kernels._sum])
def test_a_large_pool_splits_over_threads_with_numpys_bits(fn, monkeypatch):
    """From 2^20 values the rows split over the intra-op threads (pieces of at least
    _ROWS_GRAIN values); the bits are numpy's on any thread count."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = RNG.standard_normal((64, 256, 8, 8)).astype(np.float32)
    pieces = []
    real = reduction_kernels.parallel_for

    def watch(n, body, grain=1, pieces_per_thread=1, max_threads=None):
        pieces.append(max(1, n // grain))  # the pieces parallel_for may make
        return real(n, body, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(reduction_kernels, "parallel_for", watch)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    compiled, reference = _both(fn, x, (2, 3), False)
    _assert_same_bits(compiled, reference)
    assert pieces == [2]  # 2^20 values in pieces of 2^19
    small = RNG.standard_normal((8, 576, 7, 7)).astype(np.float32)  # 0.9 MB: one piece
    pieces.clear()
    compiled, reference = _both(fn, small, (2, 3), True)
    _assert_same_bits(compiled, reference)
    assert pieces == [1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [reduction_kernels._mean, reduction_kernels._sum])
@pytest.mark.parametrize(
    "shape, axes, pieces",
    [((8, 48, 56, 56), (2, 3), 2), ((8, 16, 112, 112), (3, 2), 2), ((3, 100003), (1,), 1),
     ((2, 3, 249), (2,), 1), ((4, 64, 40, 40), (1, 2, 3), 1), ((16, 64, 40, 40), (2, 3), 2)],
)  # fmt: skip
def test_long_rows_split_in_blocks_with_numpys_bits(shape, axes, pieces, fn, dtype, monkeypatch):
    """Long rows split in blocks of rows over the intra-op threads: the bits are numpy's over
    the whole array (special values included) on one thread or two."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = (RNG.standard_normal(shape) * 30).astype(dtype)
    flat = x.reshape(-1)
    flat[RNG.choice(flat.size, flat.size // 4, replace=False)] = -0.0
    flat[RNG.choice(flat.size, 3, replace=False)] = np.inf
    x.reshape(-1, _count(shape, axes))[-1] = -0.0  # a row of -0 only
    made = []
    real = reduction_kernels.parallel_for

    def watch(n, body, grain=1, pieces_per_thread=1, max_threads=None):
        made.append(min(2, max(1, n // grain)))  # the pieces it may make on two threads
        return real(n, body, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(reduction_kernels, "parallel_for", watch)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    for threads_ in (1, 2):
        monkeypatch.setattr(intra_op, "_THREADS", threads_)
        made.clear()
        got, want = _both(fn, x, axes, False)
        _assert_same_bits(got, want)
        assert made == [min(2, pieces)]


def _count(shape, axes) -> int:
    return int(np.prod([shape[a] for a in axes]))
