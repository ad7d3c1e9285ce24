"""The remote rendezvous and the wire helpers, in process."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill.distributed import Server, wire
from rill.distributed.rendezvous import RemoteRendezvous, task_of_device
from rill.exec import Session
from rill.exec.context import StepState
from rill.graph import errors

from ._core_tasks import free_ports


def test_tensor_protos_round_trip_every_numeric_dtype_and_strings():
    for v in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array(3, np.int64),
              np.array([True, False]), np.array([1 + 2j], np.complex64),
              np.zeros((0, 4), np.float64), np.array([b"ab", b"c"], dtype=object),
              np.array([1.5], np.float16)):  # fmt: skip
        back = wire.tensor_from_proto(wire.tensor_to_proto(v))
        assert back.dtype == v.dtype and back.shape == v.shape
        np.testing.assert_array_equal(back, v)


def test_chunks_fill_a_preallocated_buffer():
    from rill.distributed.proto import worker_pb2

    v = np.arange(wire.CHUNK_BYTES // 2 + 7, dtype=np.float64)
    head = wire.tensor_meta(v)
    chunks = list(wire.iter_chunks(v))
    assert len(chunks) == -(-v.nbytes // wire.CHUNK_BYTES) > 1
    # What iter_chunks builds by hand is the RillTensorChunk message a parser reads.
    assert (
        worker_pb2.RillTensorChunk.FromString(chunks[0]).data
        == v.view(np.uint8)[: wire.CHUNK_BYTES].tobytes()
    )
    out = wire.receive_chunks(head, chunks)
    np.testing.assert_array_equal(out, v)
    # A chunk message with other fields set is parsed as a message.
    other = [worker_pb2.RillTensorChunk(total_bytes=v.nbytes, data=bytes(c)).SerializeToString()
             for c in (wire.chunk_data(c) for c in chunks)]  # fmt: skip
    np.testing.assert_array_equal(wire.receive_chunks(head, other), v)
    with pytest.raises(errors.InternalError, match="ended after"):
        wire.receive_chunks(head, chunks[:1])
    with pytest.raises(errors.InternalError, match="more than"):
        wire.receive_chunks(head, chunks + chunks[:1])


def test_error_status_round_trip_names_the_op():
    g = rg.Graph()
    with g.as_default():
        c = rg.constant(1.0, name="the_op")
    code, msg = wire.error_to_status(errors.OutOfRangeError("queue closed", op=c.op))
    e = wire.error_from_status(code, msg, g)
    assert isinstance(e, errors.OutOfRangeError) and e.op is c.op
    assert wire.error_to_status(ValueError("x"))[0] == errors.INVALID_ARGUMENT


def test_local_take_obeys_the_deadline_and_abort():
    rv = RemoteRendezvous(1, ("worker", 0), lambda j, t: "x", None)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="k1"):
        rv.take("k1", time.monotonic() + 0.2)
    assert time.monotonic() - t0 < 2
    threading.Timer(0.2, lambda: rv.abort(errors.CancelledError("stop"))).start()
    with pytest.raises(errors.CancelledError):
        rv.take("k2", None)
    rv.send("k3", 1, False)  # ignored once aborted: no value outlives a failed step
    assert rv.aborted


def test_dead_values_and_pulls_across_servers():
    ports = free_ports(2)
    spec = {"a": [f"localhost:{ports[0]}"], "b": [f"localhost:{ports[1]}"]}
    with Server(spec, "a", 0) as sa, Server(spec, "b", 0) as sb:
        src = "/job:a/replica:0/task:0/device:CPU:0"
        dst = "/job:b/replica:0/task:0/device:CPU:0"
        assert task_of_device(src) == ("a", 0)
        ra = sa._worker.step(77)
        rb = sb._worker.step(77)
        ra.send(f"{src};1;{dst};live;0:0", np.arange(3), False)
        ra.send(f"{src};1;{dst};dead;0:0", None, True)
        step = StepState(77, time.monotonic() + 10, rb)
        v, dead = rb.recv(f"{src};1;{dst};live;0:0", step)
        assert not dead and list(v) == [0, 1, 2]
        assert rb.recv(f"{src};1;{dst};dead;0:0", step) == (None, True)
        # every value was taken: step 77 is done on task a, and a late pull fails at once
        with pytest.raises(errors.AbortedError, match="77"):
            rb.recv(f"{src};1;{dst};late;0:0", step)
        # a pull that nobody serves ends with the step's deadline
        rb = sb._worker.step(78)
        step = StepState(78, time.monotonic() + 0.3, rb)
        with pytest.raises(errors.DeadlineExceededError):
            rb.recv(f"{src};1;{dst};never;0:0", step)


def test_an_absent_task_is_unavailable_within_the_connect_timeout():
    ports = free_ports(2)
    spec = {"worker": [f"localhost:{ports[0]}"], "ps": [f"localhost:{ports[1]}"]}
    with Server(spec, "worker", 0, connect_timeout_s=1.0) as w:
        g = rg.Graph()
        with g.as_default():
            c = rg.constant(1.0)
            t0 = time.monotonic()
            with pytest.raises(errors.UnavailableError, match=f"/job:ps.*localhost:{ports[1]}"):
                with Session(w.target) as sess:
                    sess.run(c)
            assert time.monotonic() - t0 < 10
            # the task comes up: the next session finds it
            with Server(spec, "ps", 0), Session(w.target) as sess:
                assert sess.run(c) == 1.0


def test_monitored_training_session_takes_a_grpc_master():
    import rill.train as rt

    with Server.create_local_server() as server:
        g = rg.Graph()
        with g.as_default():
            step = rt.get_or_create_global_step()
            inc = rg.assign_add(step, 1) if hasattr(rg, "assign_add") else step.assign_add(1)
            with rt.MonitoredTrainingSession(master=server.target,
                                             log_step_count_steps=None) as sess:  # fmt: skip
                for _ in range(3):
                    sess.run(inc)
                assert sess.run(step) == 3
