"""How many BLAS threads an invoke may use: `Interpreter(num_threads=...)`.

In LiteRT, `num_threads` sizes the interpreter's own thread pool (XNNPACK's, ruy's); left at its
default (None or -1) the CPU kernels run single-threaded. rill's products run on the BLAS library
numpy links, whose thread pool is process-wide and which, left to itself, splits every large
product into one share per core and spins waiting for the slowest share: on a machine whose
cores are busy such a product takes several times its single-threaded time. So during an invoke
the BLAS threads are bounded by

- `num_threads` (None or -1: one thread, as LiteRT's default runs);
- the model's work: where its largest product is under GEMM_GRAIN multiply-adds, splitting it
  costs more than it saves (a thread hand-off per product), so one thread;
- the cores idle now: the CPUs of the process's affinity mask less the host's other runnable
  tasks (/proc/loadavg, sampled at most every 50 ms; `os.getloadavg` where that file is
  missing), at least one.

The count is set through threadpoolctl only when it differs from the library's current one, and
the previous count comes back after the invoke (a get, 0.3 µs, and when the count differs two
sets, about 1.5 µs in all; threadpoolctl's `threadpool_limits` context costs tens to hundreds
of µs, as it re-inspects the loaded libraries).

Results are the same bits for any `num_threads` (tests/mobile/test_threads.py checks it on the
model fixtures, with 1, 2 and 4 threads). A threaded BLAS product does not give that by itself:
how the library shares a product among its threads changes which of its kernels compute each
part of the result, and with OpenBLAS's Haswell kernels a float32 [256, 289] x [289, 16]
product (a U-Net's 3x3 convolution) on two threads differs from the one-thread product in the
last bits of some elements, as do two one-thread calls over its row halves. So the float
kernels' products go through `matmul`: while an invoke runs on more than one BLAS thread, a
product keeps them only where the threaded call is known to give one thread's bits on this
machine's BLAS (`threaded_exact`: a BLAS routine's arithmetic follows the shapes, strides,
dtypes and thread count, not the values, so each such combination is tried once, on random
operands laid out as the product's, the invoke's count against one thread, and the verdict
kept); any other product runs on one thread (the count set to one around the call and back,
about 1.5 µs). On a BLAS whose threaded products are seldom exact a model may thus gain little
from `num_threads`: the price of results that do not depend on it. The products of the int8,
int16 and hybrid kernels are sums of integers in float32 or float64 that stay exact, whose bits
do not depend on the order of the sums: they call numpy directly and keep every thread.
"""

from __future__ import annotations

import os
import time

import numpy as np

__all__ = [
    "GEMM_GRAIN",
    "blas_threads",
    "cores_idle",
    "gemm_work",
    "invoke_threads",
    "blas_limit",
    "matmul",
    "threaded_exact",
]

# Multiply-adds of the largest product below which one thread runs the whole invoke: 1 M
# multiply-adds take about 50 µs on one core, the order of what handing a share to another
# thread and waiting for it costs.
GEMM_GRAIN = 1 << 20


def _affinity() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_CPUS = _affinity()
_HOST_CPUS = os.cpu_count() or _CPUS
_sample = [-1.0, 0]  # [time sampled, other runnable tasks]


def _others() -> int:
    """The host's runnable tasks now less the calling thread (sampled at most every 50 ms)."""
    now = time.monotonic()
    if now - _sample[0] >= 0.05:
        try:
            with open("/proc/loadavg", "rb") as f:
                others = int(f.read().split()[3].split(b"/")[0]) - 1
        except (OSError, ValueError, IndexError):
            try:
                others = round(os.getloadavg()[0]) - 1
            except OSError:
                others = 0
        _sample[0], _sample[1] = now, max(0, others)
    return _sample[1]


def cores_idle() -> int:
    """Of the process's CPUs, those no other runnable task uses now (>= 1)."""
    return max(1, min(_CPUS, _HOST_CPUS - _others()))


