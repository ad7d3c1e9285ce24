"""BatchMatMulV2 and MatMul over the intra-op threads through BLAS: stacks with the same batch
dims are shared out in fixed groups, and the product keeps numpy's bits on any number of
threads. Where the compiled product runs it takes over a float stack times one matrix and a
float MatMul (test_compiled_matmul.py); the tests of the BLAS path here that such products
would reach run without it (the blas_products fixture)."""

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
    monkeypatch, blas_products, dtype, xs, n
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


def test_a_small_stack_times_one_matrix_splits_in_two_halves_only_with_one_calls_bits(
    monkeypatch, blas_products
):
    """Below COARSE_GRAIN multiply-adds the stack is one call on one thread (pieces would cost
    CPU there) and two halves on two threads or more, where the halves give one call's bits on
    this BLAS (threads.pieces_exact); where they would not, it stays one call. Below
    SMALL_STACK_EXACT it is numpy's own product."""
    from rill.exec.kernels.matmul_kernels import SMALL_STACK_EXACT

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 128, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    assert SMALL_STACK_EXACT <= 128 * 256 * 1024 < threads.COARSE_GRAIN
    assert threads.gemm_pieces(128, 256, 1024)[1] > 2  # threads.matmul alone: more pieces
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    monkeypatch.setattr(threads, "_exact", {})
    pieces = []
    real_pf = intra_op.parallel_for

    def watch_pf(count, fn, grain=1, pieces_per_thread=1, max_threads=None):
        pieces.append((count, max_threads))
        return real_pf(count, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(intra_op, "parallel_for", watch_pf)
    want = np.matmul(x, w)

    def run(free):
        monkeypatch.setattr(threads, "cores_free", lambda: free)
        monkeypatch.setattr(threads, "cores_idle", lambda: free)
        pieces.clear()
        return _bmm(x, w)

    assert np.array_equal(run(1), want) and not pieces  # one thread: one call
    assert not threads._exact  # and nothing tried
    exact = threads.pieces_exact(x[0], w, None, 1, 2)
    for free in (2, 4):
        assert np.array_equal(run(free), want)  # one call's bits, split or not
        assert pieces == ([(2, 2)] if exact else [])
    # A BLAS whose pieces round differently (here: each piece one ulp up) is never split.
    monkeypatch.setattr(threads, "_exact", {})
    monkeypatch.setattr(threads, "_gemm",
                        lambda a, b, out=None: np.nextafter(np.matmul(a, b), np.inf, out=out))  # fmt: skip
    assert not threads.pieces_exact(x[0], w, None, 1, 2)
    assert np.array_equal(run(2), want) and not pieces
    # A product under SMALL_STACK_EXACT multiply-adds (a GPT-2-like block's output projection,
    # [64, 256] x [256, 256] at batch 1): numpy's own, unsplit, even where halves would be exact.
    monkeypatch.setattr(threads, "_gemm", np.matmul)
    small = rng.standard_normal((1, 64, 256)).astype(np.float32)
    w_small = np.ascontiguousarray(w[:, :256])
    assert SMALL_STACK_EXACT > 64 * 256 * 256
    assert np.array_equal(run(4), want)
    pieces.clear()
    monkeypatch.setattr(threads, "_exact", {})
    got = _bmm(small, w_small)
    assert np.array_equal(got, np.matmul(small, w_small)) and not pieces and not threads._exact


def test_pieces_exact_is_tried_once_per_shape_and_layout(monkeypatch):
    monkeypatch.setattr(threads, "_exact", {})
    a = np.ones((197, 192), np.float32)
    b = np.ones((192, 768), np.float32)
    first = threads.pieces_exact(a, b, None, 0, 2)
    assert len(threads._exact) == 1
    assert threads.pieces_exact(a + 1, b, None, 0, 2) == first and len(threads._exact) == 1
    threads.pieces_exact(a, np.asfortranarray(b), None, 0, 2)  # another layout: another try
    assert len(threads._exact) == 2
    # Strided operands and a strided result are never split this way.
    assert not threads.pieces_exact(a[:, ::2], b[::2], None, 0, 2)
    assert not threads.pieces_exact(a, b, np.empty((768, 197), np.float32).T, 0, 2)


def test_exact_halves_stay_one_call_with_a_pool_of_one_thread(monkeypatch):
    """With the intra-op pool at one thread (or on a pool thread) an exact product is one call:
    its halves would only cost CPU there."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((197, 192)).astype(np.float32)
    b = rng.standard_normal((192, 768)).astype(np.float32)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    monkeypatch.setattr(threads, "_exact", {})
    pieces = []
    real_pf = intra_op.parallel_for
    monkeypatch.setattr(intra_op, "parallel_for",
                        lambda n, fn, *a, **k: pieces.append(n) or real_pf(n, fn, *a, **k))  # fmt: skip
    monkeypatch.setattr(intra_op, "_THREADS", 1)
    assert np.array_equal(threads.matmul(a, b, most=2, exact=True), a @ b)
    assert not pieces and not threads._exact
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    assert np.array_equal(threads.matmul(a, b, most=2, exact=True), a @ b)
    assert pieces == ([2] if threads.pieces_exact(a, b, None, 1, 2) else [])


def _matmul(x, y, transpose_b=False):
    with rg.Graph().as_default() as g:
        a = rg.placeholder(rg.as_dtype(x.dtype))
        b = rg.placeholder(rg.as_dtype(y.dtype))
        op = g.create_op("MatMul", [a, b], {"transpose_a": False, "transpose_b": transpose_b})
        (out,) = run_kernel(op, x, y)
    return out


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m, k, n", [(8, 576, 1024), (8, 1024, 1000), (1, 1024, 1000)])
def test_a_few_row_product_splits_in_exact_halves(monkeypatch, blas_products, m, k, n, transpose_b):
    """A classifier head at batch 8 (below threads.matmul's fixed pieces) splits in halves over
    two threads where the halves give one call's bits; a batch-1 head (under _HALVES) is one
    call. The bits are one call's either way, on one thread or two."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float32)
    want = x @ (w.T if transpose_b else w)
    assert m * k * n < 2 * threads.GEMM_GRAIN  # below threads.matmul's fixed pieces
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    pieces = []
    real_pf = intra_op.parallel_for
    monkeypatch.setattr(intra_op, "parallel_for",
                        lambda n_, fn, *a, **kw: pieces.append(n_) or real_pf(n_, fn, *a, **kw))  # fmt: skip
    for pool in (1, 2):
        monkeypatch.setattr(intra_op, "_THREADS", pool)
        pieces.clear()
        got = _matmul(x, w, transpose_b)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        # The flipped product (b · xᵀ, copied back) has one call's dot products, not its bits.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        if pool == 1:
            one = got
        else:
            assert np.array_equal(got, one)  # the same bits on two threads
        big = m * k * n >= matmul_kernels._HALVES
        if pool == 2 and big:
            a, b = (w, x.T) if transpose_b else (x, w)
            exact = threads.pieces_exact(a, b, None, 0 if transpose_b else 1, 2)
            assert pieces == ([2] if exact else [])
        else:
            assert pieces == []
