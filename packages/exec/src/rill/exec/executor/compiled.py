"""The compiled path: a partition without control flow becomes one straight-line Python function.

The function is generated from the partition's nodes in topological order — one line per kernel
call, with constants and kernels bound as closure variables, identity ops as plain aliases, and a
`del` after each value's last use so memory tracks the live set. Only identifiers the planner
makes up (v12, k12) appear in the generated source; nothing from the graph is evaluated.

A failing line maps back to its node, so errors name the op exactly as on the general path.
The general dataflow executor gives the same results (tests run both on the same graphs).
"""

from __future__ import annotations

import itertools
import re
import time

from rill.exec import threads
from rill.exec.context import OpKernelContext
from rill.exec.executor.common import KernelTable, owned, readonly, run_error
from rill.exec.kernels import intra_op
from rill.exec.memory_types import const_value
from rill.exec.rendezvous import make_key

__all__ = ["CompiledPartition"]

_ALIAS_OPS = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient"})
_ids = itertools.count()
# Ops whose output is fixed by their attrs and device: evaluated once when the plan is built.
_PLAN_TIME_OPS = frozenset({"VarHandleOp"})


class CompiledPartition:
    def __init__(self, part, kernels: KernelTable):
        self.part = part
        self.device = part.device
        self.kernels = kernels
        self.filename = f"<rill-plan-{next(_ids)}>"
        self.line_node: dict[int, object] = {}
        self._traced = None
        self._fn, self._source = self._compile(traced=False)

    # -- code generation ----------------------------------------------------------------------

    def _compile(self, traced: bool):
        order = self.part.nodes  # already in a global topological order
        bound: list = []  # closure values

        def bind(value) -> str:
            bound.append(value)
            return f"b{len(bound) - 1}"

        name: dict[tuple[int, int], str] = {}  # (node id, output) -> expression
        last_use: dict[str, int] = {}
        lines: list[tuple[str, object]] = []  # (code, node or None)
        feed_of = {id(a): i for i, a in self.part.feeds}
        pending: dict = {}  # the last line's kernel call, where it may pair with the next
        for n in order:
            args = [name[(s.id, i)] for s, i in n.inputs]
            t = n.type
            if t == "_Arg":
                var = f"v{n.id}"
                lines.append((f"{var} = _a[{feed_of[id(n)]}]", n))
                name[(n.id, 0)] = var
                continue
            if t == "Const":
                var = bind(readonly(const_value(n, self.device)))
                name[(n.id, 0)] = var
                if n.control_inputs:
                    lines.append(("pass", n))
                continue
            if t in _ALIAS_OPS:
                name[(n.id, 0)] = args[0]
                continue
            if t == "_Send":
                key = make_key(n.attrs["send_device"], n.attrs["send_device_incarnation"],
                               n.attrs["recv_device"], n.attrs["tensor_name"])  # fmt: skip
                call = f"_st.rendezvous.send({bind(key)}, {args[0]}, False)"
                lines.append((self._wrap(call, n, traced, [], bind), n))
                continue
            if t == "_Recv":
                key = make_key(n.attrs["send_device"], n.attrs["send_device_incarnation"],
                               n.attrs["recv_device"], n.attrs["tensor_name"])  # fmt: skip
                var = f"v{n.id}"
                call = f"_st.rendezvous.recv({bind(key)}, _st)[0]"
                lines.append((self._wrap(call, n, traced, [var], bind), n))
                name[(n.id, 0)] = var
                continue
            kern = self.kernels.get(n)
            if t in _PLAN_TIME_OPS:
                # A handle depends on attrs alone: compute it once, here.
                name[(n.id, 0)] = bind(kern.compute())
                continue
            outs = [f"v{n.id}_{i}" for i in range(n.num_outputs)]
            prev = lines[-1][1] if lines else None
            if (
                not traced
                and self.device.device_type == "CPU"  # (a GPU kernel's host time is short)
                and _pairable(n, kern)
                and prev is not None
                and prev is pending.get("node")
                and all(s is not prev for s, _ in n.inputs)
                and prev not in n.control_inputs
                # nor through an elided Identity (an ONNX one-input Concat's) on either edge
                and not set(pending["outs"]).intersection(args)
                and not any(
                    c.type in _ALIAS_OPS and name.get((c.id, 0)) in pending["outs"]
                    for c in n.control_inputs
                )
            ):
                # Two independent expensive kernels in a row: one line running both (_Pair).
                pa = bind(_Pair(pending["kernel"].compute, kern.compute, prev, n))
                a_args, a_outs = pending["args"], pending["outs"]
                code = (f"_pa, _pb = {pa}(({''.join(a + ', ' for a in a_args)}), "
                        f"({''.join(a + ', ' for a in args)}))\n"
                        f"{self._wrap('_pa', prev, False, a_outs, bind)}\n"
                        f"{self._wrap('_pb', n, False, outs, bind)}\n"
                        "del _pa, _pb")  # fmt: skip
                lines[-1] = (code, prev)
                pending.clear()
            else:
                k = bind(kern.compute)
                if kern.context:
                    ctx = bind(_ContextMaker(n, self.device))
                    args = [f"{ctx}(_st)", *args]
                call = f"{k}({', '.join(args)})"
                lines.append((self._wrap(call, n, traced, outs, bind), n))
                pending.clear()
                if self.device.device_type == "CPU" and _pairable(n, kern):
                    pending.update(node=n, kernel=kern, args=list(args), outs=outs)
            for i, o in enumerate(outs):
                name[(n.id, i)] = o
        # Free each value right after its last use (fetched values live until the return).
        fetch_exprs = [name[(s.id, i)] for _, s, i in self.part.fetches]
        keep = set(fetch_exprs)
        for idx, (code, _) in enumerate(lines):
            for tok in _identifiers(code):
                last_use[tok] = idx
        body: list[tuple[str, object]] = []
        for idx, (code, node) in enumerate(lines):
            body.append((code, node))
            drop = sorted({t for t in _identifiers(code) if last_use[t] == idx} - keep)
            if drop:
                body.append((f"del {', '.join(drop)}", None))
        # Fetched constants and variable values are read-only state: hand the caller copies.
        rets = [f"_copy({expr})" for expr in fetch_exprs]
        src = ["def _make(_B, _copy, _now, _rec):"]
        for i in range(len(bound)):
            src.append(f"    b{i} = _B[{i}]")
        src.append("    def _run(_a, _st):")
        line_node = {}
        for code, node in body:
            for part in code.split("\n"):
                src.append(f"        {part}")
                if node is not None:
                    line_node[len(src)] = node
        src.append(f"        return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
        src.append("    return _run")
        source = "\n".join(src)
        code = compile(source, self.filename if not traced else self.filename + "-traced", "exec")
        ns: dict = {}
        exec(code, ns)  # noqa: S102 - source generated above from planner-made identifiers only
        if traced:
            self.traced_line_node = line_node
        else:
            self.line_node = line_node
        return ns["_make"](bound, owned, time.perf_counter_ns, None), source

    def _wrap(self, call: str, node, traced: bool, outs: list[str], bind) -> str:
        target = ""
        if len(outs) == 1:
            target = f"{outs[0]} = "
        elif outs:
            target = f"{', '.join(outs)}, = "
        if not traced:
            return f"{target}{call}"
        rec = bind(node)
        res = outs[0] if len(outs) == 1 else ("(" + ", ".join(outs) + ",)" if outs else "()")
        return f"_t0 = _now()\n{target}{call}\n_st.trace({rec}, _t0, _now(), {res})"

    # -- running --------------------------------------------------------------------------------

    def run(self, feeds: list, step) -> list:
        fn = self._fn
        if step.tracing:
            if self._traced is None:
                self._traced, _ = self._compile(traced=True)
            fn = self._traced
        try:
            return fn(feeds, step)
        except BaseException as e:  # noqa: BLE001 - re-raised with the failing op attached
            node = self._failing_node(e)
            raise run_error(e, node) from None

    def _failing_node(self, e: BaseException):
        tb = e.__traceback__
        found = None
        while tb is not None:
            fname = tb.tb_frame.f_code.co_filename
            if fname == self.filename:
                found = self.line_node.get(tb.tb_lineno)
            elif fname == self.filename + "-traced":
                found = self.traced_line_node.get(tb.tb_lineno)
            tb = tb.tb_next
        return found

    @property
    def source(self) -> str:
        return self._source


def _pairable(n, kern) -> bool:
    """Whether node n's kernel may run beside another one (_Pair): registered as expensive, pure
    (no context, not stateful), one output or more."""
    return (
        kern.expensive
        and not kern.context
        and not kern.blocking
        and not n.op_def.is_stateful
        and n.num_outputs >= 1
    )


# The least running time (ns, a moving average over steps) of each of two paired kernels for
# them to run side by side: a hand-off costs tens of µs, and a kernel this long would split its
# own work over the threads anyway. (The MNIST CNN step's pairs: the second convolution's input
# and filter gradients, 5.7 and 6.0 ms on one thread; the first dense layer's, 4.1 and 4.3.)
PAIR_NS = 1_000_000


class _Pair:
    """Two independent expensive kernels, adjacent in the plan's order (a layer's input and
    weight gradients): where both ran long lately and a second core is idle, B runs on an
    intra-op worker while A runs on this thread, each on one thread (A's intra-op bound is
    shared with B: rill.exec.threads.BESIDE; B's nested splits run inline on the worker), as
    TensorFlow's executor runs independent ops on its inter-op threads. Otherwise A then B,
    each split over the threads as usual. Either way each computes exactly what it computes
    alone (kernels' bits never depend on their threads). An error is the first op's that
    failed, named; B is always finished before this returns or raises."""

    __slots__ = ("ka", "kb", "na", "nb", "cost_a", "cost_b")

    def __init__(self, ka, kb, na, nb):
        self.ka, self.kb, self.na, self.nb = ka, kb, na, nb
        self.cost_a = self.cost_b = 0

    def __call__(self, a_args: tuple, b_args: tuple):
        now = time.perf_counter_ns
        job = None
        if self.cost_a >= PAIR_NS and self.cost_b >= PAIR_NS:
            box: list = []
            kb = self.kb

            def side():
                t0 = now()
                box.append(kb(*b_args))
                box.append(now() - t0)

            job = intra_op.hand_off(side)
        if job is None:
            t0 = now()
            ra = self._run(self.ka, a_args, self.na)
            t1 = now()
            rb = self._run(self.kb, b_args, self.nb)
            self.cost_a = (self.cost_a * 3 + t1 - t0) >> 2
            self.cost_b = (self.cost_b * 3 + now() - t1) >> 2
            return ra, rb
        err = None
        threads.BESIDE.append(None)
        t0 = now()
        try:
            ra = self.ka(*a_args)
        except BaseException as e:  # noqa: BLE001 - raised once B has finished
            err = run_error(e, self.na)
        finally:
            threads.BESIDE.pop()
        t1 = now()
        try:
            intra_op.finish(job)  # runs B here if no worker took it; waits for it otherwise
        except BaseException as e:  # noqa: BLE001
            if err is None:
                err = run_error(e, self.nb)
        if err is not None:
            raise err
        self.cost_a = (self.cost_a * 3 + t1 - t0) >> 2
        self.cost_b = (self.cost_b * 3 + box[1]) >> 2
        return ra, box[0]

    @staticmethod
    def _run(k, args, node):
        try:
            return k(*args)
        except BaseException as e:  # noqa: BLE001
            raise run_error(e, node) from None


class _ContextMaker:
    __slots__ = ("node", "device")

    def __init__(self, node, device):
        self.node = node
        self.device = device

    def __call__(self, step):
        return OpKernelContext(step, self.node.op, self.device, self.device.resources)


_IDENT = re.compile(r"\bv\d+(?:_\d+)?\b")


def _identifiers(code: str) -> list[str]:
    return _IDENT.findall(code)
