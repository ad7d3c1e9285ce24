"""The thread policy: threads per kernel from the problem size, the cores free and the
ConfigProto bounds; BLAS owned by rill while a Session is open; results independent of it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import ConfigProto, Session, threads
from rill.exec.kernels import intra_op


def test_small_products_run_in_one_call_and_large_ones_split():
    assert threads.gemm_pieces(64, 784, 128) == (0, 1)  # the Figure 1 MLP's first layer
    assert threads.gemm_pieces(1, 64, 4096) == (0, 1)  # too little work
    assert threads.gemm_pieces(2048, 512, 512) == (0, threads.MAX_PIECES)
    assert threads.gemm_pieces(256, 1024, 128) == (0, 256 // threads.MIN_ROWS)
    # b larger than a: column blocks, each packing all of a (the smaller operand), as in the
    # LSTM's folded weight gradient [1024, 3200] x [3200, 2048]; but rows where the columns
    # would give fewer pieces.
    assert threads.gemm_pieces(1024, 3200, 2048) == (1, threads.MAX_PIECES)
    assert threads.gemm_pieces(256, 512, 1024) == (1, threads.MAX_PIECES)
    assert threads.gemm_pieces(256, 512, 512) == (0, 256 // threads.MIN_ROWS)
    assert threads.gemm_pieces(512, 256, 768) == (0, threads.MAX_PIECES)
    # The LSTM's gate product (batch 64): too few rows, so column blocks.
    assert threads.gemm_pieces(64, 1024, 2048) == (1, threads.MAX_PIECES)
    # Its gradient loop's [64, 2048] x [2048, 512]: column pieces of at least MIN_COLS.
    assert threads.gemm_pieces(64, 2048, 512) == (1, 512 // threads.MIN_COLS)
    # Too few columns for pieces of MIN_COLS: two halves of at least NARROW_COLS.
    assert threads.gemm_pieces(64, 1024, 256) == (1, 2)
    assert threads.gemm_pieces(64, 4096, 200) == (0, 1)  # halves narrower than NARROW_COLS
    for shape in [
        (100, 100, 100),
        (130, 1000, 1000),
        (5000, 64, 64),
        (64, 64, 5000),
        (64, 3000, 300),
        (100, 2000, 256),
    ]:
        axis, p = threads.gemm_pieces(*shape)
        assert 1 <= p <= threads.MAX_PIECES
        least = (threads.MIN_ROWS, threads.MIN_COLS if p > 2 else threads.NARROW_COLS)[axis]
        assert p == 1 or shape[2 * axis] // p >= least


def test_threads_for_respects_size_bound_and_free_cores():
    big = 64 * threads.GEMM_GRAIN
    assert threads.SPLIT_GRAIN <= threads.GEMM_GRAIN  # a split product always gets its threads
    assert threads.threads_for(threads.SPLIT_GRAIN, 8, limit=8, free=8) == 8
    assert threads.threads_for(threads.SPLIT_GRAIN - 1, 8, limit=8, free=8) == 1
    assert threads.threads_for(big, 1, limit=8, free=8) == 1
    assert threads.threads_for(big, 8, limit=8, free=8) == 8
    assert threads.threads_for(big, 8, limit=2, free=8) == 2  # intra_op_parallelism_threads
    assert threads.threads_for(big, 8, limit=8, free=1) == 1  # a busy machine
    assert threads.threads_for(big, 3, limit=8, free=8) == 3


def test_core_budget_from_environment(monkeypatch):
    monkeypatch.setenv("RILL_NUM_THREADS", "3")
    assert threads.core_budget() == 3
    monkeypatch.setenv("RILL_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="RILL_NUM_THREADS"):
        threads.core_budget()
    monkeypatch.setenv("RILL_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="many"):
        threads.core_budget()
    monkeypatch.delenv("RILL_NUM_THREADS")
    assert threads.core_budget() >= 1


def _tree(tmp_path, files: dict, cgroup: str):
    for rel, text in files.items():
        f = tmp_path / "fs" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    proc = tmp_path / "cgroup"
    proc.write_text(cgroup)
    return str(tmp_path / "fs"), str(proc)


def test_cgroup_cpu_quota_v2_takes_the_smallest_on_the_way_to_the_root(tmp_path):
    root, proc = _tree(tmp_path, {"cpu.max": "max 100000\n",
                                  "ci/cpu.max": "150000 100000\n",
                                  "ci/job/cpu.max": "max 100000\n"},
                       "0::/ci/job\n")  # fmt: skip
    assert threads.cgroup_cpu_quota(root, proc) == 1.5
    root, proc = _tree(tmp_path, {"cpu.max": "max 100000\n"}, "0::/\n")
    assert threads.cgroup_cpu_quota(root, proc) is None


def test_cgroup_cpu_quota_v1(tmp_path):
    root, proc = _tree(tmp_path, {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "100000\n",
                                  "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
                                  "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                                  "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
                       "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")  # fmt: skip
    assert threads.cgroup_cpu_quota(root, proc) == 1.0
    root, proc = _tree(tmp_path, {}, "4:cpu,cpuacct:/\n")
    assert threads.cgroup_cpu_quota(root, proc) is None
    assert threads.cgroup_cpu_quota(root, str(tmp_path / "missing")) is None


def test_core_budget_keeps_within_the_cpu_quota(monkeypatch):
    monkeypatch.delenv("RILL_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: 1.5)
    assert threads.core_budget() == 2
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: 0.5)
    assert threads.core_budget() == 1
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: None)
    assert threads.core_budget() == 4


@pytest.fixture
def host(monkeypatch):
    """A host of 5 CPUs and a budget of 4 whose other runnable tasks the test sets (host(n));
    the scheduler shares the CPU per thread unless the test says otherwise (_GROUPED)."""
    monkeypatch.setattr(threads, "_GROUPED", False)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    monkeypatch.setattr(threads, "_HOST_CPUS", 5)
    monkeypatch.setattr(threads, "_free", [-1.0, None])
    return lambda others: monkeypatch.setattr(threads, "_runnable_others", lambda: others)


# A thread is worth starting while each gets half a core or more.
@pytest.mark.parametrize(
    "others, want", [(0, 4), (1, 4), (5, 4), (6, 4), (7, 3), (8, 2), (9, 1), (40, 1), (None, 4)]
)
def test_cores_free_subtracts_other_runnable_tasks(host, others, want):
    host(others)
    assert threads.cores_free() == want


# The same host where the scheduler shares the CPU per session first (autogroup): another
# session's busy task leaves this process no share of its core, so only idle cores count.
@pytest.mark.parametrize("others, want", [(0, 4), (1, 4), (3, 2), (5, 1), (7, 1), (None, 4)])
def test_cores_free_counts_only_idle_cores_under_session_groups(monkeypatch, host, others, want):
    monkeypatch.setattr(threads, "_GROUPED", True)
    host(others)
    assert threads.cores_free() == want


@pytest.mark.parametrize(
    "flag, cgroup, want",
    [
        ("1", "0::/\n", True),  # cgroup v2, the root group: autogroup applies
        ("1", "0::/user.slice/session-2.scope\n", False),  # a cgroup of its own
        ("0", "0::/\n", False),  # autogroup off
        ("1", "4:memory:/x\n2:cpu,cpuacct:/\n0::/\n", True),  # v1: the cpu controller's
        ("1", "4:memory:/\n2:cpu,cpuacct:/docker/abc\n0::/\n", False),
        (None, "0::/\n", False),  # no such file (not Linux, or no autogroup support)
    ],
)
def test_scheduler_groups_reads_autogroup_and_the_cpu_cgroup(tmp_path, flag, cgroup, want):
    f = tmp_path / "sched_autogroup_enabled"
    if flag is not None:
        f.write_text(flag + "\n")
    c = tmp_path / "cgroup"
    c.write_text(cgroup)
    assert threads.scheduler_groups(str(f), str(c)) is want


# The same host: an inter-op hand-off only pays on a core no other task uses.
@pytest.mark.parametrize("others, want", [(0, 4), (1, 4), (3, 2), (5, 1), (40, 1), (None, 4)])
def test_cores_idle_subtracts_other_runnable_tasks(host, others, want):
    host(others)
    assert threads.cores_idle() == want


def test_a_busy_sample_stands_5_ms_and_an_idle_one_50(monkeypatch):
    """Another task seen runnable is often a moment's (a peer's pool thread spinning after its
    run): that sample is taken again after 5 ms, while one that found none stands 50 ms."""
    clock = [100.0]
    seen = [1]
    reads = []
    monkeypatch.setattr(threads, "_free", [-1.0, None])
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(threads, "_runnable_others", lambda: reads.append(1) or seen[0])
    assert threads._others_now() == 1 and len(reads) == 1
    clock[0] += 0.004
    seen[0] = 0
    assert threads._others_now() == 1 and len(reads) == 1  # within 5 ms: the busy sample
    clock[0] += 0.002
    assert threads._others_now() == 0 and len(reads) == 2  # past 5 ms: sampled again
    seen[0] = 1
    clock[0] += 0.04
    assert threads._others_now() == 0 and len(reads) == 2  # an idle sample stands 50 ms
    clock[0] += 0.011
    assert threads._others_now() == 1 and len(reads) == 3


def test_runnable_others_reads_the_host():
    n = threads._runnable_others()
    assert n is None or n >= 0


def test_workers_on_their_way_to_sleep_are_not_other_tasks(monkeypatch):
    """A worker that is runnable but runs no job (it has just finished its pieces) is not
    counted as another task; one running a job's pieces is."""
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    assert intra_op._task_runnable(threading.get_native_id())  # this thread: running
    started = threading.Event()
    # One job handed to one helper: the pool has a worker from then on.
    intra_op._pool.post(intra_op._Job(lambda lo, hi: started.set(), [0, 1], 1, np.geterr()), 1)
    assert started.wait(60)
    workers = list(intra_op._pool.workers)
    assert workers
    deadline = time.monotonic() + 60
    while any(getattr(t, "rill_busy", False) for t in workers) and time.monotonic() < deadline:
        time.sleep(0.001)  # polling with a generous deadline for the worker to finish
    monkeypatch.setattr(intra_op, "_task_runnable", lambda tid: True)  # all "runnable"
    assert intra_op.idle_runnable_workers() == len(workers)
    monkeypatch.setattr(threads, "_host_running", lambda: 3 + len(workers))
    assert threads._runnable_others() == 2  # less the caller and the idle workers
    monkeypatch.setattr(workers[0], "rill_busy", True, raising=False)  # running a job
    assert intra_op.idle_runnable_workers() == len(workers) - 1
    assert threads._runnable_others() == 3
    monkeypatch.setattr(intra_op, "_task_runnable", lambda tid: False)  # all asleep
    monkeypatch.setattr(workers[0], "rill_busy", False, raising=False)
    assert intra_op.idle_runnable_workers() == 0
    monkeypatch.setattr(threads, "_host_running", lambda: None)
    assert threads._runnable_others() is None


