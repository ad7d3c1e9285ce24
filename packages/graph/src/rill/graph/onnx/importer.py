"""ONNX → rill: the import driver.

`import_onnx(model)` reads a ModelProto (or its bytes, or a path), brings a model below opset 13
up through onnx's version converter, and builds a rill graph: graph inputs become Placeholders
(PlaceholderWithDefault when an initializer of the same name gives a default), initializers
become Consts, every node goes through its rule in `import_registry`, and each graph output gets
an Identity named after it. Shapes from the model's value_info are merged into the static shapes
that rill's shape functions infer. Sequences and optionals become scalar `variant` tensors
(TensorLists and Optionals; see import_sequence), whose ONNX kind the importer keeps.

>>> import onnx.helper as oh
>>> node = oh.make_node("Relu", ["x"], ["y"])
>>> g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", 1, [2])],
...                   [oh.make_tensor_value_info("y", 1, [2])])
>>> graph, inputs, outputs = import_onnx(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]))
>>> inputs["x"], outputs["y"]
(<Tensor 'x:0' f32[2]>, <Tensor 'y:0' f32[2]>)
"""

from __future__ import annotations

import collections
import os
import re

import numpy as np
import onnx
import onnx.defs
import onnx.shape_inference
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper, version_converter

from rill.graph import dtypes
from rill.graph.graph import Graph, Tensor, constant
from rill.graph.onnx import (  # noqa: F401 - imported for their rule registrations
    import_array,
    import_control_flow,
    import_conv,
    import_conv_transpose,
    import_detect,
    import_legacy,
    import_linalg,
    import_math,
    import_ml,
    import_more_math,
    import_ms_fused,
    import_ms_quant,
    import_nn,
    import_norm_more,
    import_preview,
    import_quant,
    import_random,
    import_recurrent_state,
    import_reduce,
    import_resize,
    import_rnn,
    import_sequence,
    import_shape,
    import_signal,
    import_strings,
    import_svm,
)
from rill.graph.onnx.import_functions import inline_functions
from rill.graph.onnx.import_qdq import fuse_qdq
from rill.graph.onnx.import_registry import get_import_rule
from rill.graph.onnx.import_scan8 import rewrite_scan8
from rill.graph.onnx.import_sequence import coerce, kind_of_type
from rill.graph.onnx.import_util import OnnxImportError, all_graphs, op, rill_dtype, static
from rill.graph.onnx.untrusted import (
    attr_values,
    check_names,
    check_node_inputs,
    infer_types_if_valid,
    load_external_data,
    validate_tensors,
)
from rill.graph.shapes import TensorShape, unknown_shape

__all__ = [
    "MIN_OPSET",
    "OnnxImportError",
    "OnnxNode",
    "import_onnx",
    "load_model",
    "unsupported_ops",
]

MIN_OPSET = 13
NEWEST_OPSET = onnx.defs.onnx_opset_version()
_DOMAINS = ("", "ai.onnx")


