"""Where a GPU train step's device time goes, op by op: every kernel call of an uncaptured step is
bracketed by CUDA events on the current stream, and the device time between them is summed per
op (and per op type) over a few steps. Needs cupy and a CUDA device; run with RILL_CUDA_GRAPHS=0
(a captured step runs no kernels one by one). Without cupy (the simulated GPU) it times the host.

    RILL_CUDA_GRAPHS=0 python3 -m tools.gpu_ops [cnn64 cnn512 mlp lstm_dynamic lstm_static]
"""

from __future__ import annotations

import collections
import sys
import time

from rill.exec.executor import common

_records: list = []


def _timer():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount():

            def mark():
                ev = cupy.cuda.Event()
                ev.record()
                return ev

            return (
                mark,
                lambda a, b: cupy.cuda.get_elapsed_time(a, b),
                cupy.cuda.Device().synchronize,
            )
    except ImportError:
        pass
    return time.perf_counter, lambda a, b: (b - a) * 1000, lambda: None


_mark, _elapsed, _sync = _timer()
_orig = common.instantiate


def _instantiate(kdef, op, device, attrs=None):
    compute = _orig(kdef, op, device, attrs)
    if device.device_type != "GPU":
        return compute
    key = (op.type, op.name)

    def timed(*args, **kw):
        a = _mark()
        out = compute(*args, **kw)
        _records.append((key, a, _mark()))
        return out

    return timed


common.instantiate = _instantiate


def report(name: str, step, n: int) -> None:
    for _ in range(3):
        step()
    _sync()
    _records.clear()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    _sync()
    wall = (time.perf_counter() - t0) * 1000 / n
    by_op: dict = collections.Counter()
    by_type: dict = collections.Counter()
    for key, a, b in _records:
        ms = _elapsed(a, b) / n
        by_op[key] += ms
        by_type[key[0]] += ms
    total = sum(by_type.values())
    print(f"== {name}: {wall:.3f} ms/step wall, {total:.3f} ms in GPU kernels "
          f"({len(_records) // n} kernel calls a step)", flush=True)  # fmt: skip
    for t, ms in by_type.most_common(15):
        print(f"  {ms:8.3f} ms  {t}")
    print("  -- by op")
    for (t, o), ms in by_op.most_common(20):
        print(f"  {ms:8.3f} ms  {t:28s} {o}")


def main(names):
    from tools.gpu_profile import CASES  # the GPU benchmark's steps, by name

    for name in names or ["cnn512"]:
        make, n = CASES[name]
        report(name, make(), n)


if __name__ == "__main__":
    main(sys.argv[1:])
