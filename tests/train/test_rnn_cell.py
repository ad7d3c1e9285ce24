"""RNN cells (rill.train.rnn_cell): one step of each cell against a numpy transcription of its
equations, TF1's variable names and shapes, reuse, zero states, MultiRNNCell, DropoutWrapper."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.train import init_ops, rnn_cell
from rill.train.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DropoutWrapper,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    RNNCell,
)
from rill.train.variable_scope import get_variable, variable_scope

B, D = 3, 2  # batch and input depth of every step test


# -- numpy transcriptions of the cells' equations ----------------------------------------------


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_basic_rnn(x, h, kernel, bias, act=np.tanh):
    return act(np.concatenate([x, h], 1) @ kernel + bias)


def np_basic_lstm(x, c, h, kernel, bias, forget_bias=1.0):
    z = np.concatenate([x, h], 1) @ kernel + bias
    i, j, f, o = np.split(z, 4, axis=1)
    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    return new_c, np.tanh(new_c) * sigmoid(o)


def np_lstm(x, c, m, w, forget_bias=1.0, peep=False, cell_clip=None, proj=False,
            proj_clip=None):  # fmt: skip
    z = np.concatenate([x, m], 1) @ w["kernel"] + w["bias"]
    i, j, f, o = np.split(z, 4, axis=1)
    if peep:
        new_c = sigmoid(f + forget_bias + w["w_f_diag"] * c) * c + sigmoid(
            i + w["w_i_diag"] * c
        ) * np.tanh(j)
    else:
        new_c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(j)
    if cell_clip is not None:
        new_c = np.clip(new_c, -cell_clip, cell_clip)
    og = sigmoid(o + w["w_o_diag"] * new_c) if peep else sigmoid(o)
    new_m = og * np.tanh(new_c)
    if proj:
        new_m = new_m @ w["projection/kernel"]
        if proj_clip is not None:
            new_m = np.clip(new_m, -proj_clip, proj_clip)
    return new_c, new_m


def np_gru(x, h, w):
    gates = sigmoid(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"])
    r, u = np.split(gates, 2, axis=1)
    cand = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    return u * h + (1 - u) * cand


# -- helpers -------------------------------------------------------------------------------------


def _names(cell, prefix=""):
    return sorted(v.op.name[len(prefix) :] for v in cell.variables)


def _load_random(sess, cell, rng, scale=0.8):
    """Loads uniform values into every variable of `cell`; returns {name within cell: value}."""
    values = {}
    for v in cell.variables:
        value = rng.uniform(-scale, scale, v.shape.as_list())
        v.load(value, sess)
        values[v.op.name.split("/", 1)[1] if "/" in v.op.name else v.op.name] = value
    return values


def _placeholders(state_size, dtype=rg.float64):
    x = rg.placeholder(dtype, [B, D], name="x")
    state = rg.nest.map_structure(lambda n: rg.placeholder(dtype, [B, n]), state_size)
    return x, state


# -- each cell against its equations -----------------------------------------------------------


@pytest.mark.parametrize("activation", [None, "relu"])
def test_basic_rnn_cell_step(graph, activation):
    cell = BasicRNNCell(4, activation=activation)
    x, h = _placeholders(cell.state_size)
    out, new_h = cell(x, h)
    assert out is new_h
    assert out.shape.as_list() == [B, 4]
    assert _names(cell) == ["basic_rnn_cell/bias", "basic_rnn_cell/kernel"]
    assert cell.variables[0].shape.as_list() == [D + 4, 4]
    rng = np.random.default_rng(0)
    xv, hv = rng.standard_normal((B, D)), rng.standard_normal((B, 4))
    with Session() as s:
        w = _load_random(s, cell, rng)
        got = s.run(out, {x: xv, h: hv})
    act = np.tanh if activation is None else (lambda z: np.maximum(z, 0))
    np.testing.assert_allclose(got, np_basic_rnn(xv, hv, w["kernel"], w["bias"], act), 1e-12)


@pytest.mark.parametrize("forget_bias", [1.0, 0.3])
def test_basic_lstm_cell_step(graph, forget_bias):
    cell = BasicLSTMCell(5, forget_bias=forget_bias)
    assert cell.state_size == LSTMStateTuple(5, 5) and cell.output_size == 5
    x, state = _placeholders(cell.state_size)
    out, new_state = cell(x, state)
    assert isinstance(new_state, LSTMStateTuple) and new_state.h is out
    assert new_state.dtype is rg.float64
    assert _names(cell) == ["basic_lstm_cell/bias", "basic_lstm_cell/kernel"]
    assert [v.shape.as_list() for v in cell.variables] == [[D + 5, 20], [20]]
    rng = np.random.default_rng(1)
    xv, cv, hv = (rng.standard_normal(s) for s in ((B, D), (B, 5), (B, 5)))
    with Session() as s:
        w = _load_random(s, cell, rng)
        got_c, got_h = s.run(new_state, {x: xv, state.c: cv, state.h: hv})
    want_c, want_h = np_basic_lstm(xv, cv, hv, w["kernel"], w["bias"], forget_bias)
    np.testing.assert_allclose(got_c, want_c, 1e-12)
    np.testing.assert_allclose(got_h, want_h, 1e-12)


def test_basic_lstm_cell_concatenated_state(graph):
    with pytest.warns(UserWarning, match="state_is_tuple=False"):
        cell = BasicLSTMCell(3, state_is_tuple=False)
    assert cell.state_size == 6
    x, state = _placeholders(cell.state_size)
    out, new_state = cell(x, state)
    assert new_state.shape.as_list() == [B, 6]
    rng = np.random.default_rng(2)
    xv, sv = rng.standard_normal((B, D)), rng.standard_normal((B, 6))
    with Session() as s:
        w = _load_random(s, cell, rng)
        got_out, got_state = s.run([out, new_state], {x: xv, state: sv})
    want_c, want_h = np_basic_lstm(xv, sv[:, :3], sv[:, 3:], w["kernel"], w["bias"])
    np.testing.assert_allclose(got_state, np.concatenate([want_c, want_h], 1), 1e-12)
    np.testing.assert_allclose(got_out, want_h, 1e-12)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"use_peepholes": True},
        {"cell_clip": 0.2, "forget_bias": 0.4},
        {"num_proj": 3},
        {"use_peepholes": True, "cell_clip": 0.3, "num_proj": 2, "proj_clip": 0.1},
    ],
    ids=["plain", "peepholes", "cell_clip", "projection", "everything"],
)
def test_lstm_cell_step(graph, kw):
    cell = LSTMCell(4, **kw)
    h_size = kw.get("num_proj", 4)
    assert cell.state_size == LSTMStateTuple(4, h_size) and cell.output_size == h_size
    x, state = _placeholders(cell.state_size)
    out, new_state = cell(x, state)
    assert out.shape.as_list() == [B, h_size]
    want_names = ["lstm_cell/bias", "lstm_cell/kernel"]
    if kw.get("use_peepholes"):
        want_names += ["lstm_cell/w_f_diag", "lstm_cell/w_i_diag", "lstm_cell/w_o_diag"]
    if "num_proj" in kw:
        want_names.append("lstm_cell/projection/kernel")
    assert _names(cell) == sorted(want_names)
    shapes = {v.op.name: v.shape.as_list() for v in cell.variables}
    assert shapes["lstm_cell/kernel"] == [D + h_size, 16]
    if "num_proj" in kw:
        assert shapes["lstm_cell/projection/kernel"] == [4, h_size]
    rng = np.random.default_rng(3)
    xv, cv, mv = (rng.standard_normal(s) for s in ((B, D), (B, 4), (B, h_size)))
    with Session() as s:
        w = _load_random(s, cell, rng, scale=1.5)
        got_c, got_m = s.run(new_state, {x: xv, state.c: cv, state.h: mv})
    want_c, want_m = np_lstm(
        xv, cv, mv, w, forget_bias=kw.get("forget_bias", 1.0), peep=kw.get("use_peepholes", False),
        cell_clip=kw.get("cell_clip"), proj="num_proj" in kw, proj_clip=kw.get("proj_clip"),
    )  # fmt: skip
    np.testing.assert_allclose(got_c, want_c, 1e-12)
    np.testing.assert_allclose(got_m, want_m, 1e-12)
    if "cell_clip" in kw:
        assert np.abs(got_c).max() <= kw["cell_clip"]


def test_lstm_cell_initializer_and_concatenated_state(graph):
    with pytest.warns(UserWarning):
        cell = LSTMCell(3, num_proj=2, state_is_tuple=False,
                        initializer=init_ops.constant_initializer(0.5))  # fmt: skip
    assert cell.state_size == 5
    x, state = _placeholders(cell.state_size)
    out, new_state = cell(x, state)
    assert new_state.shape.as_list() == [B, 5]
    rng = np.random.default_rng(4)
    xv, sv = rng.standard_normal((B, D)), rng.standard_normal((B, 5))
    with Session() as s:
        s.run([v.initializer for v in cell.variables])
        values = {v.op.name: s.run(v) for v in cell.variables}
        got = s.run(new_state, {x: xv, state: sv})
    assert np.all(values["lstm_cell/kernel"] == 0.5)
    assert np.all(values["lstm_cell/projection/kernel"] == 0.5)
    assert np.all(values["lstm_cell/bias"] == 0.0)  # the bias ignores `initializer`
    w = {k.split("/", 1)[1]: v for k, v in values.items()}
    want_c, want_m = np_lstm(xv, sv[:, :3], sv[:, 3:], w, proj=True)
    np.testing.assert_allclose(got, np.concatenate([want_c, want_m], 1), 1e-12)


def test_gru_cell_step_and_default_biases(graph):
    cell = GRUCell(4)
    x, h = _placeholders(cell.state_size)
    out, new_h = cell(x, h)
    assert out is new_h
    assert _names(cell) == [
        "gru_cell/candidate/bias", "gru_cell/candidate/kernel",
        "gru_cell/gates/bias", "gru_cell/gates/kernel",
    ]  # fmt: skip
    shapes = {v.op.name: v.shape.as_list() for v in cell.variables}
    assert shapes["gru_cell/gates/kernel"] == [D + 4, 8]
    assert shapes["gru_cell/candidate/kernel"] == [D + 4, 4]
    rng = np.random.default_rng(5)
    xv, hv = rng.standard_normal((B, D)), rng.standard_normal((B, 4))
    with Session() as s:
        s.run([v.initializer for v in cell.variables])
        # TF's defaults: the gates start open (bias 1), the candidate bias at 0.
        assert np.all(s.run(cell.variables[1]) == 1.0)
        assert np.all(s.run(cell.variables[3]) == 0.0)
        w = _load_random(s, cell, rng)
        got = s.run(out, {x: xv, h: hv})
    np.testing.assert_allclose(got, np_gru(xv, hv, w), 1e-12)


def test_gru_cell_initializers(graph):
    cell = GRUCell(2, kernel_initializer=init_ops.ones_initializer(),
                   bias_initializer=init_ops.constant_initializer(0.25))  # fmt: skip
    x, h = _placeholders(cell.state_size)
    cell(x, h)
    with Session() as s:
        s.run([v.initializer for v in cell.variables])
        for v in cell.variables:
            want = 1.0 if v.op.name.endswith("kernel") else 0.25
            assert np.all(s.run(v) == want), v.op.name


def test_one_matmul_per_gated_step(graph):
    """The gates share one kernel: a step of an LSTM is one MatMul (GRU: gates + candidate)."""
    for cell, n_matmul in ((BasicLSTMCell(8), 1), (LSTMCell(8), 1), (GRUCell(8), 2),
                           (LSTMCell(8, num_proj=4), 2)):  # fmt: skip
        x, state = _placeholders(cell.state_size)
        before = len(graph.get_operations())
        cell(x, state)
        new_ops = graph.get_operations()[before:]
        assert sum(op.type == "MatMul" for op in new_ops) == n_matmul, cell


# -- variables, scopes and reuse -----------------------------------------------------------------


def test_variables_follow_the_enclosing_scope_and_are_reused(graph):
    cell = BasicLSTMCell(3)
    x, state = _placeholders(cell.state_size)
    with variable_scope("rnn"):
        out1, _ = cell(x, state)
    n_vars = len(graph.get_collection("variables"))
    out2, _ = cell(x, state)  # a second call, anywhere, reuses the weights
    assert len(graph.get_collection("variables")) == n_vars
    assert [v.name for v in cell.trainable_variables] == [
        "rnn/basic_lstm_cell/kernel:0", "rnn/basic_lstm_cell/bias:0",
    ]  # fmt: skip
    assert out1.op.name.startswith("rnn/basic_lstm_cell/")
    with Session() as s:
        s.run([v.initializer for v in cell.variables])
        feed = {x: np.ones((B, D)), state.c: np.zeros((B, 3)), state.h: np.zeros((B, 3))}
        a, b = s.run([out1, out2], feed)
    np.testing.assert_array_equal(a, b)


def test_two_cells_get_unique_scopes_and_scope_argument(graph):
    c1, c2 = GRUCell(2), GRUCell(2, name="decoder")
    x, h = _placeholders(2)
    c1(x, h)
    c2(x, h)
    c3 = GRUCell(2)
    c3(x, h, scope="custom")
    assert _names(c1)[0] == "gru_cell/candidate/bias"
    assert _names(c2)[0] == "decoder/candidate/bias"
    assert _names(c3)[0] == "custom/candidate/bias"


def test_reuse_flag_shares_variables_between_cells(graph):
    x, h = _placeholders(3)
    with variable_scope("shared"):
        a = BasicRNNCell(3)
        a(x, h)
    with variable_scope("shared", reuse=True):
        b = BasicRNNCell(3, reuse=True)
        b(x, h)
    assert [v.name for v in a.variables] == [v.name for v in b.variables]
    assert all(va is vb for va, vb in zip(a.variables, b.variables))


class ScaledSumCell(RNNCell):
    """A user cell in TF1's style: variables made with get_variable inside call."""

    @property
    def state_size(self):
        return 2

    @property
    def output_size(self):
        return 2

    def call(self, inputs, state):
        w = get_variable("w", [D + 2, 2], dtype=inputs.dtype)
        s = get_variable("s", [], dtype=inputs.dtype, trainable=False,
                         initializer=init_ops.ones_initializer())  # fmt: skip
        out = rg.matmul(rg.concat([inputs, state], 1), w) * s
        return out, out


