"""The tanh approximation of GELU as imported models spell it out, for the remapper: PyTorch's
export of GELU(approximate="tanh") (and GPT-2's hand-written gelu) is the chain

    Mul(x, x) → Mul(x, ·) → Mul(a, ·) → Add(x, ·) → Mul(b, ·) → Tanh → Add(c, ·) → Mul(x, ·)
    → Mul(d, ·)

with scalar constants a, b, c, d of x's dtype (either operand order of each Mul and Add). It
becomes one _FusedTanhGelu(x) with coefficients [a, b, c, d], which does the same operations in
the same order (the same bits) without the eight intermediate tensors.
"""

from __future__ import annotations

from rill.exec.plan.ir import PlanNode
from rill.exec.plan.remap_activations import _scalar
from rill.graph import dtypes

__all__ = ["tanh_gelu_chain"]

_TYPES = frozenset({dtypes.float32, dtypes.float64})
_ADDS = ("Add", "AddV2")


def tanh_gelu_chain(tanh: PlanNode, consumers, free):
    """(x edge, [a, b, c, d], the chain's nodes in order, the last one last) for the chain
    around the Tanh node `tanh`, or None. `free(n)`: whether n's value may disappear."""
    if tanh.type != "Tanh" or tanh.out_dtypes[0] not in _TYPES or len(tanh.inputs) != 1:
        return None
    dt = tanh.out_dtypes[0].np
    dev = tanh.device

    def sole_use(n):
        uses = consumers[n]
        if len(uses) != 1 or not free(n) or uses[0][1] != 0 or uses[0][0].device is not dev:
            return None
        return uses[0][0]

    def split(n, types):
        """(constant value, the other input edge) of a binary node n of `types` with one
        scalar Const operand of dtype dt; else None."""
        if n.type not in types or len(n.inputs) != 2 or n.device is not dev:
            return None
        for i in (0, 1):
            v = _scalar(n.inputs[i], dt)
            if v is not None:
                return float(v), n.inputs[1 - i]
        return None

    def producer(edge, types):
        src, idx = edge
        return src if idx == 0 and src.type in types and src.out_dtypes[0].np == dt else None

    m3 = producer(tanh.inputs[0], ("Mul",))
    if m3 is None or sole_use(m3) is not tanh or (got := split(m3, ("Mul",))) is None:
        return None
    b, a_edge = got
    add = producer(a_edge, _ADDS)
    if add is None or sole_use(add) is not m3 or len(add.inputs) != 2:
        return None
    for j in (0, 1):
        x_edge, m2 = add.inputs[j], producer(add.inputs[1 - j], ("Mul",))
        if m2 is None or sole_use(m2) is not add or (got := split(m2, ("Mul",))) is None:
            continue
        a, m1_edge = got
        m1 = producer(m1_edge, ("Mul",))
        if m1 is None or sole_use(m1) is not m2 or len(m1.inputs) != 2:
            continue
        if x_edge not in m1.inputs or m1.device is not dev:
            continue
        m = producer(m1.inputs[1] if m1.inputs[0] == x_edge else m1.inputs[0], ("Mul",))
        if m is None or sole_use(m) is not m1 or list(m.inputs) != [x_edge, x_edge]:
            continue
        if m.device is not dev:
            continue
        break
    else:
        return None
    a1 = sole_use(tanh)
    if a1 is None or (got := split(a1, _ADDS)) is None or got[1] != (tanh, 0):
        return None
    c = got[0]
    m4 = sole_use(a1)
    if m4 is None or m4.type != "Mul" or len(m4.inputs) != 2:
        return None
    if set(m4.inputs) != {x_edge, (a1, 0)}:
        return None
    m5 = sole_use(m4)
    if m5 is None or (got := split(m5, ("Mul",))) is None or got[1] != (m4, 0):
        return None
    d = got[0]
    src, idx = x_edge
    if src.out_dtypes[idx] != tanh.out_dtypes[0]:
        return None
    return x_edge, [a, b, c, d], [m, m1, m2, add, m3, tanh, a1, m4, m5]
