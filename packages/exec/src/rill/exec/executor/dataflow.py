"""The general dataflow executor: frames, iterations and dead values (control-flow paper §4.3).

Lifetimes are kept apart, as in TensorFlow's executor:

- built once per partition: `DataflowPartition` — the node table (kind, kernel, input slots,
  out-edges, initial pending counts) and the static frame table;
- per step: `_Step` — frame instances, their iteration states and the ready queue;
- scheduling: one scheduler thread (the caller's) owns all step state; expensive kernels run on
  a thread pool and blocking ones (Recv, queue waits) on threads of their own, and report back
  through a completion queue, so no lock guards the step state. As in TensorFlow's executor, one
  expensive kernel is kept back and run inline once the cheap ready work is done, so a chain of
  expensive ops with only cheap ones beside it (a loop's body next to its counter) never pays a
  thread hand-off; a second expensive kernel ready meanwhile goes to the pool.

A value is (value, is_dead) in a slot of an iteration state; its tag is the (frame, iteration)
the slot belongs to. Figure 5's rules: Switch forwards to the taken side and sends a dead value
to the other; Merge fires on its first live input, or dead when all inputs are dead; Enter moves
into iteration 0 of a child frame (constant Enters into every iteration); Exit returns to the
parent frame (a frame that ends without a live exit sends a dead value out); NextIteration
starts the next iteration, unless `parallel_iterations` are already running, in which case it
waits; dead values stop at NextIteration. Ordinary ops with a dead input do not run; _Send and
_Recv run anyway, so deadness crosses devices.
"""

from __future__ import annotations

import collections
import queue
import time
from threading import get_ident

import numpy as np

from rill.exec import threads
from rill.exec.context import OpKernelContext
from rill.exec.executor.common import KernelTable, owned, readonly, run_error
from rill.exec.memory_types import const_value
from rill.exec.rendezvous import make_key
from rill.graph.errors import DeadlineExceededError, InvalidArgumentError

__all__ = ["DataflowPartition"]

_INT32 = [np.int32(i) for i in range(256)]  # Merge's value_index outputs

# A kernel registered as expensive goes to the pool only while its measured running time (a
# moving average over steps) is above this: a hand-off between threads costs tens of µs here,
# so a 4×4 MatMul runs inline and a 192×192 one overlaps with the rest of the step.
_EXPENSIVE_NS = 50_000

NORMAL, CONST, ARG, MERGE, SWITCH, ENTER, EXIT, NEXT, TRIGGER, SEND, RECV, ALIAS = range(12)
_KIND = {
    "Const": CONST,
    "_Arg": ARG,
    "Merge": MERGE,
    "Switch": SWITCH,
    "Enter": ENTER,
    "Exit": EXIT,
    "NextIteration": NEXT,
    "ControlTrigger": TRIGGER,
    "_Send": SEND,
    "_Recv": RECV,
    "Identity": ALIAS,
    "StopGradient": ALIAS,
    "LoopCond": ALIAS,
}


class _Item:
    __slots__ = (
        "id", "node", "kind", "compute", "context", "expensive", "blocking", "num_inputs",
        "local", "frame", "out_edges", "control_edges", "init_pending", "value", "key",
        "child_frame", "is_constant", "parallel_iterations", "fetch_slots", "arg_index",
        "cost_ns",
    )  # fmt: skip


class _FrameInfo:
    __slots__ = ("name", "items", "init_pending", "num_enters", "exits")

    def __init__(self, name):
        self.name = name
        self.items: list[_Item] = []
        self.init_pending: list[int] = []
        self.num_enters = 0
        self.exits: list[_Item] = []


