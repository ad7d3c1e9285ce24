"""Distributed fetch: a 100 MB float32 variable on one PS fetched by a client through a worker
(rill vs TensorFlow's runtime, every task a process on loopback): MB/s and the cluster's CPU."""

from __future__ import annotations

from tools.bench import Row
from tools.bench._dist import rill_fetch, run_tf

MB = 100


def run() -> list[Row]:
    rill = rill_fetch(MB)
    tf = run_tf("fetch", str(MB))
    return [
        Row(f"fetch a {MB} MB variable from 1 PS", "MB/s", rill["MB/s"],
            {"tensorflow": tf.get("MB/s")}),
        Row(f"fetch a {MB} MB variable: cluster CPU per fetch", "ms", rill["cpu_ms"],
            {"tensorflow": tf.get("cpu_ms")}),
        Row(f"fetch a {MB} MB variable: client CPU per fetch", "ms", rill["client_cpu_ms"],
            {"tensorflow": tf.get("client_cpu_ms")}),
    ]  # fmt: skip
