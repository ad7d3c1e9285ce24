"""The master service (`/tensorflow.MasterService/*`): sessions over the cluster's devices.

Per session it holds the graph (CreateSession, ExtendSession with versions) and, per step
signature (feeds, fetches, targets), a plan (rill.distributed.plan) whose partitions are
registered with their workers once. A cached step is one RunGraph per participating task; the
tasks exchange tensors among themselves (RecvTensor). The master's own task runs its partition
in process, without a loopback RPC.
"""

from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import grpc
import numpy as np

from rill.distributed import direct, staged
from rill.distributed.fetched import Relay, as_proto
from rill.distributed.master_session import MasterSession, _PartialRun, _Plan
from rill.distributed.plan import device_from_name
from rill.distributed.proto import master_pb2, worker_pb2
from rill.distributed.steps import InProcess as _Deadline
from rill.distributed.steps import device_matches as _device_matches
from rill.distributed.steps import first_error as _first_error
from rill.distributed.steps import task_error as _task_error
from rill.distributed.steps import task_matches as _task_matches
from rill.distributed.wire import (
    RILL_WORKER_SERVICE,
    WORKER_SERVICE,
    chunkable,
    error_from_rpc,
    meta_into,
    tensor_into,
)
from rill.exec.proto import config_pb2
from rill.graph.device import DeviceSpec
from rill.graph.errors import (
    AbortedError,
    CancelledError,
    InvalidArgumentError,
    OpError,
    UnavailableError,
    UnimplementedError,
)
from rill.graph.proto import tensor_pb2

__all__ = ["Master"]

_SLICE = 0.05