def gemm_work(sg) -> int | None:
    """Multiply-adds of the subgraph's largest BLAS product (after allocate; None where shapes
    are only known at invoke): CONV_2D, FULLY_CONNECTED, BATCH_MATMUL, TRANSPOSE_CONV. The
    operators of fused int8 runs (rill.mobile.program_int8) make no BLAS call: not counted."""
    if getattr(sg, "dynamic", False):
        return None
    fused = {k for f in getattr(sg, "run", ()) for k in getattr(f, "ops", ())}
    best = 0
    for k, op in enumerate(sg.sg.operators):
        if k in sg.folded_ops or not op.outputs or k in fused:
            continue
        if op.name in ("CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"):
            out = sg.shapes[op.outputs[0]]
            w = sg.shapes[op.inputs[1]]
            if out is None or w is None or not w:
                return None
            if op.name == "CONV_2D":
                inner = int(np.prod(w[1:]))
            elif op.name == "FULLY_CONNECTED":
                inner = int(w[-1])
            else:
                a = sg.shapes[op.inputs[0]]
                inner = int(a[-2] if op.options.get("adj_x") else a[-1])
            best = max(best, int(np.prod(out, dtype=np.int64)) * inner)
        elif op.name == "TRANSPOSE_CONV":
            w, x = sg.shapes[op.inputs[1]], sg.shapes[op.inputs[2]]
            if w is None or x is None:
                return None
            best = max(best, int(np.prod(x, dtype=np.int64)) * int(np.prod(w[:-1])))
    return best


def invoke_threads(num_threads: int | None, work: int | None) -> int:
    """The BLAS threads for an invoke: num_threads (None or -1: 1), one for a model whose
    largest product is under GEMM_GRAIN, and no more than the cores idle now."""
    if num_threads is None or num_threads < 1:
        return 1
    if num_threads == 1 or (work is not None and work < GEMM_GRAIN):
        return 1
    return max(1, min(num_threads, cores_idle()))


# -- the BLAS library's threads ------------------------------------------------------------------

_ctl: list = []  # [the lib controllers] once looked up
# The BLAS thread count the innermost blas_limit set (1 outside them, or with no controllable
# BLAS): what `matmul` checks its products against.
_now = [1]


def _libs() -> list:
    if not _ctl:
        try:
            from threadpoolctl import ThreadpoolController

            libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        except Exception:  # noqa: BLE001 - no controllable BLAS: nothing to bound
            libs = []
        _ctl.append(libs)
    return _ctl[0]


def blas_threads() -> int | None:
    """The BLAS library's thread count now (the largest; None where none is controllable)."""
    libs = _libs()
    return max(lc.get_num_threads() or 0 for lc in libs) if libs else None


class blas_limit:
    """Bounds the BLAS threads to `n` for a with-block (an invoke), restoring the previous count
    after it: one get (0.3 µs) where the count is already `n`, a get and two sets (about 1.5 µs)
    where it is not. The BLAS pool is process-wide: invokes running at once on several Python
    threads share one count. (threadpoolctl 3.8 lets only one Python thread set OpenBLAS's
    count and ignores the others' sets; `_set` takes that control for each set and gives it
    back, so that an invoke on any thread gets the count it asks for.)"""

    __slots__ = ("n", "saved", "prev")

    def __init__(self, n: int):
        self.n = n
        self.saved = None
        self.prev = 1

    def __enter__(self):
        n = self.n
        saved = None
        libs = _libs()
        for i, lc in enumerate(libs):
            cur = lc.get_num_threads()
            if cur != n:
                if saved is None:
                    saved = [None] * len(libs)
                saved[i] = cur
                _set(lc, n)
        self.saved = saved
        self.prev, _now[0] = _now[0], (n if libs else 1)
        return self

    def __exit__(self, *exc):
        _now[0] = self.prev
        saved, self.saved = self.saved, None
        if saved is not None:
            for lc, s in zip(_ctl[0], saved):
                if s is not None:
                    _set(lc, s)


