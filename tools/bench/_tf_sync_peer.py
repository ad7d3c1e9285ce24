"""TensorFlow's SyncReplicasOptimizer on its own runtime, for tools/bench/dist_sync_replicas.py
(runs in the PEER Python, which has TensorFlow; never imported by rill).

    python _tf_sync_peer.py SECONDS [WARMUP_STEPS]

Every task is a tf.distribute.Server process on loopback (the Cluster of _tf_cluster_peer.py);
each case's replicas are client threads of one client process (`client`), each with its own graph
and a MonitoredTrainingSession with the optimizer's hook, as between-graph replicas run. Prints
one JSON object last: {case label: {"steps/s", "steps"} or {"error"}}.

TensorFlow's replicas do not end cleanly: when one replica stops, the others wait for tokens or
gradients that never come (TensorFlow issues #5022, #20342), and MonitoredSession's close waits
on the chief's queue runner. So the client measures the global step over a fixed window (after
WARMUP_STEPS global steps), prints its figure and leaves with os._exit; this script kills the
client if it has not answered within its deadline, and then the cluster: every wait is bounded.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time

from _tf_cluster_peer import Cluster, _tf

STRAGGLER_S = 0.030
CASES = [
    ("sync 2 of 2", 2, 2, False),
    ("sync 3 of 3", 3, 3, False),
    ("straggler, sync 3 of 3", 3, 3, True),
    ("straggler, sync 2 of 3 (1 backup)", 3, 2, True),
]
START_S = 240.0  # the client's start: TensorFlow's import, sessions, the replicas' readiness
BUDGET_S = 1700.0  # all cases, within the caller's 1800 s: a case that may not fit is skipped
CASE_S = 1000.0  # the most one case takes: its cluster's start (twice 300 s at worst), its client


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


def client(spec: str, workers: int, to_aggregate: int, straggler: bool, seconds: float,
           warmup: int) -> None:  # fmt: skip
    """One case's replicas against the cluster `spec`; prints {"steps/s", "steps"} and exits
    without closing anything (the caller kills the client and the cluster)."""
    import numpy as np

    tf = _tf()
    targets = ["grpc://" + a for a in json.loads(spec)["worker"]]
    rng = np.random.default_rng(0)
    xv = rng.random((100, 784), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 100)]
    built = [build(tf, w, workers, to_aggregate) for w in range(workers)]
    errors: list[str] = []

    def replica(w):
        g, x, y, train, _, hook = built[w]
        delay = STRAGGLER_S if straggler and w == workers - 1 else 0.0
        try:
            with g.as_default():
                sess = tf.compat.v1.train.MonitoredTrainingSession(
                    master=targets[w], is_chief=w == 0, hooks=[hook],
                    save_checkpoint_secs=None, save_summaries_steps=None,
                    save_summaries_secs=None, log_step_count_steps=None,
                )  # fmt: skip
            while True:  # until the process exits
                if delay:
                    time.sleep(delay)
                sess.run(train, {x: xv, y: yv})
        except Exception as e:  # noqa: BLE001 - reported in the JSON
            errors.append(f"worker {w}: {e!r}"[:400])

    for w in range(workers):
        threading.Thread(target=replica, args=(w,), daemon=True).start()
    # The global step is read from a session of its own (the variable lives on the PS).
    g0, step = built[0][0], built[0][4]
    with g0.as_default():
        probe = tf.compat.v1.Session(targets[0], graph=g0)
    deadline = time.monotonic() + START_S

    def read_step() -> int:
        while True:
            try:
                return int(probe.run(step))
            except tf.errors.FailedPreconditionError:  # the chief has not initialized it yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    out: dict
    try:
        while read_step() < warmup and not errors:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {warmup} global steps in {START_S} s")
            time.sleep(0.05)
        if errors:
            raise RuntimeError("; ".join(errors))
        s0, t0 = read_step(), time.perf_counter()
        time.sleep(seconds)
        steps, dt = read_step() - s0, time.perf_counter() - t0
        out = {"steps/s": steps / dt, "steps": steps}
        if errors:
            out["error"] = "; ".join(errors)
    except Exception as e:  # noqa: BLE001 - reported in the JSON
        out = {"error": repr(e)[:500]}
    print(json.dumps(out), flush=True)
    os._exit(0)  # TensorFlow's replicas and MonitoredSessions would hang in their shutdown


def run_case(workers: int, to_aggregate: int, straggler: bool, seconds: float,
             warmup: int) -> dict:  # fmt: skip
    with Cluster({"ps": 1, "worker": workers}) as c:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        args = [json.dumps(c.spec), str(workers), str(to_aggregate), str(int(straggler)),
                str(seconds), str(warmup)]  # fmt: skip
        p = subprocess.Popen([sys.executable, __file__, "client", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env)  # fmt: skip
        try:
            deadline = time.monotonic() + START_S + seconds + 60
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"error": f"no result within {START_S + seconds + 60:.0f} s"}
                if select.select([p.stdout], [], [], min(left, 1.0))[0]:
                    line = p.stdout.readline()
                    if line.startswith("{"):
                        return json.loads(line)
                    if not line:  # the client died without a result
                        return {"error": f"the client exited ({p.wait(10)}) without a result"}
        finally:
            p.kill()
            p.wait(30)


def main(argv: list[str]) -> None:
    if argv[0] == "client":
        spec, workers, agg, straggler, seconds, warmup = argv[1:7]
        client(spec, int(workers), int(agg), bool(int(straggler)), float(seconds), int(warmup))
        return
    seconds = float(argv[0])
    warmup = int(argv[1]) if len(argv) > 1 else 5
    out = {}
    # Never outlive the caller's timeout: it would kill this script and orphan the tasks.
    deadline = time.monotonic() + BUDGET_S
    for label, workers, agg, straggler in CASES:
        if deadline - time.monotonic() < CASE_S:
            out[label] = {"error": f"skipped: the peer's {BUDGET_S:.0f} s are spent"}
            continue
        try:
            out[label] = run_case(workers, agg, straggler, seconds, warmup)
        except Exception as e:  # noqa: BLE001 - reported, the other cases still run
            out[label] = {"error": repr(e)[:300]}
        print(label, out[label], file=sys.stderr, flush=True)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
