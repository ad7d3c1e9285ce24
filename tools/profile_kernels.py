"""Per-kernel wall time inside a real training step (no tracing, so no outputs are retained).

python -m tools.profile_kernels [--threads 1] [--cpu]
                                           # the CNN train step of tools/bench/cnn_train.py,
                                           # per kernel; --threads 1 --cpu: the one-thread
                                           # CPU time of the step and of each kernel
python -m tools.profile_kernels --serial  # the CNN step on one thread: per kernel, its thread's
                                           # CPU time and the part outside intra-op parallel
                                           # regions (parallel_for / parallel_blocks), which a
                                           # second thread cannot share (measured by the thread's
                                           # own clock, so it holds on a loaded machine)
python -m tools.profile_kernels --repeat   # the CNN step on one thread: each pure kernel's thread
                                           # CPU time in the step, then run again at once on the
                                           # same inputs (in cache): what the step's cache misses
                                           # cost each kernel, which isolated benchmarks miss
python -m tools.profile_kernels --tf      # TensorFlow's per-op times in the same CNN step (one
                                           # thread, its step-stats trace, in RILL_PEER_PYTHON):
                                           # traced wall times scaled to the step's CPU time, so
                                           # comparable in proportion only on a loaded machine
python -m tools.profile_kernels --lstm --cpu [--threads 1] | --lstm --serial
                                           # the LSTM dynamic_rnn train step of tools/bench/lstm.py:
                                           # per op type, per kernel, and the float GEMMs of
                                           # rill.exec.threads.matmul by shape (the folded
                                           # weight-gradient GEMM and the gradient loop's products
                                           # run there, not as timed kernels)
python -m tools.profile_kernels --onnx .bench/onnx/resnet18_half_b1.onnx [--threads 1] [--cpu]
                                           # inference of an ONNX model (its .npz input beside
                                           # it), per kernel and per op type; --cpu: CPU time
                                           # (process_time) instead of wall time, which on a
                                           # loaded machine measures the work, not the waiting

(Run it as a module: as a script, tools/ comes first on sys.path and its coverage.py hides the
coverage package numba imports.)
"""

from __future__ import annotations

import collections
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import rill.exec.executor.common as common  # noqa: E402

STATS: collections.Counter = collections.Counter()
CLOCK = [time.perf_counter]
_seen: set = set()
_orig_get = common.KernelTable.get


def _timed_get(self, node):
    k = _orig_get(self, node)
    if id(k) in _seen:
        return k
    f, name = k.compute, f"{node.type}:{node.name}"

    def timed(*args):
        clock = CLOCK[0]
        t0 = clock()
        out = f(*args)
        STATS[name] += clock() - t0
        return out

    k.compute = timed
    _seen.add(id(k))
    return k


def main(steps: int = 10, threads: int | None = None) -> None:
    common.KernelTable.get = _timed_get
    from rill.exec import ConfigProto, Session
    from tools.bench.cnn_train import BATCH, build_rill

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    feed = {
        x: rng.random((BATCH, 28, 28, 1), dtype=np.float32),
        y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)],
    }
    config = None
    if threads:
        config = ConfigProto(
            intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
        )
    sess = Session(graph=g, config=config)
    sess.run(init)
    for _ in range(3):
        sess.run(train, feed)
    STATS.clear()
    clock = CLOCK[0]
    t0 = clock()
    for _ in range(steps):
        sess.run(train, feed)
    step_ms = (clock() - t0) / steps * 1e3
    print(f"step {step_ms:.2f} ms, kernels {sum(STATS.values()) / steps * 1e3:.2f} ms")
    for name, total in STATS.most_common(20):
        print(f"{total / steps * 1e3:8.2f} ms  {name}")


# Kernels without side effects, which --repeat may run a second time.
_PURE = ("Conv2D", "MatMul", "BiasAddGrad", "MaxPool", "ReluGrad", "SoftmaxCrossEntropy")


