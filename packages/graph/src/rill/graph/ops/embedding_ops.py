"""Embedding lookups over one tensor or many shards (TensorFlow's `tf.nn.embedding_lookup` and
`tf.nn.embedding_lookup_sparse`), built as the OSDI paper's Figure 4.

A lookup of `ids` in shards `params[0..n-1]` (a list, a PartitionedVariable, or one tensor):

1. each id is assigned a shard and a row in it — `"mod"`: shard `id % n`, row `id // n`;
   `"div"`: shards hold contiguous ranges, in order (row `id - offset[shard]`, where the offsets
   are the shards' actual row counts, so shards of any sizes are correct);
2. `DynamicPartition` splits the rows (and their positions) by shard;
3. a `Gather` colocated with each shard reads its rows; the ids were made distinct first
   (`Unique`), so a parameter server sends each distinct row once;
4. `DynamicStitch` puts the rows back in order, and a local gather repeats them for repeated
   ids.

Ids outside `[0, total rows)` fail with InvalidArgumentError from the op
`<scope>/check_ids`, naming the id. The gradient of each shard's gather is an IndexedSlices of
the distinct rows: no dense gradient of a shard is ever built.

>>> import numpy as np
>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     shards = [rg.constant(np.arange(4.0)[:, None] * 10 + i) for i in range(2)]
...     y = embedding_lookup(shards, [3, 0, 3, 4])  # "mod": id 3 is shard 1, row 1
...     Session().run(y).ravel().tolist()
[11.0, 0.0, 11.0, 20.0]
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.ops import array_ops, gather_ops, grad_ops, logic_ops, math_ops, reshape_ops
from rill.graph.ops.reduction_ops import cumsum, reduce_sum
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.sparse_tensor import SparseTensor

__all__ = ["embedding_lookup", "embedding_lookup_sparse", "safe_embedding_lookup_sparse"]


def _shards(params) -> list:
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable
        return list(params._get_variable_list())
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("embedding_lookup: params is an empty list (need at least one shard)")
        return list(params)
    return [params]


def _rows(p) -> int | Tensor:
    """The first dimension of a shard: static when known."""
    shape = p.shape
    if shape.rank is not None and shape.rank >= 1 and shape.dims[0] is not None:
        return int(shape.dims[0])
    value = p.value() if hasattr(p, "value") else p
    return gather_ops.gather(array_ops.shape(value), 0)


def _gather_rows(p, ids: Tensor) -> Tensor:
    """Rows `ids` of shard `p`, read where `p` lives."""
    g = get_default_graph()
    with g.colocate_with(p):
        if hasattr(p, "sparse_read"):
            return p.sparse_read(ids)
        return gather_ops.gather(p, ids)


def _clip_rows(x: Tensor, max_norm) -> Tensor:
    """Rows scaled down to L2 norm at most max_norm (norm over every axis but the first)."""
    if max_norm is None:
        return x
    rank = x.shape.rank
    axes = list(range(1, rank)) if rank is not None else math_ops.range(1, array_ops.rank(x))
    sq = reduce_sum(x * x, axis=axes, keepdims=True)
    positive = logic_ops.greater(sq, np.array(0, x.dtype.np))
    # sqrt of 0 has an infinite gradient: take it of 1 there and select the 0 back.
    safe = logic_ops.select_v2(positive, sq, array_ops.ones_like(sq))
    norm = logic_ops.select_v2(positive, math_ops.sqrt(safe), sq)
    clip = convert_to_tensor(max_norm, x.dtype)
    return math_ops.truediv(x * clip, math_ops.maximum(norm, clip))


def _unique_lookup(p, ids: Tensor, max_norm) -> Tensor:
    """Rows `ids` of shard `p`, each distinct row read once from `p`."""
    uniq, idx = gather_ops.unique(ids, out_idx=dtypes.int32)
    rows = _clip_rows(_gather_rows(p, uniq), max_norm)
    return gather_ops.gather(rows, idx)


def _check_ids(flat_ids: Tensor, total) -> Tensor:
    """flat_ids, after a check that fails (InvalidArgumentError from `check_ids`, naming the id)
    when one is >= total. The check sums no data: an UnsortedSegmentSum of [n, 0] zeros into
    [total, 0], which validates its segment ids and moves no bytes. Negative ids fail in their
    shard's gather (their row is the id itself)."""
    n = array_ops.size(flat_ids, out_type=dtypes.int64)
    empty = array_ops.fill(reshape_ops.stack([n, np.int64(0)]), np.float32(0), name="no_data")
    check = grad_ops.unsorted_segment_sum(
        empty, flat_ids, convert_to_tensor(total, flat_ids.dtype), name="check_ids"
    )
    g = get_default_graph()
    with g.control_dependencies([check.op]):
        return array_ops.identity(flat_ids)


