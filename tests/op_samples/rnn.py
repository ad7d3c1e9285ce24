"""Samples for rill.graph.ops.rnn_ops: the fused LSTM cell (float32 only, as in TensorFlow,
so its gradient is checked with float32's tolerance)."""

from __future__ import annotations

import numpy as np

from op_samples import rand, sample
from rill.graph.ops.rnn_ops import lstm_block_cell

B, I, N = 3, 2, 4
f32 = np.float32


def _inputs():
    return [rand(B, I, dtype=f32), rand(B, N, dtype=f32), rand(B, N, dtype=f32),
            rand(I + N, 4 * N, dtype=f32), rand(N, dtype=f32), rand(N, dtype=f32),
            rand(N, dtype=f32), rand(4 * N, dtype=f32)]  # fmt: skip


def _cell(peephole):
    def build(*args):
        out = lstm_block_cell(*args, forget_bias=1.0, use_peephole=peephole)
        return [out[1], out[6]]  # the state and output (the gradient flows from these)

    return build


sample("LSTMBlockCell", _inputs(), _cell(False), grad_inputs=[0, 1, 2, 3, 7], tol=5e-3,
       delta=1e-2)  # fmt: skip
sample("LSTMBlockCell", _inputs(), _cell(True), name="peephole", tol=5e-3, delta=1e-2)
