"""A numpy-only interpreter for .tflite models with the API of LiteRT's `Interpreter`.

Code written against `tf.lite.Interpreter` or `ai_edge_litert.interpreter.Interpreter` ports by
changing the import::

    from rill.mobile.interpreter import Interpreter

    interp = Interpreter(model_path="model.tflite")
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    y = interp.get_tensor(interp.get_output_details()[0]["index"])

Lifetimes: construction loads and checks the model and lists every unsupported operator;
`allocate_tensors` prepares every kernel (shapes, checks, multipliers), plans the arena and binds
the kernels to their views; `invoke` runs the bound kernels in order. Intermediate tensors share
arena memory once dead, as in TFLite; `experimental_preserve_all_tensors=True` gives each its own
bytes so that every one stays readable after `invoke` (by index or `get_tensor_by_name`); without
it, reading a tensor whose bytes were reused raises a ValueError that says so.
"""

from __future__ import annotations

import enum
import os

import numpy as np

from rill.mobile import kernels as _kernels  # noqa: F401  (registers every kernel)
from rill.mobile.errors import UnsupportedOperatorError
from rill.mobile.kernels.base import KERNELS, lookup
from rill.mobile.schema import ModelDef, TensorDef, load_model
from rill.mobile.subgraph import Subgraph as _Subgraph
from rill.mobile.threads import blas_limit, invoke_threads
from rill.mobile.validate import check_structure

__all__ = ["Interpreter", "OpResolverType", "SignatureRunner", "find_unsupported"]