def test_user_cell_variables_land_in_a_class_named_scope(graph):
    cell = ScaledSumCell()
    x, h = _placeholders(2)
    with variable_scope("mine"):
        cell(x, h)
    cell(x, h)  # reused, from any scope
    assert len(graph.get_collection("variables")) == 2
    assert [v.name for v in cell.trainable_weights] == ["mine/scaled_sum_cell/w:0"]
    assert [v.name for v in cell.non_trainable_weights] == ["mine/scaled_sum_cell/s:0"]


def test_variable_scope_initializer_reaches_the_kernel(graph):
    x, h = _placeholders(2)
    with variable_scope("v", initializer=init_ops.constant_initializer(0.125)):
        cell = BasicRNNCell(2)
        cell(x, h)
    with Session() as s:
        s.run([v.initializer for v in cell.variables])
        assert np.all(s.run(cell.variables[0]) == 0.125)
        assert np.all(s.run(cell.variables[1]) == 0.0)


# -- zero states ---------------------------------------------------------------------------------


def test_zero_state_structure_shapes_and_names(graph):
    cell = MultiRNNCell([BasicLSTMCell(3), GRUCell(2), LSTMCell(4, num_proj=1)])
    z = cell.zero_state(5, rg.float32)
    assert isinstance(z, tuple) and isinstance(z[0], LSTMStateTuple)
    assert [t.shape.as_list() for t in rg.nest.flatten(z)] == [[5, 3], [5, 3], [5, 2], [5, 4],
                                                               [5, 1]]  # fmt: skip
    assert all(t.dtype is rg.float32 for t in rg.nest.flatten(z))
    assert z[0].c.name.startswith("MultiRNNCellZeroState/BasicLSTMCellZeroState/")
    batch = rg.placeholder(rg.int32, [], name="batch")
    zt = BasicRNNCell(3).zero_state(batch, rg.float64)
    assert zt.shape.as_list() == [None, 3]
    with Session() as s:
        got = s.run(z, {})
        assert s.run(zt, {batch: 4}).shape == (4, 3)
    assert all(np.all(a == 0) for a in rg.nest.flatten(got))
    assert got[2].h.shape == (5, 1)


