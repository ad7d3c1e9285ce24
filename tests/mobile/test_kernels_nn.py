"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL, pooling, activations and SOFTMAX:
rill's kernels against LiteRT's reference kernels (BUILTIN_REF) on one-operator models built with
the `tflite` schema builders. Float within 1e-5 relative; int8 bit-exact — SOFTMAX, LOGISTIC and
TANH included: the issue allows them one quantum, but LiteRT's int8 kernels for them agree with
rill's float-computed tables on every value tried (all 256 inputs, many scales)."""

from __future__ import annotations

import numpy as np
import pytest
from mobile.kernel_testing import RNG, fconst, fp, q8, qbias, qweights, run_single
from mobile.tflite_builder import T, quant

SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3


def _conv_out(size, k, stride, dilation, padding):
    eff = (k - 1) * dilation + 1
    return -(-size // stride) if padding == SAME else (size - eff) // stride + 1


# (input NHWC, out channels, kernel, stride, dilation, padding, activation, bias)
CONV_CASES = [
    ((1, 9, 9, 3), 4, (3, 3), (1, 1), (1, 1), SAME, RELU, True),
    ((2, 10, 8, 1), 5, (3, 2), (2, 1), (1, 1), VALID, NONE, True),
    ((1, 11, 11, 2), 3, (3, 3), (2, 2), (1, 1), SAME, RELU6, True),
    ((1, 12, 12, 3), 2, (3, 3), (1, 1), (2, 2), SAME, RELU_N1_TO_1, True),
    ((1, 7, 7, 8), 16, (3, 3), (1, 1), (1, 1), VALID, RELU, True),  # [M, K] im2col layout
    ((1, 5, 5, 12), 6, (1, 1), (1, 1), (1, 1), VALID, NONE, True),
    ((1, 6, 6, 9), 4, (2, 2), (2, 2), (1, 1), SAME, NONE, True),
]


def _conv_options(stride, dilation, padding, act):
    return {"padding": padding, "stride_h": stride[0], "stride_w": stride[1],
            "dilation_h_factor": dilation[0], "dilation_w_factor": dilation[1],
            "fused_activation_function": act}  # fmt: skip


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_float(case):
    shape, cout, (kh, kw), stride, dil, pad, act, bias = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    filt = fconst(RNG.standard_normal((cout, kh, kw, c)))
    b = fconst(RNG.standard_normal(cout)) if bias else None
    run_single("CONV_2D", [fp(*shape), filt, b], [fp(n, oh, ow, cout)],
               _conv_options(stride, dil, pad, act))  # fmt: skip


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_int8(case, per_channel):
    shape, cout, (kh, kw), stride, dil, pad, act, bias = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    x = q8(*shape)
    filt = qweights((cout, kh, kw, c), 0 if per_channel else None)
    b = qbias(cout, x, filt) if bias else None
    out = q8(n, oh, ow, cout, scale=float(RNG.uniform(0.2, 0.8)))
    run_single("CONV_2D", [x, filt, b], [out], _conv_options(stride, dil, pad, act), version=3)


# (input NHWC, multiplier, kernel, stride, dilation, padding, activation)
DW_CASES = [
    ((1, 8, 8, 3), 1, (3, 3), (1, 1), (1, 1), SAME, RELU),
    ((1, 9, 9, 3), 2, (3, 3), (2, 2), (1, 1), SAME, NONE),
    ((2, 7, 6, 4), 1, (2, 3), (1, 2), (1, 1), VALID, RELU6),
    ((1, 10, 10, 2), 3, (3, 3), (1, 1), (2, 2), SAME, NONE),
]


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_float(case):
    shape, mult, (kh, kw), stride, dil, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    filt = fconst(RNG.standard_normal((1, kh, kw, c * mult)))
    b = fconst(RNG.standard_normal(c * mult))
    opts = _conv_options(stride, dil, pad, act) | {"depth_multiplier": mult}
    run_single("DEPTHWISE_CONV_2D", [fp(*shape), filt, b], [fp(n, oh, ow, c * mult)], opts)


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_int8(case):
    shape, mult, (kh, kw), stride, dil, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    x = q8(*shape)
    filt = qweights((1, kh, kw, c * mult), 3)
    b = qbias(c * mult, x, filt)
    out = q8(n, oh, ow, c * mult, scale=float(RNG.uniform(0.1, 0.3)))
    opts = _conv_options(stride, dil, pad, act) | {"depth_multiplier": mult}
    run_single("DEPTHWISE_CONV_2D", [x, filt, b], [out], opts, version=3)


# (input shape, units, keep_num_dims, activation, bias)
FC_CASES = [
    ((1, 16), 8, False, NONE, True),
    ((3, 20), 5, False, RELU, True),
    ((2, 3, 6), 4, True, RELU6, False),
    ((2, 3, 6), 4, False, NONE, True),
    ((1, 600), 12, False, NONE, True),  # a long dot product: not folded into float64
]


@pytest.mark.parametrize("case", FC_CASES)
def test_fully_connected_float(case):
    shape, units, keep, act, bias = case
    k = shape[-1]
    rows = int(np.prod(shape)) // k
    out_shape = (*shape[:-1], units) if keep else (rows, units)
    w = fconst(RNG.standard_normal((units, k)))
    b = fconst(RNG.standard_normal(units)) if bias else None
    run_single("FULLY_CONNECTED", [fp(*shape), w, b], [fp(*out_shape)],
               {"fused_activation_function": act, "keep_num_dims": keep})  # fmt: skip


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("case", FC_CASES)
def test_fully_connected_int8(case, per_channel):
    shape, units, keep, act, bias = case
    k = shape[-1]
    rows = int(np.prod(shape)) // k
    out_shape = (*shape[:-1], units) if keep else (rows, units)
    x = q8(*shape)
    w = qweights((units, k), 0 if per_channel else None)
    b = qbias(units, x, w) if bias else None
    out = q8(*out_shape, scale=float(RNG.uniform(0.3, 2.0)))
    run_single("FULLY_CONNECTED", [x, w, b], [out],
               {"fused_activation_function": act, "keep_num_dims": keep}, version=5)  # fmt: skip


def test_fully_connected_hybrid_quantizes_inputs_per_row_like_litert():
    """int8 weights with float activations (dynamic-range models): as LiteRT, each input row
    is quantized symmetrically (scale max|x| / 127) and the integer product is scaled back —
    not the float product with dequantized weights (that differs by ~1e-3)."""
    from mobile.tflite_builder import rill_run, single_op

    w = qweights((6, 10), 0)
    x = RNG.standard_normal((2, 10)).astype(np.float32)
    model = single_op("FULLY_CONNECTED", [fp(2, 10), w, None], [fp(2, 6)])
    (got,) = rill_run(model, [x])
    amax = np.abs(x).max(axis=1).astype(np.float32)
    sf = amax / np.float32(127)
    q = np.clip(np.round(x * (np.float32(127) / amax)[:, None]), -127, 127)
    acc = (q.astype(np.int64) @ w.data.astype(np.int64).T).astype(np.float32)
    want = acc * (sf[:, None] * np.asarray(w.scale, np.float32)[None, :])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    wf = w.data.astype(np.float32) * np.asarray(w.scale, np.float32)[:, None]
    assert np.abs(got - x @ wf.T).max() > 1e-5  # it really is the quantized product


@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_float(adj):
    ax, ay = adj
    lhs = (2, 3, 5, 4) if ax else (2, 3, 4, 5)
    rhs = (3, 6, 5) if ay else (3, 5, 6)
    run_single("BATCH_MATMUL", [fp(*lhs), fp(*rhs)], [fp(2, 3, 4, 6)],
               {"adj_x": ax, "adj_y": ay})  # fmt: skip


@pytest.mark.parametrize("adj", [(False, False), (False, True)])
def test_batch_matmul_int8(adj):
    ax, ay = adj
    rhs = (2, 6, 7) if ay else (2, 7, 6)
    out = q8(2, 4, 6, scale=float(RNG.uniform(0.5, 1.0)))
    run_single("BATCH_MATMUL", [q8(2, 4, 7), q8(*rhs)], [out], {"adj_x": ax, "adj_y": ay},
               version=2)  # fmt: skip


# (input NHWC, filter, stride, padding, activation)
POOL_CASES = [
    ((1, 8, 8, 3), (2, 2), (2, 2), VALID, NONE),
    ((2, 9, 7, 2), (3, 3), (2, 2), SAME, RELU),
    ((1, 6, 6, 4), (3, 2), (1, 1), SAME, RELU6),
    ((1, 5, 5, 1), (5, 5), (1, 1), VALID, NONE),
]


def _pool_options(filt, stride, pad, act):
    return {"padding": pad, "stride_h": stride[0], "stride_w": stride[1],
            "filter_height": filt[0], "filter_width": filt[1],
            "fused_activation_function": act}  # fmt: skip


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool_float(op, case):
    shape, filt, stride, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, filt[0], stride[0], 1, pad), _conv_out(w, filt[1], stride[1], 1, pad)
    run_single(op, [fp(*shape)], [fp(n, oh, ow, c)], _pool_options(filt, stride, pad, act))


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool_int8(op, case):
    shape, filt, stride, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, filt[0], stride[0], 1, pad), _conv_out(w, filt[1], stride[1], 1, pad)
    x = q8(*shape)
    out = quant((n, oh, ow, c), np.int8, x.scale, x.zero_point)
    run_single(op, [x], [out], _pool_options(filt, stride, pad, act), version=2)


