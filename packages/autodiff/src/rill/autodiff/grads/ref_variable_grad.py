"""Gradients for rill.graph.ops.ref_variable_ops (TensorFlow-1 reference variables).

A reference variable is a leaf: gradients reach its `VariableV2` output through the `Identity`
that reads it (`w/read`), and stop there. The ops that update a variable are not
differentiable, as in TensorFlow.
"""

from __future__ import annotations

from rill.autodiff.registry import not_differentiable, register_gradient

not_differentiable(
    "VariableV2",
    "Variable",
    "TemporaryVariable",
    "DestroyTemporaryVariable",
    "Assign",
    "AssignAdd",
    "AssignSub",
    "IsVariableInitialized",
    "CountUpTo",
    "ScatterUpdate",
    "ScatterAdd",
    "ScatterSub",
    "ScatterMul",
    "ScatterDiv",
    "ScatterMin",
    "ScatterMax",
    "ScatterNdUpdate",
    "ScatterNdAdd",
    "ScatterNdSub",
)


@register_gradient("RefIdentity")
def _ref_identity_grad(op, grad):
    """dx = g"""
    return grad
