"""The loops dynamic_rnn, map_fn, scan and foldl build (TensorArrays) and TensorList loops,
exported to ONNX Loop over sequences, run in onnxruntime and matched with rill."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rill.graph as rg
import rill.train as rt
from rill.exec import Session
from rill.graph.errors import UnimplementedError
from rill.graph.functional_ops import foldl, map_fn, scan
from rill.graph.onnx import export_onnx

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)


def run_both(g, inputs, outputs, feeds, session=None, opset=None):
    if session is None:
        session = Session(graph=g)
    want = session.run(outputs, dict(zip(inputs, feeds)))
    m = export_onnx(g, inputs, outputs, session=session, opset=opset)
    onnx.checker.check_model(m, full_check=True)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = s.run(None, {i.name: v for i, v in zip(s.get_inputs(), feeds)})
    for a, b in zip(got, want):
        assert a.shape == np.asarray(b).shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return m


def _types(m):
    out = set()
    for n in m.graph.node:
        out.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= {b.op_type for b in a.g.node}
    return out


FEED = RNG.normal(size=(6, 3)).astype(np.float32)


@pytest.mark.parametrize("name,build", [
    ("scan", lambda x: scan(lambda a, e: a * 0.9 + e, x)),
    ("scan_reverse", lambda x: scan(lambda a, e: a * 0.5 + rg.tanh(e), x, reverse=True)),
    ("scan_init_tuple", lambda x: scan(lambda a, e: (a[0] + e, a[1] * e), x,
                                       initializer=(rg.zeros([3]), rg.ones([3])))[1]),
    ("map_fn", lambda x: map_fn(lambda e: rg.reduce_sum(e * e) + 1.0, x)),
    ("map_fn_tuple", lambda x: map_fn(lambda e: (e[0] * 2.0, e[1] - 1.0), (x, x),
                                      dtype=(rg.float32, rg.float32))[0]),
    ("foldl", lambda x: foldl(lambda a, e: a * 0.5 + e, x)),
    ("foldl_init", lambda x: foldl(lambda a, e: a + rg.reduce_sum(e), x,
                                   initializer=rg.constant(0.0))),
])  # fmt: skip
def test_functional_loops_export(name, build):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [6, 3], name="x")
        y = build(x)
    m = run_both(g, [x], [y], [FEED])
    assert "Loop" in _types(m)


def test_unknown_length_map_fn_exports():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
        y = map_fn(lambda e: e * 3.0, x)
    m = run_both(g, [x], [y], [FEED])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = s.run(None, {"x": FEED[:2]})
    np.testing.assert_allclose(got, FEED[:2] * 3.0, rtol=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "basic_lstm", "gru", "rnn"])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_dynamic_rnn_exports(cell, with_lengths):
    g = rg.Graph()
    with g.as_default():
        rg.set_random_seed(3)
        x = rg.placeholder(rg.float32, [None, 5, 4], name="x")
        lengths = rg.placeholder(rg.int32, [None], name="lengths") if with_lengths else None
        c = {"lstm": lambda: rt.LSTMCell(6), "basic_lstm": lambda: rt.BasicLSTMCell(6),
             "gru": lambda: rt.GRUCell(6), "rnn": lambda: rt.BasicRNNCell(6)}[cell]()  # fmt: skip
        outputs, state = rt.dynamic_rnn(c, x, sequence_length=lengths, dtype=rg.float32)
        final = state.h if hasattr(state, "h") else state
        init = rg.global_variables_initializer()
    sess = Session(graph=g)
    sess.run(init)
    feeds = [RNG.normal(size=(3, 5, 4)).astype(np.float32)]
    ins = [x]
    if with_lengths:
        feeds.append(np.array([5, 2, 4], np.int32))
        ins.append(lengths)
    m = run_both(g, ins, [outputs, final], feeds, session=sess)
    if cell in ("lstm", "basic_lstm") and not with_lengths:
        # The fused-LSTM rewrite (test_export_lstm_rewrite): one ONNX LSTM node.
        assert "LSTM" in _types(m) and "Loop" not in _types(m)
    else:
        assert {"Loop", "SequenceInsert"} <= _types(m)


def test_bidirectional_dynamic_rnn_exports():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 4, 3], name="x")
        lengths = rg.placeholder(rg.int32, [2], name="lengths")
        (fw, bw), _ = rt.bidirectional_dynamic_rnn(rt.LSTMCell(5), rt.GRUCell(5), x,
                                                   sequence_length=lengths, dtype=rg.float32)  # fmt: skip
        init = rg.global_variables_initializer()
    sess = Session(graph=g)
    sess.run(init)
    run_both(g, [x, lengths], [fw, bw],
             [RNG.normal(size=(2, 4, 3)).astype(np.float32), np.array([4, 2], np.int32)],
             session=sess)  # fmt: skip


def test_tensor_list_loop_exports():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [6, 3], name="x")
        lst = rg.tensor_list_from_tensor(x, element_shape=[3])
        out = rg.empty_tensor_list(element_shape=[3], element_dtype=rg.float32)

        def body(i, out):
            item = rg.tensor_list_get_item(lst, i, element_shape=[3], element_dtype=rg.float32)
            return i + 1, rg.tensor_list_push_back(out, item * 2.0)

        _, out = rg.while_loop(lambda i, _o: i < 6, body, [rg.constant(0), out])
        y = rg.tensor_list_stack(out, element_dtype=rg.float32, element_shape=[3])
        n = rg.tensor_list_length(out)
    m = run_both(g, [x], [y, n], [FEED])
    assert "SequenceInsert" in _types(m)


def test_sequences_need_opset_14():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [6, 3], name="x")
        y = map_fn(lambda e: e * 2.0, x)
    with pytest.raises(UnimplementedError, match="opset >= 14"):
        export_onnx(g, [x], [y], opset=13)
    run_both(g, [x], [y], [FEED], opset=14)


def test_stacked_time_major_dynamic_rnn_with_initial_state_exports():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 2, 3], name="x")  # time major, unknown length
        cell = rt.MultiRNNCell([rt.LSTMCell(4), rt.GRUCell(5)])
        h0 = rg.placeholder(rg.float32, [2, 5], name="h0")
        state0 = (cell.zero_state(2, rg.float32)[0], h0)
        outputs, state = rt.dynamic_rnn(cell, x, initial_state=state0, time_major=True)
        init = rg.global_variables_initializer()
    sess = Session(graph=g)
    sess.run(init)
    feeds = [RNG.normal(size=(7, 2, 3)).astype(np.float32),
             RNG.normal(size=(2, 5)).astype(np.float32)]  # fmt: skip
    m = run_both(g, [x, h0], [outputs, state[0].c, state[1]], feeds, session=sess)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(outputs, {x: feeds[0][:3], h0: feeds[1]})
    (got, *_) = s.run(None, {"x": feeds[0][:3], "h0": feeds[1]})  # a shorter sequence
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_cond_that_returns_a_list_exports_as_an_if_of_sequences():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [6, 3], name="x")
        flag = rg.placeholder(rg.bool_, [], name="flag")
        lst = rg.tensor_list_from_tensor(x, element_shape=[3])
        more = rg.cond(flag, lambda: rg.tensor_list_push_back(lst, x[0] * 10.0), lambda: lst)
        y = rg.tensor_list_stack(more, element_dtype=rg.float32, element_shape=[3])
    for v in (True, False):
        m = run_both(g, [x, flag], [y], [FEED, np.array(v)])
    assert "If" in _types(m)
