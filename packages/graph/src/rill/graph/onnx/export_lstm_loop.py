"""The fused-LSTM rewrite: a `dynamic_rnn` loop of one LSTM cell exports as one ONNX LSTM node.

The while loop `dynamic_rnn` builds around an LSTMBlockCell (rill.train's LSTMCell and
BasicLSTMCell) reads step t of a TensorArray unstacked from the time-major input, runs the cell on
(x_t, c, h), writes h into an output TensorArray and carries (c, h). When the loop is exactly
that — float32, no sequence lengths (their Selects), no other ops in the body, a cell without a
cell clip (ONNX's `clip` bounds the gate inputs, not the cell state) — it becomes

    Y, Y_h, Y_c = LSTM(X, W, R, B, "", h0, c0[, P])     (hidden_size H, forward)

with W, R, B and P built by ONNX ops from the cell's [in + H, 4H] kernel and [4H] bias (rill's
gate order i, c̃, f, o becomes ONNX's i, o, f, c; forget_bias is added to f's bias), so the
weights stay whatever the exported graph computes for them. The loop's exits are bound to the
LSTM's results: the output array's flow to the per-step sequence of Y (which the array's stack
reads as before), the final c and h to Y_c and Y_h. Anything else keeps the Loop export.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rill.graph.onnx.exporter import onnx_dtype

__all__ = ["try_emit_lstm_loop"]

# The op types a plain dynamic_rnn LSTM body holds (besides the loop's own plumbing).
_BODY_TYPES = frozenset({"Identity", "AddV2", "TensorArrayReadV3", "LSTMBlockCell",
                         "TensorArrayWriteV3", "Enter", "Const"})  # fmt: skip


def _through_identity(t):
    while t.op.type == "Identity":
        t = t.op._inputs[0]
    return t


def _merge_of(t, switches):
    """The loop Merge whose Switch's true output (through Identities) t is, else None."""
    t = _through_identity(t)
    if t.op.type != "Switch" or t.value_index != 1:
        return None
    m = t.op._inputs[0].op
    return m if switches.get(m) is t.op else None


def _outer(t):
    """The tensor an Enter enters (t itself when it is no Enter's output)."""
    return t.op._inputs[0] if t.op.type == "Enter" else t


def _const_int(ctx, t, value) -> bool:
    v = ctx.const(t)
    return v is not None and np.asarray(v).shape == () and int(v) == value


def try_emit_lstm_loop(ctx, merges, switches, exits, entries, nexts, body_ops, cond_ops) -> bool:
    """Writes the loop as one ONNX LSTM when it is a plain LSTM dynamic_rnn; False otherwise
    (nothing is written then)."""
    if ctx.opset < 14 or any(op.type not in _BODY_TYPES for op in body_ops):
        return False
    cells = [op for op in body_ops if op.type == "LSTMBlockCell"]
    reads = [op for op in body_ops if op.type == "TensorArrayReadV3"]
    writes = [op for op in body_ops if op.type == "TensorArrayWriteV3"]
    if len(cells) != 1 or len(reads) != 1 or len(writes) != 1:
        return False
    cell, read, write = cells[0], reads[0], writes[0]
    if float(cell.attrs["cell_clip"]) > 0:
        return False
    x_t, cs_prev, h_prev, w, wci, wcf, wco, b = cell._inputs
    if any(t.op.type not in ("Enter", "Const") for t in (w, wci, wcf, wco, b)):
        return False  # the weights must be loop invariants
    next_of = dict(zip(merges, nexts))
    entry_of = dict(zip(merges, entries))
    m_c, m_h = _merge_of(cs_prev, switches), _merge_of(h_prev, switches)
    counter = _merge_of(read._inputs[1], switches)
    m_flow = _merge_of(write._inputs[3], switches)
    if None in (m_c, m_h, counter, m_flow) or len({m_c, m_h, counter, m_flow}) != 4:
        return False
    if next_of[m_c] is not cell.outputs[1] or next_of[m_h] is not cell.outputs[6]:
        return False
    if x_t is not read.outputs[0] or write._inputs[2] is not cell.outputs[6]:
        return False
    if (
        next_of[m_flow] is not write.outputs[0]
        or _merge_of(write._inputs[1], switches) is not counter
    ):
        return False
    # The counter starts at 0 and steps by 1; every other carried value is a plain counter too
    # (time) or passes through unchanged.
    if not _is_step(ctx, counter, next_of, entry_of, switches):
        return False
    steps = {counter}
    for m in merges:
        if m in (m_c, m_h, counter, m_flow):
            continue
        if _is_step(ctx, m, next_of, entry_of, switches):
            steps.add(m)
        elif _merge_of(next_of[m], switches) is not m:
            return False
    # The condition compares step counters with bounds from outside (dynamic_rnn's: the time
    # steps of the input, which the unstacked array holds).
    for op in cond_ops:
        if op.type == "Less" and _through_identity(op._inputs[0]).op in steps:
            continue
        if op.type not in ("LogicalAnd", "Enter", "Identity"):
            return False
    # The input array: unstacked (scattered over range(T)) from the time-major input, read at t.
    scatter = _outer(read._inputs[2]).op
    if scatter.type != "TensorArrayScatterV3" or scatter._inputs[0] is not _outer(read._inputs[0]):
        return False
    rng = scatter._inputs[1].op
    if rng.type != "Range" or not (_const_int(ctx, rng._inputs[0], 0)
                                   and _const_int(ctx, rng._inputs[2], 1)):  # fmt: skip
        return False
    x = scatter._inputs[2]
    if x.dtype.np != np.float32:
        return False  # onnxruntime's CPU LSTM takes float32 only
    if x.shape.rank != 3 or w.shape.rank != 2 or w.shape[1] is None:
        return False
    hidden = w.shape[1] // 4
    if x.shape[2] is None or w.shape[0] is not None and w.shape[0] != x.shape[2] + hidden:
        return False
    _emit(ctx, cell, x, hidden, [_outer(t) for t in (w, b, wci, wcf, wco)], m_c, m_h, m_flow,
          steps, switches, exits, entry_of)  # fmt: skip
    return True


