"""Session: runs fetches of a graph, caching one step plan per (feeds, fetches, targets).

>>> import numpy as np, rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     x = rg.placeholder(rg.float32, [None, 2], name="x")
...     y = x * 2.0 + 1.0
>>> with Session(graph=g) as sess:
...     sess.run(y, {x: np.array([[1, 2]], np.float32)})
array([[3., 5.]], dtype=float32)
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rill.exec.context import StepState
from rill.exec.device import CpuDevice, gpu_devices
from rill.exec.executor.common import KernelTable
from rill.exec.executor.compiled import CompiledPartition
from rill.exec.executor.dataflow import DataflowPartition
from rill.exec.executor.structured import StructuredPartition, Unsupported
from rill.exec.fetches import SessionBase
from rill.exec.memory import tune_malloc
from rill.exec.plan.ir import prune
from rill.exec.plan.optimize import (
    eliminate_common_subexpressions,
    fold_constants,
    remove_dead_nodes,
)
from rill.exec.plan.partition import control_flow_info, partition
from rill.exec.plan.placer import place
from rill.exec.plan.refs import resolve_refs
from rill.exec.plan.remap import remap
from rill.exec.proto import config_pb2
from rill.exec.rendezvous import LocalRendezvous
from rill.exec.resources import ResourceMgr
from rill.exec.step_graphs import StepGraphs
from rill.exec.threads import blas_check, blas_owned, core_budget, limits
from rill.exec.transfer import CopyingRendezvous, DeviceCopier, copy_feeds
from rill.graph import dtypes
from rill.graph.errors import CancelledError, InvalidArgumentError, OpError
from rill.graph.graph import Operation, Tensor, default_session, get_default_graph

__all__ = [
    "Session",
    "InteractiveSession",
    "ConfigProto",
    "RunOptions",
    "RunMetadata",
    "register_session_factory",
    "session_factory",
]

ConfigProto = config_pb2.ConfigProto
RunOptions = config_pb2.RunOptions
RunMetadata = config_pb2.RunMetadata
GraphOptions = config_pb2.GraphOptions
OptimizerOptions = config_pb2.OptimizerOptions


class FeedValueError(InvalidArgumentError, ValueError):
    """A fed value has the wrong shape (also a ValueError, as TensorFlow raises)."""


class FeedTypeError(InvalidArgumentError, TypeError):
    """A fed value cannot be converted to the fed tensor's dtype (also a TypeError)."""


class _FeedCheck:
    """Converts and validates one fed value against its tensor's dtype and static shape."""

    __slots__ = ("tensor", "np_dtype", "dims", "rank")

    def __init__(self, tensor: Tensor):
        self.tensor = tensor
        self.np_dtype = tensor.dtype.np
        shape = tensor.shape
        self.rank = shape.rank
        self.dims = (
            tuple((i, d) for i, d in enumerate(shape.dims) if d is not None)
            if shape.dims is not None
            else ()
        )

    def __call__(self, value):
        if type(value) is np.ndarray and value.dtype == self.np_dtype:
            arr = value
        else:
            arr = self._convert(value)
        if self.rank is not None:
            shape = arr.shape
            if len(shape) != self.rank or any(shape[i] != d for i, d in self.dims):
                raise FeedValueError(
                    f"Cannot feed value of shape {shape} for Tensor {self.tensor.name!r}, which "
                    f"has shape {self.tensor.shape}"
                )
        return arr

    def _convert(self, value):
        t = self.tensor
        if isinstance(value, Tensor):
            raise FeedTypeError(
                f"the value fed for {t.name!r} is a symbolic Tensor ({value.name}); feed a "
                "numpy array or Python value (run the tensor first)"
            )
        want = t.dtype
        if want is dtypes.string:
            arr = np.asarray(value, dtype=object)
            return arr
        if want is dtypes.resource or want is dtypes.variant:
            return value
        try:
            src = np.asarray(value)
        except Exception as e:  # noqa: BLE001
            raise FeedTypeError(f"cannot convert the value fed for {t.name!r}: {e}") from None
        kind = src.dtype.kind
        ok = (
            src.dtype == want.np
            or (kind in "iub" and (want.is_integer or want.is_floating or want.is_complex))
            or (kind == "f" and (want.is_floating or want.is_complex))
            or (kind == "c" and want.is_complex)
            or (kind == "b" and want.is_bool)
            or (src.size == 0 and kind == "f")
        )
        if kind in "iu" and want.is_integer and src.size:
            ok = want.min <= src.min() and src.max() <= want.max
        if kind == "b" and not want.is_bool:
            ok = False
        if not ok:
            raise FeedTypeError(
                f"Cannot feed value of dtype {src.dtype} for Tensor {t.name!r}, which has dtype "
                f"{want.name}"
            )
        return src.astype(want.np, copy=False)