def load_model(model, external_data_dir: str | os.PathLike | None = None) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, serialized bytes, or a file path; clear errors otherwise.

    A model read from a file gets its external tensor data read in, from `external_data_dir`
    or else the file's own directory (untrusted.load_external_data's checks), so that the
    result stands alone; other models keep theirs for import_onnx to refuse or read."""
    if isinstance(model, onnx.ModelProto):
        return model
    where = "the model bytes"
    if isinstance(model, (str, os.PathLike)):
        where = os.fspath(model)
        try:
            with open(model, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"cannot read ONNX model {where!r}: {e.strerror}") from e
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    else:
        raise TypeError(f"import_onnx takes a ModelProto, bytes or a path, not {type(model)}")
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except DecodeError as e:
        raise OnnxImportError(
            f"{where} is not a valid ONNX model ({len(data)} bytes; the protobuf decoder says "
            f"{e}): the file is truncated or is not an ONNX ModelProto"
        ) from None
    if not m.HasField("graph") or (not m.graph.node and not m.graph.output):
        raise OnnxImportError(
            f"{where} ({len(data)} bytes) holds no ONNX graph: the file is empty, truncated, or "
            "not an ONNX model"
        )
    if isinstance(model, (str, os.PathLike)):
        base = external_data_dir
        if base is None:
            base = os.path.dirname(os.path.abspath(where))
        load_external_data(m, base)
    return m


def _ai_onnx_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in _DOMAINS:
            return o.version
    return 1 if not model.opset_import else NEWEST_OPSET


def _all_nodes(graph: onnx.GraphProto):
    """Every node of `graph` and of its subgraphs."""
    for g in all_graphs(graph):
        yield from g.node


def unsupported_ops(model) -> list[tuple[str, str, int]]:
    """(domain, op type, opset) of every op in `model` (subgraphs and model-local functions'
    bodies included) rill cannot import."""
    m = load_model(model)
    if m.functions:
        try:
            m = inline_functions(m)
        except OnnxImportError:  # listed as they are: the import names the problem
            pass
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}
    missing = {}
    for n in _all_nodes(m.graph):
        d = "" if n.domain == "ai.onnx" else n.domain
        if get_import_rule(n.op_type, d) is None:
            missing[(d, n.op_type)] = opsets.get(d, 0)
    return sorted((d, t, v) for (d, t), v in missing.items())


def _upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` at opset MIN_OPSET or newer (version converter); a clear refusal otherwise."""
    v = _ai_onnx_opset(model)
    if v > NEWEST_OPSET:
        raise OnnxImportError(
            f"the model uses ai.onnx opset {v}; the installed onnx knows opsets up to "
            f"{NEWEST_OPSET}: upgrade onnx"
        )
    if v >= MIN_OPSET:
        return model
    if v < 9:
        model = rewrite_scan8(model)  # the converter's 8→9 Scan adapter drops the batch axis
    model = import_legacy.convertible_ir(import_legacy.image_scaler(model, v))
    try:
        if v < 7:
            # The converter's 6→7 broadcast adapter needs the shapes of both inputs, which onnx
            # infers for the opset-6 forms of ops and not for all older ones (Relu-1).
            if v < 6:
                model = version_converter.convert_version(model, 6)
            model = _infer_types(import_legacy.legacy_broadcast_axes(model))
        converted = version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # the converter raises RuntimeError/ValueError from C++
        culprits = _unconvertible(model, v)
        ops = ", ".join(f"{t} (opset {v})" for t in culprits)
        raise OnnxImportError(
            f"the model uses ai.onnx opset {v}, below the {MIN_OPSET} rill imports, and onnx's "
            f"version converter cannot bring {ops} to opset {MIN_OPSET} ({str(e).strip()}); "
            f"re-export the model at opset {MIN_OPSET} or newer"
        ) from None
    if v <= 10:
        import_resize.resize10_semantics(converted)
    import_legacy.hardmax_2d(converted)
    return converted


def _unconvertible(model: onnx.ModelProto, version: int) -> list[str]:
    """The op types whose one-node models the converter refuses (all op types if none alone)."""
    types = {vi.name: vi for vi in [*model.graph.input, *model.graph.value_info,
                                    *model.graph.output]}  # fmt: skip
    bad, seen = [], []
    for n in model.graph.node:
        if n.op_type in seen:
            continue
        seen.append(n.op_type)
        ins = [types.get(i) or helper.make_empty_tensor_value_info(i) for i in n.input if i]
        outs = [types.get(o) or helper.make_empty_tensor_value_info(o) for o in n.output if o]
        g = helper.make_graph([n], "one", ins, outs)
        m = helper.make_model(g, opset_imports=list(model.opset_import))
        try:
            version_converter.convert_version(m, MIN_OPSET)
        except Exception:
            bad.append(n.op_type)
    return bad or seen


_INVALID = re.compile(r"[^A-Za-z0-9_.\-/]")


def _rill_name(name: str, fallback: str) -> str:
    """A valid rill op name from an ONNX name (which may hold any character)."""
    s = re.sub("/+", "/", _INVALID.sub("_", name)).strip("/")
    if not s:
        return fallback
    return s if re.match(r"[A-Za-z0-9.]", s) else f"v{s}"


def _shape_of(type_proto: onnx.TypeProto) -> TensorShape:
    t = type_proto.tensor_type
    if not t.HasField("shape"):
        return unknown_shape()
    return TensorShape([d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim])


def _attr_value(a: onnx.AttributeProto):
    if a.type == onnx.AttributeProto.GRAPH:
        return a.g
    if a.type == onnx.AttributeProto.GRAPHS:
        return list(a.graphs)
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode("utf-8") for s in v]
    return v


class _Scope:
    """ONNX value names → rill tensors; a subgraph's scope falls back to its parent's."""

    def __init__(self, parent: _Scope | None = None):
        self.values: dict[str, Tensor] = {}
        self.parent = parent

    def get(self, name: str) -> Tensor | None:
        s = self
        while s is not None:
            if name in s.values:
                return s.values[name]
            s = s.parent
        return None

    def defines(self, name: str) -> bool:
        return self.get(name) is not None


