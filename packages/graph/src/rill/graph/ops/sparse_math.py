"""Sparse arithmetic of TensorFlow 1 (`tf.sparse_*` / `tf.sparse.*`), as compositions of dense ops.

Every function here builds Gather/GatherNd, UnsortedSegment*, ScatterNd, Where, TopK, Reshape and
ConcatV2 ops on a SparseTensor's three parts; no new op types, so gradients (wrt the dense inputs
and the sparse values) come from those ops' gradients. Coordinates are handled as row-major linear
int64 indices into the dense shape (`_linear` / `_unravel`); sorting them gives TensorFlow's
canonical order.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> from rill.graph.sparse_tensor import SparseTensor
>>> with rg.Graph().as_default():
...     sp = SparseTensor([[0, 1], [2, 0]], [2.0, 3.0], [3, 2])
...     Session().run(sparse_tensor_dense_matmul(sp, [[1.0], [10.0]]))
array([[20.],
       [ 0.],
       [ 3.]], dtype=float32)
"""

from __future__ import annotations

import numpy as np

import rill.graph as rg
from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.ops.grad_ops import unsorted_segment_sum
from rill.graph.ops.manip_ops import cumprod
from rill.graph.ops.segment_ops import unsorted_segment_max
from rill.graph.sparse_tensor import SparseTensor, SparseTensorValue
from rill.graph.tensor_util import constant_value

__all__ = [
    "sparse_add",
    "sparse_concat",
    "sparse_fill_empty_rows",
    "sparse_maximum",
    "sparse_merge",
    "sparse_minimum",
    "sparse_reduce_max",
    "sparse_reduce_max_sparse",
    "sparse_reduce_sum",
    "sparse_reduce_sum_sparse",
    "sparse_reorder",
    "sparse_reshape",
    "sparse_retain",
    "sparse_segment_mean",
    "sparse_segment_sqrt_n",
    "sparse_segment_sum",
    "sparse_slice",
    "sparse_softmax",
    "sparse_split",
    "sparse_tensor_dense_matmul",
    "sparse_to_indicator",
    "sparse_transpose",
]

_I64 = dtypes.int64


# -- helpers -----------------------------------------------------------------------------------


def _sparse(x, what: str = "sp_input") -> SparseTensor:
    if isinstance(x, SparseTensor):
        return x
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    raise TypeError(f"{what} must be a SparseTensor or SparseTensorValue, got {type(x).__name__}")


def _static_shape(sp: SparseTensor) -> list[int] | None:
    value = constant_value(sp.dense_shape)
    return None if value is None else [int(d) for d in np.asarray(value).reshape(-1)]


def _rank(sp: SparseTensor) -> int | None:
    """The static rank, from dense_shape's length or indices' second dimension."""
    if sp.dense_shape.shape.rank == 1 and sp.dense_shape.shape.dims[0] is not None:
        return sp.dense_shape.shape.dims[0]
    if sp.indices.shape.rank == 2:
        return sp.indices.shape.dims[1]
    return None


def _strides(shape: Tensor) -> Tensor:
    """Row-major strides of an int64 shape vector: the exclusive reversed running product."""
    return cumprod(shape, exclusive=True, reverse=True)


def _linear(indices: Tensor, shape: Tensor) -> Tensor:
    """[N] int64 row-major positions of [N, rank] coordinates into `shape`."""
    return rg.reduce_sum(indices * _strides(shape), axis=1)


def _unravel(linear: Tensor, shape: Tensor) -> Tensor:
    """[N, rank] coordinates of [N] row-major positions into `shape` (inverse of _linear)."""
    strides = _strides(shape)
    col = rg.expand_dims(linear, 1)
    return rg.floormod(rg.floordiv(col, strides), shape)


def _take_rows(sp: SparseTensor, order: Tensor, shape=None) -> SparseTensor:
    shape = sp.dense_shape if shape is None else shape
    return SparseTensor(rg.gather(sp.indices, order), rg.gather(sp.values, order), shape)


def _sort_order(linear: Tensor) -> Tensor:
    """The (stable) permutation that sorts int64 `linear` ascending."""
    return rg.argsort(linear)


