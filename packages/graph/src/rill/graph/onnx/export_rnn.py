"""ONNX export of the fused LSTM cell (LSTMBlockCell) as its formulas in ONNX operators.

A time step of rill's fused cell (rill.graph.ops.rnn_ops) becomes Concat + MatMul + Add for the
four gate pre-activations (in the order i, ci, f, o), Slice per gate, Sigmoid / Tanh, the
optional peepholes and cell clip, and the state update — so a dynamic_rnn of LSTM cells exports
inside its ONNX Loop as it did before the cell was fused.
"""

from __future__ import annotations

import numpy as np

from rill.graph.onnx.registry import register_onnx_export


@register_onnx_export("LSTMBlockCell")
def lstm_block_cell(ctx, op):
    """i = σ(xh·w_i + b_i [+ wci·cs_prev]); ci = tanh(xh·w_ci + b_ci);
    f = σ(xh·w_f + b_f + forget_bias [+ wcf·cs_prev]); cs = ci·i + cs_prev·f (clipped);
    o = σ(xh·w_o + b_o [+ wco·cs]); co = tanh(cs); h = co·o."""
    x, cs_prev, h_prev, w, wci, wcf, wco, b = op._inputs
    i_out, cs_out, f_out, o_out, ci_out, co_out, h_out = op.outputs
    n = cs_prev.shape[1] if cs_prev.shape.rank == 2 else None
    if n is None and w.shape.rank == 2 and w.shape[1] is not None:
        n = w.shape[1] // 4
    if n is None:
        ctx.unsupported("LSTMBlockCell needs its cell size known at export time")
    dt = x.dtype.np
    peephole = bool(op.attrs["use_peephole"])
    clip = float(op.attrs["cell_clip"])

    xh = ctx.node("Concat", [ctx.value(x), ctx.value(h_prev)], axis=1)
    gates = ctx.node("Add", [ctx.node("MatMul", [xh, ctx.value(w)]), ctx.value(b)])
    axes = ctx.initializer(np.array([1], np.int64))

    def gate(k):
        starts = ctx.initializer(np.array([k * n], np.int64))
        ends = ctx.initializer(np.array([(k + 1) * n], np.int64))
        return ctx.node("Slice", [gates, starts, ends, axes])

    pre_i, pre_ci, pre_f, pre_o = (gate(k) for k in range(4))
    pre_f = ctx.node("Add", [pre_f, ctx.initializer(np.array(op.attrs["forget_bias"], dt))])
    cs_prev_name = ctx.value(cs_prev)
    if peephole:
        pre_i = ctx.node("Add", [pre_i, ctx.node("Mul", [cs_prev_name, ctx.value(wci)])])
        pre_f = ctx.node("Add", [pre_f, ctx.node("Mul", [cs_prev_name, ctx.value(wcf)])])
    i = ctx.node("Sigmoid", [pre_i], i_out)
    ci = ctx.node("Tanh", [pre_ci], ci_out)
    f = ctx.node("Sigmoid", [pre_f], f_out)
    cs = ctx.node(
        "Add", [ctx.node("Mul", [ci, i]), ctx.node("Mul", [cs_prev_name, f])],
        None if clip > 0 else cs_out,
    )  # fmt: skip
    if clip > 0:
        lo = ctx.initializer(np.array(-clip, dt))
        hi = ctx.initializer(np.array(clip, dt))
        cs = ctx.node("Clip", [cs, lo, hi], cs_out)
    if peephole:
        pre_o = ctx.node("Add", [pre_o, ctx.node("Mul", [cs, ctx.value(wco)])])
    o = ctx.node("Sigmoid", [pre_o], o_out)
    co = ctx.node("Tanh", [cs], co_out)
    ctx.node("Mul", [co, o], h_out)
