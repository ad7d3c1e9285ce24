"""`gradients(ys, xs)`: reverse-mode differentiation that adds the gradient subgraph to the graph.

The algorithm of the control-flow paper §5.1: find the ops between xs and ys, seed the
gradients of ys, walk the ops in reverse topological order calling each op's gradient function,
and sum the partial gradients of every tensor (AddN; sparse IndexedSlices stay sparse).

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     x = rg.placeholder(rg.float32, [3], name="x")
...     y = rg.reduce_sum(x * x)
...     (dx,) = gradients(y, [x])
>>> dx.shape
TensorShape([3])
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence

from rill.autodiff.indexed_slices import IndexedSlices
from rill.autodiff.registry import NO_GRADIENT, get_gradient_function
from rill.graph import dtypes
from rill.graph.errors import GraphTypeError, GraphValueError
from rill.graph.graph import Operation, Tensor, get_default_graph

__all__ = ["gradients", "AggregationMethod"]


class AggregationMethod:
    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


_BACKPROP_TYPES = frozenset(
    {dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.complex64,
     dtypes.complex128, dtypes.resource, dtypes.variant}
)  # fmt: skip


def _as_list(x) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _as_tensor_for_x(x, graph) -> Tensor:
    handle = getattr(x, "handle", None)
    if handle is not None and isinstance(handle, Tensor):
        return handle  # a resource variable: differentiate with respect to its handle
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"gradients(): xs must be tensors or variables, got {x!r}")


def gradients(
    ys,
    xs,
    grad_ys=None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method=None,
    stop_gradients=None,
    unconnected_gradients: str = "none",
) -> list:
    """The symbolic partial derivatives of sum(ys) with respect to each x in xs.

    Args:
        ys: a tensor or list of tensors to differentiate.
        xs: tensors or variables to differentiate with respect to.
        grad_ys: initial gradients for ys (default: ones).
        stop_gradients: tensors treated as constants.
        aggregation_method: AggregationMethod.ADD_N (default) or EXPERIMENTAL_TREE.
        unconnected_gradients: "none" (None for an x that ys do not depend on) or "zero".
        gate_gradients: accepted for TensorFlow compatibility and ignored. TensorFlow gates an
            op's gradients with control dependencies to avoid races with kernels that update
            tensors in place; rill's kernels never write into their inputs and variables are
            copy-on-write, so gating would only force unused gradients (e.g. with respect to a
            placeholder) to be computed every step.

    Returns:
        One entry per x: a Tensor, an IndexedSlices (sparse gradients), or None.

    Raises:
        LookupError: a differentiable op on the path has no registered gradient.
    """
    ys = [y for y in _as_list(ys)]
    graph = ys[0].graph if ys and isinstance(ys[0], Tensor) else get_default_graph()
    xs_t = [_as_tensor_for_x(x, graph) for x in _as_list(xs)]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
        if len(grad_ys) != len(ys):
            raise GraphValueError(f"gradients(): {len(ys)} ys but {len(grad_ys)} grad_ys")
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(
            f"unconnected_gradients must be 'none' or 'zero', got {unconnected_gradients!r}"
        )
    stop_tensors = set(_as_list(stop_gradients) if stop_gradients is not None else [])
    stop_ops = {t.op for t in stop_tensors if isinstance(t, Tensor)}
    # loops imported from a GraphDef (or lowered from While) get the contexts they lack
    from rill.graph.control_flow_import import restore_while_contexts

    restore_while_contexts(graph)
    with graph.as_default(), graph.name_scope(name):
        return _gradients(
            graph, ys, xs_t, grad_ys, stop_ops, colocate_gradients_with_ops, gate_gradients,
            aggregation_method, unconnected_gradients,
        )  # fmt: skip


_CF_STATE = threading.local()


def _current_cf_state():
    """The ControlFlowState of the gradients() call being built in this thread (or None)."""
    return getattr(_CF_STATE, "state", None)


def _gradients(graph, ys, xs, grad_ys, stop_ops, colocate, gate, aggregation, unconnected):
    from rill.autodiff.control_flow_state import (
        ControlFlowState,
        _graph_ctx,
        is_loop_exit,
        is_loop_switch,
        zeros_like_output,
    )
    from rill.graph.ops import array_ops

    to_ops = list(dict.fromkeys(y.op for y in ys))
    from_ops = [x.op for x in xs]
    # Ops reachable forward from xs through backpropagatable tensors, then those of them from
    # which ys are reachable.
    reached = set()
    stack = list(from_ops)
    while stack:
        op = stack.pop()
        if op in reached:
            continue
        reached.add(op)
        for t in op.outputs:
            if _backprop(t):
                for c in t._consumers:
                    if c not in reached:
                        stack.append(c)
    between: set = set()
    between_list: list = []
    stack = [op for op in to_ops if op in reached]
    while stack:
        op = stack.pop()
        if op in between:
            continue
        between.add(op)
        between_list.append(op)
        for t in op._inputs:
            if t.op in reached and t.op not in between:
                stack.append(t.op)
    cf_state = ControlFlowState.maybe_create(between_list, between)
    # How many gradients each op still waits for (one per use by an op in `between`).
    pending: dict[Operation, int] = {}
    for op in between_list:
        for t in op._inputs:
            if t.op in between:
                pending[t.op] = pending.get(t.op, 0) + 1
    grads: dict[Operation, list[list]] = {}

    def add_grad(t: Tensor, g) -> None:
        slots = grads.get(t.op)
        if slots is None:
            slots = grads[t.op] = [[] for _ in t.op.outputs]
        slots[t.value_index].append(g)

    for y, gy in zip(ys, grad_ys):
        if gy is None:
            if not (y.dtype.is_floating or y.dtype.is_complex):
                raise GraphTypeError(
                    f"gradients(): y {y.name} has dtype {y.dtype.name}; only floating-point "
                    "tensors can be differentiated"
                )
            with graph.name_scope(f"{y.op.name}_grad_ys"):
                gy = array_ops.ones_like(y)
        add_grad(y, gy)
    queue = collections.deque()
    to_ops_set = set()
    for op in to_ops:
        if pending.get(op, 0) == 0 and op in reached and op not in to_ops_set:
            to_ops_set.add(op)
            queue.append(op)
    if cf_state is not None:
        for y in cf_state.process_unused_loop_exits(pending, to_ops_set):
            if _backprop(y):
                add_grad(y, cf_state.zeros_like_for_exit(y))
            queue.append(y.op)
    saved_state = _current_cf_state()
    _CF_STATE.state = cf_state
    try:
        while queue:
            op = queue.popleft()
            ctx_before = cf_state.grad_context_for(op, True) if cf_state else None
            ctx_after = cf_state.grad_context_for(op, False) if cf_state else None
            slots = grads.get(op)
            if slots is None:
                slots = grads[op] = [[] for _ in op.outputs]
            with _graph_ctx(graph, ctx_before) if cf_state else _nullcontext():
                out_grads = []
                for i, gs in enumerate(slots):
                    agg = _aggregate(graph, op.outputs[i], gs, aggregation)
                    slots[i] = [agg] if agg is not None else []
                    out_grads.append(agg)
            in_grads = [None] * len(op._inputs)
            has_any = any(g is not None for g in out_grads)
            if has_any and op not in stop_ops and op._inputs:
                fn = get_gradient_function(op)
                if fn is None:
                    if any(_backprop(t) for t in op._inputs):
                        raise LookupError(
                            f"no gradient defined for operation {op.name!r} (op type: "
                            f"{op.type}); register one with @register_gradient or declare it "
                            "not_differentiable"
                        )
                elif fn is not NO_GRADIENT:
                    with _graph_ctx(graph, ctx_after) if cf_state else _nullcontext():
                        for i, g in enumerate(out_grads):
                            if (
                                g is None
                                and _backprop(op.outputs[i])
                                and not _is_resource(op.outputs[i])
                            ):
                                with graph.name_scope(f"{op.name}_grad_zeros"):
                                    if cf_state is not None:
                                        out_grads[i] = cf_state.zeros_like(op, i)
                                    else:
                                        out_grads[i] = zeros_like_output(op, i)
                        in_grads = _call_grad_fn(graph, fn, op, out_grads, colocate, gate)
            for t, g in zip(op._inputs, in_grads):
                if g is not None and _backprop(t):
                    add_grad(t, g)
            _update_pending(op, between, pending, queue, cf_state, grads, add_grad,
                            is_loop_exit, is_loop_switch)  # fmt: skip
        if cf_state is not None:
            cf_state.post_processing()
    finally:
        _CF_STATE.state = saved_state
    out = []
    for x in xs:
        gs = grads[x.op][x.value_index] if x.op in grads else []
        g = _aggregate(graph, x, gs, aggregation)
        if g is None and unconnected == "zero":
            g = array_ops.zeros_like(x)
        out.append(g)
    return out


def _has_grads(grads, op) -> bool:
    slots = grads.get(op)
    return slots is not None and any(gs for gs in slots)


def _update_pending(op, between, pending, queue, cf_state, grads, add_grad, is_loop_exit,
                    is_loop_switch) -> None:  # fmt: skip
    """Counts down the inputs' pending gradients and queues the ops that are ready.

    A loop Switch is visited twice: first when its Exit's gradient arrives (to start the
    gradient loop), again when the body's gradient arrives (to close it). A loop's Exits wait
    until all of them are ready; unused ones then get zeros (or None, if no exit has a gradient).
    """
    for t in op._inputs:
        x = t.op
        if x not in between:
            continue
        pending[x] -= 1
        ready = pending[x] == 0
        if cf_state is not None and not ready:
            ready = pending[x] > 0 and is_loop_switch(x)
        if not ready:
            continue
        if cf_state is not None and is_loop_exit(x):
            state = cf_state.get_grad_state(x, before=False)
            state.deferred_exits.append(x.outputs[0])
            state.pending_exits_count -= 1
            if state.pending_exits_count == 0:
                any_grad = False
                for y in state.deferred_exits:
                    if _has_grads(grads, y.op):
                        any_grad = True
                        queue.append(y.op)
                    else:
                        state.unused_exits.append(y)
                if any_grad:
                    for y in state.unused_exits:
                        if _backprop(y):
                            add_grad(y, cf_state.zeros_like_for_exit(y))
                        queue.append(y.op)
                else:
                    for y in state.unused_exits:
                        queue.append(y.op)
        else:
            queue.append(x)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _is_resource(t: Tensor) -> bool:
    return t.dtype is dtypes.resource


def _backprop(t: Tensor) -> bool:
    return t.dtype in _BACKPROP_TYPES


def _call_grad_fn(graph, fn, op, out_grads, colocate, gate) -> list:
    scope = f"{op.name}_grad"
    with graph.name_scope(scope):
        if colocate:
            with graph.colocate_with(op):
                result = fn(op, *out_grads)
        else:
            result = fn(op, *out_grads)
    if isinstance(result, (Tensor, IndexedSlices)) or result is None:
        result = [result]
    result = list(result)
    if len(result) != len(op._inputs):
        raise GraphValueError(
            f"the gradient function of {op.type} returned {len(result)} gradients for "
            f"{len(op._inputs)} inputs (op {op.name!r})"
        )
    for t, g in zip(op._inputs, result):
        if isinstance(g, Tensor) and _backprop(t) and t.dtype is not dtypes.resource:
            if g.dtype is not t.dtype:
                raise GraphTypeError(
                    f"the gradient function of {op.type} returned a {g.dtype.name} gradient for "
                    f"input {t.name} of dtype {t.dtype.name} (op {op.name!r})"
                )
            if not g.shape.is_compatible_with(t.shape):
                raise GraphValueError(
                    f"the gradient function of {op.type} returned a gradient of shape "
                    f"{g.shape} for input {t.name} of shape {t.shape} (op {op.name!r})"
                )
    return result


def _aggregate(graph, t: Tensor, gs: Sequence, method):
    """Sums the partial gradients of `t`: AddN for dense, concatenation for IndexedSlices."""
    from rill.graph.ops import math_ops, reshape_ops

    gs = [g for g in gs if g is not None]
    if not gs:
        return None
    if len(gs) == 1:
        return gs[0]
    with graph.name_scope(f"{t.op.name}_grad_sum"):
        if all(isinstance(g, IndexedSlices) for g in gs):
            values = reshape_ops.concat([g.values for g in gs], 0)
            indices = reshape_ops.concat([g.indices for g in gs], 0)
            return IndexedSlices(values, indices, gs[0].dense_shape)
        dense = [g._as_tensor() if isinstance(g, IndexedSlices) else g for g in gs]
        if method == AggregationMethod.EXPERIMENTAL_TREE:
            while len(dense) > 1:
                nxt = [math_ops.add(dense[i], dense[i + 1]) for i in range(0, len(dense) - 1, 2)]
                if len(dense) % 2:
                    nxt.append(dense[-1])
                dense = nxt
            return dense[0]
        return math_ops.add_n(dense)
