"""ONNX model inference, rill (import_onnx + Session) vs onnxruntime in one process: ResNet-18
(half width), MobileNetV3-small, EfficientNet-B0 (half width), SqueezeNet 1.1, a small ViT and a
GPT-2-like decoder, batch 1 and 8, single-threaded and with default threads.

The models are PyTorch-made with random weights (tools/fixtures/make_onnx_fixtures.py --bench);
they are not committed (up to 17 MB each): when .bench/onnx lacks them and the peer Python
(RILL_PEER_PYTHON, with PyTorch and onnxruntime) is there, they are generated first. Without
them the benchmark prints nothing. Each figure is the median time of one run (feed, compute,
fetch), rill's and onnxruntime's batches alternating (five each) so that both meet the same
moments of the machine. Single-threaded: onnxruntime with intra_op_num_threads=1 and
inter_op_num_threads=1; rill with BLAS limited to one thread (threadpoolctl), its intra-op pool
at one thread and one inter-op thread. "default": both as they come. rill's output is checked against onnxruntime's
before timing (relative error below 1e-4).

    python -m tools.bench onnx_models            # every model
    RILL_ONNX_BENCH=resnet18_half,gpt2_like python -m tools.bench onnx_models
    RILL_ONNX_BENCH_THREADS=single python -m tools.bench onnx_models   # or "default"
    RILL_ONNX_BENCH_CLOCK=cpu python -m tools.bench onnx_models   # CPU time per run

With RILL_ONNX_BENCH_CLOCK=cpu each figure is the process's CPU time per run (the best of five
batches) instead of wall time: on a loaded machine the single-threaded figures then measure the
work rather than the waiting (with default threads it sums the threads' time).
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import subprocess
import time

import numpy as np

from tools.bench import ROOT, Row, peer_python

MODELS = ["resnet18_half", "mobilenetv3_small", "efficientnet_b0_half", "squeezenet",
          "vit_small", "gpt2_like"]  # fmt: skip
BATCHES = (1, 8)
DIR = ROOT / ".bench" / "onnx"


def _batch_size(fn, clock, seconds: float) -> int:
    """Calls of fn() per timed batch: doubled until a batch takes `seconds` on `clock`."""
    fn()
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            fn()
        if clock() - t0 > seconds:
            return n
        n *= 2


def _interleaved(sides: dict, cpu: bool, min_time: float = 0.5, rounds: int = 5) -> dict:
    """Milliseconds per call of each side, timed in alternating batches (rill's, then the
    peer's, `rounds` times), so that both meet the same moments of the machine (another VM's
    load on the host moves a figure by a third from one second to the next). `sides` maps a
    name to (make, context factory or None): make() returns the side's fn for one batch (a
    session opened for it and dropped after it), the context is entered around the batch.
    onnxruntime's session is opened per batch and closed before rill's next one: its intra-op
    pool, pinned to a core and spinning, slowed rill's two-thread steps by a third while it
    lived (MobileNetV3-small b8: 13.5 ms a step beside it, 9.5 without). Wall time: the median
    batch; CPU time (process_time): the best batch."""
    clock = time.process_time if cpu else time.perf_counter
    calls, times = {}, {name: [] for name in sides}
    for name, (make, context) in sides.items():
        with context() if context else contextlib.nullcontext():
            calls[name] = _batch_size(make(), clock, min_time / rounds)
        gc.collect()
    for _ in range(rounds):
        for name, (make, context) in sides.items():
            with context() if context else contextlib.nullcontext():
                fn = make()
                fn()
                t0 = clock()
                for _ in range(calls[name]):
                    fn()
                times[name].append((clock() - t0) / calls[name] * 1e3)
            del fn
            gc.collect()
    pick = min if cpu else statistics.median
    return {name: pick(t) for name, t in times.items()}


def _ensure_models(names) -> bool:
    missing = [n for n in names if not all((DIR / f"{n}_b{b}.onnx").exists() for b in BATCHES)]
    if not missing:
        return True
    py = peer_python()
    if py is None:
        return False
    script = ROOT / "tools" / "fixtures" / "make_onnx_fixtures.py"
    subprocess.run([py, str(script), "--bench", str(DIR), "--only", *missing], check=False,
                   capture_output=True, timeout=1800)  # fmt: skip
    return all((DIR / f"{n}_b{b}.onnx").exists() for n in missing for b in BATCHES)


class _RillThreads:
    """rill single-threaded: BLAS at one thread and the intra-op pool at one thread."""

    def __init__(self, single: bool):
        self.single = single

    def __enter__(self):
        import threadpoolctl

        import rill.exec.kernels.intra_op as intra_op

        self._saved = intra_op._THREADS
        self._limits = None
        if self.single:
            self._limits = threadpoolctl.threadpool_limits(1)
            intra_op._THREADS = 1
        return self

    def __exit__(self, *exc):
        import rill.exec.kernels.intra_op as intra_op

        intra_op._THREADS = self._saved
        if self._limits is not None:
            self._limits.restore_original_limits()


def _rill_session(path, single: bool):
    from rill.exec import Session
    from rill.exec.proto import config_pb2
    from rill.graph.onnx import import_onnx

    g, ins, outs = import_onnx(str(path))
    config = config_pb2.ConfigProto(inter_op_parallelism_threads=1) if single else None
    sess = Session(graph=g, config=config)
    (x,) = ins.values()
    (y,) = outs.values()
    return lambda v: sess.run(y, {x: v})


def _ort_call(path, single: bool, x):
    """A fn() running onnxruntime on x, with a session of its own."""
    run = _ort_session(path, single)
    return lambda: run(x)


def _ort_session(path, single: bool):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if single:
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
    s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return lambda v: s.run(None, {name: v})[0]


def run() -> list[Row]:
    wanted = os.environ.get("RILL_ONNX_BENCH")
    names = [n for n in MODELS if not wanted or n in wanted.split(",")]
    if not _ensure_models(names):
        print("  (no benchmark models: set RILL_PEER_PYTHON to a Python with PyTorch)")
        return []
    try:
        import onnxruntime  # noqa: F401 - the peer, a dev dependency
    except ImportError:
        onnxruntime = None
    which = os.environ.get("RILL_ONNX_BENCH_THREADS", "single,default").split(",")
    modes = [m == "single" for m in ("single", "default") if m in which]
    cpu = os.environ.get("RILL_ONNX_BENCH_CLOCK", "wall") == "cpu"
    rows = []
    for name in names:
        for batch in BATCHES:
            path = DIR / f"{name}_b{batch}.onnx"
            data = np.load(DIR / f"{name}_b{batch}.npz", allow_pickle=False)
            x, want = data["input"], data["output"]
            for single in modes:
                with _RillThreads(single):
                    rill_fn = _rill_session(path, single)
                    got = rill_fn(x)
                err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
                assert err < 1e-4, f"{name}: rill differs from onnxruntime by {err:.2e}"
                sides = {"rill": (lambda f=rill_fn, v=x: lambda: f(v),
                                  lambda s=single: _RillThreads(s))}  # fmt: skip
                if onnxruntime is not None:
                    sides["onnxruntime"] = (lambda p=path, s=single, v=x: _ort_call(p, s, v), None)
                ms = _interleaved(sides, cpu)
                del rill_fn
                peers = {"onnxruntime": ms.get("onnxruntime")}
                threads = "1 thread" if single else "default threads"
                threads += ", CPU time" if cpu else ""
                rows.append(Row(f"ONNX {name}, batch {batch}, {threads}", "ms", ms["rill"], peers,
                                note=f"rel err {err:.1e}"))  # fmt: skip
                print(f"  {rows[-1].name}: rill {ms['rill']:.2f} ms, onnxruntime "
                      f"{peers['onnxruntime'] or float('nan'):.2f} ms", flush=True)  # fmt: skip
    return rows
