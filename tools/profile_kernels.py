"""Per-kernel wall time inside a real training step (no tracing, so no outputs are retained).

python -m tools.profile_kernels            # the CNN train step of tools/bench/cnn_train.py
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


def main(steps: int = 10) -> None:
    common.KernelTable.get = _timed_get
    from rill.exec import Session
    from tools.bench.cnn_train import BATCH, build_rill

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    feed = {
        x: rng.random((BATCH, 28, 28, 1), dtype=np.float32),
        y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)],
    }
    sess = Session(graph=g)
    sess.run(init)
    for _ in range(3):
        sess.run(train, feed)
    STATS.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        sess.run(train, feed)
    step_ms = (time.perf_counter() - t0) / steps * 1e3
    print(f"step {step_ms:.2f} ms, kernels {sum(STATS.values()) / steps * 1e3:.2f} ms")
    for name, total in STATS.most_common(20):
        print(f"{total / steps * 1e3:8.2f} ms  {name}")


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
    for name, total in STATS.most_common(15):
        print(f"{total / steps * 1e3:8.2f} ms  {name}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", help="profile the inference of this ONNX model instead")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--cpu", action="store_true", help="CPU time instead of wall time")
    a = ap.parse_args()
    if a.cpu:
        CLOCK[0] = time.process_time
    if a.onnx:
        main_onnx(a.onnx, a.steps, a.threads)
    else:
        main(a.steps if a.steps != 5 else 10)
