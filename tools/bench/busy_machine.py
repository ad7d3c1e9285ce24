"""Quiet and loaded, interleaved with TensorFlow: the CNN train step (batch 64), the Figure 1
MLP step, the LSTM 512x64x50 dynamic_rnn step and Session.run on the 10- and 100-op chains,
with and without CPU-bound busy loops beside both rill and the peer.

    python -m tools.bench busy_machine
    RILL_BENCH_LOAD=2 python -m tools.bench busy_machine     # two busy loops (default one)
    RILL_BENCH_ONLY=mlp,chains python -m tools.bench busy_machine
    RILL_BENCH_ROUNDS=9 python -m tools.bench busy_machine   # samples per figure (default 5)

On a machine shared with other work, a quiet phase and a loaded phase measured one after the
other see different background load, and so do rill and a peer measured one after the other: the
ratios then measure the background. Here every figure is the median of samples taken in rounds:
each round measures rill and TensorFlow (kept running in a server process, stepping on command)
quiet, then resumes the busy loops (SIGCONT) and measures both again, then stops them
(SIGSTOP); the order within a phase alternates. The busy loops run in sessions of their own,
as independent processes. Each sample is a batch of steps lasting about
0.3 s. Every row gives wall time per step, the note the CPU time per step (the process's, all its
threads) and the host's load. The summary rows give each figure's loaded/quiet ratio for rill
and for TensorFlow (lower is better; the ratio column is TensorFlow's over rill's).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

from tools.bench import Row, peer_python

WORKLOADS = ("cnn", "mlp", "lstm", "chains")
SAMPLE_S = 0.3

_PEER_HEAD = """
import json, sys, time
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
tf.compat.v1.enable_resource_variables()
"""

# The peer's loop: one line "N" on stdin runs N steps and answers [wall s, CPU s].
_PEER_LOOP = """
step(); step()
print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        step()
    print(json.dumps([time.perf_counter() - t0, time.process_time() - c0]), flush=True)
"""


def _peer_cnn() -> str:
    from tools.bench import cnn_train

    src = cnn_train.PEER
    data = src[src.index("rng = np.random") : src.index("out = {}")]
    graph = src[src.index("g = tf.Graph()") : src.index("out[")]
    return data + graph + "def step(): sess.run(train, {x: xv, y: yv})\n"


def _peer_mlp() -> str:
    from tools.bench._fig1 import PEER_BUILD

    return (
        PEER_BUILD
        + """
g, x, y, l2, loss, init = build()
with g.as_default():
    train = tf.compat.v1.train.AdagradOptimizer(0.01).minimize(loss)
    init2 = tf.compat.v1.global_variables_initializer()
sess = tf.compat.v1.Session(graph=g)
sess.run(init2)
def step(): sess.run(train, {x: xv, y: yv})
"""
    )


def _peer_lstm() -> str:
    from tools.bench import lstm

    src = lstm.PEER
    return (
        src[src.index("from tensorflow") : src.index("out = {}")]
        + """
g, x, train, init = build(True)
sess = tf.compat.v1.Session(graph=g)
sess.run(init)
def step(): sess.run(train, {x: xv})
"""
    )


def _peer_chain(n: int) -> str:
    return f"""
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
    y = x
    for i in range({n}):
        y = y * 1.0001 if i % 2 else y + 0.5
