"""Builds small .tflite models for tests with the `tflite` package's builder functions and
flatbuffers (independent of rill's own converter), and runs them in LiteRT as the peer.

    x = T((1, 4), np.float32)
    model = single_op("RELU", [x], [T((1, 4), np.float32)])
"""

from __future__ import annotations

import dataclasses
import importlib

import flatbuffers
import numpy as np
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions

__all__ = ["T", "Op", "build", "single_op", "litert_run", "rill_run", "quant", "OPTIONS"]

_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2,
          np.dtype(np.uint8): 3, np.dtype(np.int64): 4, np.dtype(np.bool_): 6,
          np.dtype(np.int16): 7, np.dtype(np.int8): 9, np.dtype(np.float64): 10}  # fmt: skip

# Operator → its BuiltinOptions table (None: the operator has no options).
OPTIONS = {
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions",
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "RESHAPE": "ReshapeOptions",
    "SOFTMAX": "SoftmaxOptions", "LEAKY_RELU": "LeakyReluOptions",
    "MAX_POOL_2D": "Pool2DOptions", "AVERAGE_POOL_2D": "Pool2DOptions",
    "CONCATENATION": "ConcatenationOptions", "MEAN": "ReducerOptions", "PAD": "PadOptions",
    "TRANSPOSE": "TransposeOptions", "SQUEEZE": "SqueezeOptions",
    "EXPAND_DIMS": "ExpandDimsOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "GATHER": "GatherOptions", "BATCH_MATMUL": "BatchMatMulOptions",
    "QUANTIZE": "QuantizeOptions", "DEQUANTIZE": "DequantizeOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "LOGISTIC": None, "TANH": None, "RELU": None, "RELU6": None,
}  # fmt: skip


@dataclasses.dataclass
class T:
    """A tensor: shape, dtype, optional constant data and quantization."""

    shape: tuple
    dtype: object = np.float32
    data: np.ndarray | None = None
    scale: object = None  # float or sequence (per channel)
    zero_point: object = None
    quantized_dimension: int = 0
    name: str | None = None
    shape_signature: tuple | None = None
    variable: bool = False  # a state tensor (is_variable), not a model input


def quant(shape, dtype, scale, zero_point=0, data=None, **kw) -> T:
    return T(tuple(shape), dtype, data, scale, zero_point, **kw)


@dataclasses.dataclass
class Op:
    name: str
    inputs: list[int]
    outputs: list[int]
    options: dict | None = None
    version: int = 1


def _camel(field: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in field.split("_"))


def _mod(name: str):
    return importlib.import_module(f"tflite.{name}")


def _options(b: flatbuffers.Builder, cls: str, fields: dict) -> int:
    mod = _mod(cls)
    vectors = {}
    for k, v in fields.items():
        if isinstance(v, (list, tuple)):
            getattr(mod, f"{cls}Start{_camel(k)}Vector")(b, len(v))
            for e in reversed(v):
                b.PrependInt32(int(e))
            vectors[k] = b.EndVector()
    getattr(mod, f"{cls}Start")(b)
    for k, v in fields.items():
        add = getattr(mod, f"{cls}Add{_camel(k)}")
        add(b, vectors.get(k, v))
    return getattr(mod, f"{cls}End")(b)


def _ivec(b: flatbuffers.Builder, values) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), np.int32))


