"""The channels-first 1×1 convolutions of imported models at batch > 1 and with strides: each
image's bias and activation (or residual add) run right after its own product, a strided 1×1
filter (a residual block's downsampling shortcut) multiplies its sampled input, and an RGB
stem fills each image's phases right before its bands. The results stay the unfused chain's, bit
for bit (float32 Sigmoid / Swish: within tests/sigmoid_bound.py's bound), with the compiled loops
and without, on one thread and on two."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import run_both
from sigmoid_bound import assert_sigmoid_close

import rill.exec.kernels.intra_op as intra_op
import rill.graph as rg
from rill.exec.kernels import conv_nchw, jit
from rill.exec.kernels import fused_conv_kernels as fck
from rill.exec.kernels.conv_common import _Window

RNG = np.random.default_rng(2026)


def _op(type_, inputs, attrs=None):
    return rg.get_default_graph().create_op(type_, inputs, attrs or {}).outputs[0]


def _const(v, dtype):
    return rg.constant(np.asarray(v, dtype))


def _inputs(shape, dtype=np.float32):
    v = RNG.standard_normal(shape).astype(dtype) * 4
    v.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -200.0, 200.0, 0.0]  # tails and specials
    return v


def _act(name, y, dtype):
    if name is None:
        return y
    if name == "Swish":
        return _op("Mul", [y, _op("Sigmoid", [y])])
    if name in ("HardSigmoid", "HardSwish"):
        t = _op("AddV2", [_op("Mul", [_const(1.0 / 6.0, dtype), y]), _const(0.5, dtype)])
        t = _op("Maximum", [_op("Minimum", [t, _const(1, dtype)]), _const(0, dtype)])
        return t if name == "HardSigmoid" else _op("Mul", [y, t])
    return _op(name, [y])


def _graph(shape, out_c, stride, act, dtype=np.float32, residual=False, gate=False, pad="VALID"):
    """[x · s →] 1×1 Conv2D (stride) → BiasAdd → [AddV2(·, side) →] activation, NCHW."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), shape)
        feeds = {x: _inputs(shape, dtype)}
        inp = x
        if gate:
            s = rg.placeholder(rg.as_dtype(dtype), [shape[0], shape[1], 1, 1])
            feeds[s] = RNG.standard_normal([shape[0], shape[1], 1, 1]).astype(dtype)
            inp = _op("Mul", [x, s])
        w = _const(RNG.standard_normal((1, 1, shape[1], out_c)) * 0.5, dtype)
        y = _op("Conv2D", [inp, w], {"strides": [1, 1, stride, stride], "padding": pad,
                                     "data_format": "NCHW"})  # fmt: skip
        y = _op("BiasAdd", [y, _const(RNG.standard_normal(out_c), dtype)],
                {"data_format": "NCHW"})  # fmt: skip
        if residual:
            oh, ow = -(-shape[2] // stride), -(-shape[3] // stride)
            side = rg.placeholder(rg.as_dtype(dtype), [shape[0], out_c, oh, ow])
            feeds[side] = _inputs([shape[0], out_c, oh, ow], dtype)
            y = _op("AddV2", [y, side])
        y = _act(act, y, dtype)
    return g, y, feeds


def _same(fused, plain, act, dtype, compiled):
    a, b = np.asarray(fused), np.asarray(plain)
    assert a.dtype == b.dtype and a.shape == b.shape
    if compiled and act in ("Sigmoid", "Swish") and np.dtype(dtype) == np.float32:
        assert_sigmoid_close(a, b)
        return
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)  # (two NaNs meeting may keep either sign)
    np.testing.assert_array_equal(a[~nan], b[~nan])
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


def _each_setting(monkeypatch, run):
    """run(compiled) with the compiled loops on and off, on one thread and two; returns the
    results with the loops on, per thread count."""
    on = []
    for compiled in (True, False):
        for threads in (1, 2):
            monkeypatch.setattr(intra_op, "_THREADS", threads)
            old = jit.set_enabled(compiled)
            try:
                got = run(compiled)
            finally:
                jit.set_enabled(old)
            if compiled:
                on.append(got)
    return on