def _coalesce(indices: Tensor, values: Tensor, shape: Tensor, combine=unsorted_segment_sum):
    """Sorted unique coordinates, the `combine`d values of each, and how many entries each
    combines: (indices, values, counts)."""
    linear = _linear(indices, shape)
    uniq, idx = rg.unique(linear, out_idx=dtypes.int32)
    n = rg.size(uniq, out_type=dtypes.int32)
    combined = combine(values, idx, n)
    counts = unsorted_segment_sum(rg.ones_like(idx), idx, n)
    order = _sort_order(uniq)
    uniq = rg.gather(uniq, order)
    return _unravel(uniq, shape), rg.gather(combined, order), rg.gather(counts, order)


def _axes(axis, rank: int | None, what: str) -> list[int] | None:
    """Python-int reduction axes, made non-negative; None for all axes."""
    if axis is None:
        return None
    value = constant_value(convert_to_tensor(axis))
    if value is None:
        raise ValueError(f"{what}: axis must be known when the graph is built, got {axis!r}")
    axes = [int(a) for a in np.asarray(value).reshape(-1)]
    if any(a < 0 for a in axes):
        if rank is None:
            raise ValueError(f"{what}: negative axis {axes} needs a sparse input of known rank")
        axes = [a + rank if a < 0 else a for a in axes]
    if rank is not None and any(not 0 <= a < rank for a in axes):
        raise ValueError(f"{what}: axis {axis!r} out of range for a rank-{rank} SparseTensor")
    return sorted(set(axes))


def _keepdims(keepdims, keep_dims) -> bool:
    if keepdims is not None and keep_dims is not None:
        raise ValueError("pass keepdims or its deprecated spelling keep_dims, not both")
    return bool(keepdims if keepdims is not None else keep_dims)


def _reduction_axes(axis, reduction_axes):
    if axis is not None and reduction_axes is not None:
        raise ValueError("pass axis or its deprecated spelling reduction_axes, not both")
    return axis if axis is not None else reduction_axes


# -- matmul ------------------------------------------------------------------------------------


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a: bool = False, adjoint_b: bool = False,
                               name=None) -> Tensor:  # fmt: skip
    """The dense product of rank-2 SparseTensor `sp_a` (adjoint if adjoint_a) and dense matrix `b`
    (adjoint if adjoint_b); duplicate indices in sp_a add up, order does not matter.

    Raises:
        ValueError: sp_a or b is not a matrix, or their inner dimensions differ.
    """
    sp_a = _sparse(sp_a, "sp_a")
    with get_default_graph().name_scope(name or "SparseTensorDenseMatMul"):
        b = convert_to_tensor(b, dtype=sp_a.dtype, name="b")
        rank = _rank(sp_a)
        if rank is not None and rank != 2:
            raise ValueError(f"sparse_tensor_dense_matmul: sp_a must be rank 2, got rank {rank}")
        if b.shape.rank is not None and b.shape.rank != 2:
            raise ValueError(f"sparse_tensor_dense_matmul: b must be a matrix, got {b.shape}")
        if adjoint_b:
            b = rg.transpose(b)
        shape = _static_shape(sp_a)
        rows_col, inner_col = (1, 0) if adjoint_a else (0, 1)
        if shape is not None and b.shape.rank == 2 and b.shape.dims[0] is not None:
            if shape[inner_col] != b.shape.dims[0]:
                raise ValueError(
                    f"sparse_tensor_dense_matmul: inner dimensions differ: sp_a"
                    f"{'ᵀ' if adjoint_a else ''} is {shape[rows_col]}x{shape[inner_col]} and "
                    f"b{'ᵀ' if adjoint_b else ''} is {b.shape.dims[0]}x{b.shape.dims[1]}"
                )
        rows = rg.gather(sp_a.indices, rows_col, axis=1)
        inner = rg.gather(sp_a.indices, inner_col, axis=1)
        num_rows = shape[rows_col] if shape is not None else rg.gather(sp_a.dense_shape, rows_col)
        terms = rg.gather(b, inner) * rg.expand_dims(sp_a.values, 1)
        return unsorted_segment_sum(terms, rows, num_rows)


# -- reductions --------------------------------------------------------------------------------


