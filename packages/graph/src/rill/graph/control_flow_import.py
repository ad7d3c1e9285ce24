"""While-loop contexts for imported graphs, so that gradients can go through their loops.

A GraphDef holds a loop only as its primitives (Enter, Merge, Switch, LoopCond, NextIteration,
Exit); TensorFlow-1 loops imported from one, and the functional While ops that rill lowers on
import, come without the WhileContext that rill's while_loop records and that rill.autodiff's
loop gradients need. `restore_while_contexts` rebuilds it from the structure: each op's frame
follows from its inputs (an Enter starts its frame_name inside its input's frame, an Exit goes
back out), and per frame the Enters, the Merges they feed, the LoopCond, the Switches on it and
their Exits give the context's loop variables, pivot and exits.

A cond inside a loop body (two-way: TensorFlow-1's cond, TensorFlow's and rill's lowering of
If) gets a CondContext per branch: a branch is what lies between the Switch outputs it hangs
from and its Merge input. A Switch whose two outputs feed the two branches (TensorFlow's
lowering) is split in two, one per branch. (A Merge's gradient routes by its first input's
branch, so Merges with the true branch first, as the lowerings make them, work too.) Frames
with nested conds, N-way merges (Case) or ops that already have a context are left
alone.
"""

from __future__ import annotations

from rill.graph.control_flow import CondContext, WhileContext
from rill.graph.graph import Graph, Operation, Tensor

__all__ = ["restore_while_contexts"]

_ROOT = None


def _frames(graph: Graph, ops: list[Operation]) -> dict[Operation, tuple | None]:
    """The frame of each op: None (outside any loop) or (parent frame, frame_name)."""
    frame: dict[Operation, tuple | None] = {}
    pending = {op: [t.op for t in op._inputs if not (op.type in ("Merge", "RefMerge") and
                    t.op.type in ("NextIteration", "RefNextIteration"))]  # fmt: skip
               + list(op._control_inputs) for op in ops}  # fmt: skip
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    indeg = {}
    for op, srcs in pending.items():
        srcs[:] = [x for x in srcs if x in users]
        indeg[op] = len(srcs)
        for x in srcs:
            users[x].append(op)
    order = [op for op in ops if not indeg[op]]  # Kahn's order over the forward edges
    for op in order:
        for u in users[op]:
            indeg[u] -= 1
            if not indeg[u]:
                order.append(u)
    for op in order:
        srcs = pending[op]
        base = frame.get(srcs[0], _ROOT) if srcs else _ROOT
        for s in srcs:  # prefer a data input's frame; any input inside a loop will do
            f = frame.get(s, _ROOT)
            if f is not None:
                base = f
                break
        if op.type in ("Enter", "RefEnter"):
            frame[op] = (frame.get(op._inputs[0].op, _ROOT), op.attrs["frame_name"])
        elif op.type in ("Exit", "RefExit"):
            f = frame.get(op._inputs[0].op, _ROOT)
            frame[op] = f[0] if f is not None else _ROOT
        else:
            frame[op] = base
    return frame


def restore_while_contexts(graph: Graph) -> int:
    """Gives the ops of the graph's context-less loops their WhileContext; returns how many
    loops got one. Safe to call again (ops with a context are left alone)."""
    ops = graph.get_operations()
    if not any(op.type in ("Enter", "RefEnter") and op._control_flow_context is None
               for op in ops):  # fmt: skip
        return 0
    frame_of = _frames(graph, ops)
    members: dict[tuple, list[Operation]] = {}
    for op, f in frame_of.items():
        if f is not None:
            members.setdefault(f, []).append(op)
    exits_of: dict[tuple, list[Operation]] = {}
    for op in ops:
        if op.type in ("Exit", "RefExit") and op._inputs:
            f = frame_of.get(op._inputs[0].op)
            if f is not None:
                exits_of.setdefault(f, []).append(op)
    contexts: dict[tuple, WhileContext] = {}
    # outer frames first, so an inner context can name its outer one
    for f in sorted(members, key=_depth):
        body = members[f]
        if any(op._control_flow_context is not None for op in body):
            continue
        ctx = _context(graph, f, body, exits_of.get(f, []))
        if ctx is None:
            continue
        parent = f[0]
        ctx.outer = contexts.get(parent) if parent is not None else None
        if parent is not None and ctx.outer is None:
            continue  # its outer loop got no context: leave this one alone too
        for op in exits_of.get(f, []):
            op._control_flow_context = ctx
        contexts[f] = ctx
    return len(contexts)


def _depth(f) -> int:
    d = 0
    while f is not None:
        d, f = d + 1, f[0]
    return d


