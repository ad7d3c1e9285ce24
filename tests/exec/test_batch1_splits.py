"""Batch-1 and small-batch convolutions over the intra-op threads: a one-block Winograd
convolution splits its products by tile position, batch-1 channels-first GEMMs (pointwise,
patches) in halves where those give one call's bits. The bits never depend on the threads."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import conv_winograd, fused_conv_kernels, intra_op, jit, pointwise
from rill.exec.kernels import fused_kernels as fk
from rill.exec.testing import run_kernel

needs_jit = pytest.mark.skipif(not jit.enabled(), reason="RILL_JIT=0 turns the compiled loops off")

RNG = np.random.default_rng(2031)


@pytest.fixture
def cores(monkeypatch, idle_cores):
    """set(n): n idle cores and a pool of n threads; returns the list of (pieces, threads) of
    the parallel_for calls that get more than one thread."""
    calls = []
    real = intra_op.parallel_for

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        if max_threads is not None and max_threads > 1:
            calls.append((n, max_threads))
        return real(n, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(intra_op, "parallel_for", watch)

    def set_cores(n):
        idle_cores(n)
        calls.clear()
        return calls

    return set_cores


def _conv_nchw(x, w, strides=(1, 1), padding="SAME", fused=None, bias=None):
    with rg.Graph().as_default() as g:
        px = rg.placeholder(rg.as_dtype(x.dtype))
        pw = rg.placeholder(rg.as_dtype(w.dtype))
        attrs = dict(strides=[1, 1, *strides], padding=padding, data_format="NCHW")
        op = g.create_op("Conv2D", [px, pw], attrs)
        (y,) = run_kernel(op, x, w) if fused is None else (None,)
    if fused is not None:
        conv = fk.fused_conv2d([1, 1, *strides], padding, [], "NCHW", [1] * 4, fused, 1, 0.2,
                               "HWIO", 0)  # fmt: skip
        return conv(x, w, bias)
    return y


@needs_jit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "blas"])
def test_a_one_block_winograd_convolution_splits_by_tile_position(
    cores, monkeypatch, request, dtype, compiled
):
    # 4 images of 8×8 in 4×4 tiles: 16 tiles, one block (ResNet-18 ½'s 7×7 stage at batch 8
    # has 32); from _MIN_PRODUCT_SPLIT multiply-adds (at 64 channels, below it, they stay on
    # the calling thread) the 36 positions' products split: the compiled ones a position a
    # piece, BLAS's in 4 fixed groups.
    if compiled and pointwise._mod() is None:
        pytest.skip("the compiled product is off (RILL_CONV_DIRECT=0)")
    if not compiled:
        request.getfixturevalue("blas_products")
    monkeypatch.setattr(intra_op, "team", lambda: None)  # parallel_for, which `cores` sees
    pieces = 36 if compiled else 4
    x = RNG.standard_normal((4, 128, 8, 8)).astype(dtype)
    w = RNG.standard_normal((3, 3, 128, 128)).astype(dtype)
    tiles = conv_winograd._Tiles(4, 8, 8, 4, 6, 128 + 128, np.dtype(dtype).itemsize)
    assert 16 * 36 * 128 * 128 >= conv_winograd._MIN_PRODUCT_SPLIT > 16 * 36 * 64 * 64
    assert len(tiles.blocks) == 1
    pads = (1, 1)
    cores(1)
    one = conv_winograd.winograd_forward_nchw(x, w, 8, 8, pads, 4)
    small = conv_winograd.winograd_forward_nchw(x[:, :64], w[:, :, :64, :64], 8, 8, pads, 4)
    for n in (2, 3):
        calls = cores(n)
        got = conv_winograd.winograd_forward_nchw(x, w, 8, 8, pads, 4)
        # The filter's transform, then the products.
        assert calls == [(4, min(n, 4)), (pieces, min(n, pieces))]
        assert np.array_equal(got, one)
        calls.clear()
        got = conv_winograd.winograd_forward_nchw(x[:, :64], w[:, :, :64, :64], 8, 8, pads, 4)
        assert calls == [(4, min(n, 4))]  # the filter's transform only
        assert np.array_equal(got, small)
    if compiled and intra_op._poller() is not None:
        # Through the pool's team (a worker polling, as in a batch-1 inference): the same bits.
        monkeypatch.undo()
        request.getfixturevalue("polling_team")
        for _ in range(3):
            assert np.array_equal(conv_winograd.winograd_forward_nchw(x, w, 8, 8, pads, 4), one)
    # And it is a convolution: against the GEMM path within Winograd's rounding.
    old = conv_winograd.set_enabled(False)
    try:
        want = _conv_nchw(x, w)
    finally:
        conv_winograd.set_enabled(old)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    assert np.abs(one - want).max() <= tol * np.abs(want).max()


@pytest.mark.parametrize(
    "xs, ws, strides, fused",
    [
        ((1, 64, 28, 28), (1, 1, 64, 256), (1, 1), None),  # pointwise, batch 1 (Conv2D)
        # _FusedConv2D (from fused_conv_kernels._B1_HALVES multiply-adds)
        ((1, 128, 28, 28), (1, 1, 128, 256), (1, 1), ["BiasAdd", "Relu"]),
        ((1, 128, 7, 7), (3, 3, 128, 256), (1, 1), None),  # patches, one block
        ((1, 128, 14, 14), (3, 3, 128, 256), (2, 2), None),  # strided patches
    ],
    ids=["pointwise", "fused pointwise", "patches", "strided patches"],
)
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "blas"])
def test_batch1_channels_first_gemms_keep_one_calls_bits_on_any_thread_count(
    cores, monkeypatch, request, xs, ws, strides, fused, compiled
):
    if compiled and pointwise._mod() is None:
        pytest.skip("the compiled product is off (RILL_JIT=0 or RILL_CONV_DIRECT=0)")
    if not compiled:
        request.getfixturevalue("blas_products")
    monkeypatch.setattr(conv_winograd, "_enabled", [False])  # the GEMM paths
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    bias = RNG.standard_normal(ws[3]).astype(np.float32)
    monkeypatch.setattr(threads, "_exact", {})
    cores(1)
    one = _conv_nchw(x, w, strides, fused=fused, bias=bias)
    assert not threads._exact  # one thread: one call, nothing tried
    if compiled:
        # The compiled product (the pointwise one, or the patches times the filter): every
        # element the same chain of multiply-adds whatever rows a thread computes, so it
        # splits in row blocks (through the pool's team where workers poll, else
        # parallel_for) and no BLAS is tried.
        for spin in (True, False) if intra_op._poller() is not None else (False,):
            if not spin:
                monkeypatch.setattr(intra_op, "team", lambda: None)
            for n in (2, 4):
                calls = cores(n)
                if spin:  # a worker polling (kept polling), as in a batch-1 inference
                    request.getfixturevalue("polling_team")
                assert np.array_equal(_conv_nchw(x, w, strides, fused=fused, bias=bias), one)
                assert not threads._exact
                # No polling: row pieces over the pool (halves for the pointwise product).
                assert bool(calls) != spin
                assert all(pieces == threads for pieces, threads in calls)
        return
    for n in (2, 4):
        calls = cores(n)
        got = _conv_nchw(x, w, strides, fused=fused, bias=bias)
        assert np.array_equal(got, one)
        # Split in two halves where this BLAS gives one call's bits for them, else one call.
        assert threads._exact
        exact = all(threads._exact.values())
        assert (2, 2) in calls if exact else (2, 2) not in calls
    # Where this BLAS's halves would round differently, the product stays one call.
    monkeypatch.setattr(threads, "_exact", {})
    monkeypatch.setattr(threads, "_gemm",
                        lambda a, b, out=None: np.nextafter(np.matmul(a, b), np.inf, out=out))  # fmt: skip
    calls = cores(2)
    assert np.array_equal(_conv_nchw(x, w, strides, fused=fused, bias=bias), one)
    assert (2, 2) not in calls and not any(threads._exact.values())


@needs_jit  # the lean pointwise path (with RILL_JIT=0 Conv2D's general path splits)
def test_a_small_batch1_pointwise_product_stays_one_call(cores):
    """Below fused_conv_kernels._B1_HALVES multiply-adds a batch-1 pointwise product is one
    call on any thread count: split, it lost more in the next kernels (half their input in the
    other core's cache) than its halves saved."""
    x = RNG.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = RNG.standard_normal((1, 1, 64, 256)).astype(np.float32)
    bias = RNG.standard_normal(256).astype(np.float32)
    assert fused_conv_kernels._B1_HALVES > 64 * 28 * 28 * 256
    cores(1)
    one = _conv_nchw(x, w, fused=["BiasAdd", "Relu"], bias=bias)
    calls = cores(2)
    assert np.array_equal(_conv_nchw(x, w, fused=["BiasAdd", "Relu"], bias=bias), one)
    assert not calls


@needs_jit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "ops", [["BiasAdd", "HardSwish"], ["BiasAdd", "Swish"], ["BiasAdd"], ["Mul", "BiasAdd", "Relu"],
            ["BiasAdd", "Add", "Relu"], ["Mul", "BiasAdd", "Add"]],
    ids=str,
)  # fmt: skip
def test_a_batched_pointwise_convolution_finishes_each_image_on_its_thread(
    monkeypatch, cores, dtype, ops
):
    """From batch 2, over the Python pool (test_team_kernels covers the team's batch of
    products), each image's bias, activation (and residual) run right after its product, in
    the same block of the split: the unsplit run's bits on any thread count, gated (a
    squeeze-excite Mul first) or not, with planes large enough for the per-image gate."""
    from rill.exec.kernels.fused_kernels import fused_conv2d

    monkeypatch.setattr(intra_op, "team", lambda: None)

    n, c, h, o = 4, 64, 33, 48
    x = RNG.standard_normal((n, c, h, h)).astype(dtype)
    w = RNG.standard_normal((1, 1, c, o)).astype(dtype)
    bias = RNG.standard_normal(o).astype(dtype)
    args = [x, w]
    if ops[0] == "Mul":
        args.append(RNG.standard_normal((n, c, 1, 1)).astype(dtype))
    args.append(bias)
    if "Add" in ops:
        args.append(RNG.standard_normal((n, o, h, h)).astype(dtype))
    conv = fused_conv2d([1, 1, 1, 1], "VALID", [], "NCHW", [1] * 4, ops, len(args) - 2, 0.2,
                        "HWIO", 0)  # fmt: skip
    cores(1)
    one = conv(*args)
    calls = cores(2)
    two = conv(*args)
    assert calls, "the batch was not split over the two threads"
    assert one.shape == (n, o, h, h) and two.dtype == dtype
    np.testing.assert_array_equal(two.view(np.uint8), one.view(np.uint8))
    # The unfused ops' values: the product then the epilogue over the whole output.
    xs = x * args[2] if ops[0] == "Mul" else x
    want = np.einsum("nchw,co->nohw", xs, w[0, 0], optimize=False) + bias[:, None, None]
    if "Add" in ops:
        want = want + args[-1]
    if ops[-1] == "Relu":
        want = np.maximum(want, 0)
    elif ops[-1] == "HardSwish":
        want = want * np.clip(want / 6 + 0.5, 0, 1)
    elif ops[-1] == "Swish":
        want = want / (1 + np.exp(-want))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(two, want, rtol=tol, atol=tol * 10)
