"""The worker service (`/tensorflow.WorkerService/*`): runs registered partitions of a step.

A registered graph is a partition GraphDef as a master sends it: ordinary nodes plus `_Send` /
`_Recv` pairs; feeds are client-terminated `_Recv`s whose values arrive in `RunGraph.send`, and
fetches are client-terminated `_Send`s whose values go back in `RunGraphResponse.recv`. The
worker imports it into a rill Graph and runs it with rill.exec's Session machinery (the
compiled, structured or dataflow executors, unchanged) on the task's devices, whose resources
(variables, queues) outlive steps and are shared by every graph registered here.
"""

from __future__ import annotations

import collections
import itertools
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rill.distributed.proto import device_attributes_pb2, worker_pb2
from rill.distributed.rendezvous import RemoteRendezvous, task_of_device
from rill.distributed.wire import (
    CHUNKS_OK,
    chunkable,
    context_deadline,
    error_to_status,
    iter_chunks,
    meta_into,
    tensor_from_proto,
    tensor_into,
)
from rill.exec.context import StepState
from rill.exec.device import CpuDevice
from rill.exec.proto import config_pb2
from rill.exec.rendezvous import make_key
from rill.exec.resources import ResourceMgr
from rill.exec.session import Session as LocalSession
from rill.graph import Graph
from rill.graph.errors import (
    AbortedError,
    CancelledError,
    InvalidArgumentError,
    NotFoundError,
)
from rill.graph.graph_def import import_graph_def

__all__ = ["Worker"]

_STALE_STEP_S = 600.0  # an unfinished step's leftover values are dropped after this long


class _Devices:
    """The devices of one task (or of one isolated session) with their resources."""

    def __init__(self, job: str, task: int, n_cpu: int):
        self.devices = [CpuDevice(i, job=job, task=task) for i in range(max(1, n_cpu))]
        for d in self.devices:
            d.resources = ResourceMgr()


class _Registered:
    __slots__ = ("handle", "session_handle", "sess", "plan", "remote_keys")

    def __init__(self, handle, session_handle, sess, plan):
        self.handle = handle
        self.session_handle = session_handle
        self.sess = sess
        self.plan = plan