def _watch_gemm(monkeypatch, meet=False):
    """Records each GEMM piece's thread, size and BLAS threads. With `meet`, the first piece
    waits (60 s at most) until a piece starts on another thread, so that a product given two
    threads shows it ran on two however busy the machine is (ordered by an event, not a sleep)."""
    calls = []
    real = threads._gemm
    met, lock, first = threading.Event(), threading.Lock(), [True]

    def gemm(a, b, out):
        me = threading.get_ident()
        with lock:
            calls.append((me, a.shape[0] * b.shape[1], threads.blas_threads()))
            if any(t != me for t, _, _ in calls):
                met.set()
            wait, first[0] = meet and first[0], False
        if wait:
            met.wait(60)
        return real(a, b, out=out)

    monkeypatch.setattr(threads, "_gemm", gemm)
    return calls


def test_matmul_gives_the_same_bits_whatever_the_thread_count(monkeypatch):
    rng = np.random.default_rng(1)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    for dt, (m, k, n) in [(np.float32, (515, 300, 400)), (np.float64, (515, 300, 400)),
                          (np.float32, (70, 600, 1000))]:  # fmt: skip
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        axis, pieces = threads.gemm_pieces(m, k, n)
        assert pieces > 1 and axis == (m < 128)
        results = []
        with threads.blas_owned():
            for free in (1, 2, 4):
                monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
                monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
                calls = _watch_gemm(monkeypatch)
                results.append(threads.matmul(a, b))
                assert sum(size for _, size, _ in calls) == m * n
                assert all(blas == 1 for _, _, blas in calls if blas is not None)
                if free == 1:
                    assert {t for t, _, _ in calls} == {threading.get_ident()}
        for r in results[1:]:
            assert r.dtype == dt and np.array_equal(r, results[0])
        ref = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(results[0], ref, rtol=1e-4, atol=1e-3)


