"""Channels-first Winograd convolutions (conv_winograd.winograd_forward_nchw): NCHW Conv2D and
the NCHW _FusedConv2D (bias and activation, or bias, residual and Relu) against the GEMM paths
within rounding (conv_winograd's own tolerance), the tile floor, and RILL_JIT=0 keeping the
GEMM paths bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.kernels import conv_winograd, fused_conv_kernels, jit
from rill.exec.kernels.conv_common import _Window
from rill.exec.testing import run_kernel
from rill.graph.errors import InvalidArgumentError

pytest.importorskip("numba")

# The Winograd paths are compiled loops: with RILL_JIT=0 only the GEMM paths run (checked by
# test_without_the_compiled_loops_the_gemm_path_runs, which turns the loops off itself).
needs_jit = pytest.mark.skipif(not jit.enabled(), reason="RILL_JIT=0 turns Winograd off")

RNG = np.random.default_rng(2020)

GEOMETRIES = [
    # x NCHW, filter HWIO, padding: full and partial tiles, borders on every side
    ((2, 6, 10, 10), (3, 3, 6, 9), "SAME"),
    ((2, 7, 9, 15), (3, 3, 7, 4), "VALID"),
    ((3, 8, 14, 14), (5, 5, 8, 6), "SAME"),
    ((2, 5, 11, 9), (5, 5, 5, 7), "SAME"),
]


@pytest.fixture
def small(monkeypatch):
    """Winograd for small test shapes too (no work, channel or tile floor; 4×4 tiles for a
    3×3 filter however few), and a record of the channels-first Winograd calls."""
    monkeypatch.setattr(conv_winograd, "_FEW_TILES", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_WORK", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHANNELS", 1)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES_NCHW", 1)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES_CACHED", 1)
    calls = []
    real = conv_winograd.winograd_forward_nchw

    def watched(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(conv_winograd, "winograd_forward_nchw", watched)
    return calls


def conv2d(x, w, padding):
    attrs = dict(strides=[1, 1, 1, 1], padding=padding, data_format="NCHW")
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(a.dtype)) for a in (x, w)]
        op = g.create_op("Conv2D", phs, attrs)
        return run_kernel(op, x, w)[0]


def gemm(fn, *args):
    """fn(*args) with the Winograd paths off: the GEMM paths, the reference."""
    old = conv_winograd.set_enabled(False)
    try:
        return fn(*args)
    finally:
        conv_winograd.set_enabled(old)


def close(got, want, dtype):
    """conv_winograd's tolerance: relative to the result's scale (a wrong transform is off by
    the result's size)."""
    tol = 1e-12 if dtype == np.float64 else 1e-4
    assert got.dtype == dtype and got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got.astype(np.float64) - want.astype(np.float64)).max() <= tol * scale


@needs_jit
@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nchw_conv2d_takes_winograd_and_matches_the_gemm_path(small, geom, dtype):
    xs, ws, padding = geom
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    want = gemm(conv2d, x.astype(np.float64), w.astype(np.float64), padding)
    assert not small  # the reference ran the GEMM path
    got = conv2d(x, w, padding)
    assert small == [xs]
    close(got, want, dtype)


@needs_jit
@pytest.mark.parametrize("act", [None, "Relu", "Relu6", "Swish"])
def test_fused_nchw_conv_with_bias_and_activation(small, act):
    x = RNG.standard_normal((2, 16, 12, 10)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 16, 24)) * 0.2).astype(np.float32)
    bias = RNG.standard_normal(24).astype(np.float32)
    ops = ["BiasAdd"] + ([act] if act else [])
    conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4, ops, 1, 0.2)
    want = gemm(conv, x, w, bias)
    assert not small
    got = conv(x, w, bias)
    assert small == [x.shape]
    close(got, want, np.float32)
    if act in ("Relu", "Relu6"):
        assert (got >= 0).all() and (got == 0).any()