class Worker:
    """The worker half of a Server. `server` gives the cluster and this task's name."""

    def __init__(self, server, n_cpu: int = 1):
        self.server = server
        self.job, self.task = server._job_name, server._task_index
        self.name = f"/job:{self.job}/replica:0/task:{self.task}"
        self.incarnation = secrets.randbits(63) | 1
        self._shared = _Devices(self.job, self.task, n_cpu)
        self._n_cpu = n_cpu
        threads = max(2, os.cpu_count() or 2)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="rill-op")
        self._blocking = ThreadPoolExecutor(256, thread_name_prefix="rill-wait")
        self._lock = threading.Lock()
        self._graphs: dict[str, _Registered] = {}
        self._sessions: dict[str, _Devices] = {}
        self._steps: dict[int, RemoteRendezvous] = {}
        self._parked: dict = {}  # (step id, key) -> (large value, time) for RecvTensorChunks
        self._finished: collections.OrderedDict = collections.OrderedDict()
        self._handles = itertools.count(1)
        self._stopped = False

    # -- helpers --------------------------------------------------------------------------------

    def device_attributes(self, devices=None) -> list:
        out = []
        for d in devices or self._shared.devices:
            out.append(
                device_attributes_pb2.DeviceAttributes(
                    name=d.name,
                    device_type=d.device_type,
                    memory_limit=1 << 32,
                    incarnation=self.incarnation,
                    physical_device_desc="rill CPU device",
                )
            )
        return out

    def _resolve(self, job: str, task: int) -> str:
        return self.server._resolve(job, task)

    def step(self, step_id: int, create: bool = True) -> RemoteRendezvous | None:
        with self._lock:
            rv = self._steps.get(step_id)
            if rv is None and create:
                rv = RemoteRendezvous(step_id, (self.job, self.task), self._resolve,
                                      self.server._channels)  # fmt: skip
                if step_id in self._finished or self._stopped:
                    rv.abort(AbortedError(f"step {step_id} was already cleaned up on {self.name}"))
                else:
                    self._steps[step_id] = rv
                    self._sweep()
            return rv

    def _forget(self, step_id: int) -> None:
        with self._lock:
            self._steps.pop(step_id, None)
            self._finished[step_id] = True
            while len(self._finished) > 4096:
                self._finished.popitem(last=False)

    def _sweep(self) -> None:
        if len(self._steps) < 64:
            return
        now = time.monotonic()
        for sid, rv in list(self._steps.items()):
            if now - rv.touched > _STALE_STEP_S and rv.idle():
                rv.abort(AbortedError(f"step {sid} was abandoned"))
                del self._steps[sid]

    def stop(self) -> None:
        """Cancels every running step (Server.stop())."""
        with self._lock:
            self._stopped = True
            steps = list(self._steps.values())
        for rv in steps:
            rv.abort(CancelledError(f"the server of {self.name} was stopped"))
        self._pool.shutdown(wait=False)
        self._blocking.shutdown(wait=False)

    # -- methods ---------------------------------------------------------------------------------

    def GetStatus(self, req, context):
        return worker_pb2.GetStatusResponse(device_attributes=self.device_attributes())

    def CreateWorkerSession(self, req, context):
        with self._lock:
            if req.isolate_session_state:
                self._sessions[req.session_handle] = _Devices(self.job, self.task, self._n_cpu)
            else:
                self._sessions[req.session_handle] = self._shared
        return worker_pb2.CreateWorkerSessionResponse()

    def DeleteWorkerSession(self, req, context):
        with self._lock:
            devs = self._sessions.pop(req.session_handle, None)
            dead = [h for h, g in self._graphs.items() if g.session_handle == req.session_handle]
            regs = [self._graphs.pop(h) for h in dead]
        for g in regs:
            g.sess.close()
        if devs is not None and devs is not self._shared:
            for d in devs.devices:
                d.resources.clear()
        return worker_pb2.DeleteWorkerSessionResponse()

    def RegisterGraph(self, req, context):
        with self._lock:
            devs = self._sessions.get(req.session_handle, self._shared)
        g = Graph()
        import_graph_def(req.graph_def, name="", graph=g)
        cfg = config_pb2.ConfigProto()
        cfg.allow_soft_placement = True
        # The master already optimized the partition: run it as it is.
        cfg.graph_options.optimizer_options.opt_level = config_pb2.OptimizerOptions.L0
        cfg.rill.disable_remapper = True
        cfg.rill.disable_dead_code_elimination = True
        src = req.config_proto.rill if req.HasField("config_proto") else None
        if src is not None and src.disable_compiled_path:
            cfg.rill.disable_compiled_path = True
        sess = LocalSession(graph=g, config=cfg,
                            _runtime=(devs.devices, self._pool, self._blocking))  # fmt: skip
        ops = tuple(g.get_operations())
        plan = sess._plan((ops, ()))
        handle = f"{next(self._handles):x}{secrets.token_hex(4)}"
        reg = _Registered(handle, req.session_handle, sess, plan)
        reg.remote_keys = self._remote_root_keys(plan)
        with self._lock:
            self._graphs[handle] = reg
        return worker_pb2.RegisterGraphResponse(graph_handle=handle)

    def _remote_root_keys(self, plan) -> list[str]:
        """Keys of the root-frame _Recvs whose sender is another task (prefetched per step)."""
        keys = []
        for n in plan.plan_graph.nodes:
            if n.type != "_Recv" or n.frame:
                continue
            a = n.attrs
            if task_of_device(a["send_device"]) != (self.job, self.task):
                keys.append(make_key(a["send_device"], a["send_device_incarnation"],
                                     a["recv_device"], a["tensor_name"]))  # fmt: skip
        return keys

    def DeregisterGraph(self, req, context):
        with self._lock:
            g = self._graphs.pop(req.graph_handle, None)
        if g is not None:
            g.sess.close()
        return worker_pb2.DeregisterGraphResponse()

    def RunGraph(self, req, context, values: dict | None = None, feeds=()):
        """Runs a registered partition for one step. An in-process caller (the master of this
        task) may hand over `feeds` [(key, TensorProto or value)] beside `req.send`, and get the
        fetched arrays in `values` by key instead of in the response."""
        resp = worker_pb2.RunGraphResponse()
        try:
            self._run_graph(req, context, resp, values, feeds)
        except BaseException as e:  # noqa: BLE001 - every failure becomes the response's status
            code, msg = error_to_status(e)
            if not req.store_errors_in_response_body:
                raise
            del resp.recv[:]
            del resp.rill_chunked[:]
            resp.status_code = code
            resp.status_error_message = msg
        return resp

    def park(self, step_id: int, key: str, value) -> None:
        """Keeps a large value for one RecvTensorChunks pull (step id, key)."""
        with self._lock:
            self._parked[(step_id, key)] = (value, time.monotonic())

    def _run_graph(self, req, context, resp, values=None, feeds=()) -> None:
        g = self._graphs.get(req.graph_handle)
        if g is None:
            raise NotFoundError(
                f"graph handle {req.graph_handle!r} is not registered on {self.name} (the "
                "worker restarted or the graph was deregistered)"
            )
        rv = self.step(req.step_id)
        deadline = context_deadline(context)
        with rv._cv:
            rv.running += 1
        ok = False
        running = [True]
        if context is not None and hasattr(context, "add_callback"):
            # The caller (a master) cancelled or went away: end this task's part of the step.
            def gone():
                if running[0]:
                    rv.abort(CancelledError(f"the master cancelled step {req.step_id}"))

            context.add_callback(gone)
        try:
            for nt in req.send:
                rv.send(nt.name, tensor_from_proto(nt.tensor), False)
            for key, p in feeds:
                # TensorProtos, or (a staged step's value from a stage of this same process)
                # the value itself.
                rv.send(key, tensor_from_proto(p) if hasattr(p, "SerializeToString") else p, False)
            remote = g.remote_keys
            if remote and (req.send or feeds):
                # A staged step's caller sent what this stage takes from its own task.
                remote = [k for k in remote if not rv.delivered(k)]
            if remote:
                rv.prefetch(remote, deadline)
            tracing = req.exec_opts.record_timeline or req.exec_opts.record_costs
            step = StepState(req.step_id, deadline, rv, tracing)
            with rv._cv:
                rv.steps.append(step)
                if rv.aborted:
                    step.cancel("the step was aborted")
            try:
                with np.errstate(all="ignore"):
                    g.sess._execute(g.plan, [], step)
            except BaseException as e:
                rv.abort(e)
                raise
            if tracing:
                from rill.exec.tracing import fill_step_stats

                fill_step_stats(resp.step_stats, step.records)
            for key in req.recv_key:
                value, dead = rv.take(key, deadline, step.check_cancelled)
                if dead:
                    raise InvalidArgumentError(f"the fetched value {key!r} is dead")
                if values is not None:
                    values[key] = value
                    continue
                nt = resp.recv.add(name=key)
                if req.rill_chunks_ok and chunkable(value):
                    # Large: the caller streams it (RecvTensorChunks) into a buffer of its own.
                    self.park(req.step_id, key, value)
                    meta_into(nt.tensor, value)
                    resp.rill_chunked.append(key)
                else:
                    tensor_into(nt.tensor, value)
            ok = True
        finally:
            running[0] = False
            with rv._cv:
                rv.running -= 1
            # A failed step stays (aborted) until CleanupGraph, so late pulls fail fast; a
            # staged step stays until its last stage here (is_partial, is_last_partial_run).
            if ok and (not req.is_partial or req.is_last_partial_run) and rv.idle():
                self._forget(req.step_id)

    def RecvTensor(self, req, context):
        rv = self.step(req.step_id)
        deadline = context_deadline(context)
        value, dead = rv.take(req.rendezvous_key, deadline, alive=context.is_active)
        resp = worker_pb2.RecvTensorResponse(is_dead=dead)
        if not dead and req.transport_options.type_url == CHUNKS_OK and chunkable(value):
            # Large: the receiver streams it (RecvTensorChunks) into a buffer of its own.
            self.park(req.step_id, req.rendezvous_key, value)
            meta_into(resp.tensor, value)
            resp.transport_options.type_url = CHUNKS_OK
            return resp
        if not dead:
            tensor_into(resp.tensor, value)
        if rv.idle():
            self._forget(req.step_id)
        return resp

    def RecvTensors(self, req, context):
        """rill's batched pull: the keys of `req` as they are sent here, each message carrying
        every one sent since the last."""
        rv = self.step(req.step_id)
        deadline = context_deadline(context)
        pending = list(req.rendezvous_key)
        while pending:
            resp = worker_pb2.RillRecvTensorsResponse()
            for key, value, dead in rv.take_ready(pending, deadline, alive=context.is_active):
                pending.remove(key)
                item = resp.item.add(rendezvous_key=key, is_dead=dead)
                if dead:
                    continue
                if chunkable(value):
                    # Large: the receiver streams it (RecvTensorChunks) into a buffer of its own.
                    self.park(req.step_id, key, value)
                    meta_into(item.tensor, value)
                    item.chunked = True
                else:
                    tensor_into(item.tensor, value)
            yield resp
        if rv.idle():
            self._forget(req.step_id)

    def RecvTensorChunks(self, req, context):
        """rill's stream: the bytes of a value RecvTensor parked, CHUNK_BYTES at a time."""
        with self._lock:
            item = self._parked.pop((req.step_id, req.rendezvous_key), None)
            now = time.monotonic()
            for k, (_, t) in list(self._parked.items()):
                if now - t > _STALE_STEP_S:
                    del self._parked[k]
        if item is None:
            raise NotFoundError(f"no parked value for {req.rendezvous_key!r} on {self.name}")
        value = item[0]
        if not isinstance(value, np.ndarray):  # a master's Relay: another task's chunks
            yield from value.raw(context)
            return
        for msg in iter_chunks(value):
            if not context.is_active():
                return
            yield msg

    def CleanupGraph(self, req, context):
        with self._lock:
            rv = self._steps.get(req.step_id)
        if rv is not None:
            rv.abort(CancelledError(f"step {req.step_id} was cleaned up"))
        self._forget(req.step_id)
        return worker_pb2.CleanupGraphResponse()

    def CleanupAll(self, req, context):
        containers = list(req.container) or [""]
        with self._lock:
            all_devs = {id(d): d for d in self._sessions.values()}
            all_devs[id(self._shared)] = self._shared
        for devs in all_devs.values():
            for d in devs.devices:
                for c in containers:
                    d.resources.cleanup(c)
        return worker_pb2.CleanupAllResponse()