class OnnxNode:
    """What an import rule sees of the node it converts."""

    def __init__(self, importer: _Importer, proto: onnx.NodeProto, scope: _Scope):
        self.proto = proto
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.name = proto.name
        self.opset = importer.opsets.get("" if proto.domain == "ai.onnx" else proto.domain, 0)
        self.output_names = list(proto.output)
        self._importer = importer
        self._scope = scope

    @property
    def num_outputs(self) -> int:
        """How many outputs the node declares (trailing optional outputs may be omitted)."""
        return len(self.output_names)

    def output_used(self, i: int) -> bool:
        return i < len(self.output_names) and self.output_names[i] != ""

    def static(self, t: Tensor | None) -> np.ndarray | None:
        """The value of an input when it is a constant of the graph, else None."""
        return static(t)

    def output_dtype(self, i: int) -> dtypes.DType | None:
        """The dtype the model declares for output i (value_info or graph output), if any."""
        vi = self._importer.value_types.get(self.output_names[i]) if self.output_used(i) else None
        if vi is None or not vi.type.tensor_type.elem_type:
            return None
        return rill_dtype(vi.type.tensor_type.elem_type)

    def kind(self, t: Tensor):
        """The ONNX kind of a value: its dtype for a tensor, import_sequence.SequenceOf or
        OptionalOf for a `variant` one (None when not known)."""
        return self._importer.kind(t)

    def mark(self, t: Tensor, kind) -> Tensor:
        """Records `kind` as the ONNX kind of the variant tensor `t`; returns `t`."""
        return self._importer.mark(t, kind)

    def declared_kind(self, i: int):
        """The kind the model declares for output i (value_info or graph output), if any."""
        vi = self._importer.value_types.get(self.output_names[i]) if self.output_used(i) else None
        if vi is None or not vi.HasField("type"):
            return None
        return kind_of_type(vi.type, f"{self.where()}: output {self.output_names[i]!r}: ")

    def import_subgraph(self, graph: onnx.GraphProto, inputs: list[Tensor]) -> list[Tensor]:
        """Builds a subgraph (If branch, Loop body) in the current graph context.

        `inputs` are bound to the subgraph's formal inputs in order; names the subgraph does not
        define resolve in the enclosing scopes. Returns the subgraph's outputs.
        """
        return self._importer.import_graph(graph, _Scope(self._scope), inputs)

    def where(self) -> str:
        name = f"{self.name!r} " if self.name else ""
        return f"node {name}({self.op_type}, opset {self.opset})"


