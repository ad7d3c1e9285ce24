"""rill graph → ONNX ModelProto.

`export_onnx(graph, inputs, outputs)` writes the inference subgraph between `inputs` (fed
tensors become graph inputs) and `outputs`. Consts become initializers; variables are frozen:
their values are read through `session` and written as initializers too. Conds become ONNX If
nodes and while loops Loop nodes (see export_structure and export_control_flow); every other op
goes through its rule in the export registry (export_math, export_array, export_gather,
export_nn).

Layouts. TensorFlow-style graphs are NHWC, ONNX's Conv, pooling and BatchNormalization are
NCHW. Every ONNX value carries a *layout*: None when it holds the rill tensor as is, else a
permutation `p` with `onnx_value = transpose(rill_value, p)`. An NHWC convolution asks for its
input in layout (0, 3, 1, 2) and leaves its output in that layout; elementwise ops, bias adds,
activations, reductions, pads, concats and the NCHW ops keep whatever layout their inputs have;
every other op asks for its inputs as they are in rill. A Transpose is written only where a
consumer needs a layout the value does not have (once per value and layout), so a chain of NHWC
convolutions, bias adds, activations and pools costs one Transpose in and one out.

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     x = rg.placeholder(rg.float32, [None, 3], name="x")
...     y = rg.relu(x * 2.0, name="y")
>>> m = export_onnx(g, [x], [y])
>>> [n.op_type for n in m.graph.node], m.graph.output[0].name
(['Mul', 'Relu'], 'y')
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rill.graph import dtypes
from rill.graph.errors import UnimplementedError
from rill.graph.graph import Graph, Operation, Tensor
from rill.graph.onnx import import_util
from rill.graph.onnx.export_static import StaticValues, describe
from rill.graph.onnx.export_structure import Scope, ScopeTree, collect_ops
from rill.graph.onnx.registry import export_rules
from rill.graph.shapes import TensorShape

__all__ = ["ExportContext", "export_onnx", "onnx_dtype", "MIN_OPSET"]

MIN_OPSET = 13
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min

_ONNX_TYPES = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL,
    "string": TensorProto.STRING,
    "complex64": TensorProto.COMPLEX64,
    "complex128": TensorProto.COMPLEX128,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float8_e8m0fnu": TensorProto.FLOAT8E8M0,
    "float4_e2m1fn": TensorProto.FLOAT4E2M1,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
    "int2": TensorProto.INT2,
    "uint2": TensorProto.UINT2,
}


def onnx_dtype(dtype: dtypes.DType) -> int:
    """The ONNX TensorProto element type of a rill dtype (ValueError when ONNX has none)."""
    try:
        return _ONNX_TYPES[dtype.name]
    except KeyError:
        raise ValueError(f"ONNX has no tensor element type for rill dtype {dtype.name}") from None


def _value_info(name: str, dtype: dtypes.DType, shape: TensorShape | None):
    dims = None if shape is None or shape.dims is None else list(shape.dims)
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


def _inverse(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


class _Model:
    """What the whole export shares: names, initializers, the static-value cache, the scopes."""

    def __init__(self, opset: int, session, fed: set[Tensor]):
        self.opset = opset
        self.session = session
        self.fed = fed
        self.fed_binding: dict[Tensor, tuple[str, None]] = {}
        self.value_names: set[str] = set()
        self.node_names: set[str] = set()
        self.initializers: list[onnx.TensorProto] = []
        self._const_cache: dict[tuple, str] = {}
        values = StaticValues(fed, session)
        self.static, self.frozen = values.static, values.frozen
        self.tree: ScopeTree | None = None
        # ONNX value name → element type, for the values that are tensor sequences.
        self.sequences: dict[str, int] = {}

    def fresh(self, hint: str, nodes: bool = False) -> str:
        used = self.node_names if nodes else self.value_names
        name, k = hint, 0
        while name in used:
            k += 1
            name = f"{hint}_{k}"
        used.add(name)
        return name

    def initializer(self, value: np.ndarray, hint: str) -> str:
        value = np.asarray(value)
        key = None
        if value.size <= 16 and value.dtype != object:
            key = (value.dtype.str, value.shape, value.tobytes())
            got = self._const_cache.get(key)
            if got is not None:
                return got
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        if key is not None:
            self._const_cache[key] = name
        return name


class ExportContext:
    """One ONNX graph being written (the main graph, a branch of an If, a Loop body), and the
    handle an export rule works through. `op` is the rill op being converted."""

    def __init__(self, model: _Model, parent: ExportContext | None = None, nodes=None):
        self.model = model
        self.parent = parent
        self.nodes: list[onnx.NodeProto] = [] if nodes is None else nodes
        self.env: dict[Tensor, tuple[str, tuple | None]] = {}
        self._relayout: dict[tuple[Tensor, tuple | None], str] = {}
        self.op: Operation | None = None

    @property
    def opset(self) -> int:
        return self.model.opset

    # -- values ------------------------------------------------------------------------------------

    def _owner(self, t: Tensor) -> ExportContext | None:
        c = self
        while c is not None:
            if t in c.env:
                return c
            c = c.parent
        return None

    def has(self, t: Tensor) -> bool:
        return self._owner(t) is not None

    def value_any(self, t: Tensor) -> tuple[str, tuple | None]:
        """t's ONNX name and layout, as it was produced."""
        owner = self._owner(t)
        if owner is None:
            raise UnimplementedError(
                f"internal export error: {t.name} is used before it was converted", op=t.op
            )
        return owner.env[t]

    def value(self, t: Tensor, layout: tuple | None = None) -> str:
        """t's ONNX name in `layout` (None: as the rill tensor is), transposing if needed."""
        owner = self._owner(t)
        if owner is None:
            raise UnimplementedError(
                f"internal export error: {t.name} is used before it was converted", op=t.op
            )
        name, have = owner.env[t]
        rank = len(layout or have or ())
        ident = tuple(range(rank))
        want = None if layout is None or tuple(layout) == ident else tuple(layout)
        have = None if have is None or tuple(have) == ident else tuple(have)
        if want == have:
            return name
        key = (t, want)
        got = owner._relayout.get(key)
        if got is None:
            src = have or tuple(range(len(want)))
            dst = want or tuple(range(len(have)))
            perm = [src.index(d) for d in dst]
            got = owner._transpose(t, name, src, dst, perm)
            owner._relayout[key] = got
        return got

    def _transpose(self, t: Tensor, name: str, src, dst, perm) -> str:
        dims = t.shape.dims
        hint = f"{t.op.name}/{'nchw' if dst == (0, 3, 1, 2) else 'transpose'}"
        if dims is not None and 0 not in dims:
            # Moving only size-1 axes around is a Reshape, which costs nothing.
            moved = [d for d in dst if dims[d] != 1]
            unknown = sum(dims[d] is None for d in dst)
            if moved == [d for d in src if dims[d] != 1] and unknown <= 1:
                shape = [-1 if dims[d] is None else dims[d] for d in dst]
                sname = self.model.initializer(np.array(shape, np.int64), f"{hint}/shape")
                return self._emit("Reshape", [name, sname], [self.model.fresh(hint)], hint)[0]
        return self._emit("Transpose", [name], [self.model.fresh(hint)], hint, perm=perm)[0]

    def mark_sequence(self, name: str, elem_type: int) -> None:
        """Records that ONNX value `name` is a sequence of `elem_type` tensors."""
        self.model.sequences[name] = elem_type

    def sequence_type(self, name: str) -> int | None:
        """The element type of ONNX value `name` when it is a sequence, else None."""
        return self.model.sequences.get(name)

    def value_info(self, name: str, t: Tensor, with_shape: bool = True):
        """The ValueInfo of ONNX value `name` holding rill tensor t (a sequence's when it is)."""
        elem = self.model.sequences.get(name)
        if elem is not None:
            return helper.make_tensor_sequence_value_info(name, elem, None)
        return _value_info(name, t.dtype, t.shape if with_shape else None)

    def bind(self, t: Tensor, name: str, layout: tuple | None = None) -> None:
        if layout is not None and tuple(layout) == tuple(range(len(layout))):
            layout = None
        self.env[t] = (name, None if layout is None else tuple(layout))

    def const(self, t: Tensor) -> np.ndarray | None:
        return self.model.static(t)

    def require_const(self, t: Tensor, what: str) -> np.ndarray:
        v = self.const(t)
        if v is None:
            self.unsupported(f"its {what} ({t.name}) must be known at export time")
        return v

    def initializer(self, value, hint: str | None = None, dtype=None) -> str:
        value = np.asarray(value, dtype=dtype)
        return self.model.initializer(value, hint or f"{self.op.name}/const")

    def scalar_like(self, value, t: Tensor) -> str:
        """A scalar initializer of t's dtype."""
        return self.initializer(np.array(value, dtype=t.dtype.np))

    def int64(self, t: Tensor) -> str:
        """An integer tensor as int64 (the index type ONNX ops take)."""
        v = self.const(t)
        if v is not None:
            return self.initializer(v.astype(np.int64))
        name = self.value(t)
        if t.dtype is dtypes.int64:
            return name
        return self.node("Cast", [name], to=TensorProto.INT64)

    # -- nodes -------------------------------------------------------------------------------------

    def _emit(self, op_type, inputs, outputs, hint, **attrs) -> list[str]:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node(op_type, list(inputs), list(outputs),
                                name=self.model.fresh(hint, nodes=True), **attrs)  # fmt: skip
        self.nodes.append(node)
        return list(outputs)

    def node(self, op_type: str, inputs, outputs=None, layout=None, **attrs):
        """Writes one ONNX node. `outputs`: None (one fresh value), a count, a rill Tensor (the
        value is named after and bound to it, in `layout`) or a list of Tensors/None. Returns the
        output name, or the list of names when `outputs` is a count or a list."""
        hint = self.op.name if self.op is not None else op_type
        single = outputs is None or isinstance(outputs, Tensor)
        if outputs is None:
            outputs = 1
        if isinstance(outputs, int):
            names = [self.model.fresh(f"{hint}/{op_type}") for _ in range(outputs)]
            targets = [None] * outputs
        else:
            targets = [outputs] if isinstance(outputs, Tensor) else list(outputs)
            names = [self.model.fresh(self.tensor_hint(t) if t is not None else f"{hint}/{op_type}")
                     for t in targets]  # fmt: skip
        self._emit(op_type, inputs, names, hint, **attrs)
        for t, n in zip(targets, names):
            if t is not None:
                self.bind(t, n, layout)
        return names[0] if single else names

    @staticmethod
    def tensor_hint(t: Tensor) -> str:
        return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"

    # -- helpers for rules -------------------------------------------------------------------------

    def unsupported(self, why: str):
        op = self.op
        raise UnimplementedError(f"cannot export {describe(op)} to ONNX: {why}", op=op)

    def rank(self, t: Tensor) -> int | None:
        return t.shape.rank

    def unary(self, op: Operation, onnx_type: str, **attrs) -> None:
        """An elementwise op of one input: keeps the input's layout."""
        name, layout = self.value_any(op._inputs[0])
        self.node(onnx_type, [name], op.outputs[0], layout=layout, **attrs)

    def elementwise(self, op: Operation, onnx_type: str, inputs=None, out=None, **attrs):
        """A broadcasting elementwise op: inputs in a common layout when that is cheap."""
        names, layout = self.broadcast_values(list(inputs or op._inputs))
        return self.node(onnx_type, names, out if out is not None else op.outputs[0],
                         layout=layout, **attrs)  # fmt: skip

    def broadcast_values(self, ts: list[Tensor]) -> tuple[list[str], tuple | None]:
        """Names of `ts` in one layout in which numpy broadcasting still lines them up."""
        layout = None
        for t in ts:
            if self.const(t) is None and self.has(t):
                lay = self.value_any(t)[1]
                if lay is not None and t.shape.rank == len(lay):
                    layout = lay
                    break
        if layout is not None:
            names = self._in_layout(ts, layout)
            if names is not None:
                return names, layout
        return [self.value(t) for t in ts], None

    def _in_layout(self, ts: list[Tensor], layout: tuple) -> list[str] | None:
        rank = len(layout)
        names = []
        for t in ts:
            v = self.const(t)
            r = t.shape.rank
            if v is not None and v.ndim <= rank:
                if v.size == 1 or v.ndim == 0:
                    names.append(self.initializer(v.reshape((1,) * v.ndim)))
                    continue
                full = v.reshape((1,) * (rank - v.ndim) + v.shape).transpose(layout)
                names.append(self.initializer(np.ascontiguousarray(full)))
            elif r == 0:
                names.append(self.value(t))
            elif r == rank:
                names.append(self.value(t, layout))
            elif r == 1:
                # [C] broadcasts along the last rill axis: put it where that axis now is.
                pos = layout.index(rank - 1)
                shape = self.initializer(np.array([-1] + [1] * (rank - 1 - pos), np.int64))
                names.append(self.node("Reshape", [self.value(t), shape]))
            else:
                return None
        return names


