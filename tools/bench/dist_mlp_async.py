"""Distributed training: the Figure 1 MLP (batch 100, Adagrad) trained asynchronously by 2
workers with between-graph replication, variables on 1 PS (rill vs TensorFlow's runtime, every
task a process on loopback, one client thread per worker): global steps/s."""

from __future__ import annotations

from tools.bench import Row
from tools.bench._dist import rill_mlp, run_tf

SECONDS = 5.0


def run() -> list[Row]:
    rill = rill_mlp(SECONDS)
    tf = run_tf("mlp", str(SECONDS))
    note = f"rill steps per worker {rill['steps']}, loss {rill['loss'][0]:.3f} -> {rill['loss'][1]:.3f}"
    note += f"; rill CPU ms per step by task {rill['task_cpu_ms']}"
    if tf:
        note += f"; TensorFlow steps per worker {tf['steps']}"
        note += f", CPU ms per step by task {tf.get('task_cpu_ms')}"
    return [
        Row("Figure 1 MLP, 2 async workers + 1 PS", "steps/s", rill["steps/s"],
            {"tensorflow": tf.get("steps/s")}, note),
        Row("Figure 1 MLP, 2 async workers: cluster CPU per step", "ms", rill["cpu_ms"],
            {"tensorflow": tf.get("cpu_ms")}),
        Row("Figure 1 MLP, 2 async workers: client CPU per step", "ms", rill["client_cpu_ms"],
            {"tensorflow": tf.get("client_cpu_ms")}),
    ]  # fmt: skip
