"""The fused-LSTM export rewrite: a dynamic_rnn of one LSTM cell exports as one ONNX LSTM node
(no Loop), runs in onnxruntime and matches rill; loops it cannot express keep the Loop export."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rill.graph as rg
import rill.train as rt
from rill.exec import Session
from rill.graph.onnx import export_onnx

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(20)


def _types(m):
    out = set()
    for n in m.graph.node:
        out.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= {b.op_type for b in a.g.node}
    return out


def run_both(g, inputs, outputs, feeds, init):
    sess = Session(graph=g)
    sess.run(init)
    want = sess.run(outputs, dict(zip(inputs, feeds)))
    m = export_onnx(g, inputs, outputs, session=sess)
    onnx.checker.check_model(m, full_check=True)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = s.run(None, {i.name: v for i, v in zip(s.get_inputs(), feeds)})
    for a, b in zip(got, want):
        assert a.shape == np.asarray(b).shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return _types(m)


CELLS = {
    "lstm": lambda: rt.LSTMCell(6),
    "basic_lstm": lambda: rt.BasicLSTMCell(6, forget_bias=0.5),
    "peepholes": lambda: rt.LSTMCell(6, use_peepholes=True, forget_bias=2.0),
}


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("time_major", [False, True])
def test_a_dynamic_rnn_lstm_exports_as_one_lstm_node(cell, time_major):
    g = rg.Graph()
    with g.as_default():
        rg.set_random_seed(5)
        shape = [7, None, 4] if time_major else [None, 7, 4]
        x = rg.placeholder(rg.float32, shape, name="x")
        outputs, state = rt.dynamic_rnn(CELLS[cell](), x, dtype=rg.float32,
                                        time_major=time_major)  # fmt: skip
        init = rg.global_variables_initializer()
    feed = RNG.normal(size=(7, 3, 4) if time_major else (3, 7, 4)).astype(np.float32)
    types = run_both(g, [x], [outputs, state.c, state.h], [feed], init)
    assert "LSTM" in types and "Loop" not in types and "SequenceInsert" not in types


def test_an_initial_state_and_a_bias_that_are_computed_export():
    g = rg.Graph()
    with g.as_default():
        rg.set_random_seed(6)
        x = rg.placeholder(rg.float32, [None, 5, 3], name="x")
        c0 = rg.placeholder(rg.float32, [None, 4], name="c0")
        h0 = rg.placeholder(rg.float32, [None, 4], name="h0")
        state0 = rt.LSTMStateTuple(c0, h0)
        outputs, state = rt.dynamic_rnn(rt.LSTMCell(4), x, initial_state=state0)
        init = rg.global_variables_initializer()
    feeds = [RNG.normal(size=(2, 5, 3)).astype(np.float32),
             RNG.normal(size=(2, 4)).astype(np.float32),
             RNG.normal(size=(2, 4)).astype(np.float32)]  # fmt: skip
    types = run_both(g, [x, c0, h0], [outputs, state.h], feeds, init)
    assert "LSTM" in types and "Loop" not in types


@pytest.mark.parametrize("why", ["lengths", "cell_clip", "gru"])
def test_loops_the_lstm_node_cannot_express_keep_the_loop(why):
    g = rg.Graph()
    with g.as_default():
        rg.set_random_seed(7)
        x = rg.placeholder(rg.float32, [None, 5, 3], name="x")
        lengths = rg.placeholder(rg.int32, [None], name="lengths") if why == "lengths" else None
        cell = {"lengths": lambda: rt.LSTMCell(4), "cell_clip": lambda: rt.LSTMCell(4, cell_clip=0.5),
                "gru": lambda: rt.GRUCell(4)}[why]()  # fmt: skip
        outputs, _ = rt.dynamic_rnn(cell, x, sequence_length=lengths, dtype=rg.float32)
        init = rg.global_variables_initializer()
    feeds = [RNG.normal(size=(3, 5, 3)).astype(np.float32) * 3]
    ins = [x]
    if lengths is not None:
        feeds.append(np.array([5, 2, 4], np.int32))
        ins.append(lengths)
    types = run_both(g, ins, [outputs], feeds, init)
    assert "Loop" in types and "LSTM" not in types
