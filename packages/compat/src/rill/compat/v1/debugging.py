"""`tf.debugging` of TensorFlow 1.x (rill.graph's check ops)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.compat.v1._aliases import Assert
from rill.graph.ops.check_ops import *  # noqa: F403
from rill.graph.ops.logging_ops import check_numerics
