"""The CPU kernels' per-thread scratch buffers and intra-op thread split."""

from __future__ import annotations

import os
import threading
import time
import warnings

import numpy as np
import pytest

from rill.exec import threads as thread_policy
from rill.exec.kernels import intra_op, jit


@pytest.fixture(autouse=True)
def _two_cores_free(monkeypatch):
    # The split is what these tests exercise: do not let a busy test machine turn it off.
    monkeypatch.setattr(thread_policy, "cores_free", lambda: 2)
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 2)


def test_scratch_is_reused_per_thread_and_slot():
    a = intra_op.scratch("test-a", 10, np.float32)
    assert a.shape == (10,) and a.dtype == np.float32
    a[:] = 7
    b = intra_op.scratch("test-a", 5, np.float64)  # the same memory, viewed again
    assert np.shares_memory(a, b)
    assert not np.shares_memory(a, intra_op.scratch("test-b", 10, np.float32))
    bigger = intra_op.scratch("test-a", 1000, np.float32)
    assert bigger.shape == (1000,)
    other = []
    t = threading.Thread(target=lambda: other.append(intra_op.scratch("test-a", 10, np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(other[0], bigger)


@pytest.mark.parametrize("pieces_per_thread", [1, 4])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 100])
def test_parallel_for_covers_every_item_once(n, pieces_per_thread, monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    hits = np.zeros(n, np.int64)
    threads = set()

    def fn(lo, hi):
        threads.add(threading.current_thread().name)
        hits[lo:hi] += 1

    intra_op.parallel_for(n, fn, pieces_per_thread=pieces_per_thread)
    assert (hits == 1).all()
    if n >= 2:
        assert len(threads) >= 1


def test_parallel_for_respects_grain_and_runs_small_loops_inline(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    calls = []
    intra_op.parallel_for(10, lambda lo, hi: calls.append((lo, hi)), grain=6)
    assert calls == [(0, 10)]


def test_parallel_for_passes_errors_and_numpy_error_state(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)

    def boom(lo, hi):
        if lo > 0:
            raise ValueError("piece failed")

    with pytest.raises(ValueError, match="piece failed"):
        intra_op.parallel_for(4, boom)

    def divide(lo, hi):
        np.float32(1) / np.zeros(hi - lo, np.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning from any thread would fail the test
        with np.errstate(divide="ignore"):
            intra_op.parallel_for(4, divide)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        intra_op.parallel_for(4, divide)


def test_nested_parallel_for_runs_inline_in_workers(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    seen = []

    def outer(lo, hi):
        in_worker = threading.current_thread() is not threading.main_thread()
        inner = []
        intra_op.parallel_for(2, lambda a, b: inner.append((a, b)))
        seen.append((in_worker, sorted(inner)))

    for _ in range(20):
        seen.clear()
        intra_op.parallel_for(2, outer)
        assert len(seen) == 2
        for in_worker, inner in seen:
            assert inner == [(0, 2)] if in_worker else inner in ([(0, 2)], [(0, 1), (1, 2)])


def test_groups_of_are_contiguous_even_and_fixed_by_the_count():
    assert intra_op.groups_of(0) == []
    for count in (1, 3, 4, 9, 100):
        groups = intra_op.groups_of(count, most=4)
        assert [i for g in groups for i in g] == list(range(count))
        assert len(groups) == min(count, 4)
        assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_parallel_blocks_runs_every_block_once(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    for work, count in [(thread_policy.SPLIT_GRAIN - 1, 5), (thread_policy.SPLIT_GRAIN, 5),
                        (thread_policy.SPLIT_GRAIN, 1), (thread_policy.SPLIT_GRAIN, 0)]:  # fmt: skip
        hits = np.zeros(count, np.int64)
        callers = set()

        def one(i, hits=hits, callers=callers):
            callers.add(threading.get_ident())
            hits[i] += 1

        intra_op.parallel_blocks(count, one, work)
        assert (hits == 1).all()
        if work < thread_policy.SPLIT_GRAIN or count <= 1:
            assert callers <= {threading.get_ident()}  # too small to split: on the caller


def test_a_jobs_completion_flag_is_set_once_from_any_thread():
    done = intra_op._Done()
    assert not done.is_set() and not done.wait(0.01)
    t = threading.Thread(target=done.set)
    t.start()
    t.join(60)
    assert done.wait(60) and done.is_set() and done.wait()  # stays set for every waiter


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_starts_its_own_workers(monkeypatch):
    """A child forked while the pool runs has none of its threads: its pool starts over (no
    workers, nothing queued, a new lock) and its split loops cover every item once."""
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    hits = np.zeros(8, np.int64)

    def count(lo, hi):
        hits[lo:hi] += 1

    intra_op.parallel_for(8, count, pieces_per_thread=4, max_threads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() beside threads
        pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 3
        try:
            fresh = not intra_op._pool.workers and not intra_op._pool.queue
            intra_op.parallel_for(8, count, pieces_per_thread=4, max_threads=2)
            code = 0 if fresh and (hits == 2).all() else 4
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if not done:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done and os.waitstatus_to_exitcode(status) == 0
    assert (hits == 1).all()  # the parent's own array is untouched by the child


def test_an_idle_worker_holds_nothing_of_its_last_job(monkeypatch):
    """Once a worker's pieces are done, nothing they referred to is kept alive by it while it
    waits for the next job. (A worker that held its last job kept a variable's state arrays
    referenced, so that the next dense update, which writes in place only where nothing else
    refers to the state, copied instead.)"""
    import sys

    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    state = np.zeros(1000, np.float32)
    baseline = sys.getrefcount(state)
    both = threading.Barrier(2, timeout=60)
    ran = set()

    def piece(lo, hi, state=state):
        both.wait()  # the caller's piece waits for a worker to start the other one
        ran.add(threading.current_thread().name)
        state[lo * 500 : hi * 500] += 1

    intra_op.parallel_for(2, piece, max_threads=2)
    del piece
    assert len(ran) == 2 and (state == 1).all()
    deadline = time.monotonic() + 30
    while sys.getrefcount(state) > baseline and time.monotonic() < deadline:
        time.sleep(0.001)
    assert sys.getrefcount(state) == baseline


def test_a_worker_that_has_not_started_is_not_waited_for(monkeypatch):
    """With every pool worker held by other work, the caller does all the pieces itself and
    returns: its queued hand-off is withdrawn (waiting for it would hang here)."""
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    pool = intra_op._pool
    go, started = threading.Event(), threading.Semaphore(0)

    def hold(lo, hi):
        started.release()
        assert go.wait(60)

    workers = max(1, len(pool.workers))
    holder = intra_op._Job(hold, list(range(workers + 1)), workers, np.geterr())
    pool.post(holder, workers)  # one piece per worker, each held until `go`
    try:
        for _ in range(workers):
            assert started.acquire(timeout=60)
        done, pieces = threading.Event(), []

        def call():
            intra_op.parallel_for(4, lambda lo, hi: pieces.append((lo, hi)), pieces_per_thread=2)
            done.set()

        t = threading.Thread(target=call)
        t.start()
        assert done.wait(60)
        t.join(60)
        assert sorted(pieces) == [(0, 1), (1, 2), (2, 3), (3, 4)]
        assert not pool.queue  # the hand-off no worker reached was taken back
    finally:
        go.set()
        assert holder.done.wait(60)


def test_concurrent_callers_share_the_pool_and_each_covers_its_items_once(monkeypatch):
    """Several threads (inter-op threads, sessions side by side) call parallel_for at once:
    each call's pieces run exactly once, whichever threads take them."""
    monkeypatch.setattr(intra_op, "_THREADS", 3)
    monkeypatch.setattr(thread_policy, "_BUDGET", 3)
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 3)
    hits = np.zeros((4, 60), np.int64)
    errors = []

    def caller(row):
        try:
            for _ in range(50):
                intra_op.parallel_for(60, lambda lo, hi: hits[row, lo:hi].__iadd__(1),
                                      pieces_per_thread=4)  # fmt: skip
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=caller, args=(r,)) for r in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in ts)
    assert (hits == 50).all()


def test_hand_off_runs_on_a_worker_or_in_finish_exactly_once(monkeypatch):
    """hand_off gives fn to an idle worker; finish returns once it has run (running it itself
    when no worker has taken it: with every worker held, it does not wait for one)."""
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    ran = []
    for _ in range(20):
        job = intra_op.hand_off(lambda: ran.append(threading.current_thread().name))
        assert job is not None
        intra_op.finish(job)
    assert len(ran) == 20
    # Every worker held: finish runs the function on the calling thread.
    pool = intra_op._pool
    go, started = threading.Event(), threading.Semaphore(0)

    def hold(lo, hi):
        started.release()
        assert go.wait(60)

    workers = max(1, len(pool.workers))
    holder = intra_op._Job(hold, list(range(workers + 1)), workers, np.geterr())
    pool.post(holder, workers)
    try:
        for _ in range(workers):
            assert started.acquire(timeout=60)
        mine = []
        job = intra_op.hand_off(lambda: mine.append(threading.current_thread()))
        intra_op.finish(job)
        assert mine == [threading.current_thread()]
        assert not pool.queue
    finally:
        go.set()
        assert holder.done.wait(60)
    # Errors come back from finish.
    job = intra_op.hand_off(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        intra_op.finish(job)


def test_hand_off_declines_where_no_second_thread_may_run(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    with thread_policy.limits(1):
        assert intra_op.hand_off(lambda: None) is None
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 1)
    assert intra_op.hand_off(lambda: None) is None
    monkeypatch.setattr(intra_op, "_THREADS", 1)
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 2)
    assert intra_op.hand_off(lambda: None) is None


@pytest.fixture(params=["polling", "sleeping"])
def hand_offs(request, monkeypatch):
    """The pool's two ways of waiting: polling (compiled, the GIL released) and sleeping."""
    if request.param == "sleeping":
        monkeypatch.setattr(intra_op, "_waits", [False, 0.0])
    elif intra_op._poller() is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    return request.param


def test_pieces_run_once_whichever_way_the_pool_waits(hand_offs, monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    for n in (2, 9, 64):
        hits = np.zeros(n, np.int64)
        for _ in range(30):
            intra_op.parallel_for(
                n, lambda lo, hi, h=hits: h[lo:hi].__iadd__(1), pieces_per_thread=4
            )
        assert (hits == 30).all()

    # A worker's error still reaches the caller, and the pool serves the next call.
    def fail(lo, hi):
        if lo > 0:
            raise ValueError(f"piece {lo}")

    with pytest.raises(ValueError, match="piece"):
        intra_op.parallel_for(4, fail, pieces_per_thread=2)
    seen = []
    intra_op.parallel_for(4, lambda lo, hi: seen.append(lo), pieces_per_thread=2)
    assert sorted(seen) == [0, 1, 2, 3]


def test_compiled_waits_see_a_store_and_give_up_after_their_polls():
    mod = intra_op._poller()
    if mod is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    cells = np.zeros(4, np.int64)
    # Nothing changes: the old value comes back after the polls.
    assert mod.await_change(cells, 0, 0, 1000, 0) == 0
    # Another thread stores 5 in cell 1 (released with the GIL), then polls cell 0 for a change.
    got = []
    forever = intra_op._polls(60.0)
    team = np.zeros(mod.TEAM_CELLS, np.int64)  # (no team job is posted: a plain wait)
    t = threading.Thread(
        target=lambda: got.append(mod.store_serve(cells, 1, 5, 0, 0, forever, 3, team))
    )
    t.start()
    assert mod.await_change(cells, 1, 0, forever, 0) == 5
    cells[0] = 7
    t.join(60)
    assert not t.is_alive() and got == [7]


def test_the_settle_after_a_change_lasts_its_polls():
    """A poll that sees a change waits `settle` more polls, each as long as a waiting poll (a
    sched_yield and a load), so that the storing thread reaches its kernel and releases the
    GIL first. (Settle polls without the yield lasted about a nanosecond each, a hundredth of
    a waiting poll, and the woken thread asked for the GIL too early.) Compared with the same
    number of waiting polls, interleaved, fastest of five each (load only adds time)."""
    mod = intra_op._poller()
    if mod is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    cells = np.zeros(2, np.int64)
    cells[0] = 1
    polls = 20_000
    settle, wait = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        assert mod.await_change(cells, 0, 0, 10, polls) == 1  # changed: only the settle polls
        settle.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert mod.await_change(cells, 0, 1, polls, 0) == 1  # unchanged: the waiting polls
        wait.append(time.perf_counter() - t0)
    assert min(settle) >= 0.1 * min(wait)


def test_idle_workers_stop_polling_and_sleep(monkeypatch):
    """A worker polls for a bounded time after its last job, then sleeps on the pool's condition
    variable: an idle process burns no CPU."""
    if intra_op._poller() is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(thread_policy, "_BUDGET", 2)
    intra_op.parallel_for(8, lambda lo, hi: None, pieces_per_thread=4)
    pool = intra_op._pool
    deadline = threading.Event()
    for _ in range(600):  # up to 60 s; WORKER_POLL_S is 1 ms
        with pool.cv:
            if pool.sleeping == len(pool.workers):
                break
        deadline.wait(0.1)
    with pool.cv:
        assert pool.sleeping == len(pool.workers)


def test_no_polling_beside_other_work_or_when_turned_off(monkeypatch):
    if intra_op._poller() is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    assert intra_op._poll_now() is not None  # two idle cores (the fixture)
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 1)
    assert intra_op._poll_now() is None  # another task runnable: no CPU taken from it
    monkeypatch.setattr(thread_policy, "cores_idle", lambda: 2)
    old = jit.set_enabled(False)
    try:
        assert intra_op._poll_now() is None  # compiled loops off (RILL_JIT=0)
    finally:
        jit.set_enabled(old)
    monkeypatch.setattr(intra_op, "_waits", [None, 0.0])
    monkeypatch.setenv("RILL_SPIN", "0")
    assert intra_op._poller() is None and intra_op._poll_now() is None


def test_a_caller_whose_own_pieces_were_long_does_not_poll(monkeypatch):
    """A caller whose own pieces took longer than a poll lasts sleeps on the job's event at
    once (polling beside milliseconds-long pieces only passed the GIL back and forth)."""
    if intra_op._poller() is None:
        pytest.skip("no compiled waits here (numba missing, RILL_JIT=0 or RILL_SPIN=0)")
    asked = []
    real = intra_op._poll_now

    def poll_now():
        asked.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(intra_op, "_poll_now", poll_now)
    job = intra_op._Job(lambda lo, hi: None, [0, 1], 1, np.geterr())
    job.id = 10**9
    done = threading.Timer(0.05, job.done.set)
    done.start()
    job.wait(own_ns=intra_op._POLL_GAP_NS)  # long own pieces: straight to the event
    assert job.done.is_set() and not asked
    done.join(60)
    job = intra_op._Job(lambda lo, hi: None, [0, 1], 1, np.geterr())
    job.id = 10**9 + 1
    done = threading.Timer(0.05, job.done.set)
    done.start()
    job.wait(own_ns=0)  # short ones: it polls first
    assert job.done.is_set() and asked
    done.join(60)
