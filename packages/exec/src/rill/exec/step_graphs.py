"""CUDA graphs for straight-line GPU steps.

A step whose plan is one compiled partition on one GPU, every feed copied to that GPU, runs its
kernels one Python call at a time, and on a GPU each call costs tens of microseconds of host time
however little work it launches (the MNIST CNN train step: 50 kernels, 5-7 ms of host time for
well under a millisecond of device work). Once a feed signature (shapes and dtypes) has run
WARM_RUNS times, its step is captured into a CUDA graph, and from then on each run of it is one
graph launch: the feeds are copied into the graph's input buffers, the graph runs, the fetched
values are copied out.

What a replay must reproduce, and how:

- Variables. GPU variables are copy-on-write (an update installs a new array). The capture
  appends a device copy of each updated value into the array the variable held when the capture
  began and reinstalls that array, so every replay reads and writes the same buffers. A replay
  first checks that every variable of the device still holds its buffer and that none was created
  or deleted since; otherwise (an assign or a restore from another step) the graph is dropped and
  the step runs as usual, to be captured again later.
- Host values. What a captured step computes on the host is a function of shapes and constants:
  a data-dependent host value needs a device-to-host copy, which cannot be captured and ends the
  capture with an error. So the graph may keep them: host arrays copied to the device while
  capturing are staged through pinned host buffers that live as long as the graph.
- Memory. The graph's intermediate arrays come from a memory pool of its own, kept with it.
- Checking. The first launch is compared with a normal run of the same step from the same state
  (fetched values and variables, rtol RTOL). A kernel that keeps host state across steps (a random
  op's generator) is baked into the graph and shows up as a difference: the normal run's results
  stand and capture is off for that plan from then on.

Anything that fails while capturing (a kernel that synchronizes, an operation CUDA cannot
capture) turns capture off for that plan and leaves its state as it was; the step runs as usual.
Steps traced with RunOptions run as usual. RILL_CUDA_GRAPHS=0 turns the feature off.
"""

from __future__ import annotations

import os
import threading

import numpy as np

__all__ = ["StepGraphs", "NotCapturable", "enabled", "WARM_RUNS"]

WARM_RUNS = 2  # normal runs of a feed signature before its capture (kernels compiled, pool warm)
MAX_SIGNATURES = 4  # graphs kept per plan (one per feed signature)
MAX_CAPTURES = 8  # captures per plan, re-captures after a variable's reassignment included
RTOL, ATOL = 1e-4, 1e-5


def enabled() -> bool:
    return os.environ.get("RILL_CUDA_GRAPHS", "1") != "0"


class NotCapturable(Exception):
    """Why a step could not be captured."""


def _signature(feeds) -> tuple | None:
    sig = []
    for f in feeds:
        shape, dtype = getattr(f, "shape", None), getattr(f, "dtype", None)
        if shape is None or dtype is None:
            return None
        sig.append((tuple(shape), np.dtype(dtype).str))
    return tuple(sig)


def _device_vars(device) -> list:
    from rill.exec.resources import Var

    rm = device.resources
    xp_array = device.xp.ndarray
    return [r for r in rm.all() if type(r) is Var and type(r._value) is xp_array]


