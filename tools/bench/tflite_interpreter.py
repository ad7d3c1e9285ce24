"""TFLite interpreter latency, batch 1: rill's numpy interpreter vs LiteRT in the same process.

Models (TensorFlow-made fixtures, tests/fixtures/tflite and tests/fixtures/tflite/models): a
small CNN (28x28x1), MobileNetV2 (alpha 0.35, 96x96x3), a keyword-spotting CNN (49x10x1
MFCCs), a transformer encoder block (16 tokens x 32) — float32 and full int8. LiteRT runs
in-process (ai-edge-litert is a test dependency) with its default kernels (XNNPACK / optimized)
and with BUILTIN_REF (its reference kernels).

Each model is timed twice: single-threaded (num_threads=1 for both), then with two threads
(num_threads=2 for both; rill bounds its BLAS threads to it during invoke, and uses fewer where
more would not pay: one for a small model or when the cores are busy). Single-threaded, each figure is the CPU time of one `invoke()` on a
set input (time.process_time over batches of invokes, the fastest of 5 batches): on a machine
shared with other jobs it measures the code, not the scheduler. Multi-threaded, CPU time would
add up the threads, so the figure is wall time, the median of timed batches. The note adds the
wall-clock median (single-threaded rows) and each side's fastest single invoke (of up to 400
timed one by one, within about a second). The outputs of rill and LiteRT's
reference kernels are checked to agree first (int8 exactly). rill runs with its compiled loops
when numba is installed (`RILL_JIT=0` measures the numpy-only interpreter): a float32 model
whose every operator has a compiled kernel runs as one whole-subgraph program
(rill.mobile.program), and runs of int8 convolutions, fully-connected layers and additions run
as fused compiled calls (rill.mobile.program_int8); `RILL_JIT_PROGRAM=0` measures the per-operator path instead, and the
note says which ran.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from tools.bench import ROOT, Row

FIXTURES = ROOT / "tests" / "fixtures" / "tflite"
MODELS = [
    ("cnn_float", "small CNN float32"),
    ("cnn_int8", "small CNN int8"),
    ("models/mobilenet_v2_float", "MobileNetV2 0.35 96x96 float32"),
    ("models/mobilenet_v2_int8", "MobileNetV2 0.35 96x96 int8"),
    ("models/kws_cnn_float", "keyword-spotting CNN float32"),
    ("models/kws_cnn_int8", "keyword-spotting CNN int8"),
    ("models/transformer_block_float", "transformer block float32"),
    ("models/transformer_block_int8", "transformer block int8"),
]


# LiteRT 2.21's BUILTIN_REF aborts the process preparing this model (an internal check): no
# reference figure; rill's output is checked against LiteRT's default kernels (1 quantum).
NO_REF = {"models/mobilenet_v2_int8"}


def _batches_ms(fn, min_time: float = 1.0, repeats: int = 5) -> list[float]:
    """Milliseconds per call of fn() in each of `repeats` timed batches (after a warm-up and
    a batch size that makes a batch last about min_time / repeats), as tools.bench.measure_rate
    times them."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > min_time / repeats:
            break
        n *= 2
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) * 1000.0 / n)
    return out


def _cpu_ms(fn, min_cpu: float = 0.2, repeats: int = 5) -> float:
    """CPU milliseconds per call of fn(): the fastest of `repeats` batches timed with
    time.process_time, each batch lasting at least about min_cpu seconds of CPU."""
    fn()
    n = 1
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        if time.process_time() - t0 > min_cpu:
            break
        n *= 2
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        out.append((time.process_time() - t0) * 1000.0 / n)
    return min(out)


def _fastest_ms(fn, calls: int = 400, budget: float = 1.0) -> float:
    """The fastest of up to `calls` single calls of fn() timed one by one (within `budget` s)."""
    best, deadline = float("inf"), time.perf_counter() + budget
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        best = min(best, t1 - t0)
        if t1 > deadline:
            break
    return best * 1000.0


def _invoke_ms(interp, x, best: dict, key: str, cpu: bool) -> float:
    """The row's figure: CPU ms per invoke when `cpu` (the wall-clock median batch goes to
    best[key + " wall"]), else the median batch; the fastest single invoke goes to best[key]."""
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    wall = statistics.median(_batches_ms(interp.invoke))
    best[key] = _fastest_ms(interp.invoke)
    if not cpu:
        return wall
    best[key + " wall median"] = wall
    return _cpu_ms(interp.invoke)


def _how(sg) -> str:
    """How rill ran the model: one program, fused int8 runs among per-operator kernels, or
    per operator."""
    if sg.program is not None:
        return "one compiled program"
    fused = [f for f in sg.run if hasattr(f, "ops")]  # rill.mobile.program_int8.FusedRun
    if fused:
        n = sum(len(f.ops) for f in fused)
        return (
            f"{n} of {n + len(sg.run) - len(fused)} operators in {len(fused)} fused int8 "
            f"run{'s' if len(fused) > 1 else ''}, the rest per operator"
        )
    return "per operator"


def run() -> list[Row]:
    from rill.mobile.interpreter import Interpreter

    try:
        from ai_edge_litert.interpreter import Interpreter as LiteRT
        from ai_edge_litert.interpreter import OpResolverType
    except ImportError:  # the peer is optional
        LiteRT = None

    rows = []
    for name, label in MODELS:
        path = FIXTURES / f"{name}.tflite"
        if not path.exists():
            continue
        x = np.load(FIXTURES / f"{name}.npz")["input_0"][:1]
        checked = False
        for single in (True, False):
            threads = 1 if single else 2
            best = {}
            rill = Interpreter(model_path=str(path), num_threads=threads)
            rill_ms = _invoke_ms(rill, x, best, "rill", single)
            peers = {"litert": None, "litert_ref": None}
            if LiteRT is not None:
                dflt = LiteRT(model_path=str(path), num_threads=threads)
                peers["litert"] = _invoke_ms(dflt, x, best, "litert", single)
                ref = None
                if name not in NO_REF:
                    ref = LiteRT(model_path=str(path), num_threads=threads,
                                 experimental_op_resolver_type=OpResolverType.BUILTIN_REF)  # fmt: skip
                    peers["litert_ref"] = _invoke_ms(ref, x, best, "litert_ref", single)
                if not checked:
                    other = ref if ref is not None else dflt
                    got = rill.get_tensor(rill.get_output_details()[0]["index"])
                    want = other.get_tensor(other.get_output_details()[0]["index"])
                    diff = np.abs(got.astype(np.float64) - want).max()
                    if got.dtype.kind == "i":
                        tol = 0 if ref is not None else 1
                    else:
                        tol = 1e-5 * max(np.abs(want).max(), 1e-30)
                    assert diff <= tol, f"{name}: rill and LiteRT disagree by {diff}"
                    checked = True
            mode = "1 thread, CPU time" if single else f"{threads} threads, wall time"
            bests = ", ".join(f"{k} {v:.3f}" for k, v in best.items())
            used = rill.blas_limit(rill._main).n  # the BLAS threads rill's invoke uses now
            rows.append(Row(f"TFLite {label}, batch 1 invoke, {mode}", "ms", rill_ms, peers,
                            note=f"fastest invoke and wall medians (ms): {bests}; load average "
                                 f"{os.getloadavg()[0]:.1f}; rill's BLAS threads {used}; rill arena "
                                 f"{rill.arena_size} bytes; rill ran "
                                 f"{_how(rill._main)}"))  # fmt: skip
    return rows
