"""Synchronous replicas (paper §4.4, Figure 8 in small): global steps/s of the Figure 1 MLP
(batch 100, Adagrad) trained by between-graph replicas over 1 PS — asynchronous with 2 workers,
SyncReplicasOptimizer 2 of 2 and 3 of 3, and with one worker slowed by 30 ms per step, 3 of 3
against 2 of 3 (one backup worker). rill vs TensorFlow's runtime in the same run, every task a
process on loopback, one client thread per worker (tools/bench/_tf_sync_peer.py for TF)."""

from __future__ import annotations

import threading
import time

from rill.graph.errors import OutOfRangeError
from tools.bench import Row
from tools.bench._dist import _cluster, fig1_between_graph, rill_mlp, run_tf
from tools.bench._fig1 import batch

SECONDS = 6.0
STRAGGLER_S = 0.030
WARMUP_STEPS = 5
CASES = [  # (label, workers, replicas_to_aggregate, straggler)
    ("sync 2 of 2", 2, 2, False),
    ("sync 3 of 3", 3, 3, False),
    ("straggler, sync 3 of 3", 3, 3, True),
    ("straggler, sync 2 of 3 (1 backup)", 3, 2, True),
]


def _sync_graph(worker: int, workers: int, to_aggregate: int):
    import rill.graph as rg
    import rill.train as rt

    g, x, y, loss, _, _ = fig1_between_graph(worker)
    with g.as_default():
        with g.device("/job:ps/task:0"):
            step = rt.get_or_create_global_step()
        with g.device(f"/job:worker/task:{worker}"):
            opt = rt.SyncReplicasOptimizer(
                rt.AdagradOptimizer(0.01), to_aggregate, workers, replica_id=worker,
                barrier_timeout_secs=120,
            )  # fmt: skip
            train = opt.minimize(loss, global_step=step)
        hook = opt.make_session_run_hook(is_chief=worker == 0)
        init = [rg.global_variables_initializer(), rg.local_variables_initializer()]
        hook.begin()
    return g, x, y, train, step, hook, init


def rill_sync(workers: int, to_aggregate: int, straggler: bool, seconds: float) -> dict:
    from rill.exec import Session

    xv, yv = batch()
    with _cluster(ps=1, workers=workers) as c:
        sessions, loops = [], []
        try:
            built = [_sync_graph(w, workers, to_aggregate) for w in range(workers)]
            for w, (g, *_, init) in enumerate(built):
                sess = Session(c.target("worker", w), graph=g)
                sessions.append(sess)
                if w == 0:
                    sess.run(init[0])
                sess.run(init[1])
            for w, built_w in enumerate(built):
                built_w[5].after_create_session(sessions[w], None)
            errors: list[str] = []
            stop = threading.Event()

            def loop(w):
                _, x, y, train, *_ = built[w]
                delay = STRAGGLER_S if straggler and w == workers - 1 else 0.0
                try:
                    while not stop.is_set():
                        if delay:
                            time.sleep(delay)
                        sessions[w].run(train, {x: xv, y: yv})
                except OutOfRangeError:
                    pass  # the chief closed the barrier under a waiting replica
                except Exception as e:  # noqa: BLE001 - reported with the result
                    errors.append(f"worker {w}: {type(e).__name__}: {e}")

            loops = [threading.Thread(target=loop, args=(w,)) for w in range(workers)]
            for t in loops:
                t.start()
            global_step = built[0][4]
            deadline = time.monotonic() + 300
            while int(sessions[0].run(global_step)) < WARMUP_STEPS and not errors:
                if time.monotonic() > deadline:
                    raise RuntimeError("the replicas made no progress in 300 s")
                time.sleep(0.05)
            step0, t0 = int(sessions[0].run(global_step)), time.perf_counter()
            time.sleep(seconds)
            steps, dt = int(sessions[0].run(global_step)) - step0, time.perf_counter() - t0
            stop.set()
            built[0][5].end(sessions[0])  # the chief closes the barrier: every replica ends
            for t in loops:
                t.join(30)
            dropped = built[0][5]._opt.stats.dropped
        finally:
            for s in sessions:
                s.close()
    if errors:
        raise RuntimeError("; ".join(errors[:3]))
    return {"steps/s": steps / dt, "steps": steps, "dropped": dropped}


def run() -> list[Row]:
    rows = []
    rill_async = rill_mlp(SECONDS)
    tf_async = run_tf("mlp", str(SECONDS))
    rows.append(Row("Figure 1 MLP, async 2 workers + 1 PS", "global steps/s",
                    rill_async["steps/s"], {"tensorflow": tf_async.get("steps/s")}))  # fmt: skip
    # TensorFlow's replicas are measured over the same window and then killed with their cluster
    # (they hang in their shutdown, TensorFlow issues #5022 and #20342): every wait is bounded.
    tf = run_tf(str(SECONDS), str(WARMUP_STEPS), timeout=1800, script="_tf_sync_peer.py")
    rill_rates, tf_rates = {}, {}
    for label, workers, agg, straggler in CASES:
        r = rill_sync(workers, agg, straggler, SECONDS)
        peer = tf.get(label, {})
        rill_rates[label], tf_rates[label] = r["steps/s"], peer.get("steps/s")
        note = f"rill {r['steps']} steps, dropped {r['dropped']} stale gradients"
        if peer.get("steps") is not None:
            note += f"; TensorFlow {peer['steps']} steps"
        elif peer.get("error"):
            note += f"; TensorFlow failed: {peer['error'][:120]}"
        if label == CASES[-1][0]:  # Figure 8: what the backup worker buys against the straggler
            slow = CASES[-2][0]
            note += f"; 2 of 3 / 3 of 3: rill {r['steps/s'] / rill_rates[slow]:.2f}x"
            if tf_rates[label] and tf_rates[slow]:
                note += f", TensorFlow {tf_rates[label] / tf_rates[slow]:.2f}x"
        rows.append(Row(f"Figure 1 MLP, {label}", "global steps/s", r["steps/s"],
                        {"tensorflow": peer.get("steps/s")}, note))  # fmt: skip
    return rows
