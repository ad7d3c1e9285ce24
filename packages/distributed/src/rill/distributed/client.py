"""GrpcSession: `rill.exec.Session("grpc://host:port")` — a session on a master over gRPC.

It speaks TensorFlow's MasterService as TensorFlow's own client does: the graph goes with the
first call (CreateSession), nodes added later go with ExtendSession, and every run is a RunStep
with errors in the response body. rill.exec finds this class through the `rill.session_factories`
entry point group, so exec never imports rill.distributed.
"""

from __future__ import annotations

import random
import time

import grpc
import numpy as np

from rill.distributed import direct
from rill.distributed.proto import master_pb2, worker_pb2
from rill.distributed.wire import (
    CHANNEL_OPTIONS,
    MASTER_SERVICE,
    RILL_WORKER_SERVICE,
    error_from_rpc,
    error_from_status,
    plain_array,
    receive_chunks,
    tensor_from_proto,
    tensor_into,
    tensor_to_proto,
)
from rill.exec.fetches import SessionBase
from rill.exec.proto import config_pb2
from rill.graph.errors import InvalidArgumentError, OpError, UnavailableError
from rill.graph.graph import Operation, Tensor, get_default_graph
from rill.graph.graph_def import graph_to_graph_def

__all__ = ["GrpcSession"]

_RETRIES = 10  # UNAVAILABLE is retried this many times (TensorFlow's client does the same)


