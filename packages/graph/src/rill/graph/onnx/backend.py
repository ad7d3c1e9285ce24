"""An onnx.backend for rill: import the model, then run it in a rill Session.

The module-level `prepare`, `run_model`, `run_node` and `supports_device` are the interface
onnx's backend tests and tools expect; `RillBackend` is the class form. As onnx's runner does,
a sequence is a Python list of arrays and an optional is its value or None, both as inputs and
as outputs (rill runs them as TensorList and Optional variant values); a string output holds str
(rill's string kernels make UTF-8 bytes).

>>> import numpy as np, onnx.helper as oh
>>> g = oh.make_graph([oh.make_node("Add", ["a", "b"], ["c"])], "g",
...                   [oh.make_tensor_value_info(v, 1, [2]) for v in "ab"],
...                   [oh.make_tensor_value_info("c", 1, [2])])
>>> rep = prepare(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]))
>>> rep.run([np.ones(2, np.float32), np.ones(2, np.float32)])
[array([2., 2.], dtype=float32)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from rill.graph import dtypes
from rill.graph.onnx.import_sequence import OptionalOf, SequenceOf, kind_of_type
from rill.graph.onnx.importer import import_onnx, load_model, unsupported_ops

__all__ = ["RillBackend", "RillRep", "prepare", "run_model", "run_node", "supports_device"]


class RillRep(BackendRep):
    """A prepared model: its rill graph and a Session over it."""

    def __init__(self, model: onnx.ModelProto, config=None):
        from rill.exec import Session  # rill-exec runs graphs; rill.graph does not depend on it

        self.graph, self.inputs, self.outputs = import_onnx(model)
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input]
        self.fed_names = [n for n in self.input_names if n not in inits]
        self.output_names = [vi.name for vi in model.graph.output]
        self.input_kinds = {vi.name: kind_of_type(vi.type) for vi in model.graph.input
                            if not vi.type.HasField("tensor_type")}  # fmt: skip
        self.graph.finalize()
        self.session = Session(graph=self.graph, config=config)
        self._fetch = [self.outputs[name] for name in self.output_names]
        self._zip_maps = _zip_map_labels(model)

    def _feeds(self, inputs) -> dict:
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(self.input_names)
            if unknown:
                raise KeyError(f"no graph inputs named {sorted(unknown)}; inputs are "
                               f"{self.input_names}")  # fmt: skip
            return {self.inputs[k]: self._value(k, v) for k, v in inputs.items()}
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            inputs = [inputs]
        names = self.input_names
        if len(inputs) != len(names):
            if len(inputs) != len(self.fed_names):
                raise ValueError(
                    f"the model has {len(names)} inputs ({len(self.fed_names)} without an "
                    f"initializer); {len(inputs)} values were given"
                )
            names = self.fed_names
        return {self.inputs[k]: self._value(k, v) for k, v in zip(names, inputs)}

    def _value(self, name: str, v):
        kind = self.input_kinds.get(name)
        return np.asarray(v) if kind is None else _to_variant(kind, v)

    def run(self, inputs, **kwargs) -> list:
        """The model's outputs, in graph-output order, for `inputs` (a list in graph-input order
        — all inputs, or those without an initializer — a dict by name, or one array).

        A sequence output is a list of arrays; an optional one its value, or None; a ZipMap's
        a list of {label: probability} dicts, one per row."""
        values = self.session.run(self._fetch, self._feeds(inputs))
        out = [_from_value(v) for v in values]
        for i, name in enumerate(self.output_names):
            labels = self._zip_maps.get(name)
            if labels is not None:  # ZipMap's rows as onnxruntime gives them
                out[i] = [dict(zip(labels, map(float, row))) for row in out[i]]
        return out


def _zip_map_labels(model: onnx.ModelProto) -> dict:
    """Graph output name -> the class labels (ints or strs) of the ZipMap that makes it."""
    outputs = {vi.name for vi in model.graph.output}
    found = {}
    for node in model.graph.node:
        if node.op_type == "ZipMap" and node.domain == "ai.onnx.ml" and node.output[0] in outputs:
            attrs = {a.name: a for a in node.attribute}
            if "classlabels_strings" in attrs:
                labels = [v.decode("utf-8") for v in attrs["classlabels_strings"].strings]
            else:
                labels = [int(v) for v in attrs["classlabels_int64s"].ints]
            found[node.output[0]] = labels
    return found


def _to_variant(kind, v):
    """A fed Python value as the variant value for an input of kind `kind`."""
    from rill.exec.variant import OptionalValue, TensorList

    if isinstance(kind, SequenceOf):
        return TensorList.from_arrays(v, kind.elem)
    if isinstance(kind, OptionalOf):
        if v is None:
            return OptionalValue(None)
        inner = kind.elem
        return OptionalValue([_to_variant(inner, v) if isinstance(inner, SequenceOf)
                              else np.asarray(v, inner.np)])  # fmt: skip
    return np.asarray(v)


def _from_value(v):
    """A fetched value as onnx's runner has it: arrays, lists of arrays for sequences, and an
    optional's value or None."""
    from rill.exec.variant import OptionalValue, TensorList

    if isinstance(v, TensorList):
        return [np.asarray(t) for t in v.to_list()]
    if isinstance(v, OptionalValue):
        return _from_value(v.components[0]) if v.has_value else None
    return _as_onnx_strings(np.asarray(v))


def _as_onnx_strings(a: np.ndarray) -> np.ndarray:
    """A string tensor's elements as str, as onnx's numpy helpers hold them: rill's string
    kernels make UTF-8 bytes. An array with any element that is not UTF-8 stays as bytes."""
    if a.dtype.kind == "S":  # a fetched 0-d string comes back as a bytes scalar
        a = a.astype(object)
    if a.dtype != object or not any(isinstance(e, bytes) for e in a.flat):
        return a
    try:
        text = [e.decode("utf-8") if isinstance(e, bytes) else e for e in a.flat]
    except UnicodeDecodeError:
        return a
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = text
    return out


class RillBackend(Backend):
    """onnx.backend.base.Backend implemented by importing into rill and running a Session."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return not unsupported_ops(model)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> RillRep:
        if not cls.supports_device(device):
            raise ValueError(f"rill's ONNX backend runs on CPU, not {device}")
        return RillRep(load_model(model), kwargs.get("config"))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None,
                 **kwargs):  # fmt: skip
        """Runs one node on numpy inputs (positional, in the node's input order); a list input
        is a sequence of arrays."""
        arrays = [v if isinstance(v, list) else np.asarray(v) for v in inputs]
        names = [i for i in node.input if i]
        ins = [_value_info(nm, a) for nm, a in zip(names, arrays)]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        g = helper.make_graph([node], "run_node", ins, outs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(g, opset_imports=[helper.make_opsetid(node.domain, opset)])
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


def _value_info(name: str, v) -> onnx.ValueInfoProto:
    if isinstance(v, list):
        elem = np.asarray(v[0]).dtype if v else np.dtype(dtypes.float32.np)
        return helper.make_tensor_sequence_value_info(
            name, helper.np_dtype_to_tensor_dtype(elem), None
        )
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)


prepare = RillBackend.prepare
run_model = RillBackend.run_model
run_node = RillBackend.run_node
supports_device = RillBackend.supports_device
