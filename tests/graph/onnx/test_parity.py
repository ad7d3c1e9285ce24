"""The op-by-op parity report: every node output of the import against onnxruntime's."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

from rill.graph.onnx import import_registry
from rill.graph.onnx.import_util import op
from rill.graph.onnx.parity import format_parity, parity_report

RNG = np.random.default_rng(11)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def cnn():
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        oh.make_node("Relu", ["c"], ["r"], name="relu"),
        oh.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        oh.make_node("Flatten", ["p"], ["f"], name="flatten"),
        oh.make_node("Gemm", ["f", "wf"], ["y"], transB=1, name="fc"),
        oh.make_node("Shape", ["y"], ["ys"], name="shape"),
    ]
    inits = [nh.from_array(RNG.standard_normal((3, 2, 3, 3)).astype(np.float32), "w"),
             nh.from_array(RNG.standard_normal((5, 12)).astype(np.float32), "wf")]  # fmt: skip
    g = oh.make_graph(nodes, "cnn", [vi("x", shape=["N", 2, 4, 4])],
                      [vi("y"), vi("ys", TP.INT64)], inits)  # fmt: skip
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


def test_every_node_output_is_compared_and_passes():
    rows = parity_report(cnn(), {"x": RNG.standard_normal((2, 2, 4, 4)).astype(np.float32)})
    assert [r.output for r in rows if r.ok] and all(r.ok for r in rows)
    assert sorted(r.node for r in rows) == ["conv", "fc", "flatten", "pool", "relu", "shape"]
    shape_row = next(r for r in rows if r.node == "shape")
    assert shape_row.max_abs_err == 0.0
    # Worst first: the ratio of error to tolerance never increases down the table.
    ratios = [r.ratio for r in rows]
    assert ratios == sorted(ratios, reverse=True)


def test_random_inputs_when_none_are_given():
    rows = parity_report(cnn(), seed=5)
    assert len(rows) == 6 and all(r.ok for r in rows)


def test_a_wrong_rule_shows_first_with_its_error(monkeypatch):
    def bad_relu(n, x):  # off by a leak: negative inputs come out scaled instead of zero
        return op("LeakyRelu", [x], {"alpha": 0.25})

    rule = import_registry.get_import_rule("Relu")
    monkeypatch.setitem(import_registry._RULES, ("", "Relu"),
                        import_registry.ImportRule("Relu", "", bad_relu, rule.attrs, False))  # fmt: skip
    rows = parity_report(cnn(), {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)})
    failing = [r.node for r in rows if not r.ok]
    # Only the wrong rule fails: the nodes after it differ chained, but alone on onnxruntime's
    # inputs they agree, so their rows pass as inherited.
    assert failing == ["relu"]
    differ = [r for r in rows if r.node in ("pool", "flatten", "fc") and r.ratio > 1]
    assert all(r.ok and r.note.startswith("inherited") for r in differ)
    assert not rows[0].ok and rows[-1].ok
    assert rows[0].max_abs_err > 1e-3
    text = format_parity(rows)
    lines = text.splitlines()
    assert lines[0].startswith("tolerance: |rill - onnxruntime| <= 1e-05 + 0.0001")
    assert "FAIL" in lines[2]
    assert lines[-1].endswith(f"{len(rows) - len(failing)} of {len(rows)} node outputs pass")


def test_an_error_inherited_from_the_inputs_passes_noted(monkeypatch):
    # Relu imported wrong (leaky): its row fails; the Softmax after it differs chained, but
    # alone on onnxruntime's Relu output it agrees, so its row passes, noted as inherited.
    def bad_relu(n, x):
        return op("LeakyRelu", [x], {"alpha": 0.25})

    rule = import_registry.get_import_rule("Relu")
    monkeypatch.setitem(import_registry._RULES, ("", "Relu"),
                        import_registry.ImportRule("Relu", "", bad_relu, rule.attrs, False))  # fmt: skip
    nodes = [oh.make_node("Relu", ["x"], ["r"], name="relu"),
             oh.make_node("Softmax", ["r"], ["y"], name="softmax")]  # fmt: skip
    g = oh.make_graph(nodes, "g", [vi("x", shape=[2, 3])], [vi("y")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    x = -np.array([[1, 2, 3], [4, 5, 6]], np.float32)  # Relu gives 0, the leak does not
    rows = {r.node: r for r in parity_report(m, {"x": x})}
    assert not rows["relu"].ok and rows["relu"].note == ""
    sm = rows["softmax"]
    assert sm.ok and sm.ratio > 1 and sm.max_abs_err > 0.05
    assert sm.note == "inherited: alone 0.0e+00 abs, 0.0e+00 rel"
    assert "pass (inherited: alone" in format_parity(list(rows.values()))


def test_tolerance_is_applied():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    strict = parity_report(cnn(), {"x": x}, rtol=0.0, atol=0.0)
    loose = parity_report(cnn(), {"x": x}, rtol=1e-3, atol=1e-3)
    assert all(r.ok for r in loose)
    # Float sums in another order differ in the last bits; a zero tolerance may see that.
    assert {r.node for r in strict if not r.ok} <= {"conv", "relu", "pool", "flatten", "fc"}
