"""Gradients for rill.graph.ops.segment_ops, with TensorFlow's formulas: a max/min routes its
gradient to the elements equal to the result (split evenly among ties), a product divides the
product by the element (with the zeros handled apart), a scatter's updates get the gradient
gathered at their indices."""

from __future__ import annotations

import numpy as np

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.ops import array_ops, gather_ops, logic_ops, math_ops
from rill.graph.ops import segment_ops as so
from rill.graph.ops.grad_ops import unsorted_segment_sum

not_differentiable(
    "ResourceScatterNdUpdate", "ResourceScatterNdAdd", "ResourceScatterNdSub", "ResourceGatherNd"
)


def _gather_drop_negatives(params, ids, zero_clipped=None, is_positive=None):
    """params[ids] with 0 where an id is negative (as TensorFlow's _GatherDropNegatives)."""
    zero = np.array(0, ids.dtype.np)
    gathered = gather_ops.gather(params, math_ops.maximum(ids, zero))
    if is_positive is None:
        is_positive = logic_ops.greater_equal(ids, zero)
        # broadcast the per-slice condition over each slice
        r = gathered.shape.rank
        for _ in range((r or 0) - (ids.shape.rank or 0)):
            is_positive = array_ops.expand_dims(is_positive, -1)
        is_positive = logic_ops.logical_and(
            is_positive, array_ops.ones_like(gathered, dtype="bool")
        )
    return (
        logic_ops.select_v2(is_positive, gathered, array_ops.zeros_like(gathered)),
        is_positive,
    )


@register_gradient("SegmentSum")
def _segment_sum_grad(op, grad):
    """d data = g[ids]"""
    return gather_ops.gather(_dense(grad), op.inputs[1]), None


@register_gradient("SegmentMean")
def _segment_mean_grad(op, grad):
    """d data = (g / count)[ids]"""
    data, ids = op.inputs
    ones = array_ops.ones_like(gather_ops.gather(data, ids))
    counts = so.segment_sum(ones, ids)
    return gather_ops.gather(_dense(grad) / counts, ids), None


def _min_max_grad(op, grad, sorted_: bool):
    data, ids = op.inputs[0], op.inputs[1]
    out = op.outputs[0]
    grad = _dense(grad)
    if sorted_:
        gathered_out = gather_ops.gather(out, ids)
        selected = logic_ops.equal(data, gathered_out)
        num = so.segment_sum(math_ops.cast(selected, grad.dtype), ids)
        weighted = grad / num
        picked = gather_ops.gather(weighted, ids)
    else:
        gathered_out, positive = _gather_drop_negatives(out, ids)
        selected = logic_ops.logical_and(logic_ops.equal(data, gathered_out), positive)
        num = unsorted_segment_sum(math_ops.cast(selected, grad.dtype), ids, op.inputs[2])
        weighted = grad / num
        picked, _ = _gather_drop_negatives(weighted, ids, is_positive=positive)
    return logic_ops.select_v2(selected, picked, array_ops.zeros_like(picked))


@register_gradient("SegmentMax")
@register_gradient("SegmentMin")
def _segment_min_max_grad(op, grad):
    """d data = g[ids] / #ties where data equals the result, else 0"""
    return _min_max_grad(op, grad, True), None


@register_gradient("UnsortedSegmentMax")
@register_gradient("UnsortedSegmentMin")
def _unsorted_segment_min_max_grad(op, grad):
    """as SegmentMax's, with dropped (negative) ids getting 0"""
    return _min_max_grad(op, grad, False), None, None


def _prod_grad(op, grad, sorted_: bool):
    data, ids = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    zero = array_ops.zeros_like(data)
    is_zero = logic_ops.equal(data, zero)
    non_zero = logic_ops.select_v2(is_zero, array_ops.ones_like(data), data)
    if sorted_:
        num_zeros = so.segment_sum(math_ops.cast(is_zero, "int32"), ids)
        non_zero_prod = so.segment_prod(non_zero, ids)

        def gather(x):
            return gather_ops.gather(x, ids)
    else:
        n = op.inputs[2]
        num_zeros = unsorted_segment_sum(math_ops.cast(is_zero, "int32"), ids, n)
        non_zero_prod = so.unsorted_segment_prod(non_zero, ids, n)

        def gather(x):
            return _gather_drop_negatives(x, ids)[0]

    grad = logic_ops.select_v2(
        logic_ops.greater(num_zeros, np.int32(1)), array_ops.zeros_like(grad), grad
    )
    by_el = gather(op.outputs[0]) / non_zero
    partial = logic_ops.select_v2(is_zero, gather(non_zero_prod), by_el)
    return gather(grad) * partial


@register_gradient("SegmentProd")
def _segment_prod_grad(op, grad):
    """d data = g[ids]·prod/x (the product of the others where x is the one zero; 0 with two)"""
    return _prod_grad(op, grad, True), None


@register_gradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op, grad):
    """as SegmentProd's, with dropped (negative) ids getting 0"""
    return _prod_grad(op, grad, False), None, None


@register_gradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op, grad):
    """d tensor = g with the updated places zeroed; d updates = g[indices]"""
    _, indices, updates = op.inputs
    grad = _dense(grad)
    gt = so.tensor_scatter_update(grad, indices, array_ops.zeros_like(updates))
    return gt, None, gather_ops.gather_nd(grad, indices)


@register_gradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op, grad):
    """d tensor = g; d updates = g[indices]"""
    grad = _dense(grad)
    return grad, None, gather_ops.gather_nd(grad, op.inputs[1])


@register_gradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op, grad):
    """d tensor = g; d updates = -g[indices]"""
    grad = _dense(grad)
    return grad, None, -gather_ops.gather_nd(grad, op.inputs[1])


@register_gradient("TensorScatterMax")
@register_gradient("TensorScatterMin")
def _tensor_scatter_min_max_grad(op, grad):
    """g split evenly among the tensor element and the updates equal to the result"""
    x, indices, y = op.inputs
    out = op.outputs[0]
    grad = _dense(grad)
    x_ind = math_ops.cast(logic_ops.equal(x, out), grad.dtype)
    y_out = gather_ops.gather_nd(out, indices)
    y_ind = math_ops.cast(logic_ops.equal(y, y_out), grad.dtype)
    ys_ind = gather_ops.scatter_nd(indices, y_ind, array_ops.shape(x, out_type=indices.dtype))
    ind = x_ind + ys_ind
    gx = grad * x_ind / ind
    gy = gather_ops.gather_nd(grad / ind, indices) * y_ind
    return gx, None, gy
