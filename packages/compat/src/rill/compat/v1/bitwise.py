"""`tf.bitwise` of TensorFlow 1.x."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.special_math_ops import (
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    invert,
    left_shift,
    right_shift,
)
