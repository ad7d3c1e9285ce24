"""Gradients for rill.graph.ops.logging_ops, set_search_ops and image_ops."""

from __future__ import annotations

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.ops import image_ops, logging_ops

not_differentiable(
    "Assert",
    "StringFormat",
    "PrintV2",
    "Bucketize",
    "UpperBound",
    "LowerBound",
    "ListDiff",
    "UniqueWithCounts",
    "Bincount",
    "HistogramFixedWidth",
)


@register_gradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    """dx = check_numerics(g): a NaN or Inf in the gradient fails as in the forward pass"""
    return logging_ops.check_numerics(
        _dense(grad),
        f"Not a number (NaN) or infinity (Inf) values detected in gradient. {op.attrs['message']}",
    )


@register_gradient("CheckNumericsV2")
def _check_numerics_v2_grad(op, grad):
    """dx = check_numerics(g)"""
    return _check_numerics_grad(op, grad)


@register_gradient("Print")
def _print_grad(op, *grads):
    """dinput = g; the printed data get no gradient"""
    return [grads[0]] + [None] * (len(op.inputs) - 1)


@register_gradient("SpaceToDepth")
def _space_to_depth_grad(op, grad):
    """dx = depth_to_space(g)"""
    return image_ops.depth_to_space(_dense(grad), op.attrs["block_size"], op.attrs["data_format"])


@register_gradient("DepthToSpace")
def _depth_to_space_grad(op, grad):
    """dx = space_to_depth(g)"""
    return image_ops.space_to_depth(_dense(grad), op.attrs["block_size"], op.attrs["data_format"])
