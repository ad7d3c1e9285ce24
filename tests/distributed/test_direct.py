"""rill's direct transport (rill.distributed.direct), in process (each task its own Server on
loopback): steps between rill tasks make their RunGraph and RunStep calls on it and give what
gRPC gives; a task without it (RILL_DIRECT_RPC=0) is called on gRPC; a frame that is not a
rill caller's is refused without harming the server; stop() closes the port."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest

import rill.graph as rg
from rill.distributed import Server, direct
from rill.exec import Session
from rill.graph import errors

from ._core_tasks import free_ports

PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"


def _tasks():
    ports = free_ports(2)
    spec = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}
    return Server(spec, "ps", 0), Server(spec, "worker", 0)


def _graph():
    """A PS variable that the worker's step reads, scales and adds back (a staged step)."""
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            v = rg.Variable(rg.constant([1.0, 2.0]), name="v")
        with g.device(WORKER):
            x = rg.placeholder(rg.float32, [], name="x")
            d = rg.identity(v) * x
        with g.device(PS):
            up = rg.assign_add(v, d)
        with g.device(WORKER):
            out = up + 0.0
        init = rg.global_variables_initializer()
    return g, v, x, out, init


@pytest.fixture
def calls(monkeypatch):
    """The methods of every direct call made in this process, in order."""
    seen = []
    real = direct.DirectClient.call

    def call(self, at, method, payload, timeout, who, address):
        seen.append(method)
        return real(self, at, method, payload, timeout, who, address)

    monkeypatch.setattr(direct.DirectClient, "call", call)
    return seen


def _run_steps():
    g, v, x, out, init = _graph()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        got = [sess.run(out, {x: 2.0}) for _ in range(3)]
        with pytest.raises(errors.InvalidArgumentError, match="fed twice|x"):
            sess.run(out, {x: [1.0, 2.0, 3.0]})  # a bad feed: the master's error, in the body
        got.append(sess.run(v))
        at = worker._master._direct_at.get(ps.target[len("grpc://") :])
    return got, at


def test_steps_between_rill_tasks_go_direct_and_equal_grpc(calls, monkeypatch):
    got, at = _run_steps()
    assert at is not None and at.startswith("localhost:")
    # Every RunStep from the client and every RunGraph the worker's master sends the PS.
    assert calls.count(direct.RUN_STEP) >= 5
    assert calls.count(direct.RUN_GRAPH) >= 3 * 2  # each training step: the read, the apply
    del calls[:]
    monkeypatch.setenv("RILL_DIRECT_RPC", "0")  # neither side offers or uses it
    want, at = _run_steps()
    assert at is None and calls == []
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[-1], [27.0, 54.0])  # (1 + 2)^3 times the start


def _frame(sock, length: int, method: int, payload: bytes = b"") -> tuple[int, bytes] | None:
    """Sends a request frame; (status code, body) of the answer, or None when the server closed
    the connection instead."""
    sock.sendall(struct.pack("<QBd", length, method, 5.0) + payload)
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    n, code = struct.unpack("<QB", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        assert chunk
        body += chunk
    return code, body


def test_frames_that_are_not_a_rill_caller_s_are_refused_and_the_server_keeps_serving():
    g, v, x, out, init = _graph()
    ps, worker = _tasks()
    with ps, worker:
        port = ps._direct.port
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            code, body = _frame(s, 0, 99)  # no such method
            assert code == 3 and b"unknown direct method 99" in body  # INVALID_ARGUMENT
            code, body = _frame(s, 5, direct.RUN_GRAPH, b"\xff\xff\xff\xff\xff")  # not a proto
            assert code != 0
            # A RunGraph for a graph nobody registered: the worker's own error.
            code, body = _frame(s, 0, direct.RUN_GRAPH)
            assert code == 5 and b"is not registered" in body  # NOT_FOUND
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            assert _frame(s, 2**40, direct.RUN_GRAPH) is None  # over protobuf's limit: dropped
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            np.testing.assert_array_equal(sess.run(out, {x: 1.0}), [2.0, 4.0])


def test_stop_closes_the_direct_port_and_a_caller_then_reports_the_task_unavailable():
    g, v, x, out, init = _graph()
    ps, worker = _tasks()
    with worker, Session(worker.target, graph=g) as sess:
        with ps:
            sess.run(init)
            sess.run(out, {x: 1.0})
            port = ps._direct.port
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=30).close()
        # The worker's master loses its connection to the PS: UnavailableError naming it.
        with pytest.raises(errors.UnavailableError, match="/job:ps/replica:0/task:0"):
            sess.run(out, {x: 1.0}, options=rg_options(5000))


