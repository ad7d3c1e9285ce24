"""TensorFlow's SyncReplicasOptimizer on its own runtime, for tools/bench/dist_sync_replicas.py
(runs in the PEER Python, which has TensorFlow; never imported by rill).

    python _tf_sync_peer.py SECONDS

Every task is a tf.distribute.Server process on loopback (the Cluster of _tf_cluster_peer.py);
each worker is a client thread in this process with its own graph and a MonitoredSession with
the optimizer's hook, as between-graph replicas run. Prints one JSON object last:
{case label: {"steps/s", "steps"}}.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
from _tf_cluster_peer import Cluster, _tf

STRAGGLER_S = 0.030
CASES = [
    ("sync 2 of 2", 2, 2, False),
    ("sync 3 of 3", 3, 3, False),
    ("straggler, sync 3 of 3", 3, 3, True),
    ("straggler, sync 2 of 3 (1 backup)", 3, 2, True),
]


def build(tf, worker: int, workers: int, to_aggregate: int):
    g = tf.Graph()
    with g.as_default():
        setter = tf.compat.v1.train.replica_device_setter(
            ps_tasks=1, worker_device=f"/job:worker/task:{worker}"
        )
        with tf.compat.v1.device(setter):
            tf.compat.v1.set_random_seed(1)
            step = tf.compat.v1.train.get_or_create_global_step()
            x = tf.compat.v1.placeholder(tf.float32, [None, 784])
            y = tf.compat.v1.placeholder(tf.float32, [None, 10])
            w1 = tf.Variable(tf.random.uniform([784, 100], -0.05, 0.05))
            b1 = tf.Variable(tf.zeros([100]))
            l1 = tf.nn.relu(tf.matmul(x, w1) + b1)
            w2 = tf.Variable(tf.random.uniform([100, 10], -0.05, 0.05))
            b2 = tf.Variable(tf.zeros([10]))
            l2 = tf.matmul(l1, w2) + b2
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=l2))
            opt = tf.compat.v1.train.SyncReplicasOptimizer(
                tf.compat.v1.train.AdagradOptimizer(0.01),
                replicas_to_aggregate=to_aggregate,
                total_num_replicas=workers,
            )
            train = opt.minimize(loss, global_step=step)
            hook = opt.make_session_run_hook(is_chief=worker == 0)
    return g, x, y, train, step, hook


def run_case(tf, workers: int, to_aggregate: int, straggler: bool, seconds: float) -> dict:
    rng = np.random.default_rng(0)
    xv = rng.random((100, 784), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 100)]
    with Cluster({"ps": 1, "worker": workers}) as c:
        result = {}
        ready = threading.Barrier(workers, timeout=600)
        stop = threading.Event()

        def replica(w):
            try:
                _replica(w)
            except Exception as e:  # noqa: BLE001 - reported in the JSON
                if w == 0:
                    result["error"] = repr(e)[:500]

        def _replica(w):
            g, x, y, train, step, hook = build(tf, w, workers, to_aggregate)
            with g.as_default():
                sess = tf.compat.v1.train.MonitoredTrainingSession(
                    master=c.target("worker", w),
                    is_chief=w == 0,
                    hooks=[hook],
                    save_checkpoint_secs=None,
                    save_summaries_steps=None,
                    save_summaries_secs=None,
                    log_step_count_steps=None,
                )
                delay = STRAGGLER_S if straggler and w == workers - 1 else 0.0
                ready.wait()
                with sess:
                    if w == 0:
                        s0 = sess.run(step)
                        t0 = time.perf_counter()
                    end = time.monotonic() + seconds
                    while time.monotonic() < end and not stop.is_set():
                        if delay:
                            time.sleep(delay)
                        sess.run(train, {x: xv, y: yv})
                    if w == 0:
                        dt = time.perf_counter() - t0
                        steps = int(sess.run(step)) - int(s0)
                        result.update({"steps/s": steps / dt, "steps": steps})
                        stop.set()

        threads = [threading.Thread(target=replica, args=(w,), daemon=True) for w in range(workers)]
        for t in threads:
            t.start()
        threads[0].join(seconds + 600)
        # Replicas still waiting for a token after the chief left are killed with the cluster.
    return result


def main() -> None:
    seconds = float(sys.argv[1])
    tf = _tf()
    out = {}
    for label, workers, agg, straggler in CASES:
        try:
            out[label] = run_case(tf, workers, agg, straggler, seconds)
        except Exception as e:  # noqa: BLE001 - reported, the other cases still run
            out[label] = {"error": repr(e)[:300]}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
