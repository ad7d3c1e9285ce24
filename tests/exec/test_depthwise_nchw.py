"""DepthwiseConv2dNative on NCHW data runs on the channel planes in place; its results are
bit-identical to the NHWC kernel's on the transposed data (same products, same order)."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session


def _run(x, w, data_format, strides, padding, dilations):
    g = rg.Graph()
    with g.as_default():
        xp = rg.placeholder(rg.as_dtype(x.dtype), x.shape)
        attrs = {"strides": strides, "padding": padding, "data_format": data_format,
                 "dilations": dilations}  # fmt: skip
        if isinstance(padding, list):
            attrs["padding"] = "EXPLICIT"
            attrs["explicit_paddings"] = padding
        y = g.create_op("DepthwiseConv2dNative", [xp, rg.constant(w)], attrs).outputs[0]
    return Session(graph=g).run(y, {xp: x})


@pytest.mark.parametrize("k,mult,stride,padding,dilation", [
    (3, 1, 1, "SAME", 1), (3, 1, 2, "SAME", 1), (5, 1, 2, "VALID", 1), (3, 2, 1, "SAME", 1),
    (5, 3, 2, "SAME", 1), (3, 1, 1, "VALID", 2), (3, 1, 2, "EXPLICIT", 1),
])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("width", [11, 23])  # the small-plane (NHWC copy) and in-place paths
def test_nchw_is_bit_identical_to_nhwc(k, mult, stride, padding, dilation, dtype, width):
    rng = np.random.default_rng(k * 10 + mult)
    x = rng.normal(size=(2, 7, width, 6)).astype(dtype)  # NHWC
    w = rng.normal(size=(k, k, 6, mult)).astype(dtype)
    pad_nhwc = pad_nchw = padding
    if padding == "EXPLICIT":
        pad_nhwc = [0, 0, 1, 2, 0, 1, 0, 0]
        pad_nchw = [0, 0, 0, 0, 1, 2, 0, 1]
    want = _run(x, w, "NHWC", [1, stride, stride, 1], pad_nhwc, [1, dilation, dilation, 1])
    got = _run(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), w, "NCHW",
               [1, 1, stride, stride], pad_nchw, [1, 1, dilation, dilation])  # fmt: skip
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want.transpose(0, 3, 1, 2))
    assert want.shape[-1] == 6 * mult


@pytest.mark.parametrize("shape, k, mult, stride", [
    ((1, 16, 9, 11), 3, 1, 1), ((2, 24, 30, 30), 5, 1, 2), ((1, 40, 7, 7), 3, 2, 1),
    ((2, 3, 20, 17), 3, 1, 2),
])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nchw_runs_the_compiled_loops_with_the_numpy_paths_bits(shape, k, mult, stride, dtype,
                                                                monkeypatch):  # fmt: skip
    """Float NCHW DepthwiseConv2dNative runs _FusedDepthwiseConv2dNative's compiled loops with no
    bias and no activation: the numpy path's bits (RILL_JIT=0), signed zeros, infinities and
    NaNs included."""
    from rill.exec.kernels import fused_conv_kernels, jit

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    rng = np.random.default_rng(sum(shape) + k)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 8, replace=False)] = -0.0
    flat[rng.choice(flat.size, 3, replace=False)] = np.inf
    flat[rng.choice(flat.size, 2, replace=False)] = np.nan
    w = rng.standard_normal((k, k, shape[1], mult)).astype(dtype)
    w[0, 0, 0, 0] = -0.0
    calls = []
    real = fused_conv_kernels.depthwise_nchw
    monkeypatch.setattr(fused_conv_kernels, "depthwise_nchw",
                        lambda *a: calls.append(1) or real(*a))  # fmt: skip
    args = ([1, 1, stride, stride], "SAME", [1, 1, 1, 1])
    got = _run(x, w, "NCHW", *args)
    assert calls
    old = jit.set_enabled(False)
    try:
        want = _run(x, w, "NCHW", *args)
    finally:
        jit.set_enabled(old)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))
