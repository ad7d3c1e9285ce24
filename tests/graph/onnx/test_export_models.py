"""ONNX export of whole models: the paper's Figure 1 MLP and the demo's CNN with frozen
variables, layout propagation (transpose counts), conds → If, while loops → Loop, opsets
13 / 17 / 18 / newest, and the errors a user meets."""

from __future__ import annotations

import functools
import importlib.util
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

import rill.graph as rg
import rill.train as rt
from rill.exec import Session
from rill.graph.onnx import export_onnx

ROOT = pathlib.Path(__file__).resolve().parents[3]
NEWEST = onnx.defs.onnx_opset_version()
OPSETS = [13, 17, 18, NEWEST]


@functools.cache
def ort_max_opset() -> int:
    """The newest opset this onnxruntime loads (it refuses opsets newer than its release)."""
    for opset in range(NEWEST, 12, -1):
        g = rg.Graph()
        with g.as_default():
            x = rg.placeholder(rg.float32, [1], name="x")
            y = rg.identity(x + 1.0)
        try:
            ort.InferenceSession(export_onnx(g, [x], [y], opset=opset).SerializeToString(),
                                 providers=["CPUExecutionProvider"])  # fmt: skip
            return opset
        except Exception:
            continue
    raise AssertionError("onnxruntime loads no opset >= 13")


