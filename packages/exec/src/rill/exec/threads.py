"""The threads rill runs compute on: how many, for which kernel, and who owns them.

TensorFlow owns its thread pools; a BLAS library left to itself does not cooperate with anyone:
OpenBLAS splits every large product into one fixed share per core and spins waiting for the
slowest share, so on a machine whose cores are busy (a shared CI runner, a PS and a worker on
one host, two rill processes side by side) every GEMM-bound step collapses. rill therefore:

- runs BLAS **single-threaded** while any Session is open (`blas_owned()`, through
  threadpoolctl; the previous setting comes back when the last Session closes). Other code may
  change it meanwhile (a threadpoolctl block that restores its "original" count on exit, a
  library setting its own): each step checks (`blas_check()`, at most every 50 ms) and sets it
  back to one — BLAS threads spinning beside rill's own on a busy machine made a 140 ms
  inference take 1.3–2.5 s, 0.5–1 s of it CPU. The count found then is what comes back at the
  end;
- splits a large product itself (`matmul`) into pieces whose boundaries depend on the shapes
  only, and runs the pieces on its intra-op threads (`intra_op.parallel_for`), which take pieces
  from a shared counter: a thread whose core is busy simply does fewer of them;
- splits a kernel only from SPLIT_GRAIN multiply-adds, and a fine-grained one (below
  COARSE_GRAIN, or a loop whose work is not counted) only onto idle cores (`cores_for`);
- for a coarse kernel asks for no more threads than the **cores free** now (`cores_free()`,
  from the runnable tasks in /proc/loadavg, sampled at most every 50 ms, or 5 ms after a
  busy sample: the threads that would each still get at least half a core from the scheduler
  beside the host's other runnable tasks), and no more than the session's `ConfigProto.intra_op_parallelism_threads`
  (`intra_op_limit()`). Beside one busy process on two cores a second thread still gets two
  thirds of a core where the scheduler shares the CPU per thread (where it shares it per
  session first, Linux's autogroup, the process gets one core whatever its threads, and only
  idle cores count), and since rill's threads never spin on a busy machine (they poll for work
  only while the host has an idle core, intra_op; a thread that is descheduled just takes
  fewer pieces; one that has not started when the pieces run out is withdrawn), using it beats
  running alone for a kernel of milliseconds, as TensorFlow's pools do; on a machine busier
  than that, extra threads would mostly wait. For a kernel of a fraction of a millisecond the
  piece a late-scheduled thread took holds the caller up more than the thread gives.

Because a piece is always one single-threaded BLAS call over the same rows, the result of
`matmul` is the same bits whatever the thread count, the load or the ConfigProto. A product
too small for fixed pieces to be worth their CPU on one thread (`matmul(exact=True)`) is one
call on one thread and splits in halves on more only where the halves give one call's bits on
this machine's BLAS (`pieces_exact`, tried once per shape and layout).

The host's other runnable tasks leave out rill's own intra-op workers that are runnable but run
no job (on their way to sleep after their pieces): sampled right after a kernel, they would
otherwise keep the next 50 ms of fine-grained kernels on one thread.

The cores a process may use (`core_budget()`): the `RILL_NUM_THREADS` environment variable when
set (a local cluster gives each of its processes its share of the host, so that they do not
oversubscribe it), else the CPUs in the process's affinity mask, and no more than its control
group's CPU quota allows (a container limited to one CPU on a many-core CI runner: threads past
the quota only get the group throttled).
"""

from __future__ import annotations

import collections
import math
import os
import threading
import time

import numpy as np

__all__ = [
    "core_budget",
    "cgroup_cpu_quota",
    "cores_free",
    "cores_idle",
    "cores_for",
    "intra_op_limit",
    "limits",
    "gemm_pieces",
    "pieces_exact",
    "threads_for",
    "matmul",
    "blas_owned",
    "blas_threads",
    "blas_check",
]