class _Importer:
    def __init__(self, model: onnx.ModelProto, graph: Graph):
        self.model = model
        self.graph = graph
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version
                       for o in model.opset_import}  # fmt: skip
        self.opsets.setdefault("", _ai_onnx_opset(model))
        self.value_types: dict[str, onnx.ValueInfoProto] = {}
        # The ONNX kind (SequenceOf / OptionalOf) of every variant tensor made so far.
        self.kinds: dict[Tensor, object] = {}
        for vi in _value_infos(model.graph):
            self.value_types[vi.name] = vi

    # -- graphs ---------------------------------------------------------------------------------

    def import_main(self):
        gp = self.model.graph
        scope = _Scope()
        inits = {t.name: t for t in gp.initializer}
        placeholders: dict[str, Tensor] = {}
        for t in gp.initializer:
            arr = _initializer_array(t)
            scope.values[t.name] = constant(arr, name=_rill_name(t.name, "Const"))
        for vi in gp.input:
            name = _rill_name(vi.name, "input")
            if not vi.type.HasField("tensor_type") and vi.name not in inits:
                kind = kind_of_type(vi.type, f"graph input {vi.name!r}: ")
                p = op("Placeholder", [], {"dtype": dtypes.variant, "shape": TensorShape([])},
                       name=name)  # fmt: skip
                self.kinds[p] = kind
                scope.values[vi.name] = placeholders[vi.name] = p
                continue
            dt, shape = self._tensor_type(vi, "graph input")
            if vi.name in inits:
                default = scope.values[vi.name]
                if default.dtype != dt:
                    raise OnnxImportError(
                        f"graph input {vi.name!r} is declared {dt.name} but its initializer is "
                        f"{default.dtype.name}"
                    )
                p = op("PlaceholderWithDefault", [default], {"dtype": dt, "shape": shape},
                       name=name)  # fmt: skip
            else:
                p = op("Placeholder", [], {"dtype": dt, "shape": shape}, name=name)
            scope.values[vi.name] = p
            placeholders[vi.name] = p
        outs = self._import_nodes(gp, scope)
        self.values = scope.values
        outputs = {}
        for vi, t in zip(gp.output, outs):
            outputs[vi.name] = op("Identity", [t], name=_rill_name(vi.name, "output"))
        return placeholders, outputs

    def import_graph(self, gp: onnx.GraphProto, scope: _Scope, inputs: list[Tensor]):
        if len(inputs) != len(gp.input):
            raise OnnxImportError(
                f"subgraph {gp.name!r} takes {len(gp.input)} inputs; {len(inputs)} were given"
            )
        for t in gp.initializer:
            scope.values[t.name] = constant(_initializer_array(t), name=_rill_name(t.name, "Const"))
        for vi, t in zip(gp.input, inputs):
            scope.values[vi.name] = t
            if t.dtype is dtypes.variant and self.kind(t) is None and vi.HasField("type"):
                self.kinds[t] = kind_of_type(vi.type, f"subgraph input {vi.name!r}: ")
        return self._import_nodes(gp, scope)

    def mark(self, t: Tensor, kind) -> Tensor:
        if t.dtype is dtypes.variant and kind is not None:
            self.kinds[t] = kind
        return t

    def kind(self, t: Tensor):
        if t.dtype is not dtypes.variant:
            return t.dtype
        # Ops that pass a value through (Identity, and a loop's or cond's plumbing) keep its kind.
        for _ in range(64):
            k = self.kinds.get(t)
            if k is not None or t.op.type not in _PASS_THROUGH or not t.op._inputs:
                return k
            t = t.op._inputs[0]
        return None

    def _import_nodes(self, gp: onnx.GraphProto, scope: _Scope) -> list[Tensor]:
        for node in _topological(gp, scope):
            self._import_node(node, scope)
        outs = []
        for vi in gp.output:
            t = scope.get(vi.name)
            if t is None:
                raise OnnxImportError(
                    f"graph output {vi.name!r} of graph {gp.name!r} is produced by no node, "
                    "input or initializer (the model is incomplete or truncated)"
                )
            if _zip_mapped(vi, t):
                pass  # ZipMap's probabilities, as the tensor they are made of (import_ml)
            elif vi.type.HasField("sequence_type") or vi.type.HasField("optional_type"):
                t = coerce(self, t, kind_of_type(vi.type, f"graph output {vi.name!r}: "))
            elif vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                want = rill_dtype(vi.type.tensor_type.elem_type, f"graph output {vi.name!r}: ")
                if t.dtype != want:
                    raise OnnxImportError(
                        f"graph output {vi.name!r} is declared {want.name}, but rill's import "
                        f"computes {t.dtype.name}"
                    )
            outs.append(t)
        return outs

    def _import_node(self, node: onnx.NodeProto, scope: _Scope) -> None:
        n = OnnxNode(self, node, scope)
        domain = "" if node.domain == "ai.onnx" else node.domain
        rule = get_import_rule(node.op_type, domain)
        if rule is None:
            d = f"{domain}::" if domain else ""
            hint = "run `rill-onnx check` to list every unsupported op of the model"
            if domain == "com.microsoft.nchwc":
                # onnxruntime's blocked layout, written by its "all" optimization level only.
                hint = ("the model was saved by onnxruntime at graph optimization level ALL, "
                        "whose blocked-layout ops fit the saving machine's vector width; save it "
                        "at ORT_ENABLE_EXTENDED (or from the original model) instead")  # fmt: skip
            raise OnnxImportError(
                f"{n.where()}: rill has no import rule for {d}{node.op_type} at opset {n.opset}; "
                + hint
            )
        inputs = []
        for name in node.input:
            inputs.append(scope.get(name) if name else None)
        check_node_inputs(node, inputs, n.opset, n.where())
        attrs = attr_values(node, _attr_value, n.where())
        extra = set(attrs) - rule.attrs
        if extra and not rule.any_attrs:
            raise OnnxImportError(
                f"{n.where()}: rill's import of {node.op_type} does not handle attribute(s) "
                f"{sorted(extra)}"
            )
        g = self.graph
        scope_name = _rill_name(node.name, node.op_type) if node.name else node.op_type
        try:
            with g.name_scope(scope_name):
                folded = _fold(node, inputs, self.opsets)
                if folded is not None:
                    # (None for an output the node leaves unnamed: Unique's counts, say)
                    result = [None if v is None else constant(v, name="folded") for v in folded]
                else:
                    result = rule.fn(n, *inputs, **attrs)
        except OnnxImportError as e:
            if str(e).startswith("node "):
                raise
            raise OnnxImportError(f"{n.where()}: {e}") from e
        except (ValueError, TypeError, NotImplementedError) as e:
            raise OnnxImportError(f"{n.where()}: {e}") from e
        except (AttributeError, IndexError, KeyError, ArithmeticError, RecursionError) as e:
            # An attribute or input the rule did not expect (a malformed model): the node is named.
            raise OnnxImportError(f"{n.where()}: malformed node ({type(e).__name__}: {e})") from e
        results = [result] if isinstance(result, Tensor) else list(result)
        for i, name in enumerate(node.output):
            if not name:
                continue
            t = results[i] if i < len(results) else None
            if t is None:
                raise OnnxImportError(
                    f"{n.where()}: rill's import does not produce output {i} ({name!r})"
                )
            vi = self.value_types.get(name)
            if vi is not None and vi.type.HasField("tensor_type"):
                _merge_shape(t, _shape_of(vi.type))
            if t.dtype is dtypes.variant and self.kind(t) is None:
                if vi is None or not vi.HasField("type"):
                    raise OnnxImportError(
                        f"{n.where()}: the ONNX type of output {name!r} (a sequence or an "
                        "optional) is not known; give the model value_info for it"
                    )
                self.kinds[t] = kind_of_type(vi.type, f"{n.where()}: output {name!r}: ")
            scope.values[name] = t

    def _tensor_type(self, vi: onnx.ValueInfoProto, what: str):
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value") or "no type"
            raise OnnxImportError(
                f"{what} {vi.name!r} has ONNX type {kind}; rill imports tensors only"
            )
        dt = rill_dtype(vi.type.tensor_type.elem_type, f"{what} {vi.name!r}: ")
        return dt, _shape_of(vi.type)


