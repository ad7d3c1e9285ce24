"""Index-driven data movement and selection: GatherV2, GatherNd, ScatterNd, OneHot,
DynamicPartition, DynamicStitch, Where, Unique and TopKV2.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.slice_ops import index_value
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value, constant_value_as_shape

__all__ = [
    "gather",
    "gather_nd",
    "scatter_nd",
    "one_hot",
    "dynamic_partition",
    "dynamic_stitch",
    "where",
    "unique",
    "top_k",
]

_INDICES = "{int16, int32, int64}"


def _ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _merge(a: TensorShape, b: TensorShape, what: str) -> TensorShape:
    try:
        return a.merge_with(b)
    except ValueError:
        raise ValueError(f"{what}: {a} and {b} are not compatible") from None


def _gather_shape(op):
    p, i = op._inputs[0].shape, op._inputs[1].shape
    op._inputs[2].shape.with_rank_at_most(1)
    axis = constant_value(op._inputs[2])
    bd = op.attrs["batch_dims"]
    if bd < 0 and i.rank is not None:
        bd += i.rank
    if axis is None:
        if p.rank is None or i.rank is None:
            return unknown_shape()
        return unknown_shape(p.rank + i.rank - 1 - bd)
    if p.rank is None:
        return unknown_shape()
    a = int(np.asarray(axis).reshape(-1)[0])
    if not -p.rank <= a < p.rank:
        raise ValueError(f"axis {a} is out of range for params of shape {p}")
    a %= p.rank
    if i.rank is None:
        return unknown_shape()
    if not 0 <= bd <= i.rank:
        raise ValueError(
            f"batch_dims {op.attrs['batch_dims']} is out of range [{-i.rank}, {i.rank}] for "
            f"indices of shape {i}"
        )
    if bd > a:
        raise ValueError(f"batch_dims ({bd}) must be at most axis ({a})")
    if bd >= p.rank:
        raise ValueError(f"batch_dims ({bd}) must be less than the rank of params ({p.rank})")
    batch = _merge(p[:bd], i[:bd], "the batch dimensions of params and indices")
    return TensorShape(batch.dims + p.dims[bd:a] + i.dims[bd:] + p.dims[a + 1 :])


defop(
    "GatherV2",
    inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
    outputs=["output: Tparams"],
    attrs=[
        "batch_dims: int = 0",
        "Tparams: type",
        f"Tindices: {_INDICES}",
        "Taxis: {int32, int64}",
    ],
    shape=_gather_shape,
    doc="Slices of `params` along `axis` at `indices` (per batch for batch_dims > 0).",
)


def _gather_nd_shape(op):
    p, i = op._inputs[0].shape, op._inputs[1].shape.with_rank_at_least(1)
    if i.rank is None:
        return unknown_shape()
    r = i.dims[-1]
    if r is None or p.rank is None:
        return unknown_shape()
    if r > p.rank:
        raise ValueError(
            f"the innermost dimension of indices ({r}) exceeds the rank of params ({p}); "
            f"indices has shape {i}"
        )
    return TensorShape(i.dims[:-1] + p.dims[r:])


defop(
    "GatherNd",
    inputs=["params: Tparams", "indices: Tindices"],
    outputs=["output: Tparams"],
    attrs=["Tparams: type", f"Tindices: {_INDICES}", "bad_indices_policy: string = ''"],
    shape=_gather_nd_shape,
    doc="Slices of `params` at the index tuples in the last dimension of `indices`.",
)


def _scatter_nd_shape(op):
    i = op._inputs[0].shape.with_rank_at_least(1)
    u = op._inputs[1].shape.with_rank_at_least(1)
    op._inputs[2].shape.with_rank(1)
    out = constant_value_as_shape(op._inputs[2])
    value = constant_value(op._inputs[2])
    if value is not None and any(d < 0 for d in _ints(value)):
        raise ValueError(f"shape must be >= 0, got {_ints(value)}")
    if i.rank is None or i.dims[-1] is None or out.rank is None:
        return out
    r = i.dims[-1]
    if r > out.rank:
        raise ValueError(f"the innermost dimension of indices {i} exceeds the rank of shape {out}")
    want = TensorShape(i.dims[:-1] + out.dims[r:])
    if not u.is_compatible_with(want):
        raise ValueError(
            f"updates has shape {u} but indices {i} and shape {out} need updates of shape {want}"
        )
    return out


defop(
    "ScatterNd",
    inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
    outputs=["output: T"],
    attrs=["T: type", f"Tindices: {_INDICES}", "bad_indices_policy: string = ''"],
    shape=_scatter_nd_shape,
    doc="Zeros of shape `shape` with `updates` added at `indices` (duplicates sum).",
)


def _one_hot_shape(op):
    i = op._inputs[0].shape
    op._inputs[1].shape.with_rank(0)
    op._inputs[2].shape.with_rank(0)
    op._inputs[3].shape.with_rank(0)
    depth = constant_value(op._inputs[1])
    if depth is not None and int(depth) < 0:
        raise ValueError(f"depth must be >= 0, got {int(depth)}")
    axis = op.attrs["axis"]
    if i.rank is None:
        if axis < -1:
            raise ValueError(f"axis must be -1 or a dimension index, got {axis}")
        return unknown_shape()
    if axis != -1 and not 0 <= axis <= i.rank:
        raise ValueError(f"axis must be -1 or in [0, {i.rank + 1}), got {axis}")
    a = i.rank if axis == -1 else axis
    d = None if depth is None else int(depth)
    return TensorShape(i.dims[:a] + (d,) + i.dims[a:])


defop(
    "OneHot",
    inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
    outputs=["output: T"],
    attrs=["axis: int = -1", "T: type", "TI: {uint8, int8, int32, int64} = int64"],
    shape=_one_hot_shape,
    doc="on_value where the new `axis` equals indices, off_value elsewhere.",
)


def _dynamic_partition_shape(op):
    d, p = op._inputs[0].shape, op._inputs[1].shape
    n = op.attrs["num_partitions"]
    if d.rank is None or p.rank is None:
        return [unknown_shape()] * n
    d = d.with_rank_at_least(p.rank)
    _merge(d[: p.rank], p, "data's leading dimensions and partitions' shape")
    return [TensorShape((None,) + d.dims[p.rank :])] * n


defop(
    "DynamicPartition",
    inputs=["data: T", "partitions: int32"],
    outputs=["outputs: num_partitions * T"],
    attrs=["num_partitions: int >= 1", "T: type"],
    shape=_dynamic_partition_shape,
    doc="Splits the slices of `data` into num_partitions outputs by the value of `partitions`.",
)


def _dynamic_stitch_shape(op):
    n = op.attrs["N"]
    indices, data = op._inputs[:n], op._inputs[n:]
    rest = unknown_shape()
    biggest = -1
    for k, (ix, dx) in enumerate(zip(indices, data)):
        if ix.shape.rank is not None and dx.shape.rank is not None:
            d = dx.shape.with_rank_at_least(ix.shape.rank)
            _merge(d[: ix.shape.rank], ix.shape, f"data[{k}]'s leading dims and indices[{k}]")
            rest = _merge(rest, d[ix.shape.rank :], f"the slice shapes of data[0..{k}]")
        value = constant_value(ix)
        if biggest is not None and value is not None:
            biggest = max([biggest, *_ints(value)])
        else:
            biggest = None
    first = None if biggest is None else biggest + 1
    return TensorShape([first]).concatenate(rest)


defop(
    "DynamicStitch",
    inputs=["indices: N * int32", "data: N * T"],
    outputs=["merged: T"],
    attrs=["N: int >= 1", "T: type"],
    shape=_dynamic_stitch_shape,
    doc="merged[indices[m][i]] = data[m][i]; where indices repeat, the later one wins.",
)

defop(
    "Where",
    inputs=["input: T"],
    outputs=["index: int64"],
    attrs=[
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, bfloat16, uint16, "
        "complex128, half, uint32, uint64, bool} = bool"
    ],
    shape=lambda op: TensorShape([None, op._inputs[0].shape.rank]),
    doc="The coordinates of the true (non-zero) elements, in row-major order.",
)


def _unique_shape(op):
    x = op._inputs[0].shape.with_rank(1)
    return [TensorShape([None]), x]


defop(
    "Unique",
    inputs=["x: T"],
    outputs=["y: T", "idx: out_idx"],
    attrs=["T: type", "out_idx: {int32, int64} = int32"],
    shape=_unique_shape,
    doc="The distinct values of a vector in order of first occurrence, and each one's index.",
)


def _top_k_shape(op):
    x = op._inputs[0].shape.with_rank_at_least(1)
    op._inputs[1].shape.with_rank(0)
    k = constant_value(op._inputs[1])
    if k is not None:
        k = int(k)
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if x.rank is not None and x.dims[-1] is not None and x.dims[-1] < k:
            raise ValueError(
                f"input of shape {x} has fewer than k={k} entries in its last dimension"
            )
    if x.rank is None:
        return [unknown_shape()] * 2
    out = TensorShape(x.dims[:-1] + (k,))
    return [out, out]


defop(
    "TopKV2",
    inputs=["input: T", "k: Tk"],
    outputs=["values: T", "indices: index_type"],
    attrs=[
        "sorted: bool = true",
        "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
        "uint64}",
        "Tk: {int16, int32, int64} = int32",
        "index_type: {int16, int32, int64} = int32",
    ],
    shape=_top_k_shape,
    doc="The k largest entries of each last-dimension row, and their indices (ties: lower "
    "index first).",
)

# -- builders --------------------------------------------------------------------------------


def _create(op_type: str, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name)


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims: int = 0):
    """Slices of `params` along `axis` (default: batch_dims) at `indices`.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     gather(rg.placeholder(rg.float32, [5, 7]), [[0, 2]], axis=1).shape
    TensorShape([5, 1, 2])
    """
    del validate_indices  # indices are always validated on CPU, as in TensorFlow
    if axis is None:
        axis = batch_dims
    op = _create(
        "GatherV2",
        [params, index_value(indices), axis],
        {"batch_dims": batch_dims},
        name or "GatherV2",
    )
    return op.outputs[0]


def gather_nd(params, indices, name: str | None = None, batch_dims: int = 0) -> Tensor:
    """Slices of `params` at the index tuples in the last dimension of `indices`; with
    `batch_dims` b, the first b dimensions of both are batch dimensions: each batch entry's
    tuples index its own slice of params (as TensorFlow does it, by putting each tuple's batch
    coordinates before it and gathering once).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     gather_nd(rg.placeholder(rg.float32, [2, 4, 3]), [[1], [3]], batch_dims=1).shape
    TensorShape([2, 3])
    """
    if not isinstance(batch_dims, int | np.integer) or batch_dims < 0:
        raise ValueError(f"gather_nd: batch_dims must be a non-negative int, got {batch_dims!r}")
    if batch_dims == 0:
        op = _create("GatherNd", [params, index_value(indices)], name=name or "GatherNd")
        return op.outputs[0]
    from rill.graph.ops import array_ops, math_ops, reshape_ops

    g = get_default_graph()
    with g.name_scope(name or "GatherNd"):
        params = convert_to_tensor(params)
        indices = convert_to_tensor(index_value(indices))
        rank = indices.shape.rank
        if rank is None:
            raise ValueError("gather_nd: batch_dims needs the rank of indices known")
        if batch_dims >= rank:
            raise ValueError(
                f"gather_nd: batch_dims ({batch_dims}) must be less than the rank of indices "
                f"({rank})"
            )
        if params.shape.rank is not None and batch_dims >= params.shape.rank:
            raise ValueError(
                f"gather_nd: batch_dims ({batch_dims}) must be less than the rank of params "
                f"({params.shape.rank})"
            )
        lead = array_ops.shape(indices, out_type=indices.dtype)[:-1]  # batch and tuple dims
        pshape = array_ops.shape(params, out_type=indices.dtype)
        coords = []
        for i in range(batch_dims):
            # The i-th batch coordinate of every tuple: a range along dimension i, broadcast.
            along = [1] * (rank - 1)
            along[i] = -1
            r = reshape_ops.reshape(math_ops.range(0, pshape[i], dtype=indices.dtype), along)
            coords.append(reshape_ops.expand_dims(array_ops.broadcast_to(r, lead), -1))
        full = reshape_ops.concat([*coords, indices], axis=-1)
        return _create("GatherNd", [params, full], name="GatherNd").outputs[0]


def scatter_nd(indices, updates, shape, name: str | None = None) -> Tensor:
    """Zeros of shape `shape` with `updates` summed in at `indices`."""
    return _create(
        "ScatterNd", [index_value(indices), updates, index_value(shape)], name=name or "ScatterNd"
    ).outputs[0]


def _value_dtype(v) -> dtypes.DType:
    if isinstance(v, Tensor):
        return v.dtype
    arr = np.asarray(v)
    if isinstance(v, np.ndarray | np.generic):
        return dtypes.as_dtype(arr.dtype)
    kind = arr.dtype.kind
    return {"f": dtypes.float32, "b": dtypes.bool_, "c": dtypes.complex64}.get(kind, dtypes.int32)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot vectors: on_value (default 1) where the new `axis` (default last) equals
    indices, off_value (default 0) elsewhere; dtype defaults to on/off_value's, else float32.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     y = one_hot(rg.placeholder(rg.int32, [4]), 3)
    ...     y.shape, y.dtype
    (TensorShape([4, 3]), rill.float32)
    """
    on_dtype = None if on_value is None else _value_dtype(on_value)
    off_dtype = None if off_value is None else _value_dtype(off_value)
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
        for what, got in (("on_value", on_dtype), ("off_value", off_dtype)):
            if got is not None and got is not dtype:
                raise TypeError(f"dtype {got.name} of {what} does not match dtype {dtype.name}")
    elif on_dtype is not None and off_dtype is not None and on_dtype is not off_dtype:
        raise TypeError(f"on_value is {on_dtype.name} but off_value is {off_dtype.name}")
    dtype = dtype or on_dtype or off_dtype or dtypes.float32
    g = get_default_graph()
    with g.name_scope(name or "one_hot") as scope:
        on = convert_to_tensor(1 if on_value is None else on_value, dtype, name="on_value")
        off = convert_to_tensor(0 if off_value is None else off_value, dtype, name="off_value")
        attrs = {"axis": -1 if axis is None else axis}
        return _create("OneHot", [indices, depth, on, off], attrs, scope).outputs[0]


