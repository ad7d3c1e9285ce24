"""Math builders composed of other ops (TensorFlow's math_ops Python layer):
reduce_logsumexp, reduce_variance, reduce_std, reduce_euclidean_norm, log_sigmoid.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     round(float(Session().run(reduce_logsumexp(rg.constant([0.0, 0.0])))), 6)
0.693147
"""

from __future__ import annotations

import numpy as np

from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.ops import math_ops
from rill.graph.ops.array_ops import stop_gradient, zeros_like
from rill.graph.ops.logic_ops import less, select_v2
from rill.graph.ops.nn_ops import softplus
from rill.graph.ops.reduction_ops import reduce_max, reduce_mean, reduce_sum
from rill.graph.ops.reshape_ops import squeeze

__all__ = [
    "reduce_logsumexp",
    "reduce_variance",
    "reduce_std",
    "reduce_euclidean_norm",
    "log_sigmoid",
]


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None,
                     reduction_indices=None, keep_dims=None) -> Tensor:  # fmt: skip
    """log(sum(exp(x))) over `axis`, computed stably around the maximum (an all -inf slice
    gives -inf, not NaN)."""
    axis = axis if axis is not None else reduction_indices
    keepdims = bool(keep_dims) if keep_dims is not None else bool(keepdims)
    g = get_default_graph()
    with g.name_scope(name or "ReduceLogSumExp") as scope:
        x = convert_to_tensor(input_tensor, name="input_tensor")
        raw_max = reduce_max(x, axis, keepdims=True)
        finite = less(math_ops.abs(raw_max), constant(np.inf, dtype=x.dtype))
        my_max = stop_gradient(select_v2(finite, raw_max, zeros_like(raw_max)))
        result = math_ops.add(
            math_ops.log(
                reduce_sum(math_ops.exp(math_ops.subtract(x, my_max)), axis, keepdims=True)
            ),  # fmt: skip
            my_max,
        )
        if not keepdims:
            if axis is None:
                return reduce_sum(result, name=scope)  # a scalar of the one value
            axes = [axis] if isinstance(axis, int) else list(axis)
            return squeeze(result, axes, name=scope)
        return math_ops.add(result, constant(0, dtype=x.dtype), name=scope)


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """The (population) variance over `axis`: mean((x - mean(x))²)."""
    g = get_default_graph()
    with g.name_scope(name or "reduce_variance"):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        mean = reduce_mean(x, axis, keepdims=True)
        return reduce_mean(math_ops.square(math_ops.subtract(x, mean)), axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """sqrt(reduce_variance(x))."""
    g = get_default_graph()
    with g.name_scope(name or "reduce_std"):
        return math_ops.sqrt(reduce_variance(input_tensor, axis, keepdims))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """sqrt(sum(x²)) over `axis`."""
    g = get_default_graph()
    with g.name_scope(name or "reduce_euclidean_norm"):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        return math_ops.sqrt(reduce_sum(math_ops.square(x), axis, keepdims=keepdims))


def log_sigmoid(x, name=None) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    g = get_default_graph()
    with g.name_scope(name or "LogSigmoid") as scope:
        x = convert_to_tensor(x, name="x")
        return math_ops.negative(softplus(math_ops.negative(x)), name=scope)