# Ops whose value is not a function of their inputs, which import must never fold.
_NOT_FOLDABLE = frozenset({
    "Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
    "RandomUniformLike", "Constant",
    # Their values are sequences or optionals, never Consts.
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence",
    "SequenceMap", "Optional",
})  # fmt: skip
_FOLD_LIMIT = 4096  # elements; larger constants stay computed at run time
_PASS_THROUGH = frozenset({"Identity", "Enter", "Exit", "Switch", "Merge", "NextIteration"})


def _zip_mapped(vi: onnx.ValueInfoProto, t: Tensor) -> bool:
    """Whether graph output `vi`, declared a sequence of maps, is a tensor (ZipMap's import)."""
    return (vi.type.HasField("sequence_type")
            and vi.type.sequence_type.elem_type.HasField("map_type")
            and t.dtype is not dtypes.variant)  # fmt: skip


def _fold(node: onnx.NodeProto, inputs: list, opsets: dict) -> list[np.ndarray] | None:
    """The node's outputs when every input is a small constant (shape arithmetic, mostly),
    computed with onnx's reference evaluator; None when the node is not foldable."""
    if node.domain not in _DOMAINS or node.op_type in _NOT_FOLDABLE or not inputs:
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for a in node.attribute):  # fmt: skip
        return None
    feeds = {}
    for name, t in zip(node.input, inputs):
        if not name:
            continue
        v = static(t)
        if v is None or v.dtype == object or v.size > _FOLD_LIMIT:
            return None
        feeds[name] = v
    from onnx.reference import ReferenceEvaluator

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in feeds.items()]  # fmt: skip
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    g = helper.make_graph([node], "fold", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opsets.get("", MIN_OPSET))])
    try:
        values = ReferenceEvaluator(m).run(None, feeds)
    except Exception:  # the rule builds it instead; folding is only an optimization
        return None
    values = [np.asarray(v) for v in values]
    if len(values) != len([o for o in node.output if o]):
        return None
    if any(v.size > _FOLD_LIMIT or v.dtype == object for v in values):
        return None
    it = iter(values)
    return [next(it) if o else None for o in node.output]


def _value_infos(gp: onnx.GraphProto):
    for g in all_graphs(gp):
        yield from g.value_info
        yield from g.output


def _initializer_array(t: onnx.TensorProto) -> np.ndarray:
    rill_dtype(t.data_type, f"initializer {t.name!r}: ")
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise OnnxImportError(
            f"initializer {t.name!r} is stored in an external file: import the model by its "
            "path, or pass external_data_dir= (validate_tensors reads permitted external data "
            "before this point)"
        )
    return numpy_helper.to_array(t)