class _StepPlan:
    """Everything one (feeds, fetches, targets) signature needs, built once."""

    def __init__(self, session: Session, feeds, fetch_tensors, targets):
        cfg = session._config
        self.feed_checks = [_FeedCheck(t) for t in feeds]
        pg = prune(session.graph, feeds, fetch_tensors, targets)
        resolve_refs(pg)
        place(pg, session._devices, cfg.allow_soft_placement)
        # Feeds placed on an accelerator (all their consumers are there): copied in by the session.
        self.feed_copies = [(i, a.device, a.name) for i, a in enumerate(pg.feeds)
                            if a.device.device_type != "CPU"]  # fmt: skip
        # TensorFlow's rule: opt_level L1 (the default) turns CSE and folding on; switching
        # one off takes opt_level L0 with its flag false.
        opt = cfg.graph_options.optimizer_options
        level1 = opt.opt_level == OptimizerOptions.L1
        do_cse = level1 or opt.do_common_subexpression_elimination
        do_fold = level1 or opt.do_constant_folding
        if do_cse:
            eliminate_common_subexpressions(pg)
        if do_fold:
            fold_constants(pg, session._cpu, opt.max_folded_constant_in_bytes or (10 << 20))
        if not cfg.rill.disable_dead_code_elimination:
            remove_dead_nodes(pg)
        if not cfg.rill.disable_remapper:
            remap(pg)
        frames = control_flow_info(pg)
        self.has_control_flow = pg.has_control_flow()
        parts = partition(pg, frames)
        kernels = KernelTable(session._stateful_kernels)
        fast = not cfg.rill.disable_compiled_path
        compiled = fast and not self.has_control_flow
        self.partitions = []
        for p in parts:
            ex = None
            if compiled:
                ex = CompiledPartition(p, kernels)
            elif fast and len(parts) == 1 and p.device.device_type == "CPU":
                # (The structured path's loop accumulators are numpy arrays: accelerator
                # partitions with control flow run on the dataflow executor.)
                try:
                    ex = StructuredPartition(p, kernels)
                    compiled = True
                except Unsupported:
                    ex = None
            if ex is None:
                ex = DataflowPartition(p, kernels, session._pool, session._blocking_pool)
            self.partitions.append((p, ex))
        self.compiled = compiled
        self.num_fetches = len(fetch_tensors)
        self.fetch_names = [t.name for t in fetch_tensors]
        self.single = len(self.partitions) == 1
        if self.single:
            p, ex = self.partitions[0]
            self.direct_order = [i for i, _, _ in p.fetches] == list(range(self.num_fetches))
        self.plan_graph = pg
        self.graphs = StepGraphs.for_plan(self)  # a GPU step replayed as a CUDA graph

    def partition_graphs(self):
        from rill.exec.plan.graphdef import plan_to_graph_def

        return [plan_to_graph_def(p) for p, _ in self.partitions]


# -- session targets (TensorFlow's SessionFactory) -------------------------------------------------

SESSION_FACTORY_GROUP = "rill.session_factories"
_factories: dict[str, object] = {}
_discovered = False


def register_session_factory(scheme: str, factory) -> None:
    """Makes `Session("<scheme>://...")` call `factory(target, graph=..., config=...)`.

    rill.distributed registers "grpc" through the entry point group `rill.session_factories`
    (`grpc = "rill.distributed.client:GrpcSession"`), so exec never imports it.
    """
    _factories[scheme] = factory


def session_factory(target: str):
    """The factory for `target`'s URL scheme, discovering entry points on first use.

    Raises:
        InvalidArgumentError: no installed package serves that scheme.
    """
    global _discovered
    scheme = target.split("://", 1)[0] if "://" in target else ""
    if scheme not in _factories and not _discovered:
        _discovered = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=SESSION_FACTORY_GROUP):
            if ep.name not in _factories:
                try:
                    _factories[ep.name] = ep.load()
                except Exception as e:  # noqa: BLE001 - a broken plugin must not hide the others
                    _factories.setdefault(ep.name, _broken(ep.name, e))
    factory = _factories.get(scheme)
    if factory is None:
        known = ", ".join(f"{k}://" for k in sorted(_factories)) or "none installed"
        raise InvalidArgumentError(
            f"no session factory for target {target!r} (scheme {scheme or '(none)'!r}); "
            f"installed: {known}. grpc:// targets need the rill-distributed package"
        )
    return factory