def test_a_transposed_right_operand_is_multiplied_row_major_with_the_same_bits(monkeypatch):
    # dy · wᵀ (an LSTM's state gradient): the column blocks are computed as wᵀ's row blocks
    # times dyᵀ, so no piece hands BLAS a transposed large operand.
    rng = np.random.default_rng(2)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    a = rng.standard_normal((64, 2048)).astype(np.float32)
    w = rng.standard_normal((512, 2048)).astype(np.float32)
    assert threads.gemm_pieces(64, 2048, 512)[0] == 1
    seen, real = [], threads._gemm

    def gemm(x, y, out):
        seen.append(np.shares_memory(x, w) and x.flags.c_contiguous)  # row blocks of w
        return real(x, y, out=out)

    results = []
    with threads.blas_owned():
        for free in (1, 2, 4):
            monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
            monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
            monkeypatch.setattr(threads, "_gemm", gemm)
            results.append(threads.matmul(a, w.T))
    assert seen and all(seen)
    for r in results[1:]:
        assert r.flags.c_contiguous and np.array_equal(r, results[0])
    ref = a.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(results[0], ref, rtol=1e-4, atol=1e-3)


def test_blas_is_single_threaded_while_a_session_is_open():
    from threadpoolctl import threadpool_limits

    if threads.blas_threads() is None:
        pytest.skip("no controllable BLAS")
    if threads._blas["users"]:
        pytest.skip("a Session left open by another test owns BLAS")
    with threadpool_limits(2, user_api="blas"):
        assert threads.blas_threads() == 2
        s1 = Session(graph=rg.Graph())
        s2 = Session(graph=rg.Graph())
        assert threads.blas_threads() == 1
        s1.close()
        assert threads.blas_threads() == 1  # s2 still open
        s2.close()
        assert threads.blas_threads() == 2


