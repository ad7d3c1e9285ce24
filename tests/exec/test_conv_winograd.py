"""Winograd convolutions (conv_winograd): the written-out tile transforms against the Cook-Toom
matrices, and Conv2D and both gradients against the GEMM paths (the reference, and what
RILL_JIT=0 runs) within rounding, on the geometries the tiles meet (borders, partial tiles,
blocks of one image), with the same bits on any number of threads."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import conv_winograd, intra_op, jit
from rill.exec.kernels import fused_kernels as fk
from rill.exec.testing import run_kernel

# Under RILL_JIT=0 the compiled loops these cases run are off.
needs_jit = pytest.mark.skipif(not jit.enabled(), reason="RILL_JIT=0 turns the compiled loops off")

pytest.importorskip("numba")

RNG = np.random.default_rng(2121)


def run_op(op_type, inputs, attrs):
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


def conv_three(x, w, padding):
    attrs = dict(strides=[1, 1, 1, 1], padding=padding, data_format="NHWC")
    (y,) = run_op("Conv2D", [x, w], attrs)
    dy = np.sin(np.arange(y.size, dtype=np.float64)).astype(x.dtype).reshape(y.shape)
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    return y, dx, dw


def reference(x, w, padding, dtype=None):
    """The GEMM paths' results (Winograd off), in `dtype` (x's by default)."""
    dtype = dtype or x.dtype
    old = conv_winograd.set_enabled(False)
    try:
        return conv_three(x.astype(dtype), w.astype(dtype), padding)
    finally:
        conv_winograd.set_enabled(old)


def close(got, x, w, padding, want=None):
    """got (a conv_three result) against the float64 GEMM paths, relative to the result's scale:
    Winograd rounds differently, but a wrong transform is off by the result's size."""
    dtype = x.dtype
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for g_, r_ in zip(got, want or reference(x, w, padding, np.float64)):
        scale = max(1.0, float(np.abs(r_).max()))
        assert g_.dtype == dtype and g_.shape == r_.shape
        assert np.abs(g_.astype(np.float64) - r_).max() <= tol * scale


@pytest.fixture
def small(monkeypatch):
    """Winograd for small test shapes too (no work or channel floor)."""
    monkeypatch.setattr(conv_winograd, "_MIN_WORK", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHANNELS", 1)
    return monkeypatch


@needs_jit
@pytest.mark.parametrize("m, r", conv_winograd._TILE_SETS)
def test_written_out_transforms_match_the_cook_toom_matrices(m, r):
    loops = conv_winograd._loops()
    at, g, bt = conv_winograd._matrices(m, r)
    a = m + r - 1
    # One image of exactly one tile, channels as independent lanes.
    d = RNG.standard_normal((1, a, a, 3))
    v = np.empty((a * a, 1, 3))
    getattr(loops, f"input_tiles_{a}")(d, m, 0, 0, 1, 1, 0, 1, v)
    want = np.einsum("xi,ijc,yj->xyc", bt, d[0], bt).reshape(a * a, 3)
    np.testing.assert_allclose(v[:, 0], want, rtol=1e-13, atol=1e-13)
    mm = RNG.standard_normal((a * a, 1, 3))
    out = np.empty((1, m, m, 3))
    getattr(loops, f"output_tiles_{a}_{m}")(mm, m, m, 1, 1, 0, 1, out)
    want = np.einsum("ix,xyc,jy->ijc", at, mm[:, 0].reshape(a, a, 3), at)
    np.testing.assert_allclose(out[0], want, rtol=1e-13, atol=1e-13)
    dy = RNG.standard_normal((1, m, m, 3))
    z = np.empty((a * a, 1, 3))
    getattr(loops, f"gradient_tiles_{a}_{m}")(dy, 1, 1, 0, 1, z)
    want = np.einsum("ix,ijc,jy->xyc", at, dy[0], at).reshape(a * a, 3)
    np.testing.assert_allclose(z[:, 0], want, rtol=1e-13, atol=1e-13)
    # and the matrices compute a correlation
    gg, dd = RNG.standard_normal(r), RNG.standard_normal(m + r - 1)
    np.testing.assert_allclose(at @ ((g @ gg) * (bt @ dd)), np.correlate(dd, gg, "valid"))


GEOMETRIES = [
    # x NHWC, filter, padding: full and partial tiles, borders on every side
    ((3, 14, 14, 8), (5, 5, 8, 6), "SAME"),
    ((2, 11, 9, 5), (5, 5, 5, 7), "SAME"),
    ((2, 13, 12, 4), (5, 5, 4, 3), "VALID"),
    ((3, 10, 10, 6), (3, 3, 6, 9), "SAME"),
    ((2, 9, 15, 7), (3, 3, 7, 4), "VALID"),
]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_winograd_matches_the_gemm_paths(small, geom, dtype):
    xs, ws, padding = geom
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    calls = []
    real = conv_winograd._loops

    def watched():
        calls.append(1)
        return real()

    small.setattr(conv_winograd, "_loops", watched)
    got = conv_three(x, w, padding)
    assert calls  # Winograd ran
    close(got, x, w, padding)


@pytest.mark.parametrize("geom", [GEOMETRIES[0], GEOMETRIES[2]], ids=str)
def test_2x2_tiles_of_a_5x5_filter(small, geom):
    small.setattr(conv_winograd, "_TILES", {3: 4, 5: 2})
    xs, ws, padding = geom
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    close(conv_three(x, w, padding), x, w, padding)


@needs_jit
def test_explicit_padding_beyond_the_window_keeps_the_gemm_paths(small):
    from rill.exec.kernels.conv_common import _Window

    win = _Window([1, 1, 1, 1], [1, 1, 1, 1], "EXPLICIT", [0, 0, 5, 5, 1, 1, 0, 0], "NHWC")
    assert conv_winograd.winograd_tile(win, 3, 3, 8, 8, 2, 20, 10, (5, 1), np.float32) == 0
    assert conv_winograd.winograd_tile(win, 3, 3, 8, 8, 2, 20, 10, (2, 1), np.float32) == 4


@needs_jit
def test_the_cnn_convolution_takes_winograd_and_matches():
    # The MNIST CNN's second convolution, at its own size (no monkeypatching).
    x = RNG.standard_normal((8, 14, 14, 32)).astype(np.float32)
    w = (RNG.standard_normal((5, 5, 32, 64)) * 0.05).astype(np.float32)
    from rill.exec.kernels.conv_common import _Window

    win = _Window([1, 1, 1, 1], [1, 1, 1, 1], "SAME", [], "NHWC")
    assert conv_winograd.winograd_tile(win, 5, 5, 32, 64, 8, 14, 14, (2, 2), x.dtype) == 4
    close(conv_three(x, w, "SAME"), x, w, "SAME")


def test_without_the_compiled_loops_the_gemm_paths_run(small):
    x = RNG.standard_normal((2, 10, 10, 6)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 6, 4)).astype(np.float32)
    old = jit.set_enabled(False)
    try:
        off = conv_three(x, w, "SAME")
    finally:
        jit.set_enabled(old)
    for a, b in zip(off, reference(x, w, "SAME")):
        assert np.array_equal(a, b)  # bit-identical to the GEMM paths