def _reduce(sp, axis, keepdims, segment, what, sparse_output):
    """Values grouped by their coordinates outside `axis`, combined by `segment`."""
    rank = _rank(sp)
    axes = _axes(axis, rank, what)
    static = _static_shape(sp)
    if axes is None:
        if rank is None and keepdims:
            raise ValueError(f"{what}: keepdims over all axes needs a sparse input of known rank")
        axes = list(range(rank)) if rank is not None else None
    if axes is not None and rank is None:
        raise ValueError(f"{what}: reducing over an axis needs a sparse input of known rank")
    kept = [d for d in range(rank) if d not in axes]
    out_axes = list(range(rank)) if keepdims else kept
    # The output coordinates keep the non-reduced columns (reduced ones become 0 under keepdims).
    keep_mask = np.array([d not in axes for d in range(rank)], np.int64)
    out_shape_full = rg.where(
        convert_to_tensor(keep_mask.astype(bool)),
        sp.dense_shape,
        rg.ones_like(sp.dense_shape),
    )
    out_shape = rg.gather(out_shape_full, np.array(out_axes, np.int32))
    out_idx = rg.gather(sp.indices * keep_mask, np.array(out_axes, np.int32), axis=1)
    if static is not None:
        out_static = [static[d] if d in kept else 1 for d in out_axes]
        out_shape = convert_to_tensor(np.array(out_static, np.int64))
    if sparse_output:
        indices, values, _ = _coalesce(out_idx, sp.values, out_shape, segment)
        return SparseTensor(indices, values, out_shape)
    linear = _linear(out_idx, out_shape)
    total = rg.reduce_prod(out_shape)
    flat = segment(sp.values, linear, total)
    if segment is not unsorted_segment_sum:
        # A position no value reaches is 0 in TensorFlow, not the segment op's lowest value.
        hits = unsorted_segment_sum(rg.ones_like(linear), linear, total)
        flat = rg.where(rg.greater(hits, 0), flat, rg.zeros_like(flat))
    return rg.reshape(flat, out_static if static is not None else out_shape)


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None,
                      name=None) -> Tensor:  # fmt: skip
    """The sum of a SparseTensor's values over `axis` (all axes if None), a dense tensor.

    Raises:
        ValueError: an axis out of range, or not known when the graph is built.
    """
    sp = _sparse(sp_input)
    axis, keep = _reduction_axes(axis, reduction_axes), _keepdims(keepdims, keep_dims)
    with get_default_graph().name_scope(name or "SparseReduceSum"):
        return _reduce(sp, axis, keep, unsorted_segment_sum, "sparse_reduce_sum", False)


def sparse_reduce_sum_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None,
                             keep_dims=None, name=None) -> SparseTensor:  # fmt: skip
    """sparse_reduce_sum with a SparseTensor result (the groups that hold values, sorted)."""
    sp = _sparse(sp_input)
    axis, keep = _reduction_axes(axis, reduction_axes), _keepdims(keepdims, keep_dims)
    with get_default_graph().name_scope(name or "SparseReduceSumSparse"):
        return _reduce(sp, axis, keep, unsorted_segment_sum, "sparse_reduce_sum_sparse", True)


def sparse_reduce_max(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None,
                      name=None) -> Tensor:  # fmt: skip
    """The maximum of a SparseTensor's stored values over `axis` (implicit zeros do not count;
    an output position with no values is 0, as TensorFlow's kernel)."""
    sp = _sparse(sp_input)
    axis, keep = _reduction_axes(axis, reduction_axes), _keepdims(keepdims, keep_dims)
    with get_default_graph().name_scope(name or "SparseReduceMax"):
        return _reduce(sp, axis, keep, unsorted_segment_max, "sparse_reduce_max", False)


def sparse_reduce_max_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None,
                             keep_dims=None, name=None) -> SparseTensor:  # fmt: skip
    """sparse_reduce_max with a SparseTensor result."""
    sp = _sparse(sp_input)
    axis, keep = _reduction_axes(axis, reduction_axes), _keepdims(keepdims, keep_dims)
    with get_default_graph().name_scope(name or "SparseReduceMaxSparse"):
        return _reduce(sp, axis, keep, unsorted_segment_max, "sparse_reduce_max_sparse", True)


