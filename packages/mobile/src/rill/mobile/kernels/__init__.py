"""The interpreter's kernels, one module per operator family; importing this package registers
them all (see base.py for the kernel phases)."""

from rill.mobile.kernels import (
    activations,
    array_ops,
    binary_math,
    compare_ops,
    control,
    conv,
    elementwise,
    fully_connected,
    indexing,
    math_ops,
    normalization,
    pooling,
    quantize,
    reduce,
    sequence,
    shape_ops,
    spatial,
    transpose_conv,
)
from rill.mobile.kernels.base import KERNELS, DynamicShape, Kernel, TensorSpec, lookup, register

__all__ = ["KERNELS", "DynamicShape", "Kernel", "TensorSpec", "lookup", "register"]
