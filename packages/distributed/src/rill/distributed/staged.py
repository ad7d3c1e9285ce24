"""Staged steps: a step that runs on the master's own task and one other rill task, made by the
master's thread as a chain of RunGraph calls instead of concurrent calls whose tasks pull values
from each other.

The common between-graph step is this shape: the parameter server's part reads variables
(stage A), the worker computes on them (stage M1), the parameter server applies what the worker
sends (stage B), and the worker's own sinks wait for that (stage M2: the train op's control
inputs). Cut there, every value crosses in a request or a response of the call that needs or
makes it: A's response carries the variables, B's request the gradients, B's response the
control edges. A step is then two unary calls to the other task made by the thread that serves
RunStep (no pull streams, no hand-off to a pool thread, no cross-thread waits), where the
concurrent form needs a RunGraph and two pull streams each way.

`split` cuts a plan's two partitions at registration; it declines (None) whatever it cannot
cut safely, and such steps run as before: control flow (dead values, loop frames), a third
task or a second device, a value the cut would have to carry inside one task, a worker sink
whose result goes back to the other task, or another task that is not rill's (a TensorFlow
worker pulls instead). The stages of one task run one after the other in one step (RunGraph's
is_partial keeps the step's rendezvous between them): an op waiting, inside one step, for a
side effect of an op of a later stage of the same task (a dequeue before the enqueue that
feeds it) would wait for its deadline; the executors never promised an order between ops
without a dependency.
"""

from __future__ import annotations

from rill.distributed.plan import TaskPart
from rill.distributed.rendezvous import task_of_device
from rill.distributed.steps import InProcess, first_error
from rill.distributed.wire import tensor_into
from rill.exec.plan.ir import CONTROL_FLOW_OPS
from rill.exec.rendezvous import make_key
from rill.graph.graph_def import attr_to_proto
from rill.graph.proto import attr_value_pb2 as attr_pb2

__all__ = ["Stage", "split"]

# Nodes without inputs that only name a resource (creating it the first time, like every step
# does) or a constant: a later stage gets its own copy instead of a value carried over.
_COPYABLE = frozenset(
    {"VariableV2", "Variable", "VariableV1", "VarHandleOp", "Const"}
    | {
        f"{q}{v}"
        for q in ("FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue")
        for v in ("", "V2")
    }  # fmt: skip
    | {
        "ConditionalAccumulator",
        "SparseConditionalAccumulator",
        "ResourceConditionalAccumulator",
        "ResourceSparseConditionalAccumulator",
    }  # fmt: skip
    | {
        f"{t}{v}"
        for t in (
            "HashTable",
            "MutableHashTable",
            "MutableHashTableOfTensors",
            "MutableDenseHashTable",
        )
        for v in ("", "V2")
    }  # fmt: skip
)
_FLOW = frozenset(CONTROL_FLOW_OPS) | {f"Ref{t}" for t in CONTROL_FLOW_OPS}
RILL_DEVICE_DESC = "rill CPU device"


class Stage(TaskPart):
    """One stage: a TaskPart plus the cross-task keys it takes (`needs`) and makes (`makes`),
    and whether another stage of its task follows in the step (`more`)."""

    __slots__ = ("needs", "makes", "more", "local", "group")

    def __init__(self, tp: TaskPart, local: bool):
        super().__init__(tp.job, tp.task)
        self.graph_def.versions.CopyFrom(tp.graph_def.versions)
        self.graph_def.library.CopyFrom(tp.graph_def.library)
        self.needs: list[str] = []
        self.makes: list[str] = []
        self.more = False
        self.local = local
        self.group = 0  # stages of one group run together (A: 0, M1: 1, B: 2, M2: 3)


def _key(nd) -> str:
    a = nd.attr
    return make_key(a["send_device"].s.decode(), a["send_device_incarnation"].i,
                    a["recv_device"].s.decode(), a["tensor_name"].s.decode())  # fmt: skip