# -- elementwise -------------------------------------------------------------------------------


def sparse_add(a, b, threshold=0, thresh=None, name=None):
    """a + b. SparseTensor + dense (either order) is dense; SparseTensor + SparseTensor is a
    SparseTensor over the union of coordinates (duplicates summed, sorted), dropping sums of
    coinciding entries whose magnitude is below `threshold` (`thresh` is TF1's older spelling).

    Raises:
        TypeError: neither a nor b is sparse.
    """
    if thresh is not None:
        threshold = thresh
    a_sp = isinstance(a, (SparseTensor, SparseTensorValue))
    b_sp = isinstance(b, (SparseTensor, SparseTensorValue))
    if not (a_sp or b_sp):
        raise TypeError("sparse_add: at least one of a and b must be a SparseTensor")
    with get_default_graph().name_scope(name or "SparseAdd"):
        if not (a_sp and b_sp):
            sp, dense = (_sparse(a, "a"), b) if a_sp else (_sparse(b, "b"), a)
            dense = convert_to_tensor(dense, dtype=sp.dtype, name="dense")
            scattered = rg.scatter_nd(sp.indices, sp.values, rg.shape(dense, out_type=_I64))
            return dense + scattered
        a, b = _sparse(a, "a"), _sparse(b, "b")
        ra, rb = _rank(a), _rank(b)
        if ra is not None and rb is not None and ra != rb:
            raise ValueError(f"sparse_add: a is rank {ra} but b is rank {rb}")
        sa, sb = _static_shape(a), _static_shape(b)
        if sa is not None and sb is not None and sa != sb:
            raise ValueError(f"sparse_add: a's dense_shape {sa} differs from b's {sb}")
        indices = rg.concat([a.indices, b.indices], 0)
        values = rg.concat([a.values, rg.cast(b.values, a.dtype)], 0)
        indices, values, counts = _coalesce(indices, values, a.dense_shape)
        # As TensorFlow's kernel: only sums of coinciding entries are held to the threshold.
        big = rg.greater_equal(rg.abs(values), rg.cast(convert_to_tensor(threshold), values.dtype))
        keep = rg.logical_or(big, rg.equal(counts, 1))
        return SparseTensor(
            rg.boolean_mask(indices, keep), rg.boolean_mask(values, keep), a.dense_shape
        )


def _union_combine(sp_a, sp_b, combine, what):
    a, b = _sparse(sp_a, "sp_a"), _sparse(sp_b, "sp_b")
    sa, sb = _static_shape(a), _static_shape(b)
    if sa is not None and sb is not None and sa != sb:
        raise ValueError(f"{what}: sp_a's dense_shape {sa} differs from sp_b's {sb}")
    shape = a.dense_shape
    la, lb = _linear(a.indices, shape), _linear(b.indices, shape)
    uniq, idx = rg.unique(rg.concat([la, lb], 0), out_idx=dtypes.int32)
    uniq_order = _sort_order(uniq)
    n = rg.size(uniq, out_type=dtypes.int32)
    na = rg.size(la, out_type=dtypes.int32)
    # Each side's value at every union coordinate, 0 where that side stores none.
    va = unsorted_segment_sum(a.values, idx[:na], n)
    vb = unsorted_segment_sum(rg.cast(b.values, a.dtype), idx[na:], n)
    out = rg.gather(combine(va, vb), uniq_order)
    return SparseTensor(_unravel(rg.gather(uniq, uniq_order), shape), out, shape)


def sparse_maximum(sp_a, sp_b, name=None) -> SparseTensor:
    """Element-wise maximum of two SparseTensors of one shape (a missing value counts as 0)."""
    with get_default_graph().name_scope(name or "SparseSparseMaximum"):
        return _union_combine(sp_a, sp_b, rg.maximum, "sparse_maximum")


def sparse_minimum(sp_a, sp_b, name=None) -> SparseTensor:
    """Element-wise minimum of two SparseTensors of one shape (a missing value counts as 0)."""
    with get_default_graph().name_scope(name or "SparseSparseMinimum"):
        return _union_combine(sp_a, sp_b, rg.minimum, "sparse_minimum")


