"""TensorFlow's `tf.random` namespace over rill.graph's builders (TF2's short names as
aliases of TF1's).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     rg.random.uniform([2]).op.type
'RandomUniform'
"""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.random_ops import (
    categorical,
    get_seed,
    multinomial,
    random_normal,
    random_shuffle,
    random_uniform,
    set_random_seed,
    truncated_normal,
)

uniform = random_uniform
normal = random_normal
shuffle = random_shuffle
set_seed = set_random_seed