def run_onnx(model, feeds: dict, oracle: str) -> list[np.ndarray]:
    if oracle == "ort":
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def assert_same(got, want, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype.kind == "f":
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check(g, inputs, outputs, feeds, opset, session=None, oracles=None):
    """Export at `opset`, validate, and compare every oracle that loads it with rill."""
    model = export_onnx(g, inputs, outputs, opset=opset, session=session)
    onnx.checker.check_model(model, full_check=True)
    feed = dict(zip(inputs, feeds))
    if session is not None:
        want = session.run(list(outputs), feed)
    else:
        with Session(graph=g) as sess:
            want = sess.run(list(outputs), feed)
    if oracles is None:
        oracles = ["ort", "reference"] if opset <= ort_max_opset() else ["reference"]
    by_name = {vi.name: np.asarray(v) for vi, v in zip(model.graph.input, feeds)}
    for oracle in oracles:
        got = run_onnx(model, by_name, oracle)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{oracle} output {k} at opset {opset}")
    return model


def op_types(model) -> list[str]:
    return [n.op_type for n in model.graph.node]


def count(model, op_type: str) -> int:
    """Nodes of `op_type` in the model, subgraphs included."""
    total, stack = 0, [model.graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            total += n.op_type == op_type
            stack.extend(a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return total


@functools.cache
def demo():
    spec = importlib.util.spec_from_file_location("rill_demo", ROOT / "examples" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _initialized(g):
    sess = Session(graph=g)
    with g.as_default():
        sess.run(rg.global_variables_initializer())
    return sess


DIGITS = np.random.default_rng(3).uniform(0, 1, (5, 784)).astype(np.float32)


# -- Figure 1 MLP and the demo CNN -------------------------------------------------------------


@pytest.mark.no_roundtrip("the demo's training graphs are checked in tests/integration")
@pytest.mark.parametrize("opset", OPSETS)
def test_figure1_mlp(opset):
    g, m = demo().figure1()
    with _initialized(g) as sess:
        model = check(g, [m["x"]], [m["logits"]], [DIGITS], opset, session=sess)
        # x·W1 + b1 and h·W2 + b2 are one Gemm each, weights frozen into initializers.
        assert op_types(model) == ["Gemm", "Relu", "Gemm"]
        assert {t.name for t in model.graph.initializer} >= {"MatMul/ReadVariableOp"}
        labels = np.eye(10, dtype=np.float32)[np.arange(5)]
        check(g, [m["x"], m["y"]], [m["loss"], m["accuracy"]], [DIGITS, labels], opset,
              session=sess)  # fmt: skip


@pytest.mark.no_roundtrip("the demo's training graphs are checked in tests/integration")
@pytest.mark.parametrize("opset", OPSETS)
def test_demo_cnn_exports_with_one_transpose(opset):
    g, m = demo().small_cnn()
    with _initialized(g) as sess:
        model = check(g, [m["x"]], [m["logits"]], [DIGITS], opset, session=sess)
    # NHWC all the way in rill; in ONNX one layout change into NCHW (a free Reshape: the
    # image has one channel) and one Transpose back before the flatten.
    assert count(model, "Transpose") == 1
    assert op_types(model) == ["Reshape", "Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool",
                               "Transpose", "Reshape", "Gemm", "Relu", "Gemm"]  # fmt: skip


@pytest.mark.no_roundtrip("the demo's training graphs are checked in tests/integration")
def test_demo_cnn_after_training_steps():
    """Trained (not just initial) variables are what the model freezes."""
    g, m = demo().small_cnn()
    labels = np.eye(10, dtype=np.float32)[np.arange(5) % 10]
    with _initialized(g) as sess:
        for _ in range(3):
            sess.run(m["train"], {m["x"]: DIGITS, m["y"]: labels})
        check(g, [m["x"]], [m["logits"]], [DIGITS], ort_max_opset(), session=sess)


def _nchw_cnn():
    g = rg.Graph()
    with g.as_default():
        g.seed = 5
        x = rg.placeholder(rg.float32, [None, 3, 12, 12], name="x")
        h = rt.layers.conv2d(x, 8, 3, padding="same", activation=rg.relu,
                             data_format="channels_first", name="c1")  # fmt: skip
        h = rt.layers.max_pooling2d(h, 2, 2, data_format="channels_first", name="p1")
        h = rt.layers.conv2d(h, 4, 3, strides=2, padding="valid", data_format="channels_first",
                             name="c2")  # fmt: skip
        h = rt.layers.average_pooling2d(h, 2, 1, padding="same", data_format="channels_first")
        y = rg.identity(rg.reduce_mean(h, axis=[2, 3]), name="y")
    return g, x, y


@pytest.mark.no_roundtrip("layer graphs are checked in tests/train")
def test_nchw_cnn_exports_without_transposes():
    g, x, y = _nchw_cnn()
    images = np.random.default_rng(1).normal(size=(2, 3, 12, 12)).astype(np.float32)
    with _initialized(g) as sess:
        model = check(g, [x], [y], [images], ort_max_opset(), session=sess)
    assert count(model, "Transpose") == 0


@pytest.mark.no_roundtrip("layer graphs are checked in tests/train")
@pytest.mark.parametrize("opset", [13, 18])
def test_layout_propagates_through_bn_depthwise_pad_and_global_pool(opset):
    """NHWC conv → batch norm (inference) → relu6 → depthwise conv → pad → avg pool → concat
    with a max pool → LRN → softmax over channels → mean over H, W: all in NCHW, one layout
    change in; the [N, C] result needs none out."""
    rng = np.random.default_rng(2)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 9, 9, 3], name="x")
        w = rg.constant(rng.normal(size=(3, 3, 3, 6)).astype(np.float32))
        h = rg.conv2d(x, w, [1, 1, 1, 1], "SAME")
        stats = [rg.constant(rng.uniform(0.5, 1.5, 6).astype(np.float32)) for _ in range(4)]
        h = rg.fused_batch_norm(h, *stats[:2], mean=stats[2], variance=stats[3],
                                is_training=False)[0]  # fmt: skip
        h = rg.relu6(h * 2.0 + 0.5)
        dw = rg.constant(rng.normal(size=(3, 3, 6, 2)).astype(np.float32))
        h = rg.depthwise_conv2d_native(h, dw, [1, 2, 2, 1], "VALID", dilations=[1, 1, 1, 1])
        h = rg.pad(h, [[0, 0], [1, 1], [0, 2], [0, 0]])
        a = rg.avg_pool(h, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
        b = rg.max_pool(h, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
        h = rg.concat([a, b], axis=3)
        h = rg.lrn(h, depth_radius=2, alpha=0.1)
        h = rg.softmax(h)
        y = rg.identity(rg.reduce_mean(h, axis=[1, 2]), name="y")
    images = rng.normal(size=(2, 9, 9, 3)).astype(np.float32)
    model = check(g, [x], [y], [images], opset, oracles=["ort"])
    assert count(model, "Transpose") + count(model, "Reshape") <= 1
    assert "BatchNormalization" in op_types(model)


# -- control flow ------------------------------------------------------------------------------


def test_cond_becomes_if():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 2], name="x")
        p = rg.placeholder(rg.bool_, [], name="p")
        y, z = rg.cond(p, lambda: (rg.matmul(x, x) + 1.0, x), lambda: (x * 3.0, -x))
    for opset in OPSETS:
        for pv in (True, False):
            model = check(g, [x, p], [y, z], [np.eye(2, dtype=np.float32) + 1, np.array(pv)],
                          opset)  # fmt: skip
    assert op_types(model) == ["If"]


def test_nested_conds_and_pred_computed_in_graph():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3], name="x")
        s = rg.reduce_sum(x)
        y = rg.cond(s > 0, lambda: rg.cond(s > 5, lambda: x * 10.0, lambda: x + 1.0),
                    lambda: rg.abs(x))  # fmt: skip
    for v in ([1, 2, 3], [0.5, 0.5, 1], [-1, -2, 0]):
        model = check(g, [x], [y], [np.array(v, np.float32)], ort_max_opset())
    assert count(model, "If") == 2


