"""`tf.layers` of TensorFlow 1.x (rill.train.layers)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.train.layers import *
