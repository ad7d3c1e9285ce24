"""What a started iterator runs: a dataset bound to the values of the tensors it captures.

The graph holds a `Pipeline` (rill.graph.ops.dataset_ops.register_pipeline); the `_Dataset`
kernel binds it to the captured values of one step (`Pipeline.bind`), and MakeIterator asks the
`BoundDataset` for a Python iterator of flattened elements. Everything an iterator accumulates
while it runs (function sessions, shuffle generators, in-memory caches) lives in its `RunState`
and goes when the iterator is re-initialized or its resource is deleted.
"""

from __future__ import annotations

import itertools

from rill.train.data.function import FunctionRunner, TracedFunction

__all__ = ["Env", "Pipeline", "RunState", "collect_captures"]

_env_ids = itertools.count()


class RunState:
    """Per started iterator: one FunctionRunner per traced function, and per-node state."""

    def __init__(self):
        self.runners: dict[int, FunctionRunner] = {}
        self.store: dict = {}

    def runner(self, fn: TracedFunction) -> FunctionRunner:
        r = self.runners.get(fn.id)
        if r is None:
            r = self.runners[fn.id] = FunctionRunner(fn)
        return r

    def close(self) -> None:
        runners, self.runners = self.runners, {}
        for r in runners.values():
            r.close()
        self.store.clear()


class Env:
    """The captured values one dataset instance sees (a dataset made by flat_map's function
    for one element has its own), and the iterator's RunState."""

    __slots__ = ("state", "values", "serial")

    def __init__(self, state: RunState, values: dict):
        self.state = state
        self.values = values
        self.serial = next(_env_ids)

    def value(self, tensor):
        return self.values[id(tensor)]

    def run(self, fn: TracedFunction, element: tuple, where: str) -> list:
        """The function's flattened outputs on `element`."""
        if not fn.flat_outputs:
            return []
        captured = [self.value(t) for t in fn.captured]
        return self.state.runner(fn)(element, captured, where)

    def child(self, values: dict) -> Env:
        return Env(self.state, values)


def collect_captures(dataset) -> list:
    """The tensors `dataset` and the datasets it reads from capture, each once, in order."""
    out, seen, stack = [], set(), [dataset]
    visited = set()
    while stack:
        d = stack.pop()
        if id(d) in visited:
            continue
        visited.add(id(d))
        for t in d._captured:
            if id(t) not in seen:
                seen.add(id(t))
                out.append(t)
        stack.extend(reversed(d._inputs))
    return out


class BoundDataset:
    """A dataset with its captured values: what a `_Dataset` op's variant holds."""

    # A variant tensor's value is a scalar (the session's feed check reads this).
    shape = ()

    def __init__(self, dataset, values: dict):
        self.dataset = dataset
        self.values = values
        flat = dataset._flat_specs()
        self.output_types = tuple(s.dtype for s in flat)
        self.output_shapes = tuple(s.shape for s in flat)

    def describe(self) -> str:
        return self.dataset.describe()

    def make_iterator(self):
        state = RunState()

        def elements():
            try:
                yield from self.dataset._elements(Env(state, self.values))
            finally:
                state.close()

        return elements()

    def __repr__(self) -> str:
        return f"<dataset {self.describe()}>"


class Pipeline:
    """A dataset and the tensors it captures, kept by the graph. `fixed` values (a one-shot
    iterator's constants) replace the bound ones."""

    def __init__(self, dataset, captures: list, fixed: list | None = None):
        self.dataset = dataset
        self.captures = captures
        self.fixed = fixed

    def bind(self, values) -> BoundDataset:
        if self.fixed is not None:
            values = self.fixed
        return BoundDataset(self.dataset, {id(t): v for t, v in zip(self.captures, values)})
