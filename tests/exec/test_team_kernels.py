"""Batch-1 kernels split over the intra-op pool's team (compiled pieces, no Python in the
hand-off: kernels._spin.team_run): the by-channel and plane-by-plane depthwise convolutions,
the float32 epilogue of a large output, the direct convolution of an RGB stem, NCHW max
pooling, the float32 tanh GELU and Softmax. Each gives the bits of its unsplit run, on
whichever threads its pieces ran; the team path is checked to have run."""

from __future__ import annotations

import time

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
from rill.exec.kernels import (
    _conv_loops,
    _conv_vec,
    _exp_tanh_loops,
    _gemm_vec,
    conv_nchw,
    intra_op,
    jit,
    pointwise,
)
from rill.exec.kernels.fused_conv_kernels import fused_conv2d_nchw, fused_depthwise_conv2d_native

pytestmark = pytest.mark.skipif(
    not jit.enabled() or intra_op._poller() is None,
    reason="the compiled loops or the pool's compiled waits are off",
)

RNG = np.random.default_rng(11)


@pytest.fixture
def team_calls(monkeypatch, polling_team):
    """Two idle cores and a polling worker; returns (calls, solo): the team entry points
    called, and a function that turns the team off (the unsplit paths then run)."""
    calls = []
    for mod, name in [(_conv_loops, "depthwise_by_channel_team"),
                      (_conv_loops, "depthwise_planes_team"), (_conv_loops, "epilogue_team"),
                      (_conv_vec, "direct_team"), (_conv_loops, "max_pool_team"),
                      (_gemm_vec, "gemm_batch_team"),
                      (_gemm_vec, "gemm_scaled_batch_team"),
                      (_exp_tanh_loops, "tanh_gelu32_team"),
                      (_exp_tanh_loops, "softmax32_team")]:  # fmt: skip
        real = getattr(mod, name)

        def watch(*args, _real=real, _name=name):
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(mod, name, watch)

    def solo():
        monkeypatch.setattr(intra_op, "team", lambda: None)

    return calls, solo


def _both(team_calls, run):
    calls, solo = team_calls
    split = [run() for _ in range(30)]  # the worker polls from the first call's wake-up on
    used = sorted(set(calls))
    solo()
    one = run()
    for got in split:
        np.testing.assert_array_equal(got, one)
    return used


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["Relu", "HardSwish", "Swish", "Sigmoid", None])
@pytest.mark.parametrize(
    "c, hw, k, stride",
    [
        (96, 14, 3, 1),
        (72, 7, 5, 1),
        (80, 13, 3, 2),
        (40, 28, 3, 1),
        (24, 56, 5, 2),
        (32, 30, 3, 2),
        (40, 56, 5, 2),
        (24, 70, 5, 2),
    ],
    ids=str,
)
def test_depthwise_over_the_team_is_the_unsplit_bits(team_calls, dtype, act, c, hw, k, stride):
    x = RNG.standard_normal((1, c, hw, hw)).astype(dtype)
    w = RNG.standard_normal((k, k, c, 1)).astype(dtype)
    bias = RNG.standard_normal(c).astype(dtype)
    ops = ["BiasAdd", *([act] if act else [])]
    conv = fused_depthwise_conv2d_native([1, 1, stride, stride], "SAME", [], "NCHW",
                                         [1, 1, 1, 1], ops, 1, 0.2)  # fmt: skip
    used = _both(team_calls, lambda: conv(x, w, bias))
    float64_exp = dtype == np.float64 and act in ("Swish", "Sigmoid")
    oh = -(-hw // stride)
    # Channels innermost up to 256 outputs, 1024 with a 5×5 filter; split there by whole pairs
    # of vectors of channels (float32: 32 channels or more).
    if float64_exp:
        want = []
    elif oh * oh <= (1024 if k == 5 else 256):
        want = ["depthwise_by_channel_team"] if c * x.itemsize >= 128 else []
    else:
        want = ["depthwise_planes_team"]
    assert used == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["Relu", "Swish"])
@pytest.mark.parametrize(
    "shape, k, path",
    [((3, 24, 30, 30), 3, "depthwise_planes_team"), ((3, 96, 14, 14), 3, "depthwise_by_channel_team"),
     ((2, 40, 7, 7), 5, "depthwise_by_channel_team"), ((8, 16, 9, 9), 3, "depthwise_by_channel_team")],
    ids=str,
)  # fmt: skip
def test_a_batch_of_depthwise_convolutions_over_the_team_is_the_unsplit_bits(
    team_calls, dtype, act, shape, k, path
):
    # Several images: runs of planes of all images (planes too large for the channels-innermost
    # loop), or an image's runs of channels, over the team.
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((k, k, shape[1], 1)).astype(dtype)
    bias = RNG.standard_normal(shape[1]).astype(dtype)
    conv = fused_depthwise_conv2d_native([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                                         ["BiasAdd", act], 1, 0.2)  # fmt: skip
    used = _both(team_calls, lambda: conv(x, w, bias))
    assert used == ([] if dtype == np.float64 and act == "Swish" else [path])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["Relu", "HardSwish", "Relu6", None])