def _sum_rows(sizes: list) -> int | Tensor:
    if all(isinstance(s, int) for s in sizes):
        return sum(sizes)
    return math_ops.add_n([math_ops.cast(s, dtypes.int64) for s in sizes])


def _assign_shards(flat_ids: Tensor, sizes: list, strategy: str):
    """(shard of each id, row of each id in its shard)."""
    n = len(sizes)
    dt = flat_ids.dtype.np
    if strategy == "mod":
        zero = np.array(0, dt)
        row = math_ops.floordiv(flat_ids, np.array(n, dt))
        # A negative id keeps its value as its row, so its shard's gather names it.
        row = logic_ops.select_v2(logic_ops.less(flat_ids, zero), flat_ids, row)
        return math_ops.cast(math_ops.floormod(flat_ids, np.array(n, dt)), dtypes.int32), row
    if all(isinstance(s, int) for s in sizes):
        offsets = convert_to_tensor(np.cumsum([0] + sizes[:-1]).astype(dt), name="offsets")
    else:
        counts = reshape_ops.stack([math_ops.cast(s, flat_ids.dtype) for s in sizes])
        offsets = math_ops.subtract(cumsum(counts), counts, name="offsets")
    # The shard of an id is the number of shard starts (after the first) at or below it.
    starts = gather_ops.gather(offsets, np.arange(1, n, dtype=np.int32))
    above = logic_ops.greater_equal(reshape_ops.expand_dims(flat_ids, 1), starts)
    shard = reduce_sum(math_ops.cast(above, dtypes.int32), axis=1)
    return shard, math_ops.subtract(flat_ids, gather_ops.gather(offsets, shard))


def _element_shape(shards: list) -> TensorShape:
    shape = shards[0].shape
    if shape.rank is None:
        return unknown_shape()
    return TensorShape(shape.dims[1:])


def embedding_lookup(
    params,
    ids,
    partition_strategy: str = "mod",
    name: str | None = None,
    validate_indices: bool = True,
    max_norm=None,
) -> Tensor:
    """The rows `ids` of the embedding `params` (shape `ids.shape + params.shape[1:]`).

    Args:
        params: a tensor or variable, a list of them (shards of one embedding, split along
            dimension 0), or a PartitionedVariable.
        ids: an int32 or int64 tensor of any shape.
        partition_strategy: with several shards, "mod" (id i in shard i % n) or "div" (shards
            hold consecutive ids, in order; shard sizes may be any).
        validate_indices: ignored (ids are always checked, as on TensorFlow's CPU).
        max_norm: when given, each looked-up row with a larger L2 norm is scaled down to it.

    Raises:
        ValueError: an unknown partition_strategy, or no shards.
        InvalidArgumentError (when run): an id outside [0, total rows) — from the op
            `<name>/check_ids`, naming the id (one shard: from its gather).
    """
    del validate_indices
    if partition_strategy not in ("mod", "div"):
        raise ValueError(
            f"embedding_lookup: partition_strategy must be 'mod' or 'div', got "
            f"{partition_strategy!r}"
        )
    shards = _shards(params)
    g = get_default_graph()
    with g.name_scope(name or "embedding_lookup"):
        ids = convert_to_tensor(ids, name="ids")
        if not ids.dtype.is_integer:
            raise TypeError(f"embedding_lookup: ids must be int32 or int64, got {ids.dtype.name}")
        if len(shards) == 1:
            return _lookup_one(shards[0], ids, max_norm)
        return _lookup_sharded(shards, ids, partition_strategy, max_norm)


