"""The written-out depthwise tap loops (_depthwise_loops, 3×3 and 5×5) and the lean 1×1 path of
the NCHW _FusedConv2D: bit for bit the general path, and the numpy path (RILL_JIT=0) except
where the compiled pointwise product runs (to rounding there)."""

from __future__ import annotations

import numpy as np
import pytest
from sigmoid_bound import assert_sigmoid_close

from rill.exec.kernels import jit
from rill.exec.kernels.conv_kernels import _conv2d
from rill.exec.kernels.fused_conv_kernels import (
    fused_conv2d_nchw,
    fused_depthwise_conv2d_native,
    nchw_epilogue,
)

RNG = np.random.default_rng(2026)

PLANES = [
    # (x shape, k, strides, padding, explicit pads, dilations): planes above 64 outputs (the
    # plane-by-plane loop) and small ones with many channels (the channels-innermost loop)
    ((1, 6, 17, 19), 3, (1, 1), "EXPLICIT", (1, 1, 1, 1), (1, 1)),
    ((2, 5, 20, 18), 3, (2, 2), "EXPLICIT", (1, 1, 1, 1), (1, 1)),
    ((1, 4, 23, 21), 5, (2, 2), "SAME", None, (1, 1)),
    ((1, 3, 16, 16), 5, (1, 1), "EXPLICIT", (2, 2, 2, 2), (1, 1)),
    ((1, 3, 19, 17), 3, (1, 2), "VALID", None, (2, 1)),
    ((1, 3, 15, 15), 3, (3, 3), "SAME", None, (1, 1)),
    ((2, 20, 7, 7), 5, (1, 1), "EXPLICIT", (2, 2, 2, 2), (1, 1)),
    ((1, 24, 8, 8), 3, (1, 1), "SAME", None, (1, 1)),
    # rows summed in blocks (_depthwise_vec.rows_*): one output row (a block of one row), a 5×5
    # filter at stride 2 padded more below and right than above and left, rows of 6 (one
    # float64 vector and a half: the last vector overlaps the first; float32 keeps the
    # buffered loop)
    ((1, 2, 1, 20), 3, (1, 1), "SAME", None, (1, 1)),
    ((1, 3, 30, 33), 5, (2, 2), "SAME", None, (1, 1)),
    ((1, 2, 9, 6), 3, (1, 1), "SAME", None, (1, 1)),
    # channels-innermost with the register-blocked loops: whole vectors of channels, rows of
    # more than one group of columns (7 + 7, 7 + 3), stride and dilation; and a 1×1 filter,
    # which those loops leave to the generic ones
    ((1, 32, 14, 14), 5, (1, 1), "EXPLICIT", (2, 2, 2, 2), (1, 1)),
    ((2, 17, 9, 11), 3, (2, 2), "SAME", None, (1, 1)),
    ((1, 48, 12, 10), 3, (1, 1), "SAME", None, (2, 2)),
    ((1, 16, 6, 6), 1, (1, 1), "VALID", None, (1, 1)),
    # channels-innermost planes of fewer positions than a transposed block (8): the channels
    # go in or out one at a time
    ((1, 16, 2, 3), 3, (1, 1), "SAME", None, (1, 1)),
    ((1, 24, 5, 5), 3, (2, 2), "SAME", None, (1, 1)),
    # a 5×5 filter takes the channels-innermost loop on larger planes (20×20) than a 3×3
    ((1, 16, 20, 20), 5, (1, 1), "SAME", None, (1, 1)),
]


