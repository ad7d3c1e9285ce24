"""The activations the remapper folds into a fused product's epilogue, as chains in the plan.

TensorFlow's four (Relu, Relu6, Elu, LeakyRelu) are one op each. Imported models spell others out
(see rill.graph.onnx.import_nn): Sigmoid; Swish, x · Sigmoid(x) (PyTorch's SiLU); HardSigmoid,
Maximum(Minimum(AddV2(Mul(1/6, x), 1/2), 1), 0); HardSwish, x · HardSigmoid(x). Each is matched
as exactly that chain with exactly those constants (scalars in the product's dtype), every
intermediate used only inside the chain, not fetched and not a control input.
"""

from __future__ import annotations

import numpy as np

from rill.exec.plan.ir import PlanNode
from rill.graph import dtypes

__all__ = ["activation_chain"]

_SINGLE = frozenset({"Relu", "Relu6", "Elu", "LeakyRelu"})
# The chains' dtypes: their fused epilogue works in float32 and float64 only.
_EXTRA_TYPES = frozenset({dtypes.float32, dtypes.float64})


def activation_chain(b: PlanNode, consumers, free) -> tuple[str, list[PlanNode]] | None:
    """(activation name, the chain's nodes, the last one last) applied to the output of `b`, or
    None. `free(n)` says whether n's value may disappear into the fused op (not fetched, not a
    control input, not already fused); `consumers` is PlanGraph.consumers()."""
    uses = [u for u, _, _ in consumers[b]]
    dev = b.device
    if not uses or any(u.device is not dev for u in uses):
        return None
    if len(uses) == 1 and uses[0].type in _SINGLE and uses[0].inputs[0] == (b, 0):
        return uses[0].type, [uses[0]]
    if b.out_dtypes[0] not in _EXTRA_TYPES:
        return None
    dt = b.out_dtypes[0].np
    if len(uses) == 1 and uses[0].type == "Sigmoid":
        return "Sigmoid", [uses[0]]
    hard = _hard_sigmoid(b, uses, consumers, free, dt)
    if len(uses) == 1 and hard is not None:
        return "HardSigmoid", hard
    if len(uses) != 2:
        return None
    mul = [u for u in uses if u.type == "Mul"]
    for m in mul:
        other = [u for u in uses if u is not m][0]
        if other.type == "Sigmoid" and other.inputs[0] == (b, 0):
            inner = [other]
        elif hard is not None and other is hard[0]:
            inner = hard
        else:
            continue
        last = inner[-1]
        if _sole_use(last, consumers, free) is not m:
            continue
        if len(m.inputs) != 2 or set(m.inputs) != {(b, 0), (last, 0)}:
            continue
        return ("Swish" if inner[0].type == "Sigmoid" else "HardSwish"), [*inner, m]
    return None


def _sole_use(n: PlanNode, consumers, free) -> PlanNode | None:
    uses = consumers[n]
    if len(uses) != 1 or not free(n) or uses[0][1] != 0 or uses[0][0].device is not n.device:
        return None
    return uses[0][0]


def _scalar(edge, dt) -> float | None:
    src, idx = edge
    if src.type != "Const" or idx != 0:
        return None
    v = src.attrs.get("value")
    if not isinstance(v, np.ndarray) or v.shape != () or v.dtype != dt:
        return None
    return v


def _binary_with(n: PlanNode, x_edge, value, dt) -> bool:
    """Whether n is (x, value) or (value, x) with `value` a scalar Const of dtype dt."""
    if len(n.inputs) != 2:
        return False
    a, c = n.inputs
    if a != x_edge:
        a, c = c, a
    v = _scalar(c, dt)
    return a == x_edge and v is not None and v == dt.type(value)


def _hard_sigmoid(b: PlanNode, uses, consumers, free, dt) -> list[PlanNode] | None:
    """[Mul, AddV2, Minimum, Maximum] of the HardSigmoid chain on b's output, or None."""
    for m in uses:
        if m.type != "Mul" or not _binary_with(m, (b, 0), 1.0 / 6.0, dt):
            continue
        chain = [m]
        for t, value in (("AddV2", 0.5), ("Minimum", 1.0), ("Maximum", 0.0)):
            nxt = _sole_use(chain[-1], consumers, free)
            if nxt is None or nxt.type != t or not _binary_with(nxt, (chain[-1], 0), value, dt):
                break
            chain.append(nxt)
        else:
            return chain
    return None
