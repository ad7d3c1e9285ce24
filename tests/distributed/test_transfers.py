"""How values travel between rill tasks and to clients, in process (each task its own gRPC server
on loopback): batched pulls (RecvTensors) with live, dead and large values and their fallback to
TensorFlow's RecvTensor, and large fetches streamed in chunks to rill clients but carried in the
response for TensorFlow's."""

from __future__ import annotations

import time

import numpy as np
import pytest

import rill.graph as rg
from rill.distributed import Server, rendezvous, wire
from rill.distributed.proto import master_pb2
from rill.distributed.worker import Worker
from rill.exec import Session
from rill.exec.context import StepState
from rill.exec.proto import config_pb2
from rill.graph import errors

from ._core_tasks import free_ports

SRC = "/job:a/replica:0/task:0/device:CPU:0"
DST = "/job:b/replica:0/task:0/device:CPU:0"


def _key(name: str) -> str:
    return f"{SRC};1;{DST};{name};0:0"


def _two_tasks():
    ports = free_ports(2)
    spec = {"a": [f"localhost:{ports[0]}"], "b": [f"localhost:{ports[1]}"]}
    return spec, Server(spec, "a", 0), Server(spec, "b", 0)


def _pull_all(sa, sb, step_id: int, late_value):
    """Sends live, dead and large values on task a, pulls them on task b with one prefetch
    (several keys from one task: one RecvTensors stream), and one value sent only after the
    stream started. Returns b's rendezvous after the prefetch and the values received."""
    big = np.arange(wire.CHUNK_THRESHOLD // 8 + 5, dtype=np.float64)
    ra = sa._worker.step(step_id)
    ra.send(_key("live"), np.arange(3, dtype=np.int32), False)
    ra.send(_key("dead"), None, True)
    ra.send(_key("big"), big, False)
    rb = sb._worker.step(step_id)
    keys = [_key(n) for n in ("live", "dead", "big", "late")]
    rb.prefetch(keys, time.monotonic() + 30)
    batched = set(rb._batched)
    step = StepState(step_id, time.monotonic() + 30, rb)
    got = {n: rb.recv(_key(n), step) for n in ("live", "dead", "big")}
    ra.send(_key("late"), late_value, False)  # after b is already waiting on the stream
    got["late"] = rb.recv(_key("late"), step)
    return batched, got, big


def _check(got, big, late_value):
    v, dead = got["live"]
    assert not dead and v.dtype == np.int32 and list(v) == [0, 1, 2]
    assert got["dead"] == (None, True)
    v, dead = got["big"]
    assert not dead and v.dtype == big.dtype
    np.testing.assert_array_equal(v, big)
    np.testing.assert_array_equal(got["late"][0], late_value)


def test_batched_pulls_carry_live_dead_large_and_late_values():
    spec, sa, sb = _two_tasks()
    with sa, sb:
        late = np.float32(2.5)
        batched, got, big = _pull_all(sa, sb, 91, late)
        assert batched == {_key(n) for n in ("live", "dead", "big", "late")}
        _check(got, big, late)


def test_batched_pulls_fall_back_to_recv_tensor_for_a_task_without_them(monkeypatch):
    def unimplemented(self, req, context):
        raise NotImplementedError("RecvTensors (a TensorFlow worker)")

    # Task a answers RecvTensors with UNIMPLEMENTED, as a TensorFlow worker does.
    monkeypatch.setattr(Worker, "RecvTensors", unimplemented)
    spec, sa, sb = _two_tasks()
    address = spec["a"][0]
    try:
        with sa, sb:
            late = np.arange(4.0)
            batched, got, big = _pull_all(sa, sb, 92, late)
            assert batched  # the stream was tried first
            _check(got, big, late)
            assert address in rendezvous._NO_BATCH
            # the next step pulls key by key at once
            rb = sb._worker.step(93)
            rb.prefetch([_key("x"), _key("y")], time.monotonic() + 30)
            assert not rb._batched and set(rb._prefetched) == {_key("x"), _key("y")}
            rb.abort(errors.CancelledError("done"))
    finally:
        rendezvous._NO_BATCH.discard(address)


def test_a_batched_pull_ends_with_the_step_deadline_and_abort():
    spec, sa, sb = _two_tasks()
    with sa, sb:
        rb = sb._worker.step(94)
        rb.prefetch([_key("p"), _key("q")], time.monotonic() + 0.5)
        step = StepState(94, time.monotonic() + 0.5, rb)
        with pytest.raises(errors.DeadlineExceededError):
            rb.recv(_key("p"), step)
        rb = sb._worker.step(95)
        rb.prefetch([_key("p"), _key("q")], None)
        rb.abort(errors.CancelledError("the step was cancelled"))
        with pytest.raises(errors.CancelledError):
            rb.recv(_key("q"), StepState(95, None, rb))


@pytest.fixture(scope="module")
def ps_worker():
    ports = free_ports(2)
    spec = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}
    servers = [Server(spec, "ps", 0), Server(spec, "worker", 0)]
    yield servers
    for s in servers:
        s.stop(grace=0)


def _big_graph():
    n = wire.CHUNK_THRESHOLD // 4 + 1001
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:0"):
            v = rg.Variable(rg.range(0, n, dtype=rg.float32), name="big")
        with g.device("/job:worker/task:0"):
            doubled = v * 2.0  # computed by the master's own task
        init = rg.global_variables_initializer()
    return g, v, doubled, init, np.arange(n, dtype=np.float32)


@pytest.mark.no_roundtrip("the tasks' partition graphs hold the folded 8 MB initial value")
def test_large_fetches_reach_rill_and_tensorflow_clients_intact(ps_worker):
    _, worker = ps_worker
    g, v, doubled, init, want = _big_graph()
    read = v._graph_element  # the tensor a fetch of `v` reads
    with Session(worker.target, graph=g) as sess:
        sess.run(init)
        got_v, got_d = sess.run([v, doubled])  # streamed: relayed from the PS / from the master
        np.testing.assert_array_equal(got_v, want)
        np.testing.assert_array_equal(got_d, want * 2)
        assert got_v.flags.writeable and got_d.flags.writeable
        got_v[0] = -1.0  # the client's own array: the variable is untouched
        np.testing.assert_array_equal(sess.run(v)[:2], want[:2])

        # A TensorFlow client sets no rill_chunks_ok: every value comes in the response.
        req = master_pb2.RunStepRequest(session_handle=sess._handle,
                                        fetch=[read.name, doubled.name])  # fmt: skip
        resp = worker._master.RunStep(req, None)
        assert resp.status_code == 0 and not resp.rill_chunked
        by_name = {nt.name: wire.tensor_from_proto(nt.tensor) for nt in resp.tensor}
        np.testing.assert_array_equal(by_name[read.name], want)
        np.testing.assert_array_equal(by_name[doubled.name], want * 2)

        # MakeCallable / RunCallable (positional TensorProtos) as TensorFlow's Keras sends them
        opts = config_pb2.CallableOptions(fetch=[read.name])
        h = worker._master.MakeCallable(
            master_pb2.MakeCallableRequest(session_handle=sess._handle, options=opts), None
        ).handle
        out = worker._master.RunCallable(
            master_pb2.RunCallableRequest(session_handle=sess._handle, handle=h), None
        )
        np.testing.assert_array_equal(wire.tensor_from_proto(out.fetch[0]), want)