def _lookup_one(p, ids: Tensor, max_norm) -> Tensor:
    if not hasattr(p, "sparse_read") and max_norm is None:
        return _gather_rows(p, ids)
    flat = reshape_ops.reshape(ids, [-1])
    rows = _unique_lookup(p, flat, max_norm)
    return _restore_shape(rows, ids, [p])


def _restore_shape(rows: Tensor, ids: Tensor, shards: list) -> Tensor:
    element = _element_shape(shards)
    if ids.shape.rank == 1 and element.rank is not None:
        out = rows
    elif element.is_fully_defined():
        out = reshape_ops.reshape(
            rows,
            reshape_ops.concat([array_ops.shape(ids), np.array(element.as_list(), np.int32)], 0),
        )
    else:
        tail = gather_ops.gather(array_ops.shape(rows), math_ops.range(1, array_ops.rank(rows)))
        out = reshape_ops.reshape(rows, reshape_ops.concat([array_ops.shape(ids), tail], 0))
    if ids.shape.rank is not None and element.rank is not None:
        out.set_shape(TensorShape(list(ids.shape.dims) + list(element.dims)))
    return out


def _lookup_sharded(shards: list, ids: Tensor, strategy: str, max_norm) -> Tensor:
    n = len(shards)
    sizes = [_rows(p) for p in shards]
    # Each distinct id once: its shard reads the row once, and the rows are repeated at the end.
    uniq, idx = gather_ops.unique(reshape_ops.reshape(ids, [-1]), out_idx=dtypes.int32)
    uniq = _check_ids(uniq, _sum_rows(sizes))
    shard, row = _assign_shards(uniq, sizes, strategy)
    rows_by_shard = gather_ops.dynamic_partition(row, shard, n)
    positions = math_ops.range(0, array_ops.size(uniq))
    positions_by_shard = gather_ops.dynamic_partition(positions, shard, n)
    looked_up = [_clip_rows(_gather_rows(p, r), max_norm) for p, r in zip(shards, rows_by_shard)]
    stitched = gather_ops.dynamic_stitch(positions_by_shard, looked_up)
    return _restore_shape(gather_ops.gather(stitched, idx), ids, shards)


# -- sparse lookups ------------------------------------------------------------------------------


def embedding_lookup_sparse(
    params,
    sp_ids: SparseTensor,
    sp_weights: SparseTensor | None,
    partition_strategy: str = "mod",
    name: str | None = None,
    combiner: str | None = None,
    max_norm=None,
) -> Tensor:
    """Per row of the sparse batch `sp_ids` ([batch, k] ids), the combination of the embeddings
    of its ids, weighted by `sp_weights` (same indices; None: weight 1).

    combiner: "sum" (Σ w·e), "mean" (Σ w·e / Σ w, the default) or "sqrtn" (Σ w·e / √Σ w²).
    The result has `dense_shape[0]` rows; a row with no ids is zeros (TensorFlow's version drops
    trailing empty rows; rill keeps the batch size).

    Raises:
        ValueError: an unknown combiner, or sp_ids/sp_weights not SparseTensors.
    """
    if combiner is None:
        combiner = "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner!r}")
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"sp_ids must be a SparseTensor, got {type(sp_ids).__name__}")
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError(
            f"sp_weights must be a SparseTensor or None, got {type(sp_weights).__name__}"
        )
    g = get_default_graph()
    with g.name_scope(name or "embedding_lookup_sparse"):
        segments = math_ops.cast(gather_ops.gather(sp_ids.indices, 0, axis=1), dtypes.int32)
        num_rows = math_ops.cast(gather_ops.gather(sp_ids.dense_shape, 0), dtypes.int32)
        uniq, idx = gather_ops.unique(sp_ids.values, out_idx=dtypes.int32)
        embeddings = embedding_lookup(params, uniq, partition_strategy, max_norm=max_norm)
        rows = gather_ops.gather(embeddings, idx)
        if sp_weights is None:
            weights = array_ops.ones_like(math_ops.cast(segments, rows.dtype))
        else:
            weights = math_ops.cast(sp_weights.values, rows.dtype)
            rows = rows * _as_column(weights, rows)
        total = grad_ops.unsorted_segment_sum(rows, segments, num_rows)
        if combiner == "sum":
            return total
        if combiner == "mean":
            denom = grad_ops.unsorted_segment_sum(weights, segments, num_rows)
        else:
            denom = math_ops.sqrt(
                grad_ops.unsorted_segment_sum(weights * weights, segments, num_rows)
            )
        # A row with no ids (denominator 0) stays zeros instead of 0/0.
        zero = np.array(0, rows.dtype.np)
        denom = logic_ops.select_v2(
            logic_ops.not_equal(denom, zero), denom, array_ops.ones_like(denom)
        )
        return math_ops.truediv(total, _as_column(denom, total))


