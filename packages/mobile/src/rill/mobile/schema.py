"""Reads a .tflite flatbuffer (schema version 3, file identifier ``TFL3``) into plain Python.

The generated bindings of the `tflite` package (schema.fbs 2.18) do the field reads; fields newer
than that schema (external buffers) are read from the raw flatbuffer table. Everything the
interpreter needs is copied out once into the dataclasses below, so no flatbuffer object survives
loading, and every index in the file is checked here: a truncated or corrupt file fails with a
`ModelFormatError` that says so, never later inside numpy.

>>> import numpy as np
>>> try:
...     load_model(b"\\x00" * 16)
... except ModelFormatError as e:
...     print(str(e).splitlines()[0])
not a TFLite model: the file identifier is b'\\x00\\x00\\x00\\x00', expected b'TFL3'
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
import re
import struct

import flatbuffers
import numpy as np
from tflite.BuiltinOptions import BuiltinOptions
from tflite.Model import Model
from tflite.utils import BUILTIN_OPCODE2NAME

from rill.mobile.errors import ModelFormatError

__all__ = [
    "FILE_IDENTIFIER",
    "SCHEMA_VERSION",
    "TENSOR_TYPES",
    "Quantization",
    "TensorDef",
    "OperatorDef",
    "SubGraphDef",
    "SignatureDefInfo",
    "ModelDef",
    "load_model",
    "op_name",
]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
# Elements any one tensor may hold: a sanity bound that turns a corrupt shape into a clear error
# instead of a MemoryError (2^31 elements is what TFLite's int32 dimensions allow at most).
MAX_ELEMENTS = 2**31 - 1

# TensorType → (name, numpy dtype or None when the interpreter has no numpy equivalent).
TENSOR_TYPES: dict[int, tuple[str, np.dtype | None]] = {
    0: ("FLOAT32", np.dtype(np.float32)),
    1: ("FLOAT16", np.dtype(np.float16)),
    2: ("INT32", np.dtype(np.int32)),
    3: ("UINT8", np.dtype(np.uint8)),
    4: ("INT64", np.dtype(np.int64)),
    5: ("STRING", None),
    6: ("BOOL", np.dtype(np.bool_)),
    7: ("INT16", np.dtype(np.int16)),
    8: ("COMPLEX64", np.dtype(np.complex64)),
    9: ("INT8", np.dtype(np.int8)),
    10: ("FLOAT64", np.dtype(np.float64)),
    11: ("COMPLEX128", np.dtype(np.complex128)),
    12: ("UINT64", np.dtype(np.uint64)),
    13: ("RESOURCE", np.dtype(np.int32)),  # held as an int32 resource id, as in TFLite
    14: ("VARIANT", None),
    15: ("UINT32", np.dtype(np.uint32)),
    16: ("UINT16", np.dtype(np.uint16)),
    17: ("INT4", None),
    18: ("BFLOAT16", None),
    19: ("INT2", None),
    20: ("UINT4", None),
    21: ("FLOAT8_E4M3FN", None),
    22: ("FLOAT8_E5M2", None),
}

_OPTIONS_CLASS = {
    v: k for k, v in vars(BuiltinOptions).items() if not k.startswith("_") and isinstance(v, int)
}
# Raw-table slots of fields newer than the tflite 2.18 bindings (vtable offset = 4 + 2 * slot).
_TENSOR_EXTERNAL_BUFFER_VT = 4 + 2 * 10
_QUANT_DETAILS_NAMES = {0: None, 1: "CustomQuantization", 2: "BlockwiseQuantization",
                        3: "MultiAxisQuantization"}  # fmt: skip


def op_name(code: int, custom_code: str | None = None) -> str:
    """The BuiltinOperator name of an opcode ("CONV_2D"), or the custom op's name."""
    if code == 32 and custom_code:  # CUSTOM
        return f"CUSTOM({custom_code})"
    if code == 209:
        return "STABLEHLO_CASE"  # newer than the tflite 2.18 bindings
    return BUILTIN_OPCODE2NAME.get(code, f"UNKNOWN_OPCODE_{code}")