def dynamic_partition(data, partitions, num_partitions: int, name=None) -> list[Tensor]:
    """Splits the slices of `data` by `partitions` into num_partitions tensors."""
    attrs = {"num_partitions": num_partitions}
    return _create(
        "DynamicPartition", [data, partitions], attrs, name or "DynamicPartition"
    ).outputs


def dynamic_stitch(indices, data, name: str | None = None) -> Tensor:
    """merged[indices[m][...]] = data[m][...], the inverse of dynamic_partition."""
    return _create(
        "DynamicStitch", [list(indices), list(data)], name=name or "DynamicStitch"
    ).outputs[0]


def where(condition, x=None, y=None, name: str | None = None) -> Tensor:
    """With one argument, the int64 coordinates of the true elements of `condition` (Where);
    with `x` and `y`, elements of `x` where `condition` holds and of `y` elsewhere (SelectV2).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     where(rg.placeholder(rg.bool_, [3, 4])).shape
    TensorShape([None, 2])
    """
    if x is None and y is None:
        return _create("Where", [condition], name=name or "Where").outputs[0]
    if x is None or y is None:
        raise ValueError("x and y must both be given or both be None")
    from rill.graph.ops import math_ops

    select_v2 = getattr(math_ops, "select_v2", None)
    if select_v2 is None:
        raise NotImplementedError("where(condition, x, y) needs math_ops.select_v2")
    return select_v2(condition, x, y, name=name)


class UniqueOutput(NamedTuple):
    y: Tensor
    idx: Tensor


def unique(x, out_idx=dtypes.int32, name: str | None = None) -> UniqueOutput:
    """The distinct values of vector `x` in order of first occurrence, and for each element of
    `x` the index of its value in `y`."""
    op = _create("Unique", [x], {"out_idx": dtypes.as_dtype(out_idx)}, name or "Unique")
    return UniqueOutput(op.outputs[0], op.outputs[1])


class TopKOutput(NamedTuple):
    values: Tensor
    indices: Tensor


def top_k(input, k=1, sorted: bool = True, index_type=dtypes.int32, name=None) -> TopKOutput:
    """The k largest entries along the last dimension, and their indices.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     top_k(rg.placeholder(rg.float32, [None, 10]), 3).values.shape
    TensorShape([None, 3])
    """
    attrs = {"sorted": sorted, "index_type": dtypes.as_dtype(index_type)}
    op = _create("TopKV2", [input, k], attrs, name or "TopKV2")
    return TopKOutput(op.outputs[0], op.outputs[1])