# A product of fewer multiply-adds than twice this runs as one call, and a split one has at
# least this many per piece (4 M multiply-adds: about 0.1 ms on one core, against a thread
# hand-off of about 10 µs). A GPT-2-like block's [64, 256] x [256, 768] (12.6 M) splits in two
# column pieces; the Figure 1 MLP's products (at most 6.4 M) stay one call.
GEMM_GRAIN = 1 << 22
# At most this many pieces per product, and at least this many rows per piece (fewer rows make
# the BLAS kernel itself slower). Each piece repacks the other operand: on the CNN's dense
# layer ([64, 3136] x [3136, 1024]) 8 column pieces cost 17% over one call, 4 pieces 8%.
# A kernel of fewer multiply-adds than this runs on one thread (threads_for): a hand-off to a
# pool thread costs about 10 µs on a quiet machine (intra_op's pool), 2 M multiply-adds about
# 50-80 µs on one core, so at half of that on each of two threads the split still pays. The
# mid-size layers of batch-1 inference (a Winograd 3×3 layer of ResNet-18½: 7 M multiply-adds
# in 0.7 ms with its tile transforms) are above it; the Figure 1 MLP's products (0.4-6 M, each
# under 0.2 ms) stay single-threaded within a step either way, as they are one piece.
SPLIT_GRAIN = 1 << 21
# From this many multiply-adds (about 1.5 ms on one core) a kernel also splits onto a core
# another task is busy on (cores_free); below it only onto an idle one (cores_idle).
COARSE_GRAIN = 1 << 26
MAX_PIECES = 4
MIN_ROWS = 64
# At least this many columns per piece where a product is split by columns (too few rows): a
# column piece is a thin product ([m, k] x [k, n / pieces] with m < 128) whose BLAS call is
# slower per multiply-add the thinner it is. The LSTM gradient loop's [64, 2048] x [2048, 512]
# costs about 1.1 ms in one call, 1.15 ms in 2 pieces of 256 columns, 1.3-1.45 ms in 4 of 128.
MIN_COLS = 256
# Where that leaves one piece, two halves of at least this many columns: [64, 1024] x
# [1024, 256] (a GPT-2-like MLP's second product at batch 1) costs 3% more CPU in two
# column pieces of 128 than in one call, against 20-25% more in two row pieces of 32.
NARROW_COLS = 128


def core_budget() -> int:
    """The cores this process may use: RILL_NUM_THREADS when set, else its affinity mask."""
    env = os.environ.get("RILL_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"RILL_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"RILL_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup", proc: str = "/proc/self/cgroup") -> float | None:
    """The CPUs' worth of time this process's control group and its ancestors may use (the
    smallest quota/period on the way to the root; cgroup v2's cpu.max or v1's
    cpu.cfs_quota_us), or None where none is set or it cannot be read."""
    try:
        with open(proc) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            base, files = root, ("cpu.max",)
        elif "cpu" in parts[1].split(","):
            base = next((os.path.join(root, d) for d in (parts[1], "cpu,cpuacct", "cpu")
                         if os.path.isdir(os.path.join(root, d))), None)  # fmt: skip
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            if base is None:
                continue
        else:
            continue
        path = parts[2].strip("/")
        while True:
            q = _read_quota(os.path.join(base, path), files)
            if q is not None and (best is None or q < best):
                best = q
            if not path:
                break
            path = os.path.dirname(path)
    return best


def _read_quota(d: str, files: tuple) -> float | None:
    try:
        if len(files) == 1:  # v2: "max 100000" or "<quota> <period>"
            with open(os.path.join(d, files[0])) as f:
                quota, period = f.read().split()[:2]
            if quota == "max":
                return None
        else:
            with open(os.path.join(d, files[0])) as f:
                quota = f.read().strip()
            with open(os.path.join(d, files[1])) as f:
                period = f.read().strip()
        q, p = int(quota), int(period)
    except (OSError, ValueError):
        return None
    return q / p if q > 0 and p > 0 else None


_BUDGET = core_budget()
_HOST_CPUS = os.cpu_count() or _BUDGET
_free = [-1.0, None]  # [time sampled, other runnable tasks]


def _runnable_others() -> int | None:
    """Tasks runnable on the host now, less the calling thread and rill's own intra-op workers
    that are only on their way to or from sleep (None where unknown).

    A worker that has just finished its pieces, or was woken for a job the caller then
    finished alone, is still runnable for a few µs. Sampled right then (the next kernel's
    decision comes right after the last one's pieces), it would count as another task for the
    next 50 ms, and every fine-grained kernel meanwhile would run on one thread: at batch 1
    and 8, 10-15% of the samples fell on such a moment."""
    running = _host_running()
    if running is None:
        return None
    from rill.exec.kernels.intra_op import idle_runnable_workers

    return max(0, running - 1 - idle_runnable_workers())


