"""Gradients for rill.graph.ops.manip_ops and rill.graph.ops.diag_ops (TensorFlow's formulas;
Einsum's for equations without a subscript repeated inside one input)."""

from __future__ import annotations

import numpy as np

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.errors import GraphTypeError
from rill.graph.ops import array_ops, diag_ops, logic_ops, math_ops, reduction_ops, reshape_ops
from rill.graph.ops import manip_ops as mo
from rill.graph.ops import special_math_ops as sm

not_differentiable("LinSpace")


@register_gradient("Cumprod")
def _cumprod_grad(op, grad):
    """dx = div_no_nan(cumsum(cumprod(x)·g, reversed), x)"""
    x, axis = op.inputs
    ex, rev = op.attrs["exclusive"], op.attrs["reverse"]
    prod = mo.cumprod(x, axis, exclusive=ex, reverse=rev)
    out = reduction_ops.cumsum(prod * _dense(grad), axis, exclusive=ex, reverse=not rev)
    return sm.div_no_nan(out, x), None


@register_gradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(op, grad):
    """dx = exp(clse(log g⁺ - y, reversed) + x) - exp(clse(log g⁻ - y, reversed) + x)"""
    x, axis = op.inputs
    y = op.outputs[0]
    grad = _dense(grad)
    ex, rev = op.attrs["exclusive"], op.attrs["reverse"]
    lowest = array_ops.fill(
        array_ops.shape(grad), np.finfo(grad.dtype.np).min.astype(grad.dtype.np)
    )
    zero = array_ops.zeros_like(grad)
    safe_pos = logic_ops.select_v2(logic_ops.greater(grad, zero), grad, array_ops.ones_like(grad))
    safe_neg = logic_ops.select_v2(logic_ops.less(grad, zero), -grad, array_ops.ones_like(grad))
    log_pos = logic_ops.select_v2(logic_ops.greater(grad, zero), math_ops.log(safe_pos), lowest)
    log_neg = logic_ops.select_v2(logic_ops.less(grad, zero), math_ops.log(safe_neg), lowest)
    pos = math_ops.exp(mo.cumulative_logsumexp(log_pos - y, axis, ex, not rev) + x)
    neg = math_ops.exp(mo.cumulative_logsumexp(log_neg - y, axis, ex, not rev) + x)
    return pos - neg, None


@register_gradient("Roll")
def _roll_grad(op, grad):
    """dx = roll(g, -shift, axis)"""
    _, shift, axis = op.inputs
    return mo.roll(_dense(grad), -shift, axis), None, None


def _einsum_part(grad, out: str, others: list[tuple[str, object]], target: str, x):
    """The gradient for one operand with subscripts `target`: contract g with the other operands
    onto the subscripts that appear in them or in the output, then broadcast over the rest."""
    if len(set(target)) != len(target):
        raise GraphTypeError(
            f"the gradient of einsum needs no repeated subscript within one input, got {target!r}"
        )
    present = "".join(c for c in target if c in out or any(c in s for s, _ in others))
    spec = ",".join([out] + [s for s, _ in others]) + "->" + present
    g = mo.einsum(spec, grad, *[t for _, t in others])
    if present != target:
        for i, c in enumerate(target):
            if c not in present:
                g = reshape_ops.expand_dims(g, i)
        g = g + array_ops.zeros_like(x)
    return g


@register_gradient("Einsum")
def _einsum_grad(op, grad):
    """dxᵢ = einsum(g and the other inputs → xᵢ's subscripts), broadcast over subscripts that only
    xᵢ has; a dimension that xᵢ broadcast (size 1 against n) is summed back."""
    xs = list(op.inputs)
    subs, out = mo.parse_einsum(op.attrs["equation"], [x.shape.rank for x in xs])
    grad = _dense(grad)
    grads = []
    for i, (s, x) in enumerate(zip(subs, xs)):
        others = [(subs[j], xs[j]) for j in range(len(xs)) if j != i]
        g = _einsum_part(grad, out, others, s, x)
        # sum dimensions where x had size 1 but the contraction had more
        if x.shape.rank is not None and g.shape.rank == x.shape.rank:
            axes = [k for k, (a, b) in enumerate(zip(x.shape.dims, g.shape.dims))
                    if a == 1 and b != 1]  # fmt: skip
            if axes:
                g = reduction_ops.reduce_sum(g, axes, keepdims=True)
        grads.append(g)
    return grads


@register_gradient("Diag")
def _diag_grad(op, grad):
    """dx = diag_part(g)"""
    return diag_ops.diag_part(_dense(grad))


@register_gradient("DiagPart")
def _diag_part_grad(op, grad):
    """dx = diag(g)"""
    return diag_ops.diag(_dense(grad))


@register_gradient("MatrixBandPart")
def _band_grad(op, grad):
    """dx = band_part(g, num_lower, num_upper)"""
    _, lo, up = op.inputs
    return diag_ops.matrix_band_part(_dense(grad), lo, up), None, None


def _k(op):
    return op.inputs[1]


@register_gradient("MatrixDiagV3")
def _matrix_diag_v3_grad(op, grad):
    """d diagonal = diag_part(g, k)"""
    align = op.attrs["align"]
    return diag_ops.matrix_diag_part(_dense(grad), k=_k(op), align=align), None, None, None, None


@register_gradient("MatrixDiag")
def _matrix_diag_grad(op, grad):
    """d diagonal = diag_part(g)"""
    return diag_ops.matrix_diag_part(_dense(grad))


@register_gradient("MatrixDiagPartV3")
def _matrix_diag_part_v3_grad(op, grad):
    """dx = set_diag(zeros_like(x), g, k)"""
    x = op.inputs[0]
    align = op.attrs["align"]
    gx = diag_ops.matrix_set_diag(array_ops.zeros_like(x), _dense(grad), k=_k(op), align=align)
    return gx, None, None


@register_gradient("MatrixDiagPart")
def _matrix_diag_part_grad(op, grad):
    """dx = set_diag(zeros_like(x), g)"""
    return diag_ops.matrix_set_diag(array_ops.zeros_like(op.inputs[0]), _dense(grad))


@register_gradient("MatrixSetDiagV3")
def _matrix_set_diag_v3_grad(op, grad):
    """dx = set_diag(g, 0, k), d diagonal = diag_part(g, k)"""
    x, d, k = op.inputs
    align = op.attrs["align"]
    grad = _dense(grad)
    gx = diag_ops.matrix_set_diag(grad, array_ops.zeros_like(d), k=k, align=align)
    return gx, diag_ops.matrix_diag_part(grad, k=k, align=align), None


@register_gradient("MatrixSetDiag")
def _matrix_set_diag_grad(op, grad):
    """dx = set_diag(g, 0), d diagonal = diag_part(g)"""
    grad = _dense(grad)
    gx = diag_ops.matrix_set_diag(grad, array_ops.zeros_like(op.inputs[1]))
    return gx, diag_ops.matrix_diag_part(grad)
