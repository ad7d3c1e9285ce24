"""BatchMatMulV2 over the intra-op threads: stacks with the same batch dims are shared out in
fixed groups, and the product keeps numpy's bits on any number of threads."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import intra_op, matmul_kernels
from rill.exec.testing import run_kernel


def _bmm(x, y, adj_x=False, adj_y=False):
    with rg.Graph().as_default() as g:
        a = rg.placeholder(rg.as_dtype(x.dtype))
        b = rg.placeholder(rg.as_dtype(y.dtype))
        op = g.create_op("BatchMatMulV2", [a, b], {"adj_x": adj_x, "adj_y": adj_y})
        (out,) = run_kernel(op, x, y)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "xs, ys, adj",
    [((6, 9, 5), (6, 5, 7), (False, False)), ((2, 3, 9, 5), (2, 3, 7, 5), (False, True)),
     ((5, 4, 9), (5, 4, 3), (True, False)), ((1, 9, 5), (4, 5, 7), (False, False))],
    ids=str,
)  # fmt: skip
def test_batch_matmul_keeps_numpy_bits_on_any_thread_count(monkeypatch, dtype, xs, ys, adj):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(dtype)
    y = rng.standard_normal(ys).astype(dtype)
    a = np.swapaxes(x, -1, -2) if adj[0] else x
    b = np.swapaxes(y, -1, -2) if adj[1] else y
    want = np.matmul(a, b)
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1)
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    groups = []
    real = matmul_kernels.parallel_blocks

    def watch(count, fn, work):
        groups.append(count)
        return real(count, fn, work)

    monkeypatch.setattr(matmul_kernels, "parallel_blocks", watch)
    for free in (1, 2, 4):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        got = _bmm(x, y, *adj)
        assert got.dtype == dtype and np.array_equal(got, want)
    # Same batch dims: split in groups; a broadcast batch: numpy's own matmul.
    assert bool(groups) == (xs[:-2] == ys[:-2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs, n", [((1, 197, 48), 160), ((3, 50, 24), 96), ((2, 3, 30, 16), 70), ((1, 64, 32), 600)],
                         ids=str)  # fmt: skip
def test_a_stack_times_one_matrix_splits_with_the_same_bits_on_any_thread_count(
    monkeypatch, dtype, xs, n
):
    """x [..., m, k] @ w [k, n] (an imported Linear layer) is one [rows, k] x [k, n] product
    through threads.matmul: fixed pieces on however many threads are free."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((xs[-1], n)).astype(dtype)
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1 << 10)  # several pieces at these sizes
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(threads, "COARSE_GRAIN", 1)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    rows = int(np.prod(xs[:-1]))
    assert threads.gemm_pieces(rows, xs[-1], n)[1] > 1
    used = []
    real = intra_op.parallel_for

    def watch(count, fn, grain=1, pieces_per_thread=1, max_threads=None):
        used.append(max_threads)
        return real(count, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(intra_op, "parallel_for", watch)
    results = []
    for free in (1, 2, 4):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        used.clear()
        got = _bmm(x, w)
        assert used and max(used) == min(free, threads.gemm_pieces(rows, xs[-1], n)[1])
        assert got.shape == (*xs[:-1], n) and got.dtype == dtype
        results.append(got)
    for got in results[1:]:
        assert np.array_equal(got, results[0])
    np.testing.assert_allclose(results[0], np.matmul(x, w), rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)  # fmt: skip


def test_a_small_stack_times_one_matrix_splits_in_two_halves_at_most(monkeypatch):
    """Below COARSE_GRAIN multiply-adds the stack splits in two halves at most (four pieces
    would cost more CPU than a second thread wins back on a batch-1 transformer), fixed by the
    shapes: the same bits on one thread or two. Below 2 * GEMM_GRAIN it is numpy's own
    product."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 64, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    assert threads.COARSE_GRAIN > 64 * 256 * 1024
    assert threads.gemm_pieces(64, 256, 1024)[1] > 2  # threads.matmul alone: more pieces
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    real = threads.matmul
    calls, pieces = [], []
    real_pf = intra_op.parallel_for

    def watch_pf(count, fn, grain=1, pieces_per_thread=1, max_threads=None):
        pieces.append((count, max_threads))
        return real_pf(count, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(intra_op, "parallel_for", watch_pf)
    monkeypatch.setattr(threads, "matmul", lambda *a, **k: calls.append(k) or real(*a, **k))
    results = []
    for free in (1, 2, 4):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        pieces.clear()
        results.append(_bmm(x, w))
        assert pieces == [(2, min(free, 2))]
    assert all(k == {"most": 2} for k in calls)
    for got in results[1:]:
        assert np.array_equal(got, results[0])
    np.testing.assert_allclose(results[0], np.matmul(x, w), rtol=1e-5, atol=1e-4)
    # A product under 2 * GEMM_GRAIN multiply-adds: numpy's own, unsplit.
    calls.clear()
    small = rng.standard_normal((1, 64, 64)).astype(np.float32)
    got = _bmm(small, w[:64])
    assert not calls and np.array_equal(got, np.matmul(small, w[:64]))
