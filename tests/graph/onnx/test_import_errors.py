"""import_onnx on bad input and old opsets: clear errors, and the version converter's path."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

from rill.exec import Session
from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError, unsupported_ops


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, domains=()):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset), *(oh.make_opsetid(d, 1) for d in domains)]
    return oh.make_model(g, opset_imports=ops, ir_version=7)


def small_cnn():
    w = nh.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             oh.make_node("Relu", ["c"], ["y"], name="relu")]  # fmt: skip
    return model(nodes, [vi("x", shape=[1, 1, 4, 4])], [vi("y")], [w])


def test_truncated_file_is_a_clear_error(tmp_path):
    data = small_cnn().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError, match=r"cut\.onnx.*truncated"):
        import_onnx(path)
    with pytest.raises(OnnxImportError, match="truncated"):
        import_onnx(data[:-7])


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(OnnxImportError, match="holds no ONNX graph"):
        import_onnx(empty)
    with pytest.raises(OnnxImportError, match="cannot read"):
        import_onnx(tmp_path / "nope.onnx")
    with pytest.raises(TypeError, match="ModelProto, bytes or a path"):
        import_onnx(3)


def test_unknown_op_names_the_node_op_and_opset():
    node = oh.make_node("Frobnicate", ["x"], ["y"], domain="com.example", name="frob1")
    m = model([node], [vi("x", shape=[2])], [vi("y")], domains=["com.example"])
    with pytest.raises(OnnxImportError, match=r"'frob1'.*com\.example::Frobnicate at opset 1"):
        import_onnx(m)
    assert unsupported_ops(m) == [("com.example", "Frobnicate", 1)]
    node = oh.make_node("ImageDecoder", ["x"], ["y"], name="up")
    m = model([node], [vi("x", TP.UINT8, [10])], [vi("y", TP.UINT8)], opset=20)
    with pytest.raises(
        OnnxImportError, match=r"node 'up' \(ImageDecoder, opset 20\).*no import rule"
    ):
        import_onnx(m)


def test_missing_initializer_is_named():
    node = oh.make_node("Conv", ["x", "W"], ["y"], name="conv7")
    m = model([node], [vi("x", shape=[1, 1, 3, 3])], [vi("y")])
    with pytest.raises(OnnxImportError, match=r"'conv7' \(Conv\) reads 'W'.*missing initializer"):
        import_onnx(m)


def test_undefined_graph_output_and_unsupported_types():
    m = model([oh.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[2])], [vi("z")])
    with pytest.raises(OnnxImportError, match="graph output 'z'.*produced by no node"):
        import_onnx(m)
    m = model([oh.make_node("Identity", ["x"], ["y"])], [vi("x", TP.FLOAT6E2M3, [2])],
              [vi("y", TP.FLOAT6E2M3)])  # fmt: skip
    with pytest.raises(OnnxImportError, match="FLOAT6E2M3 has no rill dtype"):
        import_onnx(m)


def test_unhandled_attribute_is_refused():
    # An attribute the rule does not take (here one ONNX never defined) is refused by name.
    node = oh.make_node("Relu", ["x"], ["y"], name="r", frobs=3)
    m = model([node], [vi("x", shape=[2])], [vi("y")])
    with pytest.raises(OnnxImportError, match=r"does not handle attribute\(s\) \['frobs'\]"):
        import_onnx(m)


def test_opset_newer_than_onnx_knows():
    m = model([oh.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[2])], [vi("y")], opset=99)
    with pytest.raises(OnnxImportError, match="opset 99.*upgrade onnx"):
        import_onnx(m)


def test_old_opset_model_goes_through_the_version_converter():
    # Opset 11: axes as attributes (Squeeze, Unsqueeze, ReduceSum), Split's sizes as an attribute.
    nodes = [
        oh.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
        oh.make_node("ReduceSum", ["u"], ["s"], axes=[2], keepdims=1),
        oh.make_node("Squeeze", ["s"], ["q"], axes=[0, 2]),
        oh.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]),
        oh.make_node("Clip", ["b"], ["c"]),
    ]
    m = model(nodes, [vi("x", shape=[3, 4])], [vi("q"), vi("a"), vi("c")], opset=11)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    g, inputs, outputs = import_onnx(m)
    with Session(graph=g) as s:
        got = s.run([outputs[n] for n in ("q", "a", "c")], {inputs["x"]: x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_unconvertible_old_opset_names_the_op_and_opset():
    nodes = [oh.make_node("Relu", ["x"], ["r"]),
             oh.make_node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], spatial=0)]  # fmt: skip
    m = model(nodes, [vi(n, shape=[2, 3]) for n in "xsbmv"], [vi("y")], opset=7)
    with pytest.raises(OnnxImportError) as e:
        import_onnx(m)
    msg = str(e.value)
    assert "BatchNormalization (opset 7)" in msg and "Relu" not in msg
    assert "re-export the model at opset 13 or newer" in msg


def _loop_model(body_outputs: int, node_outputs: int):
    """A Loop with one carried value; its body returns `body_outputs` values."""
    body_nodes = [oh.make_node("Identity", ["c_in"], ["c_out"]),
                  oh.make_node("Add", ["v_in", "one"], ["v_out"])]  # fmt: skip
    outs = [vi("c_out", TP.BOOL, []), vi("v_out", shape=[1])]
    for k in range(body_outputs - 2):
        body_nodes.append(oh.make_node("Identity", ["v_in"], [f"s{k}"]))
        outs.append(vi(f"s{k}", shape=[1]))
    outs = outs[:body_outputs]
    one = nh.from_array(np.ones(1, np.float32), "one")
    body = oh.make_graph(body_nodes, "body", [vi("i", TP.INT64, []), vi("c_in", TP.BOOL, []),
                                              vi("v_in", shape=[1])], outs, [one])  # fmt: skip
    node_outs = ["v", "s", "t"][:node_outputs]
    loop = oh.make_node("Loop", ["M", "", "v0"], node_outs, body=body, name="my_loop")
    return model([loop], [vi("M", TP.INT64, []), vi("v0", shape=[1])],
                 [vi(o) for o in node_outs])  # fmt: skip


def test_loop_whose_body_has_too_few_outputs_is_named():
    with pytest.raises(OnnxImportError, match=r"node 'my_loop' \(Loop.*body has 1 outputs; "
                                              r"expected >= 2"):  # fmt: skip
        import_onnx(_loop_model(body_outputs=1, node_outputs=1))


def test_loop_with_more_outputs_than_its_body_makes_is_named():
    with pytest.raises(OnnxImportError, match=r"node 'my_loop' \(Loop.*Loop has 3 outputs but "
                                              r"its body makes 3"):  # fmt: skip
        import_onnx(_loop_model(body_outputs=3, node_outputs=3))


def test_a_well_formed_loop_of_the_same_shape_imports():
    g, ins, outs = import_onnx(_loop_model(body_outputs=3, node_outputs=2))
    with Session(graph=g) as s:
        v, scans = s.run(
            [outs["v"], outs["s"]], {ins["M"]: np.int64(3), ins["v0"]: np.zeros(1, np.float32)}
        )
    np.testing.assert_array_equal(v, [3.0])
    np.testing.assert_array_equal(scans.ravel(), [0.0, 1.0, 2.0])
