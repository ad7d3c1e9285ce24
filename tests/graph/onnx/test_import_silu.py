"""SiLU as PyTorch's exporters write it (Sigmoid, then Mul of the input and the Sigmoid, either
order) after NCHW convolutions, imported: the remapper folds each into the convolution's fused
op (float32: the compiled Sigmoid with its own exp, within 4 ulp of the exact value) and the
model matches onnxruntime, with the compiled loops and without them (RILL_JIT=0's path)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rill.exec import RunMetadata, RunOptions, Session
from rill.exec.kernels import jit
from rill.graph.onnx import import_onnx

RNG = np.random.default_rng(20)


def _silu_model() -> onnx.ModelProto:
    def init(name, shape):
        return numpy_helper.from_array((RNG.standard_normal(shape) * 0.5).astype(np.float32), name)

    inits = [init("w1", [16, 8, 3, 3]), init("b1", [16]), init("w2", [16, 1, 3, 3]),
             init("b2", [16]), init("w3", [8, 16, 1, 1]), init("b3", [8])]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Sigmoid", ["c1"], ["s1"]),
        helper.make_node("Mul", ["c1", "s1"], ["a1"]),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Sigmoid", ["c2"], ["s2"]),
        helper.make_node("Mul", ["s2", "c2"], ["a2"]),  # the other order
        helper.make_node("Conv", ["a2", "w3", "b3"], ["c3"]),
        helper.make_node("Sigmoid", ["c3"], ["s3"]),
        helper.make_node("Mul", ["c3", "s3"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 15, 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("compiled", [True, False], ids=["loops", "RILL_JIT=0"])
def test_silu_blocks_fuse_and_match_onnxruntime(compiled):
    ort = pytest.importorskip("onnxruntime")
    model = _silu_model()
    x = (RNG.standard_normal([2, 8, 15, 17]) * 8).astype(np.float32)  # reaches both tails
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    g, ins, outs = import_onnx(model)
    old = jit.set_enabled(compiled)
    try:
        with Session(graph=g) as s:
            md = RunMetadata()
            got = s.run(outs["y"], {ins["x"]: x},
                        options=RunOptions(output_partition_graphs=True), run_metadata=md)  # fmt: skip
    finally:
        jit.set_enabled(old)
    ops = [n.op for gd in md.partition_graphs for n in gd.node]
    assert "Sigmoid" not in ops and "Mul" not in ops
    assert ops.count("_FusedConv2D") == 2 and ops.count("_FusedDepthwiseConv2dNative") == 1
    assert got.shape == want.shape == (2, 8, 8, 9)
    # (onnxruntime's logistic is an approximation: 3e-5 relative on an AVX2 CPU, Zen 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
