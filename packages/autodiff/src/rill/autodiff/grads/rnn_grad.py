"""Gradient of rill.graph.ops.rnn_ops: the fused LSTM cell.

As TensorFlow's: LSTMBlockCellGrad gives the gradients of cs_prev, the four gate pre-activations
(dicfo) and the peepholes; x and h_prev get dicfo · wᵀ (one product each, with their rows of w), w gets [x, h_prev]ᵀ · dicfo and b the
sum of dicfo over the batch. Only the gradients reaching cs and h flow back (the gates i, f, o,
ci, co are returned for the gradient's use, as in TensorFlow).
"""

from __future__ import annotations

from rill.autodiff.registry import register_gradient
from rill.graph.graph import get_default_graph
from rill.graph.ops import array_ops, reshape_ops, slice_ops


def _op(op_type, inputs, attrs=None, num=1):
    op = get_default_graph().create_op(op_type, inputs, attrs or {}, name=op_type)
    return op.outputs if num > 1 else op.outputs[0]


@register_gradient("LSTMBlockCell")
def _lstm_block_cell_grad(op, *grads):
    """LSTMBlockCellGrad for the state and peepholes, two products for x, h_prev and w, a sum
    for b"""
    x, cs_prev, h_prev, w, wci, wcf, wco, b = op.inputs
    i, cs, f, o, ci, co, h = op.outputs
    cs_grad = grads[1] if grads[1] is not None else array_ops.zeros_like(cs)
    h_grad = grads[6] if grads[6] is not None else array_ops.zeros_like(h)
    cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad = _op(
        "LSTMBlockCellGrad",
        [x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad],
        {"use_peephole": op.attrs["use_peephole"]},
        num=5,
    )
    xh = reshape_ops.concat([x, h_prev], 1)
    # x and h_prev each get their own product with their rows of w (views, no copy): inside an
    # RNN's gradient loop only h_prev's is needed at each step, and x's — unused where x is
    # no variable's function (a placeholder's sequence) — is pruned instead of computed.
    # A known input size makes each a single Slice with constant bounds (inside a loop, no
    # shape arithmetic at every step).
    n_in = x.shape.with_rank(2)[1]
    if n_in is not None:
        w_x = slice_ops.slice(w, [0, 0], [n_in, -1])
        w_h = slice_ops.slice(w, [n_in, 0], [-1, -1])
    else:
        input_size = array_ops.shape(x)[1:2]
        w_x = slice_ops.slice(w, [0, 0], reshape_ops.concat([input_size, [-1]], 0))
        w_h = slice_ops.slice(w, reshape_ops.concat([input_size, [0]], 0), [-1, -1])
    x_grad = _op("MatMul", [dicfo, w_x], {"transpose_a": False, "transpose_b": True})
    h_prev_grad = _op("MatMul", [dicfo, w_h], {"transpose_a": False, "transpose_b": True})
    w_grad = _op("MatMul", [xh, dicfo], {"transpose_a": True, "transpose_b": False})
    b_grad = _op("BiasAddGrad", [dicfo])
    return x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad
