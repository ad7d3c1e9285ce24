"""A sparse embedding step over 4 shards: look up 512 random ids in a V×64 float32 embedding
split over 4 shards and apply a sparse SGD update, for V = 1e5, 1e6, 4e6 (the paper's claim: the
step time does not depend on V).

- "over 4 devices": rill with 4 CPU devices of one session, TensorFlow with 4 logical CPU
  devices; also reports the bytes rill's step moves between devices (from its trace).
- "over 4 PS": a cluster of 4 PS tasks + 1 worker, each task its own process on loopback (rill:
  `local_cluster`; TensorFlow: `tf.distribute.Server` processes), the client talking to the
  worker. Runs when rill.distributed has local_cluster.

Each step fetches the loss beside the training op, on both sides: with the training op alone,
TensorFlow's graph optimizer removes the lookup itself (the loss is linear in the rows, so its
gradient needs only the ids): its partitions then hold no Gather and move no rows, while the
issue's benchmark is a step that looks the rows up.

Set RILL_EMB_VOCABS="100000,1000000" to run fewer sizes (each 4e6 table is 1 GiB per process).
Both sides report the best of 9 timed batches (steps of random ids), not the median: on a shared
machine the best batch is the figure least disturbed by other processes.
"""

from __future__ import annotations

import os
import time

import numpy as np

from tools.bench import Row, run_peer

DIM, IDS, SHARDS = 64, 512, 4
CPU_STEPS = 200  # steps over which each process's CPU time is measured


def _vocabs() -> list[int]:
    raw = os.environ.get("RILL_EMB_VOCABS", "100000,1000000,4000000")
    return [int(float(v)) for v in raw.split(",") if v.strip()]


PEER = """
import json, os, sys, time, statistics
import numpy as np
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 4)
tf.compat.v1.disable_eager_execution()
DIM, IDS = 64, 512
out = {}
for vocab in VOCABS:
    g = tf.Graph()
    with g.as_default():
        shards = []
        rows = [vocab // 4 + (1 if i < vocab % 4 else 0) for i in range(4)]
        for i, n in enumerate(rows):
            with tf.device(f"/device:CPU:{i}"):
                shards.append(tf.compat.v1.get_variable(
                    f"emb/part_{i}", [n, DIM], initializer=tf.compat.v1.zeros_initializer(),
                    use_resource=True))
        ids = tf.compat.v1.placeholder(tf.int64, [IDS])
        with tf.device("/device:CPU:0"):
            rows_ = tf.compat.v1.nn.embedding_lookup(shards, ids, partition_strategy="mod")
            loss = tf.reduce_sum(rows_)
            step = [tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss), loss]
        init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(graph=g)
    sess.run(init)
    rng = np.random.default_rng(0)
    f = lambda: sess.run(step, {ids: rng.integers(0, vocab, IDS)})
    for _ in range(20): f()
    k = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(k): f()
        if time.perf_counter() - t0 > 0.2: break
        k *= 2
    times = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(k): f()
        times.append(1000 * (time.perf_counter() - t0) / k)
    out[str(vocab)] = min(times)
    sess.close()
    del sess, g
print(json.dumps(out))
"""


def _best_ms(fn, batches: int = 9) -> float:
    """Milliseconds per call: the best of `batches` timed batches of ~0.2 s (as the peer's)."""
    k = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        if time.perf_counter() - t0 > 0.2:
            break
        k *= 2
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        best = min(best, 1000 * (time.perf_counter() - t0) / k)
    return best