def _as_tensor(graph: Graph, t, what: str) -> Tensor:
    if isinstance(t, Tensor):
        return t
    if isinstance(t, Operation):
        return t.outputs[0]
    if isinstance(t, str):
        return graph.get_tensor_by_name(t if ":" in t else f"{t}:0")
    raise TypeError(f"export_onnx(): {what} must be Tensors or tensor names, got {t!r}")


def export_onnx(graph: Graph, inputs, outputs, opset: int | None = None, session=None,
                name: str | None = None) -> onnx.ModelProto:  # fmt: skip
    """The inference subgraph of `graph` from `inputs` to `outputs` as an ONNX model.

    Args:
        graph: the rill Graph.
        inputs: tensors (or names) fed by the model's user; they become graph inputs.
        outputs: tensors (or names) the model computes; they become graph outputs, named after
            the rill tensors (`op` for output 0, `op:k` otherwise).
        opset: the ai.onnx opset, 13 through the newest the installed onnx ships. Default:
            the newest the installed onnxruntime loads, else 21 (see rill.graph.onnx.versions;
            never one the installed onnxruntime refuses).
        session: a Session holding initialized variables; each variable read becomes an
            initializer with its current value (frozen). Needed only when the subgraph reads
            variables.
        name: the ONNX graph's name (default "rill").

    Returns:
        An onnx.ModelProto at the lowest IR version the opset allows.

    Raises:
        ValueError: an opset outside 13..newest, an output that is not computed in the
            graph's top level.
        UnimplementedError: an op with no ONNX export (the message names the op, its printed
            line and the source line that created it).
    """
    from rill.graph.onnx.versions import default_opset, kernel_opset

    newest = onnx.defs.onnx_opset_version()
    defaulted = opset is None
    opset = default_opset(MIN_OPSET) if defaulted else int(opset)
    if not MIN_OPSET <= opset <= newest:
        raise ValueError(
            f"export_onnx(): ONNX opset {opset} is outside the supported range "
            f"{MIN_OPSET}..{newest} (onnx {onnx.__version__})"
        )
    inputs = [_as_tensor(graph, t, "inputs") for t in inputs]
    outputs = [_as_tensor(graph, t, "outputs") for t in outputs]
    for t in (*inputs, *outputs):
        if t.graph is not graph:
            raise ValueError(f"export_onnx(): {t.name} is not a tensor of this graph")
    fed = set(inputs)
    model = _Model(opset, session, fed)
    needed = collect_ops(outputs, fed)
    tree = ScopeTree(needed, fed)
    model.tree = tree
    for t in (*inputs, *outputs):
        if t.op in tree.frame and (tree.frame[t.op] is not None or tree.guard[t.op]):
            where = "while loop" if tree.frame[t.op] is not None else "cond branch"
            raise ValueError(
                f"export_onnx(): {t.name} is computed inside a {where}; export the values "
                "the loop or cond returns instead"
            )
    root = ExportContext(model)
    graph_inputs = []
    for t in inputs:
        n = model.fresh(ExportContext.tensor_hint(t))
        root.bind(t, n)
        model.fed_binding[t] = root.env[t]
        graph_inputs.append(_value_info(n, t.dtype, t.shape))
    # Output names are the rill tensors' names; values computed inside get suffixed ones.
    out_names = [model.fresh(ExportContext.tensor_hint(t)) for t in outputs]
    members = [op for op in needed if any(o not in fed for o in op.outputs)]
    emit_scope(root, tree.root, members)
    graph_outputs = []
    for t, want in zip(outputs, out_names):
        src = root.value(t)
        root.op = None
        root._emit("Identity", [src], [want], want)
        graph_outputs.append(_value_info(want, t.dtype, t.shape))
    g = helper.make_graph(root.nodes, name or "rill", graph_inputs, graph_outputs,
                          initializer=model.initializers)  # fmt: skip
    from rill.graph.onnx import export_passes

    export_passes.optimize(g)
    export_passes.guard_zero_pad_before_max_pool(g, opset)
    ids = [helper.make_opsetid("", opset)]
    m = helper.make_model(g, opset_imports=ids, producer_name="rill",
                          producer_version=_rill_version())  # fmt: skip
    m.ir_version = helper.find_min_ir_version_for(ids)
    _outputs_ranked(m)
    if defaulted:
        # An op the runtime has no kernel for at this opset (versions.PROBED): the newest
        # opset at which it has one, the model made again there.
        used = {n.op_type for gr in import_util.all_graphs(g) for n in gr.node}
        fits = kernel_opset(used, opset, MIN_OPSET)
        if fits != opset:
            return export_onnx(graph, inputs, outputs, opset=fits, session=session, name=name)
    return m


