"""Placement: choose a device for every node of a step plan.

- Nodes in one colocation group share a device. Groups come from `_class = ["loc:@name"]` attrs
  (`colocate_with`) and from resource edges: every op that uses a resource handle runs where the
  resource lives.
- A group's requested device is the merge of its members' (partial) device specs; conflicting
  specs are an error naming both ops — except, as in TensorFlow, the spec of an op that reaches
  the group only through a resource input: the resource decides, and that op's own device
  request is ignored (a read of a PS variable built under a worker's device scope runs on the
  PS). Members that produce resources are merged first.
- Candidates are the session's devices that match the spec and have a kernel for every member.
  With `allow_soft_placement`, a spec no device can satisfy falls back to any device with
  kernels; otherwise the error names the op, the spec and the available devices.
- Unconstrained groups go to the first GPU with kernels for all members, else CPU:0.
"""

from __future__ import annotations

from rill.exec.kernel_registry import find_kernel
from rill.exec.plan.ir import PlanGraph, PlanNode
from rill.graph import dtypes
from rill.graph.device import DeviceSpec
from rill.graph.errors import InvalidArgumentError

__all__ = ["place"]

# Ops the executor implements itself (no kernel lookup needed).
_EXECUTOR_OPS = frozenset({"_Arg", "_Retval"})


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        p = self.parent.setdefault(x, x)
        while p != self.parent.setdefault(p, p):
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _spec_matches(spec: DeviceSpec, dev) -> bool:
    if spec.job is not None and spec.job != dev.job:
        return False
    if spec.replica is not None and spec.replica != dev.replica:
        return False
    if spec.task is not None and spec.task != dev.task:
        return False
    if spec.device_type is not None and spec.device_type != dev.device_type:
        return False
    return spec.device_index is None or spec.device_index == dev.index


def _supports(node: PlanNode, dev) -> bool:
    if node.type in _EXECUTOR_OPS:
        return True
    if find_kernel(node.type, dev.device_type, node.attrs) is None:
        return False
    if dev.device_type != "CPU" and dtypes.resource in node.out_dtypes and node.op is not None:
        # A resource lives where its handle op runs, for every step signature: place it on a
        # device only when every op of the graph that uses it or is colocated with it has a
        # kernel there (a plan that prunes a CPU-only user away must not move the variable).
        return all(find_kernel(u.type, dev.device_type, u.attrs) is not None
                   for u in _resource_users(node.op))  # fmt: skip
    return True


def _resource_users(op) -> list:
    """The graph's ops that take one of `op`'s resource outputs (through Identity chains) or
    are colocated with it."""
    tag = f"loc:@{op.name}"
    users = [o for o in op.graph.get_operations() if tag in (o.attrs.get("_class") or ())]
    todo, seen = [t for t in op.outputs if t.dtype is dtypes.resource], {id(u) for u in users}
    while todo:
        t = todo.pop()
        for c in t.consumers():
            if id(c) in seen:
                continue
            seen.add(id(c))
            users.append(c)
            if c.type in ("Identity", "IdentityN"):
                todo.extend(o for o in c.outputs if o.dtype is dtypes.resource)
    return users