def test_a_session_opened_on_another_thread_owns_blas_too():
    # A distributed worker opens each registered partition's Session on a gRPC thread. While
    # another thread holds threadpoolctl's control of OpenBLAS (here a threadpool_limits block on
    # this one; before, a local Session's own set), threadpoolctl 3.8 ignores other threads'
    # sets: the worker's partitions ran with two BLAS threads, other bits than a local Session.
    from threadpoolctl import threadpool_limits

    if threads.blas_threads() is None:
        pytest.skip("no controllable BLAS")
    if threads._blas["users"]:
        pytest.skip("a Session left open by another test owns BLAS")
    seen = []

    def on_a_thread(fn):
        t = threading.Thread(target=fn)
        t.start()
        t.join()

    with threadpool_limits(2, user_api="blas"):
        assert threads.blas_threads() == 2
        sess = []
        on_a_thread(lambda: sess.append(Session(graph=rg.Graph())))
        seen.append(threads.blas_threads())
        on_a_thread(lambda: seen.append(threads.blas_threads()))
        on_a_thread(sess[0].close)
        seen.append(threads.blas_threads())
    assert seen == [1, 1, 2]


def test_a_step_takes_blas_back_from_code_that_changed_it(monkeypatch):
    # A threadpoolctl block that ends while a Session is open restores its "original" count
    # (two threads), under rill's feet; the next step sets BLAS back to one thread, and the
    # count that code left comes back when the Session closes.
    from threadpoolctl import threadpool_limits

    if threads.blas_threads() is None:
        pytest.skip("no controllable BLAS")
    if threads._blas["users"]:
        pytest.skip("a Session left open by another test owns BLAS")
    monkeypatch.setattr(threads, "_blas_checked", [-1.0])
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2], name="x")
        y = x * 2.0
    with threadpool_limits(2, user_api="blas"):
        block = threadpool_limits(1, user_api="blas")  # entered before the Session opens
        with Session(graph=g) as sess:
            assert threads.blas_threads() == 1
            block.restore_original_limits()  # as the ONNX benchmark's single-threaded block did
            assert threads.blas_threads() == 2
            np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float32)}), [2, 2])
            assert threads.blas_threads() == 1
            threadpool_limits(3, user_api="blas")  # the latest count other code set
            threads._blas_checked[0] = -1.0  # (checks are 50 ms apart at least)
            sess.run(y, {x: np.ones(2, np.float32)})
            assert threads.blas_threads() == 1
        assert threads.blas_threads() == 3


