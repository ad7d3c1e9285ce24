"""Gradients of the random ops: RandomGamma's (TensorFlow's implicit reparameterization through
RandomGammaGrad); the stateless integer and truncated-normal samplers have none."""

from __future__ import annotations

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.graph import get_default_graph
from rill.graph.ops import array_ops, math_ops, reduction_ops, reshape_ops


@register_gradient("RandomGamma")
def _random_gamma_grad(op, grad):
    """dalpha = sum over the sample dimensions of g * RandomGammaGrad(alpha, sample), alpha
    given leading unit dimensions to broadcast against the samples"""
    shape, alpha = op.inputs
    sample = op.outputs[0]
    n = array_ops.shape(shape)[0]  # the number of sample dimensions
    lead = array_ops.ones(reshape_ops.expand_dims(n, 0), dtype=shape.dtype)
    alpha_b = reshape_ops.reshape(
        alpha, reshape_ops.concat([lead, array_ops.shape(alpha, out_type=shape.dtype)], 0)
    )
    partial = get_default_graph().create_op("RandomGammaGrad", [alpha_b, sample]).outputs[0]
    axes = math_ops.range(0, n)
    return None, reduction_ops.reduce_sum(_dense(grad) * partial, axes)


not_differentiable(
    "RandomGammaGrad",
    "BroadcastArgs",
    "StatelessTruncatedNormal",
    "StatelessRandomUniformInt",
    "StatelessRandomUniformFullInt",
    "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2",
    "StatelessRandomUniformFullIntV2",
)