def main_repeat(steps: int) -> None:
    """Per pure kernel of the CNN step (one thread): its thread CPU time in the step, and again
    when run a second time at once on the same inputs, which are then in cache."""
    first: collections.Counter = collections.Counter()
    again: collections.Counter = collections.Counter()
    seen: set = set()

    def repeat_get(self, node):
        k = _orig_get(self, node)
        if id(k) in seen or not any(p in node.type for p in _PURE):
            return k
        f, name = k.compute, f"{node.type}:{node.name}"

        def timed(*args):
            t0 = time.thread_time()
            out = f(*args)
            t1 = time.thread_time()
            f(*args)
            first[name] += t1 - t0
            again[name] += time.thread_time() - t1
            return out

        k.compute = timed
        seen.add(id(k))
        return k

    common.KernelTable.get = repeat_get
    from rill.exec import ConfigProto, Session
    from tools.bench.cnn_train import BATCH, build_rill

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    feed = {
        x: rng.random((BATCH, 28, 28, 1), dtype=np.float32),
        y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)],
    }
    config = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess = Session(graph=g, config=config)
    sess.run(init)
    for _ in range(3):
        sess.run(train, feed)
    first.clear()
    again.clear()
    for _ in range(steps):
        sess.run(train, feed)
    ms = 1e3 / steps
    print(
        f"pure kernels: {sum(first.values()) * ms:.2f} ms in the step, "
        f"{sum(again.values()) * ms:.2f} ms run again at once (one thread, CPU)"
    )
    print("  in step   again  kernel")
    for name, t in first.most_common(16):
        print(f"{t * ms:8.2f} {again[name] * ms:7.2f}  {name}")


def main_serial(steps: int, lstm: bool = False) -> None:
    """Per kernel of the CNN step (or the LSTM step, lstm=True), one thread: CPU time, and the
    part outside intra-op regions; for the LSTM also the step thread's time outside kernels (the
    loop machinery, its folded and hoisted GEMMs) and the part of that outside regions."""
    import rill.exec.kernels.intra_op as intra_op

    current: list = [None]
    inside: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()

    depth = [0]

    def watch(orig):
        # Only the outermost region counts (parallel_blocks calls parallel_for); time in
        # regions outside any kernel goes to the key None.
        def watched(*args, **kwargs):
            t0 = time.thread_time()
            depth[0] += 1
            try:
                return orig(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    inside[current[0]] += time.thread_time() - t0

        return watched

    # The kernel modules bind the helpers by name: patch every binding of the originals.
    originals = {f: watch(f) for f in (intra_op.parallel_for, intra_op.parallel_blocks)}
    from rill.exec import ConfigProto, Session  # imports the kernel modules

    def patch():
        for mod in [m for n, m in sys.modules.items() if n.startswith("rill.exec")]:
            for name in ("parallel_for", "parallel_blocks"):
                f = getattr(mod, name, None)
                if f in originals:
                    setattr(mod, name, originals[f])

    patch()

    def timed_get(self, node):
        k = _orig_get(self, node)
        if id(k) in _seen:
            return k
        f, name = k.compute, f"{node.type}:{node.name}"

        def timed(*args):
            current[0] = name
            t0 = time.thread_time()
            try:
                return f(*args)
            finally:
                total[name] += time.thread_time() - t0
                current[0] = None

        k.compute = timed
        _seen.add(id(k))
        return k

    common.KernelTable.get = timed_get
    if lstm:
        from tools.bench.lstm import BATCH, INPUT, STEPS, build

        g, x, train, init = build(True)
        xv = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
        feed = {x: xv}
    else:
        from tools.bench.cnn_train import BATCH, build_rill

        g, x, y, loss, train, init = build_rill()
        rng = np.random.default_rng(0)
        feed = {
            x: rng.random((BATCH, 28, 28, 1), dtype=np.float32),
            y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)],
        }
    one = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess = Session(graph=g, config=one)
    sess.run(init)
    for _ in range(3):
        sess.run(train, feed)
    patch()  # modules the first steps imported
    inside.clear()
    total.clear()
    t0 = time.thread_time()
    for _ in range(steps):
        sess.run(train, feed)
    step_ms = (time.thread_time() - t0) / steps * 1e3
    all_ms = sum(total.values()) / steps * 1e3
    serial_ms = (sum(total.values()) - sum(inside.values()) + inside[None]) / steps * 1e3
    print(f"kernels {all_ms:.2f} ms CPU on one thread, {serial_ms:.2f} ms of it serial")
    if lstm:
        out_ms = step_ms - all_ms
        out_serial = out_ms - inside[None] / steps * 1e3
        print(f"step {step_ms:.2f} ms: outside kernels {out_ms:.2f} ms, {out_serial:.2f} ms "
              "of it serial (loop machinery, stacking copies; the rest the folded and hoisted "
              "GEMMs)")  # fmt: skip
    print("     cpu   serial  kernel")
    for name, t in total.most_common(20):
        print(f"{t / steps * 1e3:8.2f} {(t - inside[name]) / steps * 1e3:8.2f}  {name}")