def _rill_step(vocab: int):
    import rill.graph as rg
    import rill.train as rt
    from rill.exec import ConfigProto, RunMetadata, RunOptions, Session

    g = rg.Graph()
    with g.as_default(), g.device(rt.local_device_setter(SHARDS)):
        emb = rt.get_variable(
            "emb", [vocab, DIM], partitioner=rt.fixed_size_partitioner(SHARDS),
            initializer=rt.zeros_initializer(),
        )  # fmt: skip
        ids = rg.placeholder(rg.int64, [IDS])
        with g.device("/device:CPU:0"):
            loss = rg.reduce_sum(rg.embedding_lookup(emb, ids, partition_strategy="mod"))
            step = [rt.GradientDescentOptimizer(0.1).minimize(loss), loss]
        init = rg.global_variables_initializer()
    sess = Session(graph=g, config=ConfigProto(device_count={"CPU": SHARDS}))
    sess.run(init)
    rng = np.random.default_rng(0)
    md = RunMetadata()
    opts = RunOptions(trace_level=RunOptions.FULL_TRACE, output_partition_graphs=True)
    sess.run(step, {ids: rng.integers(0, vocab, IDS)}, options=opts, run_metadata=md)
    moved = sum(u.received_bytes for u in rt.placement_summary(g, md).values())
    return sess, (lambda: sess.run(step, {ids: rng.integers(0, vocab, IDS)})), moved


PEER_CLUSTER = """
import json, os, socket, subprocess, sys, time
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
DIM, IDS = 64, 512
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
for s in socks: s.close()
spec = {"ps": [f"127.0.0.1:{p}" for p in ports[:4]], "worker": [f"127.0.0.1:{ports[4]}"]}
server = ("import sys, json, tensorflow as tf; s = tf.distribute.Server(json.loads(sys.argv[1]), "
          "sys.argv[2], int(sys.argv[3])); s.join()")
def _cpu(pid):
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
procs = [subprocess.Popen([sys.executable, "-c", server, json.dumps(spec), job, str(i)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
         for job in ("ps", "worker") for i in range(len(spec[job]))]
out = {}
try:
    for vocab in VOCABS:
        g = tf.Graph()
        with g.as_default():
            with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
                    cluster=spec, worker_device="/job:worker/task:0")):
                emb = tf.compat.v1.get_variable(
                    f"emb{vocab}", [vocab, DIM], initializer=tf.compat.v1.zeros_initializer(),
                    partitioner=tf.compat.v1.fixed_size_partitioner(4), use_resource=True)
                ids = tf.compat.v1.placeholder(tf.int64, [IDS])
                loss = tf.reduce_sum(tf.compat.v1.nn.embedding_lookup(emb, ids))
                step = [tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss), loss]
            init = tf.compat.v1.global_variables_initializer()
        sess = tf.compat.v1.Session("grpc://" + spec["worker"][0], graph=g)
        sess.run(init)
        rng = np.random.default_rng(0)
        f = lambda: sess.run(step, {ids: rng.integers(0, vocab, IDS)})
        for _ in range(20): f()
        k = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(k): f()
            if time.perf_counter() - t0 > 0.2: break
            k *= 2
        best = float("inf")
        for _ in range(9):
            t0 = time.perf_counter()
            for _ in range(k): f()
            best = min(best, 1000 * (time.perf_counter() - t0) / k)
        out[str(vocab)] = best
        c0 = [_cpu(p.pid) for p in procs] + [time.process_time()]
        for _ in range(CPU_STEPS): f()
        c1 = [_cpu(p.pid) for p in procs] + [time.process_time()]
        out[str(vocab) + "cpu"] = [1000 * (y - x) / CPU_STEPS for x, y in zip(c0, c1)]
        sess.close()
finally:
    for p in procs: p.kill()
    for p in procs: p.wait()
print(json.dumps(out))
"""


