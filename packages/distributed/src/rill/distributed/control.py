"""Job completion across a cluster: rill's own `/rill.Control/JobDone` RPC.

When the chief's training ends, it runs a `_JobDone` op; the server hosting it (through
rill.exec.lifecycle) tells every other task of its cluster, and each stops serving after a grace
period, so that `rill-server` exits 0 and a Kubernetes job completes (TensorFlow's PS tasks never
exit: `server.join()` forever). The RPC sits beside TensorFlow's services, which a TensorFlow peer
never calls, so the wire protocol stays TensorFlow's.
"""

from __future__ import annotations

import logging
import threading

import grpc

from rill.distributed.proto import control_pb2
from rill.exec import lifecycle

__all__ = ["CONTROL_SERVICE", "JobControl"]

CONTROL_SERVICE = "rill.Control"
_log = logging.getLogger("rill.distributed")
_RPC_TIMEOUT_S = 5.0


class JobControl:
    """The job-completion side of one Server."""

    def __init__(self, server):
        self._server = server
        self._done = threading.Event()
        self._remove_listener = None

    def handler(self) -> grpc.GenericRpcHandler:
        def job_done(raw: bytes, context):
            try:
                req = control_pb2.JobDoneRequest.FromString(raw)
            except Exception as e:  # noqa: BLE001 - a malformed request is refused, not fatal
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed JobDoneRequest: {e}")
            self.finish(req.reason, req.grace_secs, broadcast=req.broadcast, origin=req.from_task)
            return control_pb2.JobDoneResponse()

        return grpc.method_handlers_generic_handler(
            CONTROL_SERVICE,
            {
                "JobDone": grpc.unary_unary_rpc_method_handler(
                    job_done,
                    request_deserializer=None,
                    response_serializer=lambda m: m.SerializeToString(),
                )
            },
        )

    def start(self) -> None:
        self._remove_listener = lifecycle.on_job_done(
            self._server.task_name, lambda reason, grace: self.finish(reason, grace, True)
        )

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    def finish(self, reason: str, grace_secs: float, broadcast: bool, origin: str = "") -> None:
        """The job is finished: tell the other tasks (when `broadcast`), then stop serving after
        `grace_secs`. Returns at once; repeated news is ignored."""
        if self._done.is_set():
            return
        self._done.set()
        me = self._server.task_name
        _log.info(
            "%s: the job is finished (%s%s); stopping in %.1f s",
            me,
            reason or "no reason given",
            f", from {origin}" if origin else "",
            grace_secs,
        )
        threading.Thread(
            target=self._finish, args=(reason, max(0.0, grace_secs), broadcast),
            name="rill-job-done", daemon=True,
        ).start()  # fmt: skip

    def _finish(self, reason: str, grace_secs: float, broadcast: bool) -> None:
        server = self._server
        if broadcast:
            req = control_pb2.JobDoneRequest(
                reason=reason, grace_secs=grace_secs, from_task=server.task_name, broadcast=False
            ).SerializeToString()
            for job, index, address in server.cluster_spec.tasks():
                if f"/job:{job}/replica:0/task:{index}" == server.task_name:
                    continue
                try:
                    call = server._channels.channel(address).unary_unary(
                        f"/{CONTROL_SERVICE}/JobDone",
                        request_serializer=None,
                        response_deserializer=control_pb2.JobDoneResponse.FromString,
                    )
                    call(req, timeout=_RPC_TIMEOUT_S)
                except grpc.RpcError as e:
                    _log.warning(
                        "could not tell /job:%s/task:%d (%s) that the job is finished: %s",
                        job,
                        index,
                        address,
                        e.details() if hasattr(e, "details") else e,
                    )
        if not server._stopped.wait(grace_secs):
            server.stop()
