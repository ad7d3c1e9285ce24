"""Validation of an ONNX model read from an untrusted source, before the importer works on it.

Three checks run at the import boundary:

- External tensor data (a TensorProto whose `data_location` is EXTERNAL, in an initializer or in
  any node attribute, subgraphs included) is read only from a base directory: the one the
  caller names, else, for a model read from a file, that file's directory (onnx.load's and
  onnxruntime's rule, and where PyTorch's exporter puts the data); a model given as bytes or a
  ModelProto with no directory named is refused. Each location must resolve to a regular file
  inside the base directory (no absolute paths, no `..` or symbolic link leading out), its
  offset and length must lie inside the file, and the bytes are read into the tensor so that
  nothing later touches the file system.
- Every tensor's dims are checked (non-negative, element count under a limit) and against the data
  it actually carries before numpy materialises it.
- onnx's C++ shape inference runs only on a model that passed `onnx.checker` (malformed attribute
  types crash it); otherwise the importer relies on rill's own shape functions.
"""

from __future__ import annotations

import os

import onnx

from rill.graph.onnx.import_util import OnnxImportError

__all__ = [
    "MAX_TENSOR_ELEMENTS",
    "attr_values",
    "check_node_inputs",
    "infer_types_if_valid",
    "load_external_data",
    "validate_tensors",
]

# The largest element count a single tensor of an imported model may declare (2^31, as
# TensorFlow's GraphDef limit of 2 GiB makes any larger constant unrepresentable there).
MAX_TENSOR_ELEMENTS = 1 << 31

_T = onnx.TensorProto
_FIELD_FOR = {
    _T.FLOAT: "float_data", _T.COMPLEX64: "float_data", _T.INT32: "int32_data",
    _T.INT16: "int32_data", _T.INT8: "int32_data", _T.UINT16: "int32_data",
    _T.UINT8: "int32_data", _T.BOOL: "int32_data", _T.FLOAT16: "int32_data",
    _T.BFLOAT16: "int32_data", _T.INT64: "int64_data", _T.STRING: "string_data",
    _T.DOUBLE: "double_data", _T.COMPLEX128: "double_data", _T.UINT32: "uint64_data",
    _T.UINT64: "uint64_data",
}  # fmt: skip
# Values per element in the typed field (complex numbers take two).
_PER_ELEMENT = {_T.COMPLEX64: 2, _T.COMPLEX128: 2}


def _tensors_of_graph(gp: onnx.GraphProto, where: str):
    for t in gp.initializer:
        yield t, f"initializer {t.name!r}"
    for st in gp.sparse_initializer:
        yield st.values, f"sparse initializer {st.values.name!r} (values)"
        yield st.indices, f"sparse initializer {st.values.name!r} (indices)"
    for n in gp.node:
        nwhere = f"node {n.name or n.op_type!r} ({n.op_type})"
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t, f"{nwhere}: attribute {a.name!r} (tensor {a.t.name!r})"
            for i, t in enumerate(a.tensors):
                yield t, f"{nwhere}: attribute {a.name!r}[{i}] (tensor {t.name!r})"
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values, f"{nwhere}: attribute {a.name!r} (sparse values)"
                yield a.sparse_tensor.indices, f"{nwhere}: attribute {a.name!r} (sparse indices)"
            for st in a.sparse_tensors:
                yield st.values, f"{nwhere}: attribute {a.name!r} (sparse values)"
                yield st.indices, f"{nwhere}: attribute {a.name!r} (sparse indices)"
            if a.HasField("g"):
                yield from _tensors_of_graph(a.g, where)
            for g in a.graphs:
                yield from _tensors_of_graph(g, where)


def _all_tensors(model: onnx.ModelProto):
    yield from _tensors_of_graph(model.graph, "main graph")
    for f in model.functions:
        for n in f.node:
            for a in n.attribute:
                if a.HasField("t"):
                    yield a.t, f"function {f.name!r}: attribute {a.name!r}"


def _element_count(t: onnx.TensorProto, what: str, limit: int) -> int:
    count = 1
    for d in t.dims:
        if d < 0:
            raise OnnxImportError(f"{what}: dimension {d} in dims {list(t.dims)} is negative")
        count *= d
    if count > limit:
        raise OnnxImportError(
            f"{what}: dims {list(t.dims)} declare {count} elements, over the limit of {limit} "
            "(rill.graph.onnx.untrusted.MAX_TENSOR_ELEMENTS)"
        )
    return count