def _parallel_matmuls(k=4, m=512, n=512):
    g = rg.Graph()
    rng = np.random.default_rng(2)
    feed = {}
    with g.as_default():
        x = rg.placeholder(rg.float32, [m, n], name="x")
        feed[x] = rng.standard_normal((m, n)).astype(np.float32)
        outs = []
        for i in range(k):
            w = rg.placeholder(rg.float32, [n, n], name=f"w{i}")
            feed[w] = rng.standard_normal((n, n)).astype(np.float32) / 20
            outs.append(rg.matmul(x, w, name=f"mm{i}"))
    return g, feed, outs


def _run_counting(monkeypatch, config, free=2, meet=False):
    from rill.exec.kernels import pointwise

    # The products through BLAS's pieces, which _watch_gemm sees (the compiled product,
    # where it runs, splits the same way: test_compiled_matmul.py).
    monkeypatch.setattr(pointwise, "compiled", lambda *args: None)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "cores_free", lambda: free)
    monkeypatch.setattr(threads, "cores_idle", lambda: free)
    g, feed, outs = _parallel_matmuls()
    config.rill.disable_compiled_path = True  # the dataflow executor: kernels on the op pool
    before = {t.ident for t in threading.enumerate()}
    with Session(graph=g, config=config) as sess:
        sess.run(outs, feed)  # measures kernel costs
        calls = _watch_gemm(monkeypatch, meet)
        res = sess.run(outs, feed)
        started = [t for t in threading.enumerate() if t.ident not in before]
    return calls, res, started


def test_config_bounds_the_threads_a_session_computes_on(monkeypatch):
    config = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    calls, _, started = _run_counting(monkeypatch, config)
    compute_threads = {t for t, _, _ in calls}
    # The caller plus at most one inter-op thread; each kernel on one thread (intra-op = 1).
    assert len(compute_threads) <= 2
    assert len([t for t in started if t.name.startswith("rill-op")]) <= 1
    assert not [t for t in started if t.name.startswith("rill-intra-op")]
    assert all(blas in (1, None) for _, _, blas in calls)


def test_negative_inter_op_runs_every_kernel_on_the_caller(monkeypatch):
    config = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=-1)
    calls, _, started = _run_counting(monkeypatch, config)
    assert {t for t, _, _ in calls} == {threading.get_ident()}
    assert not [t for t in started if t.name.startswith("rill-op")]


def test_results_are_identical_under_every_thread_bound(monkeypatch):
    results = []
    for intra, inter, free in [(1, 1, 1), (2, 2, 2), (4, -1, 4), (0, 0, 2)]:
        config = ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
        calls, res, _ = _run_counting(monkeypatch, config, free, meet=intra == 2)
        results.append(res)
        if intra == 2:
            assert len({t for t, _, _ in calls}) >= 2  # the pieces did split over threads
    for res in results[1:]:
        for a, b in zip(results[0], res):
            assert np.array_equal(a, b)