@dataclasses.dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), one pair per slice along
    `quantized_dimension` when the vectors have more than one element."""

    scale: np.ndarray  # float32
    zero_point: np.ndarray  # int64
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclasses.dataclass
class TensorDef:
    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    type: int  # TensorType
    buffer: int
    quantization: Quantization | None
    is_variable: bool = False
    sparse: bool = False
    has_rank: bool = False
    data: np.ndarray | None = None  # constant contents (read-only view of the model's bytes)

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES.get(self.type, (f"TYPE_{self.type}", None))[0]

    @property
    def dtype(self) -> np.dtype | None:
        return TENSOR_TYPES.get(self.type, ("", None))[1]

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclasses.dataclass
class OperatorDef:
    index: int
    opcode: int  # max(builtin_code, deprecated_builtin_code)
    name: str  # "CONV_2D", or "CUSTOM(name)"
    version: int
    inputs: tuple[int, ...]  # -1 = an omitted optional input
    outputs: tuple[int, ...]
    options: dict
    options_type: str | None  # the BuiltinOptions union member's name, e.g. "Conv2DOptions"
    intermediates: tuple[int, ...] = ()


@dataclasses.dataclass
class SubGraphDef:
    name: str
    tensors: list[TensorDef]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: list[OperatorDef]


@dataclasses.dataclass
class SignatureDefInfo:
    key: str
    subgraph_index: int
    inputs: dict[str, int]  # signature name → tensor index, in file order
    outputs: dict[str, int]


@dataclasses.dataclass
class ModelDef:
    version: int
    description: str
    subgraphs: list[SubGraphDef]
    signature_defs: list[SignatureDefInfo]
    metadata: dict[str, int]  # name → buffer index
    num_buffers: int
    size: int  # bytes of the file


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def _option_fields(cls_name: str):
    """(field name, getter name, is_vector) for every scalar or numeric-vector field of an
    options table, found from the generated class's methods."""
    cls = getattr(importlib.import_module(f"tflite.{cls_name}"), cls_name)
    names = {n for n in vars(cls) if not n.startswith("_")}
    fields = []
    for n in sorted(names):
        if n.startswith("GetRootAs") or n == "Init" or n.endswith("BufferHasIdentifier"):
            continue
        if n.endswith(("AsNumpy", "Length", "IsNone")):
            continue
        params = list(inspect.signature(getattr(cls, n)).parameters)
        if len(params) == 1:
            fields.append((_snake(n), n, False))
        elif f"{n}AsNumpy" in names:
            fields.append((_snake(n), n, True))
    return cls, tuple(fields)


def _read_options(op) -> tuple[str | None, dict]:
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return None, {}
    cls_name = _OPTIONS_CLASS.get(kind)
    if cls_name is None:
        return f"BuiltinOptions#{kind}", {}
    table = op.BuiltinOptions()
    if table is None:
        return cls_name, {}
    cls, fields = _option_fields(cls_name)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out = {}
    for field, getter, is_vector in fields:
        if is_vector:
            v = getattr(obj, f"{getter}AsNumpy")()
            out[field] = tuple(int(x) for x in v) if isinstance(v, np.ndarray) else ()
        else:
            out[field] = getattr(obj, getter)()
    return cls_name, out


def _ints(v) -> tuple[int, ...]:
    return tuple(int(x) for x in v) if isinstance(v, np.ndarray) else ()


def _str(b) -> str:
    return b.decode("utf-8", errors="replace") if b else ""


def _read_quantization(q) -> Quantization | None:
    if q is None:
        return None
    details = q.DetailsType()
    if details not in (0, 1):
        raise ModelFormatError(
            f"{_QUANT_DETAILS_NAMES.get(details, details)} quantization is not supported "
            "(only per-tensor and per-axis affine quantization)"
        )
    scale = q.ScaleAsNumpy()
    zp = q.ZeroPointAsNumpy()
    if not isinstance(scale, np.ndarray) or scale.size == 0:
        return None  # a table with only min/max: not quantized for the interpreter
    scale = np.array(scale, np.float32)
    zp = np.array(zp, np.int64) if isinstance(zp, np.ndarray) else np.zeros(scale.size, np.int64)
    if zp.size != scale.size:
        raise ModelFormatError(f"quantization has {scale.size} scales but {zp.size} zero points")
    mn, mx = q.MinAsNumpy(), q.MaxAsNumpy()
    return Quantization(
        scale=scale,
        zero_point=zp,
        quantized_dimension=int(q.QuantizedDimension()),
        min=np.array(mn, np.float32) if isinstance(mn, np.ndarray) else None,
        max=np.array(mx, np.float32) if isinstance(mx, np.ndarray) else None,
    )


def _raw_scalar(table, vt_offset: int, flags, default):
    """A field the generated bindings do not know, read from the table's vtable."""
    o = table.Offset(vt_offset)
    return table.Get(flags, o + table.Pos) if o else default


