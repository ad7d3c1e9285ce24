"""Plan optimizations: common-subexpression elimination, constant folding, dead-code removal.

Each pass rewrites the PlanGraph in place and can be switched off in the session config. None of
them touches stateful ops, control-flow ops or nodes with control inputs (whose timing or frame
membership would change), so they never change what a step computes.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import find_kernel, instantiate
from rill.exec.plan.ir import CONTROL_FLOW_OPS, PlanGraph, PlanNode
from rill.graph import dtypes

__all__ = ["eliminate_common_subexpressions", "fold_constants", "remove_dead_nodes"]

_NEVER_FOLD = CONTROL_FLOW_OPS | {"_Arg", "_Recv", "_Send", "Placeholder", "PlaceholderWithDefault"}


def _attr_key(v):
    if isinstance(v, np.ndarray):
        if v.size > 4096:
            return None
        if v.dtype == object:
            return ("str", v.shape, tuple(v.reshape(-1)))
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        parts = tuple(_attr_key(x) for x in v)
        return None if any(p is None for p in parts) and v else parts
    if isinstance(v, float) and v != v:
        return ("nan",)
    return v


def eliminate_common_subexpressions(pg: PlanGraph) -> int:
    """Merges stateless nodes with the same type, inputs, attrs and device. Returns the count."""
    seen: dict = {}
    replace: dict[PlanNode, PlanNode] = {}
    for n in pg.topo_order():
        if replace:
            n.inputs = [(replace.get(s, s), i) for s, i in n.inputs]
            n.control_inputs = list(dict.fromkeys(replace.get(c, c) for c in n.control_inputs))
        if n.is_stateful or n.type in _NEVER_FOLD:
            continue
        attrs = []
        ok = True
        for k in sorted(n.attrs):
            key = _attr_key(n.attrs[k])
            if key is None:
                ok = False
                break
            attrs.append((k, key))
        if not ok:
            continue
        key = (
            n.type,
            tuple((s.id, i) for s, i in n.inputs),
            frozenset(c.id for c in n.control_inputs),
            tuple(attrs),
            id(n.device),
        )
        try:
            hash(key)
        except TypeError:
            continue
        prior = seen.get(key)
        if prior is None:
            seen[key] = n
        else:
            replace[n] = prior
    if not replace:
        return 0
    _rewire(pg, replace)
    return len(replace)


def _rewire(pg: PlanGraph, replace: dict) -> None:
    for n in pg.nodes:
        n.inputs = [(replace.get(s, s), i) for s, i in n.inputs]
        n.control_inputs = list(dict.fromkeys(replace.get(c, c) for c in n.control_inputs))
    pg.fetches = [(replace.get(s, s), i) for s, i in pg.fetches]
    pg.targets = [replace.get(t, t) for t in pg.targets]
    pg.nodes = [n for n in pg.nodes if n not in replace]
    pg.renumber()


def fold_constants(pg: PlanGraph, cpu_device, max_bytes: int = 10 << 20) -> int:
    """Evaluates stateless nodes whose inputs are all constants, at plan time. Returns the count."""
    folded = 0
    has_cf = pg.has_control_flow()
    for n in pg.topo_order():
        if n.type in _NEVER_FOLD or n.is_stateful or n.control_inputs or n.type == "Const":
            continue
        if dtypes.variant in n.out_dtypes:
            continue  # a list or optional is no constant: a Const cannot hold it in a GraphDef
        if n.device is not None and n.device.device_type != "CPU" and n.type != "Shape":
            continue
        inputs = []
        if n.type in ("Shape", "Size", "Rank") and not has_cf:
            shape = n.inputs[0][0].out_shapes[n.inputs[0][1]] if n.inputs[0][0].out_shapes else None
            if shape is None or not shape.is_fully_defined():
                continue
            value = _shape_value(n, shape)
            if value is None:
                continue
            outs = [value]
        else:
            if not n.inputs:
                continue
            const = True
            for src, _idx in n.inputs:
                if src.type != "Const" or src.control_inputs:
                    const = False
                    break
                inputs.append(src.attrs["value"])
            if not const:
                continue
            kdef = find_kernel(n.type, "CPU", n.attrs)
            if kdef is None or kdef.context or kdef.blocking:
                continue
            try:
                fn = instantiate(kdef, _FoldOp(n), cpu_device)
                # Folded kernels follow the run-time IEEE semantics (inf, nan), silently.
                with np.errstate(all="ignore"):
                    out = fn(*inputs)
            except Exception:  # noqa: BLE001 - a failing fold is left for run time to report
                continue
            outs = [out] if n.num_outputs == 1 else list(out or ())
            if len(outs) != n.num_outputs:
                continue
            outs = [np.asarray(o) for o in outs]
            if sum(o.nbytes for o in outs if o.dtype != object) > max_bytes:
                continue
        if any(np.asarray(v).dtype != dt.np for dt, v in zip(n.out_dtypes, outs)):
            continue  # a kernel returning the wrong dtype is reported at run time, not folded
        _replace_with_consts(pg, n, outs)
        folded += 1
    if folded:
        remove_dead_nodes(pg)
    return folded


def _shape_value(n: PlanNode, shape):
    out_t = n.attrs.get("out_type", dtypes.int32)
    if n.type == "Shape":
        return np.array(shape.dims, dtype=out_t.np)
    if n.type == "Size":
        return np.array(shape.num_elements(), dtype=out_t.np)
    return np.array(shape.rank, dtype=np.int32)


class _FoldOp:
    """Stands in for an Operation when a kernel factory asks for `node` during folding."""

    def __init__(self, n: PlanNode):
        self.name = n.name
        self.type = n.type
        self.attrs = n.attrs
        self.op = n.op

    def __getattr__(self, item):
        return getattr(self.op, item)


def _replace_with_consts(pg: PlanGraph, n: PlanNode, outs) -> None:
    consts = []
    for i, (value, dt) in enumerate(zip(outs, n.out_dtypes)):
        c = PlanNode(
            f"{n.name}/_folded_{i}" if n.num_outputs > 1 else f"{n.name}/_folded",
            "Const",
            {
                "value": np.asarray(value, dtype=dt.np) if dt is not dtypes.string else value,
                "dtype": dt,
            },
            [],
            [],
            [dt],
            op=n.op,
            out_shapes=[n.out_shapes[i]] if n.out_shapes else None,
        )
        c.device = n.device
        c.frame = n.frame
        consts.append(pg.add(c))
    for m in pg.nodes:
        m.inputs = [(consts[i], 0) if s is n else (s, i) for s, i in m.inputs]
    pg.fetches = [(consts[i], 0) if s is n else (s, i) for s, i in pg.fetches]
    if n in pg.targets:
        pg.targets = [t for t in pg.targets if t is not n]


def remove_dead_nodes(pg: PlanGraph) -> int:
    """Drops nodes that neither a fetch nor a target needs. Returns how many."""
    keep = set()
    stack = [s for s, _ in pg.fetches] + list(pg.targets) + list(pg.feeds)
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        keep.add(n)
        stack.extend(s for s, _ in n.inputs)
        stack.extend(n.control_inputs)
    # A loop's NextIteration is needed whenever its Merge is.
    changed = True
    while changed:
        changed = False
        for n in pg.nodes:
            if n.type == "NextIteration" and n not in keep:
                if any(m.type == "Merge" and m in keep and any(s is n for s, _ in m.inputs)
                       for m in pg.nodes):  # fmt: skip
                    stack = [n]
                    while stack:
                        x = stack.pop()
                        if x in keep:
                            continue
                        keep.add(x)
                        stack.extend(s for s, _ in x.inputs)
                        stack.extend(x.control_inputs)
                    changed = True
    removed = len(pg.nodes) - len(keep)
    if removed:
        pg.nodes = [n for n in pg.nodes if n in keep]
        pg.renumber()
    return removed
