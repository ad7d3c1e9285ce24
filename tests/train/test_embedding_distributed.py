"""Sharded embeddings, partitioned variables and sampled losses on a local cluster of 4 PS + 1
worker (subprocesses on loopback): the same values as one local session."""

from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.exec import Session

pytestmark = pytest.mark.distributed

distributed = pytest.importorskip("rill.distributed")
if not hasattr(distributed, "local_cluster"):  # the runtime of issue 13 lands separately
    pytest.skip("rill.distributed has no local_cluster in this checkout", allow_module_level=True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_embedding_training as local  # noqa: E402 - the local tests' model and data
import test_sampled_losses as sampled  # noqa: E402

NUM_PS = 4


@pytest.fixture(scope="module")
def cluster():
    with distributed.local_cluster(ps=NUM_PS, workers=1) as c:
        yield c


def _setter(cluster, strategy=None):
    return rt.replica_device_setter(
        cluster=cluster.cluster_spec, worker_device="/job:worker/task:0", ps_strategy=strategy
    )


def train_on_cluster(cluster, n, strategy, opt_name, steps=3):
    # Variables outlive sessions on the PS tasks (as in TensorFlow): each test names its own.
    prefix = f"{strategy}{n}_{opt_name}"
    g = rg.Graph()
    with g.as_default(), g.device(_setter(cluster)):
        shards = [rg.Variable(v, name=f"{prefix}/emb/part_{p}")
                  for p, v in enumerate(local.shard_values(n, strategy))]  # fmt: skip
        ids = rg.placeholder(rg.int64, [None], name="ids")
        rows = rg.embedding_lookup(shards if n > 1 else shards[0], ids, partition_strategy=strategy)
        loss = rg.reduce_sum(rg.tanh(rg.matmul(rows, rg.constant(local.W_OUT))))
        step = local.OPTIMIZERS[opt_name]().minimize(loss)
        init = rg.global_variables_initializer()
    assert {v.device for v in shards} == {f"/job:ps/task:{i}" for i in range(min(n, NUM_PS))}
    with Session(cluster.target("worker", 0), graph=g) as s:
        s.run(init)
        looked_up = s.run(rows, {ids: local.IDS})
        for _ in range(steps):
            s.run(step, {ids: local.IDS})
        parts = s.run([v.value() for v in shards])
    return looked_up, local.unshard(parts, strategy)


@pytest.mark.parametrize("opt_name", sorted(local.OPTIMIZERS))
@pytest.mark.parametrize("strategy,n", [("mod", 3), ("div", 5)])
def test_sharded_training_over_4_ps_equals_local(cluster, opt_name, strategy, n):
    want, _, _ = local.train(1, strategy, opt_name)
    looked_up, got = train_on_cluster(cluster, n, strategy, opt_name)
    np.testing.assert_array_equal(looked_up, local.INIT[local.IDS])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    untouched = np.setdiff1d(np.arange(local.V), local.IDS)
    np.testing.assert_array_equal(got[untouched], local.INIT[untouched])


def test_partitioned_variable_saved_from_4_ps_restores_into_3(cluster, tmp_path):
    full = np.arange(40.0, dtype=np.float32).reshape(10, 4)

    def build(shards):
        g = rg.Graph()
        with g.as_default(), g.device(_setter(cluster)):
            emb = rt.get_variable(f"emb{shards}", [10, 4], initializer=rt.zeros_initializer(),
                                  partitioner=rt.fixed_size_partitioner(shards))  # fmt: skip
            saver = rt.Saver({"emb": emb})
            init = rg.global_variables_initializer()
            assign = emb.assign(full)
        return g, emb, saver, init, assign

    g, emb, saver, init, assign = build(4)
    assert [v.device for v in emb] == [f"/job:ps/task:{i}" for i in range(4)]
    with Session(cluster.target("worker", 0), graph=g) as s:
        s.run(init)
        s.run(assign)
        path = saver.save(s, os.fspath(tmp_path / "model"))
    assert dict(rt.list_variables(path)) == {"emb": [10, 4]}
    g, emb, saver, init, _ = build(3)
    with Session(cluster.target("worker", 0), graph=g) as s:
        s.run(init)
        saver.restore(s, path)
        got = np.concatenate(s.run([v.value() for v in emb]))
    np.testing.assert_array_equal(got, full)


def test_sampled_losses_over_4_ps_equal_local(cluster):
    for which, (fn, ref) in sampled.LOSSES.items():
        g = rg.Graph()
        with g.as_default(), g.device(_setter(cluster)), rt.variable_scope(which):
            w = rt.get_variable(
                "w", initializer=sampled.W, partitioner=rt.fixed_size_partitioner(4)
            )
            b = rt.get_variable("b", initializer=sampled.BIAS)
            x = rg.constant(sampled.X)
            values = (
                rg.constant(sampled.SAMPLED.astype(np.int64)),
                rg.constant(sampled.TRUE_Q[2].astype(np.float32)),
                rg.constant(sampled.SAMPLED_Q.astype(np.float32)),
            )
            loss = fn(w, b, sampled.LABELS[2], x, num_sampled=sampled.S,
                      num_classes=sampled.C, num_true=2, sampled_values=values,
                      remove_accidental_hits=True, partition_strategy="div")  # fmt: skip
            init = rg.global_variables_initializer()
        with Session(cluster.target("worker", 0), graph=g) as s:
            s.run(init)
            np.testing.assert_allclose(s.run(loss), ref(2, True), rtol=1e-10)


def test_word2vec_on_the_cluster_loss_falls():
    import importlib.util

    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("word2vec", root / "examples" / "word2vec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = []
    args = ["--cluster", "--vocab", "400", "--sentences", "800", "--steps", "120", "--report",
            "40", "--batch", "64", "--num-sampled", "16"]  # fmt: skip
    result = module.main(args, out=lines.append)
    text = "\n".join(lines)
    assert "embeddings/part_3 on /job:ps/task:3" in text
    assert result["losses"][-1] < 0.8 * result["losses"][0], text
    assert result["eval_after"] < result["eval_before"], text