@needs_jit
@pytest.mark.parametrize("relu", [False, True])
def test_fused_nchw_conv_with_a_residual(small, relu):
    x = RNG.standard_normal((2, 16, 9, 11)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 16, 16)) * 0.2).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    side = RNG.standard_normal((2, 16, 9, 11)).astype(np.float32)
    ops = ["BiasAdd", "Add"] + (["Relu"] if relu else [])
    conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4, ops, 2, 0.2)
    kept = side.copy()
    want = gemm(conv, x, w, bias, side)
    got = conv(x, w, bias, side)
    assert small == [x.shape]
    close(got, want, np.float32)
    np.testing.assert_array_equal(side, kept)  # the side input is read, never written


@needs_jit
def test_resnet_sized_convolutions_pass_the_tile_floor():
    # ResNet-18 at half width: its first stage (56×56, 32 channels) at batch 1 makes 196 tiles;
    # its 7×7 stage makes 4 per image, too few even at batch 8.
    win = _Window([1, 1, 1, 1], [1, 1, 1, 1], "SAME", [], "NCHW")
    assert conv_winograd.winograd_tile_nchw(win, 3, 3, 32, 32, 1, 56, 56, (1, 1), np.float32) == 4
    assert conv_winograd.winograd_tile_nchw(win, 3, 3, 256, 256, 8, 7, 7, (1, 1), "float32") == 0
    assert conv_winograd.winograd_tile_nchw(win, 3, 3, 32, 32, 1, 56, 56, (1, 1), np.int32) == 0
    # the channels-last entry keeps refusing channels-first windows
    assert conv_winograd.winograd_tile(win, 3, 3, 32, 32, 1, 56, 56, (1, 1), np.float32) == 0
    strided = _Window([1, 1, 2, 2], [1, 1, 1, 1], "SAME", [], "NCHW")
    assert conv_winograd.winograd_tile_nchw(strided, 3, 3, 32, 32, 1, 28, 28, (0, 0), "f4") == 0


def watch_tiles(monkeypatch):
    """The tile size of each channels-first Winograd call, recorded."""
    sizes = []
    real = conv_winograd.winograd_forward_nchw

    def watched(x, w, oh, ow, pads, m, *args, **kwargs):
        sizes.append(m)
        return real(x, w, oh, ow, pads, m, *args, **kwargs)

    monkeypatch.setattr(conv_winograd, "winograd_forward_nchw", watched)
    return sizes


@needs_jit
@pytest.mark.parametrize(
    "xs, padding, m",
    [
        ((1, 8, 7, 7), "SAME", 2),  # 4 tiles of 4×4, 16 of 2×2
        ((1, 6, 12, 12), "SAME", 2),  # 9 of 4×4
        ((2, 5, 9, 6), "VALID", 2),  # partial 2×2 tiles, two images
        ((1, 8, 14, 14), "SAME", 4),  # 16 of 4×4: enough
        ((8, 8, 7, 7), "SAME", 4),  # a batch: 32 of 4×4
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_4x4_tiles_take_2x2_tiles(monkeypatch, xs, padding, m, dtype):
    # A 3×3 convolution on small planes takes 2×2 tiles where 4×4 ones would be fewer than
    # _FEW_TILES, the same convolution within Winograd's tolerance.
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHANNELS", 1)
    sizes = watch_tiles(monkeypatch)
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((3, 3, xs[1], 12)).astype(dtype)
    want = gemm(conv2d, x.astype(np.float64), w.astype(np.float64), padding)
    assert sizes == []
    close(conv2d(x, w, padding), want, dtype)
    assert sizes == [m]


@needs_jit
@pytest.mark.parametrize("n, m", [(1, 2), (2, 2)])
def test_2x2_tiles_need_the_tile_floor_too(monkeypatch, n, m):
    # 4×4 planes: one 4×4 tile an image, four 2×2 ones; below _MIN_TILES_CACHED 2×2 tiles the
    # GEMM path runs.
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHANNELS", 1)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES_CACHED", 8)
    sizes = watch_tiles(monkeypatch)
    x = RNG.standard_normal((n, 8, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 8, 12)).astype(np.float32)
    close(conv2d(x, w, "SAME"), gemm(conv2d, x, w, "SAME"), np.float32)
    assert sizes == ([] if n == 1 else [m])


@needs_jit
def test_a_node_holds_a_transform_per_tile_size(monkeypatch):
    # A node serving batch 1 (2×2 tiles) and batch 4 (4×4 tiles) of a small plane in turn
    # makes each tile size's transform once and keeps both.
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHANNELS", 1)
    made = []
    real = conv_winograd._filter_tiles
    monkeypatch.setattr(conv_winograd, "_filter_tiles",
                        lambda w, m, *a: made.append(m) or real(w, m, *a))  # fmt: skip
    sizes = watch_tiles(monkeypatch)
    w = RNG.standard_normal((3, 3, 8, 12)).astype(np.float32)
    w.flags.writeable = False  # a constant's filter
    from rill.exec.kernels.conv_kernels import conv2d as make

    compute = make([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1])
    for n in (1, 4, 1, 4, 1, 4):
        x = RNG.standard_normal((n, 8, 7, 7)).astype(np.float32)
        close(compute(x, w), gemm(conv2d, x, w, "SAME"), np.float32)
    assert sizes == [2, 4] * 3
    assert sorted(made) == [2, 4]


@needs_jit
@pytest.mark.parametrize("n", [1, 8])
def test_resnet_sized_last_stage_without_monkeypatching(monkeypatch, n):
    # ResNet-18 ½'s 7×7 stage, 256 → 256 channels: 2×2 tiles at batch 1, 4×4 at batch 8, both
    # through the fused op with its bias and Relu.
    sizes = watch_tiles(monkeypatch)
    x = RNG.standard_normal((n, 256, 7, 7)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 256, 256)) * 0.03).astype(np.float32)
    bias = RNG.standard_normal(256).astype(np.float32)
    conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4,
                                                ["BiasAdd", "Relu"], 1, 0.2)  # fmt: skip
    want = gemm(conv, x, w, bias)
    got = conv(x, w, bias)
    assert sizes == [2 if n == 1 else 4]
    close(got, want, np.float32)
    assert (got == 0).any() and (got > 0).any()