def _inputs(nd):
    """[(source node name, is_control)] of a NodeDef."""
    out = []
    for ref in nd.input:
        if ref.startswith("^"):
            out.append((ref[1:], True))
        else:
            out.append((ref.partition(":")[0], False))
    return out


def _closure(nodes: dict, roots: set) -> set:
    """Names of `roots` and every node that depends on one of them (data or control)."""
    consumers: dict = {}
    for name, nd in nodes.items():
        for src, _ in _inputs(nd):
            consumers.setdefault(src, []).append(name)
    seen, todo = set(roots), list(roots)
    while todo:
        for c in consumers.get(todo.pop(), ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _cross(nodes: dict, peers: set):
    """(recvs, sends) of a partition: {node name: key} of its _Recv / _Send nodes whose other end
    is one of the tasks `peers`; None when one talks to another task or within this one."""
    recvs, sends = {}, {}
    for name, nd in nodes.items():
        if nd.op in _FLOW:
            return None
        if nd.op not in ("_Recv", "_Send") or nd.attr["client_terminated"].b:
            continue
        peer = "send_device" if nd.op == "_Recv" else "recv_device"
        if task_of_device(nd.attr[peer].s.decode()) not in peers:
            return None
        (recvs if nd.op == "_Recv" else sends)[name] = _key(nd)
    return recvs, sends


def _carry(early: Stage, late: Stage, src, idx: int, dtype) -> str:
    """A _Send of output `idx` of `src` in `early` and its _Recv in `late` (same device); the
    _Recv's name."""
    dt = attr_to_proto(dtype, "type")
    attrs = {
        "tensor_name": attr_pb2.AttrValue(s=f"rill_stage_{src.name}:{idx}".encode()),
        "send_device": attr_pb2.AttrValue(s=src.device.encode()),
        "send_device_incarnation": attr_pb2.AttrValue(i=1),
        "recv_device": attr_pb2.AttrValue(s=src.device.encode()),
        "client_terminated": attr_pb2.AttrValue(b=False),
    }
    send = early.graph_def.node.add(name=f"{src.name}/_rill_stage_send_{idx}", op="_Send",
                                    device=src.device)  # fmt: skip
    send.input.append(src.name if idx == 0 else f"{src.name}:{idx}")
    recv = late.graph_def.node.add(name=f"{src.name}/_rill_stage_recv_{idx}", op="_Recv",
                                   device=src.device)  # fmt: skip
    for k, v in attrs.items():
        send.attr[k].CopyFrom(v)
        recv.attr[k].CopyFrom(v)
    send.attr["T"].CopyFrom(dt)
    recv.attr["tensor_type"].CopyFrom(dt)
    return recv.name


def _cut(tp: TaskPart, nodes: dict, later: set, local: bool):
    """(early, late) Stages of `tp`: the nodes outside `later`, and `later` with copies of the
    copyable nodes it reads from the early side; None when a value would have to cross."""
    early, late = Stage(tp, local), Stage(tp, local)
    copied: set = set()
    carries: dict = {}  # (node, output) -> the _Recv of the late stage that takes it
    for name, nd in nodes.items():
        if name not in later:
            early.graph_def.node.add().CopyFrom(nd)
            continue
        new = late.graph_def.node.add()
        new.CopyFrom(nd)
        del new.input[:]
        for ref, (src, control) in zip(nd.input, _inputs(nd)):
            if src in later:
                new.input.append(ref)
            elif control:
                continue  # the earlier stage has finished before this one starts
            elif nodes[src].op in _COPYABLE and not nodes[src].input:
                if src not in copied:
                    copied.add(src)
                    late.graph_def.node.add().CopyFrom(nodes[src])
                new.input.append(ref)
            elif local:
                # The master's own task: the value stays in this process, made by the early
                # stage and handed to the late one like a value from another task.
                idx = int(ref.partition(":")[2] or 0)
                recv = carries.get((src, idx))
                if recv is None:
                    dtypes = tp.dtypes.get(src)
                    if dtypes is None or idx >= len(dtypes):
                        return None
                    recv = carries[(src, idx)] = _carry(early, late, nodes[src], idx, dtypes[idx])
                new.input.append(recv)
            else:
                return None
    for stage in (early, late):
        keys = {_key(nd) for nd in stage.graph_def.node
                if nd.op in ("_Recv", "_Send") and nd.attr["client_terminated"].b}  # fmt: skip
        stage.feeds = [(i, k) for i, k in tp.feeds if k in keys]
        stage.fetches = [(i, k) for i, k in tp.fetches if k in keys]
    return early, late


def split(parts: list, local_task, device_attrs) -> list | None:
    """The stages of a plan's partitions in the order they run, or None (run them as they are).

    `parts` are the plan's TaskParts, `local_task` (job, task) the master's own task, and
    `device_attrs` the session's DeviceAttributes (every other task must be a rill task). With
    several other tasks, each of A and B holds one stage per task (`group` tells which stages
    run together, their calls in parallel); a value between two other tasks declines."""
    if len(parts) < 2:
        return None
    mine = [tp for tp in parts if (tp.job, tp.task) == local_task]
    if len(mine) != 1:
        return None
    m = mine[0]
    others = [tp for tp in parts if tp is not m]
    for r in others:
        descs = [da.physical_device_desc for da in device_attrs if da.name.startswith(r.name + "/")]
        if not descs or any(d != RILL_DEVICE_DESC for d in descs):
            return None
    for tp in parts:
        if {nd.device for nd in tp.graph_def.node} != {tp.graph_def.node[0].device}:
            return None
    m_nodes = {nd.name: nd for nd in m.graph_def.node}
    mc = _cross(m_nodes, {(r.job, r.task) for r in others})
    if mc is None:
        return None
    m_recvs, m_sends = mc
    # Each other task's part that waits for this task's values (B), and this task's part that
    # waits for the B's values (M2); nothing in M2 may send back to another task.
    late_keys: set = set()
    early, late = [], []
    for r in others:
        r_nodes = {nd.name: nd for nd in r.graph_def.node}
        rc = _cross(r_nodes, {(m.job, m.task)})
        if rc is None:
            return None
        r_recvs, r_sends = rc
        b = _closure(r_nodes, set(r_recvs))
        late_keys.update(k for n, k in r_sends.items() if n in b)
        rcut = _cut(r, r_nodes, b, False)
        if rcut is None:
            return None
        early.append(rcut[0])
        late.append(rcut[1])
    m2 = _closure(m_nodes, {n for n, k in m_recvs.items() if k in late_keys})
    if any(n in m2 for n in m_sends):
        return None
    mcut = _cut(m, m_nodes, m2, True)
    if mcut is None:
        return None
    stages = []
    for group, members in enumerate((early, [mcut[0]], late, [mcut[1]])):
        for s in members:
            # A stage of only resources and constants (the others' copies) does nothing.
            if any(nd.op not in _COPYABLE or nd.input for nd in s.graph_def.node):
                s.group = group
                stages.append(s)
    made: set = set()
    for group in range(4):
        members = [s for s in stages if s.group == group]
        for s in members:
            for nd in s.graph_def.node:
                if nd.op in ("_Recv", "_Send") and not nd.attr["client_terminated"].b:
                    (s.needs if nd.op == "_Recv" else s.makes).append(_key(nd))
            if not made.issuperset(s.needs):
                return None  # a value this stage takes comes from no earlier group
        for s in members:
            made.update(s.makes)
    for i, s in enumerate(stages):
        s.more = any((t.job, t.task) == (s.job, s.task) for t in stages[i + 1 :])
    return stages


def request_values(stage: Stage, req, carried: dict) -> None:
    """Puts the values `stage` takes from earlier stages into its (remote) RunGraph request."""
    for key in stage.needs:
        v = carried.pop(key)
        nt = req.send.add(name=key)
        if hasattr(v, "SerializeToString"):
            nt.tensor.CopyFrom(v)
        else:
            tensor_into(nt.tensor, v)


def run(master, sess, plan, feed_protos: list, deadline, step_stats=None, context=None) -> list:
    """Runs a staged plan's step: each stage in turn, on this thread; its fetched values."""
    import secrets
    import threading

    from rill.distributed.proto import worker_pb2
    from rill.graph.errors import CancelledError, OpError

    step_id = secrets.randbits(63) or 1
    results = [None] * len(plan.fetches)
    errors: list = []
    aborted = threading.Event()

    def abort_all(err):
        errors.append(err)
        if not aborted.is_set():
            aborted.set()
            master._cleanup(plan, step_id)

    with master._lock:
        master._active[step_id] = plan
    running = [True]
    if context is not None:

        def gone():
            if running[0]:
                abort_all(CancelledError(f"the client cancelled step {step_id}"))

        context.add_callback(gone)
    carried: dict = {}  # key -> value one stage made for a later one

    def request(st):
        req = worker_pb2.RunGraphRequest(session_handle=sess.handle, graph_handle=st.handle,
                                         step_id=step_id, store_errors_in_response_body=True,
                                         create_worker_session_called=True,
                                         is_partial=True, is_last_partial_run=not st.more)  # fmt: skip
        req.recv_key.extend(st.makes)
        req.recv_key.extend(k for _, k in st.fetches)
        if step_stats is not None:
            req.exec_opts.record_timeline = True
        if not st.local:
            for i, key in st.feeds:
                nt = req.send.add(name=key)
                nt.tensor.CopyFrom(feed_protos[i])
            request_values(st, req, carried)
        return req

    def received(st, resp) -> bool:
        if not master._collect(st, resp, results, abort_all, step_stats, step_id, deadline):
            return False
        if st.makes:
            made = set(st.makes)
            for nt in resp.recv:
                if nt.name in made:
                    carried[nt.name] = nt.tensor
        return True

    try:
        groups: list = []
        for st in plan.stages:
            if groups and groups[-1][0].group == st.group:
                groups[-1].append(st)
            else:
                groups.append([st])
        for group in groups:
            if aborted.is_set():
                break
            if len(group) > 1:
                # One stage on each of several other tasks: their calls go out together (on the
                # master's call threads, each with the step's deadline) and the group ends when
                # all have returned; a failed one aborts the step, which ends the others.
                timeout = master._timeout(deadline)
                calls = []
                for st in group:
                    fut = master._call(st.address, "RunGraph", request(st),
                                       worker_pb2.RunGraphResponse, timeout)  # fmt: skip
                    fut.add_done_callback(lambda f, st=st: master._on_done(f, st, abort_all))
                    calls.append((st, fut))
                for st, fut in calls:
                    try:
                        resp = master._wait(fut, st.name, st.address)
                    except OpError as e:
                        abort_all(e)
                        continue
                    if not aborted.is_set():
                        received(st, resp)
                continue
            st = group[0]
            req = request(st)
            if st.local:
                values: dict = {}
                feeds = [(key, feed_protos[i]) for i, key in st.feeds]
                feeds.extend((key, carried.pop(key)) for key in st.needs)
                resp = master.server._worker.RunGraph(req, InProcess(deadline), values, feeds)
                if not master._collect(st, resp, results, abort_all, step_stats, step_id):
                    break
                for i, key in st.fetches:
                    results[i] = values.get(key)
                for key in st.makes:
                    carried[key] = values[key]
                continue
            resp = master._call_inline(st, req, master._timeout(deadline), abort_all)
            if resp is None or not received(st, resp):
                break
    except BaseException as e:
        abort_all(e)
        raise
    finally:
        running[0] = False
        with master._lock:
            master._active.pop(step_id, None)
    if errors:
        raise first_error(errors)
    return results