def _itemsize_bits(data_type: int) -> int | None:
    try:
        np_dtype = onnx.helper.tensor_dtype_to_np_dtype(data_type)
    except (KeyError, ValueError, TypeError):
        return None
    bits = {_T.INT4: 4, _T.UINT4: 4, _T.FLOAT4E2M1: 4}.get(data_type)
    if bits is None and data_type in (getattr(_T, "INT2", -1), getattr(_T, "UINT2", -1)):
        bits = 2
    return bits if bits is not None else np_dtype.itemsize * 8


def _check_data(t: onnx.TensorProto, what: str, count: int) -> None:
    """The data `t` carries agrees with its dims."""
    if t.data_location == _T.EXTERNAL:
        return
    if t.data_type == _T.STRING:
        if t.HasField("raw_data") and t.raw_data:
            raise OnnxImportError(f"{what}: a string tensor cannot store raw_data")
        have = len(t.string_data)
        if have != count:
            raise OnnxImportError(
                f"{what}: dims {list(t.dims)} declare {count} strings but the tensor holds {have}"
            )
        return
    if t.HasField("raw_data"):
        bits = _itemsize_bits(t.data_type)
        if bits is None:
            return  # an unknown data type: the importer names it
        want = (count * bits + 7) // 8
        if len(t.raw_data) != want:
            raise OnnxImportError(
                f"{what}: dims {list(t.dims)} declare {count} elements ({want} bytes of raw "
                f"data) but the tensor holds {len(t.raw_data)} bytes"
            )
        return
    field = _FIELD_FOR.get(t.data_type)
    if field is None:
        return
    have = len(getattr(t, field))
    per = _PER_ELEMENT.get(t.data_type, 1)
    if t.data_type in (_T.INT4, _T.UINT4):
        want = (count + 1) // 2
    else:
        want = count * per
    if have != want and not (count == 0 and have == 0):
        raise OnnxImportError(
            f"{what}: dims {list(t.dims)} declare {count} elements but {field} holds {have} "
            f"values (expected {want})"
        )


def _load_external(t: onnx.TensorProto, what: str, base_dir: str) -> None:
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    if not location or "\x00" in location or os.path.isabs(location):
        raise OnnxImportError(f"{what}: external data location {location!r} is not a relative path")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise OnnxImportError(
            f"{what}: external data location {location!r} lies outside the base directory "
            f"{base_dir!r}"
        )
    if not os.path.isfile(path):
        raise OnnxImportError(f"{what}: external data file {location!r} is not a regular file")
    size = os.path.getsize(path)
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError:
        raise OnnxImportError(f"{what}: external data offset/length are not integers") from None
    if offset < 0 or length < 0 or offset + length > size:
        raise OnnxImportError(
            f"{what}: external data [{offset}, {offset + length}) lies outside {location!r} "
            f"({size} bytes)"
        )
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    t.raw_data = data
    t.data_location = _T.DEFAULT
    del t.external_data[:]


def load_external_data(model: onnx.ModelProto, base_dir: str | os.PathLike) -> None:
    """Reads every external tensor of `model` (subgraphs' and attributes' included) from files
    inside `base_dir` into the tensor, in place (see _load_external's checks)."""
    for t, what in _all_tensors(model):
        if t.data_location == _T.EXTERNAL or t.external_data:
            _load_external(t, what, os.fspath(base_dir))


def validate_tensors(
    model: onnx.ModelProto,
    external_data_dir: str | os.PathLike | None = None,
    max_elements: int = MAX_TENSOR_ELEMENTS,
) -> None:
    """Checks every tensor stored in `model` (see the module docstring); loads permitted external
    data into the model in place. Raises OnnxImportError naming the tensor."""
    for t, what in _all_tensors(model):
        count = _element_count(t, what, max_elements)
        if t.data_location == _T.EXTERNAL or t.external_data:
            if external_data_dir is None:
                raise OnnxImportError(
                    f"{what} stores its data in an external file; rill reads external data only "
                    "from the model file's directory or one the caller names: import the model "
                    "by its path, or pass external_data_dir= to import_onnx"
                )
            _load_external(t, what, os.fspath(external_data_dir))
        _check_data(t, what, count)


def check_node_shallow(n: onnx.NodeProto, ctx, lex=None) -> None:
    """onnx.checker's node check of `n` without its subgraphs, which are checked on their own:
    checking them inside the node would need the enclosing graphs' names in scope (a Loop body
    reading an outer value fails otherwise). Raises the checker's error."""
    shallow = n
    if any(a.HasField("g") or a.graphs for a in n.attribute):
        shallow = onnx.NodeProto()
        shallow.CopyFrom(n)
        for a in shallow.attribute:
            if a.HasField("g"):
                a.g.CopyFrom(onnx.GraphProto(name=a.g.name))
            for sub in a.graphs:
                sub.CopyFrom(onnx.GraphProto(name=sub.name))
    if _SCOPED:
        onnx.checker.check_node(shallow, ctx, lex or onnx.checker.C.LexicalScopeContext())
    else:
        onnx.checker.check_node(shallow, ctx)


