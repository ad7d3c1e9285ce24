"""Layer normalization as the ONNX importer spells it out (rill.graph.onnx.import_nn's
LayerNormalization over the last axis, with a bias), for the remapper:

    m = Mean(x, [-1], keep_dims)      v = Mean(SquaredDifference(x, m), [-1], keep_dims)
    y = AddV2(Mul(Mul(Sub(x, m), Rsqrt(AddV2(v, eps))), scale), offset)

with eps a scalar Const and scale, offset vectors as long as x's (static) last axis, all of x's
float32/float64 dtype. It becomes one _FusedLayerNorm(x, scale, offset), whose compiled row loop
does the same operations in the same order (the same bits) without the nine kernels and their
intermediate tensors.
"""

from __future__ import annotations

import numpy as np

from rill.exec.plan.ir import PlanNode
from rill.exec.plan.remap_activations import _scalar
from rill.graph import dtypes

__all__ = ["layer_norm_chain"]

_TYPES = frozenset({dtypes.float32, dtypes.float64})
_ADDS = ("Add", "AddV2")


def layer_norm_chain(rsqrt: PlanNode, consumers, free):
    """(x edge, scale edge, offset edge, epsilon, the chain's nodes, the last one last) for the
    chain around the Rsqrt node `rsqrt`, or None."""
    if rsqrt.type != "Rsqrt" or rsqrt.out_dtypes[0] not in _TYPES:
        return None
    dt = rsqrt.out_dtypes[0].np
    dev = rsqrt.device

    def uses(n):
        return [u for u, _, _ in consumers[n]] if free(n) else None

    def sole_use(n):
        got = consumers[n]
        if len(got) != 1 or not free(n) or got[0][1] != 0 or got[0][0].device is not dev:
            return None
        return got[0][0]

    def node(edge, types):
        src, idx = edge
        ok = idx == 0 and src.type in types and src.device is dev and src.out_dtypes[0].np == dt
        return src if ok else None

    def last_axis_mean(n):
        """Whether n is Mean(·, [-1] or [rank - 1], keep_dims) over a static last axis."""
        if n.type != "Mean" or not n.attrs.get("keep_dims") or len(n.inputs) != 2:
            return False
        ax, shape = n.inputs[1][0], n.out_shapes[0] if n.out_shapes else None
        if ax.type != "Const" or shape is None or shape.rank is None:
            return False
        v = np.asarray(ax.attrs.get("value")).reshape(-1).tolist()
        return len(v) == 1 and v[0] in (-1, shape.rank - 1)

    add_eps = node(rsqrt.inputs[0], _ADDS)
    if add_eps is None or sole_use(add_eps) is not rsqrt or len(add_eps.inputs) != 2:
        return None
    for i in (0, 1):
        eps, var = _scalar(add_eps.inputs[i], dt), node(add_eps.inputs[1 - i], ("Mean",))
        if eps is not None and var is not None:
            break
    else:
        return None
    if sole_use(var) is not add_eps or not last_axis_mean(var):
        return None
    sq = node(var.inputs[0], ("SquaredDifference",))
    if sq is None or sole_use(sq) is not var:
        return None
    x_edge, m_edge = sq.inputs
    mean = node(m_edge, ("Mean",))
    if mean is None or not last_axis_mean(mean) or mean.inputs[0] != x_edge:
        return None
    mean_uses = uses(mean)
    if mean_uses is None or len(consumers[mean]) != 2:
        return None
    sub = [u for u in mean_uses if u is not sq]
    if len(sub) != 1 or sub[0].type != "Sub" or list(sub[0].inputs) != [x_edge, (mean, 0)]:
        return None
    sub = sub[0]
    if sub.device is not dev:
        return None
    mul = sole_use(sub)
    if mul is None or mul is not sole_use(rsqrt) or mul.type != "Mul":
        return None
    if set(mul.inputs) != {(sub, 0), (rsqrt, 0)}:
        return None
    mul2 = sole_use(mul)
    if mul2 is None or mul2.type != "Mul" or len(mul2.inputs) != 2 or mul2.inputs[0] != (mul, 0):
        return None
    add = sole_use(mul2)
    if add is None or add.type not in _ADDS or len(add.inputs) != 2 or add.inputs[0] != (mul2, 0):
        return None
    scale_edge, offset_edge = mul2.inputs[1], add.inputs[1]
    src, idx = x_edge
    xs = src.out_shapes[idx] if src.out_shapes else None
    if xs is None or xs.rank is None or xs.rank < 1 or src.out_dtypes[idx].np != dt:
        return None
    n = xs.dims[-1]
    if n is None:
        return None
    for e in (scale_edge, offset_edge):
        s, i = e
        shape = s.out_shapes[i] if s.out_shapes else None
        if shape is None or shape.rank != 1 or shape.dims[0] != n or s.out_dtypes[i].np != dt:
            return None
    chain = [mean, sq, var, add_eps, rsqrt, sub, mul, mul2, add]
    return x_edge, scale_edge, offset_edge, float(eps), chain