_TF_TRACE = """
import collections, json, time
one = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
sess1 = tf.compat.v1.Session(graph=g, config=one)
sess1.run(init)
for _ in range(5):
    sess1.run(train, {x: xv, y: yv})
t0 = time.process_time()
for _ in range(20):
    sess1.run(train, {x: xv, y: yv})
step = (time.process_time() - t0) / 20 * 1e3
opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
per_op = collections.Counter()
for _ in range(10):
    md = tf.compat.v1.RunMetadata()
    sess1.run(train, {x: xv, y: yv}, options=opts, run_metadata=md)
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            kernel = n.timeline_label.split(" = ")[-1].split("(")[0]
            per_op[kernel + ":" + n.node_name] += n.op_end_rel_micros - n.op_start_rel_micros
scale = step / (sum(per_op.values()) / 10 / 1e3)
print(json.dumps({"step": step, "ops": {k: v / 10 / 1e3 * scale for k, v in per_op.items()}}))
"""


def main_tf() -> None:
    from tools.bench import run_peer
    from tools.bench.cnn_train import PEER

    got = run_peer(PEER.split("sess = tf.compat.v1.Session(graph=g)")[0] + _TF_TRACE)
    if not got:
        print("TensorFlow is not installed in RILL_PEER_PYTHON")
        return
    print(f"TensorFlow step {got['step']:.2f} ms CPU on one thread; per op (scaled):")
    for name, ms in sorted(got["ops"].items(), key=lambda kv: -kv[1])[:25]:
        print(f"{ms:8.2f} ms  {name}")


def main_onnx(path: str, steps: int, threads: int | None) -> None:
    """Per-kernel and per-op-type time of one inference of an imported ONNX model."""
    common.KernelTable.get = _timed_get
    from rill.exec import Session
    from rill.graph.onnx import import_onnx

    if threads:
        import threadpoolctl

        import rill.exec.kernels.intra_op as intra_op

        threadpoolctl.threadpool_limits(threads)
        intra_op._THREADS = threads
    p = pathlib.Path(path)
    data = np.load(p.with_suffix(".npz"), allow_pickle=False)
    g, ins, outs = import_onnx(str(p))
    (x,) = ins.values()
    (y,) = outs.values()
    sess = Session(graph=g)
    for _ in range(2):
        sess.run(y, {x: data["input"]})
    STATS.clear()
    t0 = CLOCK[0]()
    for _ in range(steps):
        sess.run(y, {x: data["input"]})
    run_ms = (CLOCK[0]() - t0) / steps * 1e3
    print(f"run {run_ms:.2f} ms, kernels {sum(STATS.values()) / steps * 1e3:.2f} ms")
    by_type: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for name, total in STATS.items():
        by_type[name.split(":")[0]] += total
        count[name.split(":")[0]] += 1
    for t, total in by_type.most_common(15):
        print(f"{total / steps * 1e3:8.2f} ms  {t} (x{count[t]})")
    print("--")
    for name, total in STATS.most_common(int(os.environ.get("RILL_PROFILE_TOP", "15"))):
        print(f"{total / steps * 1e3:8.2f} ms  {name}")


