"""Gradients for rill.graph.ops.special_math_ops, with TensorFlow's formulas (Betainc, as
TensorFlow's, has a gradient in x only)."""

from __future__ import annotations

import numpy as np

from rill.autodiff.grads.math_grad import _dense, _scalar, unbroadcast
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.ops import array_ops, logic_ops, math_ops
from rill.graph.ops import special_math_ops as sm

not_differentiable(
    "IsFinite",
    "IsNan",
    "IsInf",
    "ApproximateEqual",
    "TruncateDiv",
    "TruncateMod",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Invert",
    "LeftShift",
    "RightShift",
    "PopulationCount",
)


def _x(op):
    return math_ops.conj(op.inputs[0])


def _y(op):
    return math_ops.conj(op.outputs[0])


def _one(t):
    return _scalar(1, t.dtype)


@register_gradient("Sin")
def _sin_grad(op, grad):
    """dx = g·cos(x)"""
    return _dense(grad) * math_ops.cos(_x(op))


@register_gradient("Cos")
def _cos_grad(op, grad):
    """dx = -g·sin(x)"""
    return -(_dense(grad) * sm.sin(_x(op)))


@register_gradient("Tan")
def _tan_grad(op, grad):
    """dx = g / cos²(x)"""
    c = math_ops.cos(_x(op))
    return _dense(grad) * math_ops.reciprocal(c * c)


@register_gradient("Asin")
def _asin_grad(op, grad):
    """dx = g / √(1 - x²)"""
    x = _x(op)
    return _dense(grad) * math_ops.rsqrt(_one(x) - x * x)


@register_gradient("Acos")
def _acos_grad(op, grad):
    """dx = -g / √(1 - x²)"""
    x = _x(op)
    return -_dense(grad) * math_ops.rsqrt(_one(x) - x * x)


@register_gradient("Atan")
def _atan_grad(op, grad):
    """dx = g / (1 + x²)"""
    x = _x(op)
    return _dense(grad) * math_ops.reciprocal(_one(x) + x * x)


@register_gradient("Sinh")
def _sinh_grad(op, grad):
    """dx = g·cosh(x)"""
    return _dense(grad) * sm.cosh(_x(op))


@register_gradient("Cosh")
def _cosh_grad(op, grad):
    """dx = g·sinh(x)"""
    return _dense(grad) * sm.sinh(_x(op))


@register_gradient("Asinh")
def _asinh_grad(op, grad):
    """dx = g / cosh(y)"""
    return _dense(grad) * math_ops.reciprocal(sm.cosh(_y(op)))


@register_gradient("Acosh")
def _acosh_grad(op, grad):
    """dx = g / sinh(y)"""
    return _dense(grad) * math_ops.reciprocal(sm.sinh(_y(op)))


@register_gradient("Atanh")
def _atanh_grad(op, grad):
    """dx = g / (1 - x²)"""
    x = _x(op)
    return _dense(grad) * math_ops.reciprocal(_one(x) - x * x)


@register_gradient("Expm1")
def _expm1_grad(op, grad):
    """dx = g·exp(x)"""
    return _dense(grad) * math_ops.exp(_x(op))


@register_gradient("Erfc")
def _erfc_grad(op, grad):
    """dx = -g·(2/√π)·exp(-x²)"""
    x = _x(op)
    return _dense(grad) * _scalar(-2 / np.sqrt(np.pi), x.dtype) * math_ops.exp(-(x * x))


@register_gradient("Erfinv")
def _erfinv_grad(op, grad):
    """dx = g·(√π/2)·exp(y²)"""
    y = _y(op)
    return _dense(grad) * _scalar(np.sqrt(np.pi) / 2, y.dtype) * math_ops.exp(y * y)


@register_gradient("Lgamma")
def _lgamma_grad(op, grad):
    """dx = g·ψ(x)"""
    return _dense(grad) * sm.digamma(_x(op))


@register_gradient("Digamma")
def _digamma_grad(op, grad):
    """dx = g·ψ⁽¹⁾(x)"""
    x = _x(op)
    return _dense(grad) * sm.polygamma(array_ops.ones_like(x), x)


@register_gradient("Polygamma")
def _polygamma_grad(op, grad):
    """da = None (a is an order), dx = g·ψ⁽ᵃ⁺¹⁾(x)"""
    a, x = op.inputs
    gx = _dense(grad) * sm.polygamma(a + _one(a), x)
    return unbroadcast(a, x, None, gx)


@register_gradient("Zeta")
def _zeta_grad(op, grad):
    """dx = None (TensorFlow has no gradient in s), dq = -g·x·ζ(x + 1, q)"""
    x, q = op.inputs
    gq = -_dense(grad) * x * sm.zeta(x + _one(x), q)
    return unbroadcast(x, q, None, gq)


@register_gradient("Atan2")
def _atan2_grad(op, grad):
    """dy = g·x / (x² + y²), dx = -g·y / (x² + y²)"""
    y, x = op.inputs
    inv = _dense(grad) * math_ops.reciprocal(x * x + y * y)
    return unbroadcast(y, x, x * inv, -y * inv)