def sparse_softmax(sp_input, name=None) -> SparseTensor:
    """Softmax of the stored values over the last dimension, per position of the others (the
    implicit zeros take no part).

    Raises:
        ValueError: sp_input has rank under 2.
    """
    sp = _sparse(sp_input)
    rank = _rank(sp)
    if rank is not None and rank < 2:
        raise ValueError(f"sparse_softmax: sp_input must be rank 2 or more, got rank {rank}")
    with get_default_graph().name_scope(name or "SparseSoftmax"):
        outer = sp.indices[:, :-1]
        groups = _linear(outer, sp.dense_shape[:-1])
        n = rg.reduce_prod(sp.dense_shape[:-1])
        # Shifting by the group's maximum does not change the softmax; it only keeps exp finite.
        peak = rg.stop_gradient(unsorted_segment_max(sp.values, groups, n))
        e = rg.exp(sp.values - rg.gather(peak, groups))
        total = unsorted_segment_sum(e, groups, n)
        return SparseTensor(sp.indices, e / rg.gather(total, groups), sp.dense_shape)


# -- segments ----------------------------------------------------------------------------------


def _sparse_segment(data, indices, segment_ids, num_segments, scale, what):
    data = convert_to_tensor(data, name="data")
    indices = convert_to_tensor(indices, name="indices")
    segment_ids = convert_to_tensor(segment_ids, name="segment_ids")
    for label, t in (("indices", indices), ("segment_ids", segment_ids)):
        if t.shape.rank is not None and t.shape.rank != 1:
            raise ValueError(f"{what}: {label} must be a vector, got shape {t.shape}")
    ni, ns = indices.shape.num_elements(), segment_ids.shape.num_elements()
    if indices.shape.is_fully_defined() and segment_ids.shape.is_fully_defined() and ni != ns:
        raise ValueError(f"{what}: {ni} indices but {ns} segment_ids; they pair up one to one")
    if num_segments is None:
        # TensorFlow's segment_ids are sorted: the last one numbers the segments.
        num_segments = rg.cast(rg.reduce_max(segment_ids), dtypes.int32) + 1
        num_segments = rg.maximum(num_segments, 0)
    rows = rg.gather(data, indices)
    total = unsorted_segment_sum(rows, segment_ids, num_segments)
    if scale is None:
        return total
    ones = rg.ones_like(rg.cast(segment_ids, data.dtype))
    count = rg.maximum(unsorted_segment_sum(ones, segment_ids, num_segments), 1)
    denom = scale(count)
    out_rank = total.shape.rank
    if out_rank is not None:
        denom = rg.reshape(denom, [-1] + [1] * (out_rank - 1))
    else:
        denom = rg.reshape(denom, rg.concat([[-1], rg.ones_like(rg.shape(total)[1:])], 0))
    return total / denom


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """Σ data[indices[i]] over each segment of segment_ids (num_segments rows, or the last
    segment id + 1)."""
    with get_default_graph().name_scope(name or "SparseSegmentSum"):
        return _sparse_segment(data, indices, segment_ids, num_segments, None,
                               "sparse_segment_sum")  # fmt: skip


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """The mean of data[indices[i]] over each segment (an empty segment is 0)."""
    with get_default_graph().name_scope(name or "SparseSegmentMean"):
        return _sparse_segment(data, indices, segment_ids, num_segments, lambda c: c,
                               "sparse_segment_mean")  # fmt: skip


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """The sum of data[indices[i]] over each segment divided by √(its size)."""
    with get_default_graph().name_scope(name or "SparseSegmentSqrtN"):
        return _sparse_segment(data, indices, segment_ids, num_segments, rg.sqrt,
                               "sparse_segment_sqrt_n")  # fmt: skip


