"""Gradient functions for rill.graph.ops.gather_ops (and UnsortedSegmentSum of grad_ops):
gathers, scatters, partitions, stitches and top_k; Where, Unique and OneHot have none.

The gradient of a gather along axis 0 is sparse: an IndexedSlices of the gathered rows' gradients
at the gathered indices, which is never densified here, so an embedding lookup's gradient
reaches the optimizer as a sparse update. Gathers along other axes, and with batch dimensions,
sum their gradients with UnsortedSegmentSum after moving the gathered axis to the front.

Integer bookkeeping (shape pieces, permutations) is done with Python ints where it is known
while building, and with ops on shape tensors where it is not (`Dims`, `vector`).
"""

from __future__ import annotations

import numpy as np

from rill.autodiff.indexed_slices import IndexedSlices
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph import dtypes
from rill.graph.graph import Tensor, constant
from rill.graph.ops import (
    array_ops,
    gather_ops,
    grad_ops,
    logic_ops,
    math_ops,
    reduction_ops,
    reshape_ops,
)
from rill.graph.tensor_util import constant_value

not_differentiable("Where", "Unique", "OneHot")


# -- integer bookkeeping: numpy where known while building, int32 ops where not ---------------


def _int32(v) -> Tensor:
    if isinstance(v, Tensor):
        return math_ops.cast(v, dtypes.int32)
    return constant(np.asarray(v, np.int32))


def _lift(static_fn, graph_fn):
    def fn(*args):
        if any(isinstance(a, Tensor) for a in args):
            return graph_fn(*[_int32(a) for a in args])
        out = np.asarray(static_fn(*args))
        return int(out) if out.ndim == 0 else out

    return fn


_add = _lift(np.add, math_ops.add)
_subtract = _lift(np.subtract, math_ops.subtract)
_multiply = _lift(np.multiply, math_ops.multiply)
_int_range = _lift(np.arange, lambda a, b: math_ops.range(a, b))


def _scalar(v):
    """A one-element piece as an int or a scalar tensor."""
    if isinstance(v, Tensor):
        return array_ops.reshape(v, [])
    return int(np.asarray(v).reshape(-1)[0])


def _product(v):
    if isinstance(v, Tensor):
        return reduction_ops.reduce_prod(v)
    return int(np.prod(v, dtype=np.int64))


def vector(parts) -> Tensor:
    """Joins pieces (ints, arrays of ints, scalar or 1-D int tensors) into one int32 vector; a
    constant when no piece is a tensor."""
    if not any(isinstance(p, Tensor) for p in parts):
        flat = np.concatenate([np.asarray(p, np.int64).reshape(-1) for p in parts])
        return constant(flat.astype(np.int32), name="shape")
    pieces = []
    for p in parts:
        t = _int32(p)
        pieces.append(array_ops.reshape(t, [1]) if t.shape.rank == 0 else t)
    return reshape_ops.concat(pieces, 0)


class Dims:
    """The dimensions of a tensor: `dims[a:b]` is a numpy array where those dimensions are known
    while building, else a slice of one Shape op (bounds may be ints or scalar int tensors).
    `static` overrides the static shape (a variable's, read from its handle)."""

    def __init__(self, t: Tensor, shape_tensor: Tensor | None = None, static=None):
        self.static = t.shape if static is None else static
        self._t = t
        self._tensor = shape_tensor

    @property
    def tensor(self) -> Tensor:
        if self._tensor is None:
            self._tensor = array_ops.shape(self._t)
        return self._tensor

    @property
    def rank(self):
        if self.static.rank is not None:
            return self.static.rank
        return array_ops.size(self.tensor)

    def __getitem__(self, s: slice):
        a, b = 0 if s.start is None else s.start, s.stop
        static = not isinstance(a, Tensor) and not isinstance(b, Tensor)
        if static and self.static.rank is not None:
            dims = self.static.dims[int(a) : None if b is None else int(b)]
            if all(d is not None for d in dims):
                return np.array(dims, np.int64)
        size = -1 if b is None else _subtract(b, a)
        return array_ops.slice(self.tensor, vector([a]), vector([size]))


# -- gathers ------------------------------------------------------------------------------------