def _same_bits_on_one_and_three_threads(small, x, w):
    """conv_three on one free core and on three (every kernel split): the same bits, and close
    to the GEMM paths."""
    small.setattr(threads, "GEMM_GRAIN", 1)
    small.setattr(threads, "SPLIT_GRAIN", 1)
    small.setattr(intra_op, "_THREADS", 3)
    small.setattr(threads, "_BUDGET", 3)
    results = []
    for free in (1, 3):
        small.setattr(threads, "cores_free", lambda free=free: free)
        small.setattr(threads, "cores_idle", lambda free=free: free)
        results.append(conv_three(x, w, "SAME"))
    for a, b in zip(*results):
        assert np.array_equal(a, b)
    close(results[0], x, w, "SAME")


@pytest.mark.parametrize("block_bytes", [1, 4000, 1 << 30])
def test_blocks_and_threads_keep_the_bits(small, block_bytes):
    # 1 byte: blocks of one tile row of one image; 4000: several images; 1 GiB: one block
    x = RNG.standard_normal((5, 12, 13, 6)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 6, 5)).astype(np.float32)
    small.setattr(conv_winograd, "_BLOCK_BYTES", block_bytes)
    small.setattr(conv_winograd, "_MIN_TILES", 1)
    _same_bits_on_one_and_three_threads(small, x, w)


@pytest.mark.parametrize(
    "n, side, blocks", [(1, 56, 4), (1, 28, 2), (1, 14, 1), (2, 28, 4), (3, 20, 6), (64, 14, 8)]
)
def test_a_small_batch_splits_into_blocks_of_tile_rows(n, side, blocks):
    # batch-1 inference: two or four blocks of at least _SPLIT_TILES tiles share one image
    tiles = conv_winograd._Tiles(n, side, side, 2, 4, 64, 4)
    assert len(tiles.blocks) == blocks
    assert tiles.blocks[0][0] == 0 and tiles.blocks[-1][1] == n * tiles.tpi
    assert all(a[1] == b[0] for a, b in zip(tiles.blocks, tiles.blocks[1:]))
    if len(tiles.blocks) > 1:
        assert min(t1 - t0 for t0, t1 in tiles.blocks) >= conv_winograd._MIN_TILES