def test_get_initial_state_from_inputs(graph):
    x = rg.placeholder(rg.float64, [None, 6])
    z = GRUCell(3).get_initial_state(inputs=x)
    assert z.dtype is rg.float64 and z.shape.as_list() == [None, 3]
    with Session() as s:
        assert s.run(z, {x: np.zeros((7, 6))}).shape == (7, 3)
    with pytest.raises(ValueError, match="batch_size and dtype"):
        GRUCell(3).get_initial_state()


# -- MultiRNNCell ----------------------------------------------------------------------------------


def test_multi_rnn_cell_step_and_names(graph):
    cells = [GRUCell(3), BasicLSTMCell(4)]
    cell = MultiRNNCell(cells)
    assert cell.state_size == (3, LSTMStateTuple(4, 4)) and cell.output_size == 4
    x, state = _placeholders(cell.state_size)
    with variable_scope("rnn"):
        out, new_state = cell(x, state)
    assert [v.op.name for v in cell.variables] == [
        "rnn/multi_rnn_cell/cell_0/gru_cell/gates/kernel",
        "rnn/multi_rnn_cell/cell_0/gru_cell/gates/bias",
        "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/kernel",
        "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/bias",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias",
    ]
    rng = np.random.default_rng(6)
    xv, h0, c1, h1 = (rng.standard_normal(s) for s in ((B, D), (B, 3), (B, 4), (B, 4)))
    with Session() as s:
        w0 = _load_random(s, cells[0], rng)
        w1 = _load_random(s, cells[1], rng)
        got = s.run([out, new_state], {x: xv, state[0]: h0, state[1].c: c1, state[1].h: h1})
    w0 = {k.split("gru_cell/")[1]: v for k, v in w0.items()}
    w1 = {k.split("basic_lstm_cell/")[1]: v for k, v in w1.items()}
    want_h0 = np_gru(xv, h0, w0)
    want_c1, want_h1 = np_basic_lstm(want_h0, c1, h1, w1["kernel"], w1["bias"])
    np.testing.assert_allclose(got[0], want_h1, 1e-12)
    np.testing.assert_allclose(got[1][0], want_h0, 1e-12)
    np.testing.assert_allclose(got[1][1].c, want_c1, 1e-12)


