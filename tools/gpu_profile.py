"""Where a GPU train step's time goes: for each case, the step's wall time and the host CPU time
it takes (both per step, the device synchronized after each step), then cProfile's top functions
by own time over a few steps. Needs cupy and a CUDA device; run by tools/gpu_check.sh when
PROFILE=1.

    python3 -m tools.gpu_profile [cnn64 cnn512 mlp lstm_dynamic lstm_static]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import numpy as np


def _cnn(batch):
    from rill.exec import Session
    from tools.bench.cnn_train import build_rill

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    xv = rng.random((batch, 28, 28, 1), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    s = Session(graph=g)
    s.run(init)
    return lambda: s.run(train, {x: xv, y: yv})


def _lstm(dynamic):
    from rill.exec import Session
    from tools.bench.lstm import BATCH, INPUT, STEPS, build

    g, x, train, init = build(dynamic)
    xv = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    s = Session(graph=g)
    s.run(init)
    return lambda: s.run(train, {x: xv})


def _mlp():
    import rill.graph as rg
    from rill.exec import Session
    from rill.train import AdagradOptimizer
    from tools.bench._fig1 import batch, build_rill

    m = build_rill()
    with m["graph"].as_default():
        train = AdagradOptimizer(0.01).minimize(m["loss"])
        init = rg.global_variables_initializer()
    xv, yv = batch()
    s = Session(graph=m["graph"])
    s.run(init)
    return lambda: s.run(train, {m["x"]: xv, m["y"]: yv})


CASES = {
    "cnn64": (lambda: _cnn(64), 30),
    "cnn512": (lambda: _cnn(512), 30),
    "mlp": (_mlp, 50),
    "lstm_dynamic": (lambda: _lstm(True), 4),
    "lstm_static": (lambda: _lstm(False), 4),
}


def main(names):
    import cupy

    sync = cupy.cuda.runtime.deviceSynchronize
    for name in names or list(CASES):
        make, n = CASES[name]
        step = make()
        for _ in range(3):
            step()
        sync()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            step()
        sync()
        wall = (time.perf_counter() - w0) * 1000 / n
        cpu = (time.process_time() - c0) * 1000 / n
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        launch = (time.perf_counter() - t0) * 1000 / n  # host time with no sync per batch
        sync()
        print(f"== {name}: {wall:.3f} ms/step wall, {cpu:.3f} ms host CPU, "
              f"{launch:.3f} ms host without waiting", flush=True)  # fmt: skip
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            step()
        sync()
        pr.disable()
        buf = io.StringIO()
        st = pstats.Stats(pr, stream=buf)
        st.sort_stats("tottime").print_stats(40)
        st.sort_stats("cumulative").print_stats(25)
        print(buf.getvalue().replace("/opt/torch/.venv/lib/python3.12/site-packages/", ""),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
