"""The channels-first kernels of imported models: _FusedConv2D's NCHW convolution for few input
channels (conv_nchw) against Conv2D's NHWC kernel, and the compiled NCHW max pooling against the
numpy path (NaN, infinities, ties, clipped windows)."""

from __future__ import annotations

import numpy as np
import pytest
from sigmoid_bound import assert_sigmoid_close

import rill.exec.kernels.intra_op as intra_op
from rill.exec.kernels import jit
from rill.exec.kernels.conv_kernels import conv2d
from rill.exec.kernels.fused_conv_kernels import _BY_CHANNEL_OUTPUTS
from rill.exec.kernels.fused_kernels import fused_conv2d
from rill.exec.kernels.pool_kernels import max_pool

RNG = np.random.default_rng(2021)


def _nhwc_reference(x, w, bias, strides, padding, pads, dilations, act):
    """Conv2D's NHWC kernel, + bias, then the activation in numpy (float64 math)."""
    ep = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if padding == "EXPLICIT" else []
    k = conv2d([1, *strides, 1], padding, ep, "NHWC", [1, *dilations, 1])
    y = (
        k(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w).transpose(0, 3, 1, 2)
        + bias[:, None, None]
    )
    y = y.astype(np.float64)
    if act == "Relu":
        return np.maximum(y, 0)
    if act == "Relu6":
        return np.clip(y, 0, 6)
    if act == "HardSwish":
        return y * np.clip(y / 6 + 0.5, 0, 1)
    if act == "Swish":
        return y / (1 + np.exp(-y))
    if act == "LeakyRelu":
        return np.where(y > 0, y, 0.2 * y)
    return y