def build(tensors: list[T], ops: list[Op], inputs: list[int], outputs: list[int],
          signature: dict | None = None, version: int = 3) -> bytes:  # fmt: skip
    """A one-subgraph model. signature: {"key": str, "inputs": {name: i}, "outputs": {...}}."""
    m, sg_mod, t_mod, op_mod = _mod("Model"), _mod("SubGraph"), _mod("Tensor"), _mod("Operator")
    q_mod, buf_mod, oc_mod = _mod("QuantizationParameters"), _mod("Buffer"), _mod("OperatorCode")
    b = flatbuffers.Builder(1024)
    # Buffers: 0 is the empty sentinel; each constant gets its own.
    buffer_data = [None]
    tensor_buffer = []
    for t in tensors:
        if t.data is not None:
            tensor_buffer.append(len(buffer_data))
            buffer_data.append(np.ascontiguousarray(np.asarray(t.data, t.dtype)))
        else:
            tensor_buffer.append(0)
    buffers = []
    for data in buffer_data:
        vec = None
        if data is not None:
            raw = np.frombuffer(data.tobytes(), np.uint8)
            b.StartVector(1, raw.size, 16)
            b.head -= raw.size
            b.Bytes[b.head : b.head + raw.size] = raw.tobytes()
            vec = b.EndVector()
        buf_mod.BufferStart(b)
        if vec is not None:
            buf_mod.BufferAddData(b, vec)
        buffers.append(buf_mod.BufferEnd(b))
    tensor_offsets = []
    for i, t in enumerate(tensors):
        name = b.CreateString(t.name or f"t{i}")
        shape = _ivec(b, t.shape)
        sig = _ivec(b, t.shape_signature) if t.shape_signature is not None else None
        q = None
        if t.scale is not None:
            scale = np.atleast_1d(np.asarray(t.scale, np.float32))
            zp = np.atleast_1d(np.asarray(0 if t.zero_point is None else t.zero_point, np.int64))
            if zp.size == 1 and scale.size > 1:
                zp = np.repeat(zp, scale.size)
            sv, zv = b.CreateNumpyVector(scale), b.CreateNumpyVector(zp)
            q_mod.QuantizationParametersStart(b)
            q_mod.QuantizationParametersAddScale(b, sv)
            q_mod.QuantizationParametersAddZeroPoint(b, zv)
            q_mod.QuantizationParametersAddQuantizedDimension(b, t.quantized_dimension)
            q = q_mod.QuantizationParametersEnd(b)
        t_mod.TensorStart(b)
        t_mod.TensorAddShape(b, shape)
        if sig is not None:
            t_mod.TensorAddShapeSignature(b, sig)
        t_mod.TensorAddType(b, _TYPES[np.dtype(t.dtype)])
        t_mod.TensorAddBuffer(b, tensor_buffer[i])
        t_mod.TensorAddName(b, name)
        if t.variable:
            t_mod.TensorAddIsVariable(b, True)
        if q is not None:
            t_mod.TensorAddQuantization(b, q)
        tensor_offsets.append(t_mod.TensorEnd(b))
    codes = []
    op_offsets = []
    for op in ops:
        key = (op.name, op.version)
        if key not in codes:
            codes.append(key)
        ins, outs = _ivec(b, op.inputs), _ivec(b, op.outputs)
        cls = OPTIONS.get(op.name)
        opts = _options(b, cls, op.options or {}) if cls else None
        op_mod.OperatorStart(b)
        op_mod.OperatorAddOpcodeIndex(b, codes.index(key))
        op_mod.OperatorAddInputs(b, ins)
        op_mod.OperatorAddOutputs(b, outs)
        if opts is not None:
            op_mod.OperatorAddBuiltinOptionsType(b, getattr(BuiltinOptions, cls))
            op_mod.OperatorAddBuiltinOptions(b, opts)
        op_offsets.append(op_mod.OperatorEnd(b))

    def table_vector(start, offsets):
        start(b, len(offsets))
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    tv = table_vector(sg_mod.SubGraphStartTensorsVector, tensor_offsets)
    ov = table_vector(sg_mod.SubGraphStartOperatorsVector, op_offsets)
    iv, outv = _ivec(b, inputs), _ivec(b, outputs)
    sg_name = b.CreateString("main")
    sg_mod.SubGraphStart(b)
    sg_mod.SubGraphAddTensors(b, tv)
    sg_mod.SubGraphAddInputs(b, iv)
    sg_mod.SubGraphAddOutputs(b, outv)
    sg_mod.SubGraphAddOperators(b, ov)
    sg_mod.SubGraphAddName(b, sg_name)
    sg = sg_mod.SubGraphEnd(b)
    code_offsets = []
    for name, ver in codes:
        code = getattr(BuiltinOperator, name)
        oc_mod.OperatorCodeStart(b)
        oc_mod.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        oc_mod.OperatorCodeAddBuiltinCode(b, code)
        oc_mod.OperatorCodeAddVersion(b, ver)
        code_offsets.append(oc_mod.OperatorCodeEnd(b))
    sig_offsets = []
    if signature is not None:
        sd, tm = _mod("SignatureDef"), _mod("TensorMap")

        def maps(d):
            offs = []
            for n, idx in d.items():
                s = b.CreateString(n)
                tm.TensorMapStart(b)
                tm.TensorMapAddName(b, s)
                tm.TensorMapAddTensorIndex(b, idx)
                offs.append(tm.TensorMapEnd(b))
            return offs

        mi = table_vector(sd.SignatureDefStartInputsVector, maps(signature["inputs"]))
        mo = table_vector(sd.SignatureDefStartOutputsVector, maps(signature["outputs"]))
        key = b.CreateString(signature["key"])
        sd.SignatureDefStart(b)
        sd.SignatureDefAddInputs(b, mi)
        sd.SignatureDefAddOutputs(b, mo)
        sd.SignatureDefAddSignatureKey(b, key)
        sd.SignatureDefAddSubgraphIndex(b, 0)
        sig_offsets.append(sd.SignatureDefEnd(b))
    cv = table_vector(m.ModelStartOperatorCodesVector, code_offsets)
    sv = table_vector(m.ModelStartSubgraphsVector, [sg])
    bv = table_vector(m.ModelStartBuffersVector, buffers)
    sigv = table_vector(m.ModelStartSignatureDefsVector, sig_offsets) if sig_offsets else None
    desc = b.CreateString("rill test model")
    m.ModelStart(b)
    m.ModelAddVersion(b, version)
    m.ModelAddOperatorCodes(b, cv)
    m.ModelAddSubgraphs(b, sv)
    m.ModelAddDescription(b, desc)
    m.ModelAddBuffers(b, bv)
    if sigv is not None:
        m.ModelAddSignatureDefs(b, sigv)
    b.Finish(m.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def single_op(name: str, inputs: list[T | None], outputs: list[T], options: dict | None = None,
              version: int = 1) -> bytes:  # fmt: skip
    """One operator; non-constant inputs become the model's inputs (None: an omitted optional
    input, written as -1; trailing ones are dropped)."""
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    tensors = [t for t in inputs if t is not None] + list(outputs)
    idx, k = [], 0
    for t in inputs:
        idx.append(-1 if t is None else k)
        k += t is not None
    out_idx = list(range(k, k + len(outputs)))
    model_inputs = [i for i, t in zip(idx, inputs) if t is not None and t.data is None]
    return build(tensors, [Op(name, idx, out_idx, options, version)], model_inputs, out_idx)


def litert_run(model: bytes, feeds: list[np.ndarray], ref: bool = True) -> list[np.ndarray]:
    """Runs the model in LiteRT (reference kernels by default) on `feeds`, in input order."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_REF if ref else OpResolverType.AUTO
    it = Interpreter(model_content=model, experimental_op_resolver_type=kind)
    details = it.get_input_details()
    for d, x in zip(details, feeds):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def rill_run(model: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    from rill.mobile.interpreter import Interpreter

    it = Interpreter(model_content=model)
    for d, x in zip(it.get_input_details(), feeds):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]
