"""The fused LSTM step behind BasicLSTMCell and LSTMCell (rill.train.rnn_cell): where the
LSTMBlockCell op computes what a cell's ops compute, the cell builds that one op per step."""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor
from rill.graph.ops import array_ops, math_ops
from rill.graph.ops.rnn_ops import lstm_block_cell

# BasicLSTMCell and LSTMCell build one LSTMBlockCell op per step where it computes what they do
# (tanh activation, float32 or float16, no cell clipping): one GEMM and one fused pass forward
# and backward instead of a dozen elementwise ops.
_FUSED_LSTM = True


def set_fused_lstm(on: bool) -> bool:
    """Turns the fused LSTM step (the LSTMBlockCell op) on or off for cells built from now on;
    returns the old setting. Off, the cells build TensorFlow's unfused ops (MatMul, BiasAdd,
    Split, Sigmoid, Tanh, ...), e.g. for graphs a converter must read op by op."""
    global _FUSED_LSTM
    old, _FUSED_LSTM = _FUSED_LSTM, bool(on)
    return old


def fusable(activation, inputs) -> bool:
    return (
        _FUSED_LSTM
        and activation is math_ops.tanh
        and inputs.dtype in (dtypes.float32, dtypes.float16)
        and inputs.shape.rank == 2
    )


def fused_step(inputs, c, h, kernel, bias, forget_bias, peepholes=None):
    n = c.shape.with_rank(2)[1]
    use_peephole = peepholes is not None
    if peepholes is None:
        zeros = array_ops.zeros([n] if n is not None else array_ops.shape(c)[1:2], inputs.dtype)
        peepholes = (zeros, zeros, zeros)
    wci, wcf, wco = peepholes
    outs = lstm_block_cell(
        inputs, c, h, convert_to_tensor(kernel), wci, wcf, wco, convert_to_tensor(bias),
        forget_bias=forget_bias, cell_clip=-1.0, use_peephole=use_peephole,
    )  # fmt: skip
    return outs[1], outs[6]