@pytest.mark.parametrize("op", ["RELU", "RELU6", "LOGISTIC", "TANH"])
def test_activation_float(op):
    run_single(op, [fp(2, 3, 17)], [fp(2, 3, 17)])


def test_logistic_float_extremes():
    """The reference kernel's cut-offs: 1 above 16.62, exp(x) below -9 (relative 1e-5 holds)."""
    from mobile.kernel_testing import check
    from mobile.tflite_builder import single_op

    model = single_op("LOGISTIC", [fp(1, 12)], [fp(1, 12)])
    x = np.array([[-90, -40, -12, -9.5, -9, -3, 0, 3, 16, 16.7, 40, 90]], np.float32)
    check(model, [x])


@pytest.mark.parametrize("alpha", [0.2, 0.01, 1.5])
def test_leaky_relu_float(alpha):
    run_single("LEAKY_RELU", [fp(3, 11)], [fp(3, 11)], {"alpha": alpha})


@pytest.mark.parametrize("op", ["RELU", "RELU6"])
@pytest.mark.parametrize("same_quant", [True, False])
def test_relu_int8(op, same_quant):
    x = q8(2, 50)
    out = quant((2, 50), np.int8, x.scale, x.zero_point) if same_quant else q8(2, 50)
    run_single(op, [x], [out], version=2)


