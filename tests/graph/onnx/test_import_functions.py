"""import_onnx of models with model-local functions (ModelProto.functions): PyTorch's
TorchScript exporter writes them for export_modules_as_functions, onnxscript for each @script
function a model calls. Each call is inlined (attributes bound, nested calls, a body at another
opset than the model's, calls inside a Loop body) and matched against onnxruntime; recursive
functions and invalid bodies are refused naming the function."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_rill

from rill.graph.onnx.import_util import OnnxImportError
from rill.graph.onnx.importer import unsupported_ops

pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)
D = "custom.fn"


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def _scaled_gelu(opset=17):
    """y = Gelu-like(x) * alpha, alpha an attribute with a default, and a nested call."""
    half = oh.make_node("Constant", [], ["half"], value_float=0.5)
    alpha = oh.make_node("Constant", [], ["alpha"])
    alpha.attribute.append(_ref("value_float", "alpha"))
    body = [
        half,
        alpha,
        oh.make_node("Mul", ["x", "half"], ["xh"]),
        oh.make_node("Tanh", ["x"], ["t"]),
        oh.make_node("Add", ["t", "one"], ["t1"]),
        oh.make_node("Mul", ["xh", "t1"], ["g"]),
        oh.make_node("Mul", ["g", "alpha"], ["y0"]),
        oh.make_node("Twice", ["y0"], ["y"], domain=D),
    ]
    body.insert(0, oh.make_node("Constant", [], ["one"], value_float=1.0))
    f = oh.make_function(D, "ScaledGelu", ["x"], ["y"], body,
                         [oh.make_opsetid("", opset), oh.make_opsetid(D, 1)], ["alpha"])  # fmt: skip
    del f.attribute[:]  # alpha is declared with its default instead (IR 9)
    f.attribute_proto.append(oh.make_attribute("alpha", 2.0))
    return f


def _ref(name, ref):
    """An attribute that takes the calling node's attribute `ref`."""
    a = oh.AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, oh.AttributeProto.FLOAT
    return a


def _twice(opset=17):
    return oh.make_function(D, "Twice", ["a"], ["b"], [oh.make_node("Add", ["a", "a"], ["b"])],
                            [oh.make_opsetid("", opset)])  # fmt: skip


def _model(nodes, inputs, outputs, functions, opset=17, inits=()):
    g = oh.make_graph(nodes, "g", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset), oh.make_opsetid(D, 1)]
    return oh.make_model(g, opset_imports=ops, functions=functions, ir_version=9)


def test_calls_of_a_function_with_attributes_and_a_nested_call_are_inlined():
    nodes = [
        oh.make_node("ScaledGelu", ["x"], ["a"], domain=D),  # alpha's default, 2
        oh.make_node("ScaledGelu", ["a"], ["y"], domain=D, alpha=-0.5),
    ]
    m = _model(nodes, [vi("x", shape=[3, 4])], [vi("y")], [_scaled_gelu(), _twice()])
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert unsupported_ops(m) == []


def test_a_function_body_at_another_opset_is_converted_to_the_models():
    """The body's ReduceMean takes its axes as an input (opset 18); the model is at opset 17,
    where the axes are an attribute."""
    body = [
        oh.make_node("Constant", [], ["axes"], value=nh.from_array(np.array([1], np.int64))),
        oh.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
        oh.make_node("Sub", ["x", "m"], ["y"]),
    ]
    f = oh.make_function(D, "Center", ["x"], ["y"], body, [oh.make_opsetid("", 18)])
    m = _model([oh.make_node("Center", ["x"], ["y"], domain=D)], [vi("x", shape=[2, 5])],
               [vi("y")], [f], opset=17)  # fmt: skip
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    (got,) = run_rill(m, {"x": x})
    np.testing.assert_allclose(got, x - x.mean(axis=1, keepdims=True), rtol=1e-6, atol=1e-6)


def test_a_function_called_inside_a_loop_body():
    body = oh.make_graph(
        [
            oh.make_node("Twice", ["v_in"], ["v_out"], domain=D),
            oh.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],  # fmt: skip
        "body",
        [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("v_in", shape=[2])],
        [vi("cond_out", TP.BOOL, []), vi("v_out", shape=[2])],
    )
    n = nh.from_array(np.array(3, np.int64), "n")
    c = nh.from_array(np.array(True), "c")
    m = _model([oh.make_node("Loop", ["n", "c", "x"], ["y"], body=body)], [vi("x", shape=[2])],
               [vi("y")], [_twice()], inits=[n, c])  # fmt: skip
    x = np.array([1.5, -2.0], np.float32)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, x * 8)


def test_functions_that_call_themselves_are_refused():
    ping = oh.make_function(D, "Ping", ["a"], ["b"], [oh.make_node("Pong", ["a"], ["b"], domain=D)],
                            [oh.make_opsetid(D, 1)])  # fmt: skip
    pong = oh.make_function(D, "Pong", ["a"], ["b"], [oh.make_node("Ping", ["a"], ["b"], domain=D)],
                            [oh.make_opsetid(D, 1)])  # fmt: skip
    m = _model([oh.make_node("Ping", ["x"], ["y"], domain=D)], [vi("x", shape=[2])], [vi("y")],
               [ping, pong])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"call themselves: custom.fn::Ping -> "
                                              r"custom.fn::Pong -> custom.fn::Ping"):  # fmt: skip
        run_rill(m, {"x": np.zeros(2, np.float32)})


def test_a_function_with_an_invalid_body_node_is_refused_naming_it():
    bad = oh.make_function(D, "Bad", ["a"], ["b"],
                           [oh.make_node("Transpose", ["a"], ["b"], perm="oops")],
                           [oh.make_opsetid("", 17)])  # fmt: skip
    m = _model([oh.make_node("Bad", ["x"], ["y"], domain=D)], [vi("x", shape=[2, 3])], [vi("y")],
               [bad])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"function custom.fn::Bad: body node #0 "
                                              r"\(Transpose"):  # fmt: skip
        run_rill(m, {"x": np.zeros((2, 3), np.float32)})


def test_a_function_body_may_use_onnxruntimes_contrib_ops():
    """com.microsoft::Gelu has no onnx schema (ai.onnx has a Gelu): the body check leaves ops
    without a schema to the import."""
    body = [oh.make_node("Gelu", ["a"], ["g"], domain="com.microsoft"),
            oh.make_node("Add", ["g", "a"], ["b"])]  # fmt: skip
    f = oh.make_function(D, "GeluRes", ["a"], ["b"], body,
                         [oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])  # fmt: skip
    g = oh.make_graph([oh.make_node("GeluRes", ["x"], ["y"], domain=D)], "g",
                      [vi("x", shape=[2, 3])], [vi("y")])  # fmt: skip
    ops = [oh.make_opsetid("", 17), oh.make_opsetid(D, 1), oh.make_opsetid("com.microsoft", 1)]
    m = oh.make_model(g, opset_imports=ops, functions=[f], ir_version=9)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