def _host_running() -> int | None:
    """The host's runnable tasks now (/proc/loadavg's fourth field), None where unknown."""
    try:
        with open("/proc/loadavg", "rb") as f:
            fields = f.read().split()
        return int(fields[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


# How long a sample of the host's runnable tasks stands: one that found none, 50 ms; one that
# found another task, 5 ms. A busy sample is often a moment's (a peer's pool thread spinning
# for a few ms after its run, a kernel thread), and the next 50 ms of fine-grained kernels
# would run on one thread: MobileNetV3-small b8 with default threads, stepped right after
# onnxruntime's runs in the same process, took 13 ms a step for 50-60 ms, then 9.5 ms; and on
# a quiet host one window in five of its steps ran at 12.5-13 ms. A read costs about 10 µs.
_IDLE_TTL = 0.05
_BUSY_TTL = 0.005


def _others_now() -> int | None:
    """The host's other runnable tasks (None where unknown), sampled at most every 50 ms while
    none is found, every 5 ms while some are."""
    now = time.monotonic()
    if now - _free[0] >= (_BUSY_TTL if _free[1] else _IDLE_TTL):
        _free[0], _free[1] = now, _runnable_others()
    return _free[1]


def cores_free() -> int:
    """Of this process's core budget, the threads that would each get at least half a core
    beside the host's other runnable tasks now (>= 1): t threads and `others` tasks on `cpus`
    cores share them as cpus / (others + t) each, at least 1/2 while t <= 2 * cpus - others.

    Where the scheduler shares the CPU between sessions before threads (Linux's autogroup,
    `_GROUPED`), a thread gets no share of a core another session's task keeps busy beyond
    what the process already has: beside one busy process on two cores the whole process gets
    one core, however many threads it runs (a CPU-bound LSTM step took the same 1.0 core on
    one thread or two, and 16% more CPU on two). There only the idle cores count (cores_idle).
    """
    if _GROUPED:
        return cores_idle()
    others = _others_now()
    return _BUDGET if others is None else max(1, min(_BUDGET, 2 * _HOST_CPUS - others))


def scheduler_groups(
    flag: str = "/proc/sys/kernel/sched_autogroup_enabled", proc: str = "/proc/self/cgroup"
) -> bool:
    """Whether the scheduler puts this process in a group of its own session (autogroup on, and
    the process in the root CPU cgroup, where autogroup applies), so that other sessions' tasks
    take their share of the CPU per session rather than per thread."""
    try:
        with open(flag, "rb") as f:
            if f.read().strip() != b"1":
                return False
        with open(proc, encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    paths = {}  # controllers ("" for the unified hierarchy) -> the process's cgroup
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for c in parts[1].split(","):
                paths[c] = parts[2].strip()
    path = paths.get("cpu", paths.get(""))  # the cpu controller's (v1), else the unified one
    return path == "/"


_GROUPED = scheduler_groups()


def cores_idle() -> int:
    """Of this process's core budget, the cores no other runnable task uses now (>= 1): where a
    hand-off to another thread cannot be taken back (the dataflow executor's inter-op pool), it
    would wait for that thread to be scheduled, so it only pays on an idle core."""
    others = _others_now()
    return _BUDGET if others is None else max(1, min(_BUDGET, _HOST_CPUS - others))


class _Local(threading.local):
    """This thread's intra-op bound (0: none set) and whether its BLAS count was set to one;
    the class attributes are the defaults until a thread sets its own (a getattr default on a
    bare threading.local costs an AttributeError where the name was never set)."""

    intra = 0
    blas_one = False


_tls = _Local()
_gemm = np.matmul  # one piece's product (a module global so that tests can watch the calls)


# One entry per kernel running now beside the step's own thread (the compiled path's pairs:
# rill.exec.executor.compiled._Pair; deque appends and pops are atomic under the GIL).
BESIDE: collections.deque = collections.deque()


def intra_op_limit() -> int:
    """The intra-op thread bound of the step running on this thread (the core budget outside
    steps, or where its ConfigProto says 0), shared with the kernels running beside it: with k
    of them, a kernel gets 1/(k + 1) of the bound (at least one thread), so that two kernels
    side by side on two cores run unsplit each, rather than each splitting over both."""
    n = _tls.intra or _BUDGET
    return max(1, n // (1 + len(BESIDE))) if BESIDE else n


class limits:
    """Sets this thread's intra-op bound (0: the core budget) for the duration of a with-block;
    `Session` enters it around each step, and its inter-op threads carry it for good."""

    __slots__ = ("n",)

    def __init__(self, intra_op: int):
        self.n = max(0, int(intra_op))

    def __enter__(self):
        # One instance serves concurrent steps: what to restore is kept per thread.
        try:
            _tls.saved.append(_tls.intra)
        except AttributeError:
            _tls.saved = [_tls.intra]
        _tls.intra = self.n
        return self

    def __exit__(self, *exc):
        _tls.intra = _tls.saved.pop()

    def install(self) -> None:
        """Sets the bound on this thread for good (a pool thread's initializer), and one BLAS
        thread where the library counts per thread (blas_one_here)."""
        _tls.intra = self.n
        _tls.blas_one = True
        blas_one_here()


def cores_for(work: int | None) -> int:
    """The cores a kernel of `work` multiply-adds (None: unknown, a memory-bound loop) may
    split over now: cores_free() from COARSE_GRAIN up, else cores_idle().

    A fine-grained kernel (well under a millisecond a piece) splits only onto cores no other
    task is using: beside a busy process its second thread is scheduled late, and the caller
    waits for the piece that thread took (two compiled loops on two threads beside one busy
    process here took as long as on one; a 0.1-0.7 ms depthwise layer ran 10-60% slower split
    in two). A coarse one takes the share of a busy core it gets (see cores_free)."""
    return cores_free() if work is not None and work >= COARSE_GRAIN else cores_idle()


def threads_for(work: int, pieces: int, limit: int | None = None, free: int | None = None) -> int:
    """Threads for a kernel of `work` multiply-adds split in `pieces`: one below SPLIT_GRAIN,
    else as many as there are pieces, within the intra-op bound and the cores it may use now
    (cores_for; `free` overrides)."""
    if pieces <= 1 or work < SPLIT_GRAIN:
        return 1
    limit = intra_op_limit() if limit is None else limit
    free = cores_for(work) if free is None else free
    return max(1, min(pieces, limit, free))


def gemm_pieces(
    m: int, k: int, n: int, most: int = MAX_PIECES, grain: int | None = None
) -> tuple[int, int]:
    """How matmul splits an [m, k] x [k, n] product in at most `most` pieces of at least
    `grain` multiply-adds: (axis, pieces), axis 0 for row blocks of the result, 1 for column
    blocks (when there are too few rows); (0, 1) for one call.

    A function of the shapes only, so the result's bits never depend on the threads.
    """
    work = m * k * n
    grain = GEMM_GRAIN if grain is None else grain
    if work < 2 * grain or most < 2:
        return 0, 1
    # Each piece packs the whole operand it does not split: a row block all of b (k x n), a
    # column block all of a (m x k). Rows where there are enough of them, unless b is the larger
    # operand and the columns split into as many pieces: the LSTM's folded weight gradient
    # [1024, 3200] x [3200, 2048] costs about 80 ms in one call, 83 in 4 column pieces, 95 in 4
    # row pieces (one thread).
    most = min(most, MAX_PIECES, work // grain)
    # A power of two: 3 pieces on 2 threads leave one thread idle a third of the time (ViT's
    # [197, 768] x [768, 192] ran 1.5x faster on 2 threads in 3 pieces, about 2x in 2).
    by_rows = _pow2(min(most, m // MIN_ROWS)) if m >= 2 * MIN_ROWS else 0
    by_cols = _pow2(min(most, n // MIN_COLS))
    if by_cols < 2 <= most and n >= 2 * NARROW_COLS:
        by_cols = 2  # two halves of NARROW_COLS or more (a GPT-2 MLP's [64, 1024] x [1024, 256])
    if by_rows and not (n > m and by_cols >= by_rows):
        return (0, by_rows) if by_rows > 1 else (0, 1)
    return (1, by_cols) if by_cols > 1 else (0, 1)


def _pow2(p: int) -> int:
    """The largest power of two <= p (0 for 0)."""
    return 1 << (p.bit_length() - 1) if p > 0 else 0


def matmul(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray | None = None,
    most: int = MAX_PIECES,
    exact: bool = False,
) -> np.ndarray:
    """a @ b for 2-D numpy arrays, split over the intra-op threads where it is large (in at most
    `most` pieces: gemm_pieces).

    Pieces are single-threaded BLAS calls (inside a Session) over fixed row or column blocks, so
    the result does not depend on how many threads ran them. A column block is written in place
    where the result is row-major (BLAS takes its row stride), else computed into a contiguous
    buffer and copied into place.

    With `exact` (a product too small for its pieces to be worth their extra CPU on one thread)
    the product splits only when there are threads to run the pieces, and only where the pieces
    give the very bits of one call on this machine's BLAS (pieces_exact); otherwise it is one
    call. Either way the bits are one call's, whatever the threads.
    """
    from rill.exec.kernels.intra_op import parallel_for, threads_now

    m, k = a.shape
    n = b.shape[1]
    # Exact pieces cost no CPU on one thread: from SPLIT_GRAIN multiply-adds each, where a
    # second thread's half still pays for its hand-off (SqueezeNet's batch-1 squeeze and
    # expand layers, 3-6 M).
    axis, pieces = gemm_pieces(m, k, n, most, SPLIT_GRAIN if exact else None)
    if pieces > 1:
        threads = threads_for(m * k * n, pieces)
        if exact:
            # The threads that would really run them (the pool's size, a pool thread: one).
            threads = min(threads, threads_now())
            if threads < 2 or not pieces_exact(a, b, out, axis, pieces):
                pieces = 1
    if pieces == 1:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((m, n), np.result_type(a, b))
    run = _pieces(a, b, out, axis, pieces)
    parallel_for(pieces, run, pieces_per_thread=-(-pieces // threads), max_threads=threads)
    return out


def _pieces(a, b, out, axis: int, pieces: int):
    """run(lo, hi) computing pieces [lo, hi) of a @ b into out (matmul's blocks)."""
    m, n = a.shape[0], b.shape[1]
    dim = m if axis == 0 else n
    bounds = [dim * i // pieces // 8 * 8 for i in range(pieces)] + [dim]
    # A column block of a transposed matrix (b = cᵀ, c row-major: a gradient's dy · wᵀ) is
    # computed as the row block cᵀ's transpose gives, b[:, s]ᵀ · aᵀ, whose large operand BLAS
    # reads without transposing (a fifth faster at the LSTM's [64, 2048] x [2048, 512]).
    flip = axis == 1 and b.flags.f_contiguous and not b.flags.c_contiguous
    # A column block of a row-major result is a matrix with a row stride BLAS takes as it is.
    direct = axis == 1 and out.flags.c_contiguous

    def run(lo, hi):
        for i in range(lo, hi):
            s = slice(bounds[i], bounds[i + 1])
            if axis == 0:
                _gemm(a[s], b, out=out[s])
            elif flip:
                out[:, s] = _gemm(b[:, s].T, a.T, out=None).T
            elif direct:
                _gemm(a, b[:, s], out=out[:, s])
            else:
                out[:, s] = _gemm(a, b[:, s], out=None)

    return run


_exact: dict = {}


def _layout(x: np.ndarray | None) -> str:
    if x is None:
        return "new"
    return "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else ""


def pieces_exact(a, b, out, axis: int, pieces: int) -> bool:
    """Whether matmul's pieces of a @ b give the bits of one BLAS call on this machine.

    A BLAS routine's arithmetic (its blocking of the sum over k, its kernels for the edges,
    a separate kernel for small products) is chosen by the shapes, the transpositions and the
    strides, never by the values. So each (shapes, dtypes, layouts, pieces) is tried once, on
    random operands laid out as these are, one call against the pieces, and the verdict kept.
    OpenBLAS's pieces mostly match (the sums' order does not depend on the rows or columns a
    call covers), except where a piece is small enough for its small-product kernel. Operands
    with other strides than C or F order are never split this way."""
    lay = (_layout(a), _layout(b), _layout(out))
    if "" in lay or (out is not None and lay[2] != "C"):
        return False
    key = (a.shape, b.shape, a.dtype.str, b.dtype.str, lay, axis, pieces)
    verdict = _exact.get(key)
    if verdict is None:
        rng = np.random.default_rng(len(_exact))
        pa = np.asarray(rng.standard_normal(a.shape), a.dtype, order=lay[0])
        pb = np.asarray(rng.standard_normal(b.shape), b.dtype, order=lay[1])
        one = np.matmul(pa, pb)
        split = np.empty_like(one)
        _pieces(pa, pb, split, axis, pieces)(0, pieces)
        verdict = _exact[key] = bool(np.array_equal(one, split))
    return verdict


# -- BLAS threads --------------------------------------------------------------------------------

_blas_lock = threading.Lock()
_blas = {"users": 0, "controller": None, "saved": None}


def _controller():
    if _blas["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas["controller"] = ThreadpoolController().select(user_api="blas")
        except Exception:  # noqa: BLE001 - no controllable BLAS: nothing to own
            _blas["controller"] = False
    return _blas["controller"]


def _set_blas_threads(lc, n: int) -> None:
    """Sets a BLAS library's thread count to `n` for the whole process, from whichever thread
    calls (under _blas_lock).

    OpenBLAS's count is process-wide (its pthreads pool), but threadpoolctl 3.8 lets only one
    Python thread set it, the first to call (usually the main thread: a local Session's, a
    `threadpool_limits` block's), and silently ignores every other. A distributed worker opens
    the Session of each partition it registers on a gRPC thread, so BLAS stayed at the count
    from before (two threads here) under rill's partitions: another split of each product
    than a local Session's one-thread calls, different bits on BLAS kernels whose threads'
    blocks round differently (OpenBLAS's Haswell sgemm), and BLAS threads spinning beside
    rill's own. rill owns BLAS while a Session is open whatever thread opened it, so it takes
    the control for the call and gives it back, as a `threadpool_limits` block does when it
    ends (other code's later calls then set the count as before 3.8)."""
    release = getattr(type(lc), "clear_controlling_thread", None)  # threadpoolctl >= 3.8
    if release is not None:
        release(force=True)
    lc.set_num_threads(n)
    if release is not None:
        release()  # only where this thread took it


def blas_threads() -> int | None:
    """The BLAS libraries' thread count now (the largest; None where none is controllable)."""
    c = _controller()
    if not c or not c.lib_controllers:
        return None
    return max(lc.num_threads for lc in c.lib_controllers)


class blas_owned:
    """While any instance is entered, BLAS runs single-threaded (rill splits the work itself);
    the setting from before comes back when the last one exits. Session holds one while open."""

    def __enter__(self):
        with _blas_lock:
            c = _controller()
            if c and c.lib_controllers:
                if _blas["users"] == 0:
                    _blas["saved"] = [lc.num_threads for lc in c.lib_controllers]
                    for lc in c.lib_controllers:
                        _set_blas_threads(lc, 1)
                _blas["users"] += 1
        return self

    def __exit__(self, *exc):
        with _blas_lock:
            c = _controller()
            if c and c.lib_controllers and _blas["users"] > 0:
                _blas["users"] -= 1
                if _blas["users"] == 0 and _blas["saved"]:
                    for lc, n in zip(c.lib_controllers, _blas["saved"]):
                        _set_blas_threads(lc, n)


_BLAS_CHECK_S = 0.05
_blas_checked = [-1.0]


def blas_one_here() -> None:
    """Sets one BLAS thread for the calling thread where the library's count is per thread.

    OpenBLAS built on OpenMP (and BLIS on it) keeps its count per thread (threadpoolctl's
    threading layer "openmp"): the count blas_owned sets on the thread that opened the Session
    does not reach rill's other threads, whose every product would start a team of OpenMP
    threads beside rill's own. So each of rill's pool threads calls this as it starts, and a
    step calls it once per thread that runs steps (blas_check). A process-wide count (OpenBLAS's
    pthreads pool, MKL's) needs nothing here."""
    c = _controller()
    if not (c and _blas["users"]):
        return
    for lc in c.lib_controllers:
        if getattr(lc, "threading_layer", None) == "openmp" and lc.get_num_threads() != 1:
            lc.set_num_threads(1)


def blas_check() -> None:
    """At a step's start (Session.run): while rill owns BLAS, sets its thread count back to one
    where other code changed it, keeping that code's count to restore when rill lets go.
    Checked at most every 50 ms (a check costs about a microsecond); a per-thread count
    (blas_one_here) once per thread that runs steps."""
    if not _tls.blas_one:
        _tls.blas_one = True
        blas_one_here()
    now = time.monotonic()
    if now - _blas_checked[0] < _BLAS_CHECK_S or not _blas["users"]:
        return
    _blas_checked[0] = now
    with _blas_lock:
        c = _controller()
        if not (c and c.lib_controllers and _blas["users"] > 0 and _blas["saved"]):
            return
        for k, lc in enumerate(c.lib_controllers):
            n = lc.num_threads
            if n != 1:
                _blas["saved"][k] = n
                _set_blas_threads(lc, 1)
