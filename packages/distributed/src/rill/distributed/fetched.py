"""Fetched values on their way from a task to the master's client: a large value another task
parked for the step (`Relay`: pulled into an array, or its chunks passed on as they arrive) and
the TensorProto form of whatever a step returned (`as_proto`)."""

from __future__ import annotations

import time

import grpc
import numpy as np

from rill.distributed.proto import worker_pb2
from rill.distributed.wire import (
    RILL_WORKER_SERVICE,
    error_from_rpc,
    receive_chunks,
    tensor_to_proto,
)
from rill.graph.proto import tensor_pb2

__all__ = ["Relay", "as_proto"]


class Relay:
    """A large fetched value another task parked for this step (RecvTensorChunks): pulled into
    an array (`pull`), or its chunk messages passed on to a rill client as they are (`raw`)."""

    __slots__ = ("channels", "name", "address", "step_id", "key", "head", "deadline")

    def __init__(self, channels, tp, step_id, key, head, deadline):
        self.channels, self.name, self.address = channels, tp.name, tp.address
        self.step_id, self.key, self.head, self.deadline = step_id, key, head, deadline

    def _call(self):
        call = self.channels.stream(self.address, RILL_WORKER_SERVICE, "RecvTensorChunks", None)
        req = worker_pb2.RecvTensorRequest(step_id=self.step_id, rendezvous_key=self.key)
        t = None if self.deadline is None else max(0.001, self.deadline - time.monotonic())
        return call(req, timeout=t)

    def pull(self) -> np.ndarray:
        try:
            return receive_chunks(self.head, self._call())
        except grpc.RpcError as e:
            raise error_from_rpc(e, self.name, self.address) from None

    def raw(self, context=None):
        it = self._call()
        try:
            for msg in it:
                if context is not None and not context.is_active():
                    it.cancel()
                    return
                yield msg
        except grpc.RpcError as e:
            raise error_from_rpc(e, self.name, self.address) from None


def as_proto(v):
    """A fetched value as a TensorProto (the runtime hands over arrays it kept as they are)."""
    if type(v) is Relay:
        v = v.pull()
    return v if v is None or isinstance(v, tensor_pb2.TensorProto) else tensor_to_proto(v)
