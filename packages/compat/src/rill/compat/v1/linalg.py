"""`tf.linalg` of TensorFlow 1.x (rill.graph.linalg, and global_norm from rill.train)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.graph.linalg import *
from rill.graph.linalg import matrix_transpose
from rill.train.clip_ops import global_norm

transpose = matrix_transpose  # tf.linalg.transpose transposes the last two dimensions
