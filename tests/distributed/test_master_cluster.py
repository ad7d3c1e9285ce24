"""The runtime across processes: every task a subprocess on loopback (tests/distributed/
_core_tasks.py), so deaths are real (kill -9) and no two tasks share an interpreter."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import ConfigProto, Session
from rill.graph import errors

from ._core_models import figure1_mlp, ps_round_robin, small_cnn
from ._core_tasks import TaskCluster

pytestmark = pytest.mark.distributed


def test_figure1_steps_and_the_cnn_on_separate_processes_equal_a_local_session():
    rng = np.random.default_rng(1)
    xv = rng.uniform(0, 1, (16, 784)).astype(np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    with TaskCluster(ps=2, worker=2) as c:
        out = []
        for target in ("", c.target("worker", 0)):
            g, m = figure1_mlp(ps_round_robin(2) if target else None)
            with Session(target, graph=g) as sess:
                sess.run(m["init"])
                losses = [sess.run([m["loss"], m["train"]], {m["x"]: xv, m["y"]: yv})[0]
                          for _ in range(3)]  # fmt: skip
                out.append((losses, sess.run(m["logits"], {m["x"]: xv})))
        cnn = []
        for target in ("", c.target("worker", 1)):
            g, m = small_cnn(ps_round_robin(2, "/job:worker/task:1") if target else None)
            with Session(target, graph=g) as sess:
                sess.run(m["init"])
                cnn.append(sess.run(m["logits"], {m["x"]: xv}))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(cnn[0], cnn[1])


def test_two_clients_times_500_assign_add_lose_no_update_and_a_300mb_fetch():
    with TaskCluster(ps=1, worker=2) as c:
        g = rg.Graph()
        with g.as_default():
            with g.device("/job:ps/task:0"):
                v = rg.Variable(rg.constant(0, rg.int64), name="counter")
                big = rg.Variable(rg.zeros([300 * 1024 * 1024 // 4], rg.float32), name="big")
                fill = big.assign(rg.range(0.0, 300 * 1024 * 1024 // 4, dtype=rg.float32) * 0.5)
            inc = v.assign_add(rg.constant(1, rg.int64))
            init = rg.global_variables_initializer()
        with Session(c.target("worker", 0), graph=g) as s0:
            s0.run(init)
            errs = []

            def client(i):
                try:
                    with Session(c.target("worker", i), graph=g) as s:
                        f = s.make_callable(inc.op)
                        for _ in range(500):
                            f()
                except BaseException as e:  # noqa: BLE001
                    errs.append(e)

            ts = [threading.Thread(target=client, args=(i,)) for i in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(240)
            assert not errs and not any(t.is_alive() for t in ts)
            assert s0.run(v.read_value()) == 1000
            s0.run(fill.op)
            t0 = time.perf_counter()
            value = s0.run(big.read_value())
            dt = time.perf_counter() - t0
            assert value.nbytes == 300 * 1024 * 1024
            np.testing.assert_array_equal(value[:5], [0, 0.5, 1, 1.5, 2])
            assert value[-1] == (value.size - 1) * 0.5
            assert np.array_equal(value, np.arange(value.size, dtype=np.float32) * 0.5)
            print(f"300 MB fetch: {dt:.2f} s ({300 / dt:.0f} MB/s)")


def test_kill_9_of_a_ps_mid_step_is_unavailable_naming_that_task():
    with TaskCluster(ps=2, worker=1) as c:
        g = rg.Graph()
        with g.as_default():
            with g.device("/job:ps/task:1"):
                q = rg.FIFOQueue(1, [rg.float32], shared_name="q")
                blocked = q.dequeue()  # waits on the PS until it dies
            with g.device("/job:ps/task:0"):
                other = rg.constant(1.0) + 1.0
            out = blocked + other
        cfg = ConfigProto(operation_timeout_in_ms=30000)
        with Session(c.target("worker", 0), graph=g, config=cfg) as sess:
            assert sess.run(other) == 2.0
            result = {}

            def run():
                t0 = time.monotonic()
                try:
                    sess.run(out)
                except errors.OpError as e:
                    result["error"] = e
                result["dt"] = time.monotonic() - t0

            t = threading.Thread(target=run)
            t.start()
            time.sleep(2.0)
            c.kill("ps", 1)
            t.join(40)
            assert not t.is_alive()
        e = result["error"]
        assert isinstance(e, errors.UnavailableError), repr(e)
        assert "/job:ps/replica:0/task:1" in str(e) and c.spec["ps"][1] in str(e)
        assert result["dt"] < 30