# -- structure ---------------------------------------------------------------------------------


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of sp_input where the boolean vector `to_retain` is true.

    Raises:
        ValueError: to_retain is not a vector, or its length is not the number of values.
    """
    sp = _sparse(sp_input)
    keep = convert_to_tensor(to_retain, dtype=dtypes.bool_, name="to_retain")
    if keep.shape.rank is not None and keep.shape.rank != 1:
        raise ValueError(f"sparse_retain: to_retain must be a vector, got shape {keep.shape}")
    n_keep, n_val = keep.shape.num_elements(), sp.values.shape.num_elements()
    if keep.shape.is_fully_defined() and sp.values.shape.is_fully_defined() and n_keep != n_val:
        raise ValueError(
            f"sparse_retain: to_retain has {n_keep} entries but sp_input holds {n_val} values"
        )
    return SparseTensor(
        rg.boolean_mask(sp.indices, keep), rg.boolean_mask(sp.values, keep), sp.dense_shape
    )


def sparse_reorder(sp_input, name=None) -> SparseTensor:
    """sp_input with its entries in row-major (canonical) order; duplicates keep their order."""
    sp = _sparse(sp_input)
    with get_default_graph().name_scope(name or "SparseReorder"):
        return _take_rows(sp, _sort_order(_linear(sp.indices, sp.dense_shape)))


def sparse_reshape(sp_input, shape, name=None) -> SparseTensor:
    """sp_input's entries in a dense shape `shape` of as many elements (one dimension may be -1).

    Raises:
        ValueError: more than one -1, or (where both are known) element counts that differ.
    """
    sp = _sparse(sp_input)
    with get_default_graph().name_scope(name or "SparseReshape"):
        new = convert_to_tensor(shape, dtype=_I64, name="shape")
        old_static, new_static = _static_shape(sp), constant_value(new)
        if new_static is not None:
            dims = [int(d) for d in np.asarray(new_static).reshape(-1)]
            if dims.count(-1) > 1:
                raise ValueError(f"sparse_reshape: at most one -1 in shape, got {dims}")
            if old_static is not None:
                total = int(np.prod(old_static))
                known = int(np.prod([d for d in dims if d != -1]))
                if -1 in dims:
                    if known == 0 or total % known:
                        raise ValueError(
                            f"sparse_reshape: cannot reshape {old_static} ({total} elements) to "
                            f"{dims}"
                        )
                    dims[dims.index(-1)] = total // known
                elif known != total:
                    raise ValueError(
                        f"sparse_reshape: cannot reshape {old_static} ({total} elements) to "
                        f"{dims} ({known} elements)"
                    )
                new = convert_to_tensor(np.array(dims, np.int64))
        if new_static is None or old_static is None:
            total = rg.reduce_prod(sp.dense_shape)
            known = rg.reduce_prod(rg.where(rg.equal(new, -1), rg.ones_like(new), new))
            new = rg.where(rg.equal(new, -1), rg.fill(rg.shape(new), total // known), new)
        linear = _linear(sp.indices, sp.dense_shape)
        return SparseTensor(_unravel(linear, new), sp.values, new)


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """sp_input with its dimensions permuted by `perm` (reversed if None), reordered."""
    sp = _sparse(sp_input)
    with get_default_graph().name_scope(name or "SparseTranspose"):
        if perm is None:
            rank = _rank(sp)
            if rank is None:
                raise ValueError("sparse_transpose: perm=None needs a sparse input of known rank")
            perm = list(range(rank - 1, -1, -1))
        perm = convert_to_tensor(perm, dtype=dtypes.int32, name="perm")
        rank, pv = _rank(sp), constant_value(perm)
        if (
            pv is not None
            and rank is not None
            and sorted(np.ravel(pv).tolist()) != list(range(rank))
        ):
            raise ValueError(
                f"sparse_transpose: perm {np.ravel(pv).tolist()} is not a permutation of "
                f"0..{rank - 1}"
            )
        out = SparseTensor(
            rg.gather(sp.indices, perm, axis=1), sp.values, rg.gather(sp.dense_shape, perm)
        )
        return sparse_reorder(out)


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim: bool = False,
                  concat_dim=None, expand_nonconcat_dims=None) -> SparseTensor:  # fmt: skip
    """The SparseTensors of sp_inputs joined along `axis` (output in row-major order). With
    expand_nonconcat_dim the other dimensions are the inputs' largest; else they must agree.

    Raises:
        ValueError: no inputs, ranks that differ, or other dimensions that differ.
    """
    if concat_dim is not None:
        axis = concat_dim
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    if not isinstance(sp_inputs, (list, tuple)) or not sp_inputs:
        raise ValueError("sparse_concat: sp_inputs must be a non-empty list of SparseTensors")
    sps = [_sparse(s, f"sp_inputs[{i}]") for i, s in enumerate(sp_inputs)]
    ranks = {_rank(s) for s in sps} - {None}
    if len(ranks) > 1:
        raise ValueError(f"sparse_concat: inputs have different ranks {sorted(ranks)}")
    rank = ranks.pop() if ranks else None
    axis = int(axis)
    if axis < 0:
        if rank is None:
            raise ValueError("sparse_concat: a negative axis needs inputs of known rank")
        axis += rank
    statics = [_static_shape(s) for s in sps]
    if not expand_nonconcat_dim and all(s is not None for s in statics):
        other = {tuple(d for i, d in enumerate(s) if i != axis) for s in statics}
        if len(other) > 1:
            raise ValueError(
                f"sparse_concat: inputs differ outside axis {axis}: {statics}; pass "
                "expand_nonconcat_dim=True to take the largest"
            )
    with get_default_graph().name_scope(name or "SparseConcat"):
        shapes = rg.stack([s.dense_shape for s in sps])
        axis_mask = rg.one_hot(axis, rg.size(sps[0].dense_shape), dtype=_I64)
        offsets = rg.cumsum(shapes[:, axis], exclusive=True)
        indices = rg.concat([s.indices + offsets[i] * axis_mask for i, s in enumerate(sps)], 0)
        values = rg.concat([s.values for s in sps], 0)
        base = rg.reduce_max(shapes, axis=0) if expand_nonconcat_dim else sps[0].dense_shape
        shape = base * (1 - axis_mask) + rg.reduce_sum(shapes[:, axis]) * axis_mask
        return sparse_reorder(SparseTensor(indices, values, shape))


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """sp_input with (row, 0, ..., 0) = default_value added for each row (first dimension) that
    holds no value; also the bool [rows] vector of which rows were empty.

    Returns:
        (SparseTensor in row-major order, empty_row_indicator)
    """
    sp = _sparse(sp_input)
    with get_default_graph().name_scope(name or "SparseFillEmptyRows"):
        rows = sp.indices[:, 0]
        n_rows = sp.dense_shape[0]
        count = unsorted_segment_sum(rg.ones_like(rows), rows, n_rows)
        empty = rg.equal(count, 0)
        empty_rows = rg.where(empty)  # [k, 1] int64
        k = rg.shape(empty_rows, out_type=_I64)[0]
        pad = rg.zeros(rg.stack([k, rg.size(sp.dense_shape, out_type=_I64) - 1]), _I64)
        new_indices = rg.concat([empty_rows, pad], 1)
        default = convert_to_tensor(default_value, dtype=sp.dtype, name="default_value")
        new_values = rg.fill(rg.reshape(k, [1]), default)
        out = SparseTensor(
            rg.concat([sp.indices, new_indices], 0),
            rg.concat([sp.values, new_values], 0),
            sp.dense_shape,
        )
        return sparse_reorder(out), empty


def sparse_slice(sp_input, start, size, name=None) -> SparseTensor:
    """The entries of sp_input inside the box [start, start + size), shifted by -start; the dense
    shape is the box clipped to sp_input's.

    Raises:
        ValueError: start or size is not a vector of sp_input's rank.
    """
    sp = _sparse(sp_input)
    with get_default_graph().name_scope(name or "SparseSlice"):
        start = convert_to_tensor(start, dtype=_I64, name="start")
        size = convert_to_tensor(size, dtype=_I64, name="size")
        rank = _rank(sp)
        for label, t in (("start", start), ("size", size)):
            n = t.shape.dims[0] if t.shape.rank == 1 else None
            if t.shape.rank not in (None, 1) or (rank is not None and n not in (None, rank)):
                raise ValueError(
                    f"sparse_slice: {label} must be a vector of length {rank}, got {t.shape}"
                )
        end = start + size
        inside = rg.reduce_all(
            rg.logical_and(rg.greater_equal(sp.indices, start), rg.less(sp.indices, end)), axis=1
        )
        shape = rg.maximum(rg.minimum(end, sp.dense_shape) - start, 0)
        return SparseTensor(
            rg.boolean_mask(sp.indices, inside) - start, rg.boolean_mask(sp.values, inside), shape
        )


class _KeywordRequired:
    def __repr__(self) -> str:
        return "KeywordRequired()"


_KEYWORD_REQUIRED = _KeywordRequired()


def sparse_split(keyword_required=_KEYWORD_REQUIRED, sp_input=None, num_split=None, axis=None,
                 name=None, split_dim=None) -> list[SparseTensor]:  # fmt: skip
    """sp_input cut into `num_split` pieces along `axis`; the first (size % num_split) pieces get
    one more slot. Arguments by keyword, as TensorFlow.

    Raises:
        ValueError: a positional argument, num_split missing or < 1, or axis missing.
    """
    if not isinstance(keyword_required, _KeywordRequired):
        raise ValueError("sparse_split: pass sp_input, num_split and axis by keyword")
    if split_dim is not None:
        axis = split_dim
    if num_split is None or int(num_split) < 1:
        raise ValueError(f"sparse_split: num_split must be a positive int, got {num_split!r}")
    if axis is None:
        raise ValueError("sparse_split: axis is required")
    sp = _sparse(sp_input)
    num_split, axis = int(num_split), int(axis)
    rank = _rank(sp)
    if axis < 0:
        if rank is None:
            raise ValueError("sparse_split: a negative axis needs a sparse input of known rank")
        axis += rank
    with get_default_graph().name_scope(name or "SparseSplit"):
        mask = rg.one_hot(axis, rg.size(sp.dense_shape), dtype=_I64)
        dim = sp.dense_shape[axis]
        base, extra = dim // num_split, dim % num_split
        pieces, offset = [], convert_to_tensor(np.int64(0))
        for i in range(num_split):
            length = base + rg.cast(rg.less(np.int64(i), extra), _I64)
            start = offset * mask
            size = sp.dense_shape * (1 - mask) + length * mask
            pieces.append(sparse_slice(sp, start, size))
            offset = offset + length
        return pieces


def sparse_to_indicator(sp_input, vocab_size, name=None) -> Tensor:
    """A dense bool tensor of shape dense_shape[:-1] + [vocab_size], true at
    (indices[:-1], value) for every integer value of sp_input.

    Raises:
        TypeError: sp_input's values are not integers.
    """
    sp = _sparse(sp_input)
    if not sp.dtype.is_integer:
        raise TypeError(f"sparse_to_indicator: sp_input must hold integers, got {sp.dtype}")
    with get_default_graph().name_scope(name or "SparseToIndicator"):
        vocab = rg.reshape(convert_to_tensor(vocab_size, dtype=_I64, name="vocab_size"), [1])
        indices = rg.concat([sp.indices[:, :-1], rg.expand_dims(rg.cast(sp.values, _I64), 1)], 1)
        shape = rg.concat([sp.dense_shape[:-1], vocab], 0)
        hits = rg.scatter_nd(indices, rg.ones_like(sp.values, dtype=dtypes.int32), shape)
        return rg.greater(hits, 0)


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted: bool = False):
    """The SparseTensor whose last coordinate is sp_ids' value and whose value is sp_values'
    (same indices), with dense shape sp_ids.dense_shape[:-1] + [vocab_size].

    Raises:
        TypeError: sp_ids does not hold integers.
        NotImplementedError: a list of vocab sizes (TensorFlow's multi-column form).
    """
    ids, vals = _sparse(sp_ids, "sp_ids"), _sparse(sp_values, "sp_values")
    if isinstance(vocab_size, (list, tuple)):
        raise NotImplementedError("sparse_merge: rill takes one sp_ids and one vocab_size")
    if not ids.dtype.is_integer:
        raise TypeError(f"sparse_merge: sp_ids must hold integers, got {ids.dtype}")
    with get_default_graph().name_scope(name or "SparseMerge"):
        vocab = rg.reshape(convert_to_tensor(vocab_size, dtype=_I64, name="vocab_size"), [1])
        indices = rg.concat([ids.indices[:, :-1], rg.expand_dims(rg.cast(ids.values, _I64), 1)], 1)
        shape = rg.concat([ids.dense_shape[:-1], vocab], 0)
        out = SparseTensor(indices, vals.values, shape)
        return out if already_sorted else sparse_reorder(out)
