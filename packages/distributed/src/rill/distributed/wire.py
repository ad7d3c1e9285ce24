"""What both services and the client share: tensors on the wire, errors as status codes, and
gRPC channels with bounded connection behaviour.

>>> import numpy as np
>>> p = tensor_to_proto(np.arange(3, dtype=np.int32))
>>> tensor_from_proto(p)
array([0, 1, 2], dtype=int32)
"""

from __future__ import annotations

import re
import threading
import time

import grpc
import grpc.experimental
import numpy as np

from rill.graph import dtypes
from rill.graph.errors import (
    CANCELLED,
    INVALID_ARGUMENT,
    OK,
    RESOURCE_EXHAUSTED,
    UNAVAILABLE,
    UNIMPLEMENTED,
    CancelledError,
    DeadlineExceededError,
    InternalError,
    OpError,
    UnavailableError,
    error_class_for_code,
)
from rill.graph.graph_def import make_ndarray, make_tensor_proto
from rill.graph.proto import tensor_pb2

__all__ = [
    "MASTER_SERVICE",
    "WORKER_SERVICE",
    "RILL_WORKER_SERVICE",
    "CHANNEL_OPTIONS",
    "tensor_to_proto",
    "tensor_from_proto",
    "error_to_status",
    "error_from_status",
    "error_from_rpc",
    "ChannelCache",
]

MASTER_SERVICE = "tensorflow.MasterService"
WORKER_SERVICE = "tensorflow.WorkerService"
RILL_WORKER_SERVICE = "rill.WorkerService"  # rill's own additions (chunked tensor streams)

# No message-size cap (grpc's default is 4 MB; -1 lifts it to protobuf's 2 GB, and tensors
# larger than CHUNK_THRESHOLD travel in chunks anyway). Reconnection backs off from 100 ms to
# 2 s, so a restarting task is found again quickly (and its name re-resolved: grpc's DNS
# resolver runs again on every reconnect).
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
    # A streamed call is read by the thread that iterates it (rill's streams have one reader),
    # not by a channel thread that grpc starts again whenever the channel falls idle.
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
]
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5000),
    ("grpc.http2.max_ping_strikes", 0),
]

CHUNK_THRESHOLD = 8 << 20  # values larger than this travel as a RecvTensorChunks stream
CHUNK_BYTES = 2 << 20
CHUNKS_OK = "type.rill/chunks"  # RecvTensorRequest.transport_options of a rill receiver


def plain_array(value) -> bool:
    """A numeric array whose bytes are TensorFlow's tensor_content as they are."""
    return (
        type(value) is np.ndarray
        and value.dtype.kind in "biufc"
        and value.dtype.byteorder in "=<|"
        and value.dtype != np.float16
    )


def tensor_into(p: tensor_pb2.TensorProto, value) -> None:
    """Fills the (empty) TensorProto `p` with `value` in place (no message copy)."""
    if value is None:
        p.dtype = dtypes.float32.enum
        return
    if plain_array(value):
        # The common case in one copy (make_tensor_proto's general path makes three).
        p.dtype = dtypes.as_dtype(value.dtype).enum
        dims = p.tensor_shape.dim
        for d in value.shape:
            dims.add(size=d)
        p.tensor_content = value.tobytes()
        return
    p.CopyFrom(make_tensor_proto(value))


def tensor_to_proto(value, dtype=None) -> tensor_pb2.TensorProto:
    """A TensorProto of a fetched or fed value (numeric values in `tensor_content`)."""
    if dtype is None:
        p = tensor_pb2.TensorProto()
        tensor_into(p, value)
        return p
    return make_tensor_proto(value, dtype)


def meta_into(p: tensor_pb2.TensorProto, value) -> None:
    """Fills `p` with `value`'s dtype and shape and no values (a chunked stream's head)."""
    p.dtype = dtypes.as_dtype(value.dtype).enum
    for d in value.shape:
        p.tensor_shape.dim.add(size=d)


def tensor_meta(value) -> tensor_pb2.TensorProto:
    """A TensorProto with `value`'s dtype and shape and no values (a chunked stream's head)."""
    p = tensor_pb2.TensorProto()
    meta_into(p, value)
    return p