def test_a_direct_port_that_cannot_be_reached_leaves_the_steps_on_grpc():
    # Between hosts a firewall may pass only the gRPC ports: the tasks still announce their
    # direct ports, but nobody listens there. The first call of each caller finds that out
    # before sending anything and makes the same call over gRPC, as do the later ones.
    g, v, x, out, init = _graph()
    ps, worker = _tasks()
    with ps, worker:
        ps._direct.stop(grace=0)
        worker._direct.stop(grace=0)
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            got = [sess.run(out, {x: 2.0}) for _ in range(3)]
            assert worker._master._direct_at[ps.target[len("grpc://") :]] is None
            np.testing.assert_array_equal(sess.run(v), [27.0, 54.0])
    np.testing.assert_array_equal(got[0], [3.0, 6.0])


def rg_options(ms: int):
    from rill.exec.proto import config_pb2

    return config_pb2.RunOptions(timeout_in_ms=ms)


def test_tensor_parts_decode_as_the_message_tensor_into_makes():
    from rill.distributed.proto import master_pb2
    from rill.distributed.wire import tensor_from_proto, tensor_into

    values = [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(10, dtype=np.int64)[::3],  # not contiguous
        np.array([True, False, True]),
        np.full((2, 1, 3), 1 + 2j, np.complex64),
        np.array(2.5),
    ]
    for v in values:
        req = master_pb2.RunStepRequest(session_handle="s")
        req.fetch.append("y:0")
        raw = req.SerializeToString() + b"".join(
            bytes(b) for b in direct.tensor_parts(2, "x:0", v)
        )  # fmt: skip
        want = master_pb2.RunStepRequest(session_handle="s")
        want.fetch.append("y:0")
        tensor_into(want.feed.add(name="x:0").tensor, v.copy(order="C"))
        got = master_pb2.RunStepRequest.FromString(raw)
        assert got == want
        np.testing.assert_array_equal(tensor_from_proto(got.feed[0].tensor), v)
    assert direct.tensor_parts(2, "x:0", np.zeros((0, 3), np.float32)) is None
    assert direct.tensor_parts(2, "x:0", np.array([b"a"], object)) is None


def test_values_of_every_kind_cross_a_staged_step_intact(calls):
    feeds = {
        "f": np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2],  # not contiguous
        "i": np.array([[1, -2], [3, 4]], np.int32),
        "b": np.array([True, False]),
        "s": np.array([b"ab", b"c"], object),
        "e": np.zeros((0, 2), np.float32),
    }
    dtypes = {"f": rg.float64, "i": rg.int32, "b": rg.bool_, "s": rg.string, "e": rg.float32}
    g = rg.Graph()
    with g.as_default():
        with g.device(WORKER):
            ph = {k: rg.placeholder(dtypes[k], name=k) for k in feeds}
        with g.device(PS):
            on_ps = {k: rg.identity(p) for k, p in ph.items()}
        with g.device(WORKER):
            back = {k: rg.identity(t) for k, t in on_ps.items()}
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        for _ in range(2):
            got = sess.run(back, {ph[k]: v for k, v in feeds.items()})
            for k, v in feeds.items():
                np.testing.assert_array_equal(got[k], v)
                assert got[k].dtype == v.dtype and got[k].shape == v.shape
        plan = next(p for s in worker._master.sessions.values() for p in s.plans.values())
        assert plan.stages is not None
    assert direct.RUN_GRAPH in calls and direct.RUN_STEP in calls
