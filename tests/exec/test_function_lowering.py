"""GraphDefs with a function library (TensorFlow 2 / control flow v2) import by lowering to
control flow v1: calls run, the library comes back out of as_graph_def, and a missing function
or recursion between functions is a clear error. The TensorFlow-made cases (If, While, Case,
PartitionedCall, frozen tf.function graphs) are in test_tf_graph_fixtures.py."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import GraphValueError
from rill.graph.proto import function_pb2, graph_pb2

F32 = rg.float32.enum


def _fn(name, body_op="Mul", call=None):
    """f(x) = x * x (or calls `call`)."""
    f = function_pb2.FunctionDef()
    f.signature.name = name
    f.signature.input_arg.add(name="x", type=F32)
    f.signature.output_arg.add(name="y", type=F32)
    nd = f.node_def.add(name="n")
    if call:
        nd.op = call
        nd.input.append("x")
        f.ret["y"] = "n:y:0"
    else:
        nd.op = body_op
        nd.input.extend(["x", "x"])
        nd.attr["T"].type = F32
        f.ret["y"] = "n:z:0"
    return f


def _graph(functions, call_op="PartitionedCall", f="square"):
    gd = graph_pb2.GraphDef()
    gd.library.function.extend(functions)
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = F32
    c = gd.node.add(name="call", op=call_op, input=["x"])
    if call_op == "PartitionedCall":
        c.attr["f"].func.name = f
        c.attr["Tin"].list.type.append(F32)
        c.attr["Tout"].list.type.append(F32)
    out = gd.node.add(name="out", op="Identity", input=["call"])
    out.attr["T"].type = F32
    return gd


def test_partitioned_call_and_a_function_named_op_run_and_the_library_is_exported():
    for call_op in ("PartitionedCall", "square"):
        gd = _graph([_fn("square")], call_op)
        g = rg.Graph()
        with g.as_default():
            rg.import_graph_def(gd, name="")
        with Session(graph=g) as s:
            got = s.run("out:0", {"x:0": np.array([1.5, -2.0], np.float32)})
        np.testing.assert_allclose(got, [2.25, 4.0])
        back = g.as_graph_def()
        assert [f.signature.name for f in back.library.function] == ["square"]


def test_a_call_of_a_missing_function_names_it():
    gd = _graph([_fn("square")], f="cube")
    with rg.Graph().as_default(), pytest.raises(GraphValueError, match="calls function 'cube'"):
        rg.import_graph_def(gd, name="")


def test_recursion_between_functions_is_refused():
    gd = _graph([_fn("a", call="b"), _fn("b", call="a")], f="a")
    with rg.Graph().as_default(), pytest.raises(GraphValueError, match="a -> b -> a"):
        rg.import_graph_def(gd, name="")


def test_gradients_flow_through_lowered_if_case_and_calls():
    """The TF-made functional_v2 graph: d/dx of the If, Case and PartitionedCall outputs, built by
    rill's autodiff on the lowered primitives. (A lowered While gets no gradient: rill builds
    loop gradients from its own while_loop contexts, which an imported loop lacks.)"""
    import pathlib

    import rill.autodiff as ad

    path = (
        pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs" / "functional_v2.pb"
    )
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(path.read_bytes())
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def(gd, name="")
        x, k = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("k:0")
        grads = [ad.gradients(rg.reduce_sum(g.get_tensor_by_name(f"out/{n}:0")), [x])[0]
                 for n in ("cond", "call", "case")]  # fmt: skip
    with Session(graph=g) as s:
        s.run(g.get_operation_by_name("init"))
        feed = {x: np.array([1.0, 2.0, 3.0], np.float32), k: np.int32(2)}
        d_cond, d_call, d_case = s.run(grads, feed)
    np.testing.assert_allclose(d_cond, [1, 1, 1])  # v * 2 + x on the true branch
    np.testing.assert_allclose(d_call, [2, 4, 9])  # a * a + max(a), summed: 2a + 3·[argmax]
    np.testing.assert_allclose(d_case, [-1, -1, -1])  # branch 2: -x