def _rill_cluster_rows(vocabs: list[int]) -> list[Row]:
    try:
        from rill.distributed import local_cluster
    except ImportError:
        return []
    import rill.graph as rg
    import rill.train as rt
    from rill.exec import RunMetadata, RunOptions, Session

    peer = run_peer(
        PEER_CLUSTER.replace("VOCABS", repr(vocabs)).replace("CPU_STEPS", str(CPU_STEPS))
    )
    rows = []
    with local_cluster(ps=SHARDS, workers=1, log_level="WARNING") as cluster:
        for vocab in vocabs:
            g = rg.Graph()
            setter = rt.replica_device_setter(
                cluster=cluster.cluster_spec, worker_device="/job:worker/task:0"
            )
            with g.as_default(), g.device(setter):
                emb = rt.get_variable(
                    f"emb{vocab}", [vocab, DIM], partitioner=rt.fixed_size_partitioner(SHARDS),
                    initializer=rt.zeros_initializer(),
                )  # fmt: skip
                ids = rg.placeholder(rg.int64, [IDS])
                loss = rg.reduce_sum(rg.embedding_lookup(emb, ids, partition_strategy="mod"))
                step = [rt.GradientDescentOptimizer(0.1).minimize(loss), loss]
                init = rg.global_variables_initializer()
            rng = np.random.default_rng(0)
            with Session(cluster.target("worker", 0), graph=g) as sess:
                sess.run(init)

                def fn(sess=sess, step=step, ids=ids, rng=rng, vocab=vocab):
                    sess.run(step, {ids: rng.integers(0, vocab, IDS)})

                for _ in range(20):
                    fn()
                ms = _best_ms(fn)
                md = RunMetadata()
                opts = RunOptions(trace_level=RunOptions.FULL_TRACE, output_partition_graphs=True)
                sess.run(step, {ids: rng.integers(0, vocab, IDS)}, options=opts, run_metadata=md)
                moved = sum(u.received_bytes for u in rt.placement_summary(g, md).values())
                cpu = _task_cpu(cluster, fn)
            tf_cpu = peer.get(str(vocab) + "cpu")
            rows.append(Row(
                f"embedding step, {IDS} ids in {vocab:.0e}x{DIM} over 4 PS tasks + sparse SGD",
                "ms", ms, {"tensorflow": peer.get(str(vocab))},
                note=f"rill moved {moved} bytes between tasks in one step; CPU ms per step "
                f"(worker, mean PS, client): rill {_fmt(cpu)}"
                + (f", tensorflow {_fmt(_tf_split(tf_cpu))}" if tf_cpu else ""),
            ))  # fmt: skip
    return rows


def _task_cpu(cluster, fn) -> tuple:
    """CPU milliseconds per step of (the worker, a PS task on average, this client)."""
    tasks = cluster.tasks
    c0 = [t.cpu_seconds() for t in tasks] + [time.process_time()]
    for _ in range(CPU_STEPS):
        fn()
    c1 = [t.cpu_seconds() for t in tasks] + [time.process_time()]
    per = [1000 * (b - a) / CPU_STEPS for a, b in zip(c0, c1)]
    ps = [v for t, v in zip(tasks, per) if t.job == "ps"]
    worker = sum(v for t, v in zip(tasks, per) if t.job == "worker")
    return worker, sum(ps) / len(ps), per[-1]


def _tf_split(cpu: list) -> tuple:
    # The peer's order: 4 PS processes, the worker, the client.
    return cpu[SHARDS], sum(cpu[:SHARDS]) / SHARDS, cpu[-1]


def _fmt(v: tuple) -> str:
    return ", ".join(f"{x:.2f}" for x in v)


def run() -> list[Row]:
    vocabs = _vocabs()
    peer = run_peer(PEER.replace("VOCABS", repr(vocabs)))
    rows = []
    for vocab in vocabs:
        sess, fn, moved = _rill_step(vocab)
        for _ in range(20):
            fn()
        ms = _best_ms(fn)
        sess.close()
        del sess, fn
        rows.append(Row(
            f"embedding step, {IDS} ids in {vocab:.0e}x{DIM} over 4 devices + sparse SGD",
            "ms", ms, {"tensorflow": peer.get(str(vocab))},
            note=f"rill moved {moved} bytes between devices in one step",
        ))  # fmt: skip
    return rows + _rill_cluster_rows(vocabs)
