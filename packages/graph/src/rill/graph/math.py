"""TensorFlow's `tf.math` namespace over rill.graph's builders (re-exports only).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     rg.math.reduce_sum(rg.constant([1.0, 2.0])).op.type
'Sum'
"""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.gather_ops import top_k
from rill.graph.ops.logic_ops import (
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    not_equal,
)
from rill.graph.ops.math_impl import (
    log_sigmoid,
    reduce_euclidean_norm,
    reduce_logsumexp,
    reduce_std,
    reduce_variance,
)
from rill.graph.ops.math_ops import (
    abs,
    add,
    add_n,
    ceil,
    conj,
    cos,
    divide,
    erf,
    exp,
    floor,
    floordiv,
    floormod,
    log,
    log1p,
    maximum,
    minimum,
    multiply,
    negative,
    pow,
    reciprocal,
    round,
    rsqrt,
    scalar_mul,
    sigmoid,
    sign,
    sqrt,
    square,
    squared_difference,
    subtract,
    tanh,
    truediv,
)
from rill.graph.ops.nn_impl import l2_normalize
from rill.graph.ops.nn_ops import in_top_k, log_softmax, softmax, softplus, softsign
from rill.graph.ops.reduction_ops import (
    argmax,
    argmin,
    count_nonzero,
    cumsum,
    reduce_all,
    reduce_any,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)

mod = floormod  # TensorFlow's tf.math.mod is FloorMod too
