"""Loop shapes the structured path (structured.py) compiles specially: gradient accumulators
(`acc = acc + x`, summed in place; `acc + aᵀ·g` folded into one GEMM after the loop, fold.py),
LSTM cells whose input projection is hoisted (hoist.py), the order of a frame's items, a cond
Merge's guard, and the generated code's release of dead values."""

from __future__ import annotations

import re

__all__ = ["Unsupported", "drop_dead", "find_accumulators", "find_projections", "loop_nodes",
           "merge_guard", "order_items"]  # fmt: skip


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


def merge_guard(ins: list[frozenset]):
    """The guard of a cond's Merge and which input the predicate picks.

    Returns (G, (pred key, index of the input live when the predicate is true)).
    """
    if len(ins) != 2:
        raise Unsupported("Merges with other than two inputs")
    a, b = ins
    only_a, only_b = a - b, b - a
    if len(only_a) != 1 or len(only_b) != 1:
        raise Unsupported("a Merge that is not the end of a cond")
    (ka, va), (kb, vb) = next(iter(only_a)), next(iter(only_b))
    if ka != kb or va == vb or ka[0] == "loop":
        raise Unsupported("a Merge that is not the end of a cond")
    return a & b, (ka, 0 if va else 1)


# The generated code's value variables: node outputs, loop variables and exits.
_VALUE = re.compile(r"\b(?:v\d+_\d+|m\d+|x\d+)\b")


def drop_dead(lines: list, rets: list) -> list:
    """lines with each value variable set to None after the top-level statement (a line, or an
    `if` or `while` block with everything in it) that uses it last, as the compiled path frees
    its values: memory tracks the live set, and a variable's value read earlier in the step is
    no longer referenced when an optimizer updates it (so the update can write in place).
    Assigning None (not `del`) is safe for a variable a branch not taken never set."""
    items: list[list] = []
    for line in lines:
        if line[0] == 0 or not items:
            items.append([])
        items[-1].append(line)
    keep = set(_VALUE.findall(" ".join(rets)))
    last: dict[str, int] = {}
    for k, item in enumerate(items):
        for _, code, _ in item:
            for tok in _VALUE.findall(code):
                last[tok] = k
    out = []
    for k, item in enumerate(items):
        out.extend(item)
        dead = sorted(t for t, at in last.items() if at == k and t not in keep)
        if dead:
            out.append((0, f"{' = '.join(dead)} = None", None))
    return out
