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

from tools.bench import gpu

# name -> (the step, from the GPU benchmark's builders; steps per measurement)
CASES = {
    "cnn64": (lambda: gpu.cnn_step(64)[1], 30),
    "cnn512": (lambda: gpu.cnn_step(512)[1], 30),
    "mlp": (lambda: gpu.mlp_step()[1], 50),
    "lstm_dynamic": (lambda: gpu.lstm_step(True)[1], 4),
    "lstm_static": (lambda: gpu.lstm_step(False)[1], 4),
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
