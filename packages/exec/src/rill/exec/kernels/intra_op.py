"""Per-thread scratch memory and intra-op parallelism for the CPU kernels.

`scratch` hands out reused per-thread buffers: a fresh large array page-faults on every call and
can cost as much as the work done in it. `parallel_for` splits a loop over a small pool (one
thread per core of the budget, the caller's included), using no more threads than the cores free
and the step's intra-op bound allow (`rill.exec.threads`).
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from rill.exec import threads as _policy

_tls = threading.local()


def scratch(slot: str, n: int, dtype) -> np.ndarray:
    """A reused 1-D buffer of `n` elements, private to this thread and `slot`.

    Kernels never return scratch memory; a thread runs one kernel at a time, so kernels share it.
    """
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    bufs = getattr(_tls, "bufs", None)
    if bufs is None:
        bufs = _tls.bufs = {}
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype)


# The most threads parallel_for splits work over: the process's core budget (module-level so that
# tests and benchmarks can change it).
_THREADS = _policy.core_budget()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker_init() -> None:
    _tls.worker = True


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max(1, _THREADS - 1), thread_name_prefix="rill-intra-op", initializer=_worker_init
            )
        return _pool


def parallel_for(
    n: int, fn, grain: int = 1, pieces_per_thread: int = 1, max_threads: int | None = None
) -> None:
    """Runs fn(lo, hi) over contiguous pieces of range(n) on up to _THREADS threads (the
    caller's included), each piece at least `grain` items; returns when every piece is done.
    The threads are also bounded by `max_threads`, the step's intra-op bound
    (ConfigProto.intra_op_parallelism_threads) and the cores free now.

    With pieces_per_thread > 1 the threads take pieces from a shared counter, so a thread that
    shares its core with another busy thread simply does fewer of them. (OpenBLAS's idle workers
    spin for about 0.1 s after each GEMM, so inside a training step the second core is rarely
    free: the split pays off only for loops with more work per byte than a copy.) Pieces must touch disjoint memory. Workers run under the
    caller's numpy error state (steps run with errors ignored, as TensorFlow's kernels are
    silent). A call from a worker runs inline, so nested use never waits on the pool it uses.
    """
    threads = min(_THREADS, n // max(grain, 1))
    if threads > 1 and not getattr(_tls, "worker", False):
        threads = min(threads, _policy.intra_op_limit(), _policy.cores_free())
        if max_threads is not None:
            threads = min(threads, max_threads)
    if threads <= 1 or getattr(_tls, "worker", False):
        if n > 0:
            fn(0, n)
        return
    pieces = min(threads * pieces_per_thread, n // max(grain, 1))
    bounds = [n * k // pieces for k in range(pieces + 1)]
    counter = itertools.count()
    err = np.geterr()

    def run():
        for k in counter:
            if k >= pieces:
                return
            fn(bounds[k], bounds[k + 1])

    def run_in_worker():
        with np.errstate(**err):
            run()

    pool = _get_pool()
    futures = [pool.submit(run_in_worker) for _ in range(threads - 1)]
    try:
        run()
    finally:
        # A worker that has not started by now finds no piece left: cancel it rather than wait
        # for a busy machine to schedule it (only the pieces in flight are waited for).
        futures = [f for f in futures if not f.cancel()]
        wait(futures)
    for f in futures:
        f.result()


def parallel_blocks(count: int, fn, work: int) -> None:
    """Runs fn(i) for every i in range(count) over the intra-op threads, one block per piece,
    taken from a shared counter (a thread whose core is busy does fewer), for a kernel of `work`
    multiply-adds: on the caller alone below rill.exec.threads.GEMM_GRAIN or with one block.

    Blocks are the kernel's own, fixed by the shapes; each is computed the same way on whichever
    thread runs it, so the result's bits never depend on the threads. Blocks must write disjoint
    memory.
    """
    threads = _policy.threads_for(work, count)
    if threads <= 1:
        for i in range(count):
            fn(i)
        return

    def run(lo, hi):
        for i in range(lo, hi):
            fn(i)

    parallel_for(count, run, pieces_per_thread=count, max_threads=threads)


def groups_of(count: int, most: int = _policy.MAX_PIECES) -> list[range]:
    """range(count) in at most `most` contiguous groups as even as may be (a function of count
    only): a kernel that sums per-block partial results keeps one partial per group, summed in
    group order, so its bits do not depend on the threads."""
    g = max(0, min(count, most))
    bounds = [count * i // g for i in range(g + 1)] if g else [0]
    return [range(bounds[i], bounds[i + 1]) for i in range(g)]
