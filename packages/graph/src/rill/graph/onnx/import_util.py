"""Helpers shared by the ONNX import rules: dtype mapping and small graph builders."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from rill.graph import dtypes
from rill.graph.errors import GraphValueError
from rill.graph.graph import Tensor, constant, get_default_graph
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = [
    "OnnxImportError",
    "ONNX_TO_RILL",
    "as_i64",
    "const",
    "i64",
    "op",
    "rill_dtype",
    "scalar",
    "static",
    "with_rank",
]


class OnnxImportError(GraphValueError):
    """An ONNX model that rill cannot import, with what was found and what to do."""


ONNX_TO_RILL = {
    TensorProto.FLOAT: dtypes.float32,
    TensorProto.DOUBLE: dtypes.float64,
    TensorProto.FLOAT16: dtypes.float16,
    TensorProto.BFLOAT16: dtypes.bfloat16,
    TensorProto.INT8: dtypes.int8,
    TensorProto.INT16: dtypes.int16,
    TensorProto.INT32: dtypes.int32,
    TensorProto.INT64: dtypes.int64,
    TensorProto.UINT8: dtypes.uint8,
    TensorProto.UINT16: dtypes.uint16,
    TensorProto.UINT32: dtypes.uint32,
    TensorProto.UINT64: dtypes.uint64,
    TensorProto.BOOL: dtypes.bool_,
    TensorProto.STRING: dtypes.string,
    TensorProto.COMPLEX64: dtypes.complex64,
    TensorProto.COMPLEX128: dtypes.complex128,
    TensorProto.FLOAT8E4M3FN: dtypes.float8_e4m3fn,
    TensorProto.FLOAT8E4M3FNUZ: dtypes.float8_e4m3fnuz,
    TensorProto.FLOAT8E5M2: dtypes.float8_e5m2,
    TensorProto.FLOAT8E5M2FNUZ: dtypes.float8_e5m2fnuz,
    TensorProto.FLOAT8E8M0: dtypes.float8_e8m0fnu,
    TensorProto.FLOAT4E2M1: dtypes.float4_e2m1fn,
    TensorProto.INT4: dtypes.int4,
    TensorProto.UINT4: dtypes.uint4,
    TensorProto.INT2: dtypes.int2,
    TensorProto.UINT2: dtypes.uint2,
}


def rill_dtype(elem_type: int, where: str = "") -> dtypes.DType:
    """The rill dtype of an ONNX TensorProto.DataType; refuses the types rill does not have."""
    dt = ONNX_TO_RILL.get(elem_type)
    if dt is None:
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() \
            else str(elem_type)  # fmt: skip
        raise OnnxImportError(
            f"{where}ONNX type {name} has no rill dtype (rill has "
            f"{', '.join(sorted(d.name for d in ONNX_TO_RILL.values()))})"
        )
    return dt


def op(op_type: str, inputs, attrs: dict | None = None, name: str | None = None):
    """Adds one rill op; returns its only output, or the list of its outputs."""
    o = get_default_graph().create_op(op_type, inputs, attrs or {}, name=name)
    return o.outputs[0] if len(o.outputs) == 1 else list(o.outputs)


def const(value, dtype=None, name: str = "Const") -> Tensor:
    """A Const of `value` (numpy or Python), with `dtype` when given."""
    return constant(np.asarray(value, dtype=dtype.np if dtype is not None else None), name=name)


def i64(v) -> Tensor:
    """An int64 Const of `v`."""
    return const(np.asarray(v, np.int64), dtypes.int64)


def as_i64(t: Tensor) -> Tensor:
    """t as int64 (a Cast where it is another type)."""
    return t if t.dtype == dtypes.int64 else op("Cast", [t], {"DstT": dtypes.int64})


def scalar(t: Tensor) -> Tensor:
    """t as a 0-d tensor (ONNX passes some scalars as one-element vectors)."""
    return t if t.shape.rank == 0 else op("Reshape", [t, const([], dtypes.int32)])


def static(t: Tensor | None) -> np.ndarray | None:
    """The value of `t` when it is known while building the graph, else None."""
    if t is None:
        return None
    v = constant_value(t)
    return None if v is None else np.asarray(v)


def with_rank(t: Tensor, rank: int | None) -> Tensor:
    """t, its static shape narrowed to `rank` dimensions (for ops whose shape function cannot
    see the rank through run-time bounds, like StridedSlice with computed begin/end)."""
    if rank is not None and t.shape.rank is None:
        t.set_shape(TensorShape([None] * rank))
    return t


def all_graphs(graph: onnx.GraphProto):
    """`graph` and every subgraph nested in it (iteratively)."""
    stack = [graph]
    while stack:
        g = stack.pop()
        yield g
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    stack.extend(a.graphs)
