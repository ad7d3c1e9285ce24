"""Staged steps: a step that runs on the master's own task and other rill tasks, made by the
master's thread as a chain of RunGraph calls instead of concurrent calls whose tasks pull values
from each other.

The common between-graph step is this shape: the parameter servers' parts read variables
(stage A), the worker computes on them (stage M1), the parameter servers apply what the worker
sends (stage B), and the worker's own sinks wait for that (stage M2: the train op's control
inputs). Cut there, every value crosses in a request or a response of the call that needs or
makes it: A's response carries the variables, B's request the gradients. A step is then unary
calls made by the thread that serves RunStep (no pull streams, no cross-thread waits), the
calls of one group to several tasks in parallel. A last stage of the master's that only waits
(M2) is dropped with the acknowledgements it waited for: B's calls return when B has run. A
small constant of the master's that another task takes (a learning rate) is copied into that
task's stage instead of riding in its requests.

In general the stages alternate in groups: the other tasks' nodes run in even groups and the
master's in odd ones, each node in the first group of its task's parity after its inputs (a
value from another task: after the group that sends it). An embedding step is M1 (partition the
ids), B1 (the PS gather), M2 (the gradients), B2 (the PS apply). A value one stage takes
from an earlier stage of its own task is carried in process (the master's task), sent again by
the master (another task's value the master sent it before), or copied (resources and
constants).

`split` cuts a plan's partitions at registration; it declines (None) whatever it cannot cut
safely, and such steps run as before: control flow (dead values, loop frames), a value between
two tasks that are not the master's, a second device, any other value that would cross inside
another task, or another task that is not rill's (a TensorFlow worker pulls instead). The
stages of one task run one after the other in one step (RunGraph's is_partial keeps the step's
rendezvous between them): an op waiting, inside one step, for a side effect of an op of a later
stage of the same task (a dequeue before the enqueue that feeds it) would wait for its
deadline; the executors never promised an order between ops without a dependency.
"""

from __future__ import annotations

from rill.distributed import direct
from rill.distributed.plan import TaskPart
from rill.distributed.rendezvous import task_of_device
from rill.distributed.steps import InProcess, first_error
from rill.distributed.wire import tensor_into
from rill.exec.plan.ir import CONTROL_FLOW_OPS
from rill.exec.rendezvous import make_key
from rill.graph.graph_def import attr_to_proto
from rill.graph.proto import attr_value_pb2 as attr_pb2

__all__ = ["Stage", "group_stages", "split"]

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

    __slots__ = ("needs", "makes", "more", "local", "group", "aliases")

    def __init__(self, tp: TaskPart, local: bool):
        super().__init__(tp.job, tp.task)
        self.graph_def.versions.CopyFrom(tp.graph_def.versions)
        self.graph_def.library.CopyFrom(tp.graph_def.library)
        self.needs: list[str] = []
        self.makes: list[str] = []
        self.more = False
        self.local = local
        self.group = 0  # stages of one group run together: the master's odd, the others' even
        self.aliases: dict = {}  # a key this stage takes again -> the key it was first sent as


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
    """A _Send of output `idx` of `src` in `early` (once) and its _Recv in `late` (same device);
    the _Recv's name."""
    dt = attr_to_proto(dtype, "type")
    attrs = {
        "tensor_name": attr_pb2.AttrValue(s=f"rill_stage_{src.name}:{idx}".encode()),
        "send_device": attr_pb2.AttrValue(s=src.device.encode()),
        "send_device_incarnation": attr_pb2.AttrValue(i=1),
        "recv_device": attr_pb2.AttrValue(s=src.device.encode()),
        "client_terminated": attr_pb2.AttrValue(b=False),
    }
    send_name = f"{src.name}/_rill_stage_send_{idx}"
    if not any(nd.name == send_name for nd in early.graph_def.node):
        send = early.graph_def.node.add(name=send_name, op="_Send", device=src.device)
        send.input.append(src.name if idx == 0 else f"{src.name}:{idx}")
        for k, v in attrs.items():
            send.attr[k].CopyFrom(v)
        send.attr["T"].CopyFrom(dt)
    recv = late.graph_def.node.add(name=f"{src.name}/_rill_stage_recv_{idx}", op="_Recv",
                                   device=src.device)  # fmt: skip
    for k, v in attrs.items():
        recv.attr[k].CopyFrom(v)
    recv.attr["tensor_type"].CopyFrom(dt)
    return recv.name


