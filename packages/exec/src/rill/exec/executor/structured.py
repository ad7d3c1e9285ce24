"""The structured path: a one-device partition with well-formed conds and while loops becomes one
Python function with `if` blocks and `while` loops.

A static deadness analysis gives every node a *guard*: the set of (predicate, branch) literals
under which its value is live (a Switch adds one, the Merge of a cond removes it). Nodes run
under `if` statements over their guards; a cond's Merge becomes `a if p else b`; a loop frame
(Enter → Merge → LoopCond/Switch → body → NextIteration, Exit) becomes

    m0, m1 = <entered values>
    while True:
        <ops before the Switch: the condition>
        if not p: break
        <body>
        m0, m1 = <NextIteration inputs>
    <exits> = m0, m1

Iterations run one after another: this honours any parallel_iterations bound (the general
executor overlaps iterations up to that bound). Anything else — several devices, loops built by
hand in other shapes, Merges not produced by a cond — raises Unsupported and the step plan uses
the general dataflow executor, which gives the same results.
"""

from __future__ import annotations

import itertools
import time

from rill.exec.context import OpKernelContext
from rill.exec.executor.common import KernelTable, owned, readonly, run_error
from rill.exec.executor.fold import Rows
from rill.exec.executor.fold import fold_matmuls as _fold_matmuls
from rill.exec.executor.hoist import InputProjection
from rill.exec.executor.loop_patterns import (
    Unsupported,
    drop_dead,
    find_accumulators,
    find_projections,
    merge_guard,
    order_items,
)
from rill.exec.memory_types import const_value
from rill.graph.errors import InvalidArgumentError

__all__ = ["StructuredPartition", "Unsupported"]

_ALIAS_OPS = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient", "LoopCond"})
_ids = itertools.count()
# Ops whose output is fixed by their attrs and device: evaluated once when the plan is built.
_PLAN_TIME_OPS = frozenset({"VarHandleOp"})


class _Loop:
    __slots__ = ("name", "parent", "enters", "merges", "loop_cond", "switches", "exits",
                 "nexts", "members", "guard", "id")  # fmt: skip

    def __init__(self, name, parent):
        self.name = name
        self.parent = parent
        self.enters = []
        self.merges = []
        self.loop_cond = None
        self.switches = []
        self.exits = []
        self.nexts = []
        self.members = []
        self.guard = None
        self.id = next(_ids)


