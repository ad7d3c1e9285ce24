"""The squeeze of imported squeeze-excite blocks, for the remapper: MobileNetV3's and
EfficientNet's gate, as the ONNX importer and the remapper's first pass leave it, is the chain

    Mean(x, [2, 3], keep_dims=True) → _FusedConv2D(1×1) → _FusedConv2D(1×1)

on NCHW data, each 1×1 convolution with fused_ops [BiasAdd(, activation)]. It becomes one
_FusedSqueezeExcite(x, w1, b1, w2, b2) with the two activations, whose kernel makes the same
calls as the three kernels (the same bits) without the executor's hand-offs between them. The
chain's last op keeps its name; the Mean's source is the fused op's.
"""

from __future__ import annotations

import numpy as np

from rill.exec.plan.ir import PlanGraph, PlanNode
from rill.graph import dtypes

__all__ = ["squeeze_excite"]

_TYPES = frozenset({dtypes.float32, dtypes.float64})
# The activations the fused kernel applies (its SQUEEZE_ACTIVATIONS), "" for none.
_ACTIVATIONS = frozenset({"", "Relu", "Relu6", "HardSigmoid", "HardSwish", "Sigmoid", "Swish"})


def squeeze_excite(pg: PlanGraph, keep, fuse) -> int:
    """Fuses the chains above in pg. keep(n): whether n's value must stay (fetched, or another
    op's control input); fuse(last, attrs, inputs, head, gone) makes the fused op (False where
    the device has no kernel for it). Returns how many were made."""
    consumers = pg.consumers()
    made = 0
    fused: set[PlanNode] = set()

    def only_use(n: PlanNode, user: PlanNode) -> bool:
        """Whether `user`'s input 0 is n's output 0 and nothing else reads n."""
        uses = consumers[n]
        return (len(uses) == 1 and uses[0][0] is user and uses[0][1:] == (0, 0)
                and not keep(n) and n.device is user.device)  # fmt: skip

    for n in list(pg.nodes):
        act2 = _pointwise(n)
        if act2 is None or n in fused:
            continue
        conv1, idx = n.inputs[0]
        act1 = _pointwise(conv1)
        if act1 is None or idx != 0 or not only_use(conv1, n):
            continue
        mean, idx = conv1.inputs[0]
        if idx != 0 or mean.type != "Mean" or not only_use(mean, conv1):
            continue
        if not mean.attrs.get("keep_dims") or mean.attrs.get("T") != n.attrs["T"]:
            continue
        if not _spatial_axes(mean):
            continue
        attrs = {"T": n.attrs["T"], "activations": [act1, act2]}
        inputs = [mean.inputs[0], *conv1.inputs[1:], *n.inputs[1:]]
        if fuse(n, attrs, inputs, mean, (mean, conv1)):
            fused.update((mean, conv1))
            made += 1
    return made


def _pointwise(n: PlanNode) -> str | None:
    """The activation ("" for none) of an NCHW _FusedConv2D [BiasAdd(, activation)] with a
    static 1×1 filter, stride and dilation 1 and no explicit padding; else None."""
    if n.type != "_FusedConv2D" or n.attrs.get("T") not in _TYPES:
        return None
    if n.attrs.get("data_format") != "NCHW" or n.attrs.get("num_args") != 1:
        return None
    if n.attrs.get("padding") == "EXPLICIT" or len(n.inputs) != 3:
        return None
    if list(n.attrs.get("strides", ())) != [1, 1, 1, 1]:
        return None
    if list(n.attrs.get("dilations", [1, 1, 1, 1])) != [1, 1, 1, 1]:
        return None
    ops = list(n.attrs.get("fused_ops", ()))
    if not ops or ops[0] != "BiasAdd" or len(ops) > 2:
        return None
    act = ops[1] if len(ops) == 2 else ""
    if act not in _ACTIVATIONS:
        return None
    src, idx = n.inputs[1]
    shape = src.out_shapes[idx] if src.out_shapes else None
    if shape is None or shape.rank != 4 or shape.as_list()[:2] != [1, 1]:
        return None
    return act


def _spatial_axes(mean: PlanNode) -> bool:
    """Whether the Mean reduces a rank-4 input over axes 2 and 3 (a Const's, negative or not)."""
    src, idx = mean.inputs[0]
    shape = src.out_shapes[idx] if src.out_shapes else None
    if shape is None or shape.rank != 4:
        return False
    axes, idx = mean.inputs[1]
    value = axes.attrs.get("value") if axes.type == "Const" and idx == 0 else None
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.size != 2:
        return False
    raw = [int(a) for a in value.reshape(-1)]
    return all(-4 <= a < 4 for a in raw) and sorted(a % 4 for a in raw) == [2, 3]
