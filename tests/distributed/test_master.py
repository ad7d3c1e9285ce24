"""The master over a cluster of in-process servers (each task its own gRPC server on loopback):
steps across PS and worker tasks give exactly a local Session's values; loops and conds spanning
tasks; the master's errors; callables and partial runs through rill's own client."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import gradients
from rill.distributed import Server
from rill.exec import ConfigProto, RunOptions, Session
from rill.graph import errors

from ._core_models import figure1_mlp, ps_round_robin, small_cnn
from ._core_tasks import free_ports


@pytest.fixture(scope="module")
def cluster():
    ports = iter(free_ports(4))
    spec = {
        "ps": [f"localhost:{next(ports)}" for _ in range(2)],
        "worker": [f"localhost:{next(ports)}" for _ in range(2)],
    }
    servers = [Server(spec, job, i, connect_timeout_s=10) for job in spec for i in range(2)]
    yield {s.task_name: s for s in servers}
    for s in servers:
        s.stop(grace=0)


def _target(cluster, task="/job:worker/replica:0/task:0"):
    return cluster[task].target


def _local_and_remote(cluster, build, steps=3):
    rng = np.random.default_rng(0)
    xv = rng.uniform(0, 1, (8, 784)).astype(np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]
    results = []
    for remote in (False, True):
        g, m = build(ps_round_robin(2) if remote else None)
        sess = Session(_target(cluster), graph=g) if remote else Session(graph=g)
        with sess:
            sess.run(m["init"])
            out = [sess.run(m["logits"], {m["x"]: xv})]
            for _ in range(steps):
                out.append(sess.run([m["loss"], m["train"]], {m["x"]: xv, m["y"]: yv})[0])
            out.append(sess.run(m["logits"], {m["x"]: xv}))
        results.append(out)
    return results


def test_figure1_training_on_two_ps_equals_a_local_session(cluster):
    local, remote = _local_and_remote(cluster, figure1_mlp)
    for a, b in zip(local, remote):
        np.testing.assert_array_equal(a, b)
    assert remote[1] > remote[3]  # it trained


def test_cnn_forward_and_training_on_two_ps_equal_a_local_session(cluster):
    local, remote = _local_and_remote(cluster, small_cnn, steps=2)
    # Equal up to float32 summation order: the convolutions' GEMMs go to the BLAS library, whose
    # own thread count (process-wide, set per session from the cores free at that moment)
    # changes the order of a dot product's sums on a loaded machine (seen at load 20: 1e-7).
    for a, b in zip(local, remote):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def _loop_graph():
    g = rg.Graph()
    with g.as_default():
        x0 = rg.placeholder(rg.float32, [2], name="x0")
        with g.device("/job:ps/task:0"):
            a = rg.constant([1.5, 0.5], name="a")

        def body(i, x):
            with g.device("/job:worker/task:1"):
                y = x * a
            with g.device("/job:ps/task:1"):
                z = y + 1.0
            return i + 1, z

        with g.device("/job:worker/task:0"):
            _, r = rg.while_loop(lambda i, x: i < 4, body, [rg.constant(0), x0])
            (dx,) = gradients(rg.reduce_sum(r), [x0])
    return g, x0, r, dx


def test_while_loop_whose_body_spans_tasks_and_its_gradient(cluster):
    g, x0, r, dx = _loop_graph()
    xv = np.array([1.0, 2.0], np.float32)
    with Session(graph=g, config=ConfigProto(allow_soft_placement=True)) as sess:
        want = sess.run([r, dx], {x0: xv})
    with Session(_target(cluster), graph=g) as sess:
        got = sess.run([r, dx], {x0: xv})
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1], [1.5**4, 0.5**4])
    np.testing.assert_allclose(got[1], want[1])


def test_cond_with_branches_on_different_tasks_sends_dead_values_across(cluster):
    g = rg.Graph()
    with g.as_default():
        p = rg.placeholder(rg.bool_, [], name="p")
        x = rg.placeholder(rg.float32, [], name="x")

        def true_fn():
            with g.device("/job:ps/task:0"):
                return x * 10.0

        def false_fn():
            with g.device("/job:worker/task:1"):
                return x - 10.0

        with g.device("/job:worker/task:0"):
            out = rg.cond(p, true_fn, false_fn) + 0.5
    with Session(_target(cluster), graph=g) as sess:
        for _ in range(2):
            assert sess.run(out, {p: True, x: 2.0}) == 20.5
            assert sess.run(out, {p: False, x: 2.0}) == -7.5


def test_concurrent_clients_lose_no_assign_add(cluster):
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:1"):
            v = rg.Variable(rg.constant(0, rg.int64), name="counter")
        inc = v.assign_add(rg.constant(1, rg.int64))
        init = rg.global_variables_initializer()
    with Session(_target(cluster), graph=g) as s0:
        s0.run(init)
        errs = []

        def client(task):
            try:
                with Session(_target(cluster, task), graph=g) as s:
                    for _ in range(100):
                        s.run(inc.op)
            except BaseException as e:  # noqa: BLE001
                errs.append(e)

        ts = [threading.Thread(target=client, args=(f"/job:worker/replica:0/task:{i}",))
              for i in range(2)]  # fmt: skip
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not errs
        assert s0.run(v.read_value()) == 200


def test_callable_and_extend_through_rills_client(cluster):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None], name="x")
        with g.device("/job:ps/task:0"):
            y = x * 3.0
        with Session(_target(cluster)) as sess:
            f = sess.make_callable(y, [x])
            np.testing.assert_array_equal(f(np.array([1.0, 2.0], np.float32)), [3.0, 6.0])
            z = y + 1.0  # the graph grows after the first run: ExtendSession
            assert sess.run(z, {x: np.array([1.0], np.float32)})[0] == 4.0
            assert "/job:ps/replica:0/task:1/device:CPU:0" in sess.list_devices()


def test_device_filters_limit_the_tasks_a_session_uses(cluster):
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:1"):
            c = rg.constant(1.0) + 1.0
    cfg = ConfigProto(device_filters=["/job:worker/task:0", "/job:ps/task:0"])
    with Session(_target(cluster), graph=g, config=cfg) as sess:
        assert "/job:ps/replica:0/task:1/device:CPU:0" not in sess.list_devices()
        with pytest.raises(errors.InvalidArgumentError, match="ps/task:1"):
            sess.run(c)


def test_unknown_job_or_task_in_a_device_spec(cluster):
    for dev in ("/job:nosuch/task:0", "/job:ps/task:7"):
        g = rg.Graph()
        with g.as_default():
            with g.device(dev):
                c = rg.constant(1.0, name="c") * 2.0
            with Session(_target(cluster)) as sess:
                with pytest.raises(errors.InvalidArgumentError, match=dev.replace("/", ".")):
                    sess.run(c)
                # the master keeps serving this session
                assert sess.run(rg.constant(5.0)) == 5.0


def test_remote_op_error_names_the_op_task_and_source_line(cluster):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None], name="x")
        with g.device("/job:ps/task:1"):
            bad = rg.reshape(x, [3], name="bad_reshape")  # this line is the source line
    with Session(_target(cluster), graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as ei:
            sess.run(bad, {x: np.zeros(4, np.float32)})
    msg = str(ei.value)
    assert "bad_reshape" in msg and "/job:ps/replica:0/task:1" in msg
    assert "test_master.py" in msg  # the client attributes it to its own op's source line
    assert ei.value.op is not None and ei.value.op.name == "bad_reshape"


def test_fetching_a_tensor_the_graph_lacks_and_timeouts(cluster):
    g = rg.Graph()
    with g.as_default():
        c = rg.constant(1.0, name="c")
        with Session(_target(cluster)) as sess:
            assert sess.run(c) == 1.0
            with pytest.raises(errors.InvalidArgumentError, match="nosuch:0"):
                sess._run([_FakeTensor("nosuch:0")], [], None, None)
            q = rg.FIFOQueue(1, [rg.float32]) if hasattr(rg, "FIFOQueue") else None
            if q is not None:
                with pytest.raises(errors.DeadlineExceededError):
                    sess.run(q.dequeue(), options=RunOptions(timeout_in_ms=300))
            assert sess.run(c) == 1.0


class _FakeTensor(rg.Tensor):
    def __init__(self, name):
        self._name = name

    @property
    def name(self):
        return self._name


def test_a_large_tensor_crosses_tasks_in_chunks_intact(cluster):
    from rill.distributed import wire

    n = (wire.CHUNK_THRESHOLD * 3 + 12345) // 8
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:0"):
            big = rg.range(0, n, dtype=rg.int64) * 3
        with g.device("/job:worker/task:1"):
            total = rg.reduce_sum(big - 1)  # worker 1 pulls the value from the PS in chunks
        with g.device("/job:worker/task:0"):
            echo = rg.identity(big)
    with Session(_target(cluster), graph=g) as sess:
        t, e = sess.run([total, echo])
    assert t == 3 * (n - 1) * n // 2 - n
    np.testing.assert_array_equal(e, np.arange(n, dtype=np.int64) * 3)


def test_full_trace_collects_every_tasks_step_stats(cluster):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2], name="x")
        with g.device("/job:ps/task:1"):
            a = x * 2.0
        with g.device("/job:worker/task:1"):
            b = a + 1.0
    meta = rg_run_metadata()
    with Session(_target(cluster), graph=g) as sess:
        out = sess.run(
            b,
            {x: np.array([1.0, 2.0], np.float32)},
            options=RunOptions(trace_level=RunOptions.FULL_TRACE),
            run_metadata=meta,
        )
    np.testing.assert_array_equal(out, [3.0, 5.0])
    devices = {d.device for d in meta.step_stats.dev_stats}
    assert "/job:ps/replica:0/task:1/device:CPU:0" in devices
    assert "/job:worker/replica:0/task:1/device:CPU:0" in devices
    names = {n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats}
    assert "mul" in names and "add" in names


def rg_run_metadata():
    from rill.exec import RunMetadata

    return RunMetadata()
