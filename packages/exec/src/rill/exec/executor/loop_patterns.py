"""Loop shapes the structured path (structured.py) compiles specially: gradient accumulators
(`acc = acc + x`, summed in place; `acc + aᵀ·g` folded into one GEMM after the loop, fold.py),
LSTM cells whose input projection is hoisted (hoist.py), and the order of a frame's items."""

from __future__ import annotations

__all__ = ["Unsupported", "find_accumulators", "find_projections", "loop_nodes", "order_items"]


class Unsupported(Exception):
    """The partition's control flow is not in a shape the structured path compiles."""


def find_accumulators(loops: dict, nodes, kernels) -> tuple:
    """Loop variables updated only as `acc = acc + x` (gradient accumulators, sums).

    Such a variable is private to its loop once copied at entry, so the add may write into
    it: a 1024×2048 gradient accumulated over 50 iterations then costs 50 in-place adds
    instead of 50 fresh 8 MB arrays.

    Returns (acc_adds: add node id -> index of its accumulator input, acc_merges: the
    accumulators' Merge ids, deferred: add node id -> (its MatMul aᵀ·g, the loop Merge) for the
    sums folded after the loop, concat_parts: add node id -> the ConcatV2 that is its a, whose
    parts are stacked directly).
    """
    consumers: dict[int, list] = {n.id: [] for n in nodes}
    for n in nodes:
        for s_, i in n.inputs:
            consumers[s_.id].append((n, i))
        for c in n.control_inputs:
            consumers[c.id].append((n, -1))
    acc_adds: dict[int, int] = {}  # add node id -> index of the accumulator input
    acc_merges: set[int] = set()
    deferred: dict[int, tuple] = {}  # add node id -> (its MatMul, the loop Merge)
    concat_parts: dict[int, object] = {}  # add node id -> the ConcatV2 that is its a
    for lp in loops.values():
        for m, nx in zip(lp.merges, lp.nexts):
            sws = [c for c, _ in consumers[m.id] if c in lp.switches]
            if len(sws) != 1 or len(consumers[m.id]) != 1:
                continue
            sw = sws[0]
            body_uses = [(c, i) for c, i in consumers[sw.id] if c.type != "Exit"]
            if len(body_uses) != 1 or body_uses[0][1] != 1:
                continue
            add = body_uses[0][0]
            if add.type not in ("AddV2", "Add") or add.control_inputs:
                continue
            slot = next(k for k, (s_, i) in enumerate(add.inputs) if s_ is sw and i == 1)
            if sum(1 for s_, _ in add.inputs if s_ is sw) != 1:
                continue
            if consumers[add.id] != [(nx, 0)] or nx.inputs[0][0] is not add:
                continue
            acc_adds[add.id] = slot
            acc_merges.add(m.id)
            # acc += aᵀ·g (a weight's gradient): collect a and g, one GEMM after the loop.
            src, idx = add.inputs[1 - slot]
            if (
                src.type == "MatMul"
                and idx == 0
                and src.frame == lp.name
                and src.attrs.get("transpose_a")
                and not src.attrs.get("transpose_b")
                and consumers[src.id] == [(add, 0)]
                and not src.control_inputs
            ):
                deferred[add.id] = (src, m)
                # a = ConcatV2(parts, axis) used by the MatMul alone: the parts are copied
                # straight into the stacked matrix's columns.
                cat, ci = src.inputs[0]
                if (
                    cat.type == "ConcatV2"
                    and ci == 0
                    and cat.frame == lp.name
                    and consumers[cat.id] == [(src, 0)]
                    and not cat.control_inputs
                    and not kernels.get(cat).context
                ):
                    concat_parts[add.id] = cat
    return acc_adds, acc_merges, deferred, concat_parts


def find_projections(loops: dict) -> dict:
    """LSTMBlockCells whose x is a TensorArray element read in their loop and whose weights
    come from outside it: their input projection is hoisted (hoist.py)."""
    projected: dict[int, object] = {}  # cell node id -> its x's TensorArrayReadV3
    for lp in loops.values():
        for n in lp.members:
            if n.type != "LSTMBlockCell" or n.inputs[0][1] != 0:
                continue
            read, w = n.inputs[0][0], n.inputs[3][0]
            if (
                read.type == "TensorArrayReadV3"
                and read.frame == lp.name
                and read.inputs[0][0].type == "Enter"
                and w.type == "Enter"
                and w.attrs.get("frame_name") == lp.name
            ):
                projected[n.id] = read
    return projected


def order_items(items, loops):
    """Topological order of a frame's items (nodes and whole child loops)."""
    owner = {}
    for kind, obj in items:
        if kind == "node":
            owner[obj.id] = (kind, obj)
        else:
            for n in loop_nodes(obj, loops):
                owner[n.id] = (kind, obj)
    index = {id(it[1]): k for k, it in enumerate(items)}
    deps = {k: set() for k in range(len(items))}
    for k, (kind, obj) in enumerate(items):
        nodes = [obj] if kind == "node" else loop_nodes(obj, loops)
        for n in nodes:
            for s, _ in n.inputs:
                o = owner.get(s.id)
                if o is not None and index[id(o[1])] != k:
                    deps[k].add(index[id(o[1])])
            for c in n.control_inputs:
                o = owner.get(c.id)
                if o is not None and index[id(o[1])] != k:
                    deps[k].add(index[id(o[1])])
    order, done = [], set()
    pending = list(range(len(items)))
    while pending:
        progressed = False
        rest = []
        for k in pending:
            if deps[k] <= done:
                order.append(items[k])
                done.add(k)
                progressed = True
            else:
                rest.append(k)
        if not progressed:
            raise Unsupported("a cycle among a frame's items")
        pending = rest
    return order


def loop_nodes(lp, loops) -> list:
    """Every node of loop `lp`, its nested loops, and its Enters (which live in the parent)."""
    out = list(lp.enters) + list(lp.members)
    for child in loops.values():
        if child.parent == lp.name:
            out.extend(loop_nodes(child, loops))
    return out