def _as_column(v: Tensor, like: Tensor) -> Tensor:
    """Vector `v` reshaped to [n, 1, ..., 1] to broadcast over the rows of `like`."""
    rank = like.shape.rank
    if rank is not None:
        return reshape_ops.reshape(v, [-1] + [1] * (rank - 1))
    tail = array_ops.fill(array_ops.reshape(array_ops.rank(like) - 1, [1]), np.int32(1))
    return reshape_ops.reshape(v, reshape_ops.concat([np.array([-1], np.int32), tail], 0))


# -- safe lookups --------------------------------------------------------------------------------


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner: str = "mean", default_id=None, name=None,
                                 partition_strategy: str = "div", max_norm=None) -> Tensor:  # fmt: skip
    """TF1's tf.nn.safe_embedding_lookup_sparse: embedding_lookup_sparse that first drops ids < 0
    (and, unless combiner is "sum", weights <= 0), then gives each empty row the embedding of
    `default_id`, or zeros if default_id is None. sparse_ids of rank r > 2 give a result of shape
    dense_shape[:-1] + [embedding dim].

    Raises:
        ValueError: embedding_weights is None or an empty list, or an unknown combiner.
    """
    # sparse_math builds on rill.graph's namespace, which imports this module.
    import rill.graph as rg
    from rill.graph.ops.sparse_math import sparse_fill_empty_rows, sparse_reshape, sparse_retain

    if embedding_weights is None or (
        isinstance(embedding_weights, (list, tuple)) and not embedding_weights
    ):
        raise ValueError(f"safe_embedding_lookup_sparse: missing embedding_weights "
                         f"{embedding_weights!r}")  # fmt: skip
    if isinstance(embedding_weights, np.ndarray):
        embedding_weights = convert_to_tensor(embedding_weights, name="embedding_weights")
    ids = SparseTensor.from_value(sparse_ids)
    weights = None if sparse_weights is None else SparseTensor.from_value(sparse_weights)
    with get_default_graph().name_scope(name or "embedding_lookup"):
        original_shape = ids.dense_shape
        outer = rg.reduce_prod(original_shape[:-1], keepdims=True)
        ids = sparse_reshape(ids, rg.concat([outer, original_shape[-1:]], 0))
        if weights is not None:
            weights = SparseTensor(ids.indices, weights.values, ids.dense_shape)
        keep = rg.greater_equal(ids.values, rg.zeros_like(ids.values))
        if weights is not None and combiner != "sum":
            keep = rg.logical_and(keep, rg.greater(weights.values, rg.zeros_like(weights.values)))
        ids = sparse_retain(ids, keep)
        if weights is not None:
            weights = sparse_retain(weights, keep)
        ids, is_row_empty = sparse_fill_empty_rows(ids, default_id or 0)
        if weights is not None:
            weights, _ = sparse_fill_empty_rows(weights, 1.0)
        result = embedding_lookup_sparse(
            embedding_weights, ids, weights, partition_strategy=partition_strategy,
            combiner=combiner, max_norm=max_norm,
        )  # fmt: skip
        if default_id is None:
            empty = rg.reshape(is_row_empty, [-1, 1])
            result = rg.where(
                rg.logical_and(empty, rg.ones_like(result, dtype=dtypes.bool_)),
                rg.zeros_like(result),
                result,
            )
        tail = rg.shape(result)[1:]
        return rg.reshape(result, rg.concat([rg.cast(original_shape[:-1], dtypes.int32), tail], 0))
