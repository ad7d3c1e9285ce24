"""Reference edges (TensorFlow-1 variables) made explicit in the step plan.

In TensorFlow an edge out of a `Ref(T)` output carries the variable itself. An op whose input is
declared `Ref(T)` (Assign, ApplyAdam, RefSwitch, ...) gets the reference and may update the
variable; any other op gets the variable's value, read when that op runs. rill's executors pass
values only, so this pass, run right after pruning:

- gives each read of a reference by a value input its own `_ReadRef` node between the two. The
  read runs after the consumer's control inputs and the producers of its other data inputs
  (so `Identity(w)` under `control_dependencies([assign])` reads the assigned value, as
  TensorFlow's would), and sits on the variable's colocation group;
- turns a fetch of a reference into a fetch of its value;
- runs the ref twins of the control-flow primitives (RefSwitch, RefMerge, RefEnter, RefExit,
  RefNextIteration, RefIdentity) as the primitives themselves: they forward the reference.
"""

from __future__ import annotations

from rill.exec.plan.ir import PlanGraph, PlanNode
from rill.graph.op_def import get_op_def

__all__ = ["resolve_refs"]

_REF_TWINS = {
    "RefSwitch": "Switch",
    "RefMerge": "Merge",
    "RefEnter": "Enter",
    "RefExit": "Exit",
    "RefNextIteration": "NextIteration",
    "RefIdentity": "Identity",
}


# Ops whose Ref(string) output is a handle to a resource other than a variable (TF1's
# accumulators): the handle itself is the value their consumers take, never a variable to read.
_HANDLE_REFS = frozenset({"ConditionalAccumulator", "SparseConditionalAccumulator"})


def _flat_refs(args, attrs) -> list[bool]:
    """is_ref for each flattened slot of `args` (list arguments expanded by their attrs)."""
    out = []
    for a in args:
        if a.number_attr:
            n = int(attrs[a.number_attr])
        elif a.type_list_attr:
            n = len(attrs[a.type_list_attr])
        else:
            n = 1
        out.extend([a.is_ref] * n)
    return out


def resolve_refs(pg: PlanGraph) -> int:
    """Rewrites `pg` as the module says; returns how many reads it inserted."""
    out_ref: dict[PlanNode, list[bool]] = {}
    for n in pg.nodes:
        if n.type in _HANDLE_REFS:
            continue
        if any(a.is_ref for a in n.op_def.outputs):
            out_ref[n] = _flat_refs(n.op_def.outputs, n.attrs)
    if not out_ref:
        return 0
    inserted = 0
    reads: dict[tuple, PlanNode] = {}

    def read_of(src: PlanNode, idx: int, consumer: PlanNode | None, after: list) -> PlanNode:
        nonlocal inserted
        key = (src, idx, consumer)
        r = reads.get(key)
        if r is None:
            classes = [c for c in src.attrs.get("_class", ()) if c.startswith("loc:@")]
            r = PlanNode(
                f"{src.name}/_read_{idx}",
                "_ReadRef",
                {"T": src.out_dtypes[idx], "_class": classes or [f"loc:@{src.name}"]},
                [(src, idx)],
                after,
                [src.out_dtypes[idx]],
                op=src.op,
                out_shapes=[src.out_shapes[idx]] if src.out_shapes else None,
                requested_device=src.requested_device,
            )
            pg.add(r)
            reads[key] = r
            inserted += 1
        return r

    for n in list(pg.nodes):
        if n.type == "_ReadRef":
            continue
        slots = None
        for slot, (src, idx) in enumerate(n.inputs):
            if src not in out_ref or not out_ref[src][idx]:
                continue
            if slots is None:
                slots = _flat_refs(n.op_def.inputs, n.attrs)
            if slots[slot]:
                continue  # the consumer takes the reference itself
            after = list(n.control_inputs)
            if n.type not in ("Merge", "RefMerge"):  # a Merge's other inputs may be back edges
                after += [s for j, (s, _) in enumerate(n.inputs) if j != slot and s is not src]
            n.inputs[slot] = (read_of(src, idx, n, after), 0)
    for i, (src, idx) in enumerate(pg.fetches):
        if src in out_ref and out_ref[src][idx]:
            pg.fetches[i] = (read_of(src, idx, None, []), 0)
    for n in pg.nodes:
        twin = _REF_TWINS.get(n.type)
        if twin is not None:
            n.type = twin
            n.op_def = get_op_def(twin)
    return inserted
