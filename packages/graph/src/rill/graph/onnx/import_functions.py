"""Model-local functions (ModelProto.functions, ONNX IR 8+): inlined before import.

PyTorch's TorchScript exporter writes them for `export_modules_as_functions`, onnxscript for
every `@script` function a model calls, and some tools for fused blocks (a Gelu, an attention).
A node whose (domain, op_type) names a local function is replaced by the function's body, its
formal inputs, outputs and attribute references bound to the node's or to the function's
declared defaults (onnx.inliner, the ONNX project's own C++ inliner, which leaves the defaults
out: they are written into the calls first); the body's value names get a unique suffix per
call. A function body
written for another ai.onnx opset than the model's is converted to the model's first.

The inliner is C++, so the model is checked before it runs: every function body node of an op
onnx has a schema for passes `onnx.checker.check_node` in its function's opsets, and no function calls itself, directly or
through others (the inliner would not stop). Either failure is an OnnxImportError naming the
function."""

from __future__ import annotations

import onnx
import onnx.inliner

from rill.graph.onnx.import_util import OnnxImportError
from rill.graph.onnx.untrusted import check_node_shallow

__all__ = ["inline_functions"]


def _local_ops(model: onnx.ModelProto) -> set[tuple[str, str]]:
    """(domain, name) of every model-local function."""
    return {(f.domain, f.name) for f in model.functions}


def _check_bodies(model: onnx.ModelProto) -> None:
    for f in model.functions:
        ctx = onnx.checker.C.CheckerContext()
        ctx.ir_version = model.ir_version or onnx.IR_VERSION
        ctx.opset_imports = {o.domain: o.version for o in f.opset_import}
        for k, n in enumerate(f.node):
            if not onnx.defs.has(n.op_type, n.domain):
                continue  # another function, or an op onnx has no schema for: import decides
            try:
                check_node_shallow(n, ctx)
            except Exception as e:  # noqa: BLE001 - any checker failure is the model's
                raise OnnxImportError(
                    f"model-local function {f.domain}::{f.name}: body node #{k} "
                    f"({n.op_type} {n.name!r}) is invalid: {str(e).strip().splitlines()[0]}"
                ) from None


def _calls(nodes, defined) -> set[tuple[str, str]]:
    out = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if (n.domain, n.op_type) in defined:
            out.add((n.domain, n.op_type))
        for a in n.attribute:
            if a.HasField("g"):
                stack.extend(a.g.node)
            for g in a.graphs:
                stack.extend(g.node)
    return out


def _check_acyclic(model: onnx.ModelProto) -> None:
    defined = _local_ops(model)
    calls = {(f.domain, f.name): _calls(f.node, defined) for f in model.functions}
    state: dict = {}

    def visit(key, path):
        if state.get(key) == "done":
            return
        if state.get(key) == "open":
            cycle = " -> ".join(f"{d}::{n}" for d, n in path + [key])
            raise OnnxImportError(f"model-local functions call themselves: {cycle}")
        state[key] = "open"
        for callee in sorted(calls.get(key, ())):
            visit(callee, path + [key])
        state[key] = "done"

    for key in sorted(calls):
        visit(key, [])


def _with_defaults(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` in which every call of a function declaring attribute defaults
    (FunctionProto.attribute_proto, IR 9) names each attribute it left out with its default:
    onnx's inliner drops a reference to an attribute the call does not give."""
    defaults = {(f.domain, f.name): f.attribute_proto for f in model.functions if f.attribute_proto}
    if not defaults:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    stack = [out.graph.node] + [f.node for f in out.functions]
    while stack:
        for n in stack.pop():
            given = {a.name for a in n.attribute}
            for a in defaults.get((n.domain, n.op_type), ()):
                if a.name not in given:
                    n.attribute.append(a)
            for a in n.attribute:
                if a.HasField("g"):
                    stack.append(a.g.node)
                stack.extend(g.node for g in a.graphs)
    return out


def _ai_onnx(opsets) -> int | None:
    return next((o.version for o in opsets if o.domain in ("", "ai.onnx")), None)


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every call of a model-local function replaced by the function's body (the
    model itself when it has none)."""
    if not model.functions:
        return model
    _check_bodies(model)
    _check_acyclic(model)
    main = _ai_onnx(model.opset_import)
    convert = any(_ai_onnx(f.opset_import) not in (None, main) for f in model.functions)
    try:
        return onnx.inliner.inline_local_functions(_with_defaults(model), convert_version=convert)
    except Exception as e:  # noqa: BLE001 - the inliner's own message names the problem
        raise OnnxImportError(f"inlining the model-local functions failed: {e}") from None