def _is_step(ctx, m, next_of, entry_of, switches) -> bool:
    """Whether loop value m starts at 0 and its next value is m + 1."""
    nxt = next_of[m].op
    if nxt.type != "AddV2" or not _const_int(ctx, entry_of[m], 0):
        return False
    a, c = nxt._inputs
    if _merge_of(a, switches) is not m:
        a, c = c, a
    return _merge_of(a, switches) is m and _const_int(ctx, c, 1)


def _emit(ctx, cell, x, hidden, weights, m_c, m_h, m_flow, steps, switches, exits, entry_of):
    w, b, wci, wcf, wco = weights
    ctx.op = cell
    dt = x.dtype.np
    n_in = x.shape[2]
    four = ctx.initializer(np.array([hidden] * 4, np.int64))
    axis0 = ctx.initializer(np.array([0], np.int64))
    # Kernel [in + H, 4H] in rill's gate order (i, c̃, f, o) → W [1, 4H, in], R [1, 4H, H] in
    # ONNX's (i, o, f, c).
    gi, gc, gf, go = ctx.node("Split", [ctx.value(w), four], 4, axis=1)
    kernel = ctx.node("Transpose", [ctx.node("Concat", [gi, go, gf, gc], axis=1)], perm=[1, 0])
    split_in = ctx.initializer(np.array([n_in, hidden], np.int64))
    w_part, r_part = ctx.node("Split", [kernel, split_in], 2, axis=1)
    bi, bc, bf, bo = ctx.node("Split", [ctx.value(b), four], 4, axis=0)
    bf = ctx.node("Add", [bf, ctx.initializer(np.array(cell.attrs["forget_bias"], dt))])
    zeros = ctx.initializer(np.zeros(4 * hidden, dt))
    bias = ctx.node("Concat", [bi, bo, bf, bc, zeros], axis=0)
    inputs = [ctx.value(x)]
    for v in (w_part, r_part, bias):
        inputs.append(ctx.node("Unsqueeze", [v, axis0]))
    inputs.append("")  # sequence_lens: every sequence is T long
    for t in (entry_of[m_h], entry_of[m_c]):
        inputs.append(ctx.node("Unsqueeze", [ctx.value(t), axis0]))
    if cell.attrs["use_peephole"]:
        p = ctx.node("Concat", [ctx.value(wci), ctx.value(wco), ctx.value(wcf)], axis=0)
        inputs.append(ctx.node("Unsqueeze", [p, axis0]))
    y, y_h, y_c = ctx.node("LSTM", inputs, 3, hidden_size=int(hidden), direction="forward")
    one = ctx.initializer(np.array([1], np.int64))
    seq = ctx.node("SplitToSequence", [ctx.node("Squeeze", [y, one])], axis=0, keepdims=0)
    ctx.mark_sequence(seq, onnx_dtype(x.dtype))
    result = {m_h: ctx.node("Squeeze", [y_h, axis0]), m_c: ctx.node("Squeeze", [y_c, axis0]),
              m_flow: seq}  # fmt: skip
    length = None
    for m, e in entry_of.items():
        if m in result:
            continue
        if m not in steps:
            result[m] = ctx.value(e)  # passed through unchanged
            continue
        if length is None:  # a counter from 0 by 1 ends at T
            length = ctx.node("Gather", [ctx.node("Shape", [ctx.value(x)]),
                                         ctx.initializer(np.array(0, np.int64))])  # fmt: skip
        to = TensorProto.INT64 if m.outputs[0].dtype.np == np.int64 else TensorProto.INT32
        result[m] = ctx.node("Cast", [length], to=to)
    merge_of_switch = {s: m for m, s in switches.items()}
    for e in exits:
        ctx.bind(e.outputs[0], result[merge_of_switch[e._inputs[0].op]])