def _read_buffers(model, raw: bytes) -> list[memoryview | None]:
    out: list[memoryview | None] = []
    view = memoryview(raw)
    for i in range(model.BuffersLength()):
        b = model.Buffers(i)
        offset, size = int(b.Offset()), int(b.Size())
        if offset > 1:  # data stored after the flatbuffer (models over 2 GB)
            if offset + size > len(raw):
                raise ModelFormatError(
                    f"buffer {i} lies at bytes [{offset}, {offset + size}) beyond the end of "
                    f"the file ({len(raw)} bytes)"
                )
            out.append(view[offset : offset + size])
            continue
        o = b._tab.Offset(4)  # Buffer.data, a [ubyte] vector
        length = b._tab.VectorLen(o) if o else 0
        if not length:
            out.append(None)
            continue
        start = b._tab.Vector(o)
        if start + length > len(raw):
            raise ModelFormatError(f"buffer {i} lies at bytes [{start}, {start + length}) "
                                   f"beyond the end of the file ({len(raw)} bytes)")  # fmt: skip
        out.append(view[start : start + length])
    return out


def _tensor_data(t: TensorDef, buf: memoryview) -> np.ndarray:
    dtype = t.dtype
    if dtype is None:
        raise ModelFormatError(
            f"tensor #{t.index} '{t.name}' holds constant data of type {t.type_name}, "
            "which the interpreter cannot read"
        )
    count = int(np.prod(t.shape, dtype=np.int64))
    if count * dtype.itemsize != len(buf):
        raise ModelFormatError(
            f"tensor #{t.index} '{t.name}': its buffer {t.buffer} holds {len(buf)} bytes but "
            f"shape {list(t.shape)} of {t.type_name} needs {count * dtype.itemsize}"
        )
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(t.shape)


def _check_shape(t_index: int, name: str, shape, what: str) -> None:
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"tensor #{t_index} '{name}' has a negative dimension in its "
                               f"{what} {list(shape)}")  # fmt: skip
    if int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS:
        raise ModelFormatError(f"tensor #{t_index} '{name}' has an implausible {what} "
                               f"{list(shape)} (more than 2^31 elements)")  # fmt: skip


def _read_subgraph(sg, buffers, opcodes) -> SubGraphDef:
    tensors: list[TensorDef] = []
    bad: dict[int, str] = {}  # tensor → what is wrong with its data (reported with its readers)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        name = _str(t.Name())
        shape = _ints(t.ShapeAsNumpy())
        _check_shape(i, name, shape, "shape")
        sig = _ints(t.ShapeSignatureAsNumpy()) if not t.ShapeSignatureIsNone() else None
        if _raw_scalar(t._tab, _TENSOR_EXTERNAL_BUFFER_VT, flatbuffers.number_types.Uint32Flags, 0):
            raise ModelFormatError(f"tensor #{i} '{name}' uses an external buffer, which the "
                                   "interpreter does not support")  # fmt: skip
        td = TensorDef(
            index=i,
            name=name,
            shape=shape,
            shape_signature=sig,
            type=int(t.Type()),
            buffer=int(t.Buffer()),
            quantization=_read_quantization(t.Quantization()),
            is_variable=bool(t.IsVariable()),
            sparse=t.Sparsity() is not None,
            has_rank=bool(t.HasRank()),
        )
        if td.type not in TENSOR_TYPES:
            raise ModelFormatError(f"tensor #{i} '{name}' has unknown type {td.type}")
        if not 0 <= td.buffer < len(buffers):
            raise ModelFormatError(f"tensor #{i} '{name}' refers to buffer {td.buffer}, but the "
                                   f"model has {len(buffers)} buffers")  # fmt: skip
        if buffers[td.buffer] is not None and not td.sparse:
            try:
                td.data = _tensor_data(td, buffers[td.buffer])
            except ModelFormatError as e:
                bad.setdefault(i, str(e))
        tensors.append(td)
    n = len(tensors)

    def check(indices, what, allow_omitted=False):
        for k in indices:
            if not (-1 if allow_omitted else 0) <= k < n:
                raise ModelFormatError(f"{what} refers to tensor {k}, but the subgraph has "
                                       f"{n} tensors")  # fmt: skip
        return indices

    inputs = check(_ints(sg.InputsAsNumpy()), "the subgraph's input list")
    outputs = check(_ints(sg.OutputsAsNumpy()), "the subgraph's output list")
    operators = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        k = int(op.OpcodeIndex())
        if not 0 <= k < len(opcodes):
            raise ModelFormatError(f"operator #{i} refers to operator code {k}, but the model "
                                   f"has {len(opcodes)}")  # fmt: skip
        code, custom, version = opcodes[k]
        opts_type, opts = _read_options(op)
        name = op_name(code, custom)
        operators.append(OperatorDef(
            index=i,
            opcode=code,
            name=name,
            version=version,
            inputs=check(_ints(op.InputsAsNumpy()), f"operator #{i} ({name}) input", True),
            outputs=check(_ints(op.OutputsAsNumpy()), f"operator #{i} ({name}) output"),
            options=opts,
            options_type=opts_type,
            intermediates=_ints(op.IntermediatesAsNumpy()),
        ))  # fmt: skip
    for i, message in bad.items():
        users = [f"operator #{op.index} {op.name}" for op in operators if i in op.inputs]
        where = f"; it is read by {', '.join(users)}" if users else "; no operator reads it"
        raise ModelFormatError(message + where)
    return SubGraphDef(_str(sg.Name()), tensors, inputs, outputs, operators)