def _outputs_ranked(m: onnx.ModelProto) -> None:
    """Gives the graph outputs whose rank rill does not know (a TensorArray read of elements
    of no declared shape) the shape ONNX's inference finds, where it finds one: a model's
    outputs must have a shape (of unknown dimensions, at least a rank)."""
    loose = [o for o in m.graph.output
             if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")]  # fmt: skip
    if not loose:
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(m)
    except Exception:  # noqa: BLE001 - best effort: the outputs stay as they are
        return
    found = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    sources = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "Identity"}
    for o in loose:
        vi = found.get(o.name) or found.get(sources.get(o.name, ""))
        if vi is not None and vi.type.tensor_type.HasField("shape"):
            o.type.tensor_type.shape.CopyFrom(vi.type.tensor_type.shape)


def _rill_version() -> str:
    import rill.graph

    return getattr(rill.graph, "__version__", "0")


def emit_scope(ctx: ExportContext, scope: Scope, members) -> None:
    """Converts `members` (ops of `scope` and of the conds and loops nested in it) into ctx."""
    tree = ctx.model.tree
    for item, ops in tree.order(scope, members):
        if isinstance(item, Operation):
            convert(ctx, item)
        elif item[0] == "cond":
            export_control_flow.emit_cond(ctx, scope, item[1], ops)
        else:
            export_control_flow.emit_loop(ctx, scope, item[1], ops)


