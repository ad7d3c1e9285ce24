"""Models below opset 13 around onnx's version converter: the forms it refuses or carries over
with their old meaning, fixed before or after it runs (onnx 1.23's converter).

- IR 3 models whose initializers are not also graph inputs (IR 3 asks for that, exporters did
  not always list them): the converter reports every such initializer as undefined. Converting
  the model as IR 4, where initializers need not be inputs, brings it up unchanged.
- Opset 1-6 binary ops with `broadcast=1` and an `axis` that aligns b with a's axes from axis on
  (`Add(x[N,C,H,W], bias[C], broadcast=1, axis=1)`, the old bias add): the converter's adapter
  checks numpy's trailing alignment and refuses. An Unsqueeze giving b trailing 1s makes the
  alignment trailing, which the converter takes.
- ImageScaler (an experimental op of opsets 1-9, in Tiny-YOLOv2): the converter knows no schema
  for it. Written as the Mul by its scale and Add of its per-channel bias it stands for.
- Hardmax before opset 13 coerces its input to 2-D at `axis` (default 1) and takes the arg max
  over everything after it; the converter rewrites Softmax and LogSoftmax into Flatten, the op,
  Reshape, but leaves Hardmax as it is, which at opset 13 means the one axis. Rewritten after it
  the same way (harmless on a Hardmax the converter did rewrite: its input is already 2-D).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rill.graph.onnx.import_util import all_graphs

_LEGACY_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater",
                     "Less"}  # fmt: skip
_DOMAINS = ("", "ai.onnx")


def convertible_ir(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model`, as IR 4 when it is IR 3 (the converter then finds initializers not listed among
    the graph inputs)."""
    if model.ir_version >= 4:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = 4
    return m


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is best effort: without ranks the node is left alone
        inferred = model
    g = inferred.graph
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim)
             for vi in [*g.input, *g.value_info, *g.output]
             if vi.type.tensor_type.HasField("shape")}  # fmt: skip
    ranks.update({t.name: len(t.dims) for t in g.initializer})
    return ranks


def legacy_broadcast_axes(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (below opset 7) with each `broadcast=1, axis=k` binary op's b unsqueezed to align
    with a's trailing axes, and the axis dropped; `model` itself when there is none."""

    def legacy(n):
        return (n.op_type in _LEGACY_BROADCAST and n.domain in _DOMAINS and len(n.input) == 2
                and _attr(n, "broadcast", 0) == 1 and _attr(n, "axis") is not None)  # fmt: skip

    if not any(legacy(n) for n in model.graph.node):
        return model
    ranks = _ranks(model)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = []
    for i, n in enumerate(m.graph.node):
        ra, rb = (ranks.get(n.input[0]), ranks.get(n.input[1])) if legacy(n) else (None, None)
        if ra is not None and rb is not None:
            axis = _attr(n, "axis")
            trailing = ra - (axis % ra if ra else 0) - rb
            if trailing > 0:
                b = f"{n.input[1]}__legacy_broadcast_{i}"
                nodes.append(helper.make_node("Unsqueeze", [n.input[1]], [b],
                                              axes=list(range(rb, rb + trailing))))  # fmt: skip
                n.input[1] = b
            keep = [a for a in n.attribute if a.name != "axis"]
            del n.attribute[:]
            n.attribute.extend(keep)
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def image_scaler(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """`model` with each ImageScaler (y = scale·x + bias[c]) written as Mul and Add; `model`
    itself when there is none."""
    if not any(n.op_type == "ImageScaler" and n.domain in _DOMAINS for n in model.graph.node):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    legacy = {"broadcast": 1} if opset < 7 else {}
    nodes = []
    for i, n in enumerate(m.graph.node):
        if n.op_type != "ImageScaler" or n.domain not in _DOMAINS:
            nodes.append(n)
            continue
        scale, bias, scaled = (f"{n.output[0]}__image_scaler_{i}_{k}" for k in ("s", "b", "x"))
        c = np.asarray(_attr(n, "bias", []), np.float32)
        m.graph.initializer.extend([
            numpy_helper.from_array(np.float32(_attr(n, "scale", 1.0)), scale),
            numpy_helper.from_array(c.reshape(-1, 1, 1), bias)])  # fmt: skip
        nodes += [helper.make_node("Mul", [n.input[0], scale], [scaled], **legacy),
                  helper.make_node("Add", [scaled, bias], list(n.output), name=n.name,
                                   **legacy)]  # fmt: skip
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def hardmax_2d(model: onnx.ModelProto) -> None:
    """Rewrites, in place, every Hardmax of `model` (converted from below opset 13) into
    Flatten at its axis, Hardmax over the last axis, Reshape back."""
    for g in all_graphs(model.graph):
        if not any(n.op_type == "Hardmax" and n.domain in _DOMAINS for n in g.node):
            continue
        nodes = []
        for n in g.node:
            if n.op_type != "Hardmax" or n.domain not in _DOMAINS:
                nodes.append(n)
                continue
            x, y = n.input[0], n.output[0]
            shape, flat, hard = f"{y}__shape", f"{y}__flat", f"{y}__2d"
            nodes += [helper.make_node("Shape", [x], [shape]),
                      helper.make_node("Flatten", [x], [flat], axis=_attr(n, "axis", 1)),
                      helper.make_node("Hardmax", [flat], [hard], axis=-1, name=n.name),
                      helper.make_node("Reshape", [hard, shape], [y])]  # fmt: skip
        del g.node[:]
        g.node.extend(nodes)
