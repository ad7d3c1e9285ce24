"""The chief announces that the model is ready: a waiting replica starts at once (TensorFlow's
workers poll every 30 seconds), through SessionManager and WorkerSessionCreator alike."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.distributed import Server
from rill.distributed.launch import pick_ports
from rill.graph.errors import DeadlineExceededError

pytestmark = pytest.mark.no_roundtrip("in-process servers' partition graphs")


def _graph():
    g = rg.Graph()
    with g.as_default(), g.device("/job:ps/task:0"):
        step = rt.get_or_create_global_step()
        w = rg.Variable(np.arange(3, dtype=np.float32), name="w")
        init = rg.global_variables_initializer()
    return g, step, w, init


@pytest.fixture
def cluster():
    ps, w0, w1 = pick_ports(3)
    spec = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]}
    servers = [Server(spec, "ps", 0), Server(spec, "worker", 0), Server(spec, "worker", 1)]
    yield servers
    for s in servers:
        s.stop()


def test_a_waiting_replica_wakes_when_the_chief_announces(cluster):
    _, chief_task, worker_task = cluster
    got = {}

    def worker():
        g, step, w, _ = _graph()
        sm = rt.SessionManager(graph=g, recovery_wait_secs=30)
        sess = sm.wait_for_session(worker_task.target, max_wait_secs=120)
        got["woke"] = time.monotonic()
        got["w"] = sess.run(w)
        sess.close()

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(2.0)  # the replica is waiting (and has backed off well past its first checks)
    assert t.is_alive()
    g, step, w, init = _graph()
    sess = rt.SessionManager(graph=g).prepare_session(chief_task.target, init_op=init)
    ready_at = time.monotonic()
    t.join(60)
    assert not t.is_alive()
    # Woken by the announcement, not by a 30-second poll.
    assert got["woke"] - ready_at < 5.0
    np.testing.assert_array_equal(got["w"], [0, 1, 2])
    sess.close()


def test_waiting_without_a_chief_ends_at_its_deadline(cluster):
    _, _, worker_task = cluster
    g, step, w, _ = _graph()
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="not ready after waiting"):
        rt.SessionManager(graph=g).wait_for_session(worker_task.target, max_wait_secs=1.5)
    assert time.monotonic() - t0 < 15


def test_recover_session_restores_the_latest_checkpoint(cluster, tmp_path):
    _, chief_task, _ = cluster
    g, step, w, init = _graph()
    with g.as_default():
        saver = rt.Saver()
        sess = rt.SessionManager(graph=g).prepare_session(chief_task.target, init_op=init)
        sess.run(w.assign([5.0, 6.0, 7.0]))
        saver.save(sess, str(tmp_path / "model.ckpt"))
        sess.run(w.assign([0.0, 0.0, 0.0]))
        sess.close()
        sess, ready = rt.SessionManager(graph=g).recover_session(
            chief_task.target, saver=saver, checkpoint_dir=str(tmp_path)
        )
        assert ready
        np.testing.assert_array_equal(sess.run(w), [5, 6, 7])
        sess.close()
