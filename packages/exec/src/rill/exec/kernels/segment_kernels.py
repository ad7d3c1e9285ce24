"""Kernels for rill.graph.ops.segment_ops: segment reductions (np.ufunc.at into initialized
rows), N-d scatters into a copy of a tensor, and N-d scatter/gather on resource variables.
Bad ids and indices are InvalidArgumentError naming the offending position."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.state_kernels import lookup_var
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape

_UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


class _BF16Info:
    max = 3.3895313892515355e38  # bfloat16's largest finite value (numpy has no finfo for it)
    min = -max


def _finfo(dtype):
    try:
        return np.finfo(dtype)
    except ValueError:
        return _BF16Info


def _identity(kind: str, dtype: np.dtype):
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    # TensorFlow's numeric_limits<T>::lowest() / max(): finite, not ±inf.
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else _finfo(dtype)
    return info.min if kind == "max" else info.max


def _reduce(kind: str, data: np.ndarray, ids: np.ndarray, rows: int) -> np.ndarray:
    out = np.full((rows, *data.shape[ids.ndim :]), _identity(kind, data.dtype), dtype=data.dtype)
    keep = ids >= 0
    flat_ids = ids[keep]
    _UFUNC[kind].at(out, flat_ids, data[keep])
    return out


def _segment_factory(kind: str):
    def factory(T, Tindices):
        def compute(data, ids):
            if ids.ndim != 1 or data.ndim < 1 or ids.shape[0] != data.shape[0]:
                raise InvalidArgumentError(
                    f"segment_ids should be a vector of the size of data's first dimension: "
                    f"{TensorShape(ids.shape)} vs {TensorShape(data.shape)}"
                )
            if ids.size and ids[0] < 0:
                raise InvalidArgumentError(f"segment id {int(ids[0])} is negative")
            if ids.size and (np.diff(ids) < 0).any():
                i = int(np.argmax(np.diff(ids) < 0)) + 1
                raise InvalidArgumentError(
                    f"segment ids are not increasing: segment_ids[{i}] = {int(ids[i])} after "
                    f"{int(ids[i - 1])}"
                )
            rows = int(ids[-1]) + 1 if ids.size else 0
            base = "sum" if kind == "mean" else kind
            out = _reduce(base, data, ids, rows)
            counts = np.bincount(ids, minlength=rows)
            empty = counts == 0
            if kind == "mean":
                shape = (rows,) + (1,) * (data.ndim - 1)
                denom = np.maximum(counts, 1).reshape(shape).astype(data.dtype)
                if np.issubdtype(data.dtype, np.integer):  # C's division: toward zero
                    out = (np.sign(out) * (np.abs(out) // denom)).astype(data.dtype)
                else:
                    out = (out / denom).astype(data.dtype)
            if empty.any() and kind != "prod":
                out[empty] = 0  # TensorFlow: 0 for an empty segment, 1 for a product
            return out

        return compute

    return factory


for _op, _kind in (
    ("SegmentSum", "sum"),
    ("SegmentMean", "mean"),
    ("SegmentMax", "max"),
    ("SegmentMin", "min"),
    ("SegmentProd", "prod"),
):
    register_kernel(_op)(_segment_factory(_kind))


def _unsorted_factory(kind: str):
    def factory(T, Tindices, Tnumsegments):
        def compute(data, ids, num_segments):
            n = int(num_segments)
            if n < 0:
                raise InvalidArgumentError(f"num_segments must be >= 0, got {n}")
            if data.shape[: ids.ndim] != ids.shape:
                raise InvalidArgumentError(
                    f"data.shape = {TensorShape(data.shape)} does not start with "
                    f"segment_ids.shape = {TensorShape(ids.shape)}"
                )
            if ids.size and ids.max() >= n:
                pos = tuple(int(i) for i in np.argwhere(ids >= n)[0])
                raise InvalidArgumentError(
                    f"segment_ids[{','.join(map(str, pos))}] = {int(ids[pos])} is out of range "
                    f"[0, {n})"
                )
            return _reduce(kind, data, ids, n)

        return compute

    return factory


for _op, _kind in (
    ("UnsortedSegmentMax", "max"),
    ("UnsortedSegmentMin", "min"),
    ("UnsortedSegmentProd", "prod"),
):
    register_kernel(_op)(_unsorted_factory(_kind))


def _nd_index(target_shape, indices, updates, what: str):
    """The per-dimension index arrays of `indices` ([..., K]) and `updates` reshaped to one row
    per index; InvalidArgumentError for a bad shape or an index out of range."""
    if indices.ndim == 0:
        raise InvalidArgumentError("indices must have rank >= 1")
    k = indices.shape[-1]
    if k > len(target_shape):
        raise InvalidArgumentError(
            f"indices.shape[-1] = {k} exceeds the rank of {what} ({len(target_shape)})"
        )
    want = (*indices.shape[:-1], *target_shape[k:])
    if updates.shape != want:
        raise InvalidArgumentError(
            f"updates must have shape indices.shape[:-1] + {what}.shape[K:] = "
            f"{TensorShape(want)}, got {TensorShape(updates.shape)}"
        )
    idx = indices.reshape(-1, k).astype(np.int64)
    for d in range(k):
        bad = (idx[:, d] < 0) | (idx[:, d] >= target_shape[d])
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"indices[{i}] = {idx[i].tolist()} does not index into shape "
                f"{TensorShape(target_shape)} ({what})"
            )
    where = tuple(idx[:, d] for d in range(k))
    return where, updates.reshape(idx.shape[0], *target_shape[k:])


_SCATTER = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}


def _apply(mode: str, out: np.ndarray, where, ups) -> np.ndarray:
    if mode == "update":
        out[where] = ups  # duplicates: the last one wins
    else:
        _SCATTER[mode].at(out, where, ups)
    return out


def _tensor_scatter_factory(mode: str):
    def factory(T, Tindices, bad_indices_policy):
        def compute(tensor, indices, updates):
            where, ups = _nd_index(tensor.shape, indices, updates, "tensor")
            return _apply(mode, tensor.copy(), where, ups)

        return compute

    return factory


for _op, _mode in (
    ("TensorScatterUpdate", "update"),
    ("TensorScatterAdd", "add"),
    ("TensorScatterSub", "sub"),
    ("TensorScatterMax", "max"),
    ("TensorScatterMin", "min"),
):
    register_kernel(_op)(_tensor_scatter_factory(_mode))


def _resource_scatter_factory(mode: str):
    def factory(T, Tindices, use_locking, bad_indices_policy):
        def compute(ctx, h, indices, updates):
            var = lookup_var(ctx, h)
            if updates.dtype != var.dtype.np:
                raise InvalidArgumentError(
                    f"updates have dtype {updates.dtype}, variable {var.name!r} holds "
                    f"{var.dtype.name}"
                )

            def apply(old):
                where, ups = _nd_index(old.shape, indices, updates, f"variable {var.name!r}")
                return _apply(mode, old.copy(), where, ups)

            var.update(apply)

        return compute

    return factory


for _op, _mode in (
    ("ResourceScatterNdUpdate", "update"),
    ("ResourceScatterNdAdd", "add"),
    ("ResourceScatterNdSub", "sub"),
):
    register_kernel(_op, context=True)(_resource_scatter_factory(_mode))


@register_kernel("ResourceGatherNd", context=True)
def resource_gather_nd(dtype, Tindices):
    def compute(ctx, h, indices):
        var = lookup_var(ctx, h)
        params = var.read()
        if indices.ndim == 0 or indices.shape[-1] > params.ndim:
            raise InvalidArgumentError(
                f"indices of shape {TensorShape(indices.shape)} cannot index variable "
                f"{var.name!r} of shape {TensorShape(params.shape)}"
            )
        k = indices.shape[-1]
        dummy = np.empty((*indices.shape[:-1], *params.shape[k:]), params.dtype)
        where, _ = _nd_index(params.shape, indices, dummy, f"variable {var.name!r}")
        return params[where].reshape(dummy.shape)

    return compute