class OpResolverType(enum.Enum):
    """Accepted for compatibility with LiteRT; every value runs rill's kernels."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


def find_unsupported(model: ModelDef) -> list[tuple[str, int, list[int]]]:
    """Every (op name, version, [operator indices]) of the model that has no kernel here."""
    found: dict[tuple[str, int], list[int]] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            if lookup(op) is None:
                found.setdefault((op.name, op.version), []).append(op.index)
    return [(name, version, idx) for (name, version), idx in sorted(found.items())]


def supported_operators() -> list[str]:
    return [f"{name} (v1-{cls.max_version})" for name, cls in sorted(KERNELS.items())]


def _details(t: TensorDef, shape) -> dict:
    q = t.quantization
    if q is None:
        quant, params = (0.0, 0), {"scales": np.zeros(0, np.float32),
                                   "zero_points": np.zeros(0, np.int32),
                                   "quantized_dimension": 0}  # fmt: skip
    else:
        quant = (float(q.scale[0]), int(q.zero_point[0])) if not q.per_channel else (0.0, 0)
        params = {"scales": q.scale.astype(np.float32), "zero_points": q.zero_point.astype(np.int32),
                  "quantized_dimension": int(q.quantized_dimension)}  # fmt: skip
    sig = t.shape_signature if t.shape_signature is not None else t.shape
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape if shape is not None else t.shape, np.int32),
        "shape_signature": np.array(sig, np.int32),
        "dtype": t.dtype.type if t.dtype is not None else None,
        "quantization": quant,
        "quantization_parameters": params,
        "sparsity_parameters": {},
    }


class Interpreter:
    """Runs a .tflite model with numpy kernels; the API of LiteRT's Interpreter.

    Args:
        model_path: path of a .tflite file.
        model_content: the model's bytes (instead of model_path).
        experimental_delegates: must be empty (there are no delegates).
        num_threads: the most threads an invoke may use, as in LiteRT (None or -1: LiteRT's
            default, one thread; 0 means 1). The products run on numpy's BLAS with its thread
            count bounded to this during invoke, and lower where it would not pay: one thread
            for a model whose largest product is small, and no more than the cores idle now
            (rill.mobile.threads). Results are the same for every value.
        experimental_op_resolver_type: accepted for compatibility; every resolver runs the
            same kernels.
        experimental_preserve_all_tensors: keep every intermediate tensor readable after invoke
            (each gets its own arena bytes).

    Raises:
        ModelFormatError: the bytes are not a valid .tflite model of schema version 3.
        UnsupportedOperatorError: the model uses operators without a kernel here (all listed).

    >>> import pathlib
    >>> path = pathlib.Path(__file__).parents[5] / "tests/fixtures/tflite/cnn_float.tflite"
    >>> interp = Interpreter(model_path=str(path))
    >>> interp.allocate_tensors()
    >>> x = np.zeros((1, 28, 28, 1), np.float32)
    >>> interp.set_tensor(interp.get_input_details()[0]["index"], x)
    >>> interp.invoke()
    >>> interp.get_tensor(interp.get_output_details()[0]["index"]).shape
    (1, 10)
    """

    def __init__(self, model_path: str | os.PathLike | None = None,
                 model_content: bytes | None = None, experimental_delegates=None,
                 num_threads: int | None = None, experimental_op_resolver_type=None,
                 experimental_preserve_all_tensors: bool = False, **_compat):  # fmt: skip
        if (model_path is None) == (model_content is None):
            raise ValueError("give exactly one of model_path and model_content")
        if experimental_delegates:
            raise ValueError("delegates are not supported by rill's interpreter")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < -1):
            raise ValueError(f"num_threads must be an int >= -1, got {num_threads!r}")
        self._model = load_model(model_path if model_path is not None else model_content)
        check_structure(self._model)
        unsupported = find_unsupported(self._model)
        if unsupported:
            raise UnsupportedOperatorError(unsupported, supported_operators())
        self._preserve = bool(experimental_preserve_all_tensors)
        self._num_threads = num_threads
        self._subgraphs: dict[int, _Subgraph] = {}
        # Resource variables (VAR_HANDLE): (container, shared name) → id, and id → value.
        self.resource_ids: dict[tuple[str, str], int] = {}
        self.resources: dict[int, np.ndarray] = {}
        self.called_once: set[int] = set()  # CALL_ONCE init subgraphs already run
        self.cancelled = False  # set by cancel(), read by WHILE once per iteration
        self._main = self._subgraph(0)

    def _subgraph(self, index: int) -> _Subgraph:
        if index not in self._subgraphs:
            if not 0 <= index < len(self._model.subgraphs):
                raise ValueError(f"subgraph {index} does not exist (the model has "
                                 f"{len(self._model.subgraphs)})")  # fmt: skip
            self._subgraphs[index] = self.new_subgraph(index)
        return self._subgraphs[index]

    def new_subgraph(self, index: int) -> _Subgraph:
        """A fresh execution state of subgraph `index` (control-flow kernels own theirs)."""
        return _Subgraph(self._model.subgraphs[index], self._preserve, self, index)

    # -- allocation and running ------------------------------------------------------------------

    def allocate_tensors(self) -> None:
        """Prepares every operator for the current input shapes and plans the arena."""
        try:
            for sg in list(self._subgraphs.values()):
                sg.allocate()
        finally:
            self.cancelled = False

    def invoke(self) -> None:
        """Runs the main subgraph on the tensors set with set_tensor."""
        sg = self._main
        prog = sg.program
        if prog is not None and sg.allocated:  # one compiled call: no BLAS, nothing to cancel
            prog.run(prog.prog, prog.m)  # Subgraph.invoke's work, without its two calls
            sg.invoked = True
            self.cancelled = False
            return
        self._require_allocated(sg)
        try:
            with self.blas_limit(self._main):
                self._main.invoke()
        finally:
            self.cancelled = False

    def blas_limit(self, sg: _Subgraph) -> blas_limit:
        """The BLAS thread bound of one invoke of `sg` (a with-block)."""
        work = sg.gemm_work if len(self._model.subgraphs) == 1 else None
        return blas_limit(invoke_threads(self._num_threads, work))

    @property
    def num_threads(self) -> int | None:
        """The num_threads the interpreter was made with (None: LiteRT's default)."""
        return self._num_threads

    def cancel(self) -> None:
        """Stops the invoke (or allocate_tensors) in progress, from another thread: a WHILE loop
        raises InvokeError at its next iteration, so a model whose loop never ends can be
        stopped (LiteRT's C++ Interpreter::Cancel; its Python API has none). The request ends
        with that call; made while none runs, it stops the next one's first loop."""
        self.cancelled = True

    @staticmethod
    def _require_allocated(sg: _Subgraph) -> None:
        if not sg.allocated:
            raise RuntimeError("allocate_tensors() must be called first (and again after "
                               "resize_tensor_input)")  # fmt: skip

    def resize_tensor_input(self, input_index: int, tensor_size, strict: bool = False) -> None:
        """Changes the shape of an input tensor; allocate_tensors() must follow.

        With strict=True only the dimensions that are unknown in the model's shape signature
        (-1) may change.
        """
        self._resize(self._main, input_index, tensor_size, strict)

    @staticmethod
    def _resize(sg: _Subgraph, index: int, size, strict: bool) -> None:
        index = int(index)
        if index not in sg.input_shapes:
            raise ValueError(f"tensor {index} is not an input of the subgraph; inputs are "
                             f"{list(sg.sg.inputs)}")  # fmt: skip
        shape = tuple(int(d) for d in np.asarray(size).reshape(-1))
        if any(d < 0 for d in shape):
            raise ValueError(f"cannot resize input {index} to {list(shape)}: dimensions must "
                             "be >= 0")  # fmt: skip
        t = sg.tensors[index]
        if strict:
            sig = t.shape_signature if t.shape_signature is not None else t.shape
            ok = len(sig) == len(shape) and all(s == -1 or s == d for s, d in zip(sig, shape))
            if not ok:
                raise ValueError(f"cannot resize input {index} '{t.name}' to {list(shape)} with "
                                 f"strict=True: its shape signature is {list(sig)} (only -1 "
                                 "dimensions may change)")  # fmt: skip
        if sg.input_shapes[index] != shape:
            sg.input_shapes[index] = shape
            sg.allocated = False

    # -- tensors ----------------------------------------------------------------------------------

    def _tensor_def(self, sg: _Subgraph, index: int) -> TensorDef:
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(sg.tensors):
            raise ValueError(f"tensor index {index!r} is out of range (the subgraph has "
                             f"{len(sg.tensors)} tensors)")  # fmt: skip
        return sg.tensors[int(index)]

    def _shape_of(self, sg: _Subgraph, i: int):
        if i in sg.input_shapes:
            return sg.input_shapes[i]
        return sg.shapes[i] if sg.shapes[i] is not None else sg.tensors[i].shape

    def get_input_details(self) -> list[dict]:
        sg = self._main
        return [_details(sg.tensors[i], self._shape_of(sg, i)) for i in sg.sg.inputs]

    def get_output_details(self) -> list[dict]:
        sg = self._main
        return [_details(sg.tensors[i], self._shape_of(sg, i)) for i in sg.sg.outputs]

    def get_tensor_details(self) -> list[dict]:
        sg = self._main
        return [_details(t, self._shape_of(sg, t.index)) for t in sg.tensors]

    def set_tensor(self, tensor_index: int, value) -> None:
        """Copies `value` into a tensor (an input); its dtype and shape must match exactly."""
        self._set(self._main, tensor_index, value)

    def _set(self, sg: _Subgraph, index: int, value) -> None:
        t = self._tensor_def(sg, index)
        self._require_allocated(sg)
        if t.is_constant or int(index) in sg.folded:
            raise ValueError(f"cannot set tensor {index} '{t.name}': it is a constant of the model"
                             " (or computed from constants once, in allocate_tensors)")  # fmt: skip
        value = np.asarray(value)
        if value.dtype != t.dtype:
            got = value.dtype.name.upper()
            raise ValueError(f"Cannot set tensor: Got value of type {got} but expected type "
                             f"{t.type_name} for input {index}, name: {t.name}")  # fmt: skip
        dst = sg.arrays[index]
        if dst is None:
            raise ValueError(f"tensor {index} '{t.name}' is not used by any operator")
        if value.ndim != dst.ndim:
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but "
                             f"expected {dst.ndim} for input {index} ('{t.name}', shape "
                             f"{list(dst.shape)}); resize_tensor_input changes the shape")  # fmt: skip
        for d, (a, b) in enumerate(zip(value.shape, dst.shape)):
            if a != b:
                raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {a} but expected "
                                 f"{b} for dimension {d} of input {index} ('{t.name}', shape "
                                 f"{list(dst.shape)}); resize_tensor_input changes the "
                                 "shape")  # fmt: skip
        np.copyto(dst, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value."""
        return self._get(self._subgraph(subgraph_index), tensor_index).copy()

    def _get(self, sg: _Subgraph, index: int) -> np.ndarray:
        t = self._tensor_def(sg, index)
        if t.is_constant:
            return t.data
        self._require_allocated(sg)
        if int(index) in sg.folded:
            return sg.folded[int(index)]
        arr = sg.arrays[int(index)]
        if arr is None:
            raise ValueError(f"tensor {index} '{t.name}' holds no data (no operator uses it)")
        if sg.invoked and int(index) in sg.clobbered:
            raise ValueError(f"tensor {index} '{t.name}' is an intermediate whose arena bytes "
                             "were reused after its last use; create the Interpreter with "
                             "experimental_preserve_all_tensors=True to read every "
                             "intermediate tensor after invoke")  # fmt: skip
        return arr

    def get_tensor_by_name(self, name: str, subgraph_index: int = 0) -> np.ndarray:
        """A copy of the tensor called `name` (the first one, if several share it)."""
        sg = self._subgraph(subgraph_index)
        for t in sg.tensors:
            if t.name == name:
                return self._get(sg, t.index).copy()
        raise KeyError(f"no tensor named {name!r}")

    def tensor(self, tensor_index: int):
        """A function returning a numpy view of the tensor's current bytes (no copy); as in
        LiteRT, the view is only valid until the next allocate_tensors."""
        sg = self._main
        self._tensor_def(sg, tensor_index)

        def view() -> np.ndarray:
            return self._get(sg, tensor_index)

        return view

    # -- signatures -------------------------------------------------------------------------------

    def get_signature_list(self) -> dict:
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                for s in self._model.signature_defs}  # fmt: skip

    def get_signature_runner(self, signature_key: str | None = None) -> SignatureRunner:
        sigs = self._model.signature_defs
        if signature_key is None:
            if len(sigs) > 1:
                raise ValueError("the model has several signatures "
                                 f"{[s.key for s in sigs]}; name one")  # fmt: skip
            if not sigs:  # no SignatureDef: the main subgraph, tensors named by their names
                sg = self._model.subgraphs[0]
                return SignatureRunner(self, None, 0, {sg.tensors[i].name: i for i in sg.inputs},
                                       {sg.tensors[i].name: i for i in sg.outputs})  # fmt: skip
            sig = sigs[0]
        else:
            matches = [s for s in sigs if s.key == signature_key]
            if not matches:
                raise ValueError(f"no signature {signature_key!r}; the model has "
                                 f"{[s.key for s in sigs]}")  # fmt: skip
            sig = matches[0]
        return SignatureRunner(self, sig.key, sig.subgraph_index, sig.inputs, sig.outputs)

    # -- introspection (rill extensions) ----------------------------------------------------------

    @property
    def model(self) -> ModelDef:
        return self._model

    @property
    def arena_size(self) -> int:
        """Bytes of the main subgraph's arena (after allocate_tensors)."""
        self._require_allocated(self._main)
        return self._main.plan.arena_size

    def memory_plan(self) -> dict:
        """The main subgraph's plan: arena size, the sum of its buffers' sizes (what a plan
        without reuse would take), kernel-owned persistent bytes, and each buffer's placement."""
        sg = self._main
        self._require_allocated(sg)
        rows = []
        for b in sg.buffers:
            kind, *rest = b.key
            name = (
                sg.tensors[rest[0]].name if kind == "t" else f"scratch {rest[1]} of op #{rest[0]}"
            )
            rows.append({"key": b.key, "name": name, "offset": sg.plan.offsets[b.key],
                         "size": b.size, "first": b.first, "last": b.last})  # fmt: skip
        return {"arena_size": sg.plan.arena_size, "requested": sg.plan.requested,
                "persistent": sg.persistent_bytes, "buffers": rows}  # fmt: skip

    def get_ops_details(self) -> list[dict]:
        return [{"index": op.index, "op_name": op.name, "version": op.version,
                 "inputs": np.array(op.inputs, np.int32), "outputs": np.array(op.outputs, np.int32),
                 "options": dict(op.options)}
                for op in self._model.subgraphs[0].operators]  # fmt: skip


class SignatureRunner:
    """Runs one SignatureDef: `runner(x=...)` returns {output name: array}. Inputs whose shape
    differs from the current one resize the subgraph (and re-allocate) first, as LiteRT does."""

    def __init__(self, interpreter: Interpreter, key: str | None, subgraph_index: int,
                 inputs: dict[str, int], outputs: dict[str, int]):  # fmt: skip
        self._interp = interpreter
        self._key = key
        self._sg = interpreter._subgraph(subgraph_index)
        self._inputs = dict(inputs)
        self._outputs = dict(outputs)

    def get_input_details(self) -> dict[str, dict]:
        sg = self._sg
        return {n: _details(sg.tensors[i], self._interp._shape_of(sg, i))
                for n, i in self._inputs.items()}  # fmt: skip

    def get_output_details(self) -> dict[str, dict]:
        sg = self._sg
        return {n: _details(sg.tensors[i], self._interp._shape_of(sg, i))
                for n, i in self._outputs.items()}  # fmt: skip

    def allocate_tensors(self) -> None:
        self._sg.allocate()

    def resize_input(self, input_name: str, new_shape) -> None:
        if input_name not in self._inputs:
            raise ValueError(f"no input {input_name!r}; inputs are {list(self._inputs)}")
        Interpreter._resize(self._sg, self._inputs[input_name], new_shape, strict=False)

    def __call__(self, **kwargs) -> dict[str, np.ndarray]:
        missing = [n for n in self._inputs if n not in kwargs]
        unknown = [n for n in kwargs if n not in self._inputs]
        if missing or unknown:
            raise ValueError(f"signature {self._key!r} takes inputs {list(self._inputs)}; "
                             f"missing {missing}, unknown {unknown}")  # fmt: skip
        sg = self._sg
        values = {}
        for name, value in kwargs.items():
            value = np.asarray(value)
            idx = self._inputs[name]
            values[idx] = value
            Interpreter._resize(sg, idx, value.shape, strict=False)
        if not sg.allocated:
            sg.allocate()
        for idx, value in values.items():
            self._interp._set(sg, idx, value)
        with self._interp.blas_limit(sg):
            sg.invoke()
        return {n: self._interp._get(sg, i).copy() for n, i in self._outputs.items()}