def place(pg: PlanGraph, devices: list, allow_soft_placement: bool = False) -> None:
    uf = _UnionFind()
    for n in pg.nodes:
        uf.find(n)
        if n.type == "_Arg":
            continue
        for g in n.attrs.get("_class", ()):
            if g.startswith("loc:@"):
                uf.union(("loc", g[5:]), n)
        uf.union(("loc", n.name), n)
        for src, idx in n.inputs:
            if src.out_dtypes[idx] is dtypes.resource and src.type != "_Arg":
                uf.union(src, n)
            elif n.type == "Merge" and src.type == "NextIteration":
                uf.union(src, n)  # a loop's back edge never crosses devices
    groups: dict = {}
    for n in pg.nodes:
        if n.type != "_Arg":
            groups.setdefault(uf.find(n), []).append(n)
    names = ", ".join(d.name for d in devices)
    for members in groups.values():
        spec, spec_from = DeviceSpec(), None
        conflict = None
        for n in sorted(members, key=_resource_rank):
            if not n.requested_device:
                continue
            try:
                s = DeviceSpec.from_string(n.requested_device)
            except ValueError as e:
                raise InvalidArgumentError(str(e), op=n.op) from None
            if spec_from is not None and not s.is_compatible_with(spec):
                if _resource_rank(n) == 2:
                    continue  # a resource consumer follows its resource (TensorFlow's rule)
                conflict = (spec_from, n)
                if not allow_soft_placement:
                    raise InvalidArgumentError(
                        f"Cannot colocate '{n.name}' (device {n.requested_device!r}) with "
                        f"'{spec_from.name}' (device {spec_from.requested_device!r}): they share a "
                        "colocation group (colocate_with or a resource they both use) but request "
                        "different devices",
                        op=n.op,
                    )
                continue
            spec = spec.merged(s)
            spec_from = spec_from or n
        matching = [d for d in devices if _spec_matches(spec, d)]
        capable = [d for d in matching if all(_supports(n, d) for n in members)]
        chosen = None
        if capable:
            gpus = [d for d in capable if d.device_type == "GPU"]
            chosen = gpus[0] if gpus and spec.device_type is None else capable[0]
        elif allow_soft_placement or conflict is not None:
            fallback = [d for d in devices if all(_supports(n, d) for n in members)]
            if fallback:
                chosen = fallback[0]
        if chosen is None:
            who = spec_from or members[0]
            if not matching:
                raise InvalidArgumentError(
                    f"Cannot assign a device for operation '{who.name}': could not satisfy "
                    f"explicit device specification {who.requested_device!r} because no device "
                    f"matches it. Available devices: {names}",
                    op=who.op,
                )
            missing = next(n for n in members if not all(_supports(n, d) for d in matching))
            raise InvalidArgumentError(
                f"Cannot assign a device for operation '{missing.name}': no kernel for "
                f"{missing.type} with {_kernel_attrs(missing)} on "
                f"{', '.join(sorted({d.device_type for d in matching}))}"
                + (
                    f" (requested {spec.to_string()!r}); set allow_soft_placement to fall back"
                    if spec_from
                    else ""
                ),
                op=missing.op,
            )
        for n in members:
            n.device = chosen
    default = devices[0]
    consumers = pg.consumers() if len(devices) > 1 else {}
    for n in pg.feeds:
        n.device = _feed_device(n, consumers.get(n, ()), default)


def _feed_device(arg: PlanNode, uses, default):
    """Where a feed enters: the host (`default`), unless every consumer runs on one accelerator
    and reads it as device memory; then the session copies the fed value there itself (one
    host-to-device copy, no Send/Recv pair and no second partition)."""
    from rill.exec.kernel_registry import _host_only
    from rill.exec.memory_types import input_memory

    dt = arg.out_dtypes[0]
    if not uses or _host_only(dt) or dt in (dtypes.resource, dtypes.variant):
        return default
    devs = {c.device for c, _, _ in uses}
    if len(devs) != 1:
        return default
    dev = next(iter(devs))
    if dev is None or dev.device_type == "CPU":
        return default
    for c, _, slot in uses:
        if c.type in _EXECUTOR_OPS or c.type in ("_Send", "_Recv"):
            return default
        mem = input_memory(c.type, c.attrs)
        if slot < len(mem) and mem[slot]:
            return default
    return dev


def _resource_rank(n: PlanNode) -> int:
    """0 for an op that makes a resource, 2 for one that only uses one, 1 otherwise."""
    if any(dt is dtypes.resource for dt in n.out_dtypes):
        return 0
    if any(src.out_dtypes[i] is dtypes.resource for src, i in n.inputs):
        return 2
    return 1


def _kernel_attrs(n: PlanNode) -> str:
    parts = [f"{k}={v}" for k, v in n.attrs.items() if isinstance(v, dtypes.DType)]
    return "{" + ", ".join(parts) + "}"