class DataflowPartition:
    """The immutable, per-partition node table. `run` executes one step of it."""

    def __init__(self, part, kernels: KernelTable, pool, blocking_pool):
        self.part = part
        self.device = part.device
        self.pool = pool
        self.blocking_pool = blocking_pool
        nodes = part.nodes
        index = {id(n): i for i, n in enumerate(nodes)}
        self.frames: dict[str, _FrameInfo] = {}
        items = []
        feed_of = {id(a): i for i, a in part.feeds}
        for i, n in enumerate(nodes):
            it = _Item()
            it.id = i
            it.node = n
            it.kind = _KIND.get(n.type, NORMAL)
            it.compute = None
            it.context = it.expensive = it.blocking = False
            it.num_inputs = len(n.inputs)
            it.out_edges = [[] for _ in range(n.num_outputs)]
            it.control_edges = []
            it.value = None
            it.key = None
            it.child_frame = None
            it.is_constant = False
            it.parallel_iterations = 10
            it.fetch_slots = []
            it.arg_index = feed_of.get(id(n), -1)
            fi = self.frames.get(n.frame)
            if fi is None:
                fi = self.frames[n.frame] = _FrameInfo(n.frame)
            it.frame = fi
            it.local = len(fi.items)
            fi.items.append(it)
            if it.kind == NORMAL:
                k = kernels.get(n)
                it.compute, it.context = k.compute, k.context
                # The pool runs context-free kernels only (a context belongs to the scheduler).
                it.expensive, it.blocking = k.expensive and not k.context, k.blocking
                it.cost_ns = _EXPENSIVE_NS
            elif it.kind == CONST:
                it.value = readonly(const_value(n, self.device))
            elif it.kind in (SEND, RECV):
                a = n.attrs
                # The root frame's keys end in "0:0", as the compiled path's do: partitions of one
                # step on different tasks may run on different executors.
                it.key = make_key(a["send_device"], a["send_device_incarnation"],
                                  a["recv_device"], a["tensor_name"], "")  # fmt: skip
                it.blocking = it.kind == RECV
            elif it.kind == ENTER:
                it.child_frame = n.attrs["frame_name"]
                it.is_constant = n.attrs["is_constant"]
                it.parallel_iterations = n.attrs["parallel_iterations"]
            items.append(it)
        for i, n in enumerate(nodes):
            for slot, (src, idx) in enumerate(n.inputs):
                items[index[id(src)]].out_edges[idx].append((items[i], slot))
            for c in n.control_inputs:
                items[index[id(c)]].control_edges.append(items[i])
        for it in items:
            n = it.node
            if it.kind == MERGE:
                it.init_pending = len(n.control_inputs)
            else:
                it.init_pending = it.num_inputs + len(n.control_inputs)
            it.frame.init_pending.append(it.init_pending)
            if it.kind == ENTER:
                child = self.frames.get(it.child_frame)
                if child is None:
                    child = self.frames[it.child_frame] = _FrameInfo(it.child_frame)
                child.num_enters += 1
            if it.kind == EXIT:
                it.frame.exits.append(it)
        for fidx, src, idx in part.fetches:
            items[index[id(src)]].fetch_slots.append((fidx, idx))
        self.items = items
        self.root_ready = [
            it
            for it in items
            if it.frame.name == "" and it.num_inputs == 0 and not it.node.control_inputs
        ]

    def run(self, feeds: list, step, results: dict, inline: bool = False) -> None:
        """inline: every non-blocking kernel on the calling thread (a CUDA graph capture)."""
        _Step(self, feeds, step, results, inline).run()


class _Iteration:
    __slots__ = ("pending", "dead", "inputs", "merge_live", "outstanding_ops", "outstanding_frames")

    def __init__(self, fi: _FrameInfo):
        self.pending = list(fi.init_pending)
        self.dead = [False] * len(fi.items)
        self.inputs: dict[int, list] = {}
        self.merge_live: dict[int, int] = {}
        self.outstanding_ops = 0
        self.outstanding_frames = 0