def _groups(parts_nodes: list, master: int) -> dict | None:
    """{(part index, node name): group}: the master's part runs in odd groups, the others in
    even ones; a node runs in the first group of its task's parity after its inputs' groups (a
    value from another task: after the group that sends it)."""
    sender = {}
    for i, nodes in enumerate(parts_nodes):
        for name, nd in nodes.items():
            if nd.op == "_Send" and not nd.attr["client_terminated"].b:
                sender[_key(nd)] = (i, name)
    memo: dict = {}
    expanding: set = set()
    for i, nodes in enumerate(parts_nodes):
        for root in nodes:
            todo = [(i, root)]
            while todo:
                at = todo[-1]
                if at in memo:
                    todo.pop()
                    continue
                nd = parts_nodes[at[0]][at[1]]
                if nd.op == "_Recv" and not nd.attr["client_terminated"].b:
                    deps = [sender.get(_key(nd))]
                    if deps[0] is None:
                        return None
                else:
                    deps = [(at[0], src) for src, _ in _inputs(nd)]
                missing = [d for d in deps if d not in memo]
                if missing:
                    if at in expanding or any(d in expanding for d in missing):
                        return None  # a cycle: nothing a plan makes
                    expanding.add(at)
                    todo.extend(missing)
                    continue
                expanding.discard(at)
                parity = 1 if at[0] == master else 0
                g = max((memo[d] + (d[0] != at[0]) for d in deps), default=parity)
                memo[at] = g if g % 2 == parity else g + 1
                todo.pop()
    return memo


def _cut(tp: TaskPart, nodes: dict, group_of: dict, local: bool, aliases: dict):
    """{group: Stage} of `tp`, each node in its group's stage; a later stage gets copies of the
    copyable nodes it reads from an earlier one, and (the master's task) values from an earlier
    stage in process, or (another task) a value its earlier stage took from the master again;
    None when any other value would have to cross inside the task."""
    stages: dict = {}
    for g in sorted(set(group_of.values())):
        stages[g] = Stage(tp, local)
        stages[g].group = g
    copied: set = set()
    carries: dict = {}
    for name, nd in nodes.items():
        g = group_of[name]
        st = stages[g]
        new = st.graph_def.node.add()
        new.CopyFrom(nd)
        del new.input[:]
        for ref, (src, control) in zip(nd.input, _inputs(nd)):
            sg = group_of[src]
            if sg == g:
                new.input.append(ref)
            elif control:
                continue  # the earlier stage has finished before this one starts
            elif nodes[src].op in _COPYABLE and not nodes[src].input:
                if (src, g) not in copied:
                    copied.add((src, g))
                    st.graph_def.node.add().CopyFrom(nodes[src])
                new.input.append(ref)
            elif local:
                idx = int(ref.partition(":")[2] or 0)
                recv = carries.get((src, idx, g))
                if recv is None:
                    dtypes = tp.dtypes.get(src)
                    if dtypes is None or idx >= len(dtypes):
                        return None
                    recv = _carry(stages[sg], st, nodes[src], idx, dtypes[idx])
                    carries[(src, idx, g)] = recv
                new.input.append(recv)
            elif nodes[src].op == "_Recv" and not nodes[src].attr["client_terminated"].b:
                # The master sent this value for an earlier stage: it sends it again.
                if (src, g) not in copied:
                    copied.add((src, g))
                    again = st.graph_def.node.add()
                    again.CopyFrom(nodes[src])
                    tname = f"{nodes[src].attr['tensor_name'].s.decode()}/rill_again_{g}"
                    again.attr["tensor_name"].s = tname.encode()
                    aliases[_key(again)] = _key(nodes[src])
                new.input.append(ref)
            else:
                return None
    for stage in stages.values():
        keys = {_key(nd) for nd in stage.graph_def.node
                if nd.op in ("_Recv", "_Send") and nd.attr["client_terminated"].b}  # fmt: skip
        stage.feeds = [(i, k) for i, k in tp.feeds if k in keys]
        stage.fetches = [(i, k) for i, k in tp.fetches if k in keys]
    return stages


# A constant of the master's that another task takes (a learning rate) is copied into that task's
# stage instead of riding in every request, up to this size.
_FOLD_BYTES = 1024


