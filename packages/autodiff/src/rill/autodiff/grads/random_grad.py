"""Gradients of the random ops: RandomGamma's and StatelessRandomGammaV2/V3's (TensorFlow's
implicit reparameterization through RandomGammaGrad), StatelessParameterizedTruncatedNormal's
(implicit differentiation of the truncated normal's CDF, as TensorFlow); the stateless integer,
truncated-normal, categorical, Poisson, binomial, shuffle and crop samplers have none."""

from __future__ import annotations

import numpy as np

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.ops import array_ops, math_ops, reduction_ops, reshape_ops, special_math_ops


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


def _stateless_gamma_alpha_grad(shape, alpha, sample, grad):
    """The sample dimensions are shape's leading ones beyond alpha's rank; alpha is given that
    many leading unit dimensions, and the product summed over them."""
    n = array_ops.size(shape) - array_ops.rank(alpha)
    lead = array_ops.ones(reshape_ops.expand_dims(n, 0), dtype=dtypes.int32)
    alpha_b = reshape_ops.reshape(alpha, reshape_ops.concat([lead, array_ops.shape(alpha)], 0))
    partial = get_default_graph().create_op("RandomGammaGrad", [alpha_b, sample]).outputs[0]
    return reduction_ops.reduce_sum(_dense(grad) * partial, math_ops.range(0, n))


@register_gradient("StatelessRandomGammaV2")
def _stateless_random_gamma_v2_grad(op, grad):
    shape, _, alpha = op.inputs
    return None, None, _stateless_gamma_alpha_grad(shape, alpha, op.outputs[0], grad)


@register_gradient("StatelessRandomGammaV3")
def _stateless_random_gamma_v3_grad(op, grad):
    shape, alpha = op.inputs[0], op.inputs[4]
    g = _stateless_gamma_alpha_grad(shape, alpha, op.outputs[0], grad)
    return None, None, None, None, g


def _ndtr(x):
    """The standard normal CDF through erf near 0 and erfc in the tails."""
    half_sqrt2 = convert_to_tensor(0.5 * np.sqrt(2.0), dtype=x.dtype)
    w = x * half_sqrt2
    z = math_ops.abs(w)
    one, two = convert_to_tensor(1.0, dtype=x.dtype), convert_to_tensor(2.0, dtype=x.dtype)
    tails = array_ops.where(w > 0, two - special_math_ops.erfc(z), special_math_ops.erfc(z))
    return convert_to_tensor(0.5, dtype=x.dtype) * array_ops.where(z < half_sqrt2, one + math_ops.erf(w),
                                                         tails)  # fmt: skip


@register_gradient("StatelessParameterizedTruncatedNormal")
def _stateless_parameterized_truncated_normal_grad(op, grad):
    """With s, a, b the standardized sample and bounds and F the truncated CDF at the sample:
    d/dmean = 1, d/dstddev = s, d/dmaxval = exp((s^2 - b^2) / 2) F, d/dminval =
    exp((s^2 - a^2) / 2) (1 - F); each summed over the sample dimensions, then to the
    parameter's own shape."""
    shape, _, mean, stddev, lo, hi = op.inputs
    grad = _dense(grad)
    dt = mean.dtype
    a, b = (lo - mean) / stddev, (hi - mean) / stddev
    s = (op.outputs[0] - mean) / stddev
    cdf = (_ndtr(s) - _ndtr(a)) / (_ndtr(b) - _ndtr(a))
    info = np.finfo(dt.np)
    cdf = special_math_ops.clip_by_value(cdf, float(info.tiny), float(1 - info.eps))
    half = convert_to_tensor(0.5, dtype=dt)
    d_hi = math_ops.exp(half * (s * s - b * b) + math_ops.log(cdf))
    d_lo = math_ops.exp(half * (s * s - a * a) + math_ops.log1p(-cdf))
    params = (mean, stddev, lo, hi)
    shapes = [array_ops.shape(p) for p in params]
    bshape = shapes[0]
    for sh in shapes[1:]:
        bshape = get_default_graph().create_op("BroadcastArgs", [sh, bshape]).outputs[0]
    extra = math_ops.range(0, array_ops.size(shape) - array_ops.size(bshape))
    out = []
    for d, sh in zip((array_ops.ones_like(s), s, d_lo, d_hi), shapes):
        g = reduction_ops.reduce_sum(grad * d, extra)
        _, r = array_ops.broadcast_gradient_args(bshape, sh)
        out.append(reshape_ops.reshape(reduction_ops.reduce_sum(g, r, keepdims=True), sh))
    return (None, None, *out)


not_differentiable(
    "StatelessMultinomial",
    "StatelessRandomPoisson",
    "StatelessRandomBinomial",
    "StatelessShuffle",
    "StatelessRandomGetKeyCounterAlg",
    "StatelessRandomGetAlg",
    "StatelessSampleDistortedBoundingBox",
    "RandomGammaGrad",
    "BroadcastArgs",
    "StatelessTruncatedNormal",
    "StatelessRandomUniformInt",
    "StatelessRandomUniformFullInt",
    "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2",
    "StatelessRandomUniformFullIntV2",
)
