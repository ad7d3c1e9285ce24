"""Where the dataflow executor runs kernels registered as expensive: on its pool only while their
measured time is worth a thread hand-off, and never two inline at once."""

import threading

import numpy as np

import rill.graph as rg
from rill.exec import ConfigProto, RunMetadata, RunOptions, Session
from rill.exec import threads as thread_policy


def _dataflow_session(graph):
    cfg = ConfigProto()
    cfg.rill.disable_compiled_path = True
    return Session(graph=graph, config=cfg)


def _threads(sess, fetches, feeds) -> dict[str, set[int]]:
    md = RunMetadata()
    sess.run(fetches, feeds, options=RunOptions(trace_level=RunOptions.FULL_TRACE),
             run_metadata=md)  # fmt: skip
    out: dict[str, set[int]] = {}
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            out.setdefault(n.node_name, set()).add(n.thread_id)
    return out


def test_a_cheap_matmul_in_a_loop_runs_on_the_scheduler_thread():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [4, 4], name="x")
        w = rg.constant(np.eye(4, dtype=np.float32))
        _, h = rg.while_loop(lambda i, h: i < 50, lambda i, h: (i + 1, rg.matmul(h, w, name="mm")),
                             (0, x), parallel_iterations=8)  # fmt: skip
    xv = np.ones((4, 4), np.float32)
    with _dataflow_session(g) as sess:
        for _ in range(3):  # the first steps measure the kernel
            np.testing.assert_array_equal(sess.run(h, {x: xv}), xv)
        threads = _threads(sess, h, {x: xv})
    mm = [t for name, t in threads.items() if name.endswith("mm")]
    assert mm and set().union(*mm) == {threading.get_ident() & 0xFFFFFFFF}


def _two_costly_matmuls():
    g = rg.Graph()
    with g.as_default():
        a = rg.placeholder(rg.float32, [384, 384], name="a")
        m1 = rg.matmul(a, a, name="m1")
        m2 = rg.matmul(a, a, transpose_b=True, name="m2")
    av = np.random.default_rng(0).random((384, 384), dtype=np.float32)
    with _dataflow_session(g) as sess:
        for _ in range(3):
            r1, r2 = sess.run([m1, m2], {a: av})
        threads = _threads(sess, [m1, m2], {a: av})
    np.testing.assert_allclose(r1, av @ av, rtol=1e-4)
    np.testing.assert_allclose(r2, av @ av.T, rtol=1e-4)
    return threads["m1"] | threads["m2"]


def test_two_costly_matmuls_ready_together_run_on_two_threads(monkeypatch):
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 2)
    used = _two_costly_matmuls()
    assert len(used) == 2
    assert threading.get_ident() & 0xFFFFFFFF in used


def test_costly_kernels_stay_on_the_scheduler_thread_when_no_core_is_free(monkeypatch):
    # On a busy machine a hand-off would wait for the pool thread to be scheduled.
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 1)
    assert _two_costly_matmuls() == {threading.get_ident() & 0xFFFFFFFF}