def chunkable(value) -> bool:
    return (
        type(value) is np.ndarray
        and value.nbytes > CHUNK_THRESHOLD
        and value.dtype.kind in "biufc"
        and value.dtype.byteorder in "=<|"
    )


def iter_chunks(value):
    """Serialized RillTensorChunk messages carrying `value`'s bytes, CHUNK_BYTES each: each built
    straight from the array's memory (one copy per chunk, no copy of the whole array)."""
    flat = memoryview(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
    for start in range(0, len(flat), CHUNK_BYTES):
        piece = flat[start : start + CHUNK_BYTES]
        yield b"".join((_CHUNK_TAG, _varint(len(piece)), piece))


_CHUNK_TAG = b"\x22"  # RillTensorChunk.data: field 4, length-delimited


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def chunk_data(raw: bytes):
    """The `data` of a serialized RillTensorChunk, as a view of `raw` when the message holds
    nothing else (what iter_chunks sends); parsed as a message otherwise."""
    if raw[:1] == _CHUNK_TAG:
        n, shift, pos = 0, 0, 1
        while pos < len(raw) and pos < 11:
            b = raw[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if pos + n == len(raw):
                    return memoryview(raw)[pos:]
                break
    from rill.distributed.proto import worker_pb2

    return worker_pb2.RillTensorChunk.FromString(raw).data


def receive_chunks(head, chunks, out=None) -> np.ndarray:
    """Copies a chunk stream (serialized RillTensorChunk messages) into one preallocated array
    of the head's dtype and shape (`out` when given)."""
    from rill.graph.graph_def import shape_from_proto

    if out is None:
        dtype = dtypes.as_dtype(head.dtype).np
        shape = tuple(shape_from_proto(head.tensor_shape).dims)
        out = np.empty(shape, dtype)
    buf = memoryview(out.reshape(-1).view(np.uint8))
    pos = 0
    for raw in chunks:
        data = chunk_data(raw)
        n = len(data)
        if pos + n > len(buf):
            raise InternalError(f"a chunked tensor sent more than its {len(buf)} bytes")
        buf[pos : pos + n] = data
        pos += n
    if pos != len(buf):
        raise InternalError(f"a chunked tensor ended after {pos} of {len(buf)} bytes")
    return out


_FAST_DTYPES = {
    dt.enum: np.dtype(dt.np).newbyteorder("<")
    for dt in (
        dtypes.float32,
        dtypes.float64,
        dtypes.int8,
        dtypes.int16,
        dtypes.int32,
        dtypes.int64,
        dtypes.uint8,
        dtypes.uint16,
        dtypes.uint32,
        dtypes.uint64,
        dtypes.bool_,
        dtypes.complex64,
        dtypes.complex128,
    )  # fmt: skip
}


def tensor_from_proto(p: tensor_pb2.TensorProto) -> np.ndarray:
    """A TensorProto's value as a new writable array.

    A plain numeric `tensor_content` is copied straight into a fresh (aligned) array; a view
    of the message's bytes would save that copy but not its alignment, and BLAS results may
    depend on the alignment of their inputs (bit-for-bit equality with a local Session)."""
    dt = _FAST_DTYPES.get(p.dtype)
    if dt is not None:
        content = p.tensor_content
        if content:
            dims = [d.size for d in p.tensor_shape.dim]
            n = 1
            for d in dims:
                n *= d
            if n * dt.itemsize == len(content) and min(dims, default=0) >= 0:
                return np.frombuffer(content, dt).reshape(dims).copy()
    return make_ndarray(p)


# -- errors --------------------------------------------------------------------------------------

_GRPC_TO_CODE = {c: c.value[0] for c in grpc.StatusCode}


def error_to_status(e: BaseException) -> tuple[int, str]:
    """(TensorFlow error code, message) for an exception raised while serving a request."""
    if isinstance(e, OpError):
        msg = str(e)
        op = getattr(e, "op", None)
        name = getattr(op, "name", None)
        if name and "{{node " not in msg:
            # TensorFlow's tag: clients map it back to the op of their own graph.
            msg = f"{msg}\n\t [[{{{{node {name}}}}}]]"
        return e.error_code, msg
    if isinstance(e, MemoryError):
        return RESOURCE_EXHAUSTED, f"out of memory: {e}"
    if isinstance(e, NotImplementedError):
        return UNIMPLEMENTED, str(e)
    if isinstance(e, (ValueError, TypeError, KeyError)):
        return INVALID_ARGUMENT, f"{type(e).__name__}: {e}"
    return 13, f"{type(e).__name__}: {e}"


_NODE_TAG = re.compile(r"\{\{node ([^}]+)\}\}")


def error_from_status(code: int, message: str, graph=None) -> OpError:
    """The rill error for a status; `graph` (the caller's) attributes it to the named op."""
    cls = error_class_for_code(code)
    op = None
    if graph is not None:
        m = _NODE_TAG.search(message)
        if m:
            try:
                op = graph.get_operation_by_name(m.group(1))
            except (KeyError, ValueError):
                op = None
    err = cls(message, op=op)
    return err


def error_from_rpc(err: grpc.RpcError, who: str, address: str, graph=None) -> OpError:
    """A failed RPC as a rill error naming the task (`who`), its address and gRPC's message."""
    try:
        code = err.code()
        details = err.details() or ""
    except Exception:  # noqa: BLE001 - a non-call RpcError
        code, details = grpc.StatusCode.UNKNOWN, str(err)
    num = _GRPC_TO_CODE.get(code, 2)
    if num in (UNAVAILABLE, CANCELLED) and code is not grpc.StatusCode.CANCELLED:
        return UnavailableError(f"{who} at {address} is unavailable: {code.name}: {details}")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(
            f"{who} at {address} did not answer within the deadline: {details}"
        )
    if code is grpc.StatusCode.CANCELLED:
        return CancelledError(f"the call to {who} at {address} was cancelled: {details}")
    if num == OK:
        return InternalError(f"{who} at {address}: {details}")
    e = error_from_status(num, details, graph)
    if who not in e.message:
        e = type(e)(f"{e.message} (from {who} at {address})", op=e.op)
    return e


def abort_with(context, e: BaseException):
    """Ends a unary RPC with `e` as its gRPC status (for requests that carry no error body)."""
    code, msg = error_to_status(e)
    status = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    context.abort(status, msg)


def grpc_status_of(code: int) -> grpc.StatusCode:
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)


def context_deadline(context) -> float | None:
    """The caller's deadline as a time.monotonic() value (None when it set none: grpc then
    reports a remaining time of about 2**63 ns)."""
    if context is None:
        return None
    left = context.time_remaining()
    if left is None or left > 1e8:
        return None
    return time.monotonic() + left


def deadline_error(what: str) -> DeadlineExceededError:
    return DeadlineExceededError(f"{what} ran past its deadline (operation_timeout_in_ms)")


# -- channels ------------------------------------------------------------------------------------


class ChannelCache:
    """One channel per address, created on first use; unary and stream callables per method."""

    def __init__(self, credentials=None):
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._calls: dict = {}
        self._credentials = credentials

    def channel(self, address: str) -> grpc.Channel:
        ch = self._channels.get(address)
        if ch is None:
            with self._lock:
                ch = self._channels.get(address)
                if ch is None:
                    if self._credentials is not None:
                        ch = grpc.secure_channel(address, self._credentials, CHANNEL_OPTIONS)
                    else:
                        ch = grpc.insecure_channel(address, CHANNEL_OPTIONS)
                    self._channels[address] = ch
        return ch

    def unary(self, address: str, service: str, method: str, response_cls):
        key = (address, service, method, "u")
        fn = self._calls.get(key)
        if fn is None:
            fn = self.channel(address).unary_unary(
                f"/{service}/{method}",
                request_serializer=_serialize,
                response_deserializer=response_cls.FromString,
            )
            self._calls[key] = fn
        return fn

    def stream(self, address: str, service: str, method: str, response_cls):
        """A unary-stream callable; `response_cls` None yields the raw serialized messages."""
        key = (address, service, method, "s")
        fn = self._calls.get(key)
        if fn is None:
            fn = self.channel(address).unary_stream(
                f"/{service}/{method}",
                request_serializer=_serialize,
                response_deserializer=None if response_cls is None else response_cls.FromString,
            )
            self._calls[key] = fn
        return fn

    def close(self) -> None:
        with self._lock:
            chans = list(self._channels.values())
            self._channels.clear()
            self._calls.clear()
        for ch in chans:
            ch.close()


def _serialize(msg) -> bytes:
    return msg.SerializeToString()