class Master:
    def __init__(self, server):
        self.server = server
        self.sessions: dict[str, MasterSession] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(32, thread_name_prefix="rill-master")
        # Calls to workers wait on these threads (created as needed, then reused): as many as
        # steps may have calls in flight, so no step's call waits for another step's.
        self._rpc_pool = ThreadPoolExecutor(1024, thread_name_prefix="rill-call")
        self._active: dict[int, list] = {}  # step id -> parts, for stop()
        # RunGraph goes to a rill task over the direct transport when it offers one.
        self._direct = direct.DirectClient(server.connect_timeout_s)
        self._direct_at: dict[str, str | None] = {}  # gRPC address -> direct address or None
        self._stopping = False
        self.local = (server._job_name, server._task_index)

    # -- cluster -----------------------------------------------------------------------------------

    def cluster_for(self, config):
        from rill.distributed.cluster import ClusterSpec

        if config.HasField("cluster_def") and config.cluster_def.job:
            return ClusterSpec(config.cluster_def)
        return self.server._cluster

    def _call(self, address, method, req, resp_cls, timeout, wait_for_ready=False, who=None,
              parts=None):  # fmt: skip
        """Starts a call to a worker service: a future of its response.

        The call is a blocking one made on a thread of a pool: cheaper than grpc's own futures,
        which restart a channel thread each time a channel had no call in flight. Every call
        has a deadline or ends when the step is cleaned up or the channels close (stop()). A
        RunGraph to a task with a direct transport goes there (`parts`: values encoded by
        direct.tensor_parts to follow the request's bytes)."""
        at = self._direct_at.get(address) if method == "RunGraph" else None
        if at is not None:
            return self._rpc_pool.submit(self._run_graph_direct, at, req, timeout,
                                         who or address, address, parts)  # fmt: skip
        fn = self._grpc(address, method, resp_cls, req, parts)
        return self._rpc_pool.submit(fn, req, timeout=timeout, wait_for_ready=wait_for_ready)

    def _grpc(self, address, method, resp_cls, req, parts=None):
        """The gRPC callable of `method` at `address`; values encoded for the direct transport
        (`parts`: the task lost it, or never offered it) go into `req` first."""
        direct.merge_parts(req, parts)
        return self.server._channels.unary(address, WORKER_SERVICE, method, resp_cls)

    def _run_graph_direct(self, at, req, timeout, who, address, parts=None):
        payload = [req.SerializeToString(), *parts] if parts else req.SerializeToString()
        try:
            raw = self._direct.call(at, direct.RUN_GRAPH, payload, timeout, who, address)
        except direct.ConnectFailed:
            # The direct port cannot be reached (a firewall may pass only the gRPC port): this
            # call and the later ones go over gRPC.
            self._direct_at[address] = None
            fn = self._grpc(address, "RunGraph", worker_pb2.RunGraphResponse, req, parts)
            try:
                return fn(req, timeout=timeout)
            except grpc.RpcError as e:
                raise error_from_rpc(e, who, address) from None
        except UnavailableError:
            # The task failed or restarted (its direct port is a new one): gRPC from now on.
            self._direct_at.pop(address, None)
            self._direct.forget(at)
            raise
        return worker_pb2.RunGraphResponse.FromString(raw)

    def direct_address(self, address, deadline) -> str | None:
        """The direct transport address of the task at `address` (asked once, through gRPC), or
        None: a task that offers none (TLS, RILL_DIRECT_RPC=0, TensorFlow) is called on gRPC."""
        if address in self._direct_at:
            return self._direct_at[address]
        at = None
        if direct.enabled():
            call = self.server._channels.channel(address).unary_unary(
                f"/{RILL_WORKER_SERVICE}/DirectPort"
            )
            try:
                port = call(b"", timeout=self._timeout(deadline, self.server.connect_timeout_s))
            except grpc.RpcError:
                port = b""
            if port.isdigit():
                at = f"{address.rpartition(':')[0]}:{int(port)}"
        self._direct_at[address] = at
        return at

    def _wait(self, fut, who, address, deadline_what="the call"):
        while True:
            try:
                # Woken by the call's completion; the slice only bounds how late a stop() is
                # noticed.
                return fut.result(timeout=_SLICE)
            except FutureTimeout:
                if self._stopping:
                    fut.cancel()
                    raise CancelledError("the server was stopped") from None
            except (FutureCancelled, grpc.FutureCancelledError):
                raise CancelledError(f"{deadline_what} to {who} was cancelled") from None
            except grpc.RpcError as e:
                if e.code() is grpc.StatusCode.DEADLINE_EXCEEDED and deadline_what == "connect":
                    raise UnavailableError(
                        f"{who} at {address} did not come up within the connect deadline "
                        f"({e.details()})"
                    ) from None
                raise error_from_rpc(e, who, address) from None

    def _timeout(self, deadline, cap=None):
        t = None if deadline is None else max(0.001, deadline - time.monotonic())
        if cap is not None:
            t = cap if t is None else min(t, cap)
        return t

    def discover(self, cluster, config, deadline):
        """Every device of every task the session may use (device_filters), via GetStatus."""
        filters = [DeviceSpec.from_string(f) for f in config.device_filters]
        tasks = []
        for job, idx, addr in cluster.tasks():
            name = f"/job:{job}/replica:0/task:{idx}"
            local = (job, idx) == self.local
            if filters and not local and not any(_task_matches(f, job, idx) for f in filters):
                continue
            tasks.append((job, idx, addr, name, local))
        futs = []
        for _job, _idx, addr, _name, local in tasks:
            if local:
                futs.append(None)
                continue
            futs.append(self._call(addr, "GetStatus", worker_pb2.GetStatusRequest(),
                                   worker_pb2.GetStatusResponse,
                                   self._timeout(deadline, self.server.connect_timeout_s),
                                   wait_for_ready=True))  # fmt: skip
        devices, attrs = [], []
        for (_job, _idx, addr, name, local), fut in zip(tasks, futs):
            if local:
                das = self.server._worker.device_attributes()
            else:
                das = self._wait(fut, name, addr, "connect").device_attributes
            for da in das:
                d = device_from_name(da.name, da.device_type)
                if filters and not any(_device_matches(f, d) for f in filters) and not local:
                    continue
                if local:
                    devices.insert(sum(1 for x in devices if (x.job, x.task) == self.local), d)
                else:
                    devices.append(d)
                attrs.append(da)
        return devices, attrs

    # -- registration and steps ------------------------------------------------------------------

    def register(self, sess: MasterSession, plan: _Plan, deadline) -> None:
        cfg = sess.config
        jobs = []
        for tp in plan.parts:
            local = (tp.job, tp.task) == self.local
            tp.address = "" if local else sess.cluster.task_address(tp.job, tp.task)
        for tp in plan.stages or plan.parts:
            local = (tp.job, tp.task) == self.local
            tp.address = "" if local else sess.cluster.task_address(tp.job, tp.task)
            req = worker_pb2.RegisterGraphRequest(session_handle=sess.handle,
                                                  create_worker_session_called=True)  # fmt: skip
            req.graph_def.CopyFrom(tp.graph_def)
            req.config_proto.CopyFrom(cfg)
            if (tp.job, tp.task) not in sess.worker_sessions:
                cws = worker_pb2.CreateWorkerSessionRequest(
                    session_handle=sess.handle,
                    isolate_session_state=cfg.isolate_session_state,
                    master_task=self.server.task_name,
                )
                cws.server_def.CopyFrom(self.server.server_def)
                if local:
                    self.server._worker.CreateWorkerSession(cws, None)
                else:
                    self._wait(self._call(tp.address, "CreateWorkerSession", cws,
                                          worker_pb2.CreateWorkerSessionResponse,
                                          self._timeout(deadline, self.server.connect_timeout_s),
                                          wait_for_ready=True), tp.name, tp.address, "connect")  # fmt: skip
                sess.worker_sessions.add((tp.job, tp.task))
            if local:
                jobs.append((tp, None, req))
            else:
                jobs.append((tp, self._call(tp.address, "RegisterGraph", req,
                                            worker_pb2.RegisterGraphResponse,
                                            self._timeout(deadline)), req))  # fmt: skip
        for tp, fut, req in jobs:
            if fut is None:
                try:
                    tp.handle = self.server._worker.RegisterGraph(req, None).graph_handle
                except OpError as e:
                    raise type(e)(f"{e.message} (registering the partition of {tp.name})") from None
                except (ValueError, TypeError, KeyError) as e:
                    raise InvalidArgumentError(
                        f"registering the partition of {tp.name}: {e}"
                    ) from None
            else:
                tp.handle = self._wait(fut, tp.name, tp.address).graph_handle
                self.direct_address(tp.address, deadline)

    def run_plan(self, sess: MasterSession, plan: _Plan, feed_protos: list, deadline,
                 step_stats=None, context=None) -> list:  # fmt: skip
        if plan.stages is not None:
            return staged.run(self, sess, plan, feed_protos, deadline, step_stats, context)
        step_id = secrets.randbits(63) or 1
        results = [None] * len(plan.fetches)
        errors: list = []
        local_req = None
        local_tp = None
        calls = []
        abort_once = threading.Event()

        def abort_all(err):
            errors.append(err)
            if abort_once.is_set():
                return
            abort_once.set()
            self._cleanup(plan, step_id)

        timeout = self._timeout(deadline)
        # Without a partition of its own, the master makes one task's call on this thread (the
        # others on pool threads): a step on one task then costs no thread hand-off here.
        inline = None
        if not any(tp.address == "" for tp in plan.parts):
            inline = plan.parts[-1]
        for tp in plan.parts:
            req = worker_pb2.RunGraphRequest(session_handle=sess.handle, graph_handle=tp.handle,
                                             step_id=step_id, store_errors_in_response_body=True,
                                             create_worker_session_called=True)  # fmt: skip
            req.recv_key.extend(k for _, k in tp.fetches)
            if step_stats is not None:
                req.exec_opts.record_timeline = True
            if tp.address == "":
                # In process: the feeds are handed over, not copied into the request.
                local_req, local_tp = req, tp
                continue
            for i, key in tp.feeds:
                nt = req.send.add(name=key)
                nt.tensor.CopyFrom(feed_protos[i])
            req.rill_chunks_ok = True
            if tp is inline:
                inline_req = req
                continue
            fut = self._call(tp.address, "RunGraph", req, worker_pb2.RunGraphResponse, timeout,
                             who=tp.name)  # fmt: skip
            calls.append((tp, fut))
            fut.add_done_callback(lambda f, tp=tp: self._on_done(f, tp, abort_all))
        with self._lock:
            self._active[step_id] = plan
        running = [True]
        if context is not None:
            # The client cancelled or went away: abort the step on every task.
            def gone():
                if running[0]:
                    abort_all(CancelledError(f"the client cancelled step {step_id}"))

            context.add_callback(gone)
        try:
            if local_req is not None:
                # In process: the fetched arrays come back as they are (no TensorProtos).
                values: dict = {}
                feeds = [(key, feed_protos[i]) for i, key in local_tp.feeds]
                resp = self.server._worker.RunGraph(local_req, _Deadline(deadline), values, feeds)
                if self._collect(local_tp, resp, results, abort_all, step_stats, step_id):
                    for i, key in local_tp.fetches:
                        results[i] = values.get(key)
            if inline is not None:
                resp = self._call_inline(inline, inline_req, None, timeout, abort_all)
                if resp is not None:
                    self._collect(inline, resp, results, abort_all, step_stats, step_id, deadline)
            for tp, fut in calls:
                try:
                    resp = self._wait(fut, tp.name, tp.address)
                except OpError as e:
                    abort_all(e)
                    continue
                self._collect(tp, resp, results, abort_all, step_stats, step_id, deadline)
        finally:
            running[0] = False
            with self._lock:
                self._active.pop(step_id, None)
        if errors:
            raise _first_error(errors)
        return results

    def _call_inline(self, tp, req, parts, timeout, abort_all):
        """RunGraph on `tp` made by this thread: its response, or None after abort_all(error).
        A stop() ends it by closing the channels; a failed or cancelled step, by its tasks
        aborting it (CleanupGraph)."""
        at = self._direct_at.get(tp.address)
        if at is not None:
            try:
                resp = self._run_graph_direct(at, req, timeout, tp.name, tp.address, parts)
            except OpError as e:
                abort_all(CancelledError("the server was stopped") if self._stopping else e)
                return None
            if resp.status_code:
                abort_all(_task_error(resp, tp))
                return None
            return resp
        fn = self._grpc(tp.address, "RunGraph", worker_pb2.RunGraphResponse, req, parts)
        try:
            resp = fn(req, timeout=timeout)
        except grpc.RpcError as e:
            if self._stopping:
                abort_all(CancelledError("the server was stopped"))
            else:
                abort_all(error_from_rpc(e, tp.name, tp.address))
            return None
        if resp.status_code:
            abort_all(_task_error(resp, tp))
            return None
        return resp

    def _on_done(self, fut, tp, abort_all) -> None:
        if fut.cancelled():
            return
        err = fut.exception()
        if err is not None:
            abort_all(err if isinstance(err, OpError) else error_from_rpc(err, tp.name, tp.address))
            return
        resp = fut.result()
        if resp.status_code:
            abort_all(_task_error(resp, tp))

    def _collect(self, tp, resp, results, abort_all, step_stats=None, step_id=0,
                 deadline=None) -> bool:  # fmt: skip
        """Fetched values of one task's RunGraph into `results` (TensorProtos, or arrays for
        values the task streamed); False when the task failed."""
        if resp.status_code:
            abort_all(_task_error(resp, tp))
            return False
        if step_stats is not None:
            step_stats.dev_stats.extend(resp.step_stats.dev_stats)
        if not resp.recv:
            return True
        by_key = {nt.name: nt.tensor for nt in resp.recv}
        chunked = set(resp.rill_chunked)
        for i, key in tp.fetches:
            p = by_key.get(key)
            if key in chunked:
                p = Relay(self.server._channels, tp, step_id, key, p, deadline)
            results[i] = p
        return True

    def _cleanup(self, plan, step_id) -> None:
        """Aborts the step on every task of the plan (CleanupGraph)."""
        req = worker_pb2.CleanupGraphRequest(step_id=step_id)
        for tp in plan.parts:
            if tp.address == "":
                self.server._worker.CleanupGraph(req, None)
            else:
                try:
                    self._call(tp.address, "CleanupGraph", req,
                               worker_pb2.CleanupGraphResponse, 5.0)  # fmt: skip
                except Exception:  # noqa: BLE001 - best effort: the task may be gone
                    pass

    def stop(self) -> None:
        self._stopping = True
        with self._lock:
            active = list(self._active.items())
        for step_id, plan in active:
            self._cleanup(plan, step_id)
        self._direct.close()
        self._pool.shutdown(wait=False)
        self._rpc_pool.shutdown(wait=False)

    # -- the RPC methods -------------------------------------------------------------------------

    def _session(self, handle: str) -> MasterSession:
        s = self.sessions.get(handle)
        if s is None or s.closed:
            raise AbortedError(
                f"Session {handle!r} is not found on {self.server.task_name}: it was closed, "
                "reset, or the server restarted"
            )
        return s

    def _deadline(self, config, options=None):
        ms = config.operation_timeout_in_ms if config is not None else 0
        if options is not None and options.timeout_in_ms:
            ms = options.timeout_in_ms
        return None if ms <= 0 else time.monotonic() + ms / 1000.0

    def CreateSession(self, req, context):
        config = config_pb2.ConfigProto()
        config.CopyFrom(self.server.default_config())
        if req.HasField("config"):
            config.MergeFrom(req.config)
        handle = secrets.token_hex(8)
        sess = MasterSession(self, handle, req.graph_def, config, self._deadline(config))
        with self._lock:
            self.sessions[handle] = sess
        return master_pb2.CreateSessionResponse(session_handle=handle, graph_version=0)

    def ExtendSession(self, req, context):
        sess = self._session(req.session_handle)
        v = sess.extend(req.graph_def, req.current_graph_version)
        return master_pb2.ExtendSessionResponse(new_graph_version=v)

    def RunStep(self, req, context):
        resp = master_pb2.RunStepResponse()
        try:
            self._run_step(req, resp, context)
        except Exception as e:  # noqa: BLE001 - reported in the body or as the RPC's status
            if not req.store_errors_in_response_body:
                raise
            from rill.distributed.wire import error_to_status

            del resp.tensor[:]
            del resp.rill_chunked[:]
            resp.rill_chunk_id = 0
            resp.status_code, resp.status_error_message = error_to_status(e)
        return resp

    def _run_step(self, req, resp, context=None) -> None:
        sess = self._session(req.session_handle)
        options = req.options if req.HasField("options") else None
        deadline = self._deadline(sess.config, options)
        feeds = {}
        for nt in req.feed:
            if nt.name in feeds:
                raise InvalidArgumentError(f"tensor {nt.name!r} is fed twice")
            feeds[nt.name] = nt.tensor
        fetches = list(req.fetch)
        if req.partial_run_handle:
            values = self._partial_step(sess, req.partial_run_handle, feeds, fetches,
                                        list(req.target), deadline)  # fmt: skip
        else:
            trace = (
                options is not None and options.trace_level >= config_pb2.RunOptions.SOFTWARE_TRACE
            )
            stats = resp.metadata.step_stats if trace else None
            values = sess.run(feeds, fetches, list(req.target), deadline, stats, context)
        worker = self.server._worker
        for name, v in zip(fetches, values):
            nt = resp.tensor.add(name=name)
            if v is None:
                continue
            big = type(v) is Relay or (type(v) is np.ndarray and chunkable(v))
            if big and req.rill_chunks_ok:
                # A rill client streams large values from this task (RecvTensorChunks); one
                # another task holds is relayed chunk by chunk, never assembled here.
                if not resp.rill_chunk_id:
                    resp.rill_chunk_id = secrets.randbits(62) | 1
                worker.park(resp.rill_chunk_id, name, v)
                if type(v) is Relay:
                    nt.tensor.CopyFrom(v.head)
                else:
                    meta_into(nt.tensor, v)
                resp.rill_chunked.append(name)
            elif type(v) is Relay:
                tensor_into(nt.tensor, v.pull())
            elif isinstance(v, tensor_pb2.TensorProto):
                nt.tensor.CopyFrom(v)
            else:  # an array (or numpy scalar) the task of this master computed
                tensor_into(nt.tensor, v)
        if options is not None and options.output_partition_graphs:
            plan = sess.plans.get((tuple(feeds), tuple(fetches), tuple(req.target)))
            if plan is not None:
                for tp in plan.parts:
                    resp.metadata.partition_graphs.add().CopyFrom(tp.graph_def)

    def _partial_step(self, sess, handle, feeds, fetches, targets, deadline):
        pr = sess.partial.get(handle)
        if pr is None:
            raise InvalidArgumentError(f"partial run handle {handle!r} is not set up")
        for n in feeds:
            if n not in pr.feeds:
                raise InvalidArgumentError(
                    f"Feed {n} was not specified in partial_run_setup (handle {handle})"
                )
            if n in pr.fed:
                raise InvalidArgumentError(f"Feed {n} has already been fed (handle {handle})")
        for n in fetches:
            if n not in pr.fetches:
                raise InvalidArgumentError(
                    f"Fetch {n} was not specified in partial_run_setup (handle {handle})"
                )
            if n in pr.fetched:
                raise InvalidArgumentError(f"Fetch {n} has already been fetched (handle {handle})")
        pr.fed.update(feeds)
        # Earlier results are fed back, so what produced them does not run again.
        all_feeds = dict(pr.fetched)
        all_feeds.update(pr.fed)
        run_targets = []
        if not pr.targets_run and len(pr.fed) == len(pr.feeds):
            run_targets = pr.targets
            pr.targets_run = True
        values = [as_proto(v) for v in sess.run(all_feeds, fetches, run_targets, deadline)]
        for n, v in zip(fetches, values):
            pr.fetched[n] = v
        if len(pr.fetched) == len(pr.fetches) and pr.targets_run:
            sess.partial.pop(handle, None)
        return values

    def PartialRunSetup(self, req, context):
        sess = self._session(req.session_handle)
        for n in list(req.feed) + list(req.fetch):
            sess._tensor(n, "partial run tensor")
        for n in req.target:
            sess._op(n)
        handle = secrets.token_hex(8)
        sess.partial[handle] = _PartialRun(req.feed, req.fetch, req.target)
        return master_pb2.PartialRunSetupResponse(partial_run_handle=handle)

    def CloseSession(self, req, context):
        with self._lock:
            sess = self.sessions.pop(req.session_handle, None)
        if sess is None:
            raise AbortedError(f"Session {req.session_handle!r} is not found")
        self._close(sess)
        return master_pb2.CloseSessionResponse()

    def _close(self, sess: MasterSession) -> None:
        sess.closed = True
        dws = worker_pb2.DeleteWorkerSessionRequest(session_handle=sess.handle)
        for job, task in sess.worker_sessions:
            if (job, task) == self.local:
                self.server._worker.DeleteWorkerSession(dws, None)
            else:
                try:
                    self._call(sess.cluster.task_address(job, task), "DeleteWorkerSession", dws,
                               worker_pb2.DeleteWorkerSessionResponse, 5.0)  # fmt: skip
                except Exception:  # noqa: BLE001 - best effort
                    pass

    def ListDevices(self, req, context):
        resp = master_pb2.ListDevicesResponse()
        if req.session_handle:
            sess = self._session(req.session_handle)
            attrs = sess.device_attrs
        else:
            from rill.exec.proto import config_pb2 as cp

            _, attrs = self.discover(self.server._cluster, cp.ConfigProto(),
                                     time.monotonic() + self.server.connect_timeout_s)  # fmt: skip
        local_prefix = self.server.task_name + "/"
        for da in attrs:
            if da.name.startswith(local_prefix):
                resp.local_device.add().CopyFrom(da)
            else:
                resp.remote_device.add().CopyFrom(da)
        return resp

    def Reset(self, req, context):
        with self._lock:
            sessions = list(self.sessions.values())
            self.sessions.clear()
        for s in sessions:
            self._close(s)
        ca = worker_pb2.CleanupAllRequest(container=list(req.container))
        filters = [DeviceSpec.from_string(f) for f in req.device_filters]
        for job, idx, addr in self.server._cluster.tasks():
            if filters and not any(_task_matches(f, job, idx) for f in filters):
                continue
            if (job, idx) == self.local:
                self.server._worker.CleanupAll(ca, None)
            else:
                try:
                    self._call(addr, "CleanupAll", ca, worker_pb2.CleanupAllResponse,
                               5.0).result()  # fmt: skip
                except grpc.RpcError:
                    pass
        return master_pb2.ResetResponse()

    def MakeCallable(self, req, context):
        sess = self._session(req.session_handle)
        o = req.options
        if o.tensor_connection:
            raise UnimplementedError("CallableOptions.tensor_connection is not supported")
        for n in list(o.feed) + list(o.fetch):
            sess._tensor(n, "callable tensor")
        for n in o.target:
            sess._op(n)
        with sess.lock:
            h = sess.next_callable
            sess.next_callable += 1
            opts = o.run_options if o.HasField("run_options") else None
            sess.callables[h] = (tuple(o.feed), tuple(o.fetch), tuple(o.target), opts)
        return master_pb2.MakeCallableResponse(handle=h)

    def RunCallable(self, req, context):
        sess = self._session(req.session_handle)
        c = sess.callables.get(req.handle)
        if c is None:
            raise InvalidArgumentError(f"callable handle {req.handle} is not valid")
        feeds, fetches, targets, opts = c
        if len(req.feed) != len(feeds):
            raise InvalidArgumentError(
                f"the callable takes {len(feeds)} feeds, {len(req.feed)} were given"
            )
        deadline = self._deadline(sess.config, opts)
        values = sess.run(dict(zip(feeds, req.feed)), list(fetches), list(targets), deadline)
        resp = master_pb2.RunCallableResponse()
        for v in values:
            v = as_proto(v)
            if v is not None:
                resp.fetch.add().CopyFrom(v)
            else:
                resp.fetch.add()
        return resp

    def ReleaseCallable(self, req, context):
        sess = self._session(req.session_handle)
        with sess.lock:
            if sess.callables.pop(req.handle, None) is None:
                raise InvalidArgumentError(f"callable handle {req.handle} is not valid")
        return master_pb2.ReleaseCallableResponse()