@register_gradient("DivNoNan")
def _div_no_nan_grad(op, grad):
    """dx = div_no_nan(g, y), dy = g·div_no_nan(div_no_nan(-x, y), y)"""
    grad = _dense(grad)
    x, y = op.inputs
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    gx = sm.div_no_nan(grad, cy)
    gy = grad * sm.div_no_nan(sm.div_no_nan(-cx, cy), cy)
    return unbroadcast(x, y, gx, gy)


@register_gradient("MulNoNan")
def _mul_no_nan_grad(op, grad):
    """dx = mul_no_nan(g, y), dy = mul_no_nan(x, g)"""
    grad = _dense(grad)
    x, y = op.inputs
    return unbroadcast(x, y, sm.multiply_no_nan(grad, y), sm.multiply_no_nan(x, grad))


def _not_zero(x):
    zero = array_ops.zeros_like(x)
    return logic_ops.select_v2(logic_ops.not_equal(x, zero), array_ops.ones_like(x), zero)


@register_gradient("Xlogy")
def _xlogy_grad(op, grad):
    """dx = g·xlogy(x ≠ 0, y), dy = g·xdivy(x, y)"""
    grad = _dense(grad)
    x, y = op.inputs
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    return unbroadcast(x, y, grad * sm.xlogy(_not_zero(cx), cy), grad * sm.xdivy(cx, cy))


@register_gradient("Xlog1py")
def _xlog1py_grad(op, grad):
    """dx = g·xlog1py(x ≠ 0, y), dy = g·xdivy(x, y + 1)"""
    grad = _dense(grad)
    x, y = op.inputs
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    gx = grad * sm.xlog1py(_not_zero(cx), cy)
    gy = grad * sm.xdivy(cx, cy + _one(cy))
    return unbroadcast(x, y, gx, gy)


@register_gradient("Xdivy")
def _xdivy_grad(op, grad):
    """dx = g·xdivy(x ≠ 0, y), dy = g·xdivy(-x, y²)"""
    grad = _dense(grad)
    x, y = op.inputs
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    gx = grad * sm.xdivy(_not_zero(cx), cy)
    gy = grad * sm.xdivy(-cx, cy * cy)
    return unbroadcast(x, y, gx, gy)


@register_gradient("ClipByValue")
def _clip_by_value_grad(op, grad):
    """dt = g where min ≤ t ≤ max; dmin = Σ g where t < min; dmax = Σ g where t > max"""
    grad = _dense(grad)
    t, lo, hi = op.inputs
    zeros = array_ops.zeros_like(grad)
    below = logic_ops.less(t, lo)
    above = logic_ops.greater(t, hi)
    inside = logic_ops.logical_not(logic_ops.logical_or(below, above))
    gt = logic_ops.select_v2(inside, grad, zeros)
    glo = logic_ops.select_v2(below, grad, zeros)
    ghi = logic_ops.select_v2(above, grad, zeros)
    _, glo = unbroadcast(t, lo, None, glo)
    _, ghi = unbroadcast(t, hi, None, ghi)
    return gt, glo, ghi


def _igamma_dx(a, x):
    """∂P(a, x)/∂x = exp(-x + (a - 1)·log x - lgamma(a))"""
    return math_ops.exp(-x + (a - _one(a)) * math_ops.log(x) - sm.lgamma(a))


@register_gradient("Igamma")
def _igamma_grad(op, grad):
    """da = g·IgammaGradA(a, x), dx = g·exp(-x + (a-1)·log x - lgamma(a))"""
    a, x = op.inputs
    grad = _dense(grad)
    return unbroadcast(a, x, grad * sm.igamma_grad_a(a, x), grad * _igamma_dx(a, x))


@register_gradient("Igammac")
def _igammac_grad(op, grad):
    """the negatives of Igamma's"""
    a, x = op.inputs
    grad = _dense(grad)
    return unbroadcast(a, x, -grad * sm.igamma_grad_a(a, x), -grad * _igamma_dx(a, x))


@register_gradient("Betainc")
def _betainc_grad(op, grad):
    """dx = g·x^(a-1)·(1-x)^(b-1) / B(a, b); a and b get none (as in TensorFlow)"""
    a, b, x = op.inputs
    one = _one(x)
    log_beta = sm.lgamma(a) + sm.lgamma(b) - sm.lgamma(a + b)
    partial = math_ops.exp((a - one) * math_ops.log(x) + (b - one) * sm.xlog1py(one, -x) - log_beta)
    gx = _dense(grad) * partial
    from rill.autodiff.grads.math_grad import broadcast_plan, sum_to

    plan = broadcast_plan(x.shape, [a.shape, b.shape])
    if plan is not None:
        gx = sum_to(gx, x, plan)
    return None, None, gx


not_differentiable("IgammaGradA")
