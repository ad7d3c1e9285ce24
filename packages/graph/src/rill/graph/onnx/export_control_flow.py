"""Conds → ONNX If, while loops → ONNX Loop.

A cond's branch ops become the If's then/else subgraphs; each of the cond's Merges becomes one
If output. Values from outside a branch (a cond's Switch of an outer tensor) are read from the
enclosing graph by name, as ONNX subgraphs may.

A while loop (Enter → Merge → condition → LoopCond → Switch → body → NextIteration) becomes

    cond0 = <condition on the entered values>              (in the enclosing graph)
    outs = Loop("", cond0, entered...)  body(i, c, vars...):
        next = <body on vars>;  c' = <condition on next>;  return c', next...

so the condition's ops are written twice, once before the loop and once at the end of the body:
ONNX checks the condition a body returns before the next iteration, TensorFlow checks it at the
start of each. Loop invariants (constant Enters) are outer-scope references.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from rill.graph.errors import UnimplementedError
from rill.graph.onnx.export_lstm_loop import try_emit_lstm_loop
from rill.graph.onnx.export_structure import is_loop_merge
from rill.graph.onnx.exporter import ExportContext, emit_scope
from rill.graph.onnx.registry import register_onnx_export

__all__ = ["emit_cond", "emit_loop"]


def _subgraph_outputs(sub: ExportContext, tensors, hint: str) -> list:
    """Identity copies of `tensors` as the subgraph's outputs (the clean-up pass folds them)."""
    infos = []
    sub.op = None
    for t in tensors:
        name = sub.model.fresh(f"{hint}/{ExportContext.tensor_hint(t)}")
        src = sub.value(t)
        sub._emit("Identity", [src], [name], name)
        _carry_sequence(sub, src, name)
        infos.append(sub.value_info(name, t, with_shape=False))
    return infos


def _carry_sequence(ctx: ExportContext, src: str, dst: str) -> None:
    """dst holds what src holds: a sequence when src is one."""
    elem = ctx.sequence_type(src)
    if elem is not None:
        ctx.mark_sequence(dst, elem)


def emit_cond(ctx: ExportContext, scope, pred, ops) -> None:
    """One If node for the cond(s) of `scope` switched on `pred`."""
    tree = ctx.model.tree
    merges = [op for op in ops if op in tree.merge_pred and tree.scope_of[op] is scope]
    branch_ops: dict[int, list] = {0: [], 1: []}
    for op in ops:
        if op in merges:
            continue
        s = tree.scope_of[op]
        while s.parent is not scope:
            s = s.parent
        branch_ops[s.key[1]].append(op)
    with_index = [m for m in merges if any(c in tree.needed for c in m.outputs[1].consumers())]
    cond_name = ctx.value(pred)
    graphs = {}
    for b in (1, 0):
        sub = ExportContext(ctx.model, parent=ctx)
        if branch_ops[b]:
            emit_scope(sub, tree.branch_scope(scope, pred, b), branch_ops[b])
        label = f"{merges[0].name}/{'then' if b else 'else'}"
        outs = _subgraph_outputs(sub, [m._inputs[tree.merge_pred[m][1][b]] for m in merges],
                                 label)  # fmt: skip
        for m in with_index:
            name = ctx.model.fresh(f"{label}/value_index")
            idx = tree.merge_pred[m][1][b]
            sub._emit("Constant", [], [name], name,
                      value=helper.make_tensor(name, TensorProto.INT32, [], [idx]))  # fmt: skip
            outs.append(helper.make_tensor_value_info(name, TensorProto.INT32, []))
        graphs[b] = helper.make_graph(sub.nodes, label, [], outs)
    ctx.op = merges[0]
    names = ctx.node("If", [cond_name],
                     [m.outputs[0] for m in merges] + [m.outputs[1] for m in with_index],
                     then_branch=graphs[1], else_branch=graphs[0])  # fmt: skip
    for name, info in zip(names, graphs[1].output):  # a branch's sequence makes a sequence
        if info.type.HasField("sequence_type"):
            ctx.mark_sequence(name, info.type.sequence_type.elem_type.tensor_type.elem_type)


def _backward(roots, inside: set, stop: set) -> list:
    seen: dict = {}
    stack = [t.op for t in roots]
    while stack:
        op = stack.pop()
        if op in seen or op in stop or op not in inside:
            continue
        seen[op] = None
        stack.extend(t.op for t in op._inputs)
    return list(seen)