def _fold_constants(parts_nodes: list, master: int) -> None:
    """Replaces each _Recv of another task whose value is a small Const of the master's by a copy
    of that Const, and drops the master's _Send (and the Const when nothing else reads it).
    `parts_nodes` are the partitions' {name: NodeDef}; the NodeDefs themselves are not changed."""
    mine = parts_nodes[master]
    sends = {_key(nd): nd for nd in mine.values()
             if nd.op == "_Send" and not nd.attr["client_terminated"].b}  # fmt: skip
    folded = set()
    for i, nodes in enumerate(parts_nodes):
        if i == master:
            continue
        for name, nd in list(nodes.items()):
            if nd.op != "_Recv" or nd.attr["client_terminated"].b or nd.input:
                continue
            send = sends.get(_key(nd))
            src = mine.get(send.input[0].partition(":")[0]) if send is not None else None
            if (
                src is None
                or src.op != "Const"
                or src.input
                or send.input[0].partition(":")[2] not in ("", "0")
                or src.attr["value"].tensor.ByteSize() > _FOLD_BYTES
            ):
                continue
            const = type(nd)(name=nd.name, op="Const", device=nd.device)
            const.attr["dtype"].CopyFrom(src.attr["dtype"])
            const.attr["value"].CopyFrom(src.attr["value"])
            nodes[name] = const
            del mine[send.name]
            folded.add(src.name)
    used = {ref.lstrip("^").partition(":")[0] for nd in mine.values() for ref in nd.input}
    for name in folded - used:
        del mine[name]


def _drop_last_wait(stages: list) -> None:
    """Drops the last stage when it is the master's and only waits for the stages before it
    (NoOps on control values from other tasks: a train op's wait for the parameter servers'
    updates), with the _Sends of those control values. The step's last group of calls returns
    only when every op of its stages has run, so the master's extra stage and the tasks'
    acknowledgements add nothing but a run and a value per task."""
    if len(stages) < 2:
        return
    last = stages[-1]
    if not last.local or last.feeds or last.fetches:
        return
    waits = set()
    for nd in last.graph_def.node:
        if nd.op == "_Recv" and not nd.attr["client_terminated"].b:
            waits.add(_key(nd))
        elif nd.op != "NoOp" and not (nd.op in _COPYABLE and not nd.input):
            return
    stages.pop()
    for st in stages:
        nodes = st.graph_def.node
        gone = {nd.name for nd in nodes if nd.op == "_Send" and _key(nd) in waits}
        if not gone:
            continue
        srcs = {nd.input[0].partition(":")[0] for nd in nodes if nd.name in gone}
        used = {ref.lstrip("^").partition(":")[0] for nd in nodes if nd.name not in gone
                for ref in nd.input}  # fmt: skip
        # The control value's dummy constant goes with its _Send when nothing else reads it.
        gone |= {nd.name for nd in nodes if nd.name in srcs and nd.op == "Const" and
                 nd.name not in used}  # fmt: skip
        keep = [nd for nd in nodes if nd.name not in gone]
        del nodes[:]
        nodes.extend(keep)


