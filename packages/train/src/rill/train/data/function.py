"""User functions of tf.data (`map`, `filter`, `flat_map`, ...), traced once into a graph.

`trace` calls the Python function once on placeholders shaped like a dataset element, inside a
FuncGraph: a rill Graph of its own that captures every tensor of an outer graph the function
uses (a placeholder fed at iterator initialization, a constant table) as a placeholder of its
own, remembered with the outer tensor. The pipeline evaluates the captured tensors together
with the dataset and feeds them to the function.

At run time each started iterator runs a function through a rill.exec Session on the FuncGraph
(`FunctionRunner`), created on first use and closed with the iterator; stateful ops in the
function (random ops) therefore continue their sequences from element to element, and start
over when the iterator is re-initialized, with the graph-level seed of the outer graph.
"""

from __future__ import annotations

import itertools

from rill.exec import Session
from rill.graph import dtypes, nest
from rill.graph.errors import OpError, error_class_for_code
from rill.graph.graph import Graph, Tensor, get_default_graph, placeholder
from rill.train.data import structure

__all__ = ["FuncGraph", "TracedFunction", "trace"]

_ids = itertools.count()
# TF1 reference variables (their outputs are references to state, not values).
_REF_OPS = frozenset({"VariableV2", "Variable", "TemporaryVariable"})


class FuncGraph(Graph):
    """A graph for one traced function; tensors of other graphs become captured placeholders."""

    _capture_by_default = True

    def __init__(self, name: str, outer: Graph):
        super().__init__()
        self.name = name
        self.outer = outer
        self.seed = outer.seed
        self.captures: list[tuple[Tensor, Tensor]] = []  # (outer tensor, its placeholder)
        self._captured: dict[int, Tensor] = {}

    def _capture(self, tensor: Tensor) -> Tensor:
        got = self._captured.get(id(tensor))
        if got is not None:
            return got
        if tensor.dtype is dtypes.resource or tensor.op.type in _REF_OPS:
            raise ValueError(
                f"{self.name}: the function uses {tensor.name} ({tensor.op.type}), a variable or "
                "other resource of the outer graph. A dataset function runs in a session of its "
                "own and cannot reach the outer graph's variables; read the value outside the "
                "function (captured when the iterator is initialized) or feed it"
            )
        st = self._state()
        # The placeholder belongs to the function as a whole, not to the control-flow
        # branch, name scope or control dependencies it was first used under.
        saved = st.name_scope, st.cf_context, st.control_deps
        st.name_scope, st.cf_context, st.control_deps = "", None, []
        try:
            ph = placeholder(tensor.dtype, tensor.shape, name="captured/" + tensor.op.name)
        finally:
            st.name_scope, st.cf_context, st.control_deps = saved
        self._captured[id(tensor)] = ph
        self.captures.append((tensor, ph))
        return ph

    def capture(self, tensor: Tensor) -> Tensor:
        """`tensor` if it is this graph's, else the placeholder capturing it."""
        return tensor if tensor.graph is self else self._capture(tensor)


class TracedFunction:
    """A function traced on an element structure: its FuncGraph, argument placeholders, the
    structure of what it returned, and its captures."""

    def __init__(self, graph: FuncGraph, args: list[Tensor], result, flat_outputs: list[Tensor],
                 what: str):  # fmt: skip
        self.graph = graph
        self.args = args
        self.result = result  # the function's return value (tensors, or a Dataset)
        self.flat_outputs = flat_outputs
        self.what = what
        self.id = next(_ids)

    @property
    def captured(self) -> list[Tensor]:
        """The outer tensors the function captures (evaluated with the dataset)."""
        return [outer for outer, _ in self.graph.captures]


def _call(fn, args):
    """TensorFlow's convention: a tuple element is spread over the arguments."""
    if isinstance(args, tuple) and not hasattr(args, "_fields"):
        return fn(*args)
    return fn(args)


def trace(fn, element_spec, what: str, outputs=None, extra_args=None) -> TracedFunction:
    """Traces `fn` on placeholders matching `element_spec`.

    Args:
        fn: the user's function.
        element_spec: the element's TensorSpec structure.
        what: names the transformation for errors ("Dataset.map()").
        outputs: given the function's return value, the list of tensors to compute (default:
            the flattened return value, normalized to tensors).
        extra_args: called in the function's graph, values passed to `fn` after the element's
            (group_by_window gives its reduce function the window's dataset this way).
    """
    if not callable(fn):
        raise TypeError(f"{what}: the function must be callable, got {fn!r}")
    outer = get_default_graph()
    g = FuncGraph(f"{what}_{next(_ids)}", outer)
    with g.as_default():
        flat = [
            placeholder(s.dtype, s.shape, name=f"arg{i}")
            for i, s in enumerate(structure.flat_specs(element_spec))
        ]
        args = nest.pack_sequence_as(element_spec, flat)
        if extra_args is None:
            result = _call(fn, args)
        else:
            result = fn(args, *extra_args())
        if outputs is None:
            if isinstance(result, list):
                result = tuple(result)  # TensorFlow 1.15 takes a returned list as a tuple
            if result is None:
                raise ValueError(f"{what}: the function returned None; it must return tensors")
            result = structure.normalize(result, "output")
            # An outer tensor returned as it is is captured like any other use of it.
            flat_out = [g.capture(t) for t in nest.flatten(result)]
            result = nest.pack_sequence_as(result, flat_out)
        else:
            flat_out = outputs(result)
    return TracedFunction(g, flat, result, flat_out, what)


def rewrap(e: OpError, where: str) -> OpError:
    """`e` with `where` (the dataset and the element) in front, same canonical class."""
    try:
        return type(e)(f"{where}: {e}")
    except TypeError:
        return error_class_for_code(e.error_code)(f"{where}: {e}")


class FunctionRunner:
    """Runs a traced function with one Session (one per started iterator)."""

    def __init__(self, fn: TracedFunction):
        self.fn = fn
        self.session = Session(graph=fn.graph)
        feeds = list(fn.args) + [ph for _, ph in fn.graph.captures]
        self._call = self.session.make_callable(list(fn.flat_outputs), feed_list=feeds)

    def __call__(self, element: tuple, captured_values: list, where: str) -> list:
        try:
            return self._call(*element, *captured_values)
        except OpError as e:
            raise rewrap(e, where) from e

    def close(self) -> None:
        self.session.close()
