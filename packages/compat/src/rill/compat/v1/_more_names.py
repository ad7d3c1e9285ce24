"""TF1 top-level names over rill's ops: scatters on variables (element, row and N-D), the
TensorScatter max/min, monotonicity checks, histogram bins, lbeta, `string_split` (TF1's
StringSplit, sparse), and the small aliases (`to_bfloat16`, `broadcast_dynamic_shape`,
`parallel_stack`, `tensor_scatter_nd_max`)."""

from __future__ import annotations

import rill.graph as rg
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.ops import segment_ops
from rill.graph.ops.extra_ops import string_split_v1
from rill.graph.ops.ref_variable_ops import scatter_op
from rill.graph.ops.special_math_ops import lgamma

__all__ = [
    "broadcast_dynamic_shape",
    "histogram_fixed_width_bins",
    "is_non_decreasing",
    "is_strictly_increasing",
    "lbeta",
    "parallel_stack",
    "scatter_div",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
    "string_split",
    "tensor_scatter_nd_max",
    "tensor_scatter_nd_min",
    "to_bfloat16",
]


def _is_ref(t: Tensor) -> bool:
    outputs = t.op.op_def.outputs
    return t.value_index < len(outputs) and outputs[t.value_index].is_ref


def _scatter(method: str, ref_op: str, ref, indices, updates, use_locking, name):
    """A scatter on a rill Variable (its resource op, then the value it leaves) or on a TF1
    reference tensor of an imported graph (the Scatter* ref op)."""
    if isinstance(ref, rg.Variable):
        return getattr(ref, method)(indices, updates, name=name)
    if isinstance(ref, Tensor) and _is_ref(ref):
        return scatter_op(ref_op, ref, indices, updates, use_locking=use_locking, name=name)
    raise TypeError(f"{method} needs a variable, got {type(ref).__name__} {ref!r}")


def scatter_nd_update(ref, indices, updates, use_locking=True, name=None):
    """`tf.scatter_nd_update`: ref[indices] = updates, indices' last dimension naming elements
    or slices; returns the variable's new value."""
    return _scatter("scatter_nd_update", "ScatterNdUpdate", ref, indices, updates,
                    use_locking, name)  # fmt: skip


