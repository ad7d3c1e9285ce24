"""`tf.image` of TensorFlow 1.x: what rill.graph.image has (no resizing or decoding yet)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.graph.image import *