def split(parts: list, local_task, device_attrs) -> list | None:
    """The stages of a plan's partitions in the order they run, or None (run them as they are).

    `parts` are the plan's TaskParts, `local_task` (job, task) the master's own task, and
    `device_attrs` the session's DeviceAttributes (every other task must be a rill task). The
    stages alternate: the other tasks' (one group, their calls made together), the master's,
    the others' again... (`group` numbers them); a value between two other tasks declines."""
    if len(parts) < 2:
        return None
    mine = [i for i, tp in enumerate(parts) if (tp.job, tp.task) == local_task]
    if len(mine) != 1:
        return None
    master = mine[0]
    m = parts[master]
    others = [tp for tp in parts if tp is not m]
    for r in others:
        descs = [da.physical_device_desc for da in device_attrs if da.name.startswith(r.name + "/")]
        if not descs or any(d != RILL_DEVICE_DESC for d in descs):
            return None
    for tp in parts:
        if {nd.device for nd in tp.graph_def.node} != {tp.graph_def.node[0].device}:
            return None
    parts_nodes = [{nd.name: nd for nd in tp.graph_def.node} for tp in parts]
    for i in range(len(parts)):
        peers = {(r.job, r.task) for r in others} if i == master else {(m.job, m.task)}
        if _cross(parts_nodes[i], peers) is None:
            return None
    _fold_constants(parts_nodes, master)
    groups = _groups(parts_nodes, master)
    if groups is None:
        return None
    aliases: dict = {}  # key a stage takes again -> the key the master has its value under
    stages = []
    for i, tp in enumerate(parts):
        cut = _cut(tp, parts_nodes[i], {n: groups[(i, n)] for n in parts_nodes[i]},
                   i == master, aliases)  # fmt: skip
        if cut is None:
            return None
        # A stage of only resources and constants (the others' copies) does nothing.
        stages.extend(s for s in cut.values()
                      if any(nd.op not in _COPYABLE or nd.input for nd in s.graph_def.node))  # fmt: skip
    stages.sort(key=lambda s: (s.group, s.local))
    _drop_last_wait(stages)
    made: set = set()
    for group in sorted({s.group for s in stages}):
        members = [s for s in stages if s.group == group]
        for s in members:
            for nd in s.graph_def.node:
                if nd.op in ("_Recv", "_Send") and not nd.attr["client_terminated"].b:
                    (s.needs if nd.op == "_Recv" else s.makes).append(_key(nd))
            s.aliases = {k: aliases[k] for k in s.needs if k in aliases}
            if not made.issuperset(s.aliases.get(k, k) for k in s.needs):
                return None  # a value this stage takes comes from no earlier group
        for s in members:
            made.update(s.makes)
    for i, s in enumerate(stages):
        s.more = any((t.job, t.task) == (s.job, s.task) for t in stages[i + 1 :])
    return stages


def group_stages(stages: list) -> list:
    """`stages` (split's order) as the groups a step runs: runs of stages with the same group."""
    groups: list = []
    for st in stages:
        if groups and groups[-1][0].group == st.group:
            groups[-1].append(st)
        else:
            groups.append([st])
    return groups


def request_values(stage: Stage, req, carried: dict, parts: list | None = None) -> None:
    """Puts the values `stage` takes from earlier stages into its (remote) RunGraph request;
    with `parts` (a call on the direct transport) an array goes there instead, as the bytes
    direct.tensor_parts makes to follow the request's."""
    for key in stage.needs:
        v = carried[stage.aliases.get(key, key)]
        if parts is not None:
            more = direct.tensor_parts(3, key, v)  # RunGraphRequest.send
            if more is not None:
                parts.extend(more)
                continue
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
            parts = [] if master._direct_at.get(st.address) is not None else None
            request_values(st, req, carried, parts)
            return req, parts
        return req, None

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
        for group in plan.stage_groups:
            if aborted.is_set():
                break
            if len(group) > 1:
                # One stage on each of several other tasks: their calls go out together (on the
                # master's call threads, each with the step's deadline) and the group ends when
                # all have returned; a failed one aborts the step, which ends the others.
                # The last stage's call is made on this thread meanwhile.
                timeout = master._timeout(deadline)
                calls = []
                for st in group[:-1]:
                    req, parts = request(st)
                    fut = master._call(st.address, "RunGraph", req, worker_pb2.RunGraphResponse,
                                       timeout, who=st.name, parts=parts)  # fmt: skip
                    fut.add_done_callback(lambda f, st=st: master._on_done(f, st, abort_all))
                    calls.append((st, fut))
                parts = None
                last = group[-1]
                resp = master._call_inline(last, *request(last), timeout, abort_all)
                if resp is not None and not aborted.is_set():
                    received(last, resp)
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
            req, parts = request(st)
            if st.local:
                values: dict = {}
                feeds = [(key, feed_protos[i]) for i, key in st.feeds]
                feeds.extend((key, carried[st.aliases.get(key, key)]) for key in st.needs)
                resp = master.server._worker.RunGraph(req, InProcess(deadline), values, feeds)
                if not master._collect(st, resp, results, abort_all, step_stats, step_id):
                    break
                for i, key in st.fetches:
                    results[i] = values.get(key)
                for key in st.makes:
                    carried[key] = values[key]
                continue
            resp = master._call_inline(st, req, parts, master._timeout(deadline), abort_all)
            parts = None  # it may hold arrays of this task's variables: not past the call
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
