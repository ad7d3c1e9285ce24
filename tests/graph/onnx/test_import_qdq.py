"""QDQ models (onnxruntime's quantize_static) run as onnxruntime runs them: the uint8 groups
as QLinear ops (import_qdq.fuse_qdq), so that rill's outputs are onnxruntime's, bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_rill

from rill.graph.onnx.import_qdq import fuse_qdq

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

RNG = np.random.default_rng(11)


def _float_model() -> onnx.ModelProto:
    """A small CNN with the groups onnxruntime fuses: convolutions (with bias, Relu folded
    by the quantizer), a residual Add, a Concat, a Softmax over channels, GlobalAveragePool
    and a MatMul head."""

    def w(name, *shape):
        return nh.from_array((RNG.normal(size=shape) * 0.3).astype(np.float32), name)

    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 8, 3, 3), w("b2", 8), w("w3", 4, 8, 1, 1),
             w("b3", 4), w("fc", 12, 5)]  # fmt: skip
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        oh.make_node("Relu", ["c1"], ["r1"]),
        oh.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        oh.make_node("Add", ["c2", "r1"], ["s"]),
        oh.make_node("Conv", ["s", "w3", "b3"], ["c3"]),
        oh.make_node("Concat", ["c3", "s"], ["cat"], axis=1),
        oh.make_node("Softmax", ["cat"], ["sm"], axis=1),
        oh.make_node("GlobalAveragePool", ["sm"], ["gap"]),
        oh.make_node("Flatten", ["gap"], ["flat"]),
        oh.make_node("MatMul", ["flat", "fc"], ["y"]),
    ]
    g = oh.make_graph(nodes, "cnn", [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3, 9, 9])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [2, 5])], inits)  # fmt: skip
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


class _Reader(quantization.CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(3)
        self.batches = iter([{"x": rng.normal(size=(2, 3, 9, 9)).astype(np.float32)}
                             for _ in range(4)])  # fmt: skip

    def get_next(self):
        return next(self.batches, None)


def _quantized(tmp_path, activation, reduce_range=False) -> onnx.ModelProto:
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_float_model(), src)
    quantization.quantize_static(str(src), str(dst), _Reader(),
                                 quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=activation,
                                 weight_type=quantization.QuantType.QInt8, per_channel=True,
                                 reduce_range=reduce_range)  # fmt: skip
    return onnx.load(dst)


def test_uint8_qdq_model_matches_onnxruntime_bit_for_bit(tmp_path):
    # 7-bit weights (the quantizer's reduce_range, onnxruntime's advice for x86 CPUs without
    # VNNI): onnxruntime's uint8 × int8 kernels there (AVX2: Zen 3) add pairs of products in 16
    # bits, saturating, so full-range weights have no CPU-independent result to compare with.
    m = _quantized(tmp_path, quantization.QuantType.QUInt8, reduce_range=True)
    fused = {n.op_type for n in fuse_qdq(m).graph.node}
    assert {"QLinearConv", "QLinearAdd", "QLinearConcat", "QLinearSoftmax",
            "QLinearGlobalAveragePool"} <= fused  # fmt: skip
    for seed in range(3):
        x = np.random.default_rng(seed).normal(size=(2, 3, 9, 9)).astype(np.float32) * 1.5
        got, want = run_rill(m, {"x": x}), run_ort(m, {"x": x})
        np.testing.assert_array_equal(got[0], want[0])


def test_int8_activations_stay_in_float_as_onnxruntime_leaves_them(tmp_path):
    m = _quantized(tmp_path, quantization.QuantType.QInt8)
    assert fuse_qdq(m) is m  # nothing rewritten
    x = RNG.normal(size=(2, 3, 9, 9)).astype(np.float32)
    got, want = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    # The spec's float path on both sides: equal up to a quantization step where a float sum
    # lies within rounding of half a step.
    scale = np.abs(want[0]).max()
    assert np.abs(got[0] - want[0]).max() <= 0.05 * scale


def test_a_group_whose_result_is_also_used_elsewhere_is_left_alone():
    """Conv's float output feeds the QuantizeLinear and a graph output: no rewrite (the float
    value would be lost)."""
    inits = [nh.from_array(np.array(0.1, np.float32), "s"), nh.from_array(np.array(3, np.uint8), "z"),
             nh.from_array(np.ones((2, 1, 1, 1), np.int8), "w"),
             nh.from_array(np.array(0.05, np.float32), "ws"), nh.from_array(np.array(0, np.int8), "wz")]  # fmt: skip
    nodes = [oh.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             oh.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
             oh.make_node("Conv", ["xf", "wf"], ["c"]),
             oh.make_node("QuantizeLinear", ["c", "s", "z"], ["q"])]  # fmt: skip
    g = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TP.UINT8, [1, 1, 2, 2])],
                      [oh.make_tensor_value_info("q", TP.UINT8, None),
                       oh.make_tensor_value_info("c", TP.FLOAT, None)], inits)  # fmt: skip
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    assert fuse_qdq(m) is m