def _print_by_type(steps: int) -> None:
    by_type: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for name, total in STATS.items():
        by_type[name.split(":")[0]] += total
        count[name.split(":")[0]] += 1
    for t, total in by_type.most_common(15):
        print(f"{total / steps * 1e3:8.2f} ms  {t} (x{count[t]})")
    print("--")
    for name, total in STATS.most_common(15):
        print(f"{total / steps * 1e3:8.2f} ms  {name}")


def main_lstm(steps: int, threads: int | None) -> None:
    """Per-kernel time of the LSTM 512x64x50 dynamic_rnn train step, and its float GEMMs by
    shape ([m, k] x [k, n], with the operands' layouts: C for row-major, F for a transposed
    view): those of threads.matmul and of kernels.serial_gemm.product (MatMul, the folded and
    hoisted products: one BLAS call where that gives threads.matmul's bits), each counted
    once."""
    from rill.exec import threads as rill_threads
    from rill.exec.kernels import serial_gemm

    gemms: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    depth = [0]

    def layout(a):
        return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "S"

    def timed(orig):
        def run(a, b, *args):
            clock = CLOCK[0]
            t0 = clock()
            depth[0] += 1
            try:
                r = orig(a, b, *args)
            finally:
                depth[0] -= 1
            if not depth[0]:
                key = f"{list(a.shape)}{layout(a)} x {list(b.shape)}{layout(b)}"
                gemms[key] += clock() - t0
                calls[key] += 1
            return r

        return run

    # Kernels bind threads.matmul when they are built: patch it before the Session builds any.
    rill_threads.matmul = timed(rill_threads.matmul)
    serial_gemm.product = timed(serial_gemm.product)
    common.KernelTable.get = _timed_get
    from rill.exec import ConfigProto, Session
    from tools.bench.lstm import BATCH, INPUT, STEPS, build

    g, x, train, init = build(True)
    xv = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    config = None
    if threads:
        config = ConfigProto(intra_op_parallelism_threads=threads,
                             inter_op_parallelism_threads=threads)  # fmt: skip
    sess = Session(graph=g, config=config)
    sess.run(init)
    for _ in range(2):
        sess.run(train, {x: xv})
    STATS.clear()
    gemms.clear()
    calls.clear()
    t0 = CLOCK[0]()
    for _ in range(steps):
        sess.run(train, {x: xv})
    step_ms = (CLOCK[0]() - t0) / steps * 1e3
    sess.close()
    print(f"step {step_ms:.2f} ms, kernels {sum(STATS.values()) / steps * 1e3:.2f} ms")
    _print_by_type(steps)
    print("-- float GEMMs by shape (per step: calls, ms)")
    for key, total in gemms.most_common(10):
        print(f"{total / steps * 1e3:8.2f} ms  x{calls[key] / steps:g}  {key}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", help="profile the inference of this ONNX model instead")
    ap.add_argument("--lstm", action="store_true", help="profile the LSTM train step instead")
    ap.add_argument("--tf", action="store_true", help="TensorFlow's per-op CNN step profile")
    ap.add_argument("--serial", action="store_true", help="each CNN kernel's serial CPU time")
    ap.add_argument("--repeat", action="store_true", help="CNN kernels in the step vs in cache")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--cpu", action="store_true", help="CPU time instead of wall time")
    a = ap.parse_args()
    if a.cpu:
        CLOCK[0] = time.process_time
    if a.tf:
        main_tf()
    elif a.repeat:
        main_repeat(a.steps if a.steps != 5 else 10)
    elif a.serial:
        main_serial(a.steps if a.steps != 5 else (3 if a.lstm else 20), a.lstm)
    elif a.lstm:
        main_lstm(a.steps if a.steps != 5 else 3, a.threads)
    elif a.onnx:
        main_onnx(a.onnx, a.steps, a.threads)
    else:
        main(a.steps if a.steps != 5 else 10, a.threads)
