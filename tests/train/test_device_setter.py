"""replica_device_setter: round robin and greedy-by-bytes placement on PS tasks, merging with inner
device scopes, cluster specs; local_device_setter on the CPU devices of one session."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import ConfigProto, RunMetadata, RunOptions, Session
from rill.train import (
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    local_device_setter,
    replica_device_setter,
)


def test_round_robin_puts_variables_on_ps_and_ops_on_worker():
    g = rg.Graph()
    with g.as_default(), g.device(replica_device_setter(ps_tasks=3)):
        vs = [rg.Variable(rg.zeros([2]), name=f"v{i}") for i in range(5)]
        y = vs[0] * 2.0
    assert [v.device for v in vs] == [f"/job:ps/task:{i % 3}" for i in range(5)]
    # The initializer and reads of a variable stay with it; other ops go to the worker.
    assert vs[4].initializer.device == "/job:ps/task:1"
    assert y.op.device == "/job:worker"


def test_inner_device_scope_wins_field_by_field():
    g = rg.Graph()
    with (
        g.as_default(),
        g.device(replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:3")),
    ):
        with g.device("/device:CPU:0"):
            a = rg.Variable(1.0, name="a")
            x = a + 1.0
        with g.device("/job:other"):
            b = rg.Variable(1.0, name="b")  # pinned to another job: no task chosen
    assert a.device == "/job:ps/task:0/device:CPU:0"
    assert x.op.device == "/job:worker/task:3/device:CPU:0"
    assert b.device == "/job:other"


def test_merge_devices_false_keeps_an_ops_device():
    g = rg.Graph()
    with g.as_default(), g.device(replica_device_setter(ps_tasks=2, merge_devices=False)):
        with g.device("/device:CPU:0"):
            a = rg.Variable(1.0, name="a")
        b = rg.Variable(1.0, name="b")
    assert a.device == "/device:CPU:0"
    assert b.device == "/job:ps/task:0"


class _FakeClusterSpec:
    def as_dict(self):
        return {"ps": ["localhost:1", "localhost:2"], "worker": ["localhost:3"]}


@pytest.mark.parametrize("cluster", [_FakeClusterSpec(), {"ps": {0: "a:1", 1: "b:1"}}])
def test_cluster_gives_the_number_of_ps_tasks(cluster):
    g = rg.Graph()
    with g.as_default(), g.device(replica_device_setter(cluster=cluster)):
        vs = [rg.Variable(0.0, name=f"v{i}") for i in range(3)]
    assert [v.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]


def test_no_ps_tasks_gives_none_and_bad_arguments_are_refused():
    assert replica_device_setter() is None
    assert replica_device_setter(cluster={"worker": ["a:1"]}) is None
    with pytest.raises(TypeError, match="ps_strategy must be callable"):
        replica_device_setter(ps_tasks=1, ps_strategy=3)
    with pytest.raises(TypeError, match="as_dict"):
        replica_device_setter(cluster=["ps"])


def test_greedy_strategy_balances_bytes():
    g = rg.Graph()
    greedy = GreedyLoadBalancingStrategy(3, byte_size_load_fn)
    sizes = [1000, 10, 10, 400, 300, 300, 10]
    with g.as_default(), g.device(replica_device_setter(ps_tasks=3, ps_strategy=greedy)):
        vs = [rg.Variable(rg.zeros([n]), name=f"v{i}") for i, n in enumerate(sizes)]
    tasks = [int(v.device.rsplit(":", 1)[1]) for v in vs]
    assert tasks == [0, 1, 2, 1, 2, 2, 1]
    assert greedy.loads == [4000, 1680, 2440]
    # Round robin would put 1000 + 300 + 10 floats on task 0; greedy keeps the max load lower.
    assert max(greedy.loads) == 4000


def test_byte_size_load_fn_needs_a_known_shape():
    g = rg.Graph()
    with g.as_default():
        v = rg.Variable(rg.zeros([3, 4], rg.float64), name="v")
        assert byte_size_load_fn(v.op) == 96
        p = rg.placeholder(rg.float32, [None, 4], name="p")
        u = rg.Variable(p, validate_shape=False, name="u")
        with pytest.raises(ValueError, match="not fully defined"):
            byte_size_load_fn(u.op)


def test_local_device_setter_places_and_runs_on_several_cpus():
    g = rg.Graph()
    with g.as_default(), g.device(local_device_setter(3)):
        vs = [rg.Variable(np.full([2], float(i)), name=f"v{i}") for i in range(3)]
        total = rg.add_n([v.value() for v in vs])
        init = rg.global_variables_initializer()
    assert [v.device for v in vs] == [f"/device:CPU:{i}" for i in range(3)]
    with Session(graph=g, config=ConfigProto(device_count={"CPU": 3})) as s:
        s.run(init)
        md = RunMetadata()
        got = s.run(total, options=RunOptions(output_partition_graphs=True), run_metadata=md)
    np.testing.assert_array_equal(got, [3.0, 3.0])
    assert len(md.partition_graphs) == 3