def _nodes_pass_checker(model: onnx.ModelProto) -> bool:
    """Whether every node (subgraphs' included) passes onnx.checker's node check: attributes of
    the schema's types, required attributes present, input and output counts in range. Graph
    level rules (e.g. every output declaring a shape) are not required."""
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version or onnx.IR_VERSION
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    lex = onnx.checker.C.LexicalScopeContext()
    stack = [model.graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            try:
                check_node_shallow(n, ctx, lex)
            except Exception:  # noqa: BLE001 - any checker failure means: do not infer
                return False
            for a in n.attribute:
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)
    return True


try:
    onnx.checker.check_node(
        onnx.helper.make_node("Relu", ["a"], ["b"]),
        onnx.checker.C.CheckerContext(),
        onnx.checker.C.LexicalScopeContext(),
    )
    _SCOPED = True
except TypeError:
    _SCOPED = False
except Exception:  # noqa: BLE001 - the signature is what is probed
    _SCOPED = True


def infer_types_if_valid(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with onnx's shape inference applied when its nodes pass onnx.checker; the model as
    it is otherwise. The C++ inference trusts attribute types that only the checker verifies, and
    can crash the process on a model that fails it."""
    if not _nodes_pass_checker(model):
        return model
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is best effort: rill infers shapes itself
        return model


def check_node_inputs(node: onnx.NodeProto, inputs: list, opset: int, where: str) -> None:
    """Every input that the op's schema requires is present and defined: an empty name or a name
    that no node, input or initializer defines (a node reading its own output, say) is refused
    here rather than reaching the import rule as None."""
    for i, (name, t) in enumerate(zip(node.input, inputs)):
        if t is None and name:
            raise OnnxImportError(
                f"{where}: input {i} {name!r} is defined by no node, graph input or initializer "
                "before this node (a cycle, or a node reading its own output)"
            )
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # noqa: BLE001 - an op without a schema: its rule checks its inputs
        return
    formal = list(schema.inputs)
    if not formal:
        return
    opt = onnx.defs.OpSchema.FormalParameterOption
    for i, t in enumerate(inputs):
        f = formal[min(i, len(formal) - 1)]
        if (
            t is None
            and f.option != opt.Optional
            and not (i >= len(formal) - 1 and f.option == opt.Variadic and i > len(formal) - 1)
        ):
            raise OnnxImportError(f"{where}: input {i} ({f.name}) is required but empty")
    required = sum(1 for f in formal if f.option == opt.Single)
    if len(inputs) < required:
        raise OnnxImportError(
            f"{where}: {node.op_type} takes at least {required} inputs; the node has {len(inputs)}"
        )


def attr_values(node: onnx.NodeProto, convert, where: str) -> dict:
    """{name: convert(attribute)} for the node's attributes; a malformed attribute (an undefined
    type, bytes that are not UTF-8, a tensor whose data numpy cannot read) raises OnnxImportError
    naming the node and the attribute."""
    out = {}
    for a in node.attribute:
        try:
            out[a.name] = convert(a)
        except OnnxImportError:
            raise
        except Exception as e:  # noqa: BLE001 - onnx.helper and numpy raise many kinds
            raise OnnxImportError(
                f"{where}: attribute {a.name!r} is malformed ({type(e).__name__}: {e})"
            ) from None
    return out


def _graphs(model: onnx.ModelProto):
    stack = [model.graph]
    while stack:
        g = stack.pop()
        yield g
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)


def check_names(model: onnx.ModelProto) -> None:
    """Every name in the model's graphs is text: protobuf hands a string field holding invalid
    UTF-8 back as bytes, which no later step expects. Raises OnnxImportError naming it."""
    for g in _graphs(model):
        for k, n in enumerate(g.node):
            for what, v in (("name", n.name), ("op_type", n.op_type), ("domain", n.domain),
                            *(("input", x) for x in n.input),
                            *(("output", x) for x in n.output)):  # fmt: skip
                if not isinstance(v, str):
                    raise OnnxImportError(
                        f"node #{k} of graph {g.name!r}: its {what} {v!r} is not valid UTF-8"
                    )
        for kind, items in (("input", g.input), ("output", g.output),
                            ("value_info", g.value_info), ("initializer", g.initializer)):  # fmt: skip
            for x in items:
                if not isinstance(x.name, str):
                    raise OnnxImportError(
                        f"graph {g.name!r}: {kind} name {x.name!r} is not valid UTF-8"
                    )
        if not isinstance(g.name, str):
            raise OnnxImportError(f"a graph name {g.name!r} is not valid UTF-8")