def _set(lc, n: int) -> None:
    """lc.set_num_threads(n) from whichever thread calls: threadpoolctl >= 3.8 ignores the sets
    of all but the one thread that controls OpenBLAS, so this thread takes the control for the
    call and gives it back."""
    release = getattr(type(lc), "clear_controlling_thread", None)
    if release is not None:
        release(force=True)
    lc.set_num_threads(n)
    if release is not None:
        release()


# -- products whose bits do not depend on the threads ---------------------------------------------

_gemm = np.matmul  # the product itself (a module global so that tests can watch the calls)
_exact: dict = {}  # (threads, operands' shapes, strides and dtypes) -> threaded_exact's verdict
_EXACT_KEYS = 4096  # past this many verdicts (shapes only known at invoke), start afresh


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """np.matmul(a, b, out=out) with the bits of one BLAS thread whatever the count the running
    invoke set (blas_limit): on more than one thread, the product keeps them only where
    threaded_exact says the threaded call gives one thread's bits, else it runs on one thread.
    For the float kernels' products; the integer kernels' exact sums need none of it."""
    n = _now[0]
    if n > 1 and not threaded_exact(a, b, out, n):
        with blas_limit(1):
            return _gemm(a, b, out=out)
    return _gemm(a, b, out=out)


def threaded_exact(a: np.ndarray, b: np.ndarray, out: np.ndarray | None, n: int) -> bool:
    """Whether np.matmul(a, b, out=out) on the `n` BLAS threads set now (blas_limit(n)) gives
    the bits it gives on one.

    How a BLAS splits a product among its threads and which kernels compute each share follow
    the shapes, the strides (numpy's choice of a BLAS call or its own loop, the transpositions),
    the dtypes and the thread count, not the values. So each combination is tried once, on
    random operands with the product's shapes and strides, on `n` threads and on one, and the
    verdict kept. Integer products (numpy's own loops, no BLAS) are exact; operands with
    negative strides, never met in the kernels, are not tried: one thread."""
    key = (
        n,
        a.shape,
        a.strides,
        a.dtype.char,
        b.shape,
        b.strides,
        b.dtype.char,
        None if out is None else (out.shape, out.strides, out.dtype.char),
    )
    verdict = _exact.get(key)
    if verdict is None:
        if len(_exact) >= _EXACT_KEYS:
            _exact.clear()
        verdict = _exact[key] = _try_threads(a, b, out)
    return verdict


def _try_threads(a, b, out) -> bool:
    if not (a.dtype.kind in "fc" or b.dtype.kind in "fc"):
        return True
    rng = np.random.default_rng(len(_exact))
    pa, pb = _replica(a, rng), _replica(b, rng)
    many = None if out is None else _replica(out, None)
    one = None if out is None else _replica(out, None)
    if pa is None or pb is None or (out is not None and (many is None or one is None)):
        return False
    many = np.matmul(pa, pb, out=many)  # on the threads set now
    with blas_limit(1):
        one = np.matmul(pa, pb, out=one)
    return bool(np.array_equal(one, many))


def _replica(x: np.ndarray, rng) -> np.ndarray | None:
    """An array of x's shape, dtype and strides over a buffer of its own: standard normal values
    (rng), or uninitialized (rng None); None for negative or unaligned strides."""
    size = x.dtype.itemsize
    if any(s < 0 or s % size for s in x.strides):
        return None
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    span = sum((d - 1) * s for d, s in zip(x.shape, x.strides)) // size + 1
    if rng is None:
        base = np.empty(span, x.dtype)
    elif x.dtype.kind == "c":
        base = (rng.standard_normal(span) + 1j * rng.standard_normal(span)).astype(x.dtype)
    else:
        base = rng.standard_normal(span).astype(x.dtype)
    return np.lib.stride_tricks.as_strided(base, x.shape, x.strides)
