"""Symbolic reverse-mode differentiation of rill graphs.

>>> import rill.graph as rg
>>> from rill.autodiff import gradients
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [2], name="x")
...     (dx,) = gradients(rg.reduce_sum(x * 3.0), [x])
"""

from rill.autodiff import grads  # noqa: F401 - registers every gradient function
from rill.autodiff.checker import compute_gradient, compute_gradient_error
from rill.autodiff.custom_gradient import custom_gradient
from rill.autodiff.gradients import AggregationMethod, gradients
from rill.autodiff.hessians import hessians
from rill.autodiff.indexed_slices import IndexedSlices, IndexedSlicesValue, convert_to_dense
from rill.autodiff.registry import (
    NO_GRADIENT,
    get_gradient_function,
    gradient_registry,
    not_differentiable,
    register_gradient,
)

__version__ = "0.1.0"