@needs_jit
def test_resnet_sized_convolution_matches_without_monkeypatching(monkeypatch):
    calls = []
    real = conv_winograd.winograd_forward_nchw
    monkeypatch.setattr(conv_winograd, "winograd_forward_nchw",
                        lambda *a, **k: calls.append(1) or real(*a, **k))  # fmt: skip
    x = RNG.standard_normal((1, 32, 56, 56)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 32, 32)) * 0.1).astype(np.float32)
    close(conv2d(x, w, "SAME"), gemm(conv2d, x, w, "SAME"), np.float32)
    assert calls == [1]


def test_without_the_compiled_loops_the_gemm_path_runs(small):
    x = RNG.standard_normal((2, 6, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    old = jit.set_enabled(False)
    try:
        off = conv2d(x, w, "SAME")
    finally:
        jit.set_enabled(old)
    assert not small
    assert np.array_equal(off, gemm(conv2d, x, w, "SAME"))  # bit-identical to the GEMM path


@needs_jit
def test_a_node_reuses_its_filter_transform_only_for_an_equal_filter(small, monkeypatch):
    made = []
    real = conv_winograd._filter_tiles
    monkeypatch.setattr(conv_winograd, "_filter_tiles", lambda *a: made.append(1) or real(*a))
    from rill.exec.kernels.conv_kernels import conv2d as make

    compute = make([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1])  # one node's kernel
    x = RNG.standard_normal((2, 6, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    first = compute(x, w)
    assert len(made) == 1
    close(first, gemm(conv2d, x, w, "SAME"), np.float32)
    again = compute(x, w.copy())  # another array, the same values: the transform is reused
    assert len(made) == 1 and np.array_equal(again, first)
    w[0, 0, 0, 0] += 1.0  # changed in place: the node must see it
    changed = compute(x, w)
    assert len(made) == 2
    close(changed, gemm(conv2d, x, w, "SAME"), np.float32)
    assert not np.array_equal(changed, first)


@needs_jit
def test_few_tiles_take_winograd_once_the_filter_comes_again(small, monkeypatch):
    # Between _MIN_TILES_CACHED and _MIN_TILES_NCHW tiles a node makes a filter's transform on
    # its first call or when the filter comes a second time in a row; a new filter in between
    # (training's changing filters) runs the GEMM path.
    monkeypatch.setattr(conv_winograd, "_MIN_TILES_NCHW", 1 << 30)
    from rill.exec.kernels.conv_kernels import conv2d as make

    compute = make([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1])
    x = RNG.standard_normal((2, 6, 10, 10)).astype(np.float32)
    w1 = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    w2 = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    y1 = compute(x, w1)
    assert len(small) == 1  # the first call
    y2 = compute(x, w2)
    assert len(small) == 1  # a new filter: the GEMM path
    assert np.array_equal(y2, gemm(conv2d, x, w2, "SAME"))
    y2_again = compute(x, w2)
    assert len(small) == 2  # the same filter again: Winograd
    close(y2_again, y2, np.float32)
    close(y1, gemm(conv2d, x, w1, "SAME"), np.float32)


@needs_jit
def test_a_read_only_filter_object_seen_twice_skips_the_compare(small, monkeypatch):
    # A constant's read-only view, handed to the node step after step: after the second call
    # (the elements compared equal) the node keys the transform by the object and no longer
    # compares; a writable array, or another object, is still compared element by element.
    compares = []
    real_equal = np.array_equal
    monkeypatch.setattr(
        conv_winograd.np, "array_equal", lambda a, b: compares.append(1) or real_equal(a, b)
    )
    from rill.exec.kernels.conv_kernels import conv2d as make

    compute = make([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1])
    x = RNG.standard_normal((2, 6, 10, 10)).astype(np.float32)
    base = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    w = base.view()
    w.flags.writeable = False
    first = compute(x, w)
    compute(x, w)
    assert len(compares) == 1  # the second call compared once and kept the object
    for _ in range(3):
        assert real_equal(compute(x, w), first)
    assert len(compares) == 1  # no compare for the held object
    other = w.copy()
    other.flags.writeable = False
    assert real_equal(compute(x, other), first)
    assert len(compares) == 2  # another object: compared
    writable = base.copy()
    compute(x, writable)
    compute(x, writable)
    n = len(compares)
    writable[0, 0, 0, 0] += 1.0  # a writable array is never keyed by identity
    changed = compute(x, writable)
    assert len(compares) == n + 1
    want = gemm(conv2d, x, writable, "SAME")
    close(changed, want, np.float32)
    assert not real_equal(changed, first)


def test_a_held_filter_keeps_a_variables_updates_visible():
    # A variable's value read by an NCHW convolution (the GEMM / Winograd node holding it) and
    # then updated: the update is seen, never a stale transform (resources update in place only
    # where nothing else refers to the value).
    import rill.exec as rx

    x = RNG.standard_normal((1, 64, 16, 16)).astype(np.float32)
    w0 = RNG.standard_normal((3, 3, 64, 64)).astype(np.float32)
    with rg.Graph().as_default():
        v = rg.Variable(w0)
        y = rg.nn.conv2d(rg.constant(x), v, strides=1, padding="SAME", data_format="NCHW")
        step = v.assign_add(rg.ones_like(v))
        with rx.Session() as s:
            s.run(v.initializer)
            for i in range(3):
                s.run(y)
                got = s.run(y)
                want = gemm(conv2d, x, w0 + i, "SAME")
                close(got, want, np.float32)
                s.run(step)


@needs_jit
@pytest.mark.parametrize("block_bytes", [1, 4000, 1 << 30])
@pytest.mark.parametrize(
    "xs, r, pads, m",
    [
        ((1, 5, 11, 13), 3, (1, 1), 4),  # batch 1, partial tiles at the bottom and right
        ((3, 4, 9, 10), 3, (1, 0), 4),  # batch 3, unpadded columns
        ((2, 3, 14, 7), 5, (2, 2), 4),  # 5×5 in 4×4 tiles
        ((1, 5, 7, 9), 3, (1, 1), 2),  # 3×3 in 2×2 tiles, partial ones at the bottom and right
        ((3, 4, 8, 6), 3, (1, 0), 2),  # batch 3, unpadded columns
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_first_output_rows_have_the_channels_last_bits(
    monkeypatch, block_bytes, xs, r, pads, m, dtype
):
    # The channels-first path makes each block's output rows channels-last in scratch memory
    # and copies them out (blocks of one tile row of one image, of several images, or one
    # block): the same tile loops and products as the channels-last convolution of the
    # transposed input, so the same bits, on one thread and on three.
    monkeypatch.setattr(conv_winograd, "_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES", 1)
    monkeypatch.setattr(conv_winograd, "_SPLIT_TILES", 1 << 30)
    from rill.exec.kernels import intra_op

    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((r, r, xs[1], 6)).astype(dtype)
    oh, ow = xs[2] + 2 * pads[0] - r + 1, xs[3] + 2 * pads[1] - r + 1
    tiles = conv_winograd._Tiles(xs[0], oh, ow, m, m + r - 1, xs[1] + 6, x.itemsize)
    if block_bytes == 1:
        assert len(tiles.blocks) == xs[0] * -(-oh // m)  # one tile row a block
    want = conv_winograd.winograd_forward(x.transpose(0, 2, 3, 1), w, oh, ow, pads, m)
    for threads in (1, 3):
        monkeypatch.setattr(intra_op, "_THREADS", threads)
        out = np.full((xs[0], 6, oh, ow), np.nan, dtype)
        got = conv_winograd.winograd_forward_nchw(x, w, oh, ow, pads, m, out)
        assert got is out
        np.testing.assert_array_equal(got, want.transpose(0, 3, 1, 2))
    # and it is the convolution (float64 windows of the zero-padded input)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0],) * 2, (pads[1],) * 2))
    win = np.lib.stride_tricks.sliding_window_view(xp, (r, r), axis=(2, 3))[:, :, :oh, :ow]
    close(got, np.einsum("ncyxij,ijco->noyx", win, w.astype(np.float64)), dtype)


@needs_jit
@pytest.mark.parametrize("code", [None, 0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_to_channels_first_copies_rows_into_a_strided_view(code, dtype):
    # A plain copy (no bias), or + bias and the activation: the bits of the copy followed by
    # the fused convolutions' separate pass (bias_activation_planes), NaNs included.
    loops = conv_winograd._loops()
    src = (RNG.standard_normal((3, 5, 7)) * 8).astype(dtype)  # [rows, w, c]
    src[1, 2, 3] = np.nan
    bias = RNG.standard_normal(7).astype(dtype) if code is not None else np.empty(0, dtype)
    dst = np.zeros((2, 7, 9, 5), dtype)  # [n, c, h, w]
    none = np.empty((0, 0, 0), dtype)
    loops.to_channels_first(src, dst[1, :, 4:7], bias, code or 0, none)
    want = np.ascontiguousarray(src.transpose(2, 0, 1))
    conv_loops = fused_conv_kernels._loops()
    if code is not None:
        conv_loops.bias_activation_planes(want.reshape(7, 15), bias, code, 0, 7)
    np.testing.assert_array_equal(dst[1, :, 4:7], want)
    assert np.isnan(dst[1, 3, 5, 2])
    assert not dst[0].any() and not dst[1, :, :4].any() and not dst[1, :, 7:].any()
    if code in (0, 1):  # a residual: + bias, + side (a strided view), Relu for code 1
        side = (RNG.standard_normal((2, 7, 9, 5)) * 8).astype(dtype)
        loops.to_channels_first(src, dst[0, :, 2:5], bias, code, side[1, :, 3:6])
        want = np.ascontiguousarray(src.transpose(2, 0, 1))
        conv_loops.bias_side_activation(want.reshape(7, 15), bias,
                                        np.ascontiguousarray(side[1, :, 3:6]).reshape(7, 15),
                                        code == 1, 0, 7)  # fmt: skip
        np.testing.assert_array_equal(dst[0, :, 2:5], want)
        assert (code == 1) == bool((dst[0, :, 2:5] == 0).any())


@needs_jit
@pytest.mark.parametrize("n", [1, 3])
def test_held_transforms_take_winograd_from_less_work(monkeypatch, n):
    # Between _MIN_WORK_HELD and _MIN_WORK multiply-adds a node makes the transform on its first
    # call and whenever a filter comes twice in a row, never for a new filter in between (its
    # transform would cost more than the tiles save); below _MIN_WORK_HELD the GEMM path runs.
    calls = []
    real = conv_winograd.winograd_forward_nchw
    monkeypatch.setattr(conv_winograd, "winograd_forward_nchw",
                        lambda *a, **k: calls.append(1) or real(*a, **k))  # fmt: skip
    from rill.exec.kernels.conv_kernels import conv2d as make

    x = RNG.standard_normal((n, 16, 17, 15)).astype(np.float32)  # 20 tiles an image
    w1 = (RNG.standard_normal((3, 3, 16, 24)) * 0.2).astype(np.float32)
    w2 = (RNG.standard_normal((3, 3, 16, 24)) * 0.2).astype(np.float32)
    work = n * 17 * 15 * 9 * 16 * 24
    monkeypatch.setattr(conv_winograd, "_MIN_WORK", work + 1)
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", work)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES_NCHW", 1)  # tiles alone would transform
    compute = make([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1])
    close(compute(x, w1), gemm(conv2d, x, w1, "SAME"), np.float32)
    assert len(calls) == 1  # the first call
    assert np.array_equal(compute(x, w2), gemm(conv2d, x, w2, "SAME"))  # a new filter: GEMM
    assert len(calls) == 1
    close(compute(x, w2), gemm(conv2d, x, w2, "SAME"), np.float32)
    assert len(calls) == 2  # the same filter again: Winograd
    monkeypatch.setattr(conv_winograd, "_MIN_WORK_HELD", work + 1)
    assert np.array_equal(compute(x, w2), gemm(conv2d, x, w2, "SAME"))  # below the floor
    assert len(calls) == 2


@needs_jit
@pytest.mark.parametrize("act", [None, "Relu", "Relu6", "HardSwish", "Elu", "Sigmoid"])
@pytest.mark.parametrize("n", [1, 2])
def test_fused_nchw_winograd_applies_its_epilogue_as_it_writes(small, monkeypatch, act, n):
    # A bias and a compiled activation go into the Winograd rows' copy-out: the bits of the
    # convolution followed by the separate pass; other activations (and a bias of another
    # dtype) keep the separate pass. Either way the result is the same.
    x = RNG.standard_normal((n, 16, 11, 13)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 16, 24)) * 0.3).astype(np.float32)
    bias = RNG.standard_normal(24).astype(np.float32)
    ops = ["BiasAdd"] + ([act] if act else [])
    conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4, ops, 1, 0.2)
    epilogue = fused_conv_kernels.nchw_epilogue(ops, 1, 0.2, "_FusedConv2D")
    u = conv_winograd._filter_tiles(w, 4, np.dtype(np.float32))
    want = epilogue(conv_winograd.winograd_forward_nchw(x, w, 11, 13, (1, 1), 4, None, u), bias)
    loops = fused_conv_kernels._loops()
    passes = []
    real = loops.bias_activation_planes
    monkeypatch.setattr(loops, "bias_activation_planes",
                        lambda *a: passes.append(a[2]) or real(*a))  # fmt: skip
    got = conv(x, w, bias)
    assert len(small) == 2  # the reference's call and the fused op's
    np.testing.assert_array_equal(got, want)
    # No separate pass where the copy-out did it (Sigmoid's own passes are others).
    assert bool(passes) == (act == "Elu")
    np.testing.assert_array_equal(conv(x, w, bias.astype(np.float64)), want)
    assert bool(passes) == (act != "Sigmoid")  # a float64 bias: the pass, which casts it
    assert epilogue.code == {None: 0, "Relu": 1, "Relu6": 2, "HardSwish": 4}.get(act)


@needs_jit
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("n", [1, 2])
def test_residual_nchw_winograd_applies_bias_side_and_relu_as_it_writes(small, monkeypatch,
                                                                        relu, n):  # fmt: skip
    # _FusedConv2D [BiasAdd, Add(, Relu)] on the Winograd path: the bias, the side input and the
    # Relu go into the rows' copy-out (no separate pass), the bits of the convolution followed by
    # that pass; a side input of another dtype keeps the pass; the side input is never written.
    x = RNG.standard_normal((n, 16, 13, 9)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 16, 16)) * 0.3).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    side = RNG.standard_normal((n, 16, 13, 9)).astype(np.float32)
    kept = side.copy()
    ops = ["BiasAdd", "Add"] + (["Relu"] if relu else [])
    conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4, ops, 2, 0.2)
    u = conv_winograd._filter_tiles(w, 4, np.dtype(np.float32))
    want = conv_winograd.winograd_forward_nchw(x, w, 13, 9, (1, 1), 4, None, u)
    loops = fused_conv_kernels._loops()
    loops.bias_side_activation(want.reshape(n * 16, -1), bias, side.reshape(n * 16, -1), relu,
                               0, n * 16)  # fmt: skip
    passes = []
    real = loops.bias_side_activation
    monkeypatch.setattr(loops, "bias_side_activation",
                        lambda *a: passes.append(1) or real(*a))  # fmt: skip
    got = conv(x, w, bias, side)
    assert len(small) == 2 and not passes
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(side, kept)
    np.testing.assert_array_equal(conv(x, w, bias, side.astype(np.float64)), want)
    assert passes  # the side input's dtype differs: the separate pass, which casts it
    with pytest.raises(InvalidArgumentError, match="side input"):
        conv(x, w, bias, side[:, :, :12])


@pytest.mark.parametrize("jit_on", [False, True])
@pytest.mark.parametrize("n", [1, 3])
def test_residual_nchw_conv_on_either_path(small, jit_on, n):
    # The residual fused op's epilogue (now the convolution's fused function) on the GEMM path
    # (RILL_JIT=0) and the Winograd path: bias, side input, Relu; a side input of another shape
    # is refused on both.
    x = RNG.standard_normal((n, 16, 10, 7)).astype(np.float32)
    w = (RNG.standard_normal((3, 3, 16, 8)) * 0.3).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    side = RNG.standard_normal((n, 8, 10, 7)).astype(np.float32)
    ref = gemm(conv2d, x.astype(np.float64), w.astype(np.float64), "SAME")
    want = np.maximum(ref + bias[:, None, None] + side, 0)
    old = jit.set_enabled(jit_on)
    try:
        conv = fused_conv_kernels.fused_conv2d_nchw([1] * 4, "SAME", [], [1] * 4,
                                                    ["BiasAdd", "Add", "Relu"], 2, 0.2)  # fmt: skip
        got = conv(x, w, bias, side)
        calls, on = len(small), jit.enabled()
        with pytest.raises(InvalidArgumentError, match="side input"):
            conv(x, w, bias, side[:, :, 1:])
    finally:
        jit.set_enabled(old)
    assert calls == (1 if on else 0) and on == jit_on
    close(got, want, np.float32)
    assert (got == 0).any()


_FIRST_CALLER = r"""
import numpy as np
from rill.exec.kernels import _conv_loops, _winograd_loops

rng = np.random.default_rng(0)
x = (rng.standard_normal((4, 5, 3)) * 4).astype(np.float32)
bias = rng.standard_normal(3).astype(np.float32)
# The Winograd copy-out compiles first, and with it the shared epilogue (act 4: HardSwish).
_winograd_loops.to_channels_first(x, np.empty((3, 4, 5), np.float32), bias, 4,
                                  np.empty((0, 0, 0), np.float32))
planes = (rng.standard_normal((6, 40)) * 4).astype(np.float32)
b = rng.standard_normal(3).astype(np.float32)
got = planes.copy()
_conv_loops.bias_activation_planes(got, b, 4, 0, 6)
v = planes + np.tile(b, 2)[:, None]  # row r's bias is b[r % 3]
t = v * (np.float32(1) / np.float32(6))
t = t + np.float32(0.5)
t = np.maximum(np.minimum(t, np.float32(1)), np.float32(0))
want = v * t
print("same" if np.array_equal(got, want) else "differ")
"""


@needs_jit
def test_the_epilogue_keeps_its_bits_when_the_winograd_copy_out_compiles_it_first(tmp_path):
    """A jitted function is compiled with the flags of its first caller: the copy-out must not
    contract (fuse multiply-adds), or every later user of the shared epilogue rounds
    differently (seen as 55 bit-identity failures in a fresh CI run). A fresh process and
    numba cache, so that the copy-out really compiles the epilogue first."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _FIRST_CALLER], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "same"
