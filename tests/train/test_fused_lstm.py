"""BasicLSTMCell and LSTMCell build the fused LSTMBlockCell op where it computes what they do,
and give what their unfused ops give (values and gradients, through dynamic_rnn)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff import gradients
from rill.exec import Session
from rill.train import rnn_cell

T, B, D, N = 6, 4, 3, 5


def _build(make_cell, fused: bool, dtype=rg.float32):
    old = rnn_cell.set_fused_lstm(fused)
    try:
        g = rg.Graph()
        with g.as_default():
            g.seed = 7
            x = rg.placeholder(dtype, [T, B, D], name="x")
            cell = make_cell()
            out, state = rt.dynamic_rnn(cell, x, dtype=dtype, time_major=True)
            loss = rg.reduce_sum(rg.square(out)) + rg.reduce_sum(rg.nest.flatten(state)[0])
            grads = gradients(loss, [x, *cell.trainable_variables])
            init = rg.global_variables_initializer()
    finally:
        rnn_cell.set_fused_lstm(old)
    types = collections.Counter(op.type for op in g.get_operations())
    return g, x, [out, *grads], init, types


CELLS = {
    "basic": lambda: rt.BasicLSTMCell(N, forget_bias=0.5),
    "lstm": lambda: rt.LSTMCell(N),
    "peepholes": lambda: rt.LSTMCell(N, use_peepholes=True),
    "concatenated": lambda: rt.BasicLSTMCell(N, state_is_tuple=False),
}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_fused_cells_match_the_unfused_ops(name):
    xv = np.random.default_rng(0).standard_normal((T, B, D)).astype(np.float32)
    results = []
    for fused in (True, False):
        g, x, fetches, init, types = _build(CELLS[name], fused)
        assert (types["LSTMBlockCell"] > 0) == fused
        if fused:
            assert types["LSTMBlockCellGrad"] > 0 and types["Sigmoid"] == 0
        with Session(graph=g) as s:
            s.run(init)
            results.append(s.run(fetches, {x: xv}))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "make_cell",
    [
        lambda: rt.LSTMCell(N, cell_clip=1.0),
        lambda: rt.LSTMCell(N, num_proj=2),
        lambda: rt.BasicLSTMCell(N, activation="relu"),
    ],  # fmt: skip
)
def test_cells_the_op_does_not_cover_stay_unfused(make_cell):
    *_, types = _build(make_cell, True)
    assert types["LSTMBlockCell"] == 0


def test_float64_stays_unfused():
    *_, types = _build(CELLS["basic"], True, rg.float64)
    assert types["LSTMBlockCell"] == 0
