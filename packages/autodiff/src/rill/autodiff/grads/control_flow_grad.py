"""Gradients of the control-flow primitives (the control-flow paper §5.1).

The gradient of a cond is a cond of gradients: a Merge's gradient is Switched on the cond's
predicate (saved per iteration when the cond sits in a loop), and a Switch's gradient Merges the
branch gradient with zeros that are live when the other branch runs.

The gradient of a while loop is a while loop (see rill.autodiff.control_flow_state): an Exit's
gradient enters the gradient loop, the loop Switch's gradient becomes a gradient-loop Merge
(closed on the second visit, from the body), a loop Merge's gradient is Switched on the gradient
loop's predicate, a non-constant Enter's gradient leaves the gradient loop, and a constant
Enter's gradient is accumulated over the iterations.
"""

from __future__ import annotations

from rill.autodiff.control_flow_state import zeros_like_output
from rill.autodiff.indexed_slices import IndexedSlices
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph import dtypes
from rill.graph.control_flow import CondContext, WhileContext, output_context
from rill.graph.graph import Tensor

not_differentiable("LoopCond", "ControlTrigger")


def _dense(g):
    return g._as_tensor() if isinstance(g, IndexedSlices) else g


def _grad_ctx(op):
    return op.graph._control_flow_context


def _zeros_for(op, index):
    ctx = _grad_ctx(op)
    state = getattr(ctx, "grad_state", None) if ctx is not None else None
    if state is not None:
        from rill.autodiff.gradients import _current_cf_state

        cf = _current_cf_state()
        if cf is not None:
            z = cf.zeros_like(op, index)
            if z is not None:
                return z
    return zeros_like_output(op, index)


@register_gradient("Switch")
def _switch_grad(op, grad_false, grad_true):
    """d(data) = Merge(g_false, g_true); in a loop the Merge is the gradient loop's."""
    from rill.graph.ops import control_flow_ops

    op_ctx = op._control_flow_context
    grad_ctx = _grad_ctx(op)
    if isinstance(op_ctx, WhileContext):
        state = grad_ctx.grad_state
        merge_grad = state.switch_map.get(op)
        if merge_grad is not None:
            # Second visit, from the body: close the gradient loop's back edge.
            if grad_true is not None:
                nxt = control_flow_ops.next_iteration(_dense(grad_true))
                merge_grad.op._update_input(1, nxt)
            return None, None
        if grad_false is not None:
            # First visit, from the Exit: both Merge inputs are the entered gradient for now.
            g = _dense(grad_false)
            grad_ctx._internal_creation = True
            try:
                merge_grad = control_flow_ops.merge([g, g], name="b_switch")[0]
            finally:
                grad_ctx._internal_creation = False
            state.switch_map[op] = merge_grad
            return merge_grad, None
        return None, None
    if isinstance(op_ctx, CondContext):
        b = op_ctx.branch
        grads = [grad_false, grad_true]
        if grads[b] is None:
            return None, None
        if grads[1 - b] is None:
            grads[1 - b] = _zeros_for(op, 1 - b)
        return control_flow_ops.merge([_dense(grads[0]), _dense(grads[1])],
                                      name="cond_grad")[0], None  # fmt: skip
    # A Switch outside any cond or loop (hand-built graphs).
    parts = []
    pred = op._inputs[1]
    if grad_false is not None:
        parts.append(control_flow_ops.switch(_dense(grad_false), pred)[0])
    if grad_true is not None:
        parts.append(control_flow_ops.switch(_dense(grad_true), pred)[1])
    if len(parts) == 1:
        return parts[0], None
    return control_flow_ops.merge(parts)[0], None


@register_gradient("Merge")
def _merge_grad(op, grad, _value_index_grad):
    """Switch the gradient on the predicate that chose the live input."""
    from rill.graph.ops import control_flow_ops, logic_ops

    op_ctx = output_context(op._inputs[0].op)
    grad_ctx = _grad_ctx(op)
    g = _dense(grad)
    if isinstance(op_ctx, WhileContext):
        # A loop Merge: continue (true) into the body's gradient, or leave (false) to the Enter.
        f, t = control_flow_ops.switch(g, grad_ctx.pivot, name="b_merge")
        return [f, t]
    if isinstance(op_ctx, CondContext):
        pred = op_ctx.pred
        state = getattr(grad_ctx, "grad_state", None) if grad_ctx is not None else None
        if state is not None:
            pred = state.get_real_value(pred)
        elif grad_ctx is not None and grad_ctx._is_external(pred):
            pred = grad_ctx.make_available(pred)
        f, t = control_flow_ops.switch(g, pred, name="cond_grad")
        # input 0 is the branch its context names (the false one in TensorFlow-1's conds; the
        # true one in lowered If ops, whose Merges take the then-branch first)
        return [f, t] if op_ctx.branch == 0 else [t, f]
    # A Merge outside any cond or loop: route by value_index.
    out = []
    for i in range(len(op._inputs)):
        sel = logic_ops.equal(op.outputs[1], i)
        out.append(control_flow_ops.switch(g, sel)[1])
    return out


