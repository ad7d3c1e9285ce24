"""The remapper on imported (channels-first, PyTorch-made) models: NCHW Conv2D and depthwise
convolutions fuse with their bias and activation, including the Sigmoid, Swish, HardSigmoid and
HardSwish chains the ONNX importer builds, and the results stay bit-identical to the unfused
chain — with the compiled loops and without them; except float32 Sigmoid and Swish with the
compiled loops, their own exp, within the bound of tests/sigmoid_bound.py, and a Conv2D of a few
input channels (conv_nchw's path, which sums in another orientation), within float rounding."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import run_both
from sigmoid_bound import assert_sigmoid_close

import rill.graph as rg
from rill.exec import Session
from rill.exec.kernels import jit
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(2020)


def _op(type_, inputs, attrs=None, name=None):
    return rg.get_default_graph().create_op(type_, inputs, attrs or {}, name=name).outputs[0]


def _const(v, dtype):
    return rg.constant(np.asarray(v, dtype))


def _hard_sigmoid(x, dtype, alpha=1.0 / 6.0):
    # The chain rill.graph.onnx builds for HardSigmoid / HardSwish.
    y = _op("AddV2", [_op("Mul", [_const(alpha, dtype), x]), _const(0.5, dtype)])
    return _op("Maximum", [_op("Minimum", [y, _const(1, dtype)]), _const(0, dtype)])


def _act(name, x, dtype):
    if name is None:
        return x
    if name == "Swish":
        return _op("Mul", [x, _op("Sigmoid", [x])])
    if name == "HardSigmoid":
        return _hard_sigmoid(x, dtype)
    if name == "HardSwish":
        return _op("Mul", [x, _hard_sigmoid(x, dtype)])
    if name == "LeakyRelu":
        return _op("LeakyRelu", [x], {"alpha": 0.3})
    return _op(name, [x])


def assert_identical(a, b):
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(np.signbit(x), np.signbit(y))


def assert_matches(a, b, act, dtype=np.float32, compiled=None):
    """assert_identical, or for float32 Sigmoid / Swish run with the compiled loops (`compiled`,
    by default whether they are on now) the bound of tests/sigmoid_bound.py."""
    compiled = jit.enabled() if compiled is None else compiled
    if compiled and act in ("Sigmoid", "Swish") and np.dtype(dtype) == np.float32:
        for x, y in zip(a, b):
            assert_sigmoid_close(x, y)
    else:
        assert_identical(a, b)


def assert_rounding_close(a, b, k, dtype):
    """The fused channels-first convolution of a few input channels (conv_nchw, the stems'
    path) against Conv2D's: the same products summed in another orientation (w^T · patches^T
    against patches · w), which agree to float rounding, not bit for bit (conv_nchw's
    docstring; OpenBLAS's SkylakeX kernels happen to round both alike, its Haswell kernels do
    not). The same NaNs and infinities; finite values within 8·k·eps of the largest magnitude
    (the error bound of a depth-k sum), plus 16 ulp for the compiled Sigmoid / Swish."""
    eps = np.finfo(dtype).eps
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        np.testing.assert_array_equal(np.where(np.isinf(y), x, 0), np.where(np.isinf(y), y, 0))
        fin = np.isfinite(y)
        assert np.isfinite(x[fin]).all()
        scale = np.abs(y[fin]).max(initial=0.0)
        tol = 8 * k * eps * scale + 16 * eps * np.abs(y[fin])
        assert (np.abs(x[fin].astype(np.float64) - y[fin]) <= tol).all()


def _inputs(shape, dtype):
    v = RNG.standard_normal(shape).astype(dtype) * 4
    flat = v.reshape(-1)
    flat[:8] = [np.nan, np.inf, -np.inf, -200.0, 200.0, 3.0, -3.0, 0.0]  # tails and kinks
    return v


def _conv_graph(kind, fmt, dtype, act, stride=1, padding="SAME", mult=2, c=3, size=(9, 8)):
    g = rg.Graph()
    with g.as_default():
        shape = [2, c, *size] if fmt == "NCHW" else [2, *size, c]
        x = rg.placeholder(rg.as_dtype(dtype), shape)
        out_c = 5 if kind == "Conv2D" else c * mult
        w = _const(RNG.standard_normal((3, 3, c, 5 if kind == "Conv2D" else mult)) * 0.5, dtype)
        strides = [1, 1, stride, stride] if fmt == "NCHW" else [1, stride, stride, 1]
        y = _op(kind, [x, w], {"strides": strides, "padding": padding, "data_format": fmt})
        y = _op("BiasAdd", [y, _const(RNG.standard_normal(out_c), dtype)], {"data_format": fmt})
        y = _act(act, y, dtype)
    return g, x, y, shape


ACTS = [None, "Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Swish", "HardSigmoid", "HardSwish"]
FUSED = {"Conv2D": "_FusedConv2D", "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative"}


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("kind", ["Conv2D", "DepthwiseConv2dNative"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nchw_convolution_bias_activation_fuses_and_matches(act, kind, dtype):
    for stride, padding in ((1, "SAME"), (2, "VALID")):
        g, x, y, shape = _conv_graph(kind, "NCHW", dtype, act, stride, padding)
        fused, plain, types = run_both(g, [y], {x: _inputs(shape, dtype)})
        assert FUSED[kind] in types and kind not in types and "BiasAdd" not in types
        assert not {"Sigmoid", "Maximum", "Minimum", "Mul", "AddV2"} & set(types)
        if kind == "Conv2D":  # 3 input channels: conv_nchw's path
            assert_rounding_close(fused, plain, 3 * 3 * shape[1], dtype)
        else:
            assert_matches(fused, plain, act, dtype)


@pytest.mark.parametrize("act", ["Relu", "Swish", "HardSwish"])
def test_the_compiled_and_numpy_paths_agree(act):
    g, x, y, shape = _conv_graph("DepthwiseConv2dNative", "NCHW", np.float32, act, c=20,
                                 size=(17, 33))  # fmt: skip
    xv = _inputs(shape, np.float32)
    results = []
    for on in (True, False):
        old = jit.set_enabled(on)
        try:
            fused, plain, types = run_both(g, [y], {x: xv})
        finally:
            jit.set_enabled(old)
        assert "_FusedDepthwiseConv2dNative" in types
        assert_matches(fused, plain, act, compiled=on)
        results.append(fused)
    assert_matches(results[0], results[1], act, compiled=True)


@pytest.mark.parametrize("act", ["Relu6", "Swish"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nhwc_depthwise_fuses_too(act, dtype):
    g, x, y, shape = _conv_graph("DepthwiseConv2dNative", "NHWC", dtype, act)
    fused, plain, types = run_both(g, [y], {x: _inputs(shape, dtype)})
    assert "_FusedDepthwiseConv2dNative" in types
    # The chains (Swish) fuse in float32 and float64 only; half precision keeps them.
    assert ("Sigmoid" in types) == (act == "Swish" and dtype == np.float16)
    assert_matches(fused, plain, act, dtype)


def test_a_hard_sigmoid_with_other_constants_stays_unfused():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 2, 6, 6])
        w = _const(RNG.standard_normal((3, 3, 2, 1)), np.float32)
        y = _op("DepthwiseConv2dNative", [x, w], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                                  "data_format": "NCHW"})  # fmt: skip
        y = _op("BiasAdd", [y, _const([1, 2], np.float32)], {"data_format": "NCHW"})
        y = _hard_sigmoid(y, np.float32, alpha=0.2)  # ONNX HardSigmoid's default, not 1/6
    fused, plain, types = run_both(g, [y], {x: _inputs([1, 2, 6, 6], np.float32)})
    assert "_FusedDepthwiseConv2dNative" in types and "Maximum" in types
    assert_identical(fused, plain)


def test_a_fetched_sigmoid_stops_the_swish_there():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 2, 5, 5])
        w = _const(RNG.standard_normal((3, 3, 2, 4)), np.float32)
        y = _op("Conv2D", [x, w], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                   "data_format": "NCHW"})  # fmt: skip
        y = _op("BiasAdd", [y, _const(np.ones(4), np.float32)], {"data_format": "NCHW"})
        s = _op("Sigmoid", [y])
        z = _op("Mul", [y, s])
    fused, plain, types = run_both(g, [z, s], {x: _inputs([1, 2, 5, 5], np.float32)})
    # Conv and bias fuse; the activation stays outside, its Sigmoid being fetched.
    assert "_FusedConv2D" in types and "Sigmoid" in types and "Mul" in types
    assert_rounding_close(fused, plain, 3 * 3 * 2, np.float32)  # 2 input channels: conv_nchw


def test_a_depthwise_error_names_the_convolution():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, None, None, None])
        w = _const(np.ones((3, 3, 2, 1)), np.float32)
        y = _op("DepthwiseConv2dNative", [x, w], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                                  "data_format": "NCHW"}, name="the_dw")  # fmt: skip
        y = _op("Relu", [_op("BiasAdd", [y, _const([1, 2], np.float32)], {"data_format": "NCHW"})])
    with Session(graph=g) as s:
        with pytest.raises(InvalidArgumentError, match="depth") as e:
            s.run(y, {x: np.ones((1, 3, 5, 5), np.float32)})  # 3 channels, the filter wants 2
    assert e.value.op is not None and e.value.op.name == "the_dw"


def test_matmul_bias_swish_fuses_and_matches():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6])
        m = rg.matmul(x, _const(RNG.standard_normal((6, 4)), np.float32))
        y = _act("Swish", _op("BiasAdd", [m, _const(RNG.standard_normal(4), np.float32)]),
                 np.float32)  # fmt: skip
    fused, plain, types = run_both(g, [y], {x: _inputs([5, 6], np.float32)})
    assert "_FusedMatMul" in types and "Sigmoid" not in types and "Mul" not in types
    assert_matches(fused, plain, "Swish")


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("act", ["HardSigmoid", "HardSwish"])
def test_matmul_bias_hard_activations_keep_the_chains_bits(act, compiled):
    # A classifier head's Gemm + HardSwish (MobileNetV3): the compiled epilogue's bits are the
    # unfused chain's, with special values; rows from 1 (a batch-1 GEMV) up. (_FusedMatMul is
    # TensorFlow's: no float64.)
    dtype = np.float32
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, 6])
        m = rg.matmul(x, _const(RNG.standard_normal((6, 40)) * 4, dtype))
        y = _act(act, _op("BiasAdd", [m, _const(RNG.standard_normal(40), dtype)]), dtype)
    old = jit.set_enabled(compiled)
    try:
        for rows in (1, 7):
            xv = (RNG.standard_normal((rows, 6)) * 4).astype(dtype)
            xv[0, :3] = [np.nan, np.inf, -0.0]
            with np.errstate(all="ignore"):
                fused, plain, types = run_both(g, [y], {x: xv})
            assert "_FusedMatMul" in types and "Maximum" not in types
            assert_identical(fused, plain)
    finally:
        jit.set_enabled(old)


def test_depthwise_planes_split_over_threads_match():
    import rill.exec.kernels.intra_op as intra_op
    from rill.exec.kernels.fused_conv_kernels import fused_depthwise_conv2d_native

    x = _inputs([3, 10, 12, 12], np.float32)
    w = (RNG.standard_normal((3, 3, 10, 2)) * 0.5).astype(np.float32)
    b = RNG.standard_normal(20).astype(np.float32)
    results = []
    saved = intra_op._THREADS
    try:
        for threads in (1, 4):
            intra_op._THREADS = threads
            k = fused_depthwise_conv2d_native([1, 1, 2, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                                              ["BiasAdd", "HardSwish"], 1, 0.2)  # fmt: skip
            with np.errstate(all="ignore"):  # as in a step (the inputs hold NaN and inf)
                results.append(k(x, w, b))
    finally:
        intra_op._THREADS = saved
    assert_identical(results[:1], results[1:])


def _residual_graph(relu: bool, side_shape=None, second_conv: bool = False):
    """NCHW conv → BiasAdd → AddV2(·, side) [→ Relu]: a residual connection (the side input an
    identity, or like a downsampling block another conv → BiasAdd). Eight channels: Conv2D's
    kernel (conv_nchw, for at most four, sums in another order)."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 8, 7, 6])

        def conv(inp, name):
            w = _const(RNG.standard_normal((3, 3, 8, 8)) * 0.5, np.float32)
            y = _op("Conv2D", [inp, w], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                         "data_format": "NCHW"}, name=name)  # fmt: skip
            return _op("BiasAdd", [y, _const(RNG.standard_normal(8), np.float32)],
                       {"data_format": "NCHW"})  # fmt: skip

        side = conv(x, "shortcut") if second_conv else x
        if side_shape is not None:
            side = rg.placeholder(rg.float32, side_shape)
        y = _op("AddV2", [conv(x, "main"), side])
        if relu:
            y = _op("Relu", [y])
    return g, x, y, side


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("second_conv", [False, True])
def test_a_residual_add_and_relu_fuse_into_the_nchw_convolution(relu, second_conv):
    g, x, y, _ = _residual_graph(relu, second_conv=second_conv)
    xv = _inputs([2, 8, 7, 6], np.float32)
    fused, plain, types = run_both(g, [y], {x: xv})
    assert "AddV2" not in types and "BiasAdd" not in types and "Conv2D" not in types
    assert ("Relu" in types) is False
    assert types.count("_FusedConv2D") == (2 if second_conv else 1)
    # The same values (where two NaNs meet in the add, which sign is kept may differ).
    np.testing.assert_array_equal(fused[0], plain[0])
    nan = np.isnan(plain[0])
    np.testing.assert_array_equal(fused[0][~nan].view(np.uint32), plain[0][~nan].view(np.uint32))


