"""Distributed null step: fetch one scalar from each of 1, 2, 4, 8, 16 PS (rill vs TensorFlow's
runtime; every task a process on loopback): wall time, the whole cluster's CPU and the client's
CPU per step."""

from __future__ import annotations

from tools.bench import Row
from tools.bench._dist import rill_null, run_tf

COUNTS = [1, 2, 4, 8, 16]


def run() -> list[Row]:
    rill = rill_null(COUNTS)
    tf = run_tf("null", ",".join(map(str, COUNTS)))
    rows = []
    for n in COUNTS:
        peer = tf.get(str(n), {})
        rows.append(Row(f"null step, {n} PS: wall per step", "ms", rill[str(n)]["ms"],
                        {"tensorflow": peer.get("ms")}))  # fmt: skip
        rows.append(Row(f"null step, {n} PS: cluster CPU per step", "ms", rill[str(n)]["cpu_ms"],
                        {"tensorflow": peer.get("cpu_ms")}))  # fmt: skip
        rows.append(Row(f"null step, {n} PS: client CPU per step", "ms",
                        rill[str(n)]["client_cpu_ms"], {"tensorflow": peer.get("client_cpu_ms")}))  # fmt: skip
    return rows
