"""Opset-8 Scan, rewritten as Loops before onnx's version converter sees the model.

Scan-8 scans a batch: its states are [batch, ...], its scan inputs [batch, sequence, ...], and
its body runs once per (batch item, step) on values without those axes. Scan-9 dropped the batch
axis, and onnx's 8→9 adapter drops it from the graph's inputs too, which changes what the model
accepts. So a Scan-8 node is first expressed with Loop-1 (an op both opsets have), which the
converter carries to opset 13 faithfully:

    outer Loop over b < batch:                 scan outputs: final states, scan outputs
        states_b = Gather(state, b); xs_b = Gather(x, b)
        inner Loop over t < sequence length:   carried: states; scan outputs: body's
            x_t = Gather(xs_b, t)                (T - 1 - t for a reversed input)
            <the Scan body>

Loop stacks scan outputs along a new first axis, which is where Scan-8 keeps the batch and the
sequence. Loop-1 needs a loop-carried value, so a loop with none carries an unused counter. `sequence_lens` (different lengths per batch item) is refused with a clear error.
"""

from __future__ import annotations

import onnx
from onnx import helper

from rill.graph.onnx.import_util import OnnxImportError

__all__ = ["rewrite_scan8"]

_I64 = onnx.TensorProto.INT64


def rewrite_scan8(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (ai.onnx opset 8) with every Scan node of its main graph rewritten as Loops; the
    model itself when it has none."""
    if not any(n.op_type == "Scan" for n in model.graph.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = []
    for i, n in enumerate(out.graph.node):
        if n.op_type != "Scan":
            nodes.append(n)
            continue
        if n.input and n.input[0]:
            raise OnnxImportError(
                f"node {n.name or i}(Scan, opset 8): sequence_lens {n.input[0]!r} is given; rill "
                "imports an opset-8 Scan only when every batch item has the full sequence length"
            )
        nodes.extend(_as_loops(n, f"{n.name or 'scan'}_{i}__scan8"))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _typed(vi: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    """A value info named `name` with vi's element type and no shape (Loop adds axes)."""
    elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
    return helper.make_tensor_value_info(name, elem, None)


def _as_loops(node: onnx.NodeProto, p: str) -> list[onnx.NodeProto]:
    a = _attrs(node)
    body: onnx.GraphProto = a["body"]
    m = a["num_scan_inputs"]
    args = list(node.input[1:])
    n_states = len(args) - m
    states, xs = args[:n_states], args[n_states:]
    directions = list(a.get("directions") or [0] * m)
    n_scan_out = len(body.output) - n_states

    def const(name, value):
        t = helper.make_tensor(name, _I64, [], [value])
        return helper.make_node("Constant", [], [name], value=t)

    # The inner loop: one step of the scan for one batch item.
    inner = [helper.make_node("Identity", [f"{p}_cond_in"], [f"{p}_cond_out"])]
    spare = n_states == 0  # Loop-1 needs a loop-carried value
    for j, d in enumerate(directions):
        step = f"{p}_t"
        if d:
            inner.append(helper.make_node("Sub", [f"{p}_last", f"{p}_t"], [f"{p}_rt"]))
            step = f"{p}_rt"
        inner.append(
            helper.make_node("Gather", [f"{p}_x{j}_b", step], [body.input[n_states + j].name])
        )
    inner.extend(body.node)
    for k in range(n_states):  # the body reads its states under their own names
        inner.insert(0, helper.make_node("Identity", [f"{p}_s{k}_in"], [body.input[k].name]))
    inner_outputs = [helper.make_tensor_value_info(f"{p}_cond_out", onnx.TensorProto.BOOL, [])]
    if spare:
        inner.append(helper.make_node("Identity", [f"{p}_spare_in"], [f"{p}_spare_out"]))
        inner_outputs.append(helper.make_tensor_value_info(f"{p}_spare_out", _I64, []))
    for k, vi in enumerate(body.output):
        name = f"{p}_out{k}"
        inner.append(helper.make_node("Identity", [vi.name], [name]))
        inner_outputs.append(_typed(vi, name))
    inner_graph = helper.make_graph(
        inner,
        f"{p}_steps",
        [helper.make_tensor_value_info(f"{p}_t", _I64, []),
         helper.make_tensor_value_info(f"{p}_cond_in", onnx.TensorProto.BOOL, [])]
        + [_typed(body.input[k], f"{p}_s{k}_in") for k in range(n_states)]
        + ([helper.make_tensor_value_info(f"{p}_spare_in", _I64, [])] if spare else []),
        inner_outputs,
    )  # fmt: skip

    # The outer loop: one batch item.
    outer = [
        helper.make_node("Identity", [f"{p}_bcond_in"], [f"{p}_bcond_out"]),
        const(f"{p}_zero", 0),
        const(f"{p}_one", 1),
        helper.make_node("Shape", [xs[0]], [f"{p}_xshape"]),
        helper.make_node("Gather", [f"{p}_xshape", f"{p}_one"], [f"{p}_len"]),
        helper.make_node("Sub", [f"{p}_len", f"{p}_one"], [f"{p}_last"]),
        helper.make_node("Constant", [], [f"{p}_true"], value=helper.make_tensor(
            f"{p}_true", onnx.TensorProto.BOOL, [], [True])),
    ]  # fmt: skip
    for k, s in enumerate(states):
        outer.append(helper.make_node("Gather", [s, f"{p}_b"], [f"{p}_s{k}_b"]))
    for j, x in enumerate(xs):
        outer.append(helper.make_node("Gather", [x, f"{p}_b"], [f"{p}_x{j}_b"]))
    step_outs = [f"{p}_final{k}" for k in range(n_states)]
    step_outs += [f"{p}_spare_final"] if spare else []
    step_outs += [f"{p}_seq{k}" for k in range(n_scan_out)]
    carried = [f"{p}_s{k}_b" for k in range(n_states)] + ([f"{p}_zero"] if spare else [])
    outer.append(helper.make_node("Loop", [f"{p}_len", f"{p}_true"] + carried, step_outs,
                                  body=inner_graph))  # fmt: skip
    if spare:
        del step_outs[n_states]
    outer.append(helper.make_node("Identity", [f"{p}_bspare_in"], [f"{p}_bspare_out"]))
    outer_outputs = [helper.make_tensor_value_info(f"{p}_bcond_out", onnx.TensorProto.BOOL, []),
                     helper.make_tensor_value_info(f"{p}_bspare_out", _I64, [])]  # fmt: skip
    for k, vi in enumerate(body.output):
        name = f"{p}_item{k}"
        outer.append(helper.make_node("Identity", [step_outs[k]], [name]))
        outer_outputs.append(_typed(vi, name))
    outer_graph = helper.make_graph(
        outer,
        f"{p}_batch",
        [helper.make_tensor_value_info(f"{p}_b", _I64, []),
         helper.make_tensor_value_info(f"{p}_bcond_in", onnx.TensorProto.BOOL, []),
         helper.make_tensor_value_info(f"{p}_bspare_in", _I64, [])],
        outer_outputs,
    )  # fmt: skip

    return [
        helper.make_node("Shape", [xs[0]], [f"{p}_batch_shape"]),
        const(f"{p}_axis0", 0),
        helper.make_node("Gather", [f"{p}_batch_shape", f"{p}_axis0"], [f"{p}_batch"]),
        helper.make_node("Constant", [], [f"{p}_go"], value=helper.make_tensor(
            f"{p}_go", onnx.TensorProto.BOOL, [], [True])),
        helper.make_node("Loop", [f"{p}_batch", f"{p}_go", f"{p}_axis0"],
                         [f"{p}_bspare_final", *node.output], body=outer_graph, name=node.name),
    ]  # fmt: skip