def test_counting_while_loop_with_matmul_body():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 3], name="x")
        n = rg.placeholder(rg.int32, [], name="n")
        w = rg.constant(np.array([[0.5, 0.1, 0], [0.2, 0.3, 0.1], [0, 0.4, 0.2]], np.float32))
        i, acc = rg.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, rg.matmul(a, w) + x),
                               (0, x))  # fmt: skip
    feeds = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(4, np.int32)]
    for opset in OPSETS:
        model = check(g, [x, n], [i, acc], feeds, opset)
        check(g, [x, n], [i, acc], [feeds[0], np.array(0, np.int32)], opset)
    assert op_types(model) == ["Less", "Loop"]
    body = model.graph.node[1].attribute[0].g
    # invariants (w, x, n) are read from the enclosing graph, not carried
    assert len(body.input) == 4 and len(body.output) == 3


def test_loop_with_maximum_iterations_nested_loop_and_cond_inside():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3], name="x")

        def body(i, v):
            inner = rg.while_loop(lambda j, u: j < i, lambda j, u: (j + 1, u * 1.5), (0, v))[1]
            v = rg.cond(rg.reduce_sum(inner) > 20.0, lambda: inner * 0.1, lambda: inner + 1.0)
            return i + 1, v

        _, y = rg.while_loop(lambda i, v: i < 100, body, (0, x), maximum_iterations=5)
    for opset in (13, ort_max_opset(), NEWEST):
        model = check(g, [x], [y], [np.array([1, 2, 3], np.float32)], opset)
    assert count(model, "Loop") == 2 and count(model, "If") == 1


def test_loop_inside_cond_branch():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [], name="x")
        y = rg.cond(
            x > 0,
            lambda: rg.while_loop(lambda v: v < 100.0, lambda v: v * 3.0, x),
            lambda: x - 1.0,
        )
    for v in (2.0, -2.0):
        check(g, [x], [y], [np.float32(v)], ort_max_opset())


def test_loop_with_shape_changing_variable():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1], name="x")
        _, y = rg.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, rg.concat([v, v * 2.0], 0)),
                             (0, x), shape_invariants=(rg.TensorShape([]),
                                                       rg.TensorShape([None])))  # fmt: skip
    check(g, [x], [y], [np.array([1.0], np.float32)], ort_max_opset())


# -- errors ------------------------------------------------------------------------------------


def test_unsupported_op_names_the_op_and_its_source_line():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2], name="x")
        y = x + rg.random_shuffle(x, name="noise")
    with pytest.raises(rg.errors.UnimplementedError) as e:
        export_onnx(g, [x], [y])
    msg = str(e.value)
    assert "RandomShuffle op 'noise'" in msg and "test_export_models.py" in msg
    assert "no ONNX export for RandomShuffle" in msg


@pytest.mark.parametrize("opset", [12, NEWEST + 1])
def test_opset_outside_the_supported_range(opset):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2], name="x")
        y = rg.relu(x)
    with pytest.raises(ValueError, match=rf"opset {opset} is outside the supported range 13\.\."):
        export_onnx(g, [x], [y], opset=opset)


def test_variables_need_a_session_and_placeholders_must_be_fed():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 2], name="x")
        k = rg.placeholder(rg.float32, [], name="k")
        w = rg.Variable(np.ones((2, 2), np.float32), name="w")
        y = rg.matmul(x, w) * k
    with pytest.raises(rg.errors.UnimplementedError, match="variable 'w' must be frozen.*session="):
        export_onnx(g, [x, k], [y])
    with pytest.raises(rg.errors.UnimplementedError, match="Placeholder op 'k'.*not fed"):
        export_onnx(g, [x], [y], session=_initialized(g))


