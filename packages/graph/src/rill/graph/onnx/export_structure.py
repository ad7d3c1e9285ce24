"""Recovers structured control flow from a rill graph's Switch/Merge/Enter/Exit ops.

ONNX has no dataflow control flow: a cond must become an `If` node with two subgraphs and a
while loop a `Loop` node with a body subgraph. This module works out, from the graph alone (so
that GraphDefs written by TensorFlow export too), which subgraph each op belongs to:

- its *frame*: the while loop it runs in (an Enter opens the frame named by its `frame_name`,
  an Exit leaves it), None outside every loop;
- its *guard*: the set of (predicate tensor, branch) literals under which its value is live
  (a cond's Switch output `b` adds `(pred, b)`, the cond's Merge removes it again), as in the
  static deadness analysis of the structured executor.

An op's *scope* is its (frame, guard) pair. Scopes form a tree: the root; per loop the loop
body (the frame at its entry guard); per cond and branch the scope with that one more literal.
`ScopeTree.order(scope, members)` lists what a scope emits in dependency order: its own ops,
and one item per nested cond (`("cond", pred)`) or loop (`("loop", frame)`), which become one
If or Loop node.
"""

from __future__ import annotations

import heapq

from rill.graph.errors import UnimplementedError
from rill.graph.graph import Operation, Tensor

__all__ = ["Scope", "ScopeTree", "collect_ops"]


def _is_back_edge(op: Operation, i: int) -> bool:
    """Input `i` of a loop Merge that comes from the loop's NextIteration."""
    return op.type == "Merge" and op._inputs[i].op.type == "NextIteration"


def is_loop_merge(op: Operation) -> bool:
    return op.type == "Merge" and any(t.op.type == "NextIteration" for t in op._inputs)


def is_loop_switch(op: Operation) -> bool:
    return op.type == "Switch" and op._inputs[1].op.type == "LoopCond"


def _follows(t: Tensor, fed) -> bool:
    """Whether export follows edge `t`: not into fed tensors, and not into variable handles
    (a variable's reads are frozen into initializers)."""
    return t not in fed and t.dtype.name != "resource"


def _is_pred_id(op: Operation) -> bool:
    """A cond's copy of its predicate, which its value switches take (TensorFlow's and rill's
    cond name it pred_id; an imported If lowered to switches, pred)."""
    return op.type == "Identity" and op.name.rpartition("/")[2] in ("pred_id", "pred")


def collect_ops(outputs: list[Tensor], fed: set[Tensor]) -> list[Operation]:
    """Every op the outputs depend on through data edges, stopping at fed tensors."""
    seen: dict[Operation, None] = {}
    stack = [t for t in outputs if t not in fed]
    while stack:
        op = stack.pop().op
        if op in seen:
            continue
        seen[op] = None
        stack.extend(t for t in op._inputs if _follows(t, fed))
    return list(seen)


class Scope:
    """A subgraph: the root, a loop body (`kind` "loop", `key` the frame) or a cond branch
    (`kind` "branch", `key` the (pred, branch) literal)."""

    __slots__ = ("frame", "guard", "parent", "kind", "key", "depth")

    def __init__(self, frame, guard, parent, kind, key):
        self.frame = frame
        self.guard = guard
        self.parent = parent
        self.kind = kind
        self.key = key
        self.depth = 0 if parent is None else parent.depth + 1

    def __repr__(self) -> str:
        return f"<Scope {self.kind} {self.frame} depth={self.depth}>"