def test_multi_rnn_cell_concatenated_state(graph):
    cell = MultiRNNCell([BasicRNNCell(2), BasicRNNCell(3)], state_is_tuple=False)
    assert cell.state_size == 5
    x, state = _placeholders(5)
    out, new_state = cell(x, state)
    assert new_state.shape.as_list() == [B, 5] and out.shape.as_list() == [B, 3]
    rng = np.random.default_rng(7)
    xv, sv = rng.standard_normal((B, D)), rng.standard_normal((B, 5))
    with Session() as s:
        w = [_load_random(s, c, rng) for c in cell._cells]
        got = s.run(new_state, {x: xv, state: sv})
    k = [{n.rsplit("/", 1)[1]: v for n, v in wi.items()} for wi in w]
    h0 = np_basic_rnn(xv, sv[:, :2], k[0]["kernel"], k[0]["bias"])
    h1 = np_basic_rnn(h0, sv[:, 2:], k[1]["kernel"], k[1]["bias"])
    np.testing.assert_allclose(got, np.concatenate([h0, h1], 1), 1e-12)
    with pytest.raises(ValueError, match="state_is_tuple"):
        MultiRNNCell([BasicLSTMCell(2)], state_is_tuple=False)
    with pytest.raises(ValueError, match="at least one cell"):
        MultiRNNCell([])