def _broken(name: str, err: BaseException):
    def factory(target, graph=None, config=None):
        raise InvalidArgumentError(f"the session factory {name!r} failed to load: {err}")

    return factory


class Session(SessionBase):
    """A connection to a local runtime: devices, their resources, and cached step plans.

    Args:
        target: "" for an in-process runtime; "grpc://host:port" returns a session on that
            master when rill-distributed is installed (any scheme a package registers through
            the `rill.session_factories` entry point group).
        graph: the graph to run (default: the default graph).
        config: a ConfigProto: device_count {"CPU": n} for n CPU devices, allow_soft_placement,
            graph_options.optimizer_options to switch CSE / constant folding off,
            operation_timeout_in_ms, and the thread bounds as in TensorFlow:
            inter_op_parallelism_threads (threads running independent kernels; 0: the process's
            core budget, negative: every kernel on the caller's thread) and
            intra_op_parallelism_threads (threads one kernel splits over, BLAS included; 0: the
            core budget). See rill.exec.threads.
    """

    def __new__(cls, target: str = "", graph=None, config=None, **kw):
        if target and "://" in target:
            # Another runtime serves this target (a grpc:// master, ...): its session object is
            # returned instead, and Session.__init__ does not run on it.
            return session_factory(target)(target, graph=graph, config=config)
        return super().__new__(cls)

    def __init__(self, target: str = "", graph=None, config: ConfigProto | None = None, *,
                 _runtime=None):  # fmt: skip
        if target:
            raise InvalidArgumentError(
                f"target {target!r}: a local Session takes target ''; other runtimes take a "
                "URL such as 'grpc://host:port'"
            )
        self.graph = graph if graph is not None else get_default_graph()
        self._config = config if config is not None else ConfigProto()
        tune_malloc()
        # `_runtime` = (devices, pool, blocking pool) shared with its owner (a distributed
        # worker runs every registered partition on the task's devices and resources).
        self._shared = _runtime is not None
        inter = self._config.inter_op_parallelism_threads
        self._limits = limits(self._config.intra_op_parallelism_threads)
        self._blas = blas_owned().__enter__()
        if _runtime is not None:
            self._devices, self._pool, self._blocking_pool = _runtime
        else:
            counts = dict(self._config.device_count)
            n_cpu = max(1, counts.get("CPU", 1))
            self._devices = [CpuDevice(i) for i in range(n_cpu)] + gpu_devices(counts.get("GPU"))
            for d in self._devices:
                d.resources = ResourceMgr()
            self._pool = None
            if inter >= 0:
                self._pool = ThreadPoolExecutor(
                    inter or core_budget(), "rill-op", initializer=self._limits.install
                )
            # Blocking kernels (Recv, queue waits) wait on threads of their own, using no core.
            self._blocking_pool = ThreadPoolExecutor(
                256, thread_name_prefix="rill-wait", initializer=self._limits.install
            )
        self._cpu = self._devices[0]
        # Values crossing between device types are copied by the rendezvous (as TensorFlow's
        # intra-process rendezvous does); a CPU-only session needs none of that.
        accelerators = [d for d in self._devices if d.device_type != "CPU"]
        self._copying = DeviceCopier(self._devices) if accelerators else None
        self._plans: dict = {}
        # Stateful kernels shared by every step plan (see KernelTable).
        self._stateful_kernels: dict = {}
        self._fetch_cache: dict = {}
        self._lock = threading.Lock()
        self._steps = itertools.count(1)
        self._closed = False
        self._active: set = set()
        self._default_ctx = None

    # -- public API -----------------------------------------------------------------------------

    def list_devices(self) -> list[str]:
        return [d.name for d in self._devices]

    @property
    def sess_str(self) -> str:
        return ""

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs one step and returns the fetched values in the structure of `fetches`.

        Raises:
            InvalidArgumentError: a bad feed, an unfed placeholder, a failing op (all OpErrors
                name the op, its printed line and the user source line that created it).
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        mapper = self._mapper(fetches)
        if feed_dict:
            feed_keys = []
            feed_vals = []
            graph = self.graph
            for k, v in feed_dict.items():
                if type(k) is not Tensor:
                    if isinstance(k, (tuple, list)) or hasattr(k, "_fetch_components"):
                        # A nested key (an LSTMStateTuple, a list of placeholders) feeds each
                        # of its tensors from the same place in the value's structure; a
                        # composite (IndexedSlices) feeds its components from its value type.
                        self._feed_nested(k, v, feed_keys, feed_vals)
                        continue
                    k = self._feed_key(k)
                elif k.op.graph is not graph:
                    raise ValueError(f"cannot feed {k.name}: it is not an element of this graph")
                feed_keys.append(k)
                feed_vals.append(v)
            key = (tuple(mapper.elements), tuple(feed_keys))
        else:
            feed_vals = ()
            key = (tuple(mapper.elements), ())
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(key)
        values = self._run_plan(plan, feed_vals, options, run_metadata)
        return mapper.build(values)

    def make_callable(self, fetches, feed_list=None, accept_options: bool = False):
        """A function running `fetches` with positional feed values for `feed_list`.

        >>> import rill.graph as rg
        >>> g = rg.Graph()
        >>> with g.as_default():
        ...     x = rg.placeholder(rg.int32, [])
        ...     y = x + 1
        >>> f = Session(graph=g).make_callable(y, [x])
        >>> int(f(41))
        42
        """
        mapper = self._mapper(fetches)
        feeds = tuple(self._feed_key(k) for k in (feed_list or ()))
        key = (tuple(mapper.elements), feeds)
        plan = self._plans.get(key) or self._plan(key)
        run_plan = self._run_plan
        build = mapper.build

        if accept_options:

            def call(*args, options=None, run_metadata=None):
                return build(run_plan(plan, args, options, run_metadata))

        else:

            def call(*args):
                return build(run_plan(plan, args, None, None))

        return call

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._shared:
            for d in self._devices:
                if d.resources is not None:
                    d.resources.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._blocking_pool.shutdown(wait=False)
        self._blas.__exit__(None, None, None)
        self._plans.clear()
        self._stateful_kernels.clear()

    # -- internals ------------------------------------------------------------------------------

    def _feed_nested(self, key, value, feed_keys: list, feed_vals: list) -> None:
        # TensorFlow's rule (nest.flatten_dict_items): the value is taken apart only as deep
        # as the key's structure, so a list value can still feed one tensor inside it.
        stack = [(key, value)]
        while stack:
            k, v = stack.pop()
            if hasattr(k, "_fetch_components"):
                k = k._fetch_components()[0]
            if isinstance(k, (tuple, list)):
                if not isinstance(v, (tuple, list)) or len(v) != len(k):
                    names = [getattr(x, "name", x) for x in k]
                    raise ValueError(
                        f"feed_dict key {names} is a structure of {len(k)}; its value must be a "
                        f"sequence of {len(k)} values, got {type(v).__name__}"
                        + (f" of length {len(v)}" if isinstance(v, (tuple, list)) else "")
                    )
                stack.extend(reversed(list(zip(k, v))))
                continue
            if type(k) is not Tensor:
                k = self._feed_key(k)
            elif k.op.graph is not self.graph:
                raise ValueError(f"cannot feed {k.name}: it is not an element of this graph")
            feed_keys.append(k)
            feed_vals.append(v)

    def _feed_key(self, k) -> Tensor:
        try:
            el = self.graph.as_graph_element(k, allow_operation=False)
        except (TypeError, KeyError, ValueError) as e:
            raise TypeError(f"cannot interpret feed_dict key {k!r} as a Tensor: {e}") from None
        return el

    def _plan(self, key) -> _StepPlan:
        elements, feeds = key
        fetch_tensors = [e for e in elements if isinstance(e, Tensor)]
        targets = [e for e in elements if isinstance(e, Operation)]
        for t in feeds:
            if t.dtype is dtypes.resource:
                raise TypeError(f"cannot feed resource tensor {t.name}")
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = _StepPlan(self, list(feeds), fetch_tensors, targets)
                plan.element_slots = [
                    fetch_tensors.index(e) if isinstance(e, Tensor) else -1 for e in elements
                ]
                self._plans[key] = plan
        return plan

    def _run_plan(self, plan: _StepPlan, feed_vals, options, run_metadata) -> list:
        checks = plan.feed_checks
        if len(feed_vals) != len(checks):
            raise InvalidArgumentError(f"expected {len(checks)} feed values, got {len(feed_vals)}")
        feeds = [c(v) for c, v in zip(checks, feed_vals)]
        copies = plan.feed_copies
        tracing = False
        deadline = None
        timeout = self._config.operation_timeout_in_ms
        if options is not None:
            tracing = options.trace_level >= RunOptions.SOFTWARE_TRACE
            timeout = options.timeout_in_ms or timeout
        if timeout:
            deadline = time.monotonic() + timeout / 1000.0
        step = StepState(
            next(self._steps),
            deadline,
            self._rendezvous() if not plan.single or plan.has_control_flow else None,
            tracing,
        )
        graphs = plan.graphs
        if graphs is not None and not tracing and run_metadata is None:
            out = graphs.replay(feeds)
            if out is not None:
                out = self._in_fetch_order(plan, out)
                return [out[s] if s >= 0 else None for s in plan.element_slots]
        if copies:
            copy_feeds(feeds, copies, step)
        blas_check()  # BLAS stays single-threaded whatever other code set (rill.exec.threads)
        # Kernels follow TensorFlow's silent IEEE semantics (inf, nan), not numpy's warnings.
        with np.errstate(all="ignore"), self._limits:
            out = self._execute(plan, feeds, step)
        if run_metadata is not None:
            self._fill_metadata(plan, step, options, run_metadata)
        slots = plan.element_slots
        return [out[s] if s >= 0 else None for s in slots]

    def _rendezvous(self):
        if self._copying is None:
            return LocalRendezvous()
        return CopyingRendezvous(self._copying)

    def _execute(self, plan: _StepPlan, feeds, step) -> list:
        if plan.single and plan.compiled:
            part, ex = plan.partitions[0]
            out = None
            if plan.graphs is not None:
                out = plan.graphs.maybe_capture(feeds, step)  # host values, or None
            if out is None:
                out = ex.run(feeds, step)
                if part.device.device_type != "CPU":
                    out = [part.device.to_host(v) for v in out]
            return self._in_fetch_order(plan, out)
        if plan.graphs is not None:  # one GPU partition with control flow
            out = plan.graphs.maybe_capture(feeds, step)
            if out is not None:
                return self._in_fetch_order(plan, out)
        return self._run_partitions(plan, feeds, step)

    @staticmethod
    def _in_fetch_order(plan: _StepPlan, out: list) -> list:
        """A single partition's fetched values (in its order) in the plan's fetch order."""
        if plan.direct_order:
            return out
        res = [None] * plan.num_fetches
        for (i, _, _), v in zip(plan.partitions[0][0].fetches, out):
            res[i] = v
        return res

    def _run_partitions(self, plan: _StepPlan, feeds, step) -> list:
        results: dict = {}

        def run_one(part, ex):
            if plan.compiled:
                vals = ex.run(feeds, step)
                for (i, _, _), v in zip(part.fetches, vals):
                    results[i] = v
            else:
                ex.run(feeds, step, results)

        if not plan.partitions:
            return []
        errors: list = []
        futures = []
        for part, ex in plan.partitions[1:]:
            futures.append(self._blocking_pool.submit(self._guard, run_one, part, ex, step, errors))
        self._guard(run_one, *plan.partitions[0], step, errors)
        for f in futures:
            f.result()
        if errors:
            real = [e for e in errors if not isinstance(e, CancelledError)]
            raise (real or errors)[0]
        for part, _ in plan.partitions:
            if part.device.device_type != "CPU":  # fetched values are host numpy arrays
                for i, _, _ in part.fetches:
                    results[i] = part.device.to_host(results[i])
        missing = [i for i in range(plan.num_fetches) if i not in results]
        if missing:
            raise InvalidArgumentError(
                f"fetched tensor {plan.fetch_names[missing[0]]!r} produced no value: it is "
                "computed inside a while loop's body (where it has no single value to return) "
                "or on a branch that did not run"
            )
        return [results[i] for i in range(plan.num_fetches)]

    @staticmethod
    def _guard(fn, part, ex, step, errors):
        try:
            with np.errstate(all="ignore"):
                fn(part, ex)
        except BaseException as e:  # noqa: BLE001 - collected and re-raised by the caller
            errors.append(e)
            step.cancel("another partition failed")
            if step.rendezvous is not None:
                step.rendezvous.abort(e if isinstance(e, OpError) else CancelledError(str(e)))

    def _fill_metadata(self, plan, step, options, run_metadata) -> None:
        if options is not None and options.output_partition_graphs:
            for gd in plan.partition_graphs():
                run_metadata.partition_graphs.add().CopyFrom(gd)
        if step.tracing:
            from rill.exec.tracing import fill_step_stats

            fill_step_stats(run_metadata.step_stats, step.records)


class InteractiveSession(Session):
    """A Session that installs itself as the default session until closed."""

    def __init__(self, target: str = "", graph=None, config=None):
        super().__init__(target, graph, config)
        self._default_ctx = default_session(self)
        self._default_ctx.__enter__()

    def close(self) -> None:
        if not self._closed and self._default_ctx is not None:
            try:
                self._default_ctx.__exit__(None, None, None)
            except IndexError:
                pass
        super().close()
