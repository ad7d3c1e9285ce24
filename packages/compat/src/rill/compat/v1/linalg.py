"""`tf.linalg` of TensorFlow 1.x (rill.graph.linalg)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.graph.linalg import *
from rill.graph.linalg import matrix_transpose

transpose = matrix_transpose  # tf.linalg.transpose transposes the last two dimensions
from rill.train.clip_ops import global_norm
