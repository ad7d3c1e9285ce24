"""Quiet and loaded, back to back with TensorFlow: the CNN train step (batch 64), the Figure 1
MLP step, the LSTM 512x64x50 dynamic_rnn step and Session.run on the 10- and 100-op chains,
first as the machine is, then with CPU-bound busy loops beside both rill and the peer.

    python -m tools.bench busy_machine
    RILL_BENCH_LOAD=2 python -m tools.bench busy_machine     # two busy loops (default one)
    RILL_BENCH_ONLY=mlp,chains python -m tools.bench busy_machine

Every row's note gives the host's load averages when it was measured (a "quiet" machine shared
with other work is not quiet: read the figures with them). The summary rows give each figure's
loaded/quiet ratio for rill and for TensorFlow (lower is better; the ratio column is TensorFlow's
over rill's).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from tools.bench import Row, run_peer

WORKLOADS = ("cnn", "mlp", "lstm", "chains")


@contextlib.contextmanager
def busy_loops(n: int):
    """n CPU-bound processes for the duration of the block, killed after it."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # let them start spinning
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            a = f.read().split()
        return f"load {a[0]} {a[1]} {a[2]}, runnable {a[3]}"
    except OSError:
        return "load unknown"


def _lstm_rows() -> list[Row]:
    from tools.bench import lstm

    peer_script = lstm.PEER.replace("for dyn in (True, False):", "for dyn in (True,):")
    ms = lstm.step_ms(True)
    peer = run_peer(peer_script)
    return [Row("LSTM 512x64x50 train step, dynamic_rnn", "ms", ms,
                {"tensorflow": peer.get("dynamic")})]  # fmt: skip


def _measure(which) -> list[Row]:
    from tools.bench import cnn_train, mlp_train, session_overhead

    rows = []
    for name in which:
        load = _load()
        if name == "cnn":
            got = cnn_train.run()
        elif name == "mlp":
            got = mlp_train.run()
        elif name == "lstm":
            got = _lstm_rows()
        else:
            got = session_overhead.run()
        for r in got:
            r.peers = {"tensorflow": r.peers.get("tensorflow")}
            r.note = load
        rows.extend(got)
    return rows


def run() -> list[Row]:
    n = int(os.environ.get("RILL_BENCH_LOAD", "1"))
    which = [w for w in os.environ.get("RILL_BENCH_ONLY", ",".join(WORKLOADS)).split(",") if w]
    quiet = _measure(which)
    with busy_loops(n):
        loaded = _measure(which)
    rows = []
    for q, ld in zip(quiet, loaded):
        rows.append(Row(f"{q.name} [quiet]", q.unit, q.rill, q.peers, q.note))
        rows.append(Row(f"{ld.name} [{n} busy]", ld.unit, ld.rill, ld.peers, ld.note))
    for q, ld in zip(quiet, loaded):
        slow = (lambda a, b: a / b) if q.unit.endswith("/s") else (lambda a, b: b / a)
        tf_q, tf_l = q.peers.get("tensorflow"), ld.peers.get("tensorflow")
        rows.append(Row(f"{q.name}: loaded/quiet slowdown", "x", slow(q.rill, ld.rill),
                        {"tensorflow": slow(tf_q, tf_l) if tf_q and tf_l else None}))  # fmt: skip
    for r in rows:
        print(f"  {r.name}: rill {r.rill:.4g} {r.unit}, tensorflow {r.peers.get('tensorflow')}"
              f"  ({r.note})", flush=True)  # fmt: skip
    return rows
