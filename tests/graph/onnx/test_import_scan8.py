"""Opset-8 (batched) Scan imports as Loops: batch items and sequence steps, reversed inputs,
scans without states, and a clear refusal of per-item sequence lengths."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from rill.exec import Session
from rill.graph.onnx import import_onnx
from rill.graph.onnx.import_util import OnnxImportError

F = TensorProto.FLOAT


def _scan8_model(num_states: int, directions=None, sequence_lens: str = ""):
    """Scan-8 over x [batch, seq, 2]: a running sum state (if any) and per-step outputs."""
    if num_states:
        body = helper.make_graph(
            [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
             helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
            "body",
            [helper.make_tensor_value_info("s_in", F, [2]),
             helper.make_tensor_value_info("x_t", F, [2])],
            [helper.make_tensor_value_info("s_out", F, [2]),
             helper.make_tensor_value_info("y_t", F, [2])],
        )  # fmt: skip
        inputs = [sequence_lens, "init", "x"]
        outputs = ["final", "ys"]
    else:
        body = helper.make_graph(
            [helper.make_node("Neg", ["x_t"], ["y_t"])],
            "body",
            [helper.make_tensor_value_info("x_t", F, [2])],
            [helper.make_tensor_value_info("y_t", F, [2])],
        )
        inputs = [sequence_lens, "x"]
        outputs = ["ys"]
    attrs = {"body": body, "num_scan_inputs": 1}
    if directions is not None:
        attrs["directions"] = directions
    node = helper.make_node("Scan", inputs, outputs, **attrs)
    g_inputs = [helper.make_tensor_value_info("x", F, [None, None, 2])]
    if num_states:
        g_inputs.insert(0, helper.make_tensor_value_info("init", F, [None, 2]))
    if sequence_lens:
        g_inputs.append(helper.make_tensor_value_info(sequence_lens, TensorProto.INT64, [None]))
    g = helper.make_graph([node], "scan8", g_inputs,
                          [helper.make_tensor_value_info(o, F, None) for o in outputs])  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])


def _reference(init, x, reverse: bool):
    finals, ys = [], []
    for b in range(x.shape[0]):
        s, seq = init[b].copy(), []
        steps = x[b][::-1] if reverse else x[b]
        for xt in steps:
            s = s + xt
            seq.append(s * xt)
        finals.append(s)
        ys.append(np.stack(seq))
    return np.stack(finals), np.stack(ys)


@pytest.mark.parametrize("directions", [None, [0], [1]])
def test_batched_scan_with_a_state(directions):
    graph, inputs, outputs = import_onnx(_scan8_model(1, directions))
    rng = np.random.default_rng(0)
    init = rng.standard_normal((3, 2)).astype(np.float32)
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    with Session(graph=graph) as sess:
        final, ys = sess.run([outputs["final"], outputs["ys"]],
                             {inputs["init"]: init, inputs["x"]: x})  # fmt: skip
    want_final, want_ys = _reference(init, x, reverse=directions == [1])
    np.testing.assert_allclose(final, want_final, rtol=1e-6)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-6)


def test_the_reference_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(1)
    init = rng.standard_normal((2, 2)).astype(np.float32)
    x = rng.standard_normal((2, 5, 2)).astype(np.float32)
    for directions in ([0], [1]):
        model = _scan8_model(1, directions)
        model.ir_version = 3  # the IR version of opset 8
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"init": init, "x": x})
        for g, w in zip(got, _reference(init, x, reverse=directions == [1])):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_batched_scan_without_states():
    graph, inputs, outputs = import_onnx(_scan8_model(0))
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    with Session(graph=graph) as sess:
        np.testing.assert_array_equal(sess.run(outputs["ys"], {inputs["x"]: x}), -x)


def test_per_item_sequence_lengths_are_refused():
    with pytest.raises(OnnxImportError, match="sequence_lens 'lens'"):
        import_onnx(_scan8_model(1, sequence_lens="lens"))
