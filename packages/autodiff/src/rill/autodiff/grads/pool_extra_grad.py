"""Gradients for rill.graph.ops.pool_extra_ops, and MaxPoolGrad's own (through
MaxPoolGradGrad), as TensorFlow registers them."""

from __future__ import annotations

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.graph import get_default_graph
from rill.graph.ops import array_ops

not_differentiable("MaxPoolGradWithArgmax")


def _create(op_type, inputs, attrs):
    return get_default_graph().create_op(op_type, inputs, attrs, name=op_type).outputs[0]


def _attrs(op, names):
    return {k: op.attrs[k] for k in names}


@register_gradient("MaxPoolV2")
def _max_pool_v2_grad(op, grad):
    """dinput = MaxPoolGradV2(x, y, g, ksize, strides)"""
    x, ksize, strides = op.inputs
    a = _attrs(op, ("padding", "data_format"))
    return _create("MaxPoolGradV2", [x, op.outputs[0], _dense(grad), ksize, strides], a), None, None


@register_gradient("MaxPoolGrad")
def _max_pool_grad_grad(op, grad):
    """dgrad = MaxPoolGradGrad(x, y, g); the pooled input and output get zeros"""
    x, y, _ = op.inputs
    a = _attrs(op, ("ksize", "strides", "padding", "data_format"))
    if a["padding"] == "EXPLICIT":
        from rill.graph.errors import GraphTypeError

        raise GraphTypeError("MaxPoolGrad's gradient does not support EXPLICIT padding")
    gg = _create("MaxPoolGradGrad", [x, y, _dense(grad)], a)
    return array_ops.zeros_like(x), array_ops.zeros_like(y), gg


@register_gradient("MaxPoolGradV2")
def _max_pool_grad_v2_grad(op, grad):
    """dgrad = MaxPoolGradGradV2(x, y, g, ksize, strides)"""
    x, y, _, ksize, strides = op.inputs
    a = _attrs(op, ("padding", "data_format"))
    gg = _create("MaxPoolGradGradV2", [x, y, _dense(grad), ksize, strides], a)
    return array_ops.zeros_like(x), array_ops.zeros_like(y), gg, None, None


@register_gradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op, grad):
    """dgrad = MaxPoolGrad(x, y, g)"""
    x, y, _ = op.inputs
    a = _attrs(op, ("ksize", "strides", "padding", "data_format"))
    g = _create("MaxPoolGrad", [x, y, _dense(grad)], a)
    return array_ops.zeros_like(x), array_ops.zeros_like(y), g


@register_gradient("MaxPoolWithArgmax")
def _max_pool_with_argmax_grad(op, grad, _unused_argmax_grad):
    """dinput = MaxPoolGradWithArgmax(x, g, argmax)"""
    a = _attrs(op, ("ksize", "strides", "padding", "include_batch_in_index", "Targmax"))
    return _create("MaxPoolGradWithArgmax", [op.inputs[0], _dense(grad), op.outputs[1]], a)


def _window_attrs(op, names):
    return {k: op.attrs[k] for k in names}


@register_gradient("Conv3D")
def _conv3d_grad(op, grad):
    """dinput = Conv3DBackpropInputV2(shape(input), filter, g); dfilter =
    Conv3DBackpropFilterV2(input, shape(filter), g)"""
    x, f = op.inputs
    a = _window_attrs(op, ("strides", "padding", "data_format", "dilations"))
    grad = _dense(grad)
    dx = _create("Conv3DBackpropInputV2", [array_ops.shape(x), f, grad], a)
    df = _create("Conv3DBackpropFilterV2", [x, array_ops.shape(f), grad], a)
    return dx, df


@register_gradient("MaxPool3D")
def _max_pool3d_grad(op, grad):
    """dinput = MaxPool3DGrad(x, y, g)"""
    a = _window_attrs(op, ("ksize", "strides", "padding", "data_format"))
    return _create("MaxPool3DGrad", [op.inputs[0], op.outputs[0], _dense(grad)], a)


@register_gradient("AvgPool3D")
def _avg_pool3d_grad(op, grad):
    """dinput = AvgPool3DGrad(shape(x), g)"""
    a = _window_attrs(op, ("ksize", "strides", "padding", "data_format"))
    return _create("AvgPool3DGrad", [array_ops.shape(op.inputs[0]), _dense(grad)], a)


not_differentiable(
    "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "MaxPool3DGrad", "AvgPool3DGrad"
)