class StepGraphs:
    """The captured graphs of one step plan, by feed signature (see the module docstring)."""

    def __init__(self, part, ex, backend):
        self.part, self.ex, self.device, self.backend = part, ex, part.device, backend
        self._lock = threading.Lock()
        self._runs: dict = {}  # signature -> normal runs since its last capture
        self._graphs: dict = {}  # signature -> captured graph
        self.off: str | None = None  # why capture is off for this plan, once it is
        self.captures = 0
        self.replays = 0

    @classmethod
    def for_plan(cls, plan) -> StepGraphs | None:
        """A StepGraphs where `plan` can be captured: one partition on a GPU whose device
        offers graphs (straight-line, or with control flow on the dataflow executor), every feed
        copied there, no transfers, no swap_memory (its copies run on a stream of their own)."""
        from rill.exec.executor.compiled import CompiledPartition
        from rill.exec.executor.dataflow import DataflowPartition

        if not enabled() or not plan.single:
            return None
        part, ex = plan.partitions[0]
        dev = part.device
        backend = getattr(dev, "graph_backend", None)
        if backend is None or dev.device_type != "GPU":
            return None
        if not isinstance(ex, (CompiledPartition, DataflowPartition)):
            return None
        if any(n.attrs.get("swap_memory") for n in part.nodes):
            return None
        if getattr(dev, "memory_limit", None):
            return None
        if len(plan.feed_copies) != len(plan.feed_checks):
            return None
        if any(d is not dev for _, d, _ in plan.feed_copies):
            return None
        if any(n.type in ("_Send", "_Recv") for n in part.nodes):
            return None
        return cls(part, ex, backend)

    def run(self, feeds: list, step, inline: bool = False) -> list:
        """One normal run of the partition: its fetched values (device arrays), in its order."""
        return run_partition(self.part, self.ex, feeds, step, inline)

    def replay(self, feeds: list):
        """The step's fetched values (host arrays, in the partition's order) from its graph, or
        None where it has none for these feeds (the step then runs as usual)."""
        if not self._graphs:
            return None
        sig = _signature(feeds)
        g = self._graphs.get(sig)
        if g is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._graphs.get(sig) is not g:
                return None
            if not g.intact():
                del self._graphs[sig]
                self._runs[sig] = 0
                return None
            out = g.launch(feeds)
            self.replays += 1
            return out
        finally:
            self._lock.release()

    def maybe_capture(self, feeds: list, step):
        """Counts a normal run of these (device) feeds; once they have run WARM_RUNS times,
        captures the step, checks the graph against a normal run and returns that run's fetched
        values (host arrays). None: run the step as usual."""
        if self.off is not None or step.tracing:
            return None
        sig = _signature(feeds)
        if sig is None or sig in self._graphs or not self._lock.acquire(blocking=False):
            return None
        try:
            if len(self._runs) > 64:  # (shapes that change at every step: count afresh)
                self._runs.clear()
            n = self._runs[sig] = self._runs.get(sig, 0) + 1
            if n <= WARM_RUNS or len(self._graphs) >= MAX_SIGNATURES:
                return None
            if self.captures >= MAX_CAPTURES:
                self.off = f"captured {MAX_CAPTURES} times already"
                return None
            self.captures += 1
            return self._capture(sig, feeds, step)
        finally:
            self._lock.release()

    def _capture(self, sig, feeds, step):
        dev = self.device
        variables = _device_vars(dev)
        try:
            g = self.backend.capture(self, feeds, step, variables)
        except NotCapturable as e:
            self.off = str(e)
            step.step_resources = {}  # the step runs as usual, from the start
            return None
        # Check: the graph's step against a normal run of it from the same state. (Each run of
        # the step starts with no per-step resources: stacks, TensorArrays.)
        before = [v._value.copy() for v in variables]
        step.step_resources = {}
        try:
            got = g.launch(feeds, on_device=True, step=step)
            got_vars = [dev.to_host(v._value) for v in variables]
        except Exception as e:  # noqa: BLE001 - the graph does not run here: no graphs
            self.off = f"the captured step failed to run: {type(e).__name__}: {str(e)[:300]}"
            got = None
        for v, b in zip(variables, before):
            g.write(v, b)
        if got is None:
            step.step_resources = {}
            return None
        step.step_resources = {}
        ref = [dev.to_host(o) for o in self.run(feeds, step)]
        why = _differs(got, ref, "fetched value") or _differs(
            got_vars, [dev.to_host(v._value) for v in variables], "variable",
            [v.name for v in variables],
        )  # fmt: skip
        if why is not None:
            self.off = f"the captured step differed from a normal run: {why}"
            return ref
        g.adopt()
        self._graphs[sig] = g
        self._runs[sig] = 0
        return ref


def run_partition(part, ex, feeds: list, step, inline: bool = False) -> list:
    """The partition's fetched values in its order (None where a fetch produced no value),
    from either executor; inline: the dataflow executor runs every kernel on this thread."""
    from rill.exec.executor.compiled import CompiledPartition

    if isinstance(ex, CompiledPartition):
        return list(ex.run(feeds, step))
    results: dict = {}
    ex.run(feeds, step, results, inline=inline)
    return [results.get(i) for i, _, _ in part.fetches]


def _differs(a: list, b: list, what: str, names=None) -> str | None:
    for i, (x, y) in enumerate(zip(a, b)):
        label = f"{what} {names[i]!r}" if names else f"{what} {i}"
        if x is None or y is None:
            if x is not y:
                return f"{label}: one is missing"
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"{label}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        if x.dtype.kind in "fc":
            if not np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True):
                return f"{label}: values differ"
        elif not np.array_equal(x, y):
            return f"{label}: values differ"
    return None


# -- cupy: real CUDA graphs -----------------------------------------------------------------------