def _why_not(op_type: str) -> str:
    """Why a family of ops has no export, for the error message."""
    if op_type.endswith("Grad") or op_type.startswith(("Conv2DBackpropFilter",
                                                        "DepthwiseConv2dNativeBackpropFilter")) or \
            op_type in ("BroadcastGradientArgs", "ConcatOffset"):  # fmt: skip
        return ": it is part of a gradient computation; export the inference subgraph"
    if op_type.startswith(("Random", "TruncatedNormal", "Multinomial")):
        return (
            ": ONNX's random ops cannot reproduce rill's (TensorFlow's) random streams; feed "
            "the random values as an input instead"
        )
    if op_type.startswith(("ResourceApply", "ResourceSparseApply", "Assign", "ResourceScatter")):
        return ": it updates a variable; the export freezes variables (inference only)"
    if op_type.startswith("Stack"):
        return ": stacks have no ONNX equivalent"
    if "Queue" in op_type:
        return ": queues are input pipelines, outside an ONNX model; feed the dequeued tensors"
    return ""


# Ops whose value is written as an initializer when it is known at export time (shape
# arithmetic on static shapes and constants).
_FOLDABLE = frozenset({"Shape", "Size", "Rank", "Pack", "ConcatV2", "Cast", "AddV2", "Add", "Sub",
                       "Mul", "Maximum", "Minimum", "FloorDiv", "Neg", "StridedSlice", "ShapeN"})  # fmt: skip


def convert(ctx: ExportContext, op: Operation) -> None:
    rule = export_rules.lookup(op.type)
    if rule is None:
        raise UnimplementedError(
            f"cannot export {describe(op)} to ONNX: rill has no ONNX export for {op.type}"
            f"{_why_not(op.type)} (the ops that export: rill.graph.onnx.registry.export_rules"
            ".ops())",
            op=op,
        )
    ctx.op = op
    if op.type in _FOLDABLE:
        values = [ctx.model.static(t) for t in op.outputs]
        if all(v is not None for v in values):
            for t, v in zip(op.outputs, values):
                ctx.bind(t, ctx.model.initializer(v, ExportContext.tensor_hint(t)))
            return
    rule(ctx, op)
    for t in op.outputs:
        if t in ctx.model.fed:
            ctx.env[t] = ctx.model.fed_binding[t]  # a fed output keeps its graph input


# Rules register on import.
from rill.graph.onnx import (  # noqa: E402, F401
    export_array,
    export_bits,
    export_control_flow,
    export_gather,
    export_manip,
    export_math,
    export_nn,
    export_onnx_ops,
    export_remaining,
    export_rnn,
    export_sequence,
    export_special_math,
)
