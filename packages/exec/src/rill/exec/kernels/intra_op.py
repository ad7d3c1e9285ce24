"""Per-thread scratch memory and intra-op parallelism for the CPU kernels.

`scratch` hands out reused per-thread buffers: a fresh large array page-faults on every call and
can cost as much as the work done in it. `parallel_for` splits a loop over a small pool (one
thread per core of the budget, the caller's included), using no more threads than the cores free
and the step's intra-op bound allow (`rill.exec.threads`).

Hand-offs poll while the host has idle cores. A worker that has run a job polls for the next
one for up to WORKER_POLL_S before it sleeps on the pool's condition variable (where jobs have
lately come closer together than that), and a caller whose own pieces were short polls for the
workers' last one for up to CALLER_POLL_S before it sleeps on the job's event (`_spin`, with
the GIL released). Through the condition variable alone a two-thread parallel_for cost
110-120 µs more than its pieces on the 2-vCPU VMs rill is measured on (an idle vCPU there
halts at once, and each wake-up is a trip through the hypervisor); a prototype of the polling
protocol, 12-16 µs. Where another task is runnable (cores_idle() < 2)
nothing polls: the polling thread would take CPU that task wants. `RILL_SPIN=0` in the
environment, or the compiled loops turned off (`RILL_JIT=0`), leaves only the sleeping waits.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time

import numpy as np

from rill.exec import threads as _policy
from rill.exec.kernels import jit as _jit


class _Local(threading.local):
    """This thread's scratch buffers and whether it is a pool worker. The class attributes are
    the defaults a thread sees until it sets its own: getattr with a default on a bare
    threading.local raises and swallows an AttributeError where the thread never set the name
    (0.6 µs; team() asked twice per split kernel on the calling thread)."""

    worker = False
    bufs = None


_tls = _Local()

# How long a worker polls for its next job, and a caller for its job's last piece, before
# sleeping (only while the host has an idle core). A batch-1 inference's kernels come tens to
# hundreds of µs apart; the most a worker burns after the last job of a step is this.
WORKER_POLL_S = 1e-3
CALLER_POLL_S = 1e-3
_POLL_GAP_NS = int(WORKER_POLL_S * 1e9)
# Polls a worker waits after it sees a job posted, so that the poster, which holds the GIL
# until its own piece reaches compiled code or BLAS, has let go of it. A worker that asks
# earlier sleeps on the GIL and is woken through its halted vCPU, tens of µs late: with 3 µs,
# the worker's half of an exact-halves [197, 192] x [192, 768] product started 32-96 µs after
# the call (the caller's at 19-36), with 8 µs 34-48. Default threads, quiet, same process,
# alternating, 3 -> 10 µs: ViT-small b1 14.77 -> 14.25 ms, the GPT-2-like decoder b1 5.88 ->
# 5.58, ResNet-18 ½ b1 9.45 -> 9.28, SqueezeNet b1 9.21 -> 9.12; 6 and 10 µs were level, 20 µs
# 1-2% slower than 10.
SETTLE_S = 8e-6
# The team's cells (rill.exec.kernels._spin.TEAM_CELLS); how long after a team caller last
# asked a worker still starts polling (as for jobs: while they come closer than a poll lasts);
# the least time between two wake-ups a team caller posts (each costs at most a poll of a
# worker's CPU where no team job follows: a suite of sparse kernels ran 3x as long on two
# vCPUs when workers polled for 50 ms after each team call).
_TEAM_CELLS = 72
_TEAM_WANT_NS = _POLL_GAP_NS
_NUDGE_NS = 20_000_000
# Cells of the pool's poll array: [0] counts posts; a job's id lands in cell 1 + id % _RING
# when a worker finishes its last piece; the last cell is written and never read.
_RING = 63


def scratch(slot: str, n: int, dtype) -> np.ndarray:
    """A reused 1-D buffer of `n` elements, private to this thread and `slot`.

    Kernels never return scratch memory; a thread runs one kernel at a time, so kernels share it.
    """
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    bufs = _tls.bufs
    if bufs is None:
        bufs = _tls.bufs = {}
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype)


# The most threads parallel_for splits work over: the process's core budget (module-level so that
# tests and benchmarks can change it).
_THREADS = _policy.core_budget()


# [the compiled waits (the rill.exec.kernels._spin module) or False once tried, polls a second]
_waits = [None, 0.0]


def _poller():
    """The compiled waits, or None where polling is off (RILL_SPIN=0, the compiled loops off
    or unavailable)."""
    mod = _waits[0]
    if mod is None:
        mod = False
        if _jit.env_on("RILL_SPIN"):
            if _jit.loops() is not None:
                try:
                    from rill.exec.kernels import _spin as mod

                    cells = np.zeros(2, np.int64)
                    mod.await_change(cells, 0, 0, 10, 0)  # compiled (or loaded) first
                    t0 = time.perf_counter()
                    mod.await_change(cells, 0, 0, 200_000, 0)
                    _waits[1] = 200_000 / max(time.perf_counter() - t0, 1e-6)
                except Exception:  # noqa: BLE001 - no polling: the sleeping waits remain
                    mod = False
        _waits[0] = mod
    return mod or None


def _polls(seconds: float) -> int:
    return int(seconds * _waits[1])


def _poll_now():
    """The compiled waits where polling pays now (an idle core beside this thread), else None."""
    mod = _poller() if _jit.enabled() else None
    return mod if mod is not None and _policy.cores_idle() >= 2 else None


class _Done:
    """A job's completion flag, set once (by the thread that finishes its last piece): a lock
    held from creation and released by set(). Making it costs a tenth of a threading.Event,
    which a split kernel paid at every call (1.6 µs)."""

    __slots__ = ("_lock",)

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        self._lock.release()

    def is_set(self) -> bool:
        return not self._lock.locked()

    def wait(self, timeout: float | None = None) -> bool:
        if self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._lock.release()
            return True
        return False


class _Job:
    """One parallel_for call: its pieces, taken from a shared counter by the caller and by the
    pool workers that reach it; `done` is set when the last piece has finished (and a worker
    that finished it also stores the job's id in the pool's poll array, for a polling caller)."""

    __slots__ = ("fn", "bounds", "pieces", "claim", "finish", "done", "err", "error", "id")

    def __init__(self, fn, bounds, pieces, err):
        self.fn, self.bounds, self.pieces, self.err = fn, bounds, pieces, err
        # next() on an itertools.count is one atomic step under the GIL: a piece is claimed,
        # and counted finished, exactly once whichever thread gets there.
        self.claim = itertools.count()
        self.finish = itertools.count()
        self.done = _Done()
        self.error = None
        self.id = 0

    def take(self) -> bool:
        """Runs pieces until none is left; True where this thread finished the last one."""
        bounds, fn, pieces = self.bounds, self.fn, self.pieces
        last = False
        for k in self.claim:
            if k >= pieces:
                return last
            try:
                fn(bounds[k], bounds[k + 1])
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                if self.error is None:
                    self.error = e
            finally:
                if next(self.finish) == pieces - 1:
                    self.done.set()
                    last = True
        return last

    def wait(self, own_ns: int = 0) -> None:
        """Returns once every piece has finished: polls for a worker's last piece while that
        pays, then sleeps on the event. `own_ns`: how long the caller's own pieces took; where
        that is more than a poll lasts, the workers' last piece is likely as long, and polling
        would only take the GIL back and forth beside it (a CNN train step's products,
        milliseconds a piece, ran 3% slower with their callers polling), so it sleeps at once."""
        if self.done.is_set():
            return
        mod = _poll_now() if own_ns < _POLL_GAP_NS else None
        if mod is not None:
            cells, slot = _pool.cells, 1 + self.id % _RING
            old = int(cells[slot])
            left = _polls(CALLER_POLL_S)
            while old != self.id and left > 0 and not self.done.is_set():
                step = min(left, _polls(1e-4))
                old = int(mod.await_change(cells, slot, old, step, 0))
                left -= step
        self.done.wait()


class _Pool:
    """The intra-op worker threads (daemons, started as needed up to _THREADS - 1). A call
    queues its job once per helper it wants; a worker takes a job from the queue and its pieces
    from the job's counter. Unlike a general executor there is no future per task: a hand-off
    is one queue append, a count in the poll array for the workers that poll and one notify
    for those that sleep; a job the caller finished before a worker reached it is simply taken
    off the queue."""

    def __init__(self):
        self.cv = threading.Condition(threading.Lock())
        self.queue: collections.deque = collections.deque()
        self.workers: list[threading.Thread] = []
        self.sleeping = 0
        self.posts = 0
        # When the last job was posted, and the time between the last two posts (ns).
        self.posted_ns = 0
        self.gap_ns = 0
        self.ids = itertools.count(1)
        self.cells = np.zeros(2 + _RING, np.int64)
        # The team's cells (_spin.SEQ...: compiled kernels split with no Python in the
        # hand-off, see team()), and when a team caller last asked for polling workers.
        self.team = np.zeros(_TEAM_CELLS, np.int64)
        self.team_ns = self.nudged_ns = 0
        self.pid = os.getpid()
        # Reset at the fork itself, not by comparing getpid() at each post: the lock may have
        # been held by another of the parent's threads at that moment.
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a forked child, which has none of the parent's threads: no workers, nothing
        queued, and a new lock (another thread of the parent may have held it at the fork)."""
        self.cv = threading.Condition(threading.Lock())
        self.queue = collections.deque()
        self.workers, self.sleeping, self.pid = [], 0, os.getpid()
        self.team = np.zeros(_TEAM_CELLS, np.int64)  # no worker polls, no caller holds it

    def post(self, job: _Job, helpers: int) -> None:
        job.id = next(self.ids)
        with self.cv:
            if not self.workers:
                _poller()  # compiled (or loaded) with the first worker, not at a later step
            while len(self.workers) < helpers:
                t = threading.Thread(target=self._work, name=f"rill-intra-op-{len(self.workers)}",
                                     daemon=True)  # fmt: skip
                self.workers.append(t)
                t.start()
            self.queue.extend(itertools.repeat(job, helpers))
            self.posts += 1
            now = time.perf_counter_ns()
            self.gap_ns, self.posted_ns = now - self.posted_ns, now
            self.cells[0] = self.posts
            if self.sleeping:
                self.cv.notify(helpers)

    def withdraw(self, job: _Job) -> None:
        """Takes the job's entries no worker has reached off the queue (cancelled: the caller
        never waits for a worker that has not started, whatever the machine's load)."""
        with self.cv:
            if job in self.queue:
                self.queue = collections.deque(j for j in self.queue if j is not job)

    def _next(self, finished: int) -> _Job:
        """The next job from the queue. `finished` (0: none) is the id of the job whose last
        piece this worker ran: stored in the poll array on the way. The pool's lock is only
        held to look at the queue (never across a poll, a sleep or a /proc read)."""
        cv, cells = self.cv, self.cells
        while True:
            with cv:
                if self.queue:
                    job = self.queue.popleft()
                    break
                seen = self.posts
            # Poll only where jobs have come closer together than the poll lasts: a worker that
            # polls in vain takes the GIL back when its polls run out, and the calling thread,
            # busy in Python then, loses it to the worker for a while (a CNN train step's
            # kernels, milliseconds apart, ran 3% slower on average with polling workers, a
            # step in 30 up to 1.5 times as long).
            # (Or where a team caller asked for polling workers lately: team jobs come
            # closer together than a poll lasts, and a served one starts the poll again.)
            recent = time.perf_counter_ns() - self.team_ns < _TEAM_WANT_NS
            mod = _poll_now() if self.gap_ns < _POLL_GAP_NS or recent else None
            if mod is not None:
                # Store `finished` and poll for a post, serving team jobs meanwhile, with the
                # GIL released throughout.
                slot = 1 + finished % _RING if finished else 1 + _RING  # the last cell: unread
                got = mod.store_serve(cells, slot, finished, 0, seen, _polls(WORKER_POLL_S),
                                      _polls(SETTLE_S), self.team)  # fmt: skip
                finished = 0
                if got != seen:
                    continue
            elif finished:
                cells[1 + finished % _RING], finished = finished, 0
            with cv:
                self.sleeping += 1
                try:
                    while not self.queue and self.posts == seen:
                        cv.wait()
                finally:
                    self.sleeping -= 1
        if finished:
            cells[1 + finished % _RING] = finished
        return job

    def _work(self) -> None:
        _tls.worker = True
        _policy.blas_one_here()  # a BLAS counting threads per thread: one here too
        me = threading.current_thread()
        finished = 0
        while True:
            job = self._next(finished)
            me.rill_busy = True
            try:
                if np.geterr() != job.err:
                    np.seterr(**job.err)  # the caller's numpy error state, for its pieces
                finished = job.id if job.take() else 0
            finally:
                me.rill_busy = False
                # Not held while waiting for the next job: the job's pieces may refer to arrays
                # (a variable's state, scratch of a step), which would stay alive until then,
                # and an update that writes in place only where nothing else refers to its
                # state (rill.exec.resources.update_vars) would copy instead.
                job = None