def _merge_shape(t: Tensor, declared: TensorShape) -> None:
    if declared.rank is None:
        return
    try:
        merged = t.shape.merge_with(declared)
    except ValueError:
        return  # the model's value_info disagrees with rill's inference; trust the inference
    if merged != t.shape:
        t.set_shape(merged)


def _topological(gp: onnx.GraphProto, scope: _Scope) -> list[onnx.NodeProto]:
    """The nodes of `gp` in an order where producers come first; refuses undefined inputs."""
    produced = {}
    for i, n in enumerate(gp.node):
        for o in n.output:
            if o:
                produced[o] = i
    known = {vi.name for vi in gp.input} | {t.name for t in gp.initializer}
    waiting: dict[int, set[int]] = {}
    users: dict[int, list[int]] = {}
    for i, n in enumerate(gp.node):
        deps = set()
        for name in [*n.input, *_captured(n)]:
            if not name or name in known:
                continue
            if name in produced:
                if produced[name] != i:
                    deps.add(produced[name])
                continue
            if scope.defines(name):
                continue
            where = f"node {n.name!r} ({n.op_type})" if n.name else f"a {n.op_type} node"
            raise OnnxImportError(
                f"{where} reads {name!r}, which is defined nowhere: not a graph input, an "
                "initializer, or an output of another node (a missing initializer, or a "
                "truncated model)"
            )
        waiting[i] = deps
        for d in deps:
            users.setdefault(d, []).append(i)
    ready = collections.deque(i for i, d in waiting.items() if not d)
    order = []
    while ready:
        i = ready.popleft()
        order.append(gp.node[i])
        for u in users.get(i, ()):
            waiting[u].discard(i)
            if not waiting[u]:
                ready.append(u)
    if len(order) != len(gp.node):
        stuck = [gp.node[i].name or gp.node[i].op_type for i, d in waiting.items() if d]
        raise OnnxImportError(f"the graph has a cycle through nodes {stuck[:5]}")
    return order


def _captured(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names that a node's subgraphs read (so the node runs after their producers)."""
    names = []
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in graphs:
            local = set()
            for sub in all_graphs(g):  # a nested body's own inputs are local to it too
                local.update(vi.name for vi in sub.input)
                local.update(t.name for t in sub.initializer)
                for n in sub.node:
                    local.update(n.output)
            for n in _all_nodes(g):
                names.extend(i for i in n.input if i and i not in local)
    return names


def _infer_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with onnx's shape inference applied, so that subgraph outputs have types and
    intermediate values have shapes; the model as it is when inference fails on it."""
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is best effort: rill infers shapes itself
        return model


def import_onnx(
    model,
    graph: Graph | None = None,
    value_map: dict | None = None,
    external_data_dir: str | os.PathLike | None = None,
):
    """Builds a rill graph from an ONNX model.

    Args:
        model: an onnx.ModelProto, its serialized bytes, or a path to a .onnx file.
        graph: the graph to add to (default: a new Graph).
        value_map: a dict that, when given, receives every value of the model's main graph
            (inputs, initializers, node outputs) by ONNX name → its rill tensor.
        external_data_dir: the directory external tensor data may be read from. Without it, a
            model read from a path reads its external data from the file's directory (as
            onnx.load and onnxruntime do), and a model given as bytes or a ModelProto whose
            tensors name external data is refused (a model from an untrusted source must not
            read the caller's files). Locations outside the directory are refused either way.

    Returns:
        (graph, inputs, outputs): `inputs` maps each ONNX graph input name to its placeholder
        (a PlaceholderWithDefault when an initializer gives it a default), `outputs` each graph
        output name to its tensor (an Identity named after the output).

    Raises:
        OnnxImportError: a truncated or invalid file, an opset the version converter cannot
            upgrade, an op or attribute rill cannot import, a value defined nowhere.
    """
    m = load_model(model, external_data_dir)
    check_names(m)
    validate_tensors(m, external_data_dir)
    m = inline_functions(m)
    m = infer_types_if_valid(_upgrade(m))
    m = fuse_qdq(m)  # uint8 QDQ groups as the QLinear ops onnxruntime runs them as
    g = graph if graph is not None else Graph()
    imp = _Importer(m, g)
    with g.as_default():
        inputs, outputs = imp.import_main()
    if value_map is not None:
        value_map.update(imp.values)
    return g, inputs, outputs