def test_a_broadcast_side_input_is_not_a_residual():
    g, x, y, side = _residual_graph(True, side_shape=[1, 8, 1, 1])
    feeds = {x: _inputs([2, 8, 7, 6], np.float32), side: _inputs([1, 8, 1, 1], np.float32)}
    fused, plain, types = run_both(g, [y], feeds)
    assert "_FusedConv2D" in types and "AddV2" in types and "Relu" in types
    assert_identical(fused, plain)


def test_the_residual_kernel_checks_the_side_input():
    from rill.exec.kernels.fused_kernels import fused_conv2d

    k = fused_conv2d([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1], ["BiasAdd", "Add", "Relu"],
                     2, 0.2, "HWIO", 0)  # fmt: skip
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 3, 2, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match="side input"):
        k(x, w, np.zeros(3, np.float32), np.zeros((1, 3, 5, 4), np.float32))
    with pytest.raises(InvalidArgumentError, match="two arguments"):
        fused_conv2d([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1], ["BiasAdd", "Add"], 1, 0.2,
                     "HWIO", 0)  # fmt: skip


def _gated_graph(act, kernel=(1, 1), gate_first=False, gate_shape=None):
    """NCHW x · s (s [n, c, 1, 1], a squeeze-excite gate) → Conv2D → BiasAdd [→ activation]."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 6, 5, 7])
        s = rg.placeholder(rg.float32, gate_shape or [2, 6, 1, 1])
        m = _op("Mul", [s, x] if gate_first else [x, s])
        w = _const(RNG.standard_normal((*kernel, 6, 9)) * 0.5, np.float32)
        y = _op("Conv2D", [m, w], {"strides": [1, 1, 1, 1], "padding": "SAME",
                                   "data_format": "NCHW"})  # fmt: skip
        y = _op("BiasAdd", [y, _const(RNG.standard_normal(9), np.float32)],
                {"data_format": "NCHW"})  # fmt: skip
        y = _act(act, y, np.float32)
    return g, x, s, y


@pytest.mark.parametrize("act", [None, "Relu", "Swish", "HardSwish", "Sigmoid"])
@pytest.mark.parametrize("gate_first", [False, True])
def test_a_gate_mul_fuses_into_the_pointwise_convolution(act, gate_first):
    g, x, s, y = _gated_graph(act, gate_first=gate_first)
    feeds = {x: _inputs([2, 6, 5, 7], np.float32), s: _inputs([2, 6, 1, 1], np.float32)}
    with np.errstate(all="ignore"):
        fused, plain, types = run_both(g, [y], feeds)
    assert types.count("_FusedConv2D") == 1
    assert "Mul" not in types and "Conv2D" not in types and "BiasAdd" not in types
    assert_matches(fused, plain, act)


@pytest.mark.parametrize("case", ["3x3", "broadcast gate"])
def test_a_gate_mul_stays_where_it_is_not_a_pointwise_gate(case):
    kernel = (3, 3) if case == "3x3" else (1, 1)
    shape = [1, 6, 1, 1] if case == "broadcast gate" else None
    g, x, s, y = _gated_graph("Relu", kernel=kernel, gate_shape=shape)
    gate = RNG.standard_normal(shape or [2, 6, 1, 1]).astype(np.float32)
    feeds = {x: _inputs([2, 6, 5, 7], np.float32), s: gate}
    with np.errstate(all="ignore"):
        fused, plain, types = run_both(g, [y], feeds)
    assert "Mul" in types and "_FusedConv2D" in types
    assert_identical(fused, plain)


@pytest.mark.parametrize("shape", [[2, 4, 5, 5], [1, 4, 32, 33], [3, 4, 32, 33]])
def test_the_gated_kernel_checks_the_gate_and_matches_mul_then_conv_bit_for_bit(shape):
    # Planes of 32×33 and more than one image: x·s formed image by image in scratch.
    from rill.exec.kernels.fused_kernels import fused_conv2d

    x = _inputs(shape, np.float32)
    s = RNG.standard_normal([shape[0], 4, 1, 1]).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    side = _inputs([shape[0], 3, *shape[2:]], np.float32)
    res = fused_conv2d([1, 1, 1, 1], "VALID", [], "NCHW", [1, 1, 1, 1],
                       ["Mul", "BiasAdd", "Add", "Relu"], 3, 0.2, "HWIO", 0)  # fmt: skip
    res_plain = fused_conv2d([1, 1, 1, 1], "VALID", [], "NCHW", [1, 1, 1, 1],
                             ["BiasAdd", "Add", "Relu"], 2, 0.2, "HWIO", 0)  # fmt: skip
    w1 = RNG.standard_normal((1, 1, 4, 3)).astype(np.float32)
    with np.errstate(all="ignore"):
        a, e = res(x, w1, s, b, side), res_plain(x * s, w1, b, side)
    nan = np.isnan(e)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint32), e[~nan].view(np.uint32))
    for kernel in ((1, 1), (3, 3)):
        w = RNG.standard_normal((*kernel, 4, 3)).astype(np.float32)
        gated = fused_conv2d([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                             ["Mul", "BiasAdd", "Relu6"], 2, 0.2, "HWIO", 0)  # fmt: skip
        plain = fused_conv2d([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1],
                             ["BiasAdd", "Relu6"], 1, 0.2, "HWIO", 0)  # fmt: skip
        with np.errstate(all="ignore"):
            assert_identical([gated(x, w, s, b)], [plain(x * s, w, b)])
        with pytest.raises(InvalidArgumentError, match=r"scale of _FusedConv2D's Mul"):
            gated(x, w, s[:, :2], b)
    with pytest.raises(InvalidArgumentError, match="two arguments"):
        fused_conv2d([1, 1, 1, 1], "SAME", [], "NCHW", [1, 1, 1, 1], ["Mul", "BiasAdd"], 1, 0.2,
                     "HWIO", 0)  # fmt: skip


@pytest.mark.parametrize("relu", [True, False])
def test_a_gate_mul_fuses_into_a_residual_pointwise_convolution(relu):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 6, 5, 7])
        s = rg.placeholder(rg.float32, [2, 6, 1, 1])
        side = rg.placeholder(rg.float32, [2, 6, 5, 7])
        w = _const(RNG.standard_normal((1, 1, 6, 6)) * 0.5, np.float32)
        y = _op("Conv2D", [_op("Mul", [x, s]), w], {"strides": [1, 1, 1, 1], "padding": "VALID",
                                                    "data_format": "NCHW"})  # fmt: skip
        y = _op("BiasAdd", [y, _const(RNG.standard_normal(6), np.float32)],
                {"data_format": "NCHW"})  # fmt: skip
        y = _op("AddV2", [y, side])
        if relu:
            y = _op("Relu", [y])
    feeds = {x: _inputs([2, 6, 5, 7], np.float32), side: _inputs([2, 6, 5, 7], np.float32),
             s: RNG.standard_normal([2, 6, 1, 1]).astype(np.float32)}  # fmt: skip
    with np.errstate(all="ignore"):
        fused, plain, types = run_both(g, [y], feeds)
    assert types.count("_FusedConv2D") == 1
    assert not {"Mul", "Conv2D", "BiasAdd", "AddV2", "Relu"} & set(types)
    # The same values (where two NaNs meet in the add, which sign is kept may differ).
    nan = np.isnan(plain[0])
    np.testing.assert_array_equal(np.isnan(fused[0]), nan)
    np.testing.assert_array_equal(fused[0][~nan].view(np.uint32), plain[0][~nan].view(np.uint32))
