"""Where an imported ONNX model's inference could use a second core: which kernels split over
the intra-op threads on a quiet machine, and the one-thread CPU time of those that do not.

    python -m tools.onnx_threads resnet18_half_b1,squeezenet_b8   # models in .bench/onnx
    python -m tools.onnx_threads --top 10 mobilenetv3_small_b1     # and the 10 largest kernels

For each model: the CPU time per inference on one thread (process_time, so a loaded machine
measures the work rather than the waiting), split into the kernels that would split (the
thread policy asked with two cores free and idle, rill.exec.threads), the kernels that run on
one thread whatever the cores (by op type; convolutions by filter size and stride), and the
time outside kernels; then the bound on the two-thread time that gives (the split kernels
taken at half their time). The models come from tools/bench/onnx_models.py (.bench/onnx).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import numpy as np

from tools.bench.onnx_models import DIR


def main(names: list[str], top: int) -> None:
    import rill.exec.executor.common as common
    from rill.exec import Session
    from rill.exec import threads as policy
    from rill.exec.kernels import intra_op
    from rill.graph.onnx import import_onnx

    # A quiet machine: two cores free and idle whatever the load now.
    policy.cores_free = policy.cores_idle = lambda: 2
    current: list = [None]
    split: set = set()
    cpu: collections.Counter = collections.Counter()
    kind: dict = {}
    real_get, real_pf, seen = common.KernelTable.get, intra_op.parallel_for, set()

    def timed_get(self, node):
        k = real_get(self, node)
        if id(k) in seen:
            return k
        f, name, op = k.compute, node.name, node.type

        def timed(*args):
            current[0] = name
            t0 = time.process_time()
            out = f(*args)
            cpu[name] += time.process_time() - t0
            current[0] = None
            if op == "_FusedConv2D" and name not in kind:
                w, stride = args[1], max(1, round(args[0].shape[2] / max(out.shape[2], 1)))
                kind[name] = f"conv {w.shape[0]}x{w.shape[1]}/{stride}"
            kind.setdefault(name, op)
            return out

        k.compute = timed
        seen.add(id(k))
        return k

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        if current[0] and min(2, n // max(grain, 1), max_threads or 2) > 1:
            split.add(current[0])
        return real_pf(n, fn, grain, pieces_per_thread, max_threads)

    common.KernelTable.get = timed_get
    for name in names:
        data = np.load(DIR / f"{name}.npz", allow_pickle=False)
        g, ins, outs = import_onnx(str(DIR / f"{name}.onnx"))
        (x,) = ins.values()
        (y,) = outs.values()
        sess = Session(graph=g)
        for mod in list(sys.modules.values()):  # every kernel module's parallel_for
            if getattr(mod, "parallel_for", None) is real_pf:
                mod.parallel_for = watch
        saved = intra_op._THREADS
        try:
            split.clear()
            intra_op._THREADS = 2
            sess.run(y, {x: data["input"]})  # which kernels split
            chosen = set(split)
            intra_op._THREADS = 1
            steps = max(3, int(0.5 / max(_one(sess, y, x, data["input"]), 1e-4)))
            cpu.clear()
            t0 = time.process_time()
            for _ in range(steps):
                sess.run(y, {x: data["input"]})
            total = (time.process_time() - t0) / steps * 1e3
        finally:
            intra_op._THREADS = saved
            for mod in list(sys.modules.values()):
                if getattr(mod, "parallel_for", None) is watch:
                    mod.parallel_for = real_pf
        per = {k: v / steps * 1e3 for k, v in cpu.items()}
        par = sum(v for k, v in per.items() if k in chosen)
        one = sum(per.values()) - par
        outside = total - sum(per.values())
        by_kind: collections.Counter = collections.Counter()
        for k, v in per.items():
            if k not in chosen:
                by_kind[kind.get(k, "?")] += v
        print(f"{name}: {total:.2f} ms CPU per run on one thread: split kernels {par:.2f}, "
              f"one-thread kernels {one:.2f}, outside kernels {outside:.2f}; two-thread bound "
              f"{outside + one + par / 2:.2f} ms")  # fmt: skip
        print("  one thread: " + ", ".join(f"{k} {v:.2f}" for k, v in by_kind.most_common(8)))
        for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:top]:
            print(f"    {v:7.3f} ms  {'split' if k in chosen else 'one  '}  {kind.get(k)}  {k}")
    common.KernelTable.get = real_get


def _one(sess, y, x, v) -> float:
    t0 = time.process_time()
    sess.run(y, {x: v})
    return time.process_time() - t0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("models", help="comma-separated names in .bench/onnx, e.g. resnet18_half_b1")
    ap.add_argument("--top", type=int, default=0, help="also list the N largest kernels")
    a = ap.parse_args()
    main(a.models.split(","), a.top)