def _special(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, max(1, flat.size // 50), replace=False)
    flat[picks] = RNG.choice(np.array([np.inf, -np.inf, -0.0, 0.0], dtype), picks.size)
    return x


def _both(make, *args):
    results = []
    for on in (True, False):
        old = jit.set_enabled(on)
        try:
            kern = make()
            with np.errstate(all="ignore"):
                results.append(kern(*args))
        finally:
            jit.set_enabled(old)
    return results


@pytest.mark.parametrize("case", PLANES, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-d{c[5]}")
@pytest.mark.parametrize("act", [None, "Relu", "Relu6", "HardSigmoid", "HardSwish", "Swish"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_written_out_depthwise_taps_are_the_numpy_path_bit_for_bit(case, act, dtype):
    shape, k, strides, padding, pads, dilations = case
    x = _special(shape, dtype)
    w = RNG.standard_normal((k, k, shape[1], 1)).astype(dtype)
    bias = RNG.standard_normal(shape[1]).astype(dtype)
    ep = [0, 0, 0, 0, *pads] if padding == "EXPLICIT" else []
    a, b = _both(lambda: fused_depthwise_conv2d_native(
        [1, 1, *strides], padding, ep, "NCHW", [1, 1, *dilations],
        ["BiasAdd", *([act] if act else [])], 1, 0.2), x, w, bias)  # fmt: skip
    assert a.shape == b.shape and a.dtype == b.dtype
    if act == "Swish" and dtype == np.float32:  # sigmoid32's own exp: a stated bound
        assert_sigmoid_close(a, b)
        return
    # Inf - Inf makes NaNs; which NaN's sign a sum keeps may differ, nothing else.
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    assert nan.mean() < 0.9
    np.testing.assert_array_equal(a[~nan], b[~nan])
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


# The last two run the compiled pointwise product (kernels.pointwise: 16 positions or more),
# with a partial last block of rows and of columns.
POINTWISE = [(1, 16, 7, 7, 24), (3, 5, 4, 6, 7), (1, 576, 1, 1, 144), (2, 8, 1, 3, 1),
             (2, 40, 14, 14, 36), (1, 24, 5, 4, 9)]  # fmt: skip


@pytest.mark.parametrize("shape", POINTWISE, ids=str)
@pytest.mark.parametrize("act", [None, "Relu", "Relu6", "HardSigmoid", "HardSwish", "Swish"])
@pytest.mark.parametrize("padding", ["VALID", "SAME", "EXPLICIT"])
def test_pointwise_conv_path_is_the_general_path_bit_for_bit(shape, act, padding):
    n, c, h, wd, o = shape
    x = _special((n, c, h, wd), np.float32)
    w = RNG.standard_normal((1, 1, c, o)).astype(np.float32)
    bias = RNG.standard_normal(o).astype(np.float32)
    ep = [0] * 8 if padding == "EXPLICIT" else []
    ops = ["BiasAdd", *([act] if act else [])]
    lean = fused_conv2d_nchw([1, 1, 1, 1], padding, ep, [1, 1, 1, 1], ops, 1, 0.2)
    # The general path: Conv2D's NCHW kernel with the fused op's epilogue.
    general = _conv2d([1, 1, 1, 1], padding, ep, "NCHW", [1, 1, 1, 1],
                      nchw_epilogue(ops, 1, 0.2, "_FusedConv2D"))  # fmt: skip
    with np.errstate(all="ignore"):
        got = lean(x, w, bias)
        want = general(x, w, bias)
    assert got.shape == (n, o, h, wd)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_pointwise_conv_path_checks_its_bias():
    from rill.graph.errors import InvalidArgumentError

    k = fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ["BiasAdd", "Relu"], 1, 0.2)
    x = np.ones((1, 4, 3, 3), np.float32)
    w = np.ones((1, 1, 4, 5), np.float32)
    with pytest.raises(InvalidArgumentError, match="bias"):
        k(x, w, np.ones(4, np.float32))


@pytest.mark.parametrize("shape", POINTWISE, ids=str)
@pytest.mark.parametrize("relu", [False, True])
def test_pointwise_residual_conv_is_the_numpy_path(shape, relu):
    """Bit for bit where both multiply with numpy; to rounding where the compiled loops run
    their own product."""
    n, c, h, wd, o = shape
    x = _special((n, c, h, wd), np.float32)
    w = RNG.standard_normal((1, 1, c, o)).astype(np.float32)
    bias = RNG.standard_normal(o).astype(np.float32)
    side = RNG.standard_normal((n, o, h, wd)).astype(np.float32)
    ops = ["BiasAdd", "Add", *(["Relu"] if relu else [])]
    a, b = _both(lambda: fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1], ops, 2, 0.2),
                 x, w, bias, side)  # fmt: skip
    assert a.shape == b.shape == (n, o, h, wd)
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    if h * wd >= 16:
        # The compiled pointwise product (fused multiply-adds) against numpy's: to rounding.
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
        fin = np.isfinite(b)
        np.testing.assert_allclose(a[fin], b[fin], rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize("act", ["Sigmoid", "Swish"])
@pytest.mark.parametrize(("c", "hw", "k"), [(16, 7, 3), (24, 8, 5), (1400, 7, 3)])
def test_one_image_channels_innermost_sigmoid_has_the_batched_bits(act, c, hw, k):
    # Batch 1 of the channels-innermost loop with a float32 Sigmoid / Swish runs on the caller,
    # sigmoid32 over the planes in pieces (1400 channels of 7×7: two pieces); batch 2 runs the
    # per-image pieces. Each image gets the same bits either way, and the numpy path's values
    # within the sigmoid bound.
    x = _special((1, c, hw, hw), np.float32)
    w = RNG.standard_normal((k, k, c, 1)).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)

    def make():
        return fused_depthwise_conv2d_native([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                                             ["BiasAdd", act], 1, 0.2)  # fmt: skip

    one, plain = _both(make, x, w, bias)
    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    with np.errstate(all="ignore"):
        two = make()(np.concatenate([x, x]), w, bias)
    for i in range(2):
        np.testing.assert_array_equal(two[i : i + 1].view(np.uint32), one.view(np.uint32))
    assert_sigmoid_close(one, plain)