@pytest.mark.parametrize("act", [None, "Relu", "HardSwish", "Sigmoid", "Swish"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_pointwise_epilogues_image_by_image_match_the_chain(monkeypatch, act, dtype):
    # Three images of 33×32 (several planes a thread's piece, each image's epilogue after its
    # own product).
    g, y, feeds = _graph([3, 5, 33, 32], 7, 1, act, dtype)
    products = _spy(monkeypatch, "_pointwise_product")

    def run(compiled):
        products.clear()
        with np.errstate(all="ignore"):
            fused, plain, types = run_both(g, [y], feeds)
        assert "_FusedConv2D" in types and "Conv2D" not in types and "BiasAdd" not in types
        _same(fused[0], plain[0], act, dtype, compiled)
        if compiled and act is not None:  # each image's epilogue ran after its product
            assert products and all(done for _, done in products)
        return fused[0]

    one, two = _each_setting(monkeypatch, run)
    _same(one, two, None, dtype, False)  # the threads never change the bits


@pytest.mark.parametrize("act", [None, "Relu", "HardSigmoid", "HardSwish"])
@pytest.mark.parametrize("gate", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_image_pointwise_takes_the_lean_path_with_the_chains_bits(monkeypatch, act, gate,
                                                                      dtype):  # fmt: skip
    # Batch 1, squeeze-excite sizes (1×1 planes) and a small expansion (6×5 planes).
    _one_image_matches(monkeypatch, (([1, 24, 1, 1], 8), ([1, 8, 6, 5], 24)), act, gate, dtype,
                       lean_taken=True)  # fmt: skip


def _one_image_matches(monkeypatch, shapes, act, gate, dtype, lean_taken: bool):
    """For each (input shape, output channels) at batch 1: the fused pointwise convolution
    against its chain, with the compiled loops on and off, on one thread and two; with the
    loops on, the lean path (_pointwise_b1) returns a result where `lean_taken`, else None."""
    lean = _spy(monkeypatch, "_pointwise_b1")
    for shape, out_c in shapes:
        g, y, feeds = _graph(shape, out_c, 1, act, dtype, gate=gate)

        def run(compiled, g=g, y=y, feeds=feeds):
            lean.clear()
            with np.errstate(all="ignore"):
                fused, plain, types = run_both(g, [y], feeds)
            assert types.count("_FusedConv2D") == 1 and "Conv2D" not in types
            _same(fused[0], plain[0], act, dtype, compiled)
            if compiled:
                assert lean and all((v is not None) == lean_taken for v in lean)
            return fused[0]

        one, two = _each_setting(monkeypatch, run)
        _same(one, two, None, dtype, False)


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("gate", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_batched_residual_pointwise_matches_the_chain(monkeypatch, relu, gate, batch):
    # 32×33 planes: a gate's x·s is formed image by image in scratch at batch 3.
    g, y, feeds = _graph([batch, 4, 32, 33], 6, 1, "Relu" if relu else None, residual=True,
                         gate=gate)  # fmt: skip

    products = _spy(monkeypatch, "_pointwise_product")
    lean = _spy(monkeypatch, "_pointwise_b1")

    def run(compiled):
        products.clear()
        lean.clear()
        with np.errstate(all="ignore"):
            fused, plain, types = run_both(g, [y], feeds)
        assert types.count("_FusedConv2D") == 1
        assert not {"Conv2D", "BiasAdd", "AddV2", "Relu", "Mul"} & set(types)
        _same(fused[0], plain[0], None, np.float32, compiled)
        if compiled and batch > 1:  # image by image
            assert products and all(done for _, done in products)
        elif compiled:  # one image: the lean path
            assert lean and all(v is not None for v in lean)
        return fused[0]

    one, two = _each_setting(monkeypatch, run)
    _same(one, two, None, np.float32, False)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("shape", [[1, 24, 14, 14], [3, 24, 7, 7], [2, 8, 32, 33], [1, 24, 1, 1]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_gate_is_applied_as_the_product_packs_the_input(monkeypatch, residual, shape, dtype):
    """A gated pointwise convolution with the compiled product forms x·s as the product packs x
    (pointwise.matmul / pointwise.batch's scale): no pass of its own over x (_gated), and the
    chain's bits (Mul, then the product). Planes under one vector (a squeeze-excite's 1×1)
    take x·s first."""
    if fck._loops() is None or fck.pointwise._mod() is None:
        pytest.skip("the compiled product is off (RILL_JIT=0 or RILL_CONV_DIRECT=0)")
    g, y, feeds = _graph(shape, 16, 1, "HardSwish" if not residual else "Relu", dtype,
                         residual=residual, gate=True)  # fmt: skip
    gated = _spy(monkeypatch, "_gated")
    scaled = []
    real = fck.pointwise.matmul

    def matmul(*args, **kw):
        scaled.append(kw.get("scale", args[6] if len(args) > 6 else None) is not None)
        return real(*args, **kw)

    monkeypatch.setattr(fck.pointwise, "matmul", matmul)
    real_batch = fck.pointwise.batch

    def batch(*args):
        scaled.append(len(args) > 5 and args[5] is not None)
        return real_batch(*args)

    monkeypatch.setattr(fck.pointwise, "batch", batch)
    tiny = shape[2] * shape[3] == 1
    for threads in (1, 2):
        monkeypatch.setattr(intra_op, "_THREADS", threads)
        gated.clear()
        scaled.clear()
        with np.errstate(all="ignore"):
            fused, plain, types = run_both(g, [y], feeds)
        assert types.count("_FusedConv2D") == 1 and "Mul" not in types
        _same(fused[0], plain[0], None, dtype, True)
        # (the unfused chain's Conv2D runs unscaled products too)
        if tiny:
            assert gated and not any(scaled)
        else:
            assert not gated and any(scaled)


def _spy(monkeypatch, name):
    """Records what fused_conv_kernels.<name> returns."""
    seen = []
    real = getattr(fck, name)

    def spy(*args, **kw):
        got = real(*args, **kw)
        seen.append(got)
        return got

    monkeypatch.setattr(fck, name, spy)
    return seen


@pytest.mark.parametrize(("act", "residual"),
                         [(None, False), ("Relu", False), ("Swish", False), (None, True),
                          ("Relu", True)])  # fmt: skip
@pytest.mark.parametrize("shape", [[1, 6, 9, 8], [3, 6, 9, 8], [2, 5, 32, 33]])
@pytest.mark.parametrize("pad", ["VALID", "SAME"])
def test_a_strided_pointwise_convolution_multiplies_its_sampled_input(monkeypatch, act,
                                                                       residual, shape, pad):  # fmt: skip
    g, y, feeds = _graph(shape, 7, 2, act, residual=residual, pad=pad)
    sampled = _spy(monkeypatch, "_sampled")

    def run(compiled):
        sampled.clear()
        with np.errstate(all="ignore"):
            fused, plain, types = run_both(g, [y], feeds)
        assert types.count("_FusedConv2D") == 1 and "Conv2D" not in types
        _same(fused[0], plain[0], act, np.float32, compiled)
        if compiled:  # the fused kernel took the sampled input
            assert sampled and all(v is not None for v in sampled)
        return fused[0]

    one, two = _each_setting(monkeypatch, run)
    _same(one, two, None, np.float32, False)
    # And the values are those of the stride-1 product of the sampled input.
    x = next(v for v in feeds.values() if v.shape == tuple(shape))
    assert one.shape[2:] == x[:, :, ::2, ::2].shape[2:]


def test_a_strided_pointwise_convolution_with_padding_after_the_input_keeps_its_path():
    # Explicit padding after the input: the last sampled position is padding, so the sampled
    # input does not apply; the general path gives the chain's values.
    from rill.exec.kernels.fused_kernels import fused_conv2d

    x = _inputs([2, 3, 4, 4])
    w = RNG.standard_normal((1, 1, 3, 5)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    pads = [0, 0, 0, 0, 0, 1, 0, 1]
    k = fused_conv2d([1, 1, 2, 2], "EXPLICIT", pads, "NCHW", [1, 1, 1, 1], ["BiasAdd", "Relu"],
                     1, 0.2, "HWIO", 0)  # fmt: skip
    with np.errstate(all="ignore"):
        got = k(x, w, b)
        xp = np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 1)])[:, :, ::2, ::2]
        want = np.maximum(np.einsum("nchw,co->nohw", xp, w[0, 0]) + b[:, None, None], 0)
    assert got.shape == (2, 5, 3, 3)
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("swish", [None, True])
def test_an_rgb_stem_gives_each_image_its_own_bits_image_by_image(monkeypatch, swish):
    # conv_nchw on one thread (27 patch rows) fills each image's phases right before its bands:
    # every image's output is the bits of that image run alone, on one thread or two.
    if conv_nchw._loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = RNG.standard_normal((3, 3, 40, 37)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 16)).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    win = _Window([1, 1, 2, 2], [1, 1, 1, 1], "EXPLICIT", [0, 0, 0, 0, 1, 1, 1, 1], "NCHW")
    code = 0 if swish else 4  # HardSwish
    runs = []
    for threads in (1, 2):
        monkeypatch.setattr(intra_op, "_THREADS", threads)
        runs.append(conv_nchw.nchw_conv(x, w, win, bias, code, swish))
    np.testing.assert_array_equal(runs[0].view(np.uint32), runs[1].view(np.uint32))
    for i in range(3):
        alone = conv_nchw.nchw_conv(x[i : i + 1], w, win, bias, code, swish)
        np.testing.assert_array_equal(runs[0][i : i + 1].view(np.uint32), alone.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [[1, 6, 7, 7], [3, 5, 9, 11], [2, 4, 2, 2]])
def test_the_compiled_gate_multiply_has_numpys_bits(dtype, shape):
    # x · s of a squeeze-excite gate (fck._gated): the compiled pass where it runs, numpy's
    # multiply otherwise; NaN, infinities, zeros of both signs and subnormals on both sides.
    x = _inputs(shape, dtype)
    x.reshape(-1)[6:9] = [-0.0, np.finfo(dtype).tiny / 4, -np.finfo(dtype).max]
    s = RNG.standard_normal([shape[0], shape[1], 1, 1]).astype(dtype)
    s.reshape(-1)[:3] = [np.inf, -0.0, np.nan][: s.size]
    with np.errstate(all="ignore"):
        want = np.multiply(x, s)
    for compiled in (True, False):
        old = jit.set_enabled(compiled)
        try:
            with np.errstate(all="ignore"):
                got = fck._gated(x, s)
        finally:
            jit.set_enabled(old)
        assert got.dtype == want.dtype and got.shape == want.shape
        bits = np.uint32 if dtype == np.float32 else np.uint64
        np.testing.assert_array_equal(got.view(bits), want.view(bits))


@pytest.mark.parametrize("act", ["Sigmoid", "Swish"])
@pytest.mark.parametrize("gate", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_image_sigmoid_and_swish_pointwise_take_the_lean_path(monkeypatch, act, gate, dtype):
    # Batch 1, squeeze-excite sizes (1×1 planes, as EfficientNet's) and a small expansion: the
    # float32 Sigmoid / Swish run on the lean path (sigmoid32, within the bound of the chain);
    # float64 keeps the general path (numpy's exp, the chain's bits).
    shapes = (([1, 24, 1, 1], 8), ([1, 8, 1, 1], 40), ([1, 8, 6, 5], 24))
    _one_image_matches(monkeypatch, shapes, act, gate, dtype, lean_taken=dtype == np.float32)


@pytest.mark.parametrize("swish", [False, True])
@pytest.mark.parametrize(("shape", "out_c"),
                         [((1, 24, 1, 1), 8), ((1, 8, 6, 5), 24), ((1, 4, 64, 130), 8)])  # fmt: skip
def test_the_lean_sigmoid_path_has_the_general_paths_bits(monkeypatch, swish, shape, out_c):
    # The lean path (one sigmoid32_planes pass over the product) against the general one (the
    # epilogue's cache-sized pieces): the same bits. An output above one piece (8 × 64·130
    # values) is left to the general path.
    if fck._loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = _inputs(shape)
    w = RNG.standard_normal((1, 1, shape[1], out_c)).astype(np.float32)
    bias = RNG.standard_normal(out_c).astype(np.float32)
    bias[0] = -0.0
    act = "Swish" if swish else "Sigmoid"
    kern = fck.fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ["BiasAdd", act], 1,
                                 0.2)  # fmt: skip
    lean = _spy(monkeypatch, "_pointwise_b1")
    with np.errstate(all="ignore"):
        got = kern(x, w, bias)
    big = out_c * shape[2] * shape[3] > fck._CHUNK
    assert len(lean) == 1 and (lean[0] is None) == big
    monkeypatch.setattr(fck, "_pointwise_b1", lambda *a, **k: None)
    with np.errstate(all="ignore"):
        general = kern(x, w, bias)
    np.testing.assert_array_equal(got.view(np.uint32), general.view(np.uint32))
    # Batch 2 of the same image twice (the product and epilogue image by image): its bits too.
    with np.errstate(all="ignore"):
        two = kern(np.concatenate([x, x]), w, bias)
    for i in range(2):
        np.testing.assert_array_equal(two[i : i + 1].view(np.uint32), got.view(np.uint32))
