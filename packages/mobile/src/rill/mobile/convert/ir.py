"""The converter's model in memory: TFLite tensors and operators before they are serialized.

Conversion lowers a rill graph into a `ModelIR` (float32), quantization rewrites that IR, and
`writer.serialize` turns it into flatbuffer bytes. Tensor indices in the IR are the tensor indices
of the written subgraph, so a runtime's `get_tensor(i)` reads IR tensor `i`.

Every IR tensor may name its `source`: the rill tensor whose value it holds. Calibration fetches
those rill tensors, and the quantization report compares against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# ActivationFunctionType.
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH = 0, 1, 2, 3, 4
# Padding.
PAD_SAME, PAD_VALID = 0, 1

# BuiltinOperator codes (schema version 3) for the operators the converter emits.
OPCODES: dict[str, int] = {
    "ADD": 0,
    "AVERAGE_POOL_2D": 1,
    "CONCATENATION": 2,
    "CONV_2D": 3,
    "DEPTHWISE_CONV_2D": 4,
    "DEQUANTIZE": 6,
    "FULLY_CONNECTED": 9,
    "LOGISTIC": 14,
    "MAX_POOL_2D": 17,
    "MUL": 18,
    "RELU": 19,
    "RELU6": 21,
    "RESHAPE": 22,
    "SOFTMAX": 25,
    "TANH": 28,
    "PAD": 34,
    "GATHER": 36,
    "TRANSPOSE": 39,
    "MEAN": 40,
    "SUB": 41,
    "SQUEEZE": 43,
    "STRIDED_SLICE": 45,
    "EXPAND_DIMS": 70,
    "LEAKY_RELU": 98,
    "QUANTIZE": 114,
    "BATCH_MATMUL": 126,
}

# The BuiltinOptions table each operator carries (None: no options table).
OPTIONS_TABLE: dict[str, str | None] = {
    "ADD": "AddOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "DEQUANTIZE": None,
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "LOGISTIC": None,
    "MAX_POOL_2D": "Pool2DOptions",
    "MUL": "MulOptions",
    "RELU": None,
    "RELU6": None,
    "RESHAPE": "ReshapeOptions",
    "SOFTMAX": "SoftmaxOptions",
    "TANH": None,
    "PAD": "PadOptions",
    "GATHER": "GatherOptions",
    "TRANSPOSE": "TransposeOptions",
    "MEAN": "ReducerOptions",
    "SUB": "SubOptions",
    "SQUEEZE": "SqueezeOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "EXPAND_DIMS": "ExpandDimsOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "QUANTIZE": None,
    "BATCH_MATMUL": "BatchMatMulOptions",
}

# TensorType codes for the numpy dtypes the converter writes.
TENSOR_TYPES: dict[np.dtype, int] = {
    np.dtype(np.float32): 0,
    np.dtype(np.int32): 2,
    np.dtype(np.uint8): 3,
    np.dtype(np.int64): 4,
    np.dtype(np.bool_): 6,
    np.dtype(np.int16): 7,
    np.dtype(np.int8): 9,
}

# Operator versions for int8 kernels, as TensorFlow's converter assigns them; float kernels are
# version 1. A runtime's resolver registers a range of versions per operator, so these only
# need to be ones both LiteRT and rill's interpreter accept.
INT8_VERSIONS: dict[str, int] = {
    "RESHAPE": 1,
    "SQUEEZE": 1,
    "EXPAND_DIMS": 1,
    "CONV_2D": 3,
    "DEPTHWISE_CONV_2D": 3,
    "FULLY_CONNECTED": 4,
    "BATCH_MATMUL": 2,
    "SELECT": 1,
    "SELECT_V2": 1,
    "TILE": 3,
    "REVERSE_V2": 3,
}


# Float kernels whose first version is not 1 (BROADCAST_TO starts at 2).
FLOAT_VERSIONS: dict[str, int] = {"BROADCAST_TO": 2}


@dataclass
class QuantParams:
    """real = scale · (q − zero_point); one entry per slice along `axis` when per-channel."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = 0

    @staticmethod
    def per_tensor(scale: float, zero_point: int) -> QuantParams:
        return QuantParams(
            np.array([scale], dtype=np.float32), np.array([zero_point], dtype=np.int64)
        )

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def same_as(self, other: QuantParams | None) -> bool:
        return (
            other is not None
            and np.array_equal(self.scale, other.scale)
            and np.array_equal(self.zero_point, other.zero_point)
            and self.axis == other.axis
        )


@dataclass
class TensorIR:
    """One tensor of the subgraph: an activation (data None) or a constant."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    signature: tuple[int, ...] | None = None  # shape with -1 for dynamic dims, when any
    data: np.ndarray | None = None
    quant: QuantParams | None = None
    source: str | None = None  # the rill tensor whose value this tensor holds

    @property
    def is_const(self) -> bool:
        return self.data is not None


@dataclass
class OpIR:
    """One operator: a builtin code, tensor indices (-1: optional input left out), options."""

    code: str
    inputs: list[int]
    outputs: list[int]
    options: dict = field(default_factory=dict)
    layer: str = ""  # the rill op this operator implements (its main op)
    fused: tuple[str, ...] = ()  # every rill op folded into it, the main one first
    version: int = 1


@dataclass
class ModelIR:
    """A single-subgraph TFLite model under construction."""

    tensors: list[TensorIR] = field(default_factory=list)
    ops: list[OpIR] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    # Signature names of the inputs and outputs, in the order of `inputs` / `outputs`.
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    description: str = "rill converted."

    def add_tensor(self, tensor: TensorIR) -> int:
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def add_const(self, data: np.ndarray, name: str, quant: QuantParams | None = None) -> int:
        data = np.asarray(data, order="C")  # (ascontiguousarray would make scalars [1])
        return self.add_tensor(
            TensorIR(name, data.dtype, tuple(data.shape), data=data, quant=quant)
        )

    def add_op(self, op: OpIR) -> OpIR:
        self.ops.append(op)
        return op

    def producers(self) -> dict[int, OpIR]:
        return {o: op for op in self.ops for o in op.outputs}

    def consumers(self) -> dict[int, list[OpIR]]:
        out: dict[int, list[OpIR]] = {}
        for op in self.ops:
            for i in op.inputs:
                if i >= 0:
                    out.setdefault(i, []).append(op)
        return out

    def unique_name(self, name: str) -> str:
        taken = {t.name for t in self.tensors}
        if name not in taken:
            return name
        k = 1
        while f"{name}_{k}" in taken:
            k += 1
        return f"{name}_{k}"


def op_version(model: ModelIR, op: OpIR) -> int:
    """The operator version for `op`: 1 for float kernels, TF's numbers for int8 ones."""
    first = next((i for i in op.inputs if i >= 0), None)
    in_type = model.tensors[first].dtype if first is not None else np.dtype(np.float32)
    if op.code == "QUANTIZE":
        return 2 if model.tensors[op.outputs[0]].dtype == np.int8 else 1
    if op.code == "DEQUANTIZE":
        return 2 if in_type == np.int8 else 1
    if in_type != np.int8:
        return FLOAT_VERSIONS.get(op.code, 1)
    return INT8_VERSIONS.get(op.code, 2)
