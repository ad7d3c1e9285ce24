"""Per-thread scratch memory and intra-op parallelism for the CPU kernels.

`scratch` hands out reused per-thread buffers: a fresh large array page-faults on every call and
can cost as much as the work done in it. `parallel_for` splits a loop over a small pool (one
thread per core of the budget, the caller's included), using no more threads than the cores free
and the step's intra-op bound allow (`rill.exec.threads`).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading

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


class _Job:
    """One parallel_for call: its pieces, taken from a shared counter by the caller and by the
    pool workers that reach it; `done` is set when the last piece has finished."""

    __slots__ = ("fn", "bounds", "pieces", "claim", "finish", "done", "err", "error")

    def __init__(self, fn, bounds, pieces, err):
        self.fn, self.bounds, self.pieces, self.err = fn, bounds, pieces, err
        # next() on an itertools.count is one atomic step under the GIL: a piece is claimed,
        # and counted finished, exactly once whichever thread gets there.
        self.claim = itertools.count()
        self.finish = itertools.count()
        self.done = threading.Event()
        self.error = None

    def take(self) -> None:
        bounds, fn, pieces = self.bounds, self.fn, self.pieces
        for k in self.claim:
            if k >= pieces:
                return
            try:
                fn(bounds[k], bounds[k + 1])
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                if self.error is None:
                    self.error = e
            finally:
                if next(self.finish) == pieces - 1:
                    self.done.set()


class _Pool:
    """The intra-op worker threads (daemons, started as needed up to _THREADS - 1). A call
    queues its job once per helper it wants; a worker takes a job from the queue and its pieces
    from the job's counter. Unlike a general executor there is no future per task: a hand-off
    is one queue append and one notify (about 10 µs to a sleeping worker here, against 15-30
    for concurrent.futures), and a job the caller finished before a worker reached it is simply
    taken off the queue."""

    def __init__(self):
        self.cv = threading.Condition(threading.Lock())
        self.queue: collections.deque = collections.deque()
        self.workers: list[threading.Thread] = []
        self.pid = os.getpid()

    def post(self, job: _Job, helpers: int) -> None:
        with self.cv:
            if self.pid != os.getpid():  # a forked child has none of the parent's threads
                self.workers, self.pid = [], os.getpid()
                self.queue.clear()
            while len(self.workers) < helpers:
                t = threading.Thread(target=self._work, name=f"rill-intra-op-{len(self.workers)}",
                                     daemon=True)  # fmt: skip
                self.workers.append(t)
                t.start()
            self.queue.extend(itertools.repeat(job, helpers))
            self.cv.notify(helpers)

    def withdraw(self, job: _Job) -> None:
        """Takes the job's entries no worker has reached off the queue (cancelled: the caller
        never waits for a worker that has not started, whatever the machine's load)."""
        with self.cv:
            if job in self.queue:
                self.queue = collections.deque(j for j in self.queue if j is not job)

    def _work(self) -> None:
        _tls.worker = True
        me = threading.current_thread()
        cv = self.cv
        while True:
            with cv:
                while not self.queue:
                    cv.wait()
                job = self.queue.popleft()
                me.rill_busy = True
            try:
                if np.geterr() != job.err:
                    np.seterr(**job.err)  # the caller's numpy error state, for its pieces
                job.take()
            finally:
                me.rill_busy = False


_pool = _Pool()


def _task_runnable(tid: int) -> bool:
    """Whether thread `tid` of this process is runnable now (its /proc state is R)."""
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R"
    except (OSError, ValueError):
        return False


def idle_runnable_workers() -> int:
    """The pool's workers that are runnable but run no job now (on their way to or from
    sleep): they hold no core for long, so the thread policy does not count them as other
    tasks (rill.exec.threads.cores_free). A worker running a job's pieces (another kernel's,
    on a concurrent step or inter-op thread) is counted."""
    if _pool.pid != os.getpid():
        return 0
    n = 0
    for t in list(_pool.workers):
        if not getattr(t, "rill_busy", False) and t.native_id and _task_runnable(t.native_id):
            n += 1
    return n


def parallel_for(
    n: int, fn, grain: int = 1, pieces_per_thread: int = 1, max_threads: int | None = None
) -> None:
    """Runs fn(lo, hi) over contiguous pieces of range(n) on up to _THREADS threads (the
    caller's included), each piece at least `grain` items; returns when every piece is done.
    The threads are also bounded by the step's intra-op bound
    (ConfigProto.intra_op_parallelism_threads) and by `max_threads` where given (the count
    rill.exec.threads.threads_for chose for the kernel's work and the load), else by the
    cores idle now (a loop of unknown work is taken to be fine-grained: rill.exec.threads.
    cores_for).

    With pieces_per_thread > 1 the threads take pieces from a shared counter, so a thread that
    shares its core with another busy thread simply does fewer of them; a worker that has not
    started when the caller has done the rest is withdrawn, never waited for. Pieces must touch
    disjoint memory. Workers run under the caller's numpy error state (steps run with errors
    ignored, as TensorFlow's kernels are silent). A call from a worker runs inline, so nested
    use never waits on the pool it uses.
    """
    threads = min(_THREADS, n // max(grain, 1))
    if threads > 1 and not getattr(_tls, "worker", False):
        threads = min(threads, _policy.intra_op_limit())
        if max_threads is None:  # a loop of unknown work: only onto idle cores
            threads = min(threads, _policy.cores_for(None))
        else:  # a bound from threads_for, which weighed the work against the load
            threads = min(threads, max_threads)
    if threads <= 1 or getattr(_tls, "worker", False):
        if n > 0:
            fn(0, n)
        return
    pieces = min(threads * pieces_per_thread, n // max(grain, 1))
    bounds = [n * k // pieces for k in range(pieces + 1)]
    job = _Job(fn, bounds, pieces, np.geterr())
    _pool.post(job, threads - 1)
    try:
        job.take()
    finally:
        _pool.withdraw(job)
        # Only the pieces in flight on workers are waited for.
        job.done.wait()
    if job.error is not None:
        raise job.error


def threads_now() -> int:
    """The threads parallel_for would give a fine-grained loop of unknown work now (1 on a pool
    worker): the pool's size, within the step's intra-op bound and the idle cores."""
    if _THREADS <= 1 or getattr(_tls, "worker", False):
        return 1
    return max(1, min(_THREADS, _policy.intra_op_limit(), _policy.cores_for(None)))


def hand_off(fn):
    """Starts fn() on an idle intra-op worker, for work off the caller's path (a copy the
    caller needs only later): returns a handle for finish(), or None where no second thread
    may run now (the step's intra-op bound, the core budget, no idle core, or the caller is
    itself a worker) — the caller then runs fn itself. fn must touch memory nothing else
    uses until finish() returns."""
    if _THREADS < 2 or getattr(_tls, "worker", False) or _policy.intra_op_limit() < 2:
        return None
    if _policy.cores_idle() < 2:
        return None
    job = _Job(lambda lo, hi: fn(), [0, 1], 1, np.geterr())
    _pool.post(job, 1)
    return job


def finish(job) -> None:
    """Returns once hand_off's fn has run: runs it here if no worker has taken it yet (so
    never waits for a worker that has not started), else waits for the worker; raises what
    fn raised."""
    job.take()
    _pool.withdraw(job)
    job.done.wait()
    if job.error is not None:
        raise job.error


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