@pytest.mark.parametrize("shape, o", [((4, 24, 28, 28), 72), ((8, 96, 7, 7), 576), ((2, 16, 9, 9), 20)],
                         ids=str)  # fmt: skip
def test_a_batch_of_pointwise_products_over_the_team_is_the_unsplit_bits(
    team_calls, dtype, act, shape, o
):
    """A batch's 1×1 products through the team with the bias and activation in registers: the
    bits of each image's product and epilogue pass on the Python pool's path."""
    if pointwise._mod() is None:
        pytest.skip("RILL_CONV_DIRECT=0: numpy's products")
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((1, 1, shape[1], o)).astype(dtype)
    bias = RNG.standard_normal(o).astype(dtype)
    conv = fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1],
                             ["BiasAdd", *([act] if act else [])], 1, 0.2)  # fmt: skip
    used = _both(team_calls, lambda: conv(x, w, bias))
    big = np.prod(shape) * o >= pointwise.TEAM_GRAIN
    assert used == (["gemm_batch_team"] if big else [])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape, o", [((8, 240, 14, 14), 40), ((4, 88, 28, 28), 24), ((2, 16, 9, 9), 20)],
                         ids=str)  # fmt: skip
def test_a_batch_of_residual_pointwise_products_over_the_team_is_the_unsplit_bits(
    team_calls, dtype, gated, relu, shape, o
):
    """A batch's 1×1 products with a residual side input ([BiasAdd, Add(, Relu)], optionally
    after a squeeze-excite gate: [Mul, BiasAdd, Add]) through the team with no epilogue in
    registers, then the residual pass: the bits of each image's product and epilogue on the
    Python pool's path."""
    from rill.exec.kernels.fused_conv_kernels import _input_scaled

    if pointwise._mod() is None:
        pytest.skip("RILL_CONV_DIRECT=0: numpy's products")
    n, c, h, wd = shape
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((1, 1, c, o)).astype(dtype)
    bias = RNG.standard_normal(o).astype(dtype)
    side = RNG.standard_normal((n, o, h, wd)).astype(dtype)
    ops = ["BiasAdd", "Add", *(["Relu"] if relu else [])]
    s = RNG.random((n, c, 1, 1)).astype(dtype)
    if gated:
        conv = _input_scaled([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ["Mul", *ops], 3, 0.2,
                             "_FusedConv2D")  # fmt: skip

        def run():
            return conv(x, w, s, bias, side)
    else:
        conv = fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ops, 2, 0.2)

        def run():
            return conv(x, w, bias, side)

    calls, solo = team_calls
    big = np.prod(shape) * o >= pointwise.TEAM_GRAIN
    # (a gate scales the input as the products pack it)
    entry = "gemm_scaled_batch_team" if gated else "gemm_batch_team"
    split = [run() for _ in range(5)]
    deadline = time.monotonic() + 20
    while big and entry not in calls and time.monotonic() < deadline:
        split.append(run())  # (a worker that stopped polling is woken by the first asks)
    assert sorted(set(calls)) == ([entry] if big else [])
    solo()
    one = run()
    for got in split:
        np.testing.assert_array_equal(got, one)
    want = np.matmul(w.reshape(c, o).T, (x * s if gated else x).reshape(n, c, h * wd))
    want = want.reshape(n, o, h, wd) + bias[:, None, None] + side
    np.testing.assert_allclose(one, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ["Swish", "Sigmoid", "Relu6", "HardSigmoid"])
def test_a_large_outputs_float32_epilogue_over_the_team_is_the_unsplit_bits(team_calls, act):
    # EfficientNet's 8 -> 48 expansion at 112×112 (half width): a product, then the Swish pass.
    x = RNG.standard_normal((1, 8, 40, 40)).astype(np.float32)
    w = RNG.standard_normal((1, 1, 8, 48)).astype(np.float32)
    bias = RNG.standard_normal(48).astype(np.float32)
    conv = fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ["BiasAdd", act], 1, 0.2)
    used = _both(team_calls, lambda: conv(x, w, bias))
    assert "epilogue_team" in used or act not in ("Swish", "Sigmoid")


def test_a_depthwise_channel_count_under_two_vectors_runs_unsplit(team_calls):
    calls, _ = team_calls
    x = RNG.standard_normal((1, 24, 7, 7)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 24, 1)).astype(np.float32)
    conv = fused_depthwise_conv2d_native([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                                         ["BiasAdd", "Relu"], 1, 0.2)  # fmt: skip
    conv(x, w, np.zeros(24, np.float32))
    assert not calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["HardSwish", "Relu", "Swish", None])