def scatter_nd_add(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_nd_add`: ref[indices] += updates (duplicates add)."""
    return _scatter("scatter_nd_add", "ScatterNdAdd", ref, indices, updates, use_locking, name)


def scatter_nd_sub(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_nd_sub`: ref[indices] -= updates (duplicates subtract)."""
    return _scatter("scatter_nd_sub", "ScatterNdSub", ref, indices, updates, use_locking, name)


def scatter_mul(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_mul`: ref[indices] *= updates (rows of ref; duplicates multiply)."""
    return _scatter("scatter_mul", "ScatterMul", ref, indices, updates, use_locking, name)


def scatter_div(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_div`: ref[indices] /= updates (duplicates divide in turn)."""
    return _scatter("scatter_div", "ScatterDiv", ref, indices, updates, use_locking, name)


def scatter_max(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_max`: ref[indices] = max(ref[indices], updates)."""
    return _scatter("scatter_max", "ScatterMax", ref, indices, updates, use_locking, name)


def scatter_min(ref, indices, updates, use_locking=False, name=None):
    """`tf.scatter_min`: ref[indices] = min(ref[indices], updates)."""
    return _scatter("scatter_min", "ScatterMin", ref, indices, updates, use_locking, name)


def _tensor_scatter(op_type: str, tensor, indices, updates, bad_indices_policy, name):
    tensor = convert_to_tensor(tensor, name="tensor")
    updates = convert_to_tensor(updates, dtype=tensor.dtype, name="updates")
    attrs = {"bad_indices_policy": bad_indices_policy} if bad_indices_policy else None
    return segment_ops._op(op_type, [tensor, indices, updates], attrs, name).outputs[0]


def tensor_scatter_nd_max(tensor, indices, updates, bad_indices_policy="", name=None):
    """`tf.tensor_scatter_nd_max`: a copy of tensor with tensor[indices] = max(., updates)."""
    return _tensor_scatter("TensorScatterMax", tensor, indices, updates, bad_indices_policy, name)


def tensor_scatter_nd_min(tensor, indices, updates, bad_indices_policy="", name=None):
    """`tf.tensor_scatter_nd_min`: a copy of tensor with tensor[indices] = min(., updates)."""
    return _tensor_scatter("TensorScatterMin", tensor, indices, updates, bad_indices_policy, name)


def broadcast_dynamic_shape(shape_x, shape_y) -> Tensor:
    """`tf.broadcast_dynamic_shape`: the broadcast of two shape vectors (BroadcastArgs)."""
    x = convert_to_tensor(shape_x, name="shape_x")
    y = convert_to_tensor(shape_y, dtype=x.dtype, name="shape_y")
    return get_default_graph().create_op("BroadcastArgs", [x, y]).outputs[0]


def parallel_stack(values, name="parallel_stack") -> Tensor:
    """`tf.parallel_stack`: stack along a new first axis; as TensorFlow's ParallelConcat, every
    value must have a fully defined shape.

    Raises:
        ValueError: a value whose shape is not fully defined.
    """
    with get_default_graph().name_scope(name) as scope:
        values = [convert_to_tensor(v) for v in values]
        for v in values:
            if not v.shape.is_fully_defined():
                raise ValueError(f"parallel_stack needs fully defined shapes; {v.name} has "
                                 f"shape {v.shape}")  # fmt: skip
        return rg.stack(values, axis=0, name=scope)


def _monotonic_diff(x, name: str):
    x = convert_to_tensor(x, name="x")
    if not x.dtype.is_numeric:
        raise TypeError(f"Expected x to be numeric, instead found: {x.dtype.name} tensor {x.name}")
    flat = rg.reshape(x, [-1])
    return flat[1:] - flat[:-1], rg.zeros([], x.dtype)


def is_non_decreasing(x, name=None) -> Tensor:
    """`tf.is_non_decreasing`: whether x (flattened) never decreases; true for < 2 elements.

    Raises:
        TypeError: a non-numeric x.
    """
    with get_default_graph().name_scope(name or "is_non_decreasing"):
        diff, zero = _monotonic_diff(x, "is_non_decreasing")
        return rg.reduce_all(rg.less_equal(zero, diff))


def is_strictly_increasing(x, name=None) -> Tensor:
    """`tf.is_strictly_increasing`: whether x (flattened) always increases; true for < 2
    elements.

    Raises:
        TypeError: a non-numeric x.
    """
    with get_default_graph().name_scope(name or "is_strictly_increasing"):
        diff, zero = _monotonic_diff(x, "is_strictly_increasing")
        return rg.reduce_all(rg.less(zero, diff))


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=rg.int32, name=None):
    """`tf.histogram_fixed_width_bins`: the bin of each value among nbins equal bins over
    value_range, values outside going to the first or last bin."""
    with get_default_graph().name_scope(name or "histogram_fixed_width_bins"):
        values = convert_to_tensor(values, name="values")
        shape = rg.shape(values)
        flat = rg.reshape(values, [-1])
        value_range = convert_to_tensor(value_range, dtype=values.dtype, name="value_range")
        nbins_float = rg.cast(nbins, values.dtype)
        scaled = rg.truediv(flat - value_range[0], value_range[1] - value_range[0])
        indices = rg.floor(nbins_float * scaled)
        indices = rg.minimum(rg.maximum(indices, rg.zeros([], values.dtype)), nbins_float - 1)
        return rg.reshape(rg.cast(indices, dtype), shape)


def to_bfloat16(x, name="ToBFloat16") -> Tensor:
    """`tf.to_bfloat16`: cast to bfloat16."""
    return rg.cast(x, rg.bfloat16, name=name)


def lbeta(x, name=None) -> Tensor:
    """`tf.lbeta`: log(|Beta(x)|) over the last dimension, sum(lgamma(x)) - lgamma(sum(x))."""
    with get_default_graph().name_scope(name or "lbeta"):
        x = convert_to_tensor(x, name="x")
        log_prod_gamma_x = rg.reduce_sum(lgamma(x), axis=[-1])
        log_gamma_sum_x = lgamma(rg.reduce_sum(x, axis=[-1]))
        return log_prod_gamma_x - log_gamma_sum_x


def string_split(source, sep=None, skip_empty=True, delimiter=None, result_type="SparseTensor",
                 name=None):  # fmt: skip
    """`tf.string_split` of TF1: a vector of strings split at any character of `sep` (default
    " "; "" splits into characters), as a SparseTensor [len(source), longest].

    Raises:
        ValueError: both sep and delimiter, or result_type other than "SparseTensor" (rill has
            no RaggedTensor).
    """
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'sep' and 'delimiter'")
    if result_type != "SparseTensor":
        raise ValueError(f"result_type must be 'SparseTensor' (rill has no RaggedTensor), got "
                         f"{result_type!r}")  # fmt: skip
    delimiter = sep if sep is not None else delimiter
    with get_default_graph().name_scope(name or "StringSplit"):
        indices, values, shape = string_split_v1(
            source, " " if delimiter is None else delimiter, skip_empty
        )
        return rg.SparseTensor(indices, values, shape)