def sparse_rows_grad(grad, indices: Tensor, dims: Dims) -> IndexedSlices:
    """The gradient of gathering rows `indices` of a tensor with dimensions `dims`:
    IndexedSlices(g reshaped to [size(indices), dims[1:]…], flat indices, dims)."""
    n = indices.shape.num_elements()
    inner = dims[1:]
    if n is not None:
        size = n
    elif indices.shape.rank == 1 and not isinstance(inner, Tensor) and np.prod(inner) > 0:
        # As many rows as g has: the indices are not read here, so a gradient computed on a
        # worker for a gather run on a parameter server needs nothing back from the server.
        size = -1
    else:
        size = array_ops.size(indices)
    values = array_ops.reshape(grad, vector([size, inner]))
    # Indices that are already a vector are used as they are: when they were sent to the
    # variable's device for the gather, the gradient's indices are that same tensor (no
    # second transfer).
    flat = indices if indices.shape.rank == 1 else array_ops.reshape(indices, vector([size]))
    return IndexedSlices(values, flat, vector([dims[0:]]))


def dense_gather_grad(grad, indices: Tensor, dims: Dims, axis, batch_dims: int) -> Tensor:
    """The dense gradient of gathering `indices` along `axis` (an int or a scalar int tensor)
    of a tensor with dimensions `dims`, after `batch_dims` batch dimensions: move the gathered
    axis next to the batch axes, sum equal indices with UnsortedSegmentSum, move it back."""
    bd = batch_dims
    rank = dims.rank
    after = _add(axis, 1)
    outer, inner = dims[:axis], dims[after:]
    # Every dimension that came from `indices` flattened into one, at `axis`.
    values = array_ops.reshape(grad, vector([outer, -1, inner]))
    perm = vector([_int_range(0, bd), axis, _int_range(bd, axis), _int_range(after, rank)])
    values = array_ops.transpose(values, perm)
    n = _scalar(dims[axis:after])
    middle = dims[bd:axis]
    values = array_ops.reshape(values, vector([-1, middle, inner]))
    if bd:
        batch = _product(dims[:bd])
        # Batch row b gathers from rows b·n … b·n + n − 1 of params with its batch axes folded
        # into the gathered one.
        idx = array_ops.reshape(math_ops.cast(indices, dtypes.int32), vector([batch, -1]))
        offsets = array_ops.reshape(_int32(_multiply(_int_range(0, batch), n)), [-1, 1])
        flat_idx = array_ops.reshape(math_ops.add(idx, offsets), [-1])
        segments = _multiply(batch, n)
    else:
        flat_idx = array_ops.reshape(indices, [-1])
        segments = n
    summed = grad_ops.unsorted_segment_sum(values, flat_idx, _int32(segments))
    summed = array_ops.reshape(summed, vector([dims[:bd], n, middle, inner]))
    inverse = vector(
        [_int_range(0, bd), _add(_int_range(bd, axis), 1), bd, _int_range(after, rank)]
    )
    return array_ops.transpose(summed, inverse)


@register_gradient("GatherV2")
def _gather_v2_grad(op, grad):
    """d params = IndexedSlices(g, indices) for axis 0; otherwise the dense sum of g over equal
    indices (UnsortedSegmentSum along the gathered axis)"""
    params, indices, axis_t = op.inputs
    bd = op.attrs["batch_dims"]
    if bd < 0:
        if indices.shape.rank is None:
            raise NotImplementedError(
                f"the gradient of {op.name} needs the rank of its indices: batch_dims is {bd}"
            )
        bd += indices.shape.rank
    dims = Dims(params)
    axis = constant_value(axis_t)
    if axis is not None:
        axis = int(np.asarray(axis).reshape(-1)[0])
        if axis < 0:
            axis = axis + dims.rank if params.shape.rank is not None else _add(axis, dims.rank)
    else:
        axis = math_ops.floormod(_int32(axis_t), _int32(dims.rank))
    if isinstance(axis, int) and axis == 0:
        return [sparse_rows_grad(grad, indices, dims), None, None]
    dx = dense_gather_grad(grad, indices, dims, axis, bd)
    dx.set_shape(params.shape)
    return [dx, None, None]


@register_gradient("GatherNd")
def _gather_nd_grad(op, grad):
    """d params = ScatterNd(indices, g, shape(params)) (IndexedSlices for [n, 1] indices)"""
    params, indices = op.inputs
    params_shape = array_ops.shape(params, out_type=indices.dtype)
    if indices.shape.rank == 2 and indices.shape.dims[-1] == 1:
        rows = array_ops.squeeze(indices, axis=[-1])
        return [IndexedSlices(grad, rows, params_shape), None]
    return [gather_ops.scatter_nd(indices, grad, params_shape), None]


