"""`tf.random` of TensorFlow 1.x (rill.graph.random)."""

# ruff: noqa: F401, F403 - a namespace of re-exports

from rill.graph.random import *
from rill.graph.random import categorical, get_seed, multinomial, set_random_seed
