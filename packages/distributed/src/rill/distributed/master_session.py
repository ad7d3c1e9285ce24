"""A master session: the graph a client sent (CreateSession, ExtendSession with versions) and
its cached step plans, callables and partial runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rill.distributed.plan import build_plan
from rill.distributed.staged import group_stages, split
from rill.graph import Graph
from rill.graph.errors import AbortedError, InvalidArgumentError
from rill.graph.graph_def import _node_spec_from_def, _parse_ref, build_nodes, import_graph_def

if TYPE_CHECKING:
    from rill.distributed.master import Master

__all__ = ["MasterSession"]


class _Plan:
    def __init__(self, feeds, fetches, targets, parts):
        self.feeds = feeds
        self.fetches = fetches
        self.targets = targets
        self.parts = parts  # list[TaskPart]
        self.stages = None  # list[staged.Stage] when the step runs staged
        self.stage_groups = None  # the stages as run: lists of one group's stages, in order


class _PartialRun:
    def __init__(self, feeds, fetches, targets):
        self.feeds = set(feeds)
        self.fetches = set(fetches)
        self.targets = list(targets)
        self.fed: dict[str, object] = {}  # name -> TensorProto
        self.fetched: dict[str, object] = {}
        self.targets_run = False


class MasterSession:
    def __init__(self, master: Master, handle: str, graph_def, config, deadline):
        self.master = master
        self.handle = handle
        self.config = config
        self.graph = Graph()
        try:
            import_graph_def(graph_def, name="", graph=self.graph)
        except (ValueError, TypeError, KeyError) as e:
            raise InvalidArgumentError(
                f"CreateSession: the graph cannot be imported: {e}"
            ) from None
        self.version = 0
        self.lock = threading.Lock()
        self.plans: dict = {}
        self.callables: dict[int, tuple] = {}
        self.next_callable = 0
        self.partial: dict[str, _PartialRun] = {}
        self.worker_sessions: set = set()
        self.cluster = master.cluster_for(config)
        self.devices, self.device_attrs = master.discover(self.cluster, config, deadline)
        self.closed = False

    def extend(self, graph_def, current_version: int) -> int:
        with self.lock:
            if current_version != self.version:
                raise AbortedError(
                    f"ExtendSession: the current graph version is {self.version} but the "
                    f"caller expected {current_version} (another client extended the graph)"
                )
            specs = [_node_spec_from_def(nd, f"node {nd.name!r}") for nd in graph_def.node]
            new = {s.name for s in specs}
            input_map = {}
            for s in specs:
                if _has_op(self.graph, s.name):
                    raise InvalidArgumentError(f"ExtendSession: node {s.name!r} already exists")
                for ref in s.inputs:
                    src, idx, ctrl = _parse_ref(ref)
                    if src in new:
                        continue
                    try:
                        op = self.graph.get_operation_by_name(src)
                    except (KeyError, ValueError):
                        raise InvalidArgumentError(
                            f"ExtendSession: node {s.name!r} has input {ref!r} but no node "
                            f"named {src!r} exists in the graph"
                        ) from None
                    input_map[ref if ctrl else f"{src}:{idx}"] = op if ctrl else op.outputs[idx]
            try:
                with self.graph.name_scope(None):
                    build_nodes(self.graph, specs, input_map, "")
            except (ValueError, TypeError, KeyError) as e:
                raise InvalidArgumentError(f"ExtendSession: {e}") from None
            self.version += 1
            return self.version

    # -- plans ------------------------------------------------------------------------------------

    def _tensor(self, name: str, what: str):
        try:
            el = self.graph.as_graph_element(name, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError, TypeError) as e:
            raise InvalidArgumentError(
                f"{what} {name!r} is not in the session's graph: {e}"
            ) from None
        return el

    def _op(self, name: str):
        try:
            return self.graph.get_operation_by_name(name)
        except (KeyError, ValueError) as e:
            raise InvalidArgumentError(
                f"target {name!r} is not an operation of the session's graph: {e}"
            ) from None

    def plan(self, feeds: tuple, fetches: tuple, targets: tuple, deadline) -> _Plan:
        key = (feeds, fetches, targets)
        p = self.plans.get(key)
        if p is not None:
            return p
        with self.lock:
            p = self.plans.get(key)
            if p is not None:
                return p
            feed_t = [self._tensor(n, "feed") for n in feeds]
            fetch_t = [self._tensor(n, "fetch") for n in fetches]
            target_ops = [self._op(n) for n in targets]
            parts = build_plan(self.graph, feed_t, fetch_t, target_ops, self.devices, self.config)
            plan = _Plan(feeds, fetches, targets, list(parts.values()))
            plan.stages = split(plan.parts, self.master.local, self.device_attrs)
            if plan.stages is not None:
                plan.stage_groups = group_stages(plan.stages)
            self.master.register(self, plan, deadline)
            self.plans[key] = plan
        return plan

    def run(self, feeds: dict, fetches: list, targets: list, deadline, step_stats=None,
            context=None):  # fmt: skip
        """Runs a step. `feeds` maps names to TensorProtos; returns fetched TensorProtos."""
        fnames = tuple(feeds)
        plan = self.plan(fnames, tuple(fetches), tuple(targets), deadline)
        return self.master.run_plan(self, plan, [feeds[n] for n in fnames], deadline, step_stats,
                                    context)  # fmt: skip


def _has_op(graph, name: str) -> bool:
    try:
        graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return False
    return True