sess = tf.compat.v1.Session(graph=g)
v = np.ones(4, np.float32)
def step(): sess.run(y, {{x: v}})
"""


def _rill_cnn():
    from rill.exec import Session
    from tools.bench import cnn_train

    g, x, y, loss, train, init = cnn_train.build_rill()
    rng = np.random.default_rng(0)
    xv = rng.random((cnn_train.BATCH, 28, 28, 1), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, cnn_train.BATCH)]
    sess = Session(graph=g)
    sess.run(init)
    return lambda: sess.run(train, {x: xv, y: yv})


def _rill_mlp():
    import rill.graph as rg
    from rill.exec import Session
    from rill.train import AdagradOptimizer
    from tools.bench._fig1 import batch, build_rill

    m = build_rill()
    with m["graph"].as_default():
        train = AdagradOptimizer(0.01).minimize(m["loss"])
        init = rg.global_variables_initializer()
    xv, yv = batch()
    sess = Session(graph=m["graph"])
    sess.run(init)
    feed = {m["x"]: xv, m["y"]: yv}
    return lambda: sess.run(train, feed)


def _rill_lstm():
    from rill.exec import Session
    from tools.bench import lstm

    g, x, train, init = lstm.build(True)
    shape = (lstm.STEPS, lstm.BATCH, lstm.INPUT)
    xv = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = Session(graph=g)
    sess.run(init)
    return lambda: sess.run(train, {x: xv})


def _rill_chain(n: int):
    from rill.exec import Session
    from tools.bench.session_overhead import _build_rill

    g, x, y = _build_rill(n)
    sess = Session(graph=g)
    v = np.ones(4, np.float32)
    return lambda: sess.run(y, {x: v})


def _cases(which):
    """(row name, rill step factory, peer step source) per measured figure."""
    cases = []
    for w in which:
        if w == "cnn":
            cases.append(("CNN train step (2 conv, 2 dense, momentum), batch 64", _rill_cnn,
                          _peer_cnn))  # fmt: skip
        elif w == "mlp":
            cases.append(("Figure 1 MLP train step (Adagrad), batch 100", _rill_mlp, _peer_mlp))
        elif w == "lstm":
            cases.append(("LSTM 512x64x50 train step, dynamic_rnn", _rill_lstm, _peer_lstm))
        elif w == "chains":
            for n in (10, 100):
                cases.append((f"Session.run, chain of {n} elementwise ops",
                               lambda n=n: _rill_chain(n), lambda n=n: _peer_chain(n)))  # fmt: skip
        else:
            raise ValueError(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    return cases


class _Peer:
    """TensorFlow stepping one workload on command, in its own interpreter."""

    def __init__(self, source: str):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
        self.proc = subprocess.Popen([peer_python(), "-c", _PEER_HEAD + source + _PEER_LOOP],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
        for line in self.proc.stdout:
            if line.strip() == "ready":
                return
        raise RuntimeError("the peer failed to start")

    def run(self, n: int) -> tuple[float, float]:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the peer stopped")
        wall, cpu = json.loads(line)
        return wall, cpu

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def _rill_run(step, n: int) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        step()
    return time.perf_counter() - t0, time.process_time() - c0


@contextlib.contextmanager
def busy_loops(n: int):
    """n CPU-bound processes, stopped (SIGSTOP) until `resume`d; killed after the block."""
    # Each in a session of its own: an independent process, as another job on the host is
    # (where the kernel groups tasks by session for fairness, a child in rill's session would
    # take its share from rill's group alone).
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(n)]  # fmt: skip
    try:
        for p in procs:
            os.kill(p.pid, signal.SIGSTOP)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


def _signal(procs, sig) -> None:
    for p in procs:
        os.kill(p.pid, sig)
    if sig == signal.SIGCONT:
        time.sleep(0.2)  # let them start spinning


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            a = f.read().split()
        return f"load {a[0]} {a[1]} {a[2]}"
    except OSError:
        return "load unknown"


def _measure(step, peer, loops, rounds: int) -> dict:
    """Medians of wall and CPU per step: {(system, phase): (wall ms, cpu ms)}."""
    step()
    step()
    t, _ = _rill_run(step, 1)
    n = max(1, int(SAMPLE_S / max(t, 1e-6)))
    samples = {(s, ph): [] for s in ("rill", "tensorflow") for ph in ("quiet", "loaded")}
    systems = [("rill", lambda: _rill_run(step, n))]
    if peer is not None:
        systems.append(("tensorflow", lambda: peer.run(n)))
    for r in range(rounds):
        for phase in ("quiet", "loaded"):
            if phase == "loaded":
                _signal(loops, signal.SIGCONT)
            order = systems if r % 2 == 0 else systems[::-1]
            for name, run in order:
                wall, cpu = run()
                samples[(name, phase)].append((wall / n * 1000, cpu / n * 1000))
            if phase == "loaded":
                _signal(loops, signal.SIGSTOP)
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in samples.items() if v}  # fmt: skip


def run() -> list[Row]:
    n_busy = int(os.environ.get("RILL_BENCH_LOAD", "1"))
    rounds = int(os.environ.get("RILL_BENCH_ROUNDS", "5"))
    which = [w for w in os.environ.get("RILL_BENCH_ONLY", ",".join(WORKLOADS)).split(",") if w]
    rows, summary = [], []
    with busy_loops(n_busy) as loops:
        for name, rill_factory, peer_source in _cases(which):
            step = rill_factory()
            peer = _Peer(peer_source()) if peer_python() else None
            try:
                load = _load()
                got = _measure(step, peer, loops, rounds)
            finally:
                if peer is not None:
                    peer.close()
            for phase, label in (("quiet", "quiet"), ("loaded", f"{n_busy} busy")):
                rw, rc = got[("rill", phase)]
                tw, tc = got.get(("tensorflow", phase), (None, None))
                note = f"CPU/step rill {rc:.3g} ms" + (f", tensorflow {tc:.3g} ms" if tc else "")
                rows.append(Row(f"{name} [{label}]", "ms", rw, {"tensorflow": tw},
                                f"{note}; {load} at start"))  # fmt: skip
                print(f"  {rows[-1].name}: rill {rw:.4g} ms, tensorflow {tw and round(tw, 4)} ms"
                      f" ({rows[-1].note})", flush=True)  # fmt: skip
            tq, tl = got.get(("tensorflow", "quiet")), got.get(("tensorflow", "loaded"))
            summary.append(Row(f"{name}: loaded/quiet slowdown", "x",
                               got[("rill", "loaded")][0] / got[("rill", "quiet")][0],
                               {"tensorflow": tl[0] / tq[0] if tq and tl else None}))  # fmt: skip
    for r in summary:
        print(f"  {r.name}: rill {r.rill:.3g}x, tensorflow {r.peers.get('tensorflow')}", flush=True)
    return rows + summary