class _Frame:
    __slots__ = (
        "info", "id", "parent", "parent_iter", "iterations", "iteration_count",
        "outstanding_iterations", "max_parallel", "pending_inputs", "invariants",
        "deferred", "exits_fired", "children",
    )  # fmt: skip

    def __init__(self, info, fid, parent, parent_iter, max_parallel):
        self.info = info
        self.id = fid
        self.parent = parent
        self.parent_iter = parent_iter
        self.iterations = {0: _Iteration(info)}
        self.iteration_count = 0
        self.outstanding_iterations = 1
        self.max_parallel = max_parallel
        self.pending_inputs = info.num_enters
        self.invariants: list = []
        self.deferred: list = []
        self.exits_fired: set = set()
        self.children: dict = {}


class _Step:
    def __init__(self, part: DataflowPartition, feeds, step, results, inline: bool = False):
        self.p = part
        self.inline = inline
        self.feeds = feeds
        self.step = step
        self.results = results
        self.ready = collections.deque()
        self.done_q: queue.SimpleQueue = queue.SimpleQueue()
        self.in_flight = 0
        self.held = None  # the expensive kernel kept back to run inline: (item, frame, it, args)
        self.error = None
        self.fetched_dead: list = []
        root_info = part.frames.get("") or _FrameInfo("")
        self.root = _Frame(root_info, "", None, 0, 1)
        self.root.pending_inputs = 0

    # -- the scheduler loop -------------------------------------------------------------------

    def run(self) -> None:
        root_it = self.root.iterations[0]
        for it in self.p.root_ready:
            root_it.outstanding_ops += 1
            self.ready.append((it, self.root, 0, False))
        ready = self.ready
        done_q = self.done_q
        while True:
            while ready and self.error is None:
                self._process(*ready.popleft())
            if self.held is not None:
                # Completions first: what they make ready may go to the pool before the held
                # kernel occupies this thread.
                if self.in_flight and self.error is None and not done_q.empty():
                    self._complete(done_q.get())
                    continue
                held, self.held = self.held, None
                if self.error is None:
                    self._compute(*held)
                    continue
            if self.error is not None:
                ready.clear()
                if self.in_flight == 0:
                    break
            elif self.in_flight == 0:
                break
            self._complete(done_q.get())
        if self.error is not None:
            raise self.error
        if self.fetched_dead:
            node, idx = self.fetched_dead[0]
            raise InvalidArgumentError(
                f"fetched tensor {node.name}:{idx} is dead: it is on a branch of a cond that was "
                "not taken in this step",
                op=node.op,
            )

    def _complete(self, done) -> None:
        """Takes in one kernel that ran off the scheduler thread."""
        tagged, outputs, dead, exc, t0, t1, thread = done
        self.in_flight -= 1
        if self.error is None:
            if exc is not None:
                self._fail(exc, tagged[0].node)
            else:
                item = tagged[0]
                if item.expensive and not item.blocking:
                    item.cost_ns = (item.cost_ns * 3 + t1 - t0) >> 2
                if self.step.tracing:
                    self.step.trace(tagged[0].node, t0, t1, outputs, thread)
                self._finish(tagged, outputs, dead)

    def _fail(self, exc, node) -> None:
        self.error = run_error(exc, node)
        self.step.cancel(f"step failed in {node.name if node is not None else 'a kernel'}")
        rv = self.step.rendezvous
        if rv is not None:
            rv.abort(self.error)

    # -- running one node ---------------------------------------------------------------------

    def _process(self, item: _Item, frame: _Frame, it: int, is_dead: bool) -> None:
        kind = item.kind
        st = frame.iterations[it]
        args = st.inputs.pop(item.local, None) if item.num_inputs else None
        if kind == RECV:
            self._submit_blocking(item, frame, it, is_dead)
            return
        if kind == SEND:
            try:
                self.step.rendezvous.send(item.key + f"{frame.id or 0}:{it}", args[0] if args else None,
                                          is_dead)  # fmt: skip
            except BaseException as e:  # noqa: BLE001
                self._fail(e, item.node)
                return
            self._finish((item, frame, it, is_dead), (), is_dead)
            return
        if kind == TRIGGER:
            self._finish((item, frame, it, False), (), False)
            return
        if is_dead:
            self._finish((item, frame, it, True), None, True)
            return
        if kind == NORMAL:
            if item.blocking:
                self._submit_blocking(item, frame, it, False, args)
                return
            # Only where a second core is idle: on a busy machine a hand-off waits for the pool
            # thread to be scheduled, milliseconds per kernel (rill.exec.threads.cores_idle).
            if (
                item.expensive
                and item.cost_ns >= _EXPENSIVE_NS
                and self.p.pool is not None
                and not self.inline
                and threads.cores_idle() > 1
            ):
                if self.held is not None:
                    self._submit(item, frame, it, args)
                    return
                if self.ready or self.in_flight:
                    self.held = (item, frame, it, args)
                    return
            self._compute(item, frame, it, args)
            return
        if kind == CONST:
            self._finish((item, frame, it, False), item.value, False)
        elif kind == ARG:
            self._finish((item, frame, it, False), self.feeds[item.arg_index], False)
        elif kind == ALIAS or kind == ENTER or kind == EXIT or kind == NEXT:
            self._finish((item, frame, it, False), args[0], False)
        elif kind == MERGE:
            slot = st.merge_live.pop(item.local)
            self._finish((item, frame, it, False), (args[slot], _INT32[slot]), False)
        elif kind == SWITCH:
            data, pred = args
            if pred:
                self._finish_switch(item, frame, it, data, True)
            else:
                self._finish_switch(item, frame, it, data, False)

    def _compute(self, item: _Item, frame: _Frame, it: int, args) -> None:
        """Runs a live ordinary node's kernel inline, on the scheduler thread."""
        tracing = self.step.tracing
        timed = tracing or item.expensive
        t0 = time.perf_counter_ns() if timed else 0
        try:
            if item.context:
                ctx = OpKernelContext(self.step, item.node.op, self.p.device,
                                      self.p.device.resources, frame.id, it)  # fmt: skip
                out = item.compute(ctx, *args) if args else item.compute(ctx)
            else:
                out = item.compute(*args) if args else item.compute()
        except BaseException as e:  # noqa: BLE001 - attributed to the op
            self._fail(e, item.node)
            return
        if timed:
            t1 = time.perf_counter_ns()
            if item.expensive:
                item.cost_ns = (item.cost_ns * 3 + t1 - t0) >> 2
            if tracing:
                self.step.trace(item.node, t0, t1, out)
        self._finish((item, frame, it, False), out, False)

    def _submit(self, item, frame, it, args) -> None:
        self.in_flight += 1
        tagged = (item, frame, it, False)
        done_q = self.done_q
        compute = item.compute

        def task():
            t0 = time.perf_counter_ns()
            try:
                out = compute(*args) if args else compute()
                done_q.put((tagged, out, False, None, t0, time.perf_counter_ns(), get_ident()))
            except BaseException as e:  # noqa: BLE001
                done_q.put((tagged, None, False, e, 0, 0, 0))

        self.p.pool.submit(task)

    def _submit_blocking(self, item, frame, it, is_dead, args=None) -> None:
        self.in_flight += 1
        tagged = (item, frame, it, is_dead)
        done_q = self.done_q
        step = self.step
        p = self.p

        def task():
            t0 = time.perf_counter_ns() if step.tracing else 0
            try:
                if item.kind == RECV:
                    value, dead = step.rendezvous.recv(item.key + f"{frame.id or 0}:{it}", step)
                    done_q.put((tagged, value, dead, None, t0, time.perf_counter_ns(), get_ident()))
                    return
                if item.context:
                    ctx = OpKernelContext(step, item.node.op, p.device, p.device.resources,
                                          frame.id, it)  # fmt: skip
                    out = item.compute(ctx, *args) if args else item.compute(ctx)
                else:
                    out = item.compute(*args) if args else item.compute()
                done_q.put((tagged, out, False, None, t0, time.perf_counter_ns(), get_ident()))
            except BaseException as e:  # noqa: BLE001
                done_q.put((tagged, None, False, e, 0, 0, 0))

        p.blocking_pool.submit(task)

    # -- propagating outputs ------------------------------------------------------------------

    def _finish(self, tagged, out, is_dead: bool) -> None:
        item, frame, it, _ = tagged
        n_out = len(item.out_edges)
        if n_out == 1:
            outs = (out,)
        elif n_out == 0:
            outs = ()
        else:
            outs = out if not is_dead else (None,) * n_out
            if len(outs) != n_out:
                self._fail(
                    InvalidArgumentError(f"kernel returned {len(outs)} outputs, expected {n_out}"),
                    item.node,
                )
                return
        kind = item.kind
        if kind == ENTER:
            self._enter(item, frame, it, outs[0], is_dead)
        elif kind == EXIT:
            if not is_dead:
                frame.exits_fired.add(item.id)
                self._activate_all(item, frame.parent, frame.parent_iter, outs, False)
        elif kind == NEXT:
            if not is_dead:
                self._next_iteration(item, frame, it, outs[0])
        else:
            self._activate_all(item, frame, it, outs, is_dead)
        self._op_done(frame, it)

    def _finish_switch(self, item, frame, it, data, pred: bool) -> None:
        # Port 0 (output_false) is live iff pred is false; port 1 iff true.
        edges = item.out_edges
        for dst, slot in edges[0]:
            self._activate(dst, frame, it, slot, data, pred)
        for dst, slot in edges[1]:
            self._activate(dst, frame, it, slot, data, not pred)
        for dst in item.control_edges:
            self._activate(dst, frame, it, -1, None, False)
        if item.fetch_slots:
            for fidx, idx in item.fetch_slots:
                if (idx == 1) == pred:
                    self.results[fidx] = owned(data)
                else:
                    self.fetched_dead.append((item.node, idx))
        self._op_done(frame, it)

    def _activate_all(self, item, frame, it, outs, is_dead) -> None:
        if item.fetch_slots and frame is self.root:
            for fidx, idx in item.fetch_slots:
                if is_dead:
                    self.fetched_dead.append((item.node, idx))
                else:
                    self.results[fidx] = owned(outs[idx])
        for idx, edges in enumerate(item.out_edges):
            v = outs[idx] if not is_dead else None
            for dst, slot in edges:
                self._activate(dst, frame, it, slot, v, is_dead)
        for dst in item.control_edges:
            self._activate(dst, frame, it, -1, None, is_dead)

    def _activate(self, dst: _Item, frame: _Frame, it: int, slot: int, value, dead: bool) -> None:
        st = frame.iterations[it]
        local = dst.local
        if dst.kind == MERGE:
            if slot < 0:
                # As in TensorFlow's executor, a Merge waits for its control inputs but their
                # deadness does not matter: it fires live on a live data input (TensorFlow's
                # own lowering of If relies on this: its "branch_executed" Merge has a control
                # input from each branch, one of them always dead).
                st.pending[local] -= 1
            else:
                if local in st.merge_live or st.pending[local] < -1000:
                    return  # already fired in this iteration
                buf = st.inputs.get(local)
                if buf is None:
                    buf = st.inputs[local] = [None] * dst.num_inputs
                    buf.append(0)  # trailing counter of dead data inputs
                if dead:
                    buf[-1] += 1
                else:
                    buf[slot] = value
                    st.merge_live[local] = slot
            if st.pending[local] != 0:
                return
            buf = st.inputs.get(local)
            live = local in st.merge_live
            all_dead = buf is not None and buf[-1] == dst.num_inputs
            if live or all_dead:
                st.pending[local] = -(10**9)  # fired
                st.outstanding_ops += 1
                if live and not st.dead[local]:
                    self.ready.append((dst, frame, it, False))
                else:
                    st.merge_live.pop(local, None)
                    st.inputs.pop(local, None)
                    self.ready.append((dst, frame, it, True))
            return
        if slot >= 0:
            buf = st.inputs.get(local)
            if buf is None:
                buf = st.inputs[local] = [None] * dst.num_inputs
            buf[slot] = value
        if dead:
            st.dead[local] = True
        st.pending[local] -= 1
        if st.pending[local] == 0:
            st.outstanding_ops += 1
            self.ready.append((dst, frame, it, st.dead[local]))

    # -- frames and iterations ----------------------------------------------------------------

    def _enter(self, item: _Item, frame: _Frame, it: int, value, is_dead: bool) -> None:
        key = (item.child_frame, it)
        child = frame.children.get(key)
        if child is None:
            info = self.p.frames[item.child_frame]
            fid = f"{frame.id}/{item.child_frame}@{it}"
            child = _Frame(info, fid, frame, it, max(1, item.parallel_iterations))
            frame.children[key] = child
            frame.iterations[it].outstanding_frames += 1
        if item.is_constant:
            child.invariants.append((item, value, is_dead))
            for i in child.iterations:
                self._activate_all(item, child, i, (value,), is_dead)
        else:
            self._activate_all(item, child, 0, (value,), is_dead)
        child.pending_inputs -= 1
        if child.pending_inputs == 0:
            self._cleanup(child, 0)

    def _next_iteration(self, item: _Item, frame: _Frame, it: int, value) -> None:
        deadline = self.step.deadline
        if deadline is not None and time.monotonic() > deadline:
            # A loop that never ends (its condition says so) stops at the step's deadline.
            self._fail(DeadlineExceededError(
                f"the step ran past its timeout (RunOptions.timeout_in_ms) in while loop "
                f"{frame.info.name!r} after {it + 1} iterations"), None)  # fmt: skip
            return
        if it == frame.iteration_count:
            if frame.outstanding_iterations >= frame.max_parallel:
                frame.deferred.append((item, value))
                return
            self._new_iteration(frame)
        self._activate_all(item, frame, it + 1, (value,), False)

    def _new_iteration(self, frame: _Frame) -> None:
        frame.iteration_count += 1
        frame.outstanding_iterations += 1
        i = frame.iteration_count
        frame.iterations[i] = _Iteration(frame.info)
        for item, value, dead in frame.invariants:
            self._activate_all(item, frame, i, (value,), dead)

    def _op_done(self, frame: _Frame, it: int) -> None:
        frame.iterations[it].outstanding_ops -= 1
        self._cleanup(frame, it)

    def _cleanup(self, frame: _Frame, it: int) -> None:
        while frame is not None:
            cur = it
            while cur in frame.iterations and self._iteration_done(frame, cur):
                del frame.iterations[cur]
                frame.outstanding_iterations -= 1
                cur += 1
                if frame.deferred:
                    # Every deferred value (one per loop variable) is for the same next
                    # iteration: start it once, with all of them.
                    deferred, frame.deferred = frame.deferred, []
                    self._new_iteration(frame)
                    for item, value in deferred:
                        self._activate_all(item, frame, frame.iteration_count, (value,), False)
            if frame.parent is None or frame.pending_inputs > 0 or frame.outstanding_iterations:
                return
            # The frame is done: exits that never fired leave as dead values.
            parent, parent_iter = frame.parent, frame.parent_iter
            for ex in frame.info.exits:
                if ex.id not in frame.exits_fired:
                    self._activate_all(ex, parent, parent_iter, (None,), True)
            del parent.children[(frame.info.name, parent_iter)]
            parent.iterations[parent_iter].outstanding_frames -= 1
            frame, it = parent, parent_iter

    @staticmethod
    def _iteration_done(frame: _Frame, it: int) -> bool:
        st = frame.iterations[it]
        if st.outstanding_ops or st.outstanding_frames:
            return False
        if it == 0:
            return frame.pending_inputs == 0
        return (it - 1) not in frame.iterations
