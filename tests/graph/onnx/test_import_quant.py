"""import_onnx of the quantization ops (import_quant), beyond onnx's node suite.

Scales and weights sit in initializers, as onnxruntime's quantization tool writes them; the
activations are graph inputs, so the import rules (not import-time folding) compute them.
Results are compared bit for bit with onnxruntime and onnx's ReferenceEvaluator, or with the
spec's arithmetic in exact integers; bad input must name the node.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_ref, run_rill

from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(2024)
OPSET = 21


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def init(name, value):
    return nh.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, inits=(), opset=OPSET):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_array_equal(a, b)


def ints(dtype, *shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def u8s8_weights(*shape):
    """int8 weights for a uint8 input, against onnxruntime: 7 bits (its quantizer's
    reduce_range). Its u8 × s8 kernels on x86 CPUs without VNNI (AVX2: Zen 3) add pairs of
    products in 16 bits, saturating (full-range weights came out up to 128 steps off there);
    the reference implementation checks the full range."""
    return RNG.integers(-64, 64, shape).astype(np.int8)


# -- QuantizeLinear: rounding and saturation -------------------------------------------------------


@pytest.mark.parametrize(
    "zp_dtype, zp, want",
    [
        # x / 1 = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 1000, -1000, 127.4]
        (np.int8, 0, [0, 2, 2, 0, -2, -2, 126, 127, -128, 127]),
        (np.uint8, 128, [128, 130, 130, 128, 126, 126, 254, 255, 0, 255]),
        (np.uint8, 0, [0, 2, 2, 0, 0, 0, 126, 255, 0, 127]),
        (np.int16, -3, [-3, -1, -1, -3, -5, -5, 123, 997, -1003, 124]),
    ],
)
def test_quantize_rounds_ties_to_even_and_saturates_at_both_ends(zp_dtype, zp, want):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 1000, -1000, 127.4], np.float32)
    elem = {np.int8: TP.INT8, np.uint8: TP.UINT8, np.int16: TP.INT16}[zp_dtype]
    m = model(
        [oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        [vi("x", shape=[10])],
        [vi("y", elem)],
        [init("s", np.float32(1)), init("z", zp_dtype(zp))],
    )
    got = run_rill(m, {"x": x})
    same(got, [np.array(want, zp_dtype)])
    same(got, run_ref(m, {"x": x}))


def test_quantize_ties_after_division_and_default_uint8_zero_point():
    # 0.3 / 0.2 rounds in float32 to a value just off 1.5; 0.25 / 0.5 = 0.5 exactly → 0.
    x = np.array([0.25, 0.75, 1.25, -0.25, 0.3, 300.0, -3.0], np.float32)
    m = model(
        [oh.make_node("QuantizeLinear", ["x", "s"], ["y"])],
        [vi("x", shape=[7])],
        [vi("y", TP.UINT8)],
        [init("s", np.float32(0.5))],
    )
    got = run_rill(m, {"x": x})
    same(got, [np.array([0, 2, 2, 0, 1, 255, 0], np.uint8)])
    same(got, run_ort(m, {"x": x}))


@pytest.mark.parametrize("zp_type", [TP.INT8, TP.UINT8])
def test_quantize_per_axis_and_dequantize_per_axis_match_onnxruntime(zp_type):
    np_t = np.int8 if zp_type == TP.INT8 else np.uint8
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32) * 3
    scale = np.array([0.01, 0.02, 0.05, 0.1], np.float32)
    zp = ints(np_t, 4)
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        oh.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1),
    ]
    m = model(
        nodes,
        [vi("x", shape=[2, 4, 3, 3])],
        [vi("q", zp_type), vi("y")],
        [init("s", scale), init("z", zp)],
    )
    got = run_rill(m, {"x": x})
    same(got, run_ort(m, {"x": x}))
    same(got, run_ref(m, {"x": x}))
    q = got[0]
    assert q.min() == np.iinfo(np_t).min or q.max() == np.iinfo(np_t).max  # some saturate


def test_blocked_quantize_with_an_unknown_input_size():
    # The blocked axis is 5 long with block_size 2 (the last block short), unknown at import.
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    scale = np.array([[0.1, 0.2, 0.3], [0.05, 0.5, 1.0], [0.01, 0.02, 0.04]], np.float32)
    zp = ints(np.int8, 3, 3)
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
        oh.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=-1, block_size=2),
    ]
    m = model(
        nodes,
        [vi("x", shape=[3, None])],
        [vi("q", TP.INT8), vi("y")],
        [init("s", scale), init("z", zp)],
    )
    got = run_rill(m, {"x": x})
    same(got, run_ref(m, {"x": x}))
    expanded = np.repeat(scale, 2, axis=1)[:, :5]
    want = np.clip(np.rint(x / expanded) + np.repeat(zp, 2, axis=1)[:, :5], -128, 127)
    np.testing.assert_array_equal(got[0], want.astype(np.int8))


def test_quantize_to_int4_saturates_and_output_dtype_without_zero_point():
    x = np.array([-100.0, -8.5, -7.5, 6.5, 7.5, 100.0], np.float32)
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=TP.INT4),
        oh.make_node("QuantizeLinear", ["x", "s"], ["p"], output_dtype=TP.INT16),
    ]
    m = model(
        nodes,
        [vi("x", shape=[6])],
        [vi("q", TP.INT4), vi("p", TP.INT16)],
        [init("s", np.float32(1))],
    )
    q, p = run_rill(m, {"x": x})
    np.testing.assert_array_equal(q.astype(np.int32), [-8, -8, -8, 6, 7, 7])
    np.testing.assert_array_equal(p, np.array([-100, -8, -8, 6, 8, 100], np.int16))


def test_dynamic_quantize_of_zeros_and_of_data_match_onnxruntime():
    m = model(
        [oh.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        [vi("x", shape=[None, 4])],
        [vi("y", TP.UINT8), vi("s"), vi("z", TP.UINT8)],
    )
    for x in (
        np.zeros((2, 4), np.float32),
        RNG.standard_normal((5, 4)).astype(np.float32),
        np.abs(RNG.standard_normal((3, 4))).astype(np.float32) + 1,
    ):
        got = run_rill(m, {"x": x})
        same(got, run_ort(m, {"x": x}))


# -- integer products ------------------------------------------------------------------------------


def test_matmul_integer_per_row_and_per_column_zero_points_are_exact():
    a, b = ints(np.uint8, 3, 5), ints(np.int8, 5, 4)
    a_zp, b_zp = ints(np.uint8, 3), ints(np.int8, 4)
    m = model(
        [oh.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [vi("a", TP.UINT8, [3, 5]), vi("b", TP.INT8, [5, 4])],
        [vi("y", TP.INT32)],
        [init("az", a_zp), init("bz", b_zp)],
    )
    got = run_rill(m, {"a": a, "b": b})
    want = (a.astype(np.int64) - a_zp[:, None]) @ (b.astype(np.int64) - b_zp)
    same(got, [want.astype(np.int32)])  # onnxruntime and onnx's reference: per tensor only


def test_matmul_integer_broadcast_batch_and_vector_match_onnxruntime():
    a, b, v = ints(np.int8, 2, 1, 3, 5), ints(np.uint8, 4, 5, 2), ints(np.int8, 5)
    nodes = [
        oh.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"]),
        oh.make_node("MatMulInteger", ["v", "b"], ["yv"]),
    ]
    m = model(
        nodes,
        [vi("a", TP.INT8, [2, 1, 3, 5]), vi("b", TP.UINT8, [4, 5, 2]), vi("v", TP.INT8, [5])],
        [vi("y", TP.INT32), vi("yv", TP.INT32)],
        [init("az", np.array([-3], np.int8)), init("bz", np.uint8(200))],
    )
    feeds = {"a": a, "b": b, "v": v}
    same(run_rill(m, feeds), run_ort(m, feeds))


def test_qlinear_matmul_accumulates_in_integers_past_float32s_exact_range():
    # K = 4096 products of ±255 · ±255 sum past 2**24: a float32 sum would lose bits.
    k = 4096
    a = np.full((2, k), 255, np.uint8)
    a[1, ::2] = 0
    b = np.full((k, 3), 255, np.uint8)
    b[:, 1] = 0
    inits = [
        init("as", np.float32(0.02)),
        init("az", np.uint8(0)),
        init("bs", np.float32(0.03)),
        init("bz", np.uint8(0)),
        init("ys", np.float32(2.0**-7)),
        init("yz", np.int8(0)),
    ]
    nodes = [
        oh.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["acc"]),
        oh.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"]),
    ]
    m = model(
        nodes,
        [vi("a", TP.UINT8, [2, k]), vi("b", TP.UINT8, [k, 3])],
        [vi("acc", TP.INT32), vi("y", TP.INT8)],
        inits,
    )
    acc, y = run_rill(m, {"a": a, "b": b})
    np.testing.assert_array_equal(
        acc, [[k * 65025, 0, k * 65025], [k // 2 * 65025, 0, k // 2 * 65025]]
    )
    np.testing.assert_array_equal(y, [[127, 0, 127], [127, 0, 127]])


@pytest.mark.parametrize(
    "a_t, b_t", [(TP.UINT8, TP.INT8), (TP.INT8, TP.INT8), (TP.UINT8, TP.UINT8)]
)
def test_qlinear_matmul_3d_matches_onnxruntime(a_t, b_t):
    npt = {TP.UINT8: np.uint8, TP.INT8: np.int8}
    a, b = ints(npt[a_t], 2, 4, 16), ints(npt[b_t], 2, 16, 5)
    inits = [
        init("as", np.float32(0.013)),
        init("az", ints(npt[a_t])),
        init("bs", np.float32(0.021)),
        init("bz", ints(npt[b_t])),
        init("ys", np.float32(0.37)),
        init("yz", np.uint8(120)),
    ]
    m = model(
        [oh.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [vi("a", a_t, [2, 4, 16]), vi("b", b_t, [2, 16, 5])],
        [vi("y", TP.UINT8)],
        inits,
    )
    got = run_rill(m, {"a": a, "b": b})
    same(got, run_ref(m, {"a": a, "b": b}))
    if a_t == TP.UINT8:  # onnxruntime has no int8 × int8 QLinearMatMul
        if b_t == TP.INT8:
            b = u8s8_weights(2, 16, 5)
            got = run_rill(m, {"a": a, "b": b})
        same(got, run_ort(m, {"a": a, "b": b}))


def _qlinear_conv_model(x_t, w, w_scale, w_zp, bias, **attrs):
    c = w.shape[1] * attrs.get("group", 1)
    inits = [
        init("xs", np.float32(0.05)),
        init("xz", np.array(7, x_t)),
        init("w", w),
        init("ws", w_scale),
        init("wz", w_zp),
        init("ys", np.float32(0.11)),
        init("yz", np.array(128 if x_t == np.uint8 else -5, x_t)),
        init("b", bias),
    ]
    x_elem = TP.UINT8 if x_t == np.uint8 else TP.INT8
    node = oh.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], **attrs
    )
    return model([node], [vi("x", x_elem, [2, c, 9, 8])], [vi("y", x_elem)], inits)


@pytest.mark.parametrize("x_t", [np.uint8, np.int8])
@pytest.mark.parametrize(
    "group, attrs",
    [
        (1, dict(pads=[1, 1, 1, 1])),
        (1, dict(strides=[2, 2], dilations=[1, 2])),
        (2, dict(auto_pad="SAME_UPPER")),
        (6, dict(pads=[0, 1, 2, 1], strides=[1, 2])),
    ],
)
def test_qlinear_conv_per_channel_weights_match_onnxruntime(x_t, group, attrs):
    m_out, c = 6, 6
    w = ints(np.int8, m_out, c // group, 3, 3)
    w_scale = (RNG.random(m_out) * 0.02 + 0.001).astype(np.float32)
    w_zp = np.zeros(m_out, np.int8)  # symmetric per-channel weights, as the quantization tool
    bias = RNG.integers(-2000, 2000, m_out).astype(np.int32)
    m = _qlinear_conv_model(x_t, w, w_scale, w_zp, bias, group=group, **attrs)
    x = ints(x_t, 2, c, 9, 8)
    got = run_rill(m, {"x": x})
    same(got, run_ref(m, {"x": x}))
    if x_t == np.uint8:
        w = u8s8_weights(*w.shape)
        m = _qlinear_conv_model(x_t, w, w_scale, w_zp, bias, group=group, **attrs)
        got = run_rill(m, {"x": x})
    same(got, run_ort(m, {"x": x}))


def test_qlinear_conv_per_channel_weight_zero_points_are_exact():
    w = ints(np.uint8, 4, 3, 2, 2)
    w_zp = ints(np.uint8, 4)
    w_scale = np.array([0.01, 0.02, 0.03, 0.04], np.float32)
    bias = np.array([5, -5, 1000, -1000], np.int32)
    m = _qlinear_conv_model(np.uint8, w, w_scale, w_zp, bias, pads=[1, 0, 0, 1])
    x = ints(np.uint8, 2, 3, 9, 8)
    (got,) = run_rill(m, {"x": x})
    # onnx's reference implementation requantizes in its own float order: within a step.
    (ref,) = run_ref(m, {"x": x})
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1
    # The spec's arithmetic in exact integers, then the float32 requantization: exactly.
    xp = np.pad(x.astype(np.int64) - 7, [(0, 0), (0, 0), (1, 0), (0, 1)])
    wc = w.astype(np.int64) - w_zp[:, None, None, None]
    acc = np.zeros((2, 4, 9, 8), np.int64)
    for i in range(2):
        for j in range(2):
            acc += np.einsum("nchw,mc->nmhw", xp[:, :, i : i + 9, j : j + 8], wc[:, :, i, j])
    acc += bias[None, :, None, None]
    mult = (np.float32(0.05) * w_scale) / np.float32(0.11)
    want = np.clip(np.rint(acc.astype(np.float32) * mult[:, None, None]) + 128, 0, 255)
    np.testing.assert_array_equal(got, want.astype(np.uint8))


def test_conv_integer_1d_and_2d_with_per_channel_zero_points():
    w2 = ints(np.uint8, 3, 2, 3, 3)
    w1 = ints(np.int8, 4, 2, 3)
    nodes = [
        oh.make_node("ConvInteger", ["x", "w2", "xz", "wz2"], ["y2"], pads=[1, 2, 1, 0]),
        oh.make_node(
            "ConvInteger", ["x1", "w1"], ["y1"], strides=[2], dilations=[2], auto_pad="VALID"
        ),
    ]
    m = model(
        nodes,
        [vi("x", TP.UINT8, [1, 2, 6, 5]), vi("x1", TP.INT8, [2, 2, 11])],
        [vi("y2", TP.INT32), vi("y1", TP.INT32)],
        [init("w2", w2), init("xz", np.uint8(100)), init("wz2", ints(np.uint8, 3)), init("w1", w1)],
        opset=10,
    )
    feeds = {"x": ints(np.uint8, 1, 2, 6, 5), "x1": ints(np.int8, 2, 2, 11)}
    same(run_rill(m, feeds), run_ref(m, feeds))


# -- a QDQ model, as onnxruntime's quantization tool writes it ---------------------------------


def test_qdq_dequantize_conv_quantize_matches_the_reference_within_one_quantum():
    w = ints(np.int8, 8, 4, 3, 3)
    w_scale = (RNG.random(8) * 0.01 + 0.002).astype(np.float32)
    inits = [
        init("xs", np.float32(0.02)),
        init("xz", np.uint8(128)),
        init("w", w),
        init("ws", w_scale),
        init("wz", np.zeros(8, np.int8)),
        init("b", RNG.standard_normal(8).astype(np.float32)),
        init("ys", np.float32(0.05)),
        init("yz", np.uint8(100)),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
        oh.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
        oh.make_node("Conv", ["xf", "wf", "b"], ["c"], pads=[1, 1, 1, 1]),
        oh.make_node("Relu", ["c"], ["r"]),
        oh.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
        oh.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    m = model(nodes, [vi("x", shape=[1, 4, 10, 10])], [vi("yq", TP.UINT8), vi("y")], inits)
    x = RNG.standard_normal((1, 4, 10, 10)).astype(np.float32)
    got = run_rill(m, {"x": x})
    want = run_ref(m, {"x": x})
    # The float convolution sums in another order: a value by a rounding boundary may land one
    # quantum off.
    diff = np.abs(got[0].astype(np.int32) - want[0].astype(np.int32))
    assert got[0].dtype == np.uint8 and diff.max() <= 1 and (diff == 0).mean() > 0.99
    np.testing.assert_allclose(got[1], want[1], atol=0.05 + 1e-6)


# -- bad input names the node ----------------------------------------------------------------------


def _bad(nodes, inputs, outputs, inits, match):
    with pytest.raises(OnnxImportError, match=match):
        import_onnx(model(nodes, inputs, outputs, inits))


def test_per_axis_scale_of_the_wrong_length_names_the_node():
    _bad(
        [oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, name="q")],
        [vi("x", shape=[2, 3, 4])],
        [vi("y", TP.UINT8)],
        [init("s", np.ones(4, np.float32)), init("z", np.zeros(4, np.uint8))],
        r"node 'q' \(QuantizeLinear, opset 21\).*axis 1 \(3\), got 4",
    )


def test_zero_point_shape_differing_from_the_scale_names_the_node():
    _bad(
        [oh.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0, name="dq")],
        [vi("x", TP.INT8, [3, 2])],
        [vi("y")],
        [init("s", np.ones(3, np.float32)), init("z", np.zeros(2, np.int8))],
        r"node 'dq' \(DequantizeLinear.*zero point's shape \[2\] differs from the scale's",
    )


def test_zero_point_type_mismatches_name_the_node():
    _bad(
        [oh.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")],
        [vi("x", TP.INT8, [3])],
        [vi("y")],
        [init("s", np.float32(1)), init("z", np.uint8(0))],
        r"node 'dq'.*zero point is uint8 but x is int8",
    )
    _bad(
        [oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], output_dtype=TP.INT8, name="q")],
        [vi("x", shape=[3])],
        [vi("y", TP.INT8)],
        [init("s", np.float32(1)), init("z", np.uint8(0))],
        r"node 'q'.*output_dtype int8 differs from the zero point's type uint8",
    )
    _bad(
        [oh.make_node("MatMulInteger", ["a", "b", "az"], ["y"], name="mm")],
        [vi("a", TP.UINT8, [2, 3]), vi("b", TP.INT8, [3, 2])],
        [vi("y", TP.INT32)],
        [init("az", np.int8(0))],
        r"node 'mm'.*A zero point is int8 but A is uint8",
    )


def test_blocked_scale_of_the_wrong_shape_and_a_missing_block_size():
    x = [vi("x", shape=[2, 6])]
    _bad(
        [oh.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2, name="q")],
        x,
        [vi("y", TP.UINT8)],
        [init("s", np.ones((2, 2), np.float32))],
        r"node 'q'.*block_size=2 along axis 1 has shape dimension 1 = 3, got 2",
    )
    _bad(
        [oh.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, name="q")],
        x,
        [vi("y", TP.UINT8)],
        [init("s", np.ones((2, 3), np.float32))],
        r"node 'q'.*needs the block_size attribute",
    )
    _bad(
        [oh.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=2, name="q")],
        x,
        [vi("y", TP.UINT8)],
        [init("s", np.ones(6, np.float32))],
        r"node 'q'.*axis 2 is out of range for an input of rank 2",
    )


def test_qlinear_conv_per_channel_scale_of_the_wrong_length_names_the_node():
    inits = [
        init("xs", np.float32(0.1)),
        init("xz", np.uint8(0)),
        init("w", np.ones((4, 2, 1, 1), np.int8)),
        init("ws", np.ones(3, np.float32)),
        init("wz", np.zeros(3, np.int8)),
        init("ys", np.float32(1)),
        init("yz", np.uint8(0)),
    ]
    node = oh.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qc"
    )
    _bad(
        [node],
        [vi("x", TP.UINT8, [1, 2, 3, 3])],
        [vi("y", TP.UINT8)],
        inits,
        r"node 'qc' \(QLinearConv.*w zero point has 3 values.*4 output channels",
    )


def test_conv_integer_channels_not_matching_the_filter_names_the_node():
    _bad(
        [oh.make_node("ConvInteger", ["x", "w"], ["y"], group=2, name="ci")],
        [vi("x", TP.UINT8, [1, 6, 3, 3])],
        [vi("y", TP.INT32)],
        [init("w", np.ones((4, 2, 1, 1), np.uint8))],
        r"node 'ci' \(ConvInteger.*6 channels; the filter's 2 per group × group=2 gives 4",
    )


@pytest.mark.parametrize("mult, attrs", [(1, dict(pads=[1, 1, 1, 1])), (2, dict(strides=[2, 1])),
                                         (3, dict(dilations=[2, 2], pads=[2, 0, 2, 0]))])  # fmt: skip
def test_depthwise_conv_integer_is_exact(mult, attrs):
    # group = input channels: a float64 depthwise convolution cast back to int32, every sum an
    # exact integer (the extreme values of uint8 inputs and int8 weights included).
    c = 5
    x = ints(np.uint8, 2, c, 9, 8)
    x[0, 0] = 255  # the largest products
    w = ints(np.int8, c * mult, 1, 3, 3)
    w[0] = -128
    xz, wz = np.uint8(3), np.int8(-7)
    node = oh.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], group=c, **attrs)
    m = model([node], [vi("x", TP.UINT8, [2, c, 9, 8])], [vi("y", TP.INT32)],
              [init("w", w), init("xz", xz), init("wz", wz)])  # fmt: skip
    got = run_rill(m, {"x": x})
    same(got, run_ref(m, {"x": x}))
    g, _, _ = import_onnx(m)
    assert "DepthwiseConv2dNative" in {o.type for o in g.get_operations()}


def test_conv_integer_through_float64_is_exact_on_winograds_shapes():
    # A 3×3 stride-1 convolution of 64 channels on 28×28 (Winograd's shape: float64 tiles whose
    # transforms round) at the extremes of uint8 and int8: rounding the float64 result gives
    # the exact integer sums.
    c = 64
    x = ints(np.uint8, 1, c, 28, 28)
    x[0, :, :14] = 255
    w = ints(np.int8, c, c, 3, 3)
    w[: c // 2] = -128
    node = oh.make_node("ConvInteger", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    m = model([node], [vi("x", TP.UINT8, [1, c, 28, 28])], [vi("y", TP.INT32)], [init("w", w)])
    got = run_rill(m, {"x": x})
    same(got, run_ref(m, {"x": x}))