def test_one_image_in_tile_row_blocks_keeps_the_bits_on_any_thread_count(small):
    x = RNG.standard_normal((1, 34, 31, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    small.setattr(conv_winograd, "_SPLIT_TILES", 16)
    assert len(conv_winograd._Tiles(1, 34, 31, 2, 4, 7, 4).blocks) == 4
    _same_bits_on_one_and_three_threads(small, x, w)


def test_many_channels_still_make_blocks_of_many_tiles():
    tiles = conv_winograd._Tiles(4, 14, 14, 4, 8, 1024, 4)  # 256 KiB per tile
    assert len(tiles.blocks) == 2 and tiles.blocks[0] == (0, 32)


@pytest.mark.parametrize("n, side, channels", [(1, 55, 80), (8, 55, 80), (3, 41, 300)])
def test_blocks_of_tile_rows_are_even(n, side, channels):
    # SqueezeNet's 16 -> 64 channels at 55×55: 14 tile rows of 4×4 tiles, at most 13 a block,
    # make two blocks of 7 (not 13 and 1: a block of 14 tiles, its products mostly overhead).
    tiles = conv_winograd._Tiles(n, side, side, 4, 6, channels, 4)
    per_image = [t1 - t0 for t0, t1 in tiles.blocks if t0 < tiles.tpi]
    assert sum(per_image) == tiles.tpi and len(per_image) > 1
    assert max(per_image) - min(per_image) <= tiles.tw  # tile rows differ by one at most
    assert all(size % tiles.tw == 0 for size in per_image)
    if (n, side, channels) == (1, 55, 80):
        assert tiles.blocks == [(0, 98), (98, 196)]


def test_fused_conv_epilogue_on_winograd_blocks(small):
    small.setattr(conv_winograd, "_BLOCK_BYTES", 1)  # an epilogue per tile row
    small.setattr(conv_winograd, "_MIN_TILES", 1)
    x = RNG.standard_normal((2, 9, 10, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 5, 7)).astype(np.float32)
    bias = RNG.standard_normal(7).astype(np.float32)
    conv = fk.fused_conv2d([1] * 4, "SAME", [], "NHWC", [1] * 4, ["BiasAdd", "Relu"], 1, 0.2,
                           "HWIO", 0)  # fmt: skip
    got = conv(x, w, bias)
    y = reference(x, w, "SAME", np.float64)[0]
    want = np.maximum(y + bias, 0)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert (got >= 0).all() and (got == 0).any()


def test_blocks_of_whole_images_come_in_a_multiple_of_four_where_they_can():
    from rill.exec.kernels.conv_common import balanced_step

    # The MNIST CNN's second convolution: 5 images a block would make 13 blocks (two threads
    # taking them in turn: 7 and 6); 4 make 16.
    tiles = conv_winograd._Tiles(64, 14, 14, 4, 8, 32 + 64, 4)
    assert len(tiles.blocks) == 16 and tiles.blocks[1] == (64, 128)
    assert balanced_step(64, 5) == 4
    assert balanced_step(13, 5) == 4  # 4 blocks: 4, 4, 4, 1
    assert balanced_step(50, 5) == 5  # none down to half of 5 gives a multiple of 4
    assert balanced_step(3, 5) == 5 and balanced_step(4, 1) == 1  # one block; four of one


def test_filter_transforms_in_pieces_of_channels_keep_the_bits(small):
    # The filter's transform (forward, input gradient) and the filter gradient's last transform
    # are made in pieces of input channels over the threads: the same bits as in one piece, on
    # any number of threads.
    x = RNG.standard_normal((3, 12, 12, 6)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 6, 5)).astype(np.float32)
    small.setattr(conv_winograd, "_MIN_TILES", 1)
    small.setattr(threads, "GEMM_GRAIN", 1)
    small.setattr(intra_op, "_THREADS", 3)
    small.setattr(threads, "_BUDGET", 3)
    small.setattr(conv_winograd, "_MIN_FILTER_SPLIT", 1 << 30)
    small.setattr(threads, "cores_free", lambda: 1)
    whole = conv_three(x, w, "SAME")
    u = conv_winograd._filter_tiles(w, 4, np.float32)
    small.setattr(conv_winograd, "_MIN_FILTER_SPLIT", 1)
    for free in (1, 3):
        small.setattr(threads, "cores_free", lambda free=free: free)
        got = conv_three(x, w, "SAME")
        for a, b in zip(got, whole):
            assert np.array_equal(a, b)
        pieces = conv_winograd._filter_tiles(w, 4, np.float32, work=1 << 30)
        assert np.array_equal(pieces, u)
    close(whole, x, w, "SAME")