def test_fine_kernels_split_only_onto_idle_cores_and_coarse_ones_beside_a_busy_task(monkeypatch):
    # One other task busy on a 2-core host: a core is free for half its time, none is idle.
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 1)
    fine, coarse = threads.SPLIT_GRAIN, threads.COARSE_GRAIN
    assert threads.cores_for(None) == 1 and threads.cores_for(fine) == 1
    assert threads.cores_for(coarse) == 2
    assert threads.threads_for(fine, 4, limit=4) == 1
    assert threads.threads_for(coarse, 4, limit=4) == 2
    assert threads.threads_for(coarse, 4, limit=1) == 1  # intra_op_parallelism_threads = 1
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)  # a quiet host: both split
    assert threads.threads_for(fine, 4, limit=4) == 2
    assert threads.threads_for(fine - 1, 4, limit=4) == 1  # too small to split at all


def test_a_loop_of_unknown_work_runs_on_the_caller_when_no_core_is_idle(monkeypatch):
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 1)
    callers = set()
    intra_op.parallel_for(8, lambda lo, hi: callers.add(threading.get_ident()))
    assert callers == {threading.get_ident()}


class _PerThreadBlas:
    """A stand-in for a BLAS whose thread count is per thread (OpenBLAS on OpenMP: 4 on a
    thread that never set it) or, with the pthreads layer, one process-wide count (1: the
    value rill's blas_owned set when the Session took BLAS over)."""

    def __init__(self, layer="openmp"):
        self.threading_layer = layer
        self.local = threading.local()
        self.shared = 1
        self.sets = []

    def get_num_threads(self):
        if self.threading_layer == "openmp":
            return getattr(self.local, "n", 4)
        return self.shared

    @property
    def num_threads(self):  # threadpoolctl's LibController has both
        return self.get_num_threads()

    def set_num_threads(self, n):
        if self.threading_layer == "openmp":
            self.local.n = n
        else:
            self.shared = n
        self.sets.append((threading.current_thread().name, n))


class _Controller:
    def __init__(self, lib):
        self.lib_controllers = [lib]


@pytest.mark.parametrize("layer", ["openmp", "pthreads"])
def test_rill_threads_set_one_blas_thread_each_where_the_count_is_per_thread(monkeypatch, layer):
    lib = _PerThreadBlas(layer)
    monkeypatch.setattr(threads, "_controller", lambda: _Controller(lib))
    monkeypatch.setitem(threads._blas, "users", 1)  # a Session is open
    monkeypatch.setitem(threads._blas, "saved", [4])  # ... and owns BLAS (count 4 before)
    monkeypatch.setattr(threads, "_blas_checked", [0.0])  # the periodic check is due
    monkeypatch.setattr(threads, "_BLAS_CHECK_S", 0.0)  # at every call

    def pool_thread():  # an inter-op pool thread's initializer, then a step on it
        threads.limits(0).install()
        threads.blas_check()
        threads.blas_check()

    def step_thread():  # a user thread running steps
        threads.blas_check()
        threads.blas_check()

    for target, name in ((pool_thread, "pool"), (step_thread, "steps")):
        t = threading.Thread(target=target, name=name)
        t.start()
        t.join(timeout=30)
    if layer == "openmp":
        assert lib.sets == [("pool", 1), ("steps", 1)]  # once per thread
    else:  # a process-wide count: blas_owned's one set covers every thread
        assert lib.sets == []


def test_intra_op_workers_set_their_blas_thread(monkeypatch):
    from rill.exec.kernels import intra_op

    seen = []
    monkeypatch.setattr(
        threads, "blas_one_here", lambda: seen.append(threading.current_thread().name)
    )
    monkeypatch.setattr(intra_op, "_pool", intra_op._Pool())  # a pool with no worker yet
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    out = np.zeros(64)

    def fill(lo, hi):
        time.sleep(0.01)  # long enough for the worker to start and take a piece
        out[lo:hi] = 1

    intra_op.parallel_for(64, fill, pieces_per_thread=8)
    assert out.all()
    assert seen == ["rill-intra-op-0"]