CASES = [
    # (x shape, kh, kw, strides, padding, explicit pads (top, bottom, left, right), dilations)
    ((1, 3, 17, 19), 3, 3, (2, 2), "EXPLICIT", (1, 1, 1, 1), (1, 1)),
    ((2, 3, 20, 16), 7, 7, (2, 2), "EXPLICIT", (3, 3, 3, 3), (1, 1)),
    ((2, 1, 9, 11), 3, 2, (1, 3), "SAME", None, (1, 1)),
    ((1, 4, 12, 10), 3, 3, (1, 1), "VALID", None, (2, 2)),
    ((1, 2, 10, 13), 4, 3, (3, 2), "EXPLICIT", (0, 2, 1, 0), (1, 2)),
    ((3, 3, 8, 8), 1, 1, (1, 1), "VALID", None, (1, 1)),  # one GEMM per image
    ((1, 3, 8, 9), 1, 1, (2, 2), "VALID", None, (1, 1)),
    ((1, 2, 5, 4), 5, 5, (1, 1), "SAME", None, (1, 1)),  # the window wider than the input
    ((0, 3, 6, 6), 3, 3, (1, 1), "SAME", None, (1, 1)),  # an empty batch
    ((1, 3, 20, 22), 3, 3, (1, 1), "SAME", None, (6, 6)),  # rows 12 wider: products cropped
    # Windows that tile the image (a vision transformer's patches): the patch matrix times the
    # filter (k = kh·kw·c >= 64, at least a vector of positions), the input's edge cropped.
    ((2, 3, 32, 36), 8, 8, (8, 8), "VALID", None, (1, 1)),
    ((1, 4, 30, 34), 4, 4, (4, 4), "EXPLICIT", (0, 0, 0, 0), (1, 1)),
    ((1, 8, 9, 10), 3, 3, (3, 3), "VALID", None, (1, 1)),  # 9 positions: summed directly
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"x{c[0]}-k{c[1]}x{c[2]}-s{c[3]}-{c[4]}")
@pytest.mark.parametrize("act", [None, "Relu", "Relu6", "HardSwish", "Swish", "LeakyRelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_nchw_conv_of_few_channels_matches_conv2d(case, act, dtype):
    shape, kh, kw, strides, padding, pads, dilations = case
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((kh, kw, shape[1], 6)).astype(dtype)
    bias = RNG.standard_normal(6).astype(dtype)
    ep = [0, 0, 0, 0, *pads] if padding == "EXPLICIT" else []
    k = fused_conv2d([1, 1, *strides], padding, ep, "NCHW", [1, 1, *dilations],
                     ["BiasAdd", *([act] if act else [])], 1, 0.2, "HWIO", 0)  # fmt: skip
    got = k(x, w, bias)
    want = _nhwc_reference(x, w, bias, strides, padding, pads, dilations, act)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


@pytest.mark.skipif(not jit.enabled(), reason="RILL_JIT=0 turns the compiled loops off")
def test_a_tiled_nchw_conv_is_its_patch_product_on_any_thread(monkeypatch):
    """Windows that tile the image: the patches (conv_tiles, in the filter matrix's row order)
    times the filter through pointwise.matmul, whose bits do not depend on the threads."""
    from rill.exec import threads as policy
    from rill.exec.kernels import _conv_loops, conv_nchw, pointwise

    if pointwise._mod() is None:
        pytest.skip("the compiled product is off (RILL_CONV_DIRECT=0)")
    x = RNG.standard_normal((2, 3, 64, 64)).astype(np.float32)
    w = RNG.standard_normal((16, 16, 3, 40)).astype(np.float32)
    bias = RNG.standard_normal(40).astype(np.float32)
    p = np.empty((768, 16), np.float32)
    _conv_loops.conv_tiles(x, 1, p, 16, 16, 4, 4)
    want = x[1].reshape(3, 4, 16, 4, 16).transpose(2, 4, 0, 1, 3).reshape(768, 16)
    np.testing.assert_array_equal(p, want)
    seen = []
    real = pointwise.matmul
    monkeypatch.setattr(
        pointwise, "matmul", lambda *a, **k: seen.append(a[1].shape) or real(*a, **k)
    )
    monkeypatch.setattr(intra_op, "team", lambda: None)
    results = []
    for n in (1, 2):
        monkeypatch.setattr(intra_op, "_THREADS", n)
        monkeypatch.setattr(policy, "_BUDGET", n)
        monkeypatch.setattr(policy, "cores_idle", lambda n=n: n)
        monkeypatch.setattr(policy, "SPLIT_GRAIN", 1)
        k = fused_conv2d([1, 1, 16, 16], "VALID", [], "NCHW", [1, 1, 1, 1], ["BiasAdd", "Relu"],
                         1, 0.2, "HWIO", 0)  # fmt: skip
        results.append(k(x, w, bias))
    assert seen and all(shape == (768, 16) for shape in seen)
    np.testing.assert_array_equal(results[0], results[1])
    want = _nhwc_reference(x, w, bias, (16, 16), "VALID", None, (1, 1), "Relu")
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-4)
    assert conv_nchw._TILED_K <= 768


def test_fused_nchw_conv_bits_do_not_depend_on_the_threads():
    x = RNG.standard_normal((3, 3, 40, 36)).astype(np.float32)
    w = RNG.standard_normal((7, 7, 3, 16)).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    results = []
    saved = intra_op._THREADS
    try:
        for threads in (1, 3):
            intra_op._THREADS = threads
            k = fused_conv2d([1, 1, 2, 2], "EXPLICIT", [0, 0, 0, 0, 3, 3, 3, 3], "NCHW",
                             [1, 1, 1, 1], ["BiasAdd", "Relu"], 1, 0.2, "HWIO", 0)  # fmt: skip
            results.append(k(x, w, bias))
    finally:
        intra_op._THREADS = saved
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize(
    "shape,kernel,strides,out_channels",
    [
        ((2, 3, 30, 70), 3, (1, 1), 20),  # 3 column blocks, the last partial; 20 = 2·8 + 4 channels
        ((1, 3, 45, 45), 7, (2, 2), 32),  # ResNet's stem at a small size
        ((1, 1, 9, 200), 5, (3, 1), 9),
        ((1, 4, 16, 5), 3, (1, 2), 8),  # one column vector, wider than the output
        # 13 = 8 + 5 channels: with AVX2's 4-channel halves of a block (rows of 61 take 3
        # vectors a block) the last block's second half is partly past the output's channels
        ((1, 2, 11, 61), 3, (1, 1), 13),
        # bands of 4 rows, split over the threads (5·5·3 taps), each row's last block partial
        ((1, 3, 40, 500), 5, (1, 1), 16),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direct_nchw_conv_matches_the_patch_product(monkeypatch, shape, kernel, strides,
                                                    out_channels, dtype):  # fmt: skip
    """_conv_vec's register-blocked convolution (output channels padded to blocks of 8,
    columns to whole vectors) against the patches and a GEMM it replaced, ReLU and HardSwish."""
    from rill.exec import threads as policy
    from rill.exec.kernels import conv_nchw
    from rill.exec.kernels.conv_common import _Window

    if conv_nchw._vec() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((kernel, kernel, shape[1], out_channels)).astype(dtype)
    bias = RNG.standard_normal(out_channels).astype(dtype)
    pad = kernel // 2
    win = _Window([1, 1, *strides], [1, 1, 1, 1], "EXPLICIT", [0, 0, 0, 0] + [pad] * 4, "NCHW")
    monkeypatch.setattr(policy, "cores_idle", lambda: 2)
    monkeypatch.setattr(policy, "cores_free", lambda: 2)
    for code in (1, 4):
        monkeypatch.setattr(intra_op, "_THREADS", 1)
        got = conv_nchw.nchw_conv(x, w, win, bias, code)
        monkeypatch.setattr(intra_op, "_THREADS", 2)  # bands over two threads: the same bits
        np.testing.assert_array_equal(conv_nchw.nchw_conv(x, w, win, bias, code), got)
        with monkeypatch.context() as m:
            m.setattr(conv_nchw, "_vec", lambda: None)
            want = conv_nchw.nchw_conv(x, w, win, bias, code)
        assert got.shape == want.shape and got.dtype == dtype
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def _special(shape, dtype):
    v = RNG.integers(-3, 4, shape).astype(dtype)  # small integers: ties
    flat = v.reshape(-1)
    picks = RNG.choice(flat.size, size=max(1, flat.size // 12), replace=False)
    flat[picks] = RNG.choice(np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0], dtype), picks.size)
    return v


POOLS = [
    ((2, 3, 11, 13), (3, 3), (2, 2), "EXPLICIT", (1, 1, 1, 1)),
    ((1, 4, 12, 12), (3, 3), (2, 2), "VALID", None),
    ((1, 2, 9, 7), (2, 3), (1, 2), "SAME", None),
    ((2, 2, 8, 9), (3, 2), (3, 1), "EXPLICIT", (2, 0, 0, 1)),
    ((1, 1, 5, 5), (5, 5), (1, 1), "SAME", None),
    ((1, 2, 6, 6), (1, 1), (2, 2), "VALID", None),
    ((1, 2, 4, 4), (40, 40), (1, 1), "SAME", None),  # far larger than the input: numpy's taps
]


@pytest.mark.parametrize("case", POOLS, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[3]}")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_nchw_max_pool_matches_the_numpy_path(case, dtype):
    shape, ksize, strides, padding, pads = case
    x = _special(shape, dtype)
    ep = [0, 0, 0, 0, *pads] if padding == "EXPLICIT" else []
    k = max_pool([1, 1, *ksize], [1, 1, *strides], padding, ep, "NCHW")
    results = []
    for on in (True, False):
        old = jit.set_enabled(on)
        try:
            results.append(k(x))
        finally:
            jit.set_enabled(old)
    a, b = results
    assert a.shape == b.shape and a.dtype == b.dtype
    # The same values (NaN where a window holds one; the compiled loop takes the taps column
    # by column, so a tie of zeros or of NaNs may keep another one's sign), and the same bits
    # wherever the window's maximum is neither zero nor NaN.
    np.testing.assert_array_equal(a, b)
    plain = ~np.isnan(b) & (b != 0)
    np.testing.assert_array_equal(a[plain].view(np.uint8), b[plain].view(np.uint8))
    # And the values are the windows' maxima (NaN where a window holds one).
    nhwc = max_pool([1, *ksize, 1], [1, *strides, 1], padding,
                    [0, 0, *pads, 0, 0] if pads else [], "NHWC")  # fmt: skip
    want = nhwc(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(a, want)


DEPTHWISE = [
    # (x shape, k, strides, padding, explicit pads, dilations): small output planes, where the
    # channels-innermost loop runs (multiplier 1, 16 channels or more)
    ((2, 20, 7, 7), 5, (1, 1), "EXPLICIT", (2, 2, 2, 2), (1, 1)),
    ((1, 24, 14, 13), 3, (2, 2), "SAME", None, (1, 1)),
    ((1, 16, 9, 9), 3, (1, 2), "VALID", None, (2, 1)),
    ((3, 17, 5, 6), 3, (1, 1), "EXPLICIT", (0, 2, 1, 0), (1, 1)),
    ((2, 24, 14, 14), 5, (1, 1), "SAME", None, (1, 1)),  # 196 outputs a plane
    ((1, 32, 29, 27), 5, (2, 2), "EXPLICIT", (2, 1, 2, 2), (1, 1)),
]


def _depthwise_both_paths(case, act):
    """A fused NCHW depthwise convolution (bias, act) of special values, compiled and numpy."""
    from rill.exec.kernels.fused_conv_kernels import fused_depthwise_conv2d_native

    shape, k, strides, padding, pads, dilations = case
    x = _special(shape, np.float32) * np.float32(0.7)
    w = RNG.standard_normal((k, k, shape[1], 1)).astype(np.float32)
    bias = RNG.standard_normal(shape[1]).astype(np.float32)
    ep = [0, 0, 0, 0, *pads] if padding == "EXPLICIT" else []
    results = []
    for on in (True, False):
        old = jit.set_enabled(on)
        try:
            kern = fused_depthwise_conv2d_native([1, 1, *strides], padding, ep, "NCHW",
                                                 [1, 1, *dilations],
                                                 ["BiasAdd", *([act] if act else [])], 1, 0.2)  # fmt: skip
            with np.errstate(all="ignore"):
                results.append(kern(x, w, bias))
        finally:
            jit.set_enabled(old)
    return results


@pytest.mark.parametrize("case", DEPTHWISE, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[3]}")
@pytest.mark.parametrize("act", [None, "Relu6", "HardSwish", "Swish", "Elu"])
def test_depthwise_of_small_planes_is_the_numpy_path_bit_for_bit(case, act):
    a, b = _depthwise_both_paths(case, act)
    assert a.shape == b.shape and a.shape[2] * a.shape[3] <= _BY_CHANNEL_OUTPUTS
    if act == "Swish":  # float32: sigmoid32's own exp, a stated bound
        assert_sigmoid_close(a, b)
        return
    # The same bits, except which sign a NaN keeps where two NaNs meet in a sum (the
    # plane-by-plane loop and numpy differ there too).
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


PLANES = [
    # (x shape, k, strides, padding, explicit pads, dilations): planes over 256 outputs or under
    # 16 channels, which the plane-by-plane loop takes (each plane copied, padded, into its
    # stride phases: the leading and trailing padding of every phase row, the stride-2 split of
    # even and odd columns at odd and even left pads and widths, strides 1 to 3)
    ((1, 3, 17, 16), 3, (2, 2), "EXPLICIT", (1, 1, 1, 1), (1, 1)),
    ((2, 2, 16, 17), 3, (2, 2), "EXPLICIT", (0, 1, 0, 1), (1, 1)),
    ((1, 4, 18, 15), 5, (2, 2), "EXPLICIT", (2, 2, 2, 2), (1, 1)),
    ((1, 2, 12, 13), 3, (2, 2), "EXPLICIT", (3, 0, 4, 5), (1, 1)),  # pads wider than the window
    ((1, 3, 14, 11), 3, (1, 1), "SAME", None, (1, 1)),
    ((1, 2, 13, 12), 5, (1, 1), "EXPLICIT", (0, 3, 6, 1), (1, 1)),
    ((1, 2, 15, 14), 3, (3, 3), "EXPLICIT", (1, 2, 2, 1), (1, 1)),
    ((1, 2, 16, 15), 3, (1, 2), "VALID", None, (2, 2)),
    ((1, 2, 11, 12), 2, (2, 1), "SAME", None, (1, 1)),
    ((1, 20, 17, 17), 3, (1, 1), "SAME", None, (1, 1)),  # 289 outputs a plane
]


@pytest.mark.parametrize("case", PLANES, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[4]}-d{c[5]}")
@pytest.mark.parametrize("act", [None, "HardSwish"])
def test_depthwise_plane_by_plane_is_the_numpy_path_bit_for_bit(case, act):
    a, b = _depthwise_both_paths(case, act)
    shape = case[0]
    assert a.shape == b.shape
    assert a.shape[2] * a.shape[3] > _BY_CHANNEL_OUTPUTS or shape[1] < 16
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize(
    "case",
    [
        ((2, 6, 17, 16), 3, (2, 2), (1, 1, 1, 1), (1, 1)),
        ((1, 6, 16, 17), 5, (2, 2), (2, 1, 2, 3), (1, 1)),
        ((1, 5, 14, 15), 3, (1, 1), (1, 1, 1, 1), (1, 1)),
        ((2, 4, 13, 12), 3, (1, 1), (2, 2, 2, 2), (2, 2)),
        ((1, 4, 15, 14), 3, (3, 3), (1, 2, 2, 1), (1, 1)),
    ],
    ids=str,
)
def test_depthwise_planes_leave_nothing_in_the_padding(case):
    """The plane-by-plane loop writes its buffer's padding once (zeros) and then copies only
    each plane's values: a plane of NaNs, infinities and -0 before a finite one must not leave
    anything there (the finite plane's border outputs stay finite and the numpy path's bits)."""
    from rill.exec.kernels.fused_conv_kernels import fused_depthwise_conv2d_native

    shape, k, strides, pads, dilations = case
    x = RNG.standard_normal(shape).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
    x[:, 0::2] = RNG.choice(specials, x[:, 0::2].shape)  # every other plane non-finite or -0
    w = RNG.standard_normal((k, k, shape[1], 1)).astype(np.float32)
    bias = RNG.standard_normal(shape[1]).astype(np.float32)
    results = []
    for on in (True, False):
        old = jit.set_enabled(on)
        try:
            kern = fused_depthwise_conv2d_native([1, 1, *strides], "EXPLICIT",
                                                 [0, 0, 0, 0, *pads], "NCHW",
                                                 [1, 1, *dilations], ["BiasAdd", "Relu"], 1, 0.2)  # fmt: skip
            with np.errstate(all="ignore"):
                results.append(kern(x, w, bias))
        finally:
            jit.set_enabled(old)
    a, b = results
    assert np.isfinite(a[:, 1::2]).all()
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(b)
    np.testing.assert_array_equal(a[ok].view(np.uint32), b[ok].view(np.uint32))


def test_only_convolutions_of_many_patch_rows_split_over_threads(monkeypatch):
    """Bands split over the threads from conv_nchw._SPLIT_K patch rows (kh·kw·c): an RGB 3×3
    stem (27) is memory-bound and lost split by bands; a 7×7 one (147) gains. A stem's images
    still go to the threads whole (each image's phases, then its bands, in one core's cache).
    Either way the bits are the one-thread run's."""
    from rill.exec import threads as policy
    from rill.exec.kernels import conv_nchw
    from rill.exec.kernels.conv_common import _Window

    if conv_nchw._loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    monkeypatch.setattr(policy, "cores_idle", lambda: 2)
    monkeypatch.setattr(policy, "cores_free", lambda: 2)
    split = []
    real = conv_nchw.parallel_blocks

    def watch(count, fn, work):
        split.append((count, policy.threads_for(work, count) > 1))
        return real(count, fn, work)

    monkeypatch.setattr(conv_nchw, "parallel_blocks", watch)
    x = RNG.standard_normal((2, 3, 224, 224)).astype(np.float32)
    for kernel, splits in ((3, False), (7, True)):
        w = RNG.standard_normal((kernel, kernel, 3, 32)).astype(np.float32)
        bias = RNG.standard_normal(32).astype(np.float32)
        pad = kernel // 2
        win = _Window([1, 1, 2, 2], [1, 1, 1, 1], "EXPLICIT", [0, 0, 0, 0] + [pad] * 4, "NCHW")
        monkeypatch.setattr(intra_op, "_THREADS", 1)
        one = conv_nchw.nchw_conv(x, w, win, bias, 1)
        monkeypatch.setattr(intra_op, "_THREADS", 2)
        split.clear()
        two = conv_nchw.nchw_conv(x, w, win, bias, 1)
        # Bands over the threads (more blocks than images), or a stem's 2 images whole.
        assert len(split) == 1 and split[0][1]
        assert (split[0][0] > 2) if splits else (split[0][0] == 2)
        np.testing.assert_array_equal(two, one)


def test_vector_paths_reject_mismatched_operands_before_any_loop():
    """The register-blocked paths (a small-plane depthwise, an RGB stem) keep their ops'
    checks: channel counts and the bias length, named in the error."""
    from rill.exec.kernels.fused_conv_kernels import (
        fused_conv2d_nchw,
        fused_depthwise_conv2d_native,
    )
    from rill.graph.errors import InvalidArgumentError

    f32 = np.float32
    dw = fused_depthwise_conv2d_native([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                                       ["BiasAdd", "Relu"], 1, 0.2)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="input depth 32 differs from the filter's"):
        dw(np.ones((1, 32, 7, 7), f32), np.ones((5, 5, 16, 1), f32), np.ones(32, f32))
    stem = fused_conv2d_nchw([1, 1, 2, 2], "SAME", [], [1, 1, 1, 1], ["BiasAdd", "Relu"], 1, 0.2)
    with pytest.raises(InvalidArgumentError, match="input depth"):
        stem(np.ones((1, 3, 8, 8), f32), np.ones((3, 3, 4, 8), f32), np.ones(8, f32))
    with pytest.raises(InvalidArgumentError, match="bias has shape"):
        stem(np.ones((1, 3, 8, 8), f32), np.ones((3, 3, 3, 8), f32), np.ones(5, f32))