def test_a_tensor_inside_a_loop_is_not_an_output():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [], name="x")
        seen = []
        rg.while_loop(lambda v: v < 10.0, lambda v: seen.append(v * 2.0) or seen[-1], x)
    with pytest.raises(ValueError, match="inside a while loop"):
        export_onnx(g, [x], [seen[0]])


def test_model_metadata():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        rg.identity(rg.tanh(x), name="y")
    model = export_onnx(g, ["x"], ["y"], opset=17, name="tiny")  # tensors by name
    assert model.graph.name == "tiny" and model.producer_name == "rill"
    assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
    assert [i.name for i in model.graph.input] == ["x"]
    assert [o.name for o in model.graph.output] == ["y"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert not dims[0].HasField("dim_value") and dims[1].dim_value == 4


def test_graph_def_without_python_contexts_exports_the_same():
    """Control flow is recovered from the ops alone, so a GraphDef (as TensorFlow writes it)
    re-imported without rill's Python-side contexts exports to the same result."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 2], name="x")
        w = rg.constant(np.array([[0.5, -0.25], [0.125, 0.75]], np.float32), name="w")
        _, y = rg.while_loop(
            lambda i, v: i < 3,
            lambda i, v: (i + 1, rg.cond(rg.reduce_sum(v) > 0, lambda: rg.matmul(v, w),
                                         lambda: v - 1.0)),
            (0, x),
        )  # fmt: skip
        out = rg.identity(y, name="out")
    g2 = rg.Graph()
    with g2.as_default():
        rg.import_graph_def(g.as_graph_def(), name="")
    assert all(op._control_flow_context is None for op in g2.get_operations())
    feeds = [np.array([[1, 2], [3, -4]], np.float32)]
    a = check(g, [x], [out], feeds, ort_max_opset())
    b = check(g2, ["x:0"], ["out:0"], feeds, ort_max_opset())
    assert count(a, "Loop") == count(b, "Loop") == 1 and count(b, "If") == 1


def test_strided_slice_with_runtime_bounds_and_masks_exports():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3, 4], name="x")
        b = rg.placeholder(rg.int32, [2], name="b")
        y = rg.strided_slice(x, b, [0, 3], [1, 1], end_mask=1)
    feeds = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array([1, -3], np.int32)]
    with Session(graph=g) as sess:
        want = sess.run(y, dict(zip([x, b], feeds)))
    m = export_onnx(g, [x, b], [y])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = s.run(None, dict(zip(["x", "b"], feeds)))[0]
    np.testing.assert_array_equal(got, want)
    assert want.shape == (2, 2)


def test_branches_that_return_outer_values_and_unchanged_loop_variables():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2], name="x")
        p = rg.placeholder(rg.bool_, [], name="p")
        y = rg.cond(p, lambda: x, lambda: rg.constant([7.0, 8.0]))
        _, same, grown = rg.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, a, b + a),
                                       (0, x, y))  # fmt: skip
    for pv in (True, False):
        feeds = [np.array([1, 2], np.float32), np.array(pv)]
        for opset in (13, ort_max_opset(), NEWEST):
            check(g, [x, p], [y, same, grown], feeds, opset)


@pytest.mark.parametrize("training", [False, True])
def test_conds_in_sequence_on_one_predicate_stay_two_ifs(training):
    """A batch norm's cond and then a dropout-like cond on one is_training placeholder (every
    TF1 model with such a flag): the second reads the first's result, so they are two If
    nodes; a branch that reads a variable (the moving mean) reads it inside its If."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
        tr = rg.placeholder(rg.bool_, [], name="tr")
        moving = rg.Variable(np.array([0.5, -1.0, 2.0], np.float32), name="moving_mean")
        batch_mean = rg.reduce_mean(x, axis=0)
        mean = rg.cond(tr, lambda: batch_mean, lambda: moving.read_value())
        y = x - mean
        z = rg.cond(tr, lambda: y * 2.0, lambda: rg.identity(y))
        w = rg.cond(tr, lambda: rg.constant(1.0), lambda: rg.constant(3.0)) * z
    feeds = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(training)]
    m = check(g, [x, tr], [w], feeds, ort_max_opset(), session=_initialized(g))
    assert count(m, "If") == 3