@pytest.mark.parametrize("alpha", [0.2, 0.01])
def test_leaky_relu_int8(alpha):
    run_single("LEAKY_RELU", [q8(4, 64)], [q8(4, 64)], {"alpha": alpha}, version=2)


@pytest.mark.parametrize("scale", [0.08, 0.005, 0.03, 0.2])
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh_int8_every_input_value(op, scale):
    from mobile.kernel_testing import check
    from mobile.tflite_builder import single_op

    x = quant((2, 128), np.int8, scale, int(RNG.integers(-40, 40)))
    out = quant((2, 128), np.int8, *((1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0)))
    values = np.arange(256).astype(np.uint8).view(np.int8).reshape(2, 128).copy()
    check(single_op(op, [x], [out], version=2), [values])


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_softmax_float(beta):
    run_single("SOFTMAX", [fp(3, 10)], [fp(3, 10)], {"beta": beta})
    run_single("SOFTMAX", [fp(2, 3, 4)], [fp(2, 3, 4)], {"beta": beta})


@pytest.mark.parametrize("beta", [1.0, 0.7])
@pytest.mark.parametrize("depth", [2, 10, 33])
@pytest.mark.parametrize("scale", [0.05, 0.2, 0.01])
def test_softmax_int8(scale, depth, beta):
    from mobile.kernel_testing import check
    from mobile.tflite_builder import single_op

    x = quant((300, depth), np.int8, scale, int(RNG.integers(-20, 20)))
    out = quant((300, depth), np.int8, 1 / 256, -128)
    v = RNG.integers(-128, 128, (300, depth)).astype(np.int8)
    v[:100] = RNG.integers(-4, 4, (100, depth))  # near-uniform rows: many rounding boundaries
    check(single_op("SOFTMAX", [x], [out], {"beta": beta}, version=2), [v])


