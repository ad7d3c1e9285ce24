"""`tf.summary` of TensorFlow 1.x (rill.train.summary)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.train.summary import *
