"""Gradients of rill.graph.ops.logging_ops."""

from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.ops.logging_ops import check_numerics

not_differentiable("Assert")


@register_gradient("Print")
def _print_grad(op, grad):
    """dinput = g; the printed data get none"""
    return [grad] + [None] * (len(op.inputs) - 1)


@register_gradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    """dtensor = CheckNumerics(g): a NaN or infinity in the gradient fails the step too"""
    return check_numerics(grad, "Not a number (NaN) or infinity (Inf) values detected in gradient. "
                          + op.get_attr("message"))  # fmt: skip
