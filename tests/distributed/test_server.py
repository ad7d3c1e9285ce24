"""Server lifecycle and malformed requests (in process, loopback)."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import numpy as np
import pytest

import rill.graph as rg
from rill.distributed import Server
from rill.distributed.proto import master_pb2
from rill.exec import RunOptions, Session
from rill.graph import errors
from rill.graph.graph_def import graph_to_graph_def


def _port_free(port: int) -> bool:
    """Whether a new server could listen on `port`. SO_REUSEADDR, as every server sets it
    (grpc too): a connection the stopped server closed may leave the port in TIME_WAIT for a
    minute, which is no listener; a socket still listening there fails the bind."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("localhost", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _master_call(server, method, resp_cls):
    ch = grpc.insecure_channel(server.target[len("grpc://") :])
    return ch, ch.unary_unary(f"/tensorflow.MasterService/{method}",
                              request_serializer=lambda m: m if isinstance(m, bytes)
                              else m.SerializeToString(),
                              response_deserializer=resp_cls.FromString)  # fmt: skip


def test_stop_cancels_a_step_frees_the_port_and_join_returns():
    server = Server.create_local_server()
    port = server.port
    assert not _port_free(port)
    g = rg.Graph()
    with g.as_default():
        q = rg.FIFOQueue(1, [rg.float32])
        blocked = q.dequeue()
    result = {}

    def run():
        sess = Session(server.target, graph=g)
        try:
            sess.run(blocked)
        except errors.OpError as e:
            result["error"] = e

    joined = {}
    j = threading.Thread(target=lambda: joined.setdefault("r", server.join(30)))
    j.start()
    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while not server._worker._steps:  # until the step is waiting on the empty queue
        assert time.monotonic() < deadline and t.is_alive(), result
        time.sleep(0.01)
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 10
    t.join(20)
    j.join(20)
    assert isinstance(result.get("error"), errors.CancelledError), result
    assert joined["r"] is True
    assert _port_free(port)
    server.stop()  # idempotent


def test_context_manager_and_server_def():
    with Server({"worker": ["localhost:0"]}, job_name="worker", task_index=0) as s:
        assert s.server_def.job_name == "worker"
        assert s.target == f"grpc://localhost:{s.port}"
        assert s.server_def.cluster.job[0].tasks[0] == f"localhost:{s.port}"
    assert s.join(0)


def test_wrong_session_handle_stale_version_and_truncated_requests_keep_the_server_serving():
    with Server.create_local_server() as server:
        g = rg.Graph()
        with g.as_default():
            rg.constant(2.0, name="c")
        ch, create = _master_call(server, "CreateSession", master_pb2.CreateSessionResponse)
        _, run = _master_call(server, "RunStep", master_pb2.RunStepResponse)
        _, extend = _master_call(server, "ExtendSession", master_pb2.ExtendSessionResponse)
        req = master_pb2.CreateSessionRequest()
        req.graph_def.CopyFrom(graph_to_graph_def(g))
        handle = create(req).session_handle
        # a wrong session handle: ABORTED in the body
        r = run(master_pb2.RunStepRequest(session_handle="nope", fetch=["c:0"],
                                          store_errors_in_response_body=True))  # fmt: skip
        assert r.status_code == errors.ABORTED and "nope" in r.status_error_message
        # a tensor the graph lacks: INVALID_ARGUMENT naming it
        r = run(master_pb2.RunStepRequest(session_handle=handle, fetch=["missing:0"],
                                          store_errors_in_response_body=True))  # fmt: skip
        assert r.status_code == errors.INVALID_ARGUMENT and "missing:0" in r.status_error_message
        # a stale graph version
        with pytest.raises(grpc.RpcError) as ei:
            extend(master_pb2.ExtendSessionRequest(session_handle=handle,
                                                   current_graph_version=7))  # fmt: skip
        assert ei.value.code() is grpc.StatusCode.ABORTED and "7" in ei.value.details()
        # a truncated message
        good = master_pb2.RunStepRequest(session_handle=handle, fetch=["c:0"]).SerializeToString()
        with pytest.raises(grpc.RpcError) as ei:
            run(good[:-3])
        assert ei.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        # without store_errors_in_response_body the error is the RPC's status
        with pytest.raises(grpc.RpcError) as ei:
            run(master_pb2.RunStepRequest(session_handle=handle, fetch=["missing:0"]))
        assert ei.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        # ... and the server still serves
        r = run(master_pb2.RunStepRequest(session_handle=handle, fetch=["c:0"]))
        assert r.status_code == 0 and r.tensor[0].name == "c:0"
        ch.close()


def test_an_oversized_message_is_refused_and_the_server_keeps_serving():
    with Server.create_local_server() as server:
        ch = grpc.insecure_channel(server.target[len("grpc://"):],
                                   [("grpc.max_send_message_length", -1)])  # fmt: skip
        create = ch.unary_unary("/tensorflow.MasterService/CreateSession")
        # a GraphDef of 2.1 GB is beyond protobuf's and grpc's 2 GB message limit
        with pytest.raises((grpc.RpcError, ValueError, MemoryError)):
            create(b"\x0a" + b"\xff" * 5 + b"\x07" + b"\x00" * 64)
        g = rg.Graph()
        with g.as_default():
            y = rg.constant(3.0) * 2.0
            with Session(server.target) as sess:
                assert sess.run(y) == 6.0
        ch.close()


def test_timeout_in_ms_bounds_a_blocked_step():
    with Server.create_local_server() as server:
        g = rg.Graph()
        with g.as_default():
            q = rg.FIFOQueue(1, [rg.float32])
            blocked = q.dequeue()
            ok = rg.constant(np.float32(1))
            with Session(server.target) as sess:
                assert sess.run(ok) == 1
                t0 = time.monotonic()
                with pytest.raises(errors.DeadlineExceededError):
                    sess.run(blocked, options=RunOptions(timeout_in_ms=500))
                assert time.monotonic() - t0 < 5
                assert sess.run(ok) == 1


def test_a_client_that_cancels_its_call_ends_the_step_on_the_server():
    with Server.create_local_server() as server:
        g = rg.Graph()
        with g.as_default():
            q = rg.FIFOQueue(1, [rg.float32], name="q")
            q.dequeue(name="blocked")
        ch, create = _master_call(server, "CreateSession", master_pb2.CreateSessionResponse)
        _, run = _master_call(server, "RunStep", master_pb2.RunStepResponse)
        req = master_pb2.CreateSessionRequest()
        req.graph_def.CopyFrom(graph_to_graph_def(g))
        handle = create(req).session_handle
        fut = run.future(master_pb2.RunStepRequest(session_handle=handle, fetch=["blocked:0"]))
        end = time.monotonic() + 20
        while not server._master._active and time.monotonic() < end:
            time.sleep(0.05)
        assert server._master._active  # the step is waiting on the empty queue
        fut.cancel()
        while server._master._active and time.monotonic() < end:
            time.sleep(0.05)
        assert not server._master._active
        ch.close()