class StructuredPartition:
    def __init__(self, part, kernels: KernelTable):
        if part.feeds and any(n.type in ("_Send", "_Recv") for n in part.nodes):
            raise Unsupported("partitions that exchange tensors use the dataflow executor")
        self.part = part
        self.device = part.device
        self.kernels = kernels
        self.filename = f"<rill-structured-{next(_ids)}>"
        self._analyze()
        self._traced = None
        self._fn, self._source, self.line_node = self._compile(traced=False)

    # -- analysis -----------------------------------------------------------------------------

    def _analyze(self) -> None:
        nodes = self.part.nodes
        for n in nodes:
            if n.type in ("_Send", "_Recv"):
                raise Unsupported("Send/Recv inside a control-flow partition")
        loops: dict[str, _Loop] = {}
        parent_of: dict[str, str] = {}
        for n in nodes:
            if n.type == "Enter":
                child = n.attrs["frame_name"]
                parent_of.setdefault(child, n.frame)
                if parent_of[child] != n.frame:
                    raise Unsupported(f"frame {child} entered from two frames")
        for name, parent in parent_of.items():
            loops[name] = _Loop(name, parent)
        for n in nodes:
            if n.frame:
                if n.frame not in loops:
                    raise Unsupported(f"frame {n.frame} has no Enter in this partition")
                loops[n.frame].members.append(n)
            if n.type == "Enter":
                loops[n.attrs["frame_name"]].enters.append(n)
        for lp in loops.values():
            for n in lp.members:
                if n.type == "LoopCond":
                    if lp.loop_cond is not None:
                        raise Unsupported(f"frame {lp.name} has two LoopConds")
                    lp.loop_cond = n
            if lp.loop_cond is None:
                raise Unsupported(f"frame {lp.name} has no LoopCond")
            for n in lp.members:
                if n.type == "Merge" and len(n.inputs) == 2:
                    a, b = n.inputs[0][0], n.inputs[1][0]
                    if a.type == "Enter" and b.type == "NextIteration" and b.frame == lp.name:
                        lp.merges.append(n)
                        lp.nexts.append(b)
                        continue
                    if b.type == "Enter" or a.type == "NextIteration":
                        raise Unsupported(f"loop Merge {n.name} has an unusual input order")
                if n.type == "Switch" and n.inputs[1][0] is lp.loop_cond:
                    if n.inputs[0][0] not in lp.merges:
                        raise Unsupported(f"loop Switch {n.name} does not switch a Merge")
                    lp.switches.append(n)
                if n.type == "Exit":
                    src = n.inputs[0][0]
                    if src.type != "Switch" or src.inputs[1][0] is not lp.loop_cond or \
                            n.inputs[0][1] != 0:  # fmt: skip
                        raise Unsupported(f"Exit {n.name} does not leave through the loop Switch")
                    lp.exits.append(n)
            for n in lp.members:
                if n.type == "NextIteration" and n not in lp.nexts:
                    raise Unsupported(f"NextIteration {n.name} feeds no loop Merge")
        self.loops = loops
        self._guards(nodes)
        self.acc_adds, self.acc_merges, self.deferred, self.concat_parts = find_accumulators(
            loops, nodes, self.kernels
        )
        self.projected = find_projections(loops)

    def _guards(self, nodes) -> None:
        """Per-output guards: frozensets of (predicate key, bool) literals, per frame."""
        out_guard: dict[tuple[int, int], frozenset] = {}
        node_guard: dict[int, frozenset] = {}
        loops = self.loops
        empty = frozenset()
        merge_of = {}
        for n in nodes:
            g = empty
            if n.type == "Merge" and n.frame and n in loops[n.frame].merges:
                g = empty
            elif n.type == "Merge":
                ins = [self._input_guard(s, i, out_guard, n) for s, i in n.inputs]
                try:
                    g, pick = merge_guard(ins)
                except Unsupported as e:
                    raise Unsupported(f"{e}: {n.name} with input guards {ins}") from None
                merge_of[n.id] = pick
                # A Merge's control inputs order it but do not guard it (TensorFlow's rule: their
                # deadness does not matter), so they add nothing to its guard.
            elif n.type == "ControlTrigger":
                gs = [node_guard[c.id] for c in n.control_inputs]
                g = frozenset.intersection(*gs) if gs else empty
            else:
                for s, i in n.inputs:
                    g = g | self._input_guard(s, i, out_guard, n)
                for c in n.control_inputs:
                    g = g | self._control_guard(c, node_guard, n)
            if n.type == "Exit":
                g = loops[n.frame].guard  # an Exit's output lives in the parent frame
            node_guard[n.id] = g
            if n.type == "Switch":
                pred_src = n.inputs[1][0]
                if n.frame and pred_src is loops[n.frame].loop_cond:
                    key = ("loop", n.frame)
                else:
                    # Predicates equal through Identity (a cond's pred and pred_id) are one key.
                    src, idx = pred_src, n.inputs[1][1]
                    while src.type in ("Identity", "Snapshot") and src.frame == n.frame:
                        src, idx = src.inputs[0]
                    key = (src.id, idx)
                out_guard[(n.id, 0)] = g | {(key, False)}
                out_guard[(n.id, 1)] = g | {(key, True)}
            else:
                for i in range(n.num_outputs):
                    out_guard[(n.id, i)] = g
            if n.type == "Enter":
                lp = loops[n.attrs["frame_name"]]
                if lp.guard is None:
                    lp.guard = g
                elif lp.guard != g:
                    raise Unsupported(f"the Enters of frame {lp.name} run under different conds")
        for n in nodes:
            g = node_guard[n.id]
            keys = {}
            for k, v in g:
                if keys.setdefault(k, v) != v:
                    raise Unsupported(f"node {n.name} is never live (contradictory guards)")
        for lp in loops.values():
            for n in lp.nexts:
                if ((("loop", lp.name), True)) not in node_guard[n.id]:
                    raise Unsupported(f"NextIteration {n.name} is not in the loop body")
        self.out_guard = out_guard
        self.node_guard = node_guard
        self.merge_pick = merge_of

    def _input_guard(self, src, idx, out_guard, n):
        if src.type == "Enter":
            return frozenset()  # the base of the child frame
        if src.type == "Exit":
            return self.loops[src.frame].guard
        return out_guard[(src.id, idx)]

    def _control_guard(self, c, node_guard, n):
        if c.type == "Enter":
            return frozenset()
        if c.type == "Exit":
            return self.loops[c.frame].guard
        return node_guard[c.id]

    # -- code generation ----------------------------------------------------------------------

    def _compile(self, traced: bool):
        bound: list = []

        def bind(value) -> str:
            bound.append(value)
            return f"b{len(bound) - 1}"

        self._bind = bind
        self._traced_flag = traced
        self.name: dict[tuple[int, int], str] = {}
        self.lines: list[tuple[int, str, object]] = []  # (indent, code, node)
        self._feed_of = {id(a): i for i, a in self.part.feeds}
        self._emit_frame("", 0)
        rets = []
        for k, (_, s, i) in enumerate(self.part.fetches):
            expr = self.name[(s.id, i)]
            guard = self.out_guard.get((s.id, i))
            if guard and any(lit[0][0] == "loop" for lit in guard):
                raise InvalidArgumentError(
                    f"cannot fetch {getattr(s, 'name', s)}:{i}: it is computed inside a while "
                    "loop's body, so it has no single value to return"
                )
            if guard:
                # The value exists only when its branch ran; otherwise fetching it is an error.
                self._emit(0, f"_r{k} = {expr} if {self._cond_expr(guard)} else _DEAD", None)
                self._emit(0, f"if _r{k} is _DEAD: _dead({bind(s)}, {i})", None)
                expr = f"_r{k}"
            rets.append(f"_copy({expr})")
        src = ["def _make(_B, _copy, _now, _DEAD, _dead, _Ctx):"]
        for k in range(len(bound)):
            src.append(f"    b{k} = _B[{k}]")
        src.append("    def _run(_a, _st):")
        src.append("        _f0 = ''")
        line_node = {}
        for indent, code, node in drop_dead(self.lines, rets):
            for part in code.split("\n"):
                src.append("        " + "    " * indent + part)
                if node is not None:
                    line_node[len(src)] = node
        src.append(f"        return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
        src.append("    return _run")
        source = "\n".join(src)
        fname = self.filename + ("-traced" if traced else "")
        code = compile(source, fname, "exec")
        ns: dict = {}
        exec(code, ns)  # noqa: S102 - source generated from planner-made identifiers only
        fn = ns["_make"](bound, owned, time.perf_counter_ns, _DEAD, _dead, OpKernelContext)
        return fn, source, line_node

    def _emit(self, indent: int, code: str, node) -> None:
        self.lines.append((indent, code, node))

    def _items(self, frame: str):
        """The emission items of a frame: its plain nodes and its child loops, in order."""
        loops = self.loops
        items = []
        seen_loops = set()
        for n in self.part.nodes:
            if n.frame != frame:
                continue
            if n.type == "Enter":
                lp = loops[n.attrs["frame_name"]]
                if lp.name not in seen_loops:
                    seen_loops.add(lp.name)
                    items.append(("loop", lp))
                continue
            if frame and n in self._structural(loops[frame]):
                continue
            items.append(("node", n))
        # A child loop goes where its last Enter input is ready; users of its Exits come after.
        return order_items(items, loops)

    @staticmethod
    def _structural(lp: _Loop) -> set:
        return set(lp.merges) | set(lp.switches) | set(lp.exits) | set(lp.nexts) | {lp.loop_cond}

    def _emit_frame(self, frame: str, indent: int, base_literals=frozenset()) -> None:
        lp = self.loops.get(frame) if frame else None
        items = self._items(frame)
        if lp is None:
            self._emit_items(items, indent, frozenset())
            return
        key = ("loop", frame)
        pre = [it for it in items if (key, True) not in self._item_guard(it)]
        body = [it for it in items if (key, True) in self._item_guard(it)]
        self._emit_items(pre, indent, frozenset())
        cond_var = self.name[(lp.loop_cond.inputs[0][0].id, lp.loop_cond.inputs[0][1])]
        self._emit(indent, f"if not {cond_var}: break", lp.loop_cond)
        self._emit_items(body, indent, frozenset({(key, True)}))

    def _item_guard(self, item) -> frozenset:
        kind, obj = item
        if kind == "loop":
            return obj.guard
        return self.node_guard[obj.id]

    def _emit_items(self, items, indent: int, implied: frozenset) -> None:
        # Group consecutive items with the same residual guard under one `if`.
        groups: list[tuple[frozenset, list]] = []
        for it in items:
            g = self._item_guard(it) - implied
            g = frozenset(lit for lit in g if lit[0][0] != "loop")
            if groups and groups[-1][0] == g:
                groups[-1][1].append(it)
            else:
                groups.append((g, [it]))
        for g, its in groups:
            ind = indent
            if g:
                self._emit(indent, f"if {self._cond_expr(g)}:", None)
                ind = indent + 1
                self._emit(ind, "pass", None)
            for it in its:
                if it[0] == "loop":
                    self._emit_loop(it[1], ind)
                else:
                    self._emit_node(it[1], ind)

    def _cond_expr(self, g: frozenset) -> str:
        parts = []
        # Outer predicates first: `and` short-circuits before an inner one that never ran.
        for key, val in sorted(g, key=lambda lit: (lit[0][0], lit[0][1], lit[1])):
            var = self.name[key]
            parts.append(var if val else f"not {var}")
        return " and ".join(parts)

    def _emit_loop(self, lp: _Loop, indent: int) -> None:
        # Constant Enters alias their inputs; loop variables start from the other Enters.
        for e in lp.enters:
            src, i = e.inputs[0]
            self.name[(e.id, 0)] = self.name[(src.id, i)]
        mvars = []
        inits = []
        for m in lp.merges:
            enter = m.inputs[0][0]
            var = f"m{m.id}"
            mvars.append(var)
            inits.append(self.name[(enter.id, 0)])
            self.name[(m.id, 0)] = var
            self.name[(m.id, 1)] = f"mi{m.id}"
        for sw in lp.switches:
            m = sw.inputs[0][0]
            self.name[(sw.id, 0)] = self.name[(m.id, 0)]
            self.name[(sw.id, 1)] = self.name[(m.id, 0)]
        it_var = f"_i{lp.id}"
        parent_fid = f"_f{self.loops[lp.parent].id}" if lp.parent else "_f0"
        parent_it = f"_i{self.loops[lp.parent].id}" if lp.parent else "0"
        fid = f"_f{lp.id}"
        own = self._bind(_private_copy)
        # A folded sum's accumulator is not written in the loop: fold_matmuls adds it to the
        # fresh product after the loop (or copies it where the loop made no product).
        folded = {m.id for mm, m in self.deferred.values()}
        inits = [
            f"{own}({init})" if m.id in self.acc_merges and m.id not in folded else init
            for m, init in zip(lp.merges, inits)
        ]
        if mvars:
            self._emit(indent, f"{', '.join(mvars)}, = {', '.join(inits)},", None)
            self._emit(indent, " ; ".join(f"mi{m.id} = 0" for m in lp.merges), None)
        self._emit(indent, f"{fid} = f'{{{parent_fid}}}/{_escape(lp.name)}@{{{parent_it}}}'", None)
        self._emit(indent, f"{it_var} = 0", None)
        deferred = [(a, mm, m) for a, (mm, m) in self.deferred.items() if m in lp.merges]
        rows = self._bind(Rows)
        for add_id, _, _ in deferred:
            self._emit(indent, f"_da{add_id} = {rows}() ; _dg{add_id} = {rows}()", None)
        projected = [n for n in lp.members if n.id in self.projected]
        for n in projected:
            self._emit(indent, f"_p{n.id} = {self._bind(InputProjection)}()", None)
        self._emit(indent, "while True:", None)
        # A loop that never ends (its condition says so) stops at the step's deadline.
        self._emit(indent + 1, "if _st.deadline is not None: _st.check_cancelled()", None)
        self._emit_frame(lp.name, indent + 1)
        nexts = []
        for m in lp.merges:
            nx = m.inputs[1][0]
            src, i = nx.inputs[0]
            nexts.append(self.name[(src.id, i)])
        if mvars:
            self._emit(indent + 1, f"{', '.join(mvars)}, = {', '.join(nexts)},", None)
            self._emit(indent + 1, " ; ".join(f"mi{m.id} = 1" for m in lp.merges), None)
        self._emit(indent + 1, f"{it_var} += 1", None)
        for n in projected:
            self._emit(indent, f"_p{n.id} = None", None)
        fold = self._bind(_fold_matmuls)
        for add_id, mm, m in deferred:
            var = self.name[(m.id, 0)]
            self._emit(indent, f"{var} = {fold}({var}, _da{add_id}, _dg{add_id})", mm)
        for ex in lp.exits:
            sw = ex.inputs[0][0]
            self.name[(ex.id, 0)] = f"x{ex.id}"
            self._emit(indent, f"x{ex.id} = {self.name[(sw.id, 0)]}", ex)

    def _emit_node(self, n, indent: int) -> None:
        t = n.type
        if n.id in self.deferred:
            mm, _ = self.deferred[n.id]
            g = self.name[(mm.inputs[1][0].id, mm.inputs[1][1])]
            cat = self.concat_parts.get(n.id)
            if cat is None:
                a = self.name[(mm.inputs[0][0].id, mm.inputs[0][1])]
                self._emit(indent, f"_da{n.id}.append({a}) ; _dg{n.id}.append({g})", n)
            else:
                *parts, axis = (self.name[(s_.id, i)] for s_, i in cat.inputs)
                concat = self._bind(self.kernels.get(cat).compute)
                self._emit(indent, f"_da{n.id}.append_parts(({', '.join(parts)},), {concat}, "
                                   f"{axis}) ; _dg{n.id}.append({g})", n)  # fmt: skip
            slot = self.acc_adds[n.id]
            acc_src, acc_idx = n.inputs[slot]
            # The accumulator is unchanged until the loop ends.
            self.name[(n.id, 0)] = self.name[(acc_src.id, acc_idx)]
            return
        if t == "MatMul" and any(mm is n for mm, _ in self.deferred.values()):
            return  # computed after the loop, as one GEMM over all iterations
        if t == "ConcatV2" and any(c is n for c in self.concat_parts.values()):
            return  # its parts go straight into the folded MatMul's stacked operand
        args = [self.name[(s.id, i)] for s, i in n.inputs]
        bind = self._bind
        if t == "_Arg":
            var = f"v{n.id}_0"
            self._emit(indent, f"{var} = _a[{self._feed_of[id(n)]}]", n)
            self.name[(n.id, 0)] = var
            return
        if t == "Const":
            self.name[(n.id, 0)] = bind(readonly(const_value(n, self.device)))
            return
        if t in _ALIAS_OPS:
            self.name[(n.id, 0)] = args[0]
            return
        if t in ("ControlTrigger", "NoOp") and not n.num_outputs:
            return
        if t == "Merge":
            pick = self.merge_pick.get(n.id)
            if pick is None:
                raise Unsupported(f"Merge {n.name}")
            key, when_true = pick
            pv = self.name[key]
            a, b = args[when_true], args[1 - when_true]
            ix = bind(_INDEX)
            self._emit(indent, f"v{n.id}_0 = {a} if {pv} else {b}", n)
            self._emit(
                indent, f"v{n.id}_1 = {ix}[{when_true}] if {pv} else {ix}[{1 - when_true}]", n
            )
            self.name[(n.id, 0)] = f"v{n.id}_0"
            self.name[(n.id, 1)] = f"v{n.id}_1"
            return
        if t == "Switch":
            # A cond's Switch forwards data; which side is live is the consumers' guard.
            self.name[(n.id, 0)] = args[0]
            self.name[(n.id, 1)] = args[0]
            return
        if n.id in self.acc_adds:
            slot = self.acc_adds[n.id]
            acc, x = args[slot], args[1 - slot]
            self._emit(indent, self._wrap(f"{bind(_accumulate)}({acc}, {x})", n,
                                          [f"v{n.id}_0"]), n)  # fmt: skip
            self.name[(n.id, 0)] = f"v{n.id}_0"
            return
        kern = self.kernels.get(n)
        if t in _PLAN_TIME_OPS:
            self.name[(n.id, 0)] = bind(kern.compute())  # a handle depends on attrs alone
            return
        k = bind(kern.compute)
        if kern.context:
            args = [self._ctx(n), *args]
        call = f"{k}({', '.join(args)})"
        read = self.projected.get(n.id)
        if read is not None:
            handle, index = (self.name[(s_.id, i)] for s_, i in read.inputs[:2])
            call = f"_p{n.id}.cell({self._ctx(read)}, {handle}, {index}, {k}, {', '.join(args)})"
        outs = [f"v{n.id}_{i}" for i in range(n.num_outputs)]
        self._emit(indent, self._wrap(call, n, outs), n)
        for i, o in enumerate(outs):
            self.name[(n.id, i)] = o

    def _ctx(self, n) -> str:
        """The expression of node n's OpKernelContext."""
        bind = self._bind
        lp = self.loops.get(n.frame) if n.frame else None
        fid = f"_f{lp.id}" if lp else "_f0"
        itv = f"_i{lp.id}" if lp else "0"
        return (f"_Ctx(_st, {bind(n.op)}, {bind(self.device)}, {bind(self.device.resources)}, "
                f"{fid}, {itv})")  # fmt: skip

    def _wrap(self, call: str, node, outs: list[str]) -> str:
        target = ""
        if len(outs) == 1:
            target = f"{outs[0]} = "
        elif outs:
            target = f"{', '.join(outs)}, = "
        if not self._traced_flag:
            return f"{target}{call}"
        rec = self._bind(node)
        res = outs[0] if len(outs) == 1 else ("(" + ", ".join(outs) + ",)" if outs else "()")
        return f"_t0 = _now()\n{target}{call}\n_st.trace({rec}, _t0, _now(), {res})"

    # -- running ----------------------------------------------------------------------------------

    def run(self, feeds: list, step) -> list:
        fn = self._fn
        line_node = self.line_node
        fname = self.filename
        if step.tracing:
            if self._traced is None:
                self._traced = self._compile(traced=True)
            fn, _, line_node = self._traced
            fname = self.filename + "-traced"
        try:
            return fn(feeds, step)
        except BaseException as e:  # noqa: BLE001 - re-raised with the failing op attached
            node = None
            tb = e.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == fname:
                    node = line_node.get(tb.tb_lineno, node)
                tb = tb.tb_next
            raise run_error(e, node) from None

    @property
    def source(self) -> str:
        return self._source


def _private_copy(value):
    """An accumulator's initial value, as an array the loop alone owns."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.copy()
    return np.array(value)


def _accumulate(acc, x):
    """acc + x, written into acc when the shapes allow (acc is private to its loop)."""
    import numpy as np

    if (
        type(acc) is np.ndarray
        and acc.flags.writeable
        and getattr(x, "dtype", None) == acc.dtype
        and np.broadcast_shapes(acc.shape, np.shape(x)) == acc.shape
    ):
        np.add(acc, x, out=acc)
        return acc
    return np.add(acc, x)


class _Dead:
    def __repr__(self) -> str:
        return "<dead>"


_DEAD = _Dead()


def _dead(node, idx):
    from rill.graph.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"fetched tensor {node.name}:{idx} is dead: it is on a branch of a cond that was not "
        "taken in this step",
        op=node.op,
    )


def _index_values():
    import numpy as np

    return (np.int32(0), np.int32(1))


_INDEX = _index_values()


def _escape(name: str) -> str:
    return name.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")