# -- DropoutWrapper ----------------------------------------------------------------------------


def test_dropout_wrapper_keep_prob_one_adds_no_ops(graph):
    cell = DropoutWrapper(BasicLSTMCell(3))
    x, state = _placeholders(cell.state_size)
    before = len(graph.get_operations())
    cell(x, state)
    new_ops = [op for op in graph.get_operations()[before:] if "Initializer" not in op.name]
    assert not [op.name for op in new_ops if op.type == "RandomUniform"]
    assert [v.op.name for v in cell.variables] == ["basic_lstm_cell/kernel",
                                                   "basic_lstm_cell/bias"]  # fmt: skip


def test_dropout_wrapper_drops_output_and_h_but_not_c(graph):
    inner = BasicLSTMCell(64)
    cell = DropoutWrapper(inner, output_keep_prob=0.5, state_keep_prob=0.25, seed=3)
    x, state = _placeholders(cell.state_size)
    out, new_state = cell(x, state)
    ref_out, ref_state = inner(x, state)  # the same weights, no dropout
    rng = np.random.default_rng(8)
    feed = {x: rng.standard_normal((B, D)), state.c: rng.standard_normal((B, 64)),
            state.h: rng.standard_normal((B, 64))}  # fmt: skip
    with Session() as s:
        _load_random(s, inner, rng)
        got_out, got_state, want_out, want_state = s.run([out, new_state, ref_out, ref_state],
                                                         feed)  # fmt: skip
    np.testing.assert_allclose(got_state.c, want_state.c, 1e-12)  # c is never dropped
    for got, want, keep in ((got_out, want_out, 0.5), (got_state.h, want_state.h, 0.25)):
        kept = got != 0
        np.testing.assert_allclose(got[kept], want[kept] / keep, 1e-12)
        assert 0.05 < kept.mean() < 0.95