class CupyGraphs:
    """Captures steps on a cupy device (GpuDevice.graph_backend)."""

    def __init__(self, device):
        import cupy

        self.cp = cupy
        self.device = device

    def capture(self, runner, feeds, step, variables):
        from rill.exec import capture_gemm

        cp, dev = self.cp, self.device
        try:
            with dev.scope():
                capture_gemm.blas(cp)  # rill's cuBLAS handle, made outside the capture
        except Exception as e:  # noqa: BLE001 - no capturable products: no capture
            raise NotCapturable(f"cuBLAS for captures: {type(e).__name__}: {e}") from None
        keep: list = []  # pinned host buffers the graph copies from
        with dev.scope():
            _own_buffers(cp, variables)
            olds = [v._value for v in variables]
            stream = cp.cuda.Stream(non_blocking=True)
            pool = cp.cuda.MemoryPool()
            limit = cp.get_default_memory_pool().get_limit()
            if limit:
                pool.set_limit(size=limit)  # a cap set on cupy's pool holds for graphs too
            with cp.cuda.using_allocator(pool.malloc), stream:
                ins = [cp.empty(f.shape, f.dtype) for f in feeds]
                stream.begin_capture()
                try:
                    with _Staged(cp, keep), capture_gemm.capturing():
                        # Fetched values copied out of the step's arrays (a fetched variable's
                        # value is its buffer, which the writes below change).
                        outs = [o.copy() if type(o) is cp.ndarray else o
                                for o in runner.run(ins, step, inline=True)]  # fmt: skip
                        if any(o is None for o in outs):
                            raise NotCapturable("a fetched value was not produced")
                        for v, old in zip(variables, olds):
                            new = v._value
                            if new is old:
                                continue
                            if (
                                type(new) is not cp.ndarray
                                or new.shape != old.shape
                                or (new.dtype != old.dtype)
                            ):
                                raise NotCapturable(
                                    f"variable {v.name!r} changed its shape or dtype"
                                )
                            cp.copyto(old, new)
                            v._value = old
                except BaseException as e:
                    try:
                        stream.end_capture()
                    except Exception:  # noqa: BLE001, S110 - the capture is void either way
                        pass
                    for v, old in zip(variables, olds):
                        v._value = old
                    if isinstance(e, NotCapturable) or not isinstance(e, Exception):
                        raise  # (an interrupt stays one)
                    raise NotCapturable(f"{type(e).__name__}: {str(e)[:300]}") from None
                try:
                    graph = stream.end_capture()
                except Exception as e:  # noqa: BLE001 - an invalidated capture
                    raise NotCapturable(f"{type(e).__name__}: {str(e)[:300]}") from None
        return _CupyGraph(self, stream, graph, pool, ins, outs, variables, olds, keep)


def _own_buffers(cp, variables) -> None:
    """Gives a variable whose value is a view, or an array another variable also holds, a copy
    of its own (copy-on-write allows that at any time): a graph writes variables in place."""
    seen: set = set()
    for v in variables:
        a = v._value
        if a.base is not None or a.data.ptr in seen or not a.flags.c_contiguous:
            v._value = a = cp.ascontiguousarray(a).copy()
        seen.add(a.data.ptr)


class _CupyGraph:
    def __init__(self, backend, stream, graph, pool, ins, outs, variables, olds, keep):
        self.cp, self.device = backend.cp, backend.device
        self.stream, self.graph, self.pool, self.keep = stream, graph, pool, keep
        self.ins, self.outs = ins, outs
        self.variables, self.olds = variables, olds
        self.generation = self.device.resources.generation
        self.ready = self.cp.cuda.Event(disable_timing=True)
        self.done = self.cp.cuda.Event(disable_timing=True)

    def intact(self) -> bool:
        if self.device.resources.generation != self.generation:
            return False
        return all(v._value is old for v, old in zip(self.variables, self.olds))

    def launch(self, feeds, on_device: bool = False, step=None) -> list:
        cp, s = self.cp, self.stream
        with self.device.scope():
            here = cp.cuda.get_current_stream()  # where this thread's other GPU work runs
            self.ready.record(here)  # the feeds and variables made there first
            s.wait_event(self.ready)
            if on_device:
                with s:
                    for buf, f in zip(self.ins, feeds):
                        cp.copyto(buf, f)
            else:
                for buf, f in zip(self.ins, feeds):
                    buf.set(np.ascontiguousarray(f), stream=s)
            self.graph.launch(stream=s)
            res = [o.get(stream=s) if type(o) is cp.ndarray else np.array(o) for o in self.outs]
            self.done.record(s)
            here.wait_event(self.done)  # later work there sees the step's writes
        return res

    def write(self, var, value) -> None:
        """Copies `value` into the buffer `var` holds for the graph (the null stream)."""
        with self.device.scope():
            self.cp.copyto(var._value, value)

    def adopt(self) -> None:
        """Each variable's current value copied into its graph buffer, which it holds again."""
        with self.device.scope():
            for v, old in zip(self.variables, self.olds):
                if v._value is not old:
                    self.cp.copyto(old, v._value)
                    v._value = old