class GrpcSession(SessionBase):
    """A session whose master is a rill (or TensorFlow) server at `target`.

    Args:
        target: "grpc://host:port".
        graph: the graph to run (default: the default graph).
        config: a ConfigProto; operation_timeout_in_ms bounds every call, device_filters limits
            the tasks a step may use.
        connect_timeout_s: how long calls keep retrying an unreachable master (with backoff).
    """

    def __init__(self, target: str, graph=None, config=None, connect_timeout_s: float = 30.0):
        if not target.startswith("grpc://"):
            raise InvalidArgumentError(f"target {target!r} is not grpc://host:port")
        self.target = target
        self._address = target[len("grpc://") :]
        self.graph = graph if graph is not None else get_default_graph()
        self._config = config if config is not None else config_pb2.ConfigProto()
        self._connect_timeout = connect_timeout_s
        self._channel = grpc.insecure_channel(self._address, CHANNEL_OPTIONS)
        self._calls: dict = {}
        self._handle: str | None = None
        self._version = 0
        self._sent = 0  # ops of the graph the master has
        self._closed = False
        self._fetch_cache: dict = {}
        self._default_ctx = None
        # RunStep goes over rill's direct transport when the master offers one (asked once).
        self._direct = None
        self._direct_at: str | None = None

    # -- transport -------------------------------------------------------------------------------

    def _rpc(self, method: str, req, resp_cls, timeout_ms: int = 0):
        fn = self._calls.get(method)
        if fn is None:
            fn = self._channel.unary_unary(
                f"/{MASTER_SERVICE}/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=resp_cls.FromString,
            )
            self._calls[method] = fn
        ms = timeout_ms or self._config.operation_timeout_in_ms
        deadline = time.monotonic() + (ms / 1000.0 if ms > 0 else self._connect_timeout)
        delay = 0.05
        for attempt in range(_RETRIES + 1):
            # A little longer than the step's own deadline, so the master's error (naming what
            # timed out) arrives before the call itself expires.
            timeout = None if ms <= 0 else max(0.001, deadline - time.monotonic()) + 2.0
            try:
                return fn(req, timeout=timeout)
            except grpc.RpcError as e:
                # Retry when the master itself is unreachable; not when a reachable master
                # reports one of its tasks unavailable (its message names the task).
                retry = (
                    e.code() is grpc.StatusCode.UNAVAILABLE
                    and "/job:" not in (e.details() or "")
                    and attempt < _RETRIES
                )
                if not retry or time.monotonic() + delay > deadline:
                    raise error_from_rpc(e, "the master", self._address, self.graph) from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        raise UnavailableError(f"the master at {self._address} is unavailable")

    def _uses_direct(self) -> bool:
        """Whether RunStep goes over the direct transport (the master is asked once)."""
        if self._direct is None:
            self._direct = False
            if direct.enabled():
                try:
                    port = self._channel.unary_unary(f"/{RILL_WORKER_SERVICE}/DirectPort")(
                        b"", timeout=self._connect_timeout
                    )
                except grpc.RpcError:  # a TensorFlow master, or an older rill one
                    port = b""
                if port.isdigit():
                    self._direct = direct.DirectClient(self._connect_timeout)
                    self._direct_at = f"{self._address.rpartition(':')[0]}:{int(port)}"
        return self._direct is not False

    def _run_step(self, req, timeout_ms: int, parts=()):
        """RunStep: over the direct transport to a rill master that offers one (`parts`: feeds
        encoded by direct.tensor_parts, sent after the request's bytes), else gRPC."""
        if not self._uses_direct():
            return self._rpc("RunStep", req, master_pb2.RunStepResponse, timeout_ms)
        ms = timeout_ms or self._config.operation_timeout_in_ms
        # A little longer than the step's own deadline, as _rpc does.
        timeout = None if ms <= 0 else ms / 1000.0 + 2.0
        try:
            payload = [req.SerializeToString(), *parts] if parts else req.SerializeToString()
            raw = self._direct.call(self._direct_at, direct.RUN_STEP, payload, timeout,
                                    "the master", self._address)  # fmt: skip
        except direct.ConnectFailed:
            # The master's direct port cannot be reached (a firewall may pass only its gRPC
            # port): this step and the later ones go over gRPC; nothing was sent.
            self._direct.close()
            self._direct = False
            direct.merge_parts(req, parts)
            return self._rpc("RunStep", req, master_pb2.RunStepResponse, timeout_ms)
        except UnavailableError:
            self._direct.close()
            self._direct = False  # the master went away: gRPC (with its retries) from now on
            raise
        except OpError as e:
            raise error_from_status(e.error_code, e.message, self.graph) from None
        return master_pb2.RunStepResponse.FromString(raw)

    def _sync_graph(self) -> None:
        """CreateSession on first use, ExtendSession when the graph grew since."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        n = len(self.graph._ops)
        if self._handle is None:
            req = master_pb2.CreateSessionRequest(target=self.target)
            req.graph_def.CopyFrom(graph_to_graph_def(self.graph))
            req.config.CopyFrom(self._config)
            resp = self._rpc("CreateSession", req, master_pb2.CreateSessionResponse)
            self._handle, self._version, self._sent = resp.session_handle, resp.graph_version, n
        elif n > self._sent:
            req = master_pb2.ExtendSessionRequest(session_handle=self._handle,
                                                  current_graph_version=self._version)  # fmt: skip
            req.graph_def.CopyFrom(graph_to_graph_def(self.graph, from_version=self._sent))
            resp = self._rpc("ExtendSession", req, master_pb2.ExtendSessionResponse)
            self._version, self._sent = resp.new_graph_version, n

    # -- public API ------------------------------------------------------------------------------

    @property
    def sess_str(self) -> str:
        return self.target

    def list_devices(self) -> list[str]:
        self._sync_graph()
        resp = self._rpc("ListDevices", master_pb2.ListDevicesRequest(session_handle=self._handle),
                         master_pb2.ListDevicesResponse)  # fmt: skip
        return [d.name for d in list(resp.local_device) + list(resp.remote_device)]

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        mapper = self._mapper(fetches)
        feeds = self._feeds(feed_dict)
        values = self._run(mapper.elements, feeds, options, run_metadata)
        return mapper.build(values)

    def make_callable(self, fetches, feed_list=None, accept_options: bool = False):
        mapper = self._mapper(fetches)
        keys = [self._feed_key(k) for k in (feed_list or ())]

        def call(*args, options=None, run_metadata=None):
            if len(args) != len(keys):
                raise InvalidArgumentError(f"expected {len(keys)} feed values, got {len(args)}")
            return mapper.build(self._run(mapper.elements, list(zip(keys, args)), options,
                                          run_metadata))  # fmt: skip

        if accept_options:
            return call
        return lambda *args: call(*args)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handle is not None:
            try:
                self._rpc("CloseSession", master_pb2.CloseSessionRequest(
                    session_handle=self._handle), master_pb2.CloseSessionResponse, 5000)  # fmt: skip
            except Exception:  # noqa: BLE001 - the master may be gone already
                pass
        if self._direct:
            self._direct.close()
        self._channel.close()

    @staticmethod
    def reset(target: str, containers=None, config=None) -> None:
        """Closes every session of the master at `target` and clears its workers' containers."""
        s = GrpcSession(target, config=config)
        try:
            s._rpc("Reset", master_pb2.ResetRequest(container=list(containers or [])),
                   master_pb2.ResetResponse)  # fmt: skip
        finally:
            s._closed = True
            s._channel.close()

    # -- internals -------------------------------------------------------------------------------

    def _feed_key(self, k) -> Tensor:
        try:
            el = self.graph.as_graph_element(k, allow_operation=False)
        except (TypeError, KeyError, ValueError) as e:
            raise TypeError(f"cannot interpret feed_dict key {k!r} as a Tensor: {e}") from None
        return el

    def _feeds(self, feed_dict) -> list:
        return [(self._feed_key(k), v) for k, v in (feed_dict or {}).items()]

    def _run(self, elements, feeds, options, run_metadata) -> list:
        self._sync_graph()
        req = master_pb2.RunStepRequest(session_handle=self._handle,
                                        store_errors_in_response_body=True,
                                        request_id=random.getrandbits(62) or 1,
                                        rill_chunks_ok=True)  # fmt: skip
        parts: list = []
        raw_feeds = self._uses_direct()
        for t, v in feeds:
            if raw_feeds and type(v) is np.ndarray and v.dtype == t.dtype.np:
                # Direct: the array's own memory goes to the socket (no copy into the request).
                more = direct.tensor_parts(2, t.name, v)
                if more is not None:
                    parts.extend(more)
                    continue
            nt = req.feed.add(name=t.name)
            try:
                if type(v) is np.ndarray and v.dtype == t.dtype.np and plain_array(v):
                    tensor_into(nt.tensor, v)  # built in place, one copy of the values
                else:
                    nt.tensor.CopyFrom(tensor_to_proto(v, t.dtype))
            except (TypeError, ValueError) as e:
                raise TypeError(f"cannot feed {v!r} for {t.name}: {e}") from None
        fetch_names = [e.name for e in elements if isinstance(e, Tensor)]
        req.fetch.extend(fetch_names)
        req.target.extend(e.name for e in elements if isinstance(e, Operation))
        timeout_ms = 0
        if options is not None:
            req.options.CopyFrom(options)
            timeout_ms = options.timeout_in_ms
        resp = self._run_step(req, timeout_ms, parts)
        if resp.status_code:
            raise error_from_status(resp.status_code, resp.status_error_message, self.graph)
        if run_metadata is not None and resp.HasField("metadata"):
            run_metadata.MergeFrom(resp.metadata)
        by_name = {nt.name: nt.tensor for nt in resp.tensor}
        chunked = set(resp.rill_chunked)
        out = []
        for e in elements:
            if isinstance(e, Tensor):
                p = by_name.get(e.name)
                if p is None:
                    raise InvalidArgumentError(f"the master returned no value for {e.name}")
                if e.name in chunked:
                    out.append(self._pull_chunks(resp.rill_chunk_id, e.name, p, timeout_ms))
                else:
                    out.append(tensor_from_proto(p))
            else:
                out.append(None)
        return out

    def _pull_chunks(self, chunk_id: int, name: str, head, timeout_ms: int):
        """A large fetched value the master parked: streamed into a preallocated array."""
        fn = self._calls.get("RecvTensorChunks")
        if fn is None:
            fn = self._channel.unary_stream(
                f"/{RILL_WORKER_SERVICE}/RecvTensorChunks",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=None,
            )
            self._calls["RecvTensorChunks"] = fn
        ms = timeout_ms or self._config.operation_timeout_in_ms
        req = worker_pb2.RecvTensorRequest(step_id=chunk_id, rendezvous_key=name)
        try:
            return receive_chunks(head, fn(req, timeout=ms / 1000.0 if ms > 0 else None))
        except grpc.RpcError as e:
            raise error_from_rpc(e, "the master", self._address, self.graph) from None