def _context(graph: Graph, f, body: list[Operation], exits: list[Operation]):
    name = f[1]
    name = name.decode() if isinstance(name, bytes) else str(name)
    conds = [op for op in body if op.type == "LoopCond"]
    if len(conds) != 1:
        return None
    pivot = conds[0].outputs[0]
    enters = [op for op in body if op.type in ("Enter", "RefEnter")]
    loop_enters = [e.outputs[0] for e in enters if not e.attrs.get("is_constant")]
    merges, switches = [], []
    for e in loop_enters:
        m = next((c for c in e.consumers() if c.type in ("Merge", "RefMerge")), None)
        if m is None:
            return None
        sw = next((c for c in m.outputs[0].consumers()
                   if c.type in ("Switch", "RefSwitch") and c._inputs[1] is pivot), None)  # fmt: skip
        if sw is None:
            return None
        merges.append(m.outputs[0])
        switches.append(sw)
    if not merges:
        return None
    loop_merge_ops = {m.op for m in merges}
    conds = _conds(body, set(switches), loop_merge_ops)
    if conds is None:
        return None
    exit_of = {x._inputs[0].op: x for x in exits}
    loop_exits = [exit_of[sw].outputs[0] for sw in switches if sw in exit_of]
    saved = graph._control_flow_context
    graph._control_flow_context = None
    try:
        ctx = WhileContext(graph, name, int(enters[0].attrs.get("parallel_iterations") or 10),
                           True, False)  # fmt: skip
    finally:
        graph._control_flow_context = saved
    ctx.enters = enters
    ctx.loop_enters = loop_enters
    ctx.merges = merges
    ctx.loop_exits = loop_exits
    ctx.pivot = pivot
    ctx.pivot_for_pred = merges[0].op
    first_true = [c for c in switches[0].outputs[1].consumers() if c.type == "Identity"]
    ctx.pivot_for_body = first_true[0] if first_true else switches[0]
    for op in body:
        op._control_flow_context = ctx
    _make_cond_contexts(graph, ctx, conds, body)
    return ctx


_SWITCH = ("Switch", "RefSwitch")
_MERGE = ("Merge", "RefMerge")


def _branch_of(t: Tensor, stop_switches: set, loop_merges: set):
    """The ops between tensor t (a Merge input) and the cond Switch outputs it hangs from:
    (ops, {(switch, output index)}), or None for what this module does not rebuild."""
    ops, hang, seen, todo = [], set(), set(), [(t.op, t.value_index)]
    while todo:
        op, idx = todo.pop()
        if op.type in _SWITCH and op not in stop_switches:
            hang.add((op, idx))
            continue
        if (
            op in seen
            or op in stop_switches
            or op in loop_merges
            or op.type in ("Enter", "RefEnter")
        ):
            continue
        if op.type in _MERGE:
            return None  # a nested cond
        seen.add(op)
        ops.append(op)
        todo.extend((x.op, x.value_index) for x in op._inputs)
        todo.extend((c, -1) for c in op._control_inputs)
    return ops, hang


def _pred(switch: Operation) -> Tensor:
    """A Switch's predicate, seen through Identity ops (TensorFlow-1's cond switches its data on
    an Identity of the predicate and its pivot on the predicate itself)."""
    t = switch._inputs[1]
    while t.op.type == "Identity" and t.op._inputs:
        t = t.op._inputs[0]
    return t


def _conds(body, loop_switches: set, loop_merges: set):
    """[(merge, [(branch ops, {(switch, idx)}) per input])] for the body's cond Merges; None
    when one cannot be rebuilt."""
    out = []
    for m in body:
        if m.type not in _MERGE or m in loop_merges:
            continue
        if len(m._inputs) != 2:
            return None
        branches = [_branch_of(x, loop_switches, loop_merges) for x in m._inputs]
        if any(b is None or not b[1] for b in branches):
            return None
        for _, hang in branches:
            if len({i for _, i in hang}) != 1 or len({_pred(sw) for sw, _ in hang}) != 1:
                return None
        out.append((m, branches))
    return out


def _split_shared_switches(graph: Graph, conds, ctx) -> None:
    """A Switch whose outputs 0 and 1 both feed branches gets a twin for its output-0 users."""
    twins: dict = {}
    for _, branches in conds:
        for k, (ops, hang) in enumerate(branches):
            fixed = set()
            for sw, idx in hang:
                if idx != 0 or not (sw.outputs[1].consumers() and sw.outputs[0].consumers()):
                    fixed.add((sw, idx))
                    continue
                twin = twins.get(sw)
                if twin is None:
                    twin = twins[sw] = graph.create_op(
                        sw.type, list(sw._inputs), dict(sw.attrs), name=f"{sw.name}/false_branch"
                    )
                    twin._control_flow_context = ctx
                    for user in sw.outputs[0].consumers():
                        for j, x in enumerate(user._inputs):
                            if x is sw.outputs[0]:
                                user._update_input(j, twin.outputs[0])
                fixed.add((twin, 0))
            branches[k] = (ops, fixed)


def _make_cond_contexts(graph: Graph, ctx: WhileContext, conds, body) -> None:
    saved = graph._control_flow_context
    graph._control_flow_context = None
    try:
        _split_shared_switches(graph, conds, ctx)
        made: dict = {}
        for m, branches in conds:
            for ops, hang in branches:
                sw, idx = next(iter(hang))
                key = (_pred(sw), idx)
                cc = made.get(key)
                if cc is None:
                    cc = CondContext(graph, f"{m.name}/branch{idx}", _pred(sw), sw.outputs[idx],
                                     idx)  # fmt: skip
                    cc.outer = ctx
                    made[key] = cc
                for op in ops:
                    op._control_flow_context = cc
                for s, _ in hang:
                    s._control_flow_context = cc
    finally:
        graph._control_flow_context = saved
