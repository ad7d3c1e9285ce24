"""`tf.metrics` of TensorFlow 1.x (rill.train.metrics)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.train.metrics import *
