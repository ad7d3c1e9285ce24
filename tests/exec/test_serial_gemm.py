"""rill.exec.kernels.serial_gemm.product: threads.matmul's bits, in one BLAS call where its
pieces would all run on the calling thread and the call gives their bits on this machine."""

from __future__ import annotations

import numpy as np
import pytest

from rill.exec import threads
from rill.exec.kernels import intra_op, serial_gemm

# (a, b) builders: the LSTM gradient loop's dy · wᵀ (column pieces of a transposed matrix,
# flipped), a product split in row pieces, one split in column pieces (b the larger operand).
CASES = {
    "flipped columns": lambda r: (r((64, 2048)), r((512, 2048)).T),
    "rows": lambda r: (r((512, 256)), r((256, 384))),
    "columns": lambda r: (r((256, 512)).T, r((256, 1024))),
}


def _operands(name, dtype=np.float32):
    rng = np.random.default_rng(7)
    return CASES[name](lambda s: rng.standard_normal(s).astype(dtype))


def _watch(monkeypatch):
    calls = []
    real = threads._gemm

    def gemm(a, b, out=None):
        calls.append((a.shape, b.shape))
        return real(a, b, out=out)

    monkeypatch.setattr(threads, "_gemm", gemm)
    return calls


def _cores(monkeypatch, n):
    monkeypatch.setattr(intra_op, "_THREADS", n)
    monkeypatch.setattr(threads, "_BUDGET", n)
    monkeypatch.setattr(threads, "cores_free", lambda: n)
    monkeypatch.setattr(threads, "cores_idle", lambda: n)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_thread_makes_one_call_with_the_pieces_bits(monkeypatch, name, dtype):
    a, b = _operands(name, dtype)
    axis, pieces = threads.gemm_pieces(a.shape[0], a.shape[1], b.shape[1])
    assert pieces > 1  # a product threads.matmul splits
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    with threads.blas_owned():
        _cores(monkeypatch, 1)
        want = threads.matmul(a, b)
        calls = _watch(monkeypatch)
        got = serial_gemm.product(a, b)
        one = all(serial_gemm._verdicts.values())
        assert len(serial_gemm._verdicts) == 1
        calls.clear()
        again = serial_gemm.product(a, b)  # the verdict kept: no second trial
    assert got.flags.c_contiguous and got.dtype == dtype
    assert np.array_equal(got, want) and np.array_equal(again, want)
    assert len(calls) == (1 if one else pieces)


def test_where_one_call_rounds_differently_the_pieces_run(monkeypatch):
    a, b = _operands("rows")
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    real = serial_gemm._one_call
    monkeypatch.setattr(serial_gemm, "_one_call",
                        lambda a, b, flip: np.nextafter(real(a, b, flip), np.inf))  # fmt: skip
    with threads.blas_owned():
        _cores(monkeypatch, 1)
        want = threads.matmul(a, b)
        serial_gemm.product(a, b)  # the trial
        calls = _watch(monkeypatch)
        got = serial_gemm.product(a, b)
    assert list(serial_gemm._verdicts.values()) == [False]
    assert np.array_equal(got, want) and len(calls) == threads.gemm_pieces(512, 256, 384)[1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_bits_do_not_depend_on_the_threads(monkeypatch, name):
    a, b = _operands(name)
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    results, threads_seen = [], []
    with threads.blas_owned():
        for n in (1, 2, 4):
            _cores(monkeypatch, n)
            calls = _watch(monkeypatch)
            results.append(serial_gemm.product(a, b))
            threads_seen.append(len(calls))
    for r in results[1:]:
        assert np.array_equal(r, results[0])
    # With two threads or more: threads.matmul's pieces.
    pieces = threads.gemm_pieces(a.shape[0], a.shape[1], b.shape[1])[1]
    assert threads_seen[1:] == [pieces, pieces]


def test_the_verdict_is_tried_at_the_first_call_whatever_the_threads(monkeypatch):
    a, b = _operands("rows")
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    with threads.blas_owned():
        _cores(monkeypatch, 2)
        want = threads.matmul(a, b)
        assert np.array_equal(serial_gemm.product(a, b), want)
        assert len(serial_gemm._verdicts) == 1  # tried on two threads already
        _cores(monkeypatch, 1)
        calls = _watch(monkeypatch)
        assert np.array_equal(serial_gemm.product(a, b), want)
    one = all(serial_gemm._verdicts.values())
    assert len(calls) == (1 if one else threads.gemm_pieces(512, 256, 384)[1])


def test_small_products_and_odd_layouts_are_threads_matmul(monkeypatch):
    rng = np.random.default_rng(2)
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    _cores(monkeypatch, 1)
    small = rng.standard_normal((8, 8)).astype(np.float32)
    assert np.array_equal(serial_gemm.product(small, small), small @ small)
    strided = rng.standard_normal((512, 512)).astype(np.float32)[:, ::2]  # neither C nor F
    b = rng.standard_normal((256, 384)).astype(np.float32)
    assert np.array_equal(serial_gemm.product(strided, b), threads.matmul(strided, b))
    assert not serial_gemm._verdicts


def test_products_too_large_to_try_are_threads_matmul(monkeypatch):
    a, b = _operands("rows")
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    monkeypatch.setattr(serial_gemm, "TRIAL_BYTES", a.nbytes + b.nbytes - 1)
    _cores(monkeypatch, 1)
    with threads.blas_owned():
        want = threads.matmul(a, b)
        calls = _watch(monkeypatch)
        got = serial_gemm.product(a, b)
    assert np.array_equal(got, want) and not serial_gemm._verdicts
    assert len(calls) == threads.gemm_pieces(512, 256, 384)[1]


def test_a_coarse_product_splits_beside_another_busy_task(monkeypatch):
    """A product of COARSE_GRAIN multiply-adds or more takes a core another task shares
    (threads_for's cores_free): with one other runnable task (no idle core) it still runs in
    threads.matmul's pieces on two threads, not as one call."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 256)).astype(np.float32)
    assert a.shape[0] * a.shape[1] * b.shape[1] >= threads.COARSE_GRAIN
    monkeypatch.setattr(serial_gemm, "_verdicts", {})
    with threads.blas_owned():
        _cores(monkeypatch, 2)
        monkeypatch.setattr(threads, "cores_idle", lambda: 1)  # another task runnable
        split = []
        real = intra_op.parallel_for

        def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
            split.append(max_threads)
            return real(n, fn, grain, pieces_per_thread, max_threads)

        monkeypatch.setattr(intra_op, "parallel_for", watch)
        want = threads.matmul(a, b)
        serial_gemm.product(a, b)  # its first call tries the one-call verdict
        split.clear()
        got = serial_gemm.product(a, b)
        assert np.array_equal(got, want)
        assert split == [2]  # pieces on two threads, whatever the verdict