def test_dropout_wrapper_rejects_bad_probabilities(graph):
    with pytest.raises(ValueError, match="input_keep_prob must be between 0 and 1"):
        DropoutWrapper(GRUCell(2), input_keep_prob=1.5)
    with pytest.raises(TypeError, match="not an RNNCell"):
        DropoutWrapper(object())


# -- errors ----------------------------------------------------------------------------------------


def test_errors(graph):
    with pytest.raises(ValueError, match="num_units must be a positive integer"):
        BasicLSTMCell(0)
    with pytest.raises(ValueError, match="unknown activation"):
        BasicRNNCell(2, activation="swish!")
    cell = GRUCell(2)
    with pytest.raises(ValueError, match=r"inputs.shape\[-1\] to be known"):
        cell(rg.placeholder(rg.float32, [2, None]), rg.placeholder(rg.float32, [2, 2]))
    with pytest.raises(ValueError, match="floating point"):
        BasicRNNCell(2)(rg.placeholder(rg.int32, [2, 3]), rg.placeholder(rg.int32, [2, 2]))
    with pytest.raises(NotImplementedError, match="num_unit_shards"):
        LSTMCell(2, num_unit_shards=2)
    with pytest.raises(TypeError, match="'state_size' property is missing"):
        rnn_cell.assert_like_rnncell("cell", lambda x, s: (x, s))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BasicLSTMCell(2)  # the default (tuple) state does not warn


def test_residual_and_device_wrappers():
    import numpy as np

    import rill.graph as rg
    from rill.exec import Session
    from rill.train import rnn_cell

    with rg.Graph().as_default():
        x = rg.constant(np.ones((2, 3), np.float32))
        inner = rnn_cell.BasicRNNCell(3)
        res = rnn_cell.ResidualWrapper(inner)
        state = res.zero_state(2, rg.float32)
        out, new_state = res(x, state)
        dev = rnn_cell.DeviceWrapper(rnn_cell.BasicRNNCell(3, name="other"), "/cpu:0")
        d_out, _ = dev(x, dev.zero_state(2, rg.float32))
        assert d_out.op.device == "/device:CPU:0"
        s = Session()
        s.run(rg.global_variables_initializer())
        o, st = s.run([out, new_state])
        np.testing.assert_allclose(o, st + 1.0, rtol=1e-6)  # BasicRNNCell's output is its state