def test_conv_without_bias_equals_zero_bias():
    """LiteRT's CONV_2D insists on a bias; rill's accepts two inputs, as the schema allows."""
    from mobile.tflite_builder import rill_run, single_op

    x = q8(1, 6, 6, 3)
    w = qweights((4, 3, 3, 3))
    out = q8(1, 6, 6, 4, scale=0.3)
    zero = T((4,), np.int32, np.zeros(4, np.int32), [1.0] * 4, [0] * 4)
    opts = _conv_options((1, 1), (1, 1), SAME, NONE)
    v = RNG.integers(-128, 128, (1, 6, 6, 3)).astype(np.int8)
    (a,) = rill_run(single_op("CONV_2D", [x, w], [out], opts), [v])
    (b,) = rill_run(single_op("CONV_2D", [x, w, zero], [out], opts), [v])
    np.testing.assert_array_equal(a, b)


def test_conv_without_padding_and_identity_filter_is_exact_copy():
    """A 1x1 identity convolution with unit scales reproduces its input: a hand-checkable case
    independent of LiteRT."""
    from mobile.tflite_builder import rill_run, single_op

    w = T((3, 1, 1, 3), np.int8, np.eye(3, dtype=np.int8).reshape(3, 1, 1, 3), [1.0] * 3, [0] * 3)
    x = quant((1, 2, 2, 3), np.int8, 1.0, 0)
    out = quant((1, 2, 2, 3), np.int8, 1.0, 0)
    model = single_op("CONV_2D", [x, w, None], [out], _conv_options((1, 1), (1, 1), VALID, NONE))
    v = RNG.integers(-128, 128, (1, 2, 2, 3)).astype(np.int8)
    (got,) = rill_run(model, [v])
    np.testing.assert_array_equal(got, v)


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("op", ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"])
def test_requantization_ties_over_many_outputs(op, per_channel):
    """Thousands of outputs make requantization ties happen (about one per thousand), where
    FULLY_CONNECTED's single rounding and the convolutions' double rounding differ."""
    x = q8(1, 30, 30, 16, scale=0.02, zp=-3)
    out_scale = float(RNG.uniform(0.2, 1.0))
    if op == "FULLY_CONNECTED":
        x = q8(900, 16, scale=0.02, zp=-3)
        w = qweights((24, 16), 0 if per_channel else None)
        run_single(op, [x, w, qbias(24, x, w)], [q8(900, 24, scale=out_scale)], version=5)
    elif op == "CONV_2D":
        w = qweights((24, 1, 1, 16), 0 if per_channel else None)
        run_single(op, [x, w, qbias(24, x, w)], [q8(1, 30, 30, 24, scale=out_scale)],
                   _conv_options((1, 1), (1, 1), VALID, NONE), version=3)  # fmt: skip
    else:
        w = qweights((1, 3, 3, 16), 3 if per_channel else None)
        opts = _conv_options((1, 1), (1, 1), SAME, NONE) | {"depth_multiplier": 1}
        run_single(op, [x, w, qbias(16, x, w)], [q8(1, 30, 30, 16, scale=out_scale * 0.3)], opts,
                   version=3)  # fmt: skip


def test_a_filter_whose_channels_are_no_whole_number_of_groups_is_refused():
    """CONV_2D's groups are the input's channels over the filter's: 6 over 4 is no grouping."""
    from mobile.tflite_builder import rill_run, single_op

    from rill.mobile.errors import PrepareError

    filt = fconst(RNG.standard_normal((8, 3, 3, 4)))
    model = single_op("CONV_2D", [fp(1, 5, 5, 6), filt, None], [fp(1, 5, 5, 8)],
                      _conv_options((1, 1), (1, 1), 0, 0), version=6)  # fmt: skip
    with pytest.raises(PrepareError, match=r"operator #0 CONV_2D.*4 input channels per group"):
        rill_run(model, [np.zeros((1, 5, 5, 6), np.float32)])
