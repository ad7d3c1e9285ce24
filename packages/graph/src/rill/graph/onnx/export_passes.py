"""Clean-up passes over an exported ONNX graph (in place): dead nodes and initializers go,
MatMul + bias become one Gemm, and a graph output copied by an Identity takes the copied value's
place. Names are unique across the whole model (subgraphs included), so renaming a value needs
no scoping rules."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

from rill.graph.onnx.import_util import all_graphs

__all__ = ["optimize", "guard_zero_pad_before_max_pool"]


def _uses(g: onnx.GraphProto) -> Counter:
    uses: Counter = Counter()
    for sub in all_graphs(g):
        for n in sub.node:
            uses.update(i for i in n.input if i)
        uses.update(o.name for o in sub.output)
    return uses


def _dead_code(g: onnx.GraphProto) -> None:
    while True:
        uses = _uses(g)
        removed = False
        for sub in all_graphs(g):
            keep = [n for n in sub.node if any(uses[o] for o in n.output if o)]
            if len(keep) != len(sub.node):
                removed = True
                del sub.node[:]
                sub.node.extend(keep)
        if not removed:
            break
    uses = _uses(g)
    keep = [t for t in g.initializer if uses[t.name]]
    del g.initializer[:]
    g.initializer.extend(keep)


def _fuse_gemm_bias(g: onnx.GraphProto) -> None:
    inits = {t.name: t for t in g.initializer}
    for sub in all_graphs(g):
        uses = _uses(g)
        producer = {o: n for n in sub.node for o in n.output}
        outputs = {o.name for o in sub.output}
        drop = []
        for idx, n in enumerate(sub.node):
            if n.op_type != "Add" or len(n.input) != 2:
                continue
            for k in (0, 1):
                gemm, bias = producer.get(n.input[k]), n.input[1 - k]
                if gemm is None or gemm.op_type != "Gemm" or len(gemm.input) != 2:
                    continue
                if uses[gemm.output[0]] != 1 or gemm.output[0] in outputs or bias not in inits:
                    continue
                dims = list(inits[bias].dims)
                if len(dims) > 2 or (len(dims) == 2 and dims[0] != 1):
                    continue
                gemm.input.append(bias)
                gemm.output[0] = n.output[0]
                drop.append(idx)
                break
        for idx in reversed(drop):
            del sub.node[idx]


def _rename(g: onnx.GraphProto, old: str, new: str) -> None:
    for sub in all_graphs(g):
        for n in sub.node:
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = new
            for i, x in enumerate(n.output):
                if x == old:
                    n.output[i] = new


def optimize(g: onnx.GraphProto) -> None:
    _dead_code(g)
    _fuse_gemm_bias(g)
    _fuse_conv_bias(g)
    _fold_reshapes(g)
    for sub in list(all_graphs(g)):
        _fold_outputs(g, sub)
    _dead_code(g)


def _fold_outputs(model_graph: onnx.GraphProto, g: onnx.GraphProto) -> None:
    """`y = Identity(v)` for an output y of graph g, v computed in g: the main graph's v is
    renamed y (its outputs carry the user's names); a subgraph's output is renamed v."""
    produced = {o for n in g.node for o in n.output}
    taken = {i.name for i in g.input} | {t.name for t in g.initializer} | {
        o.name for o in g.output}  # fmt: skip
    for out in g.output:
        want = out.name
        idx = next((k for k, n in enumerate(g.node)
                    if n.op_type == "Identity" and n.output[0] == want), None)  # fmt: skip
        if idx is None:
            continue
        src = g.node[idx].input[0]
        if src not in produced or src in taken:
            continue
        del g.node[idx]
        if g is model_graph:
            _rename(model_graph, src, want)
        else:
            out.name = src
            taken.add(src)


def _fuse_conv_bias(g: onnx.GraphProto) -> None:
    """Conv followed by Add of a [C, 1, 1] (or [1, C, 1, 1]) constant: the Conv's bias input."""
    inits = {t.name: t for t in g.initializer}
    names = {t.name for t in g.initializer} | {o for sub in all_graphs(g)
                                               for n in sub.node for o in n.output}  # fmt: skip
    for sub in all_graphs(g):
        uses = _uses(g)
        producer = {o: n for n in sub.node for o in n.output}
        outputs = {o.name for o in sub.output}
        drop = []
        for idx, n in enumerate(sub.node):
            if n.op_type != "Add" or len(n.input) != 2:
                continue
            for k in (0, 1):
                conv, bias = producer.get(n.input[k]), n.input[1 - k]
                if conv is None or conv.op_type != "Conv" or len(conv.input) != 2:
                    continue
                if uses[conv.output[0]] != 1 or conv.output[0] in outputs or bias not in inits:
                    continue
                weight = inits.get(conv.input[1])
                dims = list(inits[bias].dims)
                while len(dims) > 3 and dims[0] == 1:
                    dims = dims[1:]
                if weight is None or len(dims) != 3 or dims[1:] != [1, 1]:
                    continue
                channels = weight.dims[0]
                if dims[0] not in (1, channels):
                    continue
                value = numpy_helper.to_array(inits[bias]).reshape(-1)
                value = np.broadcast_to(value, (channels,)).copy()
                name, k2 = f"{bias}/conv_bias", 0
                while name in names:
                    k2 += 1
                    name = f"{bias}/conv_bias_{k2}"
                names.add(name)
                g.initializer.append(numpy_helper.from_array(value, name))
                conv.input.append(name)
                conv.output[0] = n.output[0]
                drop.append(idx)
                break
        for idx in reversed(drop):
            del sub.node[idx]


def _fold_reshapes(g: onnx.GraphProto) -> None:
    """Reshape(Reshape(x, a), b) with the inner result used once: Reshape(x, b)."""
    inits = {t.name: t for t in g.initializer}
    for sub in all_graphs(g):
        uses = _uses(g)
        producer = {o: n for n in sub.node for o in n.output}
        for n in sub.node:
            if n.op_type != "Reshape":
                continue
            inner = producer.get(n.input[0])
            if inner is None or inner.op_type != "Reshape" or uses[inner.output[0]] != 1:
                continue
            # A 0 in the outer shape would copy a dimension of the inner result, not of x.
            shape = inits.get(n.input[1])
            if shape is None or 0 in numpy_helper.to_array(shape).tolist():
                continue
            n.input[0] = inner.input[0]


def guard_zero_pad_before_max_pool(g: onnx.GraphProto, opset: int) -> None:
    """A constant Pad (of zeros) feeding a MaxPool: onnxruntime (1.32 and earlier) folds it into the
    pool's pads, which pad with -inf, so a window whose values are all negative gives its
    maximum instead of the 0 the padding puts there (onnxruntime's PadFusion; ResNet-like
    models whose stem pads before pooling, Hugging Face's BiT). onnxruntime leaves a Pad with
    the axes input (opset 18) alone: such Pads get it, naming every axis (the same Pad)."""
    if opset < 18:
        return
    inits = {}
    for sub in all_graphs(g):
        inits.update({t.name: t for t in sub.initializer})
    users: dict[str, list] = {}
    for sub in all_graphs(g):
        for n in sub.node:
            for i in n.input:
                users.setdefault(i, []).append(n)
    for sub in all_graphs(g):
        for n in sub.node:
            if n.op_type != "Pad" or len(n.input) < 2 or len(n.input) > 3:
                continue
            mode = next((a.s for a in n.attribute if a.name == "mode"), b"constant")
            if mode != b"constant" or n.input[1] not in inits:
                continue
            # (Its value: also one computed from constants, which onnxruntime folds first.)
            if not any(u.op_type == "MaxPool" for u in users.get(n.output[0], [])):
                continue
            rank = numpy_helper.to_array(inits[n.input[1]]).size // 2
            axes = onnx.helper.make_tensor(f"{n.output[0]}/axes", onnx.TensorProto.INT64,
                                           [rank], list(range(rank)))  # fmt: skip
            g.initializer.append(axes)
            while len(n.input) < 3:
                n.input.append("")
            n.input.append(axes.name)
