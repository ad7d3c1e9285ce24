"""`tf.math` of TensorFlow 1.x (rill.graph.math)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.graph.math import *
from rill.graph.math import mod