_pool = _Pool()


def team():
    """The team's cells where compiled kernels may split through it now (the caller not a
    pool worker, polling on, a second thread allowed by the step's bound, the core budget and
    an idle core, and a worker polling), else None. Where no worker polls, it wakes one (at
    most every _NUDGE_NS) and returns None: the kernel asking takes its other path, and the
    next ones find the worker polling."""
    if _THREADS < 2 or _tls.worker or _policy.intra_op_limit() < 2:
        return None
    mod = _poll_now()
    if mod is None:
        return None
    pool = _pool
    now = time.perf_counter_ns()
    pool.team_ns = now
    if pool.team[mod.POLLING] > 0:
        return pool.team
    if now - pool.nudged_ns > _NUDGE_NS:
        pool.nudged_ns = now
        pool.post(_Job(lambda lo, hi: None, [0, 1], 1, np.geterr()), 1)
    return None


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
    if threads > 1 and not _tls.worker:
        threads = min(threads, _policy.intra_op_limit())
        if max_threads is None:  # a loop of unknown work: only onto idle cores
            threads = min(threads, _policy.cores_for(None))
        else:  # a bound from threads_for, which weighed the work against the load
            threads = min(threads, max_threads)
    if threads <= 1 or _tls.worker:
        if n > 0:
            fn(0, n)
        return
    pieces = min(threads * pieces_per_thread, n // max(grain, 1))
    bounds = [n * k // pieces for k in range(pieces + 1)]
    job = _Job(fn, bounds, pieces, np.geterr())
    _pool.post(job, threads - 1)
    t0 = time.perf_counter_ns()
    try:
        job.take()
    finally:
        _pool.withdraw(job)
        # Only the pieces in flight on workers are waited for.
        job.wait(time.perf_counter_ns() - t0)
    if job.error is not None:
        raise job.error


def pool_threads() -> int:
    """The threads parallel_for can run a split kernel on from this thread: the pool's size, 1
    on a pool worker (nested calls run inline). Callers weigh the load themselves
    (rill.exec.threads.threads_for)."""
    return 1 if _THREADS <= 1 or _tls.worker else _THREADS


def threads_now() -> int:
    """The threads parallel_for would give a fine-grained loop of unknown work now (1 on a pool
    worker): the pool's size, within the step's intra-op bound and the idle cores."""
    if _THREADS <= 1 or _tls.worker:
        return 1
    return max(1, min(_THREADS, _policy.intra_op_limit(), _policy.cores_for(None)))


def hand_off(fn):
    """Starts fn() on an idle intra-op worker, for work off the caller's path (a copy the
    caller needs only later): returns a handle for finish(), or None where no second thread
    may run now (the step's intra-op bound, the core budget, no idle core, or the caller is
    itself a worker) — the caller then runs fn itself. fn must touch memory nothing else
    uses until finish() returns."""
    if _THREADS < 2 or _tls.worker or _policy.intra_op_limit() < 2:
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
    job.wait()
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
