"""The measuring loops of the distributed benchmarks, shared by rill's side (tools/bench/_dist.py)
and TensorFlow's (tools/bench/_tf_cluster_peer.py, run by the peer Python as a script, which
imports this file from its folder): both sides time exactly the same loop. Plain Python only."""

from __future__ import annotations

import threading
import time


def measure(step, cpu, min_time: float = 1.0, min_steps: int = 20, warmup: int = 5):
    """(wall ms, cluster CPU ms, client CPU ms) per step over at least min_time s and min_steps;
    `cpu()` is the cluster's CPU seconds so far."""
    for _ in range(warmup):
        step()
    n, c0, t0, p0 = 0, cpu(), time.perf_counter(), time.process_time()
    while n < min_steps or time.perf_counter() - t0 < min_time:
        step()
        n += 1
    client = (time.process_time() - p0) / n * 1e3
    return (time.perf_counter() - t0) / n * 1e3, (cpu() - c0) / n * 1e3, client


def async_steps(workers, seconds: float, cpu, per_task=None) -> dict:
    """Each worker (session, train op, loss, feed) loops on its own thread for `seconds`: global
    steps/s, cluster and client CPU per step, steps per worker, the loss before and after.
    `per_task()` ({task name: CPU seconds so far}), when given, adds each task's CPU per step."""
    for sess, train, _, feed in workers:
        for _ in range(5):
            sess.run(train, feed)
    loss0 = float(workers[0][0].run(workers[0][2], workers[0][3]))
    counts = [0] * len(workers)
    tasks0 = per_task() if per_task else {}
    c0, t0, p0 = cpu(), time.perf_counter(), time.process_time()
    end = time.monotonic() + seconds

    def loop(k):
        sess, train, _, feed = workers[k]
        while time.monotonic() < end:
            sess.run(train, feed)
            counts[k] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt, client = time.perf_counter() - t0, time.process_time() - p0
    steps = max(sum(counts), 1)
    tasks1 = per_task() if per_task else {}
    task_ms = {k: round((tasks1[k] - v) / steps * 1e3, 3) for k, v in tasks0.items()}
    loss1 = float(workers[0][0].run(workers[0][2], workers[0][3]))
    return {"steps/s": sum(counts) / dt, "cpu_ms": (cpu() - c0) / steps * 1e3,
            "client_cpu_ms": client / steps * 1e3, "steps": counts,
            "loss": [loss0, loss1], "task_cpu_ms": task_ms}  # fmt: skip
