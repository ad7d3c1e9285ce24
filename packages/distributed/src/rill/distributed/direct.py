"""A direct transport for the per-step calls between rill tasks: RunGraph (a master to the
workers of its step) and RunStep (a rill client to its master), as framed protobuf messages on
one TCP connection per concurrent call, served by a thread per connection.

Through grpc's Python server a unary call costs about 0.65 ms of CPU on each side (the HTTP/2
framing, the completion-queue thread and two hand-offs to a pool thread), several times what
the PS spends executing a training step's partition. Here a call is one write and one read on
each side, and the request is handled on the thread that read it. TensorFlow's services stay
on gRPC, unchanged: every other call, every TensorFlow peer, and rill tasks with TLS (this
transport has none, so a server with credentials offers none) use it. A task announces its
port through gRPC (`rill.WorkerService/DirectPort`); a caller that cannot reach it uses gRPC.

Frames (little-endian): a request is [u64 length][u8 method][f64 timeout in seconds, < 0:
none] then the serialized request; a response is [u64 length][u8 status code] then the
serialized response (code 0) or the error message in UTF-8 (a TensorFlow error code). Only
protocol buffers travel; the connection binds the same host as the task's gRPC port.
RILL_DIRECT_RPC=0 in a task's environment turns its listener off.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

from rill.graph.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    UnavailableError,
)

__all__ = [
    "ConnectFailed",
    "DirectClient",
    "DirectServer",
    "RUN_GRAPH",
    "RUN_STEP",
    "enabled",
    "merge_parts",
]

RUN_GRAPH = 1
RUN_STEP = 2
_REQ = struct.Struct("<QBd")
_RESP = struct.Struct("<QB")
MAX_MESSAGE = 2**31 - 1  # protobuf's own limit on one message
_NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
# A new connection waits at most this long: a port a firewall drops (only the gRPC port may be
# open between hosts) costs this once, then the caller uses gRPC for that task.
CONNECT_TIMEOUT_S = 3.0


class ConnectFailed(UnavailableError):
    """No connection to a direct port could be made: nothing of the call was sent, so the
    caller may make it over gRPC instead."""


def enabled() -> bool:
    """Whether this process offers the direct transport (RILL_DIRECT_RPC, default on)."""
    return os.environ.get("RILL_DIRECT_RPC", "1").strip().lower() not in ("0", "false", "off")


def merge_parts(msg, parts) -> None:
    """Puts values encoded by tensor_parts into `msg` itself, for a call that goes over gRPC
    after all (the encoded parts are fields of the message)."""
    if parts:
        msg.MergeFromString(b"".join(bytes(b) for b in parts))


def _read(sock, n: int):
    """Exactly n bytes from `sock`, or None when the peer closed the connection first."""
    data = sock.recv(n)
    if len(data) == n:
        return data
    if not data:
        return None
    buf = bytearray(n)
    view = memoryview(buf)
    got = len(data)
    view[:got] = data
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            return None
        got += k
    return buf


def _send(sock, head: bytes, body) -> None:
    """Writes a frame: its header and its body, bytes or a list of buffers (sendmsg may write
    part of them: the rest follows)."""
    parts = [head, *body] if type(body) is list else [head, body]
    sent = sock.sendmsg(parts)
    for part in parts:
        n = memoryview(part).nbytes
        if sent >= n:
            sent -= n
            continue
        sock.sendall(memoryview(part).cast("B")[sent:])
        sent = 0


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, body_len: int) -> bytes:
    """The tag and length of a length-delimited field."""
    return _varint(number << 3 | 2) + _varint(body_len)


def tensor_parts(field: int, name: str, value) -> list | None:
    """A NamedTensorProto {name, tensor} of the numeric array `value` as field `field` of the
    message it is appended to: [the protobuf bytes before the values, the array's own memory]
    (what tensor_into and SerializeToString make, without copying the values twice); None for a
    value that is not a plain non-empty array (the caller puts it into the message instead).
    Protocol buffers merge a repeated field's entries from wherever they are in the bytes."""
    from rill.distributed.wire import plain_array
    from rill.graph import dtypes

    if not plain_array(value) or value.size == 0:
        return None
    if not value.flags.c_contiguous:
        value = value.copy(order="C")
    data = memoryview(value).cast("B")
    shape = b"".join(_field(2, len(d)) + d for d in (b"\x08" + _varint(n) for n in value.shape))
    head = b"\x08" + _varint(dtypes.as_dtype(value.dtype).enum)
    if shape:  # a scalar's shape has no dims: left out, as SerializeToString does
        head += _field(2, len(shape)) + shape
    tensor_len = len(head) + len(_field(4, data.nbytes)) + data.nbytes
    name_b = name.encode()
    named_len = len(_field(1, len(name_b))) + len(name_b) + len(_field(2, tensor_len)) + tensor_len
    prefix = (_field(field, named_len) + _field(1, len(name_b)) + name_b + _field(2, tensor_len)
              + head + _field(4, data.nbytes))  # fmt: skip
    return [prefix, data]


def _split_address(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


class _Context:
    """What a served call's handler asks of grpc's context: the time left, and whether it is
    still wanted (the server still runs). A caller that gives up closes its connection, which
    this thread notices only after the call; its step ends at its deadline, or when the master
    aborts it (CleanupGraph), as on gRPC."""

    __slots__ = ("deadline", "server")

    def __init__(self, timeout: float, server):
        self.deadline = None if timeout < 0 else time.monotonic() + timeout
        self.server = server

    def time_remaining(self):
        return 1e18 if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def is_active(self):
        return not self.server._stopped

    def add_callback(self, fn) -> bool:
        return False  # grpc's answer when the call has ended already: nothing to call back


class DirectServer:
    """Listens on `host` (port 0: a free one) and serves each connection's calls in order on a
    thread of its own; `handlers` maps a method to fn(raw request bytes, context) -> the
    response: a message, or a list of buffers (its serialized bytes). stop() closes the
    listener and every connection."""

    def __init__(self, host: str, handlers: dict):
        self._handlers = handlers
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host in ("localhost", ""):
            host, family = "127.0.0.1", socket.AF_INET
        self._sock = socket.create_server((host, 0), family=family)
        self.port = self._sock.getsockname()[1]
        self._lock = threading.Condition()
        self._conns: set = set()
        self._busy: set = set()  # connections in a call
        self._stopped = False
        self._thread = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept, name="rill-direct-accept",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # stop() closed the listener
            with self._lock:
                if self._stopped:
                    conn.close()
                    return
                self._conns.add(conn)
            conn.setsockopt(*_NODELAY)
            threading.Thread(target=self._serve, args=(conn,), name="rill-direct",
                             daemon=True).start()  # fmt: skip

    def _serve(self, conn) -> None:
        from rill.distributed.wire import error_to_status

        try:
            while True:
                head = _read(conn, _REQ.size)
                if head is None:
                    return
                n, method, timeout = _REQ.unpack(head)
                if n > MAX_MESSAGE:
                    return  # not a rill caller: drop the connection
                payload = _read(conn, n) if n else b""
                if payload is None:
                    return
                with self._lock:
                    if self._stopped:
                        return
                    self._busy.add(conn)
                fn = self._handlers.get(method)
                try:
                    if fn is None:
                        raise InvalidArgumentError(f"unknown direct method {method}")
                    body, code = fn(payload, _Context(timeout, self)), 0
                    if type(body) is not list:
                        body = body.SerializeToString()
                except Exception as e:  # noqa: BLE001 - reported to the caller as a status
                    code, msg = error_to_status(e)
                    body = msg.encode("utf-8", "replace")
                n = sum(memoryview(b).nbytes for b in body) if type(body) is list else len(body)
                try:
                    _send(conn, _RESP.pack(n, code), body)
                finally:
                    # The response may hold a variable's own memory: a reference kept while
                    # this thread waits for the next call would make that variable's next
                    # update copy it (copy on write) instead of updating it in place.
                    body = None
                    with self._lock:
                        self._busy.discard(conn)
                        self._lock.notify_all()
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
                self._busy.discard(conn)
                self._lock.notify_all()
            conn.close()

    def stop(self, grace: float = 1.0) -> None:
        """Stops accepting; a call in progress has `grace` seconds to send its answer (the
        step's own end: a stopped server cancels its steps first), then every connection
        closes."""
        with self._lock:
            self._stopped = True
            idle = [c for c in self._conns if c not in self._busy]
        for c in idle:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            # shutdown() wakes the thread blocked in accept() (close() alone would leave the
            # listener open until a connection came).
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._thread is not None:
            self._thread.join(10.0)
        end = time.monotonic() + grace
        with self._lock:
            while self._busy and time.monotonic() < end:
                self._lock.wait(max(0.0, end - time.monotonic()))
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class DirectClient:
    """Calls to DirectServers: idle connections are kept per address and reused, one per
    concurrent call; close() ends every call in flight (CancelledError)."""

    def __init__(self, connect_timeout_s: float = 30.0):
        self._lock = threading.Lock()
        self._idle: dict[str, list] = {}
        self._busy: set = set()
        self._closed = False
        self.connect_timeout_s = connect_timeout_s

    def _take(self, address: str, timeout):
        with self._lock:
            if self._closed:
                raise CancelledError("the caller was stopped")
            idle = self._idle.get(address)
            if idle:
                sock = idle.pop()
                self._busy.add(sock)
                return sock
        host, port = _split_address(address)
        t = min(self.connect_timeout_s, CONNECT_TIMEOUT_S)
        if timeout is not None:
            t = min(t, timeout)
        try:
            sock = socket.create_connection((host, int(port)), timeout=t)
        except OSError as e:
            raise ConnectFailed(f"cannot connect to direct port {address}: {e}") from None
        sock.setsockopt(*_NODELAY)
        with self._lock:
            if self._closed:
                sock.close()
                raise CancelledError("the caller was stopped")
            self._busy.add(sock)
        return sock

    def call(self, direct_address: str, method: int, payload: bytes, timeout, who: str,
             address: str):  # fmt: skip
        """The serialized response of `method` at `direct_address` (a DirectServer's
        "host:port") to `payload` (bytes, or a list of buffers sent one after the other), or
        the callee's error; a connection or a deadline that fails is
        UnavailableError or DeadlineExceededError naming the task `who` and its `address`."""
        sock = self._take(direct_address, timeout)  # ConnectFailed: nothing was sent
        try:
            sock.settimeout(timeout)
            n = (
                sum(memoryview(b).nbytes for b in payload)
                if type(payload) is list
                else len(payload)
            )
            _send(sock, _REQ.pack(n, method, -1.0 if timeout is None else timeout), payload)
            head = _read(sock, _RESP.size)
            if head is None:
                raise ConnectionError("the connection was closed")
            n, code = _RESP.unpack(head)
            body = _read(sock, n) if n else b""
            if body is None:
                raise ConnectionError("the connection was closed mid-response")
        except TimeoutError:
            self._drop(sock)
            raise DeadlineExceededError(
                f"{who} at {address} did not answer within the deadline"
            ) from None
        except OSError as e:
            self._drop(sock)
            if self._closed:
                raise CancelledError("the caller was stopped") from None
            raise UnavailableError(
                f"{who} at {address} is unavailable: {e} (direct transport {direct_address})"
            ) from None
        with self._lock:
            self._busy.discard(sock)
            if self._closed:
                sock.close()
            else:
                self._idle.setdefault(direct_address, []).append(sock)
        if code:
            from rill.distributed.wire import error_from_status

            err = error_from_status(code, bytes(body).decode("utf-8", "replace"))
            if who not in err.message:
                err = type(err)(f"{err.message}\n(on {who})")
            raise err
        return body

    def _drop(self, sock) -> None:
        if sock is None:
            return
        with self._lock:
            self._busy.discard(sock)
        sock.close()

    def forget(self, address: str) -> None:
        """Closes the idle connections to `address` (its task failed or restarted)."""
        with self._lock:
            idle = self._idle.pop(address, [])
        for s in idle:
            s.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = [s for v in self._idle.values() for s in v] + list(self._busy)
            self._idle.clear()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if s not in self._busy:
                s.close()
