"""placement_report: variables and bytes per device, and the bytes a traced step moves — for a
sparse embedding step they follow the ids, not the vocabulary size."""

from __future__ import annotations

import numpy as np

import rill.graph as rg
import rill.train as rt
from rill.exec import ConfigProto, RunMetadata, RunOptions, Session

IDS = np.random.default_rng(0).integers(0, 1000, 64)


def traced_step(vocab: int, dim: int = 8):
    g = rg.Graph()
    greedy = rt.GreedyLoadBalancingStrategy(4, rt.byte_size_load_fn)
    with g.as_default(), g.device(rt.local_device_setter(4, ps_strategy=greedy)):
        emb = rt.get_variable("emb", [vocab, dim], partitioner=rt.fixed_size_partitioner(4))
        ids = rg.placeholder(rg.int64, [None])
        loss = rg.reduce_sum(rg.embedding_lookup(emb, ids))
        step = rt.GradientDescentOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    md = RunMetadata()
    opts = RunOptions(trace_level=RunOptions.FULL_TRACE, output_partition_graphs=True)
    with Session(graph=g, config=ConfigProto(device_count={"CPU": 4})) as s:
        s.run(init)
        s.run(step, {ids: IDS}, options=opts, run_metadata=md)
    return g, md


def test_report_per_device_and_bytes_follow_the_ids():
    small_g, small_md = traced_step(1000)
    big_g, big_md = traced_step(50000)
    small = rt.placement_summary(small_g, small_md)
    big = rt.placement_summary(big_g, big_md)
    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(4)]
    assert list(big) == devices
    assert [u.variable_bytes for u in big.values()] == [50000 * 8 * 4 // 4] * 4
    assert [len(u.variables) for u in big.values()] == [1, 1, 1, 1]
    # The step moves the same bytes whatever the vocabulary: ids out, rows back, gradients out.
    assert [(u.sent_bytes, u.received_bytes) for u in small.values()] == [
        (u.sent_bytes, u.received_bytes) for u in big.values()
    ]
    moved = sum(u.received_bytes for u in big.values())
    assert 0 < moved < 64 * (8 * 4 + 8) * 3
    text = rt.placement_report(big_g, big_md, verbose=True)
    assert "emb/part_3: 390.6 KiB" in text and "received" in text
    by_task = rt.placement_summary(big_g, big_md, by="task")
    assert list(by_task) == ["/job:localhost/replica:0/task:0"]
    assert by_task["/job:localhost/replica:0/task:0"].received_bytes == 0  # all in one task
