"""Elementwise, row-wise and concatenating kernels split in bands over the intra-op threads
(rill.exec.executor.bands): the same bits as the kernel run whole, on any number of threads;
small tensors, other dtypes, a busy machine and intra_op_parallelism_threads=1 keep one call."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import ConfigProto, Session
from rill.exec.executor import bands
from rill.exec.kernels import intra_op
from rill.graph.errors import InvalidArgumentError


@pytest.fixture
def cores(monkeypatch, idle_cores):
    """set(n): the machine has n idle cores and rill's pool n threads; returns the list of
    (pieces, threads) of every parallel_for call the bands make."""
    calls = []
    real = intra_op.parallel_for

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        calls.append((n, max_threads))
        return real(n, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(bands, "parallel_for", watch)
    monkeypatch.setattr(bands, "MIN_WORK", 1 << 15)  # test-sized tensors split too

    def set_cores(n):
        idle_cores(n)
        calls.clear()
        return calls

    return set_cores


def _run(build, feeds, config=None):
    """Runs build(*placeholders) in a Session on the feeds."""
    with rg.Graph().as_default():
        ps = [rg.placeholder(rg.as_dtype(v.dtype)) for v in feeds]
        y = build(*ps)
        with Session(config=config) as s:
            return s.run(y, dict(zip(ps, feeds)))


_RNG = np.random.default_rng(11)
_MIN_WORK = bands.MIN_WORK  # the module's own, before the fixture lowers it


def _data(shape, dtype=np.float32, positive=False):
    x = _RNG.standard_normal(shape).astype(dtype)
    return np.abs(x) + dtype(0.5) if positive else x


CASES = [
    ("Mul, broadcast row", lambda a, b: rg.multiply(a, b), [(4, 197, 192), (192,)]),
    ("AddV2, same shapes", lambda a, b: rg.add(a, b), [(2, 3, 127, 211), (2, 3, 127, 211)]),
    ("AddV2, broadcast column", lambda a, b: rg.add(a, b), [(1, 389, 400), (1, 389, 1)]),
    ("RealDiv", lambda a, b: rg.realdiv(a, b), [(6, 150, 160), (6, 150, 160)]),
    ("Tanh", lambda a: rg.tanh(a), [(3, 300, 257)]),
    ("Tanh, split inside rows", lambda a: rg.tanh(a), [(2, 300, 257)]),
    ("Exp", lambda a: rg.exp(a), [(1, 1, 300000)]),
    ("Log", lambda a: rg.log(a), [(5, 200, 300)]),
    ("Sqrt", lambda a: rg.sqrt(a), [(5, 200, 300)]),
    ("Sigmoid", lambda a: rg.sigmoid(a), [(3, 300, 257)]),
    ("Erf", lambda a: rg.erf(a), [(2, 100, 300)]),
    ("SquaredDifference", lambda a, b: rg.squared_difference(a, b), [(8, 197, 96), (8, 197, 1)]),
    ("Softmax", lambda a: rg.nn.softmax(a), [(1, 3, 197, 197)]),
    ("Softmax, 2-D", lambda a: rg.nn.softmax(a), [(900, 333)]),
    ("LogSoftmax", lambda a: rg.nn.log_softmax(a), [(8, 4, 64, 64)]),
    ("ConcatV2", lambda a, b: rg.concat([a, b], axis=1), [(8, 64, 23, 29), (8, 96, 23, 29)]),
    ("Mean, inner axes", lambda a: rg.reduce_mean(a, axis=[1, 2], keepdims=True), [(8, 48, 56, 7)]),
    ("Mean, middle axis", lambda a: rg.reduce_mean(a, axis=1), [(4, 197, 96)]),
    ("Sum, inner axes", lambda a: rg.reduce_sum(a, axis=[1, 2]), [(2, 96, 112, 9)]),
    ("Max, inner axes", lambda a: rg.reduce_max(a, axis=[1, 2]), [(16, 100, 90)]),
    ("ConcatV2, last axis", lambda a, b: rg.concat([a, b], axis=-1), [(1, 500, 300), (1, 500, 77)]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, build, shapes", CASES, ids=[c[0] for c in CASES])
def test_banded_kernels_give_the_whole_kernels_bits_on_any_thread_count(
    cores, name, build, shapes, dtype
):
    positive = name in ("RealDiv", "Log", "Sqrt")
    feeds = [_data(s, dtype, positive=positive) for s in shapes]
    cores(1)
    whole = _run(build, feeds)
    for n in (2, 3, 4):
        calls = cores(n)
        got = _run(build, feeds)
        # The kernel was split: bands taken by up to n threads.
        assert calls and all(pieces >= 1 and t == n for pieces, t in calls), calls
        assert got.dtype == whole.dtype and got.shape == whole.shape
        assert np.array_equal(got, whole, equal_nan=True), name
    assert np.isfinite(whole).all()


@pytest.mark.parametrize(
    "build, shape",
    [
        (lambda a: rg.reduce_mean(a, axis=[2, 3], keepdims=True), (8, 48, 56, 56)),
        (lambda a: rg.reduce_mean(a, axis=-1), (1, 197, 768)),
        (lambda a: rg.reduce_sum(a, axis=[2, 3]), (1, 96, 112, 112)),
    ],
    ids=["Mean, planes", "Mean, last axis", "Sum, planes"],
)
def test_trailing_means_and_sums_are_left_to_their_kernel(cores, build, shape):
    """Mean and Sum over trailing axes split themselves (reduction_kernels' row sums): the
    bands leave them whole, and the bits are the one-thread kernel's on any thread count."""
    x = _data(shape)
    cores(1)
    whole = _run(build, [x])
    for n in (2, 4):
        calls = cores(n)
        got = _run(build, [x])
        assert not calls
        assert np.array_equal(got, whole)


def test_small_tensors_other_dtypes_and_busy_cores_run_the_kernel_whole(cores):
    small = [_data((10, 20)), _data((20,))]
    calls = cores(4)
    assert np.array_equal(_run(rg.multiply, small), small[0] * small[1])
    assert not calls  # under MIN_WORK element-passes
    ints = [_RNG.integers(-9, 9, (64, 4096)).astype(np.int32)] * 2
    assert np.array_equal(_run(rg.multiply, ints), ints[0] * ints[1])
    assert not calls  # only float32 / float64 split
    mixed = [_data((64, 4096)), _data((64, 4096), np.float64)]
    with pytest.raises((InvalidArgumentError, TypeError)):  # the graph's own dtype check
        _run(rg.multiply, mixed)
    big = [_data((64, 4096)), _data((4096,))]
    calls = cores(1)  # no idle core: one thread, one call
    assert np.array_equal(_run(rg.multiply, big), big[0] * big[1])
    assert not calls
    cores(4)
    one = ConfigProto(intra_op_parallelism_threads=1)
    calls = cores(4)
    assert np.array_equal(_run(rg.multiply, big, config=one), big[0] * big[1])
    assert not calls  # the step's intra-op bound
    two = ConfigProto(intra_op_parallelism_threads=2)
    assert np.array_equal(_run(rg.multiply, big, config=two), big[0] * big[1])
    assert calls and all(t == 2 for _, t in calls)


def test_shapes_that_do_not_broadcast_fail_as_the_kernel_does(cores):
    cores(4)
    bad = [_data((64, 4096)), _data((64, 4095))]
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        _run(lambda a, b: rg.multiply(a, b), bad)
    a, b = _data((8, 64, 40, 50)), _data((8, 64, 41, 50))
    with pytest.raises(InvalidArgumentError, match="dimension 2 must be equal"):
        _run(lambda p, q: rg.concat([p, q], axis=1), [a, b])


def test_a_band_failure_on_a_worker_is_raised_by_the_step(cores, monkeypatch):
    """An exception in a band computed on a pool thread reaches the caller (parallel_for)."""
    calls = cores(2)
    x = _data((8, 300, 300))
    plain = bands._compute_bands(lambda a: np.tanh(a), 1, rowwise=False)
    seen = []

    def fails_after_first(a):
        seen.append(a.shape)
        if len(seen) > 1:
            raise ValueError("band failed")
        return np.tanh(a)

    wrapped = bands._compute_bands(fails_after_first, 1, rowwise=False)
    with pytest.raises(ValueError, match="band failed"):
        wrapped(x)
    assert calls
    assert np.array_equal(plain(x), np.tanh(x))


def test_the_split_starts_at_min_work(cores, monkeypatch):
    """A ViT-small batch-8 residual add (303 K values, 1.2 MB: about as fast on one thread as in
    two halves) stays one call; a 1.05 M-value add and its batch-8 MLP activation (1.2 M
    values) split in eight bands."""
    monkeypatch.setattr(bands, "MIN_WORK", _MIN_WORK)
    y = _data((768,))
    calls = cores(2)
    residual = _data((8, 197, 192))
    assert np.array_equal(_run(rg.add, [residual, residual]), residual + residual)
    assert not calls
    just = _data((4, 256, 1024))
    assert np.array_equal(_run(rg.add, [just, just]), just + just)
    assert calls == [(8, 2)]
    calls.clear()
    large = _data((8, 197, 768))
    assert np.array_equal(_run(rg.multiply, [large, y]), large * y)
    assert calls == [(8, 2)]


def test_a_kernel_that_changes_dtype_or_shape_runs_whole(cores):
    cores(2)
    x = _data((8, 300, 300))
    widen = bands._compute_bands(lambda a: a.astype(np.float64) * 2, 1, rowwise=False)
    got = widen(x)
    assert got.dtype == np.float64 and np.array_equal(got, x.astype(np.float64) * 2)
    first_column = bands._compute_bands(lambda a: a[..., :1], 1, rowwise=True)
    assert np.array_equal(first_column(x), x[..., :1])


def test_kernels_of_several_passes_get_contiguous_bands(cores):
    """Bands of a kernel run on its own parts (Softmax, Erf, reductions) are contiguous parts of
    a C-contiguous tensor: a kernel that would take another path for strided arrays runs the
    same one on its bands as on the whole."""
    cores(2)
    seen = []

    def kernel(a, *rest):
        seen.append(a.flags.c_contiguous)
        return np.tanh(a) if not rest else a.sum(axis=tuple(int(i) for i in rest[0]))

    x = _data((2, 3, 200, 300))
    assert np.array_equal(bands._compute_bands(kernel, 4, rowwise=True)(x), np.tanh(x))
    axes = np.array([2, 3], np.int32)
    assert np.array_equal(bands._reduce_bands(kernel)(x, axes), x.sum(axis=(2, 3)))
    assert len(seen) >= 4 and all(seen)


def test_a_ufunc_op_whose_kernel_is_not_the_plain_ufunc_runs_its_kernel_per_band(cores):
    """Were Mul's kernel replaced by one of its own, the bands would call that kernel (on
    contiguous parts), never numpy's ufunc in its place."""
    cores(2)
    calls = []

    def own_mul(a, b):
        calls.append(a.shape)
        return np.multiply(a, b) + np.float32(1)

    x, y = _data((4, 300, 300)), _data((300,))
    wrapped = bands.wrap("Mul", own_mul)
    assert np.array_equal(wrapped(x, y), x * y + np.float32(1))
    assert len(calls) >= 2 and all(s[0] < 4 for s in calls)
    from rill.exec.kernels import math_kernels

    assert bands._is_ufunc(math_kernels._ufunc_kernel("multiply", True)(np), np.multiply)
    assert bands._is_ufunc(np.tanh, np.tanh)
    assert not bands._is_ufunc(own_mul, np.multiply)
