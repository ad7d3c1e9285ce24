"""One-layer LSTM (512 units, batch 64, 50 steps; forward + backward + SGD): dynamic_rnn vs
static_rnn in rill and in TensorFlow 1.x graph mode (control flow v1); peak memory of the step;
the dynamic_rnn step's CPU time on one thread (rill: intra_op = inter_op = 1, TensorFlow the
same), which a machine shared with other work does not distort as it does wall time.

    python -m tools.bench lstm
    RILL_BENCH_ONLY=one_thread python -m tools.bench lstm    # only the one-thread CPU rows
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from tools.bench import Row, run_peer

UNITS, BATCH, STEPS, INPUT = 512, 64, 50, 512

_PEER = """
import json, time, statistics, resource, sys
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_control_flow_v2()
tf.compat.v1.enable_resource_variables()
from tensorflow.python.keras.layers.legacy_rnn import rnn_cell_impl
U, B, T, I = %(U)d, %(B)d, %(T)d, %(I)d
mode = sys.argv[1] if len(sys.argv) > 1 else "both"
ONE = %(one)s
def build(dynamic):
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(0)
        x = tf.compat.v1.placeholder(tf.float32, [T, B, I])
        cell = rnn_cell_impl.BasicLSTMCell(U)
        if dynamic:
            out, _ = tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32, time_major=True)
        else:
            out, _ = tf.compat.v1.nn.static_rnn(cell, tf.unstack(x), dtype=tf.float32)
            out = tf.stack(out)
        loss = tf.reduce_mean(tf.square(out))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    return g, x, train, init
xv = np.random.default_rng(0).standard_normal((T, B, I)).astype(np.float32)
out = {}
for dyn in ((True,) if ONE else (True, False)):
    g, x, train, init = build(dyn)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=1) if ONE else None
    sess = tf.compat.v1.Session(graph=g, config=config)
    sess.run(init)
    for _ in range(2): sess.run(train, {x: xv})
    ts, cs = [], []
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(train, {x: xv})
        ts.append((time.perf_counter() - t0) * 1000)
        cs.append((time.process_time() - c0) * 1000)
    out["dynamic" if dyn else "static"] = min(ts)
    out["cpu"] = min(cs)
print(json.dumps(out))
"""
PEER_ARGS = {"U": UNITS, "B": BATCH, "T": STEPS, "I": INPUT}
PEER = _PEER % dict(PEER_ARGS, one=False)
PEER_ONE = _PEER % dict(PEER_ARGS, one=True)


PEER_MEM = """
import json, numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_control_flow_v2()
tf.compat.v1.enable_resource_variables()
from tensorflow.python.keras.layers.legacy_rnn import rnn_cell_impl
U, B, T, I = %(U)d, %(B)d, %(T)d, %(I)d
dynamic = %(dyn)s
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [T, B, I])
    cell = rnn_cell_impl.BasicLSTMCell(U)
    if dynamic:
        out, _ = tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32, time_major=True)
    else:
        out, _ = tf.compat.v1.nn.static_rnn(cell, tf.unstack(x), dtype=tf.float32)
        out = tf.stack(out)
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(tf.reduce_mean(tf.square(out)))
    init = tf.compat.v1.global_variables_initializer()
sess = tf.compat.v1.Session(graph=g)
sess.run(init)
xv = np.random.default_rng(0).standard_normal((T, B, I)).astype(np.float32)
for _ in range(3): sess.run(train, {x: xv})
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"mb": int(hwm.split()[1]) / 1024.0}))
"""


def build(dynamic: bool):
    import rill.graph as rg
    import rill.train as rt

    g = rg.Graph()
    with g.as_default():
        g.seed = 0
        x = rg.placeholder(rg.float32, [STEPS, BATCH, INPUT], name="x")
        cell = rt.BasicLSTMCell(UNITS)
        if dynamic:
            out, _ = rt.dynamic_rnn(cell, x, dtype=rg.float32, time_major=True)
        else:
            out, _ = rt.static_rnn(cell, rg.unstack(x), dtype=rg.float32)
            out = rg.stack(out)
        loss = rg.reduce_mean(rg.square(out))
        train = rt.GradientDescentOptimizer(0.01).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, train, init


def step_ms(dynamic: bool, one_thread: bool = False, cpu: bool = False) -> float:
    """The best of 5 steps' wall time (or CPU time, all threads), ms; one_thread: intra_op =
    inter_op = 1."""
    from rill.exec import ConfigProto, Session

    g, x, train, init = build(dynamic)
    xv = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    config = None
    if one_thread:
        config = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess = Session(graph=g, config=config)
    sess.run(init)
    for _ in range(2):
        sess.run(train, {x: xv})
    ts = []
    clock = time.process_time if cpu else time.perf_counter
    for _ in range(5):
        t0 = clock()
        sess.run(train, {x: xv})
        ts.append((clock() - t0) * 1000)
    sess.close()
    return min(ts)


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (large) parent process.
_PEAK = """
import sys
sys.path.insert(0, ".")
from tools.bench.lstm import step_ms
step_ms(sys.argv[1] == "dynamic")
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(int(hwm.split()[1]))
"""


def peak_mb(dynamic: bool) -> float:
    """Peak resident memory of a fresh process that builds and runs the training step."""
    proc = subprocess.run([sys.executable, "-c", _PEAK, "dynamic" if dynamic else "static"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout.strip().splitlines()[-1]) / 1024.0


def _peer_mb(dynamic: bool):
    got = run_peer(PEER_MEM % {"U": UNITS, "B": BATCH, "T": STEPS, "I": INPUT, "dyn": dynamic})
    return got.get("mb")


def _one_thread_row() -> Row:
    cpu = step_ms(True, one_thread=True, cpu=True)
    peer = run_peer(PEER_ONE)
    return Row("LSTM 512x64x50 train step, dynamic_rnn, one thread, CPU", "ms", cpu,
               {"tensorflow": peer.get("cpu")})  # fmt: skip


def run() -> list[Row]:
    if os.environ.get("RILL_BENCH_ONLY") == "one_thread":
        return [_one_thread_row()]
    dyn = step_ms(True)
    sta = step_ms(False)
    peer = run_peer(PEER)
    rows = [
        Row("LSTM 512x64x50 train step, dynamic_rnn", "ms", dyn, {"tensorflow": peer.get("dynamic")}),
        Row("LSTM 512x64x50 train step, static_rnn", "ms", sta, {"tensorflow": peer.get("static")}),
        Row("LSTM dynamic/static step-time ratio", "x", dyn / sta,
            {"tensorflow": (peer["dynamic"] / peer["static"]) if peer else None}),
        Row("LSTM train step peak RSS, dynamic_rnn", "MB", peak_mb(True),
            {"tensorflow": _peer_mb(True)}),
        Row("LSTM train step peak RSS, static_rnn", "MB", peak_mb(False),
            {"tensorflow": _peer_mb(False)}),
        _one_thread_row(),
    ]  # fmt: skip
    return rows