@register_gradient("Enter")
def _enter_grad(op, grad):
    """Leave the gradient loop (Exit); a loop constant's gradient is summed over iterations."""
    from rill.graph.ops import control_flow_ops

    grad_ctx = _grad_ctx(op)
    if not isinstance(grad_ctx, WhileContext) or grad_ctx.grad_state is None:
        return grad
    if not grad_ctx.back_prop:
        return grad
    if op.attrs["is_constant"]:
        return _add_backprop_accumulator(grad_ctx, op, _dense(grad))
    result = control_flow_ops.exit(_dense(grad), name="b_enter")
    grad_ctx.loop_exits.append(result)
    return result


@register_gradient("Exit")
def _exit_grad(op, grad):
    """Enter the gradient loop: the gradient of a loop output starts a gradient loop variable."""
    from rill.graph.ops import control_flow_ops

    grad_ctx = _grad_ctx(op)
    if grad_ctx is None or not grad_ctx.back_prop:
        return None
    fwd = op._control_flow_context
    if fwd.grad_state is not None:
        raise NotImplementedError("second-order gradients of while loops are not supported")
    grad_ctx._internal_creation = True
    try:
        result = control_flow_ops.enter(
            _dense(grad), grad_ctx.name, is_constant=False,
            parallel_iterations=grad_ctx.parallel_iterations, name="b_exit",
        )  # fmt: skip
    finally:
        grad_ctx._internal_creation = False
    grad_ctx.loop_enters.append(result)
    grad_ctx.enters.append(result.op)
    return result


@register_gradient("NextIteration")
def _next_iteration_grad(op, grad):
    """The gradient passes to the previous iteration unchanged."""
    return grad


def _add_backprop_accumulator(grad_ctx, op, grad: Tensor) -> Tensor:
    """Sums `grad` over the gradient loop's iterations (for the loop constant entered by op)."""
    from rill.autodiff.control_flow_state import _graph_ctx, _zeros
    from rill.graph.ops import array_ops, control_flow_ops, math_ops

    g = op.graph
    outer = grad_ctx.outer
    shape = grad.shape
    variant = grad.dtype is dtypes.variant
    if variant:
        # A list or optional sums into zeros like the value that entered the loop.
        if isinstance(outer, WhileContext):
            raise NotImplementedError(
                f"the gradient of list or optional {op._inputs[0].name} entering a nested while "
                "loop is not supported"
            )
        with _graph_ctx(g, outer), g.control_dependencies(None):
            acc = array_ops.zeros_like(op._inputs[0])
    elif shape.is_fully_defined():
        with _graph_ctx(g, outer), g.control_dependencies(None):
            acc = _zeros(g, shape.dims, grad.dtype)
    else:
        value = op._inputs[0]
        state = grad_ctx.grad_state
        if isinstance(outer, WhileContext) and outer.grad_state is not None:
            fwd = state.forward_context
            with _graph_ctx(g, fwd.outer), g.control_dependencies(None):
                zeros_shape = array_ops.shape(value)
            outer_state = state.outer_grad_state
            history = outer_state.add_forward_accumulator(zeros_shape)
            with _graph_ctx(g, outer), g.control_dependencies(None):
                real_shape = outer_state.add_backprop_accumulated_value(history, zeros_shape)
                acc = array_ops.zeros(real_shape, dtype=grad.dtype)
        else:
            with _graph_ctx(g, outer), g.control_dependencies(None):
                acc = array_ops.zeros(array_ops.shape(value), dtype=grad.dtype)
    with _graph_ctx(g, grad_ctx), g.control_dependencies(None):
        grad_ctx._internal_creation = True
        try:
            enter_acc = control_flow_ops.enter(
                acc, grad_ctx.name, is_constant=False,
                parallel_iterations=grad_ctx.parallel_iterations, name="b_acc",
            )  # fmt: skip
            merge_acc = control_flow_ops.merge([enter_acc, enter_acc], name="b_acc")[0]
        finally:
            grad_ctx._internal_creation = False
        grad_ctx.loop_enters.append(enter_acc)
        grad_ctx.enters.append(enter_acc.op)
        sw_f, sw_t = control_flow_ops.switch(merge_acc, grad_ctx.pivot, name="b_acc")
        if variant:
            add = math_ops.add_n([sw_t, grad], name="b_acc_add")
        else:
            add = math_ops.add(sw_t, grad, name="b_acc_add")
        nxt = control_flow_ops.next_iteration(add, name="b_acc")
        merge_acc.op._update_input(1, nxt)
        result = control_flow_ops.exit(sw_f, name="b_acc")
    grad_ctx.loop_exits.append(result)
    return result
