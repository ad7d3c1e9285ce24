"""GraphDef: converting graphs to and from TensorFlow's wire format.

>>> from rill.graph import Graph, placeholder
>>> g = Graph()
>>> with g.as_default():
...     y = placeholder("float32", [2], name="x") + 1.0
>>> g2 = Graph()
>>> with g2.as_default():
...     _ = import_graph_def(g.as_graph_def().SerializeToString(), name="")
>>> [op.name for op in g2.get_operations()]
['x', 'add/y', 'add']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError

from rill.graph import dtypes
from rill.graph.device import merge_device
from rill.graph.dtypes import DType
from rill.graph.errors import GraphTypeError, GraphValueError
from rill.graph.op_def import NameAttrList, get_op_def, has_op
from rill.graph.proto import attr_value_pb2, graph_pb2, node_def_pb2, tensor_pb2, tensor_shape_pb2
from rill.graph.shapes import TensorShape, check_rank

__all__ = [
    "GRAPH_DEF_VERSION",
    "import_graph_def",
    "make_ndarray",
    "make_tensor_proto",
    "graph_to_graph_def",
    "op_to_node_def",
    "NodeSpec",
    "build_nodes",
]

# The GraphDef producer version written (TensorFlow 2.21's GRAPH_DEF_VERSION; same semantics).
GRAPH_DEF_VERSION = 2474

# The largest constant (in bytes; strings count 8 each) a TensorProto may declare. TensorFlow lets
# a few values stand for a whole shape ("repeat the last one"), so a few bytes of GraphDef can
# declare any size: it is checked against this before allocating. Assign to raise it for trusted
# input (rill.graph.text.MAX_TENSOR_BYTES is the text form's).
MAX_TENSOR_BYTES = 1 << 30

_PRIVATE_ATTR_TYPES = {
    "_class": "list(string)",
    "_gradient_op_type": "string",
    "_output_shapes": "list(shape)",
}


# -- tensors ----------------------------------------------------------------------------------------


def shape_to_proto(shape: TensorShape) -> tensor_shape_pb2.TensorShapeProto:
    p = tensor_shape_pb2.TensorShapeProto()
    if shape.dims is None:
        p.unknown_rank = True
    else:
        for d in shape.dims:
            p.dim.add(size=-1 if d is None else d)
    return p


def shape_from_proto(p) -> TensorShape:
    if p.unknown_rank:
        return TensorShape(None)
    return TensorShape([None if d.size < 0 else d.size for d in p.dim])


def make_tensor_proto(value, dtype: DType | None = None) -> tensor_pb2.TensorProto:
    """A TensorProto for `value`; numeric data goes in tensor_content as raw little-endian bytes."""
    if dtype is None:
        arr = np.asarray(value)
        dtype = dtypes.string if arr.dtype.kind in "SUO" else dtypes.as_dtype(arr.dtype)
    else:
        dtype = dtypes.as_dtype(dtype)
        arr = np.asarray(value, dtype=object if dtype is dtypes.string else dtype.np)
    p = tensor_pb2.TensorProto(dtype=_enum_of(dtype))
    p.tensor_shape.CopyFrom(shape_to_proto(TensorShape(arr.shape)))
    if dtype is dtypes.string:
        p.string_val.extend(s if isinstance(s, bytes) else str(s).encode() for s in arr.reshape(-1))
    elif dtype in (dtypes.resource, dtypes.variant):
        raise GraphTypeError(f"cannot serialize a {dtype.name} tensor as a constant")
    else:
        # The narrow types are one element per byte, as in TensorFlow's tensor memory.
        p.tensor_content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    return p


def _enum_of(dtype: DType) -> int:
    if dtype.enum is None:
        raise GraphTypeError(
            f"{dtype.name} has no TensorFlow DataType number, so it cannot be written to a "
            "GraphDef; Cast it to a type TensorFlow has first"
        )
    return dtype.enum


def make_ndarray(p: tensor_pb2.TensorProto) -> np.ndarray:
    """The numpy value of a TensorProto, in any of the encodings TensorFlow writes."""
    try:
        dtype = dtypes.as_dtype(p.dtype)
    except TypeError as e:
        raise GraphTypeError(f"TensorProto has an unsupported dtype: {e}") from None
    shape = shape_from_proto(p.tensor_shape)
    if not shape.is_fully_defined():
        raise GraphValueError(f"TensorProto has a partially known shape {shape}")
    dims = shape.dims
    check_rank(len(dims), "a TensorProto's shape")
    if dtype in (dtypes.resource, dtypes.variant):
        raise GraphTypeError(f"cannot read a {dtype.name} TensorProto as a constant")
    n = 1
    for d in dims:
        n *= d  # Python ints: a product past int64 stays exact
    if dtype is dtypes.string:
        vals = list(p.string_val)
        return _fill(np.array(vals, dtype=object) if vals else np.array([], dtype=object), n, dims)
    if p.tensor_content:
        size = max(dtype.np.itemsize, 1)
        if len(p.tensor_content) != n * size:
            raise GraphValueError(
                f"TensorProto tensor_content holds {len(p.tensor_content)} bytes; a "
                f"{dtype.name}{list(dims)} tensor needs {n * size}"
            )
        arr = np.frombuffer(p.tensor_content, dtype=dtype.np.newbyteorder("<"))
        return arr.astype(dtype.np).reshape(dims)
    if dtype in (dtypes.float16, dtypes.bfloat16):
        vals = np.array(list(p.half_val), dtype=np.uint16).view(dtype.np)
    elif dtype is dtypes.float32:
        vals = np.array(list(p.float_val), dtype=np.float32)
    elif dtype is dtypes.float64:
        vals = np.array(list(p.double_val), dtype=np.float64)
    elif dtype in (dtypes.int32, dtypes.int16, dtypes.int8, dtypes.uint8, dtypes.uint16):
        vals = np.array(list(p.int_val), dtype=np.int64).astype(dtype.np)
    elif dtype is dtypes.int64:
        vals = np.array(list(p.int64_val), dtype=np.int64)
    elif dtype is dtypes.uint32:
        vals = np.array(list(p.uint32_val), dtype=np.uint32)
    elif dtype is dtypes.uint64:
        vals = np.array(list(p.uint64_val), dtype=np.uint64)
    elif dtype is dtypes.bool_:
        vals = np.array(list(p.bool_val), dtype=np.bool_)
    elif dtype.is_narrow and dtype.is_floating:
        vals = np.frombuffer(p.float8_val, dtype=np.uint8).view(dtype.np)  # bit patterns
    elif dtype.is_narrow:
        vals = np.array(list(p.int_val), dtype=np.int64).astype(dtype.np)
    elif dtype is dtypes.complex64:
        v = np.array(list(p.scomplex_val), dtype=np.float32)
        vals = v[0::2] + 1j * v[1::2]
        vals = vals.astype(np.complex64)
    elif dtype is dtypes.complex128:
        v = np.array(list(p.dcomplex_val), dtype=np.float64)
        vals = (v[0::2] + 1j * v[1::2]).astype(np.complex128)
    else:
        raise GraphTypeError(f"cannot read a {dtype.name} TensorProto as a constant")
    return _fill(vals.astype(dtype.np), n, dims)


def _fill(vals: np.ndarray, n: int, dims) -> np.ndarray:
    # TensorFlow writes fewer values than elements to mean "repeat the last one".
    if vals.size == n:
        return vals.reshape(dims)
    if vals.size > n:
        raise GraphValueError(f"TensorProto holds {vals.size} values for {n} elements")
    # Here a few values stand for the whole shape: bound the size before allocating it.
    nbytes = n * (8 if vals.dtype == object else max(vals.dtype.itemsize, 1))
    if nbytes > MAX_TENSOR_BYTES:
        raise GraphValueError(
            f"TensorProto declares shape {list(dims)} ({n} elements, {nbytes} bytes) from "
            f"{vals.size} values, over the limit of {MAX_TENSOR_BYTES} bytes "
            "(rill.graph.graph_def.MAX_TENSOR_BYTES)"
        )
    if vals.size == 0:
        return np.zeros(dims, dtype=vals.dtype) if vals.dtype != object else np.full(dims, b"")
    out = np.empty(n, dtype=vals.dtype)
    out[: vals.size] = vals
    out[vals.size :] = vals[-1]
    return out.reshape(dims)


# -- attrs --------------------------------------------------------------------------------------


def _infer_attr_type(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, DType):
        return "type"
    if isinstance(value, TensorShape):
        return "shape"
    if isinstance(value, np.ndarray):
        return "tensor"
    if isinstance(value, NameAttrList):
        return "func"
    if isinstance(value, (list, tuple)):
        if not value:
            return "list(int)"
        return f"list({_infer_attr_type(value[0])})"
    raise TypeError(f"cannot serialize attr value {value!r}")


def attr_to_proto(value, typ: str | None = None) -> attr_value_pb2.AttrValue:
    typ = typ or _infer_attr_type(value)
    p = attr_value_pb2.AttrValue()
    if typ.startswith("list("):
        inner = typ[5:-1]
        lst = p.list
        p.list.SetInParent()
        for v in value:
            if inner == "string":
                lst.s.append(v if isinstance(v, bytes) else v.encode())
            elif inner == "int":
                lst.i.append(int(v))
            elif inner == "float":
                lst.f.append(float(v))
            elif inner == "bool":
                lst.b.append(bool(v))
            elif inner == "type":
                lst.type.append(_enum_of(dtypes.as_dtype(v)))
            elif inner == "shape":
                lst.shape.append(shape_to_proto(v))
            elif inner == "tensor":
                lst.tensor.append(make_tensor_proto(v))
            elif inner == "func":
                lst.func.append(_func_to_proto(v))
        return p
    if typ == "string":
        p.s = value if isinstance(value, bytes) else value.encode()
    elif typ == "int":
        p.i = int(value)
    elif typ == "float":
        p.f = float(value)
    elif typ == "bool":
        p.b = bool(value)
    elif typ == "type":
        p.type = _enum_of(dtypes.as_dtype(value))
    elif typ == "shape":
        p.shape.CopyFrom(shape_to_proto(value))
    elif typ == "tensor":
        p.tensor.CopyFrom(make_tensor_proto(value))
    elif typ == "func":
        p.func.CopyFrom(_func_to_proto(value))
    else:
        raise TypeError(f"unknown attr type {typ}")
    return p


def _func_to_proto(f: NameAttrList):
    p = attr_value_pb2.NameAttrList(name=f.name)
    for k, v in f.attr:
        p.attr[k].CopyFrom(attr_to_proto(v))
    return p


def _decode(s: bytes):
    try:
        return s.decode()
    except UnicodeDecodeError:
        return s


_ONEOF_FOR_TYPE = {
    "string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
    "tensor": "tensor", "func": "func",
}  # fmt: skip


def attr_from_proto(p: attr_value_pb2.AttrValue, typ: str | None = None):
    which = p.WhichOneof("value")
    if typ is not None and which is not None:
        want = "list" if typ.startswith("list(") else _ONEOF_FOR_TYPE[typ]
        if which != want:
            raise GraphValueError(f"expected a {typ} value but the AttrValue holds {which!r}")
    if which is None:
        if typ is not None and not typ.startswith("list("):
            raise GraphValueError(f"expected a {typ} value but the AttrValue is empty")
        # An empty AttrValue is how TF writes an empty list.
        return ()
    if which == "list":
        lst = p.list
        if typ and typ.startswith("list("):
            inner = typ[5:-1]
        else:
            inner = next(
                (k for k in ("s", "i", "f", "b", "type", "shape", "tensor", "func")
                 if len(getattr(lst, k))),
                "i",
            )  # fmt: skip
            inner = {"s": "string", "i": "int", "f": "float", "b": "bool"}.get(inner, inner)
        if inner == "string":
            return tuple(_decode(s) for s in lst.s)
        if inner == "int":
            return tuple(int(i) for i in lst.i)
        if inner == "float":
            return tuple(float(f) for f in lst.f)
        if inner == "bool":
            return tuple(bool(b) for b in lst.b)
        if inner == "type":
            return tuple(dtypes.as_dtype(t) for t in lst.type)
        if inner == "shape":
            return tuple(shape_from_proto(s) for s in lst.shape)
        if inner == "tensor":
            return tuple(make_ndarray(t) for t in lst.tensor)
        if inner == "func":
            return tuple(_func_from_proto(f) for f in lst.func)
        raise GraphValueError(f"unknown list attr type {inner}")
    if which == "s":
        return _decode(p.s)
    if which == "i":
        return int(p.i)
    if which == "f":
        return float(p.f)
    if which == "b":
        return bool(p.b)
    if which == "type":
        return dtypes.as_dtype(p.type)
    if which == "shape":
        return shape_from_proto(p.shape)
    if which == "tensor":
        return make_ndarray(p.tensor)
    if which == "func":
        return _func_from_proto(p.func)
    raise GraphValueError(f"attr placeholders ({p.placeholder!r}) are only valid in functions")


def _func_from_proto(p) -> NameAttrList:
    return NameAttrList(p.name, tuple(sorted((k, attr_from_proto(v)) for k, v in p.attr.items())))


# -- graph → GraphDef ---------------------------------------------------------------------------


def _input_name(t) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def op_to_node_def(op, add_shapes: bool = False) -> node_def_pb2.NodeDef:
    nd = node_def_pb2.NodeDef(name=op.name, op=op.type, device=op.device)
    nd.input.extend(_input_name(t) for t in op._inputs)
    nd.input.extend(f"^{c.name}" for c in op._control_inputs)
    op_def = op.op_def
    for k, v in op.attrs.items():
        a = op_def.attr(k)
        typ = a.type if a is not None else _PRIVATE_ATTR_TYPES.get(k)
        nd.attr[k].CopyFrom(attr_to_proto(v, typ))
    if add_shapes and op.outputs:
        nd.attr["_output_shapes"].CopyFrom(
            attr_to_proto([t.shape for t in op.outputs], "list(shape)")
        )
    return nd


def graph_to_graph_def(graph, add_shapes: bool = False, from_version: int | None = None):
    gd = graph_pb2.GraphDef()
    gd.versions.producer = GRAPH_DEF_VERSION
    ops = graph._ops if from_version is None else graph._ops[from_version:]
    gd.node.extend(op_to_node_def(op, add_shapes) for op in ops)
    library = getattr(graph, "_function_library", None)
    if library is not None:
        gd.library.CopyFrom(library)
    return gd


# -- GraphDef / text → graph ------------------------------------------------------------------------


@dataclass
class NodeSpec:
    """An op to build from a serialized form (a NodeDef or a line of the text form)."""

    name: str
    op: str
    inputs: list[str]  # "node", "node:k" or "^node"
    attrs: dict
    device: str = ""
    out_hints: list | None = None  # [(dtype, shape)] from the text form, refines shapes
    where: str = ""  # "line 12" or "node 'x'", for error messages
    extra: dict = field(default_factory=dict)


def _parse_ref(ref: str) -> tuple[str, int, bool]:
    if ref.startswith("^"):
        return ref[1:], -1, True
    name, sep, idx = ref.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx), False
    return ref, 0, False


def build_nodes(graph, specs: list[NodeSpec], input_map=None, prefix: str = "") -> dict:
    """Creates ops for `specs` in dependency order. Returns {spec name: Operation}.

    Inputs may reference each other in any order; cycles must go through a Merge (the back edge
    of a loop), whose missing inputs are filled in once their producers exist.
    """
    input_map = dict(input_map or {})
    by_name: dict[str, NodeSpec] = {}
    for s in specs:
        if s.name in by_name:
            raise GraphValueError(f"{s.where}: duplicate node name {s.name!r}")
        by_name[s.name] = s
    mapped: dict[tuple[str, int], object] = {}
    for k, v in input_map.items():
        src, idx, ctrl = _parse_ref(k)
        mapped[(src, -1 if ctrl else idx)] = v
    # Validate references and op types before building anything (no half-built graphs).
    for s in specs:
        if not has_op(s.op):
            try:
                get_op_def(s.op)
            except KeyError as e:
                raise GraphValueError(f"{s.where}: node {s.name!r} uses {e.args[0]}") from None
        for ref in s.inputs:
            src, idx, ctrl = _parse_ref(ref)
            if src not in by_name and (src, -1 if ctrl else idx) not in mapped:
                raise GraphValueError(
                    f"{s.where}: node {s.name!r} ({s.op}) has input {ref!r} but no node named "
                    f"{src!r} exists in the graph"
                )
    created: dict[str, object] = {}
    pending = list(specs)
    patch: list[tuple] = []  # (op, input index, source name, output index)

    def resolve(ref: str):
        src, idx, ctrl = _parse_ref(ref)
        key = (src, -1 if ctrl else idx)
        if key in mapped:
            v = mapped[key]
            return v.op if ctrl and hasattr(v, "op") else v
        op = created.get(src)
        if op is None:
            return None
        if ctrl:
            return op
        if idx >= len(op.outputs):
            raise GraphValueError(
                f"{by_name[src].where}: input {ref!r} refers to output {idx} but {src!r} "
                f"({op.type}) has {len(op.outputs)} outputs"
            )
        return op.outputs[idx]

    progress = True
    while pending and progress:
        progress = False
        rest = []
        for s in pending:
            data = [r for r in s.inputs if not r.startswith("^")]
            ctrl = [r for r in s.inputs if r.startswith("^")]
            resolved = [resolve(r) for r in data]
            ctrl_ops = [resolve(r) for r in ctrl]
            missing = [i for i, v in enumerate(resolved) if v is None]
            if any(c is None for c in ctrl_ops) or (
                missing and (s.op != "Merge" or len(missing) == len(resolved))
            ):
                rest.append(s)
                continue
            if missing:  # a loop's Merge: stand in the first known input for the back edge
                stand_in = next(v for v in resolved if v is not None)
                for i in missing:
                    src, idx, _ = _parse_ref(data[i])
                    patch.append((s.name, i, src, idx))
                    resolved[i] = stand_in
            created[s.name] = _create(graph, s, resolved, ctrl_ops, prefix)
            progress = True
        pending = rest
    if pending:
        names = ", ".join(repr(s.name) for s in pending[:5])
        raise GraphValueError(
            f"the graph has a cycle that does not pass through a Merge (nodes {names})"
        )
    for name, i, src, idx in patch:
        op = created[name]
        t = resolve(f"{src}:{idx}")
        if t.dtype != op._inputs[i].dtype:
            # The back edge was not type-checked when the Merge was built (a stand-in was).
            raise GraphTypeError(
                f"{by_name[name].where}: node {name!r} ({op.type}) input {i} is {t.name} of type "
                f"{t.dtype.name}; its other inputs are {op._inputs[i].dtype.name}"
            )
        op._update_input(i, t)
    if patch:
        hints = {created[p[0]]: by_name[p[0]].extra.get("output_shapes") for p in patch}
        _reinfer_after(graph, [created[p[0]] for p in patch], hints)
    return created


def _reinfer_after(graph, merges, hints=None) -> None:
    """A Merge's back edge is known only at the end; recompute shapes downstream of it (a
    Merge's recorded shape, its loop variable's invariant, still refines it)."""
    from rill.graph.graph import reinfer_shapes

    first = min(m._id for m in merges)
    for m in merges:
        s = m._inputs[0].shape
        for t in m._inputs[1:]:
            s = s.most_specific_compatible(t.shape)
        hint = (hints or {}).get(m)
        if hint:
            try:
                s = s.merge_with(hint[0])
            except ValueError:
                pass  # a hint: the inputs' shapes win
        m.outputs[0]._shape = s
    for op in graph._ops[first:]:
        if op.type != "Merge":
            reinfer_shapes(op)


def _create(graph, s: NodeSpec, inputs, ctrl_ops, prefix: str):
    op_def = get_op_def(s.op)
    attrs = dict(s.attrs)
    # Group flat inputs by argument, using number/type-list attrs where the spec gave them.
    grouped, pos = [], 0
    n_inputs = len(inputs)
    for k, arg in enumerate(op_def.inputs):
        if arg.number_attr:
            n = attrs.get(arg.number_attr)
            if n is None:
                fixed = sum(
                    1 for a in op_def.inputs[k + 1 :] if not (a.number_attr or a.type_list_attr)
                )
                # Lists sharing this number attr (DynamicStitch's indices and data) split evenly.
                later = op_def.inputs[k + 1 :]
                sharing = 1 + sum(1 for a in later if a.number_attr == arg.number_attr)
                n = (n_inputs - pos - fixed) // sharing
                attrs[arg.number_attr] = n
            if type(n) is not int or not 0 <= n <= n_inputs - pos:
                raise GraphValueError(
                    f"{s.where}: node {s.name!r} ({s.op}) has {arg.number_attr}={n!r} "
                    f"(the length of input list {arg.name!r}) but {n_inputs - pos} data inputs "
                    "left for it"
                )
            grouped.append(list(inputs[pos : pos + n]))
            pos += n
        elif arg.type_list_attr:
            n = len(attrs[arg.type_list_attr]) if arg.type_list_attr in attrs else None
            if n is None:
                fixed = sum(
                    1 for a in op_def.inputs[k + 1 :] if not (a.number_attr or a.type_list_attr)
                )
                n = n_inputs - pos - fixed
            grouped.append(list(inputs[pos : pos + n]))
            pos += n
        else:
            grouped.append(inputs[pos] if pos < n_inputs else None)
            pos += 1
    if pos != n_inputs or any(g is None for g in grouped):
        raise GraphValueError(
            f"{s.where}: node {s.name!r} ({s.op}) has {n_inputs} data inputs; the op takes "
            f"({', '.join(a.spec() for a in op_def.inputs)})"
        )
    # Type attrs that only show in an output type (Placeholder's dtype, Cast's DstT, ...).
    if s.out_hints:
        idx = 0
        for arg in op_def.outputs:
            if arg.type_list_attr:
                n = len(attrs.get(arg.type_list_attr, ())) or None
                if (
                    arg.type_list_attr not in attrs
                    and arg.type_list_attr not in op_def.inferred_attrs
                ):
                    attrs[arg.type_list_attr] = [h[0] for h in s.out_hints[idx:]]
                    n = len(s.out_hints) - idx
                idx += n or 0
                continue
            n = attrs.get(arg.number_attr, 1) if arg.number_attr else 1
            if type(n) is not int or n < 0:
                raise GraphValueError(
                    f"{s.where}: node {s.name!r} ({s.op}) has {arg.number_attr}={n!r} (the "
                    f"length of output list {arg.name!r}), not a count"
                )
            if (
                arg.type_attr
                and arg.type_attr not in attrs
                and arg.type_attr not in op_def.inferred_attrs
                and idx < len(s.out_hints)
            ):
                attrs[arg.type_attr] = s.out_hints[idx][0]
            idx += n
    name = f"{prefix}/{s.name}" if prefix else s.name
    try:
        with graph.control_dependencies(None):
            op = graph.create_op(
                s.op, grouped, attrs, name=name + "/", _source=(s.where, 0, "<import>")
            )
    except (GraphTypeError, GraphValueError) as e:
        raise type(e)(f"{s.where}: {e}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError) as e:
        # An attr value the op's checks did not expect (an empty type, say): name the node.
        raise GraphValueError(f"{s.where}: node {s.name!r} ({s.op}): {e}") from None
    for c in ctrl_ops:
        op._add_control_input(c)
    if s.device:
        try:
            op._set_device(merge_device(op.device, s.device))
        except ValueError as e:
            raise GraphValueError(
                f"{s.where}: node {s.name!r} has a malformed device {s.device!r}: {e}"
            ) from None
    for t, shape in zip(op.outputs, s.extra.get("output_shapes") or ()):
        # Recorded shapes (_output_shapes) refine this op's as it is made, so that the ops
        # made after it see them (a loop's Merge, made before its back edge); they are hints:
        # the shape function wins where they disagree.
        try:
            t._shape = t._shape.merge_with(shape)
        except ValueError:
            pass
    if s.out_hints:
        for t, (_, shape) in zip(op.outputs, s.out_hints):
            if shape is not None:
                try:
                    t._shape = t._shape.merge_with(shape)
                except ValueError:
                    raise GraphValueError(
                        f"{s.where}: {t.name} is declared {shape} but its op computes {t.shape}"
                    ) from None
    return op


def _node_spec_from_def(nd, where: str) -> NodeSpec:
    if not has_op(nd.op):
        # Let build_nodes produce the error (it knows how to name close matches).
        return NodeSpec(nd.name, nd.op, list(nd.input), {}, nd.device, where=where)
    op_def = get_op_def(nd.op)
    attrs = {}
    out_shapes = None
    for k, v in nd.attr.items():
        if k == "_output_shapes":
            out_shapes = attr_from_proto(v, "list(shape)")
            continue
        a = op_def.attr(k)
        if a is None and not k.startswith("_"):
            known = ", ".join(x.name for x in op_def.attrs) or "none"
            raise GraphValueError(
                f"{where}: node {nd.name!r} ({nd.op}) has attr {k!r} that the op does not "
                f"declare (its attrs: {known})"
            )
        try:
            attrs[k] = attr_from_proto(v, a.type if a else _PRIVATE_ATTR_TYPES.get(k))
        except (GraphTypeError, GraphValueError, TypeError, ValueError) as e:
            raise GraphValueError(f"{where}: node {nd.name!r} attr {k!r}: {e}") from None
        if k == "_class" and not all(isinstance(c, str) for c in attrs[k]):
            bad = next(c for c in attrs[k] if not isinstance(c, str))
            raise GraphValueError(
                f"{where}: node {nd.name!r} attr '_class' names colocation group {bad!r}, which "
                "is not UTF-8"
            )
    spec = NodeSpec(nd.name, nd.op, list(nd.input), attrs, nd.device, where=where)
    if out_shapes:
        spec.out_hints = None
        spec.extra["output_shapes"] = out_shapes
    return spec


def import_graph_def(
    graph_def,
    input_map: dict | None = None,
    return_elements: list[str] | None = None,
    name: str | None = None,
    graph=None,
):
    """Adds the ops of a GraphDef (message or serialized bytes) to the default graph.

    Args:
        graph_def: a GraphDef message, or its serialized bytes.
        input_map: {"node:k": Tensor} replacing references to those outputs.
        return_elements: names ("op" or "op:k") whose Operation / Tensor to return.
        name: prefix for the imported names; defaults to "import", "" keeps names as they are.

    Returns:
        The list of `return_elements`, resolved, or None.

    Raises:
        GraphValueError: truncated bytes, an unknown op, a dangling input, a bad attr.
    """
    from rill.graph.graph import get_default_graph

    graph = graph or get_default_graph()
    if isinstance(graph_def, (bytes, bytearray, memoryview)):
        data = bytes(graph_def)
        graph_def = graph_pb2.GraphDef()
        try:
            graph_def.ParseFromString(data)
        except DecodeError as e:
            raise GraphValueError(
                f"cannot parse GraphDef ({len(data)} bytes): the data is truncated or is not a "
                f"GraphDef ({e})"
            ) from None
    if graph_def.library.function:
        # Calls and functional control flow run as control flow v1 (rill.graph.function_lowering);
        # the library is kept on the graph so that as_graph_def writes it back.
        from rill.graph.function_lowering import lower_functions

        library = getattr(graph, "_function_library", None)
        if library is None:
            library = graph._function_library = graph_pb2.GraphDef().library
        have = {f.signature.name for f in library.function}
        library.function.extend(
            f for f in graph_def.library.function if f.signature.name not in have
        )
        graph_def = lower_functions(graph_def)
    prefix = "import" if name is None else name
    if prefix:
        with graph.name_scope(prefix) as scope:
            prefix = scope[:-1]
    specs = [_node_spec_from_def(nd, f"node {nd.name!r}") for nd in graph_def.node]
    with graph.name_scope(None):
        created = build_nodes(graph, specs, input_map, prefix)
    for s in specs:
        shapes = s.extra.get("output_shapes")
        if shapes:
            op = created[s.name]
            for t, sh in zip(op.outputs, shapes):
                try:
                    t._shape = t._shape.merge_with(sh)
                except ValueError:
                    pass  # recorded shapes are hints; the shape function is authoritative
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        src, idx, _ = _parse_ref(r)
        op = created.get(src)
        if op is None:
            raise GraphValueError(f"return element {r!r} is not in the imported graph")
        out.append(op.outputs[idx] if ":" in r else op)
    return out
