"""Gradients of rill.graph.ops.extra_ops."""

from __future__ import annotations

from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.ops.extra_ops import cross

not_differentiable(
    # TensorFlow's Rint gradient is None: the function is piecewise constant.
    "Rint",
    "UnravelIndex",
    "ReadFile",
    "WriteFile",
    "StringStrip",
    "EncodeBase64",
    "DecodeBase64",
    "StringToHashBucket",
    "StringSplit",
)


@register_gradient("Cross")
def _cross_grad(op, grad):
    """da = b × g, db = g × a"""
    a, b = op.inputs
    return [cross(b, grad), cross(grad, a)]


@register_gradient("EnsureShape")
def _ensure_shape_grad(op, grad):
    """dx = g"""
    return [grad]
