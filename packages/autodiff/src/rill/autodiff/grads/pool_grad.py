"""Gradient functions for rill.graph.ops.pool_ops: MaxPool and AvgPool through their gradient
ops, and AvgPoolGrad's own gradient.

MaxPoolGrad's own gradient (through MaxPoolGradGrad) is in pool_extra_grad.
"""

from __future__ import annotations

from rill.autodiff.indexed_slices import IndexedSlices
from rill.autodiff.registry import register_gradient
from rill.graph.graph import Tensor, get_default_graph
from rill.graph.ops import array_ops

_WINDOW = ("ksize", "strides", "padding", "data_format")


def _create(op_type: str, inputs, attrs: dict) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=op_type).outputs[0]


def _dense(g):
    return g._as_tensor() if isinstance(g, IndexedSlices) else g


@register_gradient("MaxPool")
def _max_pool_grad(op, grad):
    """dinput = g routed to the first maximum of each window"""
    attrs = {k: op.attrs[k] for k in (*_WINDOW, "explicit_paddings")}
    return _create("MaxPoolGrad", [op.inputs[0], op.outputs[0], _dense(grad)], attrs)


@register_gradient("AvgPool")
def _avg_pool_grad(op, grad):
    """dvalue = g spread evenly over each window's positions inside the input"""
    attrs = {k: op.attrs[k] for k in _WINDOW}
    # shape() is a constant when the input's shape is static.
    shape = array_ops.shape(op.inputs[0], name="orig_input_shape")
    return _create("AvgPoolGrad", [shape, _dense(grad)], attrs)


@register_gradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    """dgrad = AvgPool(g) (AvgPoolGrad is AvgPool's transpose); the shape gets none"""
    attrs = {k: op.attrs[k] for k in _WINDOW}
    return None, _create("AvgPool", [_dense(grad)], attrs)
