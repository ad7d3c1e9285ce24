"""Job completion: when the chief's training ends, every task of the cluster stops serving (and
`rill-server` exits 0), PS tasks included."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.distributed import Server, local_cluster
from rill.distributed.control import CONTROL_SERVICE
from rill.distributed.launch import pick_ports
from rill.train.hooks import StopAtStepHook

# The in-process servers build partition graphs (with rill's own _rill_fetch names) in this
# process; the round-trip check is for the graphs a test builds itself.
pytestmark = pytest.mark.no_roundtrip("in-process servers' partition graphs")


def _cluster():
    ps, worker = pick_ports(2)
    return {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}


def _train(master: str, steps: int, **kw) -> int:
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:0"):
            step = rt.get_or_create_global_step()
            w = rg.Variable(np.ones(3, np.float32), name="w")
        with g.device("/job:worker/task:0"):
            loss = rg.reduce_sum(w * w)
            train = rt.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        hooks = [StopAtStepHook(last_step=steps)]
        with rt.MonitoredTrainingSession(master=master, hooks=hooks, **kw) as sess:
            while not sess.should_stop():
                sess.run(train)
    return steps


def test_the_chiefs_end_stops_every_task():
    cluster = _cluster()
    ps = Server(cluster, "ps", 0)
    worker = Server(cluster, "worker", 0)
    try:
        _train(worker.target, 3, finish_job_grace_secs=0.2)
        assert ps.join(timeout=20), "the PS did not stop after the job finished"
        assert worker.join(timeout=20), "the worker did not stop after the job finished"
    finally:
        ps.stop()
        worker.stop()


def test_finish_job_off_leaves_the_cluster_serving():
    cluster = _cluster()
    with Server(cluster, "ps", 0) as ps, Server(cluster, "worker", 0) as worker:
        _train(worker.target, 2, finish_job=False)
        assert not ps.join(timeout=1.0)
        _train(worker.target, 4, finish_job=False)  # the cluster keeps serving
        worker.finish_job("test over", grace_secs=0.1)
        assert ps.join(timeout=20) and worker.join(timeout=20)


def test_a_malformed_job_done_request_is_refused_and_the_server_keeps_serving():
    with Server.create_local_server() as server:
        channel = grpc.insecure_channel(server.target[len("grpc://") :])
        call = channel.unary_unary(f"/{CONTROL_SERVICE}/JobDone")
        with pytest.raises(grpc.RpcError) as e:
            call(b"\xff\xff\xff", timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert not server.join(timeout=0.5)
        channel.close()


@pytest.mark.distributed
def test_rill_server_ps_tasks_exit_0_when_the_job_is_done():
    with local_cluster(ps=2, workers=1, log=None) as c:
        _train(c.target("worker", 0), 3, finish_job_grace_secs=0.5)
        codes = {t.short_name: t.wait(30) for t in c.tasks}
    assert codes == {"ps:0": 0, "ps:1": 0, "worker:0": 0}, codes