@register_gradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    """d updates = GatherNd(g, indices)"""
    return [None, gather_ops.gather_nd(grad, op.inputs[0]), None]


@register_gradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    """d data = g[segment_ids], zero where an id is negative (those slices were dropped)"""
    data, ids, _ = op.inputs
    gathered = gather_ops.gather(grad, math_ops.maximum(ids, np.array(0, ids.dtype.np)))
    kept = logic_ops.greater_equal(ids, np.array(0, ids.dtype.np))
    # Broadcast the per-slice condition over each slice's elements.
    extra = _subtract(Dims(data).rank, Dims(ids).rank)
    ones = (
        np.ones(extra, np.int32)
        if isinstance(extra, int)
        else array_ops.fill(array_ops.reshape(extra, [1]), np.int32(1))
    )
    kept = array_ops.reshape(kept, vector([Dims(ids)[0:], ones]))
    zeros = array_ops.zeros_like(gathered)
    return [logic_ops.select_v2(kept, gathered, zeros), None, None]


# -- partitions and stitches --------------------------------------------------------------------


@register_gradient("DynamicPartition")
def _dynamic_partition_grad(op, *grads):
    """d data = the gradients of the partitions stitched back to the positions they came from"""
    data, partitions = op.inputs
    n = partitions.shape.num_elements()
    count = n if n is not None else array_ops.size(partitions)
    positions = array_ops.reshape(math_ops.range(0, _int32(count)), array_ops.shape(partitions))
    parted = gather_ops.dynamic_partition(positions, partitions, op.attrs["num_partitions"])
    stitched = gather_ops.dynamic_stitch(parted, list(grads))
    return [array_ops.reshape(stitched, array_ops.shape(data)), None]


@register_gradient("DynamicStitch")
def _dynamic_stitch_grad(op, grad):
    """d dataᵢ = g[indicesᵢ]. As in TensorFlow, an index that repeats passes the gradient to
    every slice written there, although only the last one reaches the output."""
    n = op.attrs["N"]
    indices = list(op.inputs[:n])
    if isinstance(grad, IndexedSlices):
        rows = _scalar(Dims(op.outputs[0])[0:1])
        grad = grad_ops.unsorted_segment_sum(grad.values, grad.indices, _int32(rows))
    return [None] * n + [gather_ops.gather(grad, idx) for idx in indices]


# -- top_k --------------------------------------------------------------------------------------


@register_gradient("TopKV2")
def _top_k_grad(op, grad, _):
    """d input = g scattered to the positions of the selected entries (zeros elsewhere)"""
    x, chosen = op.inputs[0], op.outputs[1]
    x_dims, chosen_dims = Dims(x), Dims(chosen)
    rank = x_dims.rank
    inner = _subtract(rank, 1)
    last = _scalar(x_dims[inner:rank])
    k = _scalar(chosen_dims[inner:rank])
    rows = _product(chosen_dims[:inner])
    total = _product(x_dims[0:])
    small = isinstance(total, int) and total < 2**31 and chosen.dtype is not dtypes.int64
    idx_type = dtypes.int32 if small else dtypes.int64
    # Row r of the input, flattened to one vector, starts at r · last.
    if isinstance(rows, int) and isinstance(last, int):
        starts = constant((np.arange(rows, dtype=np.int64) * last).astype(idx_type.np))
    else:
        starts = math_ops.multiply(
            math_ops.range(0, _typed(rows, idx_type)), _typed(last, idx_type)
        )
    positions = array_ops.reshape(math_ops.cast(chosen, idx_type), vector([rows, k]))
    flat = math_ops.add(positions, array_ops.reshape(starts, [-1, 1]))
    flat = array_ops.reshape(flat, [-1, 1])
    size = array_ops.reshape(_typed(total, idx_type), [1])
    dx = gather_ops.scatter_nd(flat, array_ops.reshape(grad, [-1]), size)
    return [array_ops.reshape(dx, array_ops.shape(x)), None]


def _typed(v, dtype) -> Tensor:
    if isinstance(v, Tensor):
        return math_ops.cast(v, dtype)
    return constant(np.asarray(v, dtype.np))