@pytest.mark.parametrize("k, stride, o", [(3, 2, 16), (7, 2, 20), (3, 1, 9)])
def test_an_rgb_stem_over_the_team_is_the_unsplit_bits(team_calls, dtype, act, k, stride, o):
    if conv_nchw._vec() is None:
        pytest.skip("RILL_CONV_DIRECT=0: the patches and a GEMM")
    if act == "Swish" and dtype == np.float64:
        act = "Sigmoid"  # (float64's exp is numpy's: not the compiled stem's epilogue)
    x = RNG.standard_normal((1, 3, 112, 104)).astype(dtype)  # bands of rows: more than one
    w = RNG.standard_normal((k, k, 3, o)).astype(dtype)
    bias = RNG.standard_normal(o).astype(dtype)
    p = k // 2
    conv = fused_conv2d_nchw([1, 1, stride, stride], "EXPLICIT", [0, 0, 0, 0, p, p, p, p],
                             [1, 1, 1, 1], ["BiasAdd", *([act] if act else [])], 1, 0.2)  # fmt: skip
    used = _both(team_calls, lambda: conv(x, w, bias))
    assert "direct_team" in used


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, k, s, pads",
    [((1, 64, 111, 111), 3, 2, None), ((1, 32, 112, 112), 3, 2, (1, 1)),
     ((1, 40, 60, 50), 2, 2, None), ((1, 32, 57, 41), 3, 1, (1, 1))],
    ids=str,
)  # fmt: skip
def test_a_batch_1_max_pool_over_the_team_is_the_unsplit_bits(team_calls, dtype, shape, k, s, pads):
    import rill.graph as rg
    from rill.exec.testing import run_kernel

    x = RNG.standard_normal(shape).astype(dtype)
    x.reshape(-1)[RNG.choice(x.size, x.size // 50, replace=False)] = np.nan
    attrs = {"ksize": [1, 1, k, k], "strides": [1, 1, s, s], "data_format": "NCHW",
             "padding": "VALID" if pads is None else "EXPLICIT"}  # fmt: skip
    if pads is not None:
        attrs["explicit_paddings"] = [0, 0, 0, 0, pads[0], pads[0], pads[1], pads[1]]
    with rg.Graph().as_default() as g:
        op = g.create_op("MaxPool", [rg.placeholder(rg.as_dtype(dtype))], attrs)
    used = _both(team_calls, lambda: run_kernel(op, x)[0])
    assert used == ["max_pool_team"]


@pytest.mark.parametrize("shape", [(64, 1024), (3, 7000), (1, 16384)], ids=str)
def test_a_float32_tanh_gelu_over_the_team_is_the_unsplit_bits(team_calls, shape):
    # A GPT-2-like block's MLP at batch 1 ([64, 1024]), a length no piece divides evenly.
    from rill.exec.kernels.fused_kernels import fused_tanh_gelu
    from rill.graph import dtypes

    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    gelu = fused_tanh_gelu(dtypes.float32, [0.044715, 0.7978845608, 1.0, 0.5])
    with np.errstate(all="ignore"):
        used = _both(team_calls, lambda: gelu(x))
        assert used == ["tanh_gelu32_team"]
        want = np.empty_like(x)
        jit.exp_tanh().tanh_gelu32(x.reshape(-1), want.reshape(-1), *np.float32(
            [0.044715, 0.7978845608, 1.0, 0.5]), 0, x.size)  # fmt: skip
        np.testing.assert_array_equal(gelu(x), want)
        mod = jit.exp_tanh()
        with pytest.raises(ValueError, match="four coefficients"):
            mod.tanh_gelu32_team(x.reshape(-1), want.reshape(-1)[:-1], np.zeros(4, np.float32),
                                 4, intra_op._pool.team, mod.gelu_piece_function())  # fmt: skip


@pytest.mark.parametrize("shape", [(1, 4, 64, 64), (3, 197, 197), (8192, 1)], ids=str)
def test_a_float32_softmax_over_the_team_is_the_unsplit_bits(team_calls, shape):
    # An attention's heads at batch 1 (GPT-2-like, ViT-small), and rows of one value.
    from rill.exec.kernels.nn_kernels import softmax

    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    kernel = softmax(np)
    with np.errstate(all="ignore"):
        used = _both(team_calls, lambda: kernel(x))
        assert used == ["softmax32_team"]
        rows = x.reshape(-1, shape[-1])
        want = np.empty_like(rows)
        jit.exp_tanh().softmax32_rows(rows, want, 0, len(rows))
        np.testing.assert_array_equal(kernel(x).reshape(rows.shape), want)
        with pytest.raises(ValueError, match="out of x's shape"):
            jit.exp_tanh().softmax32_team(rows, want[:1], 4, intra_op._pool.team,
                                          jit.exp_tanh().softmax_piece_function())  # fmt: skip