def emit_loop(ctx: ExportContext, scope, frame: str, ops) -> None:
    """One Loop node for the while loop whose frame is `frame`."""
    tree = ctx.model.tree
    in_frame = [op for op in ops if tree.frame[op] == frame]
    enters = [op for op in ops if op.type == "Enter" and op.attrs["frame_name"] == frame]
    merges = [op for op in in_frame if is_loop_merge(op)]
    conds = [op for op in in_frame if op.type == "LoopCond"]
    if len(conds) != 1 or not merges:
        raise UnimplementedError(
            f"cannot export while loop {frame!r}: expected one LoopCond and loop Merges, found "
            f"{len(conds)} LoopCond and {len(merges)} Merges",
            op=(conds or merges or ops)[0],
        )
    loop_cond = conds[0]
    switches = {op._inputs[0].op: op for op in in_frame
                if op.type == "Switch" and op._inputs[1].op is loop_cond}  # fmt: skip
    exits = [op for op in ops if op.type == "Exit" and op._inputs[0].op in switches.values()]
    nexts, entries, next_ops = [], [], []
    for m in merges:
        (e,) = [t for t in m._inputs if t.op.type == "Enter"] or [None]
        (n,) = [t for t in m._inputs if t.op.type == "NextIteration"]
        if e is None:
            raise UnimplementedError(f"cannot export while loop {frame!r}: Merge {m.name} is not "
                                     "fed by an Enter", op=m)  # fmt: skip
        entries.append(e.op._inputs[0])
        nexts.append(n.op._inputs[0])
        next_ops.append(n.op)
    bound = {*merges, *switches.values(), loop_cond, *enters, *next_ops}
    inside = set(ops)
    body_ops = _backward(nexts, inside, bound)
    cond_ops = _backward([loop_cond._inputs[0]], inside, bound)
    if try_emit_lstm_loop(ctx, merges, switches, exits, entries, nexts, body_ops, cond_ops):
        return  # a plain dynamic_rnn of one LSTM cell: one ONNX LSTM node
    body_scope = tree.scope_of[merges[0]]
    invariants = [e for e in enters if e.attrs.get("is_constant")]

    # The condition on the entered values, before the loop.
    first = ExportContext(ctx.model, parent=ctx, nodes=ctx.nodes)
    for e in invariants:
        first.bind(e.outputs[0], *ctx.value_any(e._inputs[0]))
    for m, x in zip(merges, entries):
        first.bind(m.outputs[0], ctx.value(x))
    emit_scope(first, body_scope, cond_ops)
    cond0 = first.value(loop_cond._inputs[0])
    initial = [ctx.value(x) for x in entries]

    body = ExportContext(ctx.model, parent=ctx)
    it_name = ctx.model.fresh(f"{frame}/iteration")
    cond_in = ctx.model.fresh(f"{frame}/cond_in")
    inputs = [helper.make_tensor_value_info(it_name, TensorProto.INT64, []),
              helper.make_tensor_value_info(cond_in, TensorProto.BOOL, [])]  # fmt: skip
    for e in invariants:
        body.bind(e.outputs[0], *ctx.value_any(e._inputs[0]))
    for m, init in zip(merges, initial):
        name = ctx.model.fresh(ExportContext.tensor_hint(m.outputs[0]))
        body.bind(m.outputs[0], name)
        if m in switches:
            body.bind(switches[m].outputs[1], name)
        _carry_sequence(ctx, init, name)
        inputs.append(body.value_info(name, m.outputs[0]))
    emit_scope(body, body_scope, body_ops)
    next_names = [body.value(n) for n in nexts]
    again = ExportContext(ctx.model, parent=body, nodes=body.nodes)
    for m, n in zip(merges, next_names):
        again.bind(m.outputs[0], n)
    emit_scope(again, body_scope, cond_ops)
    again.bind(loop_cond.outputs[0], again.value(loop_cond._inputs[0]))
    body.op = None
    outs = _subgraph_outputs(again, [loop_cond.outputs[0]], frame)
    for n, name in zip(nexts, next_names):
        out = ctx.model.fresh(f"{frame}/next/{ExportContext.tensor_hint(n)}")
        body._emit("Identity", [name], [out], out)
        _carry_sequence(body, name, out)
        outs.append(body.value_info(out, n, with_shape=False))
    graph = helper.make_graph(body.nodes, f"{frame}/body", inputs, outs)
    ctx.op = loop_cond
    results = ctx.node("Loop", ["", cond0, *initial], len(merges), body=graph)
    for init, r in zip(initial, results):
        _carry_sequence(ctx, init, r)
    result_of = {switches[m]: r for m, r in zip(merges, results) if m in switches}
    for x in exits:
        ctx.bind(x.outputs[0], result_of[x._inputs[0].op])


@register_onnx_export("Switch")
def switch(ctx, op):
    """A cond's Switch: both outputs are the switched value (the If picks the branch)."""
    value = ctx.value_any(op._inputs[0])
    ctx.bind(op.outputs[0], *value)
    ctx.bind(op.outputs[1], *value)


@register_onnx_export("Enter", "Exit", "Merge", "NextIteration", "LoopCond")
def structural(ctx, op):
    """Written by emit_cond / emit_loop; reaching this means the structure was not recognised."""
    ctx.unsupported("it is not part of a while loop or cond in the form while_loop/cond build")
