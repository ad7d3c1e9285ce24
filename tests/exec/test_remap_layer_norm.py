"""The remapper's layer-normalization fusion: the chain the ONNX importer builds for
LayerNormalization over the last axis (Mean, SquaredDifference, Mean, AddV2 eps, Rsqrt, Sub, Mul,
Mul scale, AddV2 offset) becomes one _FusedLayerNorm whose results are the unfused chain's bit
for bit — with the compiled loops and without them, float32 and float64, rows of 1 to 1808 values
(numpy's pairwise sums, split up to four times) and longer, NaN, ±inf and constant rows — and it
fuses only that chain, with nothing else reading its intermediates."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import run_both

import rill.graph as rg
from rill.exec.kernels import fused_kernels, jit

RNG = np.random.default_rng(2027)


def _op(type_, inputs, attrs=None):
    return rg.get_default_graph().create_op(type_, inputs, attrs or {}).outputs[0]


def _layer_norm(x, scale, offset, dtype, axis=-1, eps=1e-5, keep=None):
    ax = rg.constant(np.asarray([axis], np.int64))
    mean = _op("Mean", [x, ax], {"keep_dims": True})
    var = _op("Mean", [_op("SquaredDifference", [x, mean]), ax], {"keep_dims": True})
    inv = _op("Rsqrt", [_op("AddV2", [var, rg.constant(np.asarray(eps, dtype))])])
    if keep is not None:
        keep.append(mean)
    y = _op("Mul", [_op("Sub", [x, mean]), inv])
    return _op("AddV2", [_op("Mul", [y, scale]), offset])


def _assert_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan], b[~nan])
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


def _graph(shape, dtype, axis=-1, keep=None):
    g = rg.Graph()
    n = shape[-1]
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, *shape[1:]], name="x")
        scale = rg.constant((RNG.standard_normal(n) + 1).astype(dtype))
        offset = rg.constant(RNG.standard_normal(n).astype(dtype))
        xi = _op("Identity", [x])
        y = _layer_norm(xi, scale, offset, dtype, axis, keep=keep)
    return g, x, y


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 5, 256), (3, 7), (4, 384), (2, 129), (2, 1808), (2, 1900)])
def test_the_chain_fuses_and_keeps_its_bits(shape, dtype, compiled):
    g, x, y = _graph(shape, dtype, axis=-1 if shape[-1] != 384 else len(shape) - 1)
    xv = (RNG.standard_normal(shape) * 30 + 5).astype(dtype)
    rows = xv.reshape(-1, shape[-1])
    rows[0, 0] = np.nan
    rows[1, 1] = np.inf
    rows[2 % len(rows)] = 3.0  # a constant row: variance 0
    old = jit.set_enabled(compiled)
    try:
        with np.errstate(all="ignore"):
            fused, plain, types = run_both(g, y, {x: xv})
    finally:
        jit.set_enabled(old)
    assert types.count("_FusedLayerNorm") == 1
    assert not {"Mean", "Rsqrt", "SquaredDifference", "Sub"} & set(types)
    _assert_bits(fused, plain)


def test_a_fetched_mean_or_another_axis_does_not_fuse():
    keep = []
    g, x, y = _graph((2, 16), np.float32, keep=keep)
    xv = RNG.standard_normal((2, 16)).astype(np.float32)
    fused, plain, types = run_both(g, [y, keep[0]], {x: xv})
    assert "_FusedLayerNorm" not in types
    for a, b in zip(fused, plain):
        _assert_bits(a, b)
    g, x, y = _graph((2, 16), np.float32, axis=0)  # over the batch: not a layer norm
    fused, plain, types = run_both(g, y, {x: xv})
    assert "_FusedLayerNorm" not in types and "Rsqrt" in types
    _assert_bits(fused, plain)


def test_the_kernel_checks_its_vectors():
    from rill.graph import dtypes
    from rill.graph.errors import InvalidArgumentError

    k = fused_kernels.fused_layer_norm(dtypes.float32, 1e-5)
    x = np.ones((2, 4), np.float32)
    with pytest.raises(InvalidArgumentError, match="last axis"):
        k(x, np.ones(3, np.float32), np.ones(4, np.float32))


def test_large_inputs_split_over_threads_with_the_same_bits(monkeypatch):
    """From 2 * _NORM_PIECE values the rows split over the intra-op threads (a smaller input,
    ViT-small's [197, 384] at batch 1, stays on one thread: split it lost); each row is computed
    the same way on whichever thread, so the bits are the one-thread run's."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    compute = fused_kernels.fused_layer_norm(rg.float32, 1e-5)
    scale, offset = RNG.standard_normal((2, 384)).astype(np.float32)
    calls = []
    real = fused_kernels.parallel_for

    def watch(n, body, grain=1, pieces_per_thread=1, max_threads=None):
        calls.append(n // grain)
        return real(n, body, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(fused_kernels, "parallel_for", watch)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    for rows, pieces in ((197, 0), (1576, 2)):
        x = RNG.standard_normal((rows, 384)).astype(np.float32)
        monkeypatch.setattr(intra_op, "_THREADS", 1)
        one = compute(x, scale, offset)
        monkeypatch.setattr(intra_op, "_THREADS", 2)
        calls.clear()
        two = compute(x, scale, offset)
        assert calls == [pieces]  # whole grains: 0 and 1 run on one thread
        _assert_bits(two, one)
