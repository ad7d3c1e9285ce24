"""Direct convolutions of a filter matrix of few rows (conv_direct): Conv2D, _FusedConv2D and the
filter gradient against the GEMM paths (the reference, and what RILL_JIT=0 runs) within rounding,
on the geometries the loops meet (padding on every side, strides, dilations, a few input
channels, widths that leave pixels after the passes of 4, blocks of rows of one image), with the
same bits on any number of threads."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import conv_direct, intra_op, jit
from rill.exec.kernels import fused_kernels as fk
from rill.exec.testing import run_kernel

# Under RILL_JIT=0 the compiled loops these cases run are off.
needs_jit = pytest.mark.skipif(not jit.enabled(), reason="RILL_JIT=0 turns the compiled loops off")

pytest.importorskip("numba")

RNG = np.random.default_rng(2122)


def run_op(op_type, inputs, attrs):
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


def forward_and_filter(x, w, strides=(1, 1), padding="SAME", dilations=(1, 1)):
    attrs = dict(strides=[1, *strides, 1], padding=padding, data_format="NHWC",
                 dilations=[1, *dilations, 1])  # fmt: skip
    (y,) = run_op("Conv2D", [x, w], attrs)
    dy = np.sin(np.arange(y.size, dtype=np.float64)).astype(x.dtype).reshape(y.shape)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    return y, dw


def reference(x, w, *geom):
    """The GEMM paths' results in float64 (the direct loops off)."""
    old = conv_direct.set_enabled(False)
    try:
        return forward_and_filter(x.astype(np.float64), w.astype(np.float64), *geom)
    finally:
        conv_direct.set_enabled(old)


def close(got, want, dtype):
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for g_, r_ in zip(got, want):
        scale = max(1.0, float(np.abs(r_).max()))
        assert g_.dtype == dtype and g_.shape == r_.shape
        assert np.abs(g_.astype(np.float64) - r_).max() <= tol * scale


@pytest.fixture
def small(monkeypatch):
    """The direct loops for small test shapes too (no work floor); counts the loops' calls."""
    monkeypatch.setattr(conv_direct, "_MIN_WORK", 0)
    calls = []
    real = conv_direct._compiled

    def watched(name, args):
        calls.append(name)
        return real(name, args)

    monkeypatch.setattr(conv_direct, "_compiled", watched)
    monkeypatch.calls = calls
    return monkeypatch


GEOMETRIES = [
    # x NHWC, filter, strides, padding, dilations
    ((3, 12, 12, 1), (5, 5, 1, 32), (1, 1), "SAME", (1, 1)),  # the MNIST CNN's first layer
    ((2, 11, 9, 3), (3, 3, 3, 16), (1, 1), "SAME", (1, 1)),  # 9 pixels a row: 2 passes + 1
    ((2, 13, 10, 2), (3, 3, 2, 48), (2, 2), "VALID", (1, 1)),  # 16-channel passes
    ((2, 9, 14, 1), (3, 5, 1, 16), (2, 1), "SAME", (1, 1)),
    ((1, 15, 15, 2), (3, 3, 2, 32), (1, 1), "SAME", (2, 2)),
    ((2, 8, 8, 1), (1, 1, 1, 16), (1, 1), "VALID", (1, 1)),  # one tap
]


# float64 compiles every loop a second time (tens of seconds on a busy machine, once per cache).
@needs_jit
@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_direct_loops_match_the_gemm_paths(small, geom, dtype):
    xs, ws, *rest = geom
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    got = forward_and_filter(x, w, *rest)
    q = 32 if ws[3] % 32 == 0 else 16
    if ws[:2] == (1, 1) and rest[0] == (1, 1):  # a 1x1 convolution is one GEMM
        assert small.calls == [f"filter_block_q{q}"]
    else:
        assert small.calls == [f"forward_q{q}", f"filter_block_q{q}"]
    close(got, reference(x, w, *rest), dtype)


@pytest.mark.parametrize("ws", [(5, 5, 2, 32), (3, 3, 1, 24)], ids=str)
def test_other_filters_keep_the_gemm_paths(small, ws):
    # 50 filter-matrix rows (more than _MAX_ROWS); 24 output channels (not a multiple of 16)
    x = RNG.standard_normal((2, 8, 8, ws[2])).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    got = forward_and_filter(x, w)
    assert small.calls == []
    old = jit.set_enabled(False)
    try:
        want = forward_and_filter(x, w)
    finally:
        jit.set_enabled(old)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


@needs_jit
def test_without_the_compiled_loops_the_gemm_paths_run(small):
    x = RNG.standard_normal((2, 10, 10, 1)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 1, 32)).astype(np.float32)
    old = jit.set_enabled(False)
    try:
        off = forward_and_filter(x, w)
    finally:
        jit.set_enabled(old)
    assert small.calls == []
    on = forward_and_filter(x, w)
    assert small.calls  # the same convolution with the loops on runs them
    old = conv_direct.set_enabled(False)
    try:
        for a, b in zip(off, forward_and_filter(x, w)):
            assert np.array_equal(a, b)  # bit-identical to the GEMM paths
    finally:
        conv_direct.set_enabled(old)
    close(on, reference(x, w), np.float32)


