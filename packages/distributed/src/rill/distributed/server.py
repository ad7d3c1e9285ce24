"""Server: one task of a cluster, exporting TensorFlow's master and worker gRPC services.

>>> with Server.create_local_server() as server:
...     server.target.startswith("grpc://localhost:")
True
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf.message import DecodeError

from rill.distributed import direct
from rill.distributed.cluster import ClusterSpec
from rill.distributed.proto import master_pb2, tensorflow_server_pb2, worker_pb2
from rill.distributed.wire import (
    MASTER_SERVICE,
    RILL_WORKER_SERVICE,
    SERVER_OPTIONS,
    WORKER_SERVICE,
    ChannelCache,
    error_to_status,
    grpc_status_of,
    tensor_into,
)
from rill.exec.proto import config_pb2
from rill.graph.errors import InvalidArgumentError, NotFoundError

__all__ = ["Server"]

_MASTER_METHODS = {
    "CreateSession": (master_pb2.CreateSessionRequest, master_pb2.CreateSessionResponse),
    "ExtendSession": (master_pb2.ExtendSessionRequest, master_pb2.ExtendSessionResponse),
    "PartialRunSetup": (master_pb2.PartialRunSetupRequest, master_pb2.PartialRunSetupResponse),
    "RunStep": (master_pb2.RunStepRequest, master_pb2.RunStepResponse),
    "CloseSession": (master_pb2.CloseSessionRequest, master_pb2.CloseSessionResponse),
    "ListDevices": (master_pb2.ListDevicesRequest, master_pb2.ListDevicesResponse),
    "Reset": (master_pb2.ResetRequest, master_pb2.ResetResponse),
    "MakeCallable": (master_pb2.MakeCallableRequest, master_pb2.MakeCallableResponse),
    "RunCallable": (master_pb2.RunCallableRequest, master_pb2.RunCallableResponse),
    "ReleaseCallable": (master_pb2.ReleaseCallableRequest, master_pb2.ReleaseCallableResponse),
}
_WORKER_METHODS = {
    "GetStatus": worker_pb2.GetStatusRequest,
    "CreateWorkerSession": worker_pb2.CreateWorkerSessionRequest,
    "DeleteWorkerSession": worker_pb2.DeleteWorkerSessionRequest,
    "RegisterGraph": worker_pb2.RegisterGraphRequest,
    "DeregisterGraph": worker_pb2.DeregisterGraphRequest,
    "RunGraph": worker_pb2.RunGraphRequest,
    "CleanupGraph": worker_pb2.CleanupGraphRequest,
    "CleanupAll": worker_pb2.CleanupAllRequest,
    "RecvTensor": worker_pb2.RecvTensorRequest,
}


def _handler(fn, request_cls):
    """A gRPC handler taking raw bytes: a malformed request is INVALID_ARGUMENT, an exception an
    error status; the server keeps serving either way."""

    def handle(raw: bytes, context):
        try:
            req = request_cls.FromString(raw)
        except (DecodeError, RuntimeError, ValueError) as e:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"malformed {request_cls.__name__} ({len(raw)} bytes): {e}",
            )
        try:
            return fn(req, context)
        except Exception as e:  # noqa: BLE001 - reported to the caller as a status
            code, msg = error_to_status(e)
            err = e
        context.abort(grpc_status_of(code), msg or repr(err))

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=lambda m: m.SerializeToString()
    )


def _stream_handler(fn, request_cls):
    def handle(raw: bytes, context):
        try:
            req = request_cls.FromString(raw)
        except (DecodeError, RuntimeError, ValueError) as e:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"malformed {request_cls.__name__}: {e}"
            )
        try:
            yield from fn(req, context)
            return
        except Exception as e:  # noqa: BLE001 - reported to the caller as a status
            code, msg = error_to_status(e)
        context.abort(grpc_status_of(code), msg)

    return grpc.unary_stream_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=_serialize_or_raw
    )


def _run_graph_parts(worker, raw: bytes, context) -> list:
    """RunGraph on the direct transport: the response's bytes, the fetched arrays' own memory
    after them (direct.tensor_parts) rather than copied into the message."""
    req = worker_pb2.RunGraphRequest.FromString(raw)
    if req.rill_chunks_ok:  # large values stay parked for RecvTensorChunks, as on gRPC
        return worker.RunGraph(req, context)
    values: dict = {}
    resp = worker.RunGraph(req, context, values)
    if resp.status_code:
        return [resp.SerializeToString()]
    parts = []
    for key in req.recv_key:
        more = direct.tensor_parts(1, key, values[key])  # RunGraphResponse.recv
        if more is None:
            tensor_into(resp.recv.add(name=key).tensor, values[key])
        else:
            parts.extend(more)
    return [resp.SerializeToString(), *parts]


def _serialize_or_raw(m) -> bytes:
    """Messages are serialized; bytes (a message serialized already) pass as they are."""
    return m if type(m) is bytes else m.SerializeToString()


def _server_def(cluster, job_name, task_index, protocol, config) -> tensorflow_server_pb2.ServerDef:
    if isinstance(cluster, tensorflow_server_pb2.ServerDef):
        sd = tensorflow_server_pb2.ServerDef()
        sd.CopyFrom(cluster)
        if job_name is not None:
            sd.job_name = job_name
        if task_index is not None:
            sd.task_index = task_index
        if config is not None:
            sd.default_session_config.CopyFrom(config)
        return sd
    spec = ClusterSpec(cluster)
    if not spec.jobs:
        raise InvalidArgumentError("the cluster has no jobs")
    if job_name is None:
        if len(spec.jobs) != 1:
            raise InvalidArgumentError(f"job_name is required: the cluster has jobs {spec.jobs}")
        job_name = spec.jobs[0]
    if job_name not in spec.jobs:
        raise NotFoundError(f"job {job_name!r} is not in the cluster (jobs: {spec.jobs})")
    if task_index is None:
        indices = spec.task_indices(job_name)
        if len(indices) != 1:
            raise InvalidArgumentError(
                f"task_index is required: job {job_name!r} has tasks {indices}"
            )
        task_index = indices[0]
    spec.task_address(job_name, task_index)  # raises for an unknown task
    sd = tensorflow_server_pb2.ServerDef(job_name=job_name, task_index=task_index,
                                         protocol=protocol or "grpc")  # fmt: skip
    sd.cluster.CopyFrom(spec.as_cluster_def())
    if config is not None:
        sd.default_session_config.CopyFrom(config)
    return sd


class Server:
    """An in-process rill server: the master and worker services of one task.

    Args:
        server_or_cluster_def: a ClusterSpec, a dict {job: [address, ...]}, a ClusterDef or a
            ServerDef.
        job_name, task_index: this task (optional when the cluster has one job / one task).
        protocol: "grpc".
        config: the default session ConfigProto (device_count {"CPU": n} gives the task n CPU
            devices; operation_timeout_in_ms bounds every wait of its sessions).
        start: start serving now.
        server_credentials / channel_credentials: grpc SSL credentials for TLS (both set, or
            neither).
        connect_timeout_s: how long a master waits for a peer task to come up before it reports
            it UnavailableError (it retries with backoff meanwhile).

    The server binds the host and port its task has in the cluster (a port 0 picks a free
    port; `target` and `server_def` then carry the real one).
    """

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None,
                 config=None, start=True, *, server_credentials=None, channel_credentials=None,
                 connect_timeout_s: float = 30.0):  # fmt: skip
        if protocol not in (None, "grpc", "grpc+ssl"):
            raise InvalidArgumentError(f"protocol {protocol!r} is not supported (use 'grpc')")
        self._server_def = _server_def(server_or_cluster_def, job_name, task_index,
                                       protocol, config)  # fmt: skip
        sd = self._server_def
        self._job_name, self._task_index = sd.job_name, sd.task_index
        self._cluster = ClusterSpec(sd.cluster)
        self._config = sd.default_session_config
        self.connect_timeout_s = connect_timeout_s
        address = self._cluster.task_address(sd.job_name, sd.task_index)
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidArgumentError(
                f"the address {address!r} of /job:{sd.job_name}/task:{sd.task_index} is not "
                "host:port"
            )
        self._channels = ChannelCache(channel_credentials)
        from rill.distributed.master import Master
        from rill.distributed.worker import Worker

        n_cpu = dict(self._config.device_count).get("CPU", 1)
        self._worker = Worker(self, n_cpu=n_cpu)
        self._master = Master(self)
        self._executor = ThreadPoolExecutor(128, thread_name_prefix="rill-rpc")
        self._grpc = grpc.server(self._executor, options=SERVER_OPTIONS,
                                 maximum_concurrent_rpcs=None)  # fmt: skip
        handlers = [
            grpc.method_handlers_generic_handler(
                MASTER_SERVICE,
                {
                    m: _handler(getattr(self._master, m), req)
                    for m, (req, _) in _MASTER_METHODS.items()
                },  # fmt: skip
            ),
            grpc.method_handlers_generic_handler(
                WORKER_SERVICE,
                {m: _handler(getattr(self._worker, m), req) for m, req in _WORKER_METHODS.items()},
            ),
        ]
        handlers.append(
            grpc.method_handlers_generic_handler(
                RILL_WORKER_SERVICE,
                {
                    "RecvTensorChunks": _stream_handler(
                        self._worker.RecvTensorChunks, worker_pb2.RecvTensorRequest
                    ),
                    "RecvTensors": _stream_handler(
                        self._worker.RecvTensors, worker_pb2.RillRecvTensorsRequest
                    ),
                    "DirectPort": grpc.unary_unary_rpc_method_handler(
                        self._direct_port, request_deserializer=None, response_serializer=None
                    ),
                },  # fmt: skip
            )
        )
        from rill.distributed.control import JobControl

        self._control = JobControl(self)
        handlers.append(self._control.handler())
        self._grpc.add_generic_rpc_handlers(handlers)
        bind = f"{host}:{port}"
        try:
            if server_credentials is not None:
                bound = self._grpc.add_secure_port(bind, server_credentials)
            else:
                bound = self._grpc.add_insecure_port(bind)
        except RuntimeError as e:
            raise InvalidArgumentError(f"cannot bind {bind}: {e}") from None
        if not bound:
            raise InvalidArgumentError(f"cannot bind {bind}: the port is in use or invalid")
        self._host, self._port = host, bound
        # rill's direct transport for per-step calls between rill tasks (rill.distributed.direct);
        # none beside a TLS port.
        self._direct = None
        if server_credentials is None and direct.enabled():
            worker, master = self._worker, self._master
            self._direct = direct.DirectServer(host, {
                direct.RUN_GRAPH: lambda raw, ctx: _run_graph_parts(worker, raw, ctx),
                direct.RUN_STEP: lambda raw, ctx: master.RunStep(
                    master_pb2.RunStepRequest.FromString(raw), ctx),
            })  # fmt: skip
        if int(port) != bound:
            jobs = self._server_def.cluster.job
            for j in jobs:
                if j.name == sd.job_name:
                    j.tasks[sd.task_index] = f"{host}:{bound}"
            self._server_def.port = bound
            self._cluster = ClusterSpec(self._server_def.cluster)
        self._started = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        if start:
            self.start()

    @staticmethod
    def create_local_server(config=None, start=True, **kw) -> Server:
        """A single-task server on localhost with a free port (TensorFlow's helper)."""
        return Server({"localhost": ["localhost:0"]}, job_name="localhost", task_index=0,
                      config=config, start=start, **kw)  # fmt: skip

    # -- properties ---------------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The session target of this server: "grpc://host:port"."""
        return f"grpc://{self._host}:{self._port}"

    @property
    def server_def(self) -> tensorflow_server_pb2.ServerDef:
        return self._server_def

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    @property
    def task_name(self) -> str:
        return f"/job:{self._job_name}/replica:0/task:{self._task_index}"

    @property
    def port(self) -> int:
        return self._port

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                raise InvalidArgumentError("a stopped Server cannot be started again")
            if not self._started:
                self._grpc.start()
                if self._direct is not None:
                    self._direct.start()
                self._control.start()
                self._started = True
                _stop_at_exit(self)

    def join(self, timeout: float | None = None) -> bool:
        """Blocks until stop() (or `timeout` seconds); True when the server has stopped."""
        return self._stopped.wait(timeout)

    def stop(self, grace: float | None = 1.0) -> None:
        """Ends in-flight steps with CancelledError, releases the port, and lets join() return."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._control.stop()
            self._master.stop()
            self._worker.stop()
            if self._direct is not None:
                self._direct.stop(1.0 if grace is None else grace)
            if self._started:
                self._grpc.stop(grace).wait(10.0 if grace is None else grace + 10.0)
            self._executor.shutdown(wait=False)
            self._channels.close()
            self._stopped.set()

    def finish_job(self, reason: str = "", grace_secs: float = 2.0) -> None:
        """Tells every task of the cluster that the job is finished; each (this one too) stops
        serving after `grace_secs`, and `rill-server` exits 0. What a chief's
        MonitoredTrainingSession does by itself when training ends (a `_JobDone` op)."""
        self._control.finish(reason, grace_secs, broadcast=True)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False

    def __del__(self):
        try:
            self.stop(grace=0)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- internals -----------------------------------------------------------------------------

    def _direct_port(self, raw: bytes, context) -> bytes:
        """rill.WorkerService/DirectPort: this task's direct transport port (ASCII), or nothing
        when it offers none."""
        return b"" if self._direct is None else str(self._direct.port).encode()

    def _resolve(self, job: str, task: int) -> str:
        return self._cluster.task_address(job, task)

    def default_config(self) -> config_pb2.ConfigProto:
        return self._config


def _stop_at_exit(server: Server) -> None:
    """Stops a still-running server when the interpreter exits, before the thread pools are
    joined: a step still blocked in it (a take waiting for gradients that will never come, as
    TF1 programs leave the chief's) is cancelled instead of keeping the process alive. This is
    threading's own exit hook, which concurrent.futures uses for the same purpose; the server
    is held weakly, so a server stopped or collected earlier costs nothing."""
    ref = weakref.ref(server)

    def stop() -> None:
        s = ref()
        if s is not None:
            s.stop(grace=0)

    try:
        threading._register_atexit(stop)
    except RuntimeError:
        pass  # the interpreter is already shutting down