class _Staged:
    """While capturing: host data given to cupy.asarray/array/ascontiguousarray is copied to the
    device from a pinned host buffer kept with the graph (a copy from pageable memory would read
    it again at every replay, long after it was freed)."""

    def __init__(self, cp, keep: list):
        self.cp, self.keep = cp, keep

    def __enter__(self):
        import cupyx

        cp, keep = self.cp, self.keep
        self.saved = (cp.asarray, cp.array, cp.ascontiguousarray)

        def staged(orig):
            def fn(a, *args, **kw):
                if type(a) is cp.ndarray:
                    return orig(a, *args, **kw)
                dtype = args[0] if args else kw.get("dtype")
                h = np.asarray(a, dtype=dtype)
                if h.dtype.kind in "OSUV":
                    return orig(a, *args, **kw)  # cupy refuses these as it would anyway
                pinned = cupyx.empty_pinned(h.shape, h.dtype)
                pinned[...] = h
                keep.append(pinned)
                out = cp.empty(h.shape, h.dtype)
                if h.nbytes:
                    # (cupy's own copies refuse a capturing stream; the runtime's does not)
                    cp.cuda.runtime.memcpyAsync(
                        out.data.ptr, pinned.ctypes.data, h.nbytes,
                        cp.cuda.runtime.memcpyHostToDevice, cp.cuda.get_current_stream().ptr,
                    )  # fmt: skip
                return out

            return fn

        cp.asarray, cp.array, cp.ascontiguousarray = (staged(f) for f in self.saved)
        return self

    def __exit__(self, *exc):
        self.cp.asarray, self.cp.array, self.cp.ascontiguousarray = self.saved
        return False


# -- the simulated GPU: the bookkeeping without CUDA ---------------------------------------------


class SimGraphs:
    """The simulated GPU's stand-in for CUDA graphs, for tests of the bookkeeping above:
    capturing runs the step once with device-to-host copies refused (as a capturing stream
    refuses them) and puts every variable back; a launch runs the step again on the graph's
    input buffers and copies each updated variable back into the buffer it held at capture, as a
    real graph's writes do."""

    def __init__(self, device):
        self.device = device

    def capture(self, runner, feeds, step, variables):
        from rill.exec import capture_gemm, simgpu

        seen: set = set()
        for v in variables:  # (as _own_buffers does on a real GPU)
            if v._value._a.base is not None or id(v._value) in seen:
                v._value = simgpu.SimArray(v._value._a.copy())
            seen.add(id(v._value))
        olds = [v._value for v in variables]
        ins = [simgpu.SimArray(np.array(f._a)) for f in feeds]
        try:
            with simgpu.capturing(), capture_gemm.capturing():
                outs = runner.run(ins, step, inline=True)
            if any(o is None for o in outs):
                raise NotCapturable("a fetched value was not produced")
        except Exception as e:  # noqa: BLE001 - reported as why capture is off
            raise NotCapturable(f"{type(e).__name__}: {str(e)[:300]}") from None
        finally:
            for v, old in zip(variables, olds):
                v._value = old
        return _SimGraph(self.device, runner, ins, variables, olds)


class _SimGraph:
    def __init__(self, device, ex, ins, variables, olds):
        self.device, self.ex, self.ins = device, ex, ins
        self.variables, self.olds = variables, olds
        self.generation = device.resources.generation
        self.step = None

    def intact(self) -> bool:
        if self.device.resources.generation != self.generation:
            return False
        return all(v._value is old for v, old in zip(self.variables, self.olds))

    def launch(self, feeds, on_device: bool = False, step=None) -> list:
        from rill.exec.context import StepState
        from rill.exec.rendezvous import LocalRendezvous

        for buf, f in zip(self.ins, feeds):
            buf._a[...] = f._a if on_device else f
        out = self.ex.run(self.ins, step or StepState(0, None, LocalRendezvous(), False))
        res = [self.device.to_host(o) for o in out]
        self.adopt()
        return res

    def write(self, var, value) -> None:
        var._value._a[...] = value._a

    def adopt(self) -> None:
        for v, old in zip(self.variables, self.olds):
            if v._value is not old:
                old._a[...] = v._value._a
                v._value = old
