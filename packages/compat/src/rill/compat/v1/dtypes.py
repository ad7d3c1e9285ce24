"""`tf.dtypes` of TensorFlow 1.x (rill.graph.dtypes)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool_,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
    variant,
)
from rill.graph.ops.math_ops import cast

bool = bool_  # noqa: A001 - TensorFlow's name