def _parse(raw: bytes) -> ModelDef:
    model = Model.GetRootAs(raw, 0)
    version = int(model.Version())
    if version != SCHEMA_VERSION:
        raise ModelFormatError(f"the model has schema version {version}; this interpreter reads "
                               f"version {SCHEMA_VERSION}")  # fmt: skip
    opcodes = []
    for i in range(model.OperatorCodesLength()):
        c = model.OperatorCodes(i)
        code = max(int(c.BuiltinCode()), int(c.DeprecatedBuiltinCode()))
        opcodes.append((code, _str(c.CustomCode()) or None, int(c.Version())))
    buffers = _read_buffers(model, raw)
    if model.SubgraphsLength() == 0:
        raise ModelFormatError("the model has no subgraphs")
    subgraphs = [_read_subgraph(model.Subgraphs(i), buffers, opcodes)
                 for i in range(model.SubgraphsLength())]  # fmt: skip
    sigs = []
    for i in range(model.SignatureDefsLength()):
        s = model.SignatureDefs(i)
        sub = int(s.SubgraphIndex())
        if not 0 <= sub < len(subgraphs):
            raise ModelFormatError(f"signature {i} refers to subgraph {sub}, but the model has "
                                   f"{len(subgraphs)}")  # fmt: skip
        nt = len(subgraphs[sub].tensors)
        maps = []
        for length, get in ((s.InputsLength(), s.Inputs), (s.OutputsLength(), s.Outputs)):
            m = {}
            for j in range(length):
                tm = get(j)
                idx = int(tm.TensorIndex())
                if not 0 <= idx < nt:
                    raise ModelFormatError(f"signature '{_str(s.SignatureKey())}' refers to "
                                           f"tensor {idx}, but its subgraph has {nt}")  # fmt: skip
                m[_str(tm.Name())] = idx
            maps.append(m)
        sigs.append(SignatureDefInfo(_str(s.SignatureKey()), sub, maps[0], maps[1]))
    metadata = {}
    for i in range(model.MetadataLength()):
        md = model.Metadata(i)
        metadata[_str(md.Name())] = int(md.Buffer())
    return ModelDef(
        version=version,
        description=_str(model.Description()),
        subgraphs=subgraphs,
        signature_defs=sigs,
        metadata=metadata,
        num_buffers=len(buffers),
        size=len(raw),
    )


def load_model(source: bytes | bytearray | memoryview | str | os.PathLike) -> ModelDef:
    """Parses a .tflite model from its bytes or a path.

    Raises:
        ModelFormatError: wrong file identifier or schema version, a truncated or corrupt file,
            an index out of range, a constant buffer whose size does not match its tensor.
        OSError: the path cannot be read.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            raw = f.read()
    else:
        raw = bytes(source)
    if len(raw) < 8:
        raise ModelFormatError(f"truncated .tflite: {len(raw)} bytes, too short for a "
                               "flatbuffer header")  # fmt: skip
    if raw[4:8] != FILE_IDENTIFIER:
        raise ModelFormatError(f"not a TFLite model: the file identifier is {raw[4:8]!r}, "
                               f"expected {FILE_IDENTIFIER!r}")  # fmt: skip
    try:
        return _parse(raw)
    except ModelFormatError as e:
        raise ModelFormatError(f"invalid .tflite ({len(raw)} bytes): {e}") from None
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, KeyError,
            AttributeError, MemoryError, RecursionError) as e:  # fmt: skip
        raise ModelFormatError(
            f"truncated/corrupt .tflite ({len(raw)} bytes): {type(e).__name__}: {e}"
        ) from None
