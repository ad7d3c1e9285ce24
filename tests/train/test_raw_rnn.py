"""raw_rnn: a loop_fn feeding the inputs of a sequence gives what dynamic_rnn gives, finished
entries keep their state and emit zeros, and gradients flow through it."""

import numpy as np

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session
from rill.train import rnn_cell
from rill.train.rnn import dynamic_rnn
from rill.train.rnn_raw import raw_rnn
from rill.train.variable_scope import variable_scope


def test_raw_rnn_matches_dynamic_rnn_with_sequence_lengths():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3, 2)).astype(np.float32)  # time-major [time, batch, depth]
    lengths = np.array([5, 2, 3], np.int32)
    with rg.Graph().as_default():
        rg.set_random_seed(1)
        inputs = rg.constant(x)
        seq = rg.constant(lengths)
        cell = rnn_cell.LSTMCell(4)
        inputs_ta = rg.TensorArray(rg.float32, size=5).unstack(inputs)

        def loop_fn(time, cell_output, cell_state, loop_state):
            emit = cell_output
            next_state = cell.zero_state(3, rg.float32) if cell_output is None else cell_state
            finished = rg.greater_equal(time, seq)
            all_done = rg.reduce_all(finished)
            next_input = rg.cond(all_done, lambda: rg.zeros([3, 2]),
                                 lambda: inputs_ta.read(rg.minimum(time, 4)))  # fmt: skip
            return finished, next_input, next_state, emit, loop_state

        with variable_scope("rnn") as vs:
            emit_ta, final_state, final_loop = raw_rnn(cell, loop_fn, scope=vs)
            outputs = emit_ta.stack()
        with variable_scope("rnn", reuse=True):
            ref_out, ref_state = dynamic_rnn(cell, inputs, sequence_length=seq, time_major=True,
                                             dtype=rg.float32)  # fmt: skip
        assert final_loop is None
        (grad,) = gradients(rg.reduce_sum(outputs), [rg.trainable_variables()[0]])
        s = Session()
        s.run(rg.global_variables_initializer())
        got, want, st, want_st, gv = s.run([outputs, ref_out, final_state, ref_state, grad])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(st.h, want_st.h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(st.c, want_st.c, rtol=1e-5, atol=1e-6)
    assert (got[2:, 1] == 0).all() and np.abs(gv).sum() > 0