class ScopeTree:
    """Frames, guards and scopes of the ops `needed` (plus what their placement depends on)."""

    def __init__(self, needed: list[Operation], fed: set[Tensor]):
        self.fed = fed
        self.needed = set(needed)
        self.position: dict[Operation, int] = {}
        self.frame: dict[Operation, str | None] = {}
        self.parent_frame: dict[str, str | None] = {}
        self.entry_guard: dict[str | None, frozenset] = {None: frozenset()}
        self.guard: dict[Operation, frozenset] = {}
        self.bad: dict[Operation, str] = {}
        # cond Merge -> (pred tensor, {branch: input index})
        self.merge_pred: dict[Operation, tuple[Tensor, dict[int, int]]] = {}
        self._scopes: dict[tuple, Scope] = {}
        # name scope -> its cond's pred_id, among the ops the export computes
        self._pred_ids = {op.name.rpartition("/")[0]: op.outputs[0] for op in needed
                          if _is_pred_id(op)}  # fmt: skip
        self.root = self._scope(None, frozenset())
        order = self._topological(needed)
        for op in order:
            self._place(op)
        self.scope_of = {op: self._scope_of(op) for op in needed if op not in self.bad}

    # -- analysis --------------------------------------------------------------------------------

    def _deps(self, op: Operation) -> list[Operation]:
        """Ops `op` is placed after: data inputs (not back edges, not fed), else control inputs."""
        deps = [t.op for i, t in enumerate(op._inputs)
                if not _is_back_edge(op, i) and _follows(t, self.fed)]  # fmt: skip
        if not any(_follows(t, self.fed) for t in op._inputs):
            deps = list(op._control_inputs)
        return deps

    def _topological(self, needed: list[Operation]) -> list[Operation]:
        ops: dict[Operation, None] = {}
        stack = list(needed)
        while stack:
            op = stack.pop()
            if op in ops:
                continue
            ops[op] = None
            stack.extend(self._deps(op))
        indeg = {op: 0 for op in ops}
        users: dict[Operation, list[Operation]] = {op: [] for op in ops}
        for op in ops:
            for d in self._deps(op):
                indeg[op] += 1
                users[d].append(op)
        ready = [(op._id, id(op), op) for op, n in indeg.items() if n == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            *_, op = heapq.heappop(ready)
            self.position[op] = len(order)
            order.append(op)
            for u in users[op]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, (u._id, id(u), u))
        if len(order) != len(ops):
            stuck = sorted((op for op in ops if op not in self.position), key=lambda o: o._id)
            raise UnimplementedError(
                f"cannot export: the graph has a cycle that is not a while loop "
                f"(through {stuck[0].type} op {stuck[0].name!r})",
                op=stuck[0],
            )
        return order

    def tensor_guard(self, t: Tensor) -> frozenset:
        g = self.guard.get(t.op, frozenset())
        if t.op.type == "Switch" and not is_loop_switch(t.op) and t.op in self.guard:
            g = g | {self._literal(t.op, t.value_index)}
        return g

    def _handle_guard(self, t: Tensor) -> frozenset:
        """The branches a variable handle was switched into (a cond branch that reads a
        variable: ReadVariableOp(Switch(handle, pred))). Handles are not followed as data (their
        reads are frozen), so their cond Switches are not placed: walked here instead."""
        guard: frozenset = frozenset()
        while t.op.type in ("Switch", "Identity") and t not in self.fed:
            if t.op.type == "Switch":
                if is_loop_switch(t.op):
                    break
                p = t.op._inputs[1]
                guard |= self.guard.get(p.op, frozenset()) | {self._literal(t.op, t.value_index)}
            t = t.op._inputs[0]
        return guard

    def _literal(self, switch: Operation, branch: int) -> tuple[Tensor, int]:
        """(predicate, branch) of a cond Switch's output `branch`. A Switch on LogicalNot(p)
        is p's other branch (an imported If lowers its else branch so: the true output of a
        Switch on not_pred)."""
        p = self._predicate(switch._inputs[1], switch)
        if p.op.type == "LogicalNot" and p not in self.fed:
            return self._predicate(p.op._inputs[0]), 1 - branch
        return p, branch

    def _predicate(self, p: Tensor, switch: Operation | None = None) -> Tensor:
        """One tensor per cond: a cond switches its values on `pred_id` = Identity(pred) and
        its pivots on `pred` itself (Switch(pred, pred)); a pivot stands for the pred_id
        beside it (the same name scope) where the export computes that, so that two conds on
        one predicate (a batch norm's and a dropout's on one is_training) stay two conds.
        Other Identity chains lead to the predicate they copy."""
        if switch is not None and switch._inputs[0] is p:
            scope = switch.name.rpartition("/")[0]
            pid = self._pred_ids.get(scope)
            if pid is not None and pid.op._inputs[0] is p:
                return pid
        while p.op.type == "Identity" and p not in self.fed and not _is_pred_id(p.op):
            p = p.op._inputs[0]
        return p

    def _place(self, op: Operation) -> None:
        deps = self._deps(op)
        # frame
        if op.type == "Enter":
            name = op.attrs["frame_name"]
            outer = self.frame.get(deps[0]) if deps else None
            self.parent_frame.setdefault(name, outer)
            frame = name
        elif op.type == "Exit":
            inner = self.frame.get(deps[0]) if deps else None
            frame = self.parent_frame.get(inner)
        else:
            frame = self.frame.get(deps[0]) if deps else None
        self.frame[op] = frame
        # guard
        if op.type == "Merge" and is_loop_merge(op):
            entry = [t for t in op._inputs if t.op.type != "NextIteration"]
            guard = self.tensor_guard(entry[0]) if entry else frozenset()
        elif (
            op.type == "Merge"
            and len(op._inputs) == 2
            and not any(t in self.fed for t in op._inputs)
        ):
            g0, g1 = (self.tensor_guard(t) for t in op._inputs)
            guard = g0 & g1
            d0, d1 = g0 - guard, g1 - guard
            if len(d0) == 1 and len(d1) == 1:
                (p0, b0), (p1, b1) = next(iter(d0)), next(iter(d1))
                if p0 is p1 and b0 != b1:
                    self.merge_pred[op] = (p0, {b0: 0, b1: 1})
            if op not in self.merge_pred:
                self.bad[op] = "its inputs are not the two branches of one cond"
        elif op.type == "Merge":
            guard = frozenset()
            self.bad[op] = f"a Merge of {len(op._inputs)} inputs is not the end of a cond"
        else:
            guard = frozenset()
            if any(_follows(t, self.fed) for t in op._inputs):
                for t in op._inputs:
                    if _follows(t, self.fed):
                        guard |= self.tensor_guard(t)
            else:
                for c in op._control_inputs:
                    guard |= self.guard.get(c, frozenset())
            for t in op._inputs:
                if t.dtype.name == "resource" and t not in self.fed:
                    guard |= self._handle_guard(t)
        preds: dict[Tensor, int] = {}
        for p, b in guard:
            if preds.setdefault(p, b) != b:
                self.bad[op] = "it reads values of both branches of one cond"
        self.guard[op] = guard
        if op.type == "Enter":
            self.entry_guard.setdefault(frame, guard)

    # -- scopes ----------------------------------------------------------------------------------

    def _scope(self, frame, guard: frozenset) -> Scope:
        key = (frame, guard)
        s = self._scopes.get(key)
        if s is not None:
            return s
        entry = self.entry_guard.get(frame, frozenset())
        if frame is None and not guard:
            s = Scope(None, guard, None, "root", None)
        elif guard == entry:
            s = Scope(frame, guard, self._scope(self.parent_frame.get(frame), entry), "loop", frame)
        else:
            extra = guard - entry
            # The innermost literal: its predicate was computed under the most of the others.
            lit = max(extra, key=lambda lt: (len(self.tensor_guard(lt[0]) & extra),
                                             self.position.get(lt[0].op, -1)))  # fmt: skip
            s = Scope(frame, guard, self._scope(frame, guard - {lit}), "branch", lit)
        self._scopes[key] = s
        return s

    def _scope_of(self, op: Operation) -> Scope:
        return self._scope(self.frame[op], self.guard[op])

    def branch_scope(self, parent: Scope, pred: Tensor, branch: int) -> Scope | None:
        return self._scopes.get((parent.frame, parent.guard | {(pred, branch)}))

    def item_in(self, scope: Scope, op: Operation):
        """What `op` belongs to among the things `scope` emits: itself, ("cond", pred) or
        ("loop", frame); None when `op` is not inside `scope`."""
        s = self.scope_of[op]
        if s is scope:
            if op in self.merge_pred:
                return ("cond", self.merge_pred[op][0])
            if op.type == "Exit":
                return ("loop", self.frame[op._inputs[0].op])
            return op
        while s is not None and s.parent is not scope:
            s = s.parent
        if s is None:
            return None
        return ("loop", s.frame) if s.kind == "loop" else ("cond", s.key[0])

    def order(self, scope: Scope, members) -> list[tuple[object, list[Operation]]]:
        """The items of `scope` built from `members`, each with its ops, dependencies first."""
        groups: dict[object, list[Operation]] = {}
        for op in members:
            if op in self.bad:
                raise UnimplementedError(
                    f"cannot export {op.type} op {op.name!r}: {self.bad[op]}; only control flow "
                    "built by cond and while_loop exports to ONNX If and Loop",
                    op=op,
                )
            it = self.item_in(scope, op)
            if it is not None:
                groups.setdefault(it, []).append(op)
        edges: dict[object, set] = {it: set() for it in groups}
        indeg = dict.fromkeys(groups, 0)
        member_set = set(members)

        def depend(it, producer: Operation) -> None:
            if producer not in member_set:
                return
            jt = self.item_in(scope, producer)
            if jt is not None and jt != it and jt in groups and it not in edges[jt]:
                edges[jt].add(it)
                indeg[it] += 1

        for it, ops in groups.items():
            for op in ops:
                for i, t in enumerate(op._inputs):
                    if not _is_back_edge(op, i) and _follows(t, self.fed):
                        depend(it, t.op)
            if isinstance(it, tuple) and it[0] == "cond":
                depend(it, it[1].op)
        first = {it: min(self.position[o] for o in ops) for it, ops in groups.items()}
        ready = [(first[it], k, it) for k, it in enumerate(groups) if indeg[it] == 0]
        heapq.heapify(ready)
        keys = {it: k for k, it in enumerate(groups)}
        out = []
        while ready:
            *_, it = heapq.heappop(ready)
            out.append((it, groups[it]))
            for u in edges[it]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, (first[u], keys[u], u))
        if len(out) != len(groups):
            raise UnimplementedError("cannot export: control flow that does not nest as cond and "
                                     "while_loop build it")  # fmt: skip
        return out
