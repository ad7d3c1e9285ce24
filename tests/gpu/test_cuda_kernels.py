"""The CUDA C kernels of the convolution and pooling kernels (rill.exec.kernels.gpu.cuda: im2col,
col2im, tiled MaxPool and MaxPoolGrad), on a real GPU (marker `gpu`): each geometry's forward and
gradient results with the kernels equal the whole-array paths' (the ones the simulated GPU runs
in CI), and the kernels compiled and ran (no fallback)."""

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session
from rill.exec.device import gpu_available
from rill.exec.kernels.gpu import cuda, nn

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_available() == 0, reason="needs cupy and a CUDA device"),
    pytest.mark.no_roundtrip("GPU runs; round trips are checked by the CPU suites"),
]

# (x NHWC, filter, conv2d keywords): SAME with odd and even filters, a one-channel first layer,
# strides with asymmetric SAME padding, dilation, explicit (and asymmetric) padding.
CONVS = [
    ((2, 9, 9, 3), (3, 3, 3, 8), {"strides": 1, "padding": "SAME"}),
    ((2, 12, 12, 1), (5, 5, 1, 32), {"strides": 1, "padding": "SAME"}),
    ((2, 6, 7, 4), (2, 4, 4, 5), {"strides": 1, "padding": "SAME"}),
    ((2, 10, 11, 4), (3, 3, 4, 5), {"strides": 2, "padding": "SAME"}),
    ((1, 9, 9, 2), (3, 3, 2, 3), {"strides": 1, "padding": "VALID", "dilations": 2}),
    ((1, 8, 8, 2), (2, 3, 2, 3),
     {"strides": [1, 2, 1, 1], "padding": [[0, 0], [1, 2], [0, 1], [0, 0]]}),
    ((2, 7, 9, 3), (4, 2, 3, 4), {"strides": [1, 3, 2, 1], "padding": "VALID",
                                  "dilations": [1, 1, 2, 1]}),
]  # fmt: skip


def _nchw(kw):
    kw = dict(kw, data_format="NCHW")
    if isinstance(kw["padding"], list):
        p = kw["padding"]
        kw["padding"] = [p[0], p[3], p[1], p[2]]
    if isinstance(kw["strides"], list):
        s = kw["strides"]
        kw["strides"] = [s[0], s[3], s[1], s[2]]
    return kw


def _run_both(build, feeds):
    """build() -> fetches, run on the GPU with the CUDA kernels and with the whole-array paths:
    (with, without, why the kernels fell back or None)."""
    g = rg.Graph()
    with g.as_default(), g.device("/device:GPU:0"):
        fetches = build()
    out = {}
    for on in (True, False):
        cuda.FALLBACK_REASON = None if on else "off for the comparison"
        try:
            with Session(graph=g) as sess:
                out[on] = sess.run(fetches, feeds(g))
            if on:
                why = cuda.FALLBACK_REASON
        finally:
            cuda.FALLBACK_REASON = None
    return out[True], out[False], why


@pytest.mark.parametrize("full_conv", [True, False])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_kernels_match_whole_array_paths(case, dtype, fmt, full_conv, monkeypatch):
    # full_conv: a stride-1 input gradient as im2col of out_backprop, or as col2im (whose sums
    # are in another order than the whole-array path's one GEMM: a looser float32 tolerance).
    monkeypatch.setattr(nn, "STRIDE1_FULL_CONV", full_conv)
    xs, ws, kw = CONVS[case]
    if fmt == "NCHW":
        xs, kw = (xs[0], xs[3], xs[1], xs[2]), _nchw(kw)
    rng = np.random.default_rng(case)
    xv, wv = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    ph = {}

    def build():
        ph["x"] = x = rg.placeholder(dtype, xs)
        ph["w"] = w = rg.placeholder(dtype, ws)
        y = rg.conv2d(x, w, **kw)
        r = rg.constant(rng.standard_normal(y.shape.as_list()).astype(dtype))
        gx, gw = gradients(rg.reduce_sum(y * r), [x, w])
        assert {gx.op.type, gw.op.type} == {"Conv2DBackpropInput", "Conv2DBackpropFilter"}
        return [y, gx, gw]

    got, want, why = _run_both(build, lambda g: {ph["x"]: xv, ph["w"]: wv})
    assert why is None
    assert any("im2col" in src for src in cuda._KERNELS)
    tol = (1e-6 if full_conv else 1e-5) if dtype == np.float32 else 1e-12
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_max_pool_kernels_match_whole_array_paths(dtype, fmt):
    rng = np.random.default_rng(1)
    xs = (2, 8, 6, 3) if fmt == "NHWC" else (2, 3, 8, 6)
    # Small integers: windows with tied maxima (the first in row-major order wins) and NaNs,
    # first in a window and later in one.
    xv = rng.integers(0, 3, xs).astype(dtype)
    xv.flat[0] = np.nan
    xv.flat[7] = np.nan
    ksize = [1, 2, 2, 1] if fmt == "NHWC" else [1, 1, 2, 2]
    ph = {}

    def build():
        ph["x"] = x = rg.placeholder(dtype, xs)
        y = rg.max_pool(x, ksize, ksize, "VALID", data_format=fmt)
        r = rg.constant(rng.standard_normal(y.shape.as_list()).astype(dtype))
        (gx,) = gradients(rg.reduce_sum(y * r), [x])
        assert gx.op.type == "MaxPoolGrad"
        return [y, gx]

    got, want, why = _run_both(build, lambda g: {ph["x"]: xv})
    assert why is None
    assert any("max_pool_grad" in src for src in cuda._KERNELS)
    assert any("void max_pool(" in src for src in cuda._KERNELS)
    assert np.isnan(got[0]).any()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