@pytest.mark.parametrize("block_bytes", [1, 3000, 40000, 1 << 30])
def test_blocks_and_threads_keep_the_bits(small, block_bytes):
    # 1 byte: blocks of one output row of one image; 3000: a few rows; 40000: two whole images
    # (each block pads its own images, in its thread); 1 GiB: one block
    x = RNG.standard_normal((5, 12, 13, 1)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 1, 32)).astype(np.float32)
    small.setattr(conv_direct, "_BLOCK_BYTES", block_bytes)
    small.setattr(threads, "GEMM_GRAIN", 1)
    small.setattr(intra_op, "_THREADS", 3)
    small.setattr(threads, "_BUDGET", 3)
    results = []
    for free in (1, 3):
        small.setattr(threads, "cores_free", lambda free=free: free)
        results.append(forward_and_filter(x, w))
    for a, b in zip(*results):
        assert np.array_equal(a, b)
    close(results[0], reference(x, w), np.float32)
    blocks = conv_direct._even_blocks(5, 12, 13 * 32, 4)
    assert conv_direct._by_image(blocks, 12) == (block_bytes in (40000, 1 << 30))
    if block_bytes == 40000:
        assert len(blocks) == 3


@needs_jit
def test_the_cnn_first_convolution_takes_the_direct_loops():
    # The MNIST CNN's first convolution at its own size (no monkeypatching).
    from rill.exec.kernels.conv_common import _Window

    win = _Window([1, 1, 1, 1], [1, 1, 1, 1], "SAME", [], "NHWC")
    assert conv_direct.direct_ok(win, 5, 5, 1, 32, 64, 28, 28, np.float32)
    assert not conv_direct.direct_ok(win, 5, 5, 32, 64, 64, 14, 14, np.float32)
    # 16 blocks of 4 images (5 a block would make 13: uneven on two or four threads)
    blocks = conv_direct._even_blocks(64, 28, 28 * 32, 4)
    assert blocks == [(n0, n0 + 4, 0, 28) for n0 in range(0, 64, 4)]


@needs_jit
@pytest.mark.parametrize("act", ["Relu", "Relu6", "Elu"])
def test_fused_conv_epilogue_on_direct_blocks(small, act):
    small.setattr(conv_direct, "_BLOCK_BYTES", 1)  # an epilogue per output row
    x = RNG.standard_normal((2, 9, 10, 1)).astype(np.float32)
    w = RNG.standard_normal((5, 5, 1, 16)).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    conv = fk.fused_conv2d([1] * 4, "SAME", [], "NHWC", [1] * 4, ["BiasAdd", act], 1, 0.2,
                           "HWIO", 0)  # fmt: skip
    got = conv(x, w, bias)
    assert small.calls == ["forward_q16"]
    # The unfused ops on the same (direct) product give the same bits.
    (y,) = run_op("Conv2D", [x, w], dict(strides=[1] * 4, padding="SAME", data_format="NHWC"))
    (yb,) = run_op("BiasAdd", [y, bias], dict(data_format="NHWC"))
    (want,) = run_op(act, [yb], {})
    np.testing.assert_array_equal(got, want)


def test_the_written_out_loops_are_the_generators():
    import pathlib

    from tools.gen_direct_conv_loops import OUT, source

    assert pathlib.Path(OUT).read_text() == source()


@needs_jit
def test_compiling_the_loops_leaves_numba_settings_as_they_were(small):
    import numba

    before = numba.config.SLP_VECTORIZE
    x = RNG.standard_normal((1, 6, 6, 1)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 1, 16)).astype(np.float32)
    forward_and_filter(x, w)
    assert small.calls and before == numba.config.SLP_VECTORIZE


@needs_jit
def test_channels_first_and_grouped_convolutions_take_views_through_the_loops(small):
    # NCHW: the filter gradient reads channels-last views of x and dy; groups: slices of x.
    x = RNG.standard_normal((2, 1, 9, 10)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 1, 16)).astype(np.float32)
    attrs = dict(strides=[1] * 4, padding="SAME", data_format="NCHW")
    dy = RNG.standard_normal((2, 16, 9, 10)).astype(np.float32)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    assert small.calls == ["filter_block_q16"]
    old = conv_direct.set_enabled(False)
    try:
        (want,) = run_op("Conv2DBackpropFilter", [x.astype(np.float64), np.array(w.shape, np.int32),
                                                  dy.astype(np.float64)], attrs)  # fmt: skip
    finally:
        conv_direct.set_enabled(old)
    assert np.abs(dw - want).max() <= 1e-5 * np.abs(want).max()
    # Two groups of one input channel each, 16 outputs per group.
    xg = RNG.standard_normal((2, 8, 8, 2)).astype(np.float32)
    wg = RNG.standard_normal((3, 3, 1, 32)).astype(np.float32)
    small.calls.clear()
    got = forward_and_filter(xg, wg)
    assert small.calls == ["forward_q16", "forward_q16", "filter_block_q16", "filter_block_q16"]
    close(got, reference(xg, wg), np.float32)
