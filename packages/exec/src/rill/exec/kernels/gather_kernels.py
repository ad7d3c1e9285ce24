"""Kernels for rill.graph.ops.gather_ops: GatherV2, GatherNd, ScatterNd, OneHot,
DynamicPartition, DynamicStitch, Where, Unique, TopKV2.

Indices are always checked (TensorFlow checks them on CPU); an out-of-range index raises
InvalidArgumentError naming its position and value.
"""

from __future__ import annotations

import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.array_kernels import fmt_shape, host_ints, outputs, scalar_arg, zeros
from rill.exec.kernels.jit import loops
from rill.graph.errors import InvalidArgumentError

_BOTH = ("CPU", "GPU")


def _position(flat: int, shape: tuple) -> str:
    if len(shape) <= 1:
        return str(flat)
    return ",".join(str(int(i)) for i in np.unravel_index(flat, shape))


def _count(shape) -> int:
    return math.prod(int(d) for d in shape)


def _first_bad(xp, bad) -> int | None:
    """The flat position of the first True in `bad`, or None."""
    if bad.size == 0 or not bool(bad.any()):
        return None
    return int(xp.argmax(bad.reshape(-1)))


@register_kernel("GatherV2", devices=_BOTH)
def gather_v2(batch_dims, xp):
    def compute(params, indices, axis):
        pr, ir = params.ndim, indices.ndim
        a = scalar_arg(axis, "axis")
        if not -pr <= a < pr:
            raise InvalidArgumentError(
                f"axis {a} is out of range [{-pr}, {pr}) for params of shape "
                f"{fmt_shape(params.shape)}"
            )
        a %= pr
        bd = batch_dims
        if not -ir <= bd <= ir:
            raise InvalidArgumentError(f"batch_dims {bd} is out of range [{-ir}, {ir}]")
        if bd < 0:
            bd += ir
        if bd > a:
            raise InvalidArgumentError(f"batch_dims ({bd}) must be at most axis ({a})")
        if bd >= pr:
            raise InvalidArgumentError(f"batch_dims ({bd}) must be less than rank(params) ({pr})")
        for i in range(bd):
            if params.shape[i] != indices.shape[i]:
                raise InvalidArgumentError(
                    f"params.shape[{i}] = {params.shape[i]} must equal indices.shape[{i}] = "
                    f"{indices.shape[i]} (batch_dims={bd})"
                )
        out_shape = params.shape[:a] + indices.shape[bd:] + params.shape[a + 1 :]
        if _count(out_shape) == 0:
            # Nothing is read, so TensorFlow checks no index either.
            return zeros(xp, out_shape, params.dtype)
        limit = params.shape[a]
        # Two reductions find whether any index is out of range (no temporaries); the mask
        # that names the first one is made only then.
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= limit):
            bad = _first_bad(xp, (indices < 0) | (indices >= limit))
            v = int(indices.reshape(-1)[bad])
            raise InvalidArgumentError(
                f"indices[{_position(bad, indices.shape)}] = {v} is not in [0, {limit})"
            )
        if bd == 0:
            if xp is np and indices.dtype.kind in "iu":
                return np.take(params, indices, axis=a)
            return xp.take(params, indices.astype(np.int64), axis=a)
        batch = params.shape[:bd]
        b = int(np.prod(batch, dtype=np.int64))
        n = int(np.prod(indices.shape[bd:], dtype=np.int64))
        p = params.reshape((b,) + params.shape[bd:])
        idx = indices.reshape(b, n).astype(np.int64)
        # Bring the gathered axis next to the batch axis, gather per batch row, then put the
        # gathered positions where the axis was.
        p = xp.moveaxis(p, a - bd + 1, 1)
        got = p[xp.arange(b)[:, None], idx]  # (b, n, pre..., post...)
        pre = params.shape[bd:a]
        return xp.moveaxis(got, 1, 1 + len(pre)).reshape(out_shape)

    return compute


def _nd_indices(xp, indices, shape):
    """Indices as (N, r) int64, the mask of rows inside `shape`, and the first bad row."""
    r = indices.shape[-1]
    flat = indices.reshape(-1, r).astype(np.int64)
    limits = xp.asarray(list(shape[:r]), dtype=np.int64)
    ok = ((flat >= 0) & (flat < limits)).all(axis=1)
    return flat, ok, _first_bad(xp, ~ok)


@register_kernel("GatherNd", devices=_BOTH)
def gather_nd(bad_indices_policy, xp):
    if bad_indices_policy not in ("", "DEFAULT", "ERROR", "IGNORE"):
        raise InvalidArgumentError(f"unknown bad_indices_policy {bad_indices_policy!r}")
    ignore = bad_indices_policy == "IGNORE"

    def compute(params, indices):
        if indices.ndim < 1:
            raise InvalidArgumentError("indices must be at least a vector")
        r = indices.shape[-1]
        if r > params.ndim:
            raise InvalidArgumentError(
                f"the innermost dimension of indices ({r}) must be <= the rank of params "
                f"({params.ndim})"
            )
        out_shape = indices.shape[:-1] + params.shape[r:]
        if params.size == 0 and _count(indices.shape[:-1]) > 0 and not ignore:
            raise InvalidArgumentError(
                f"indices ask for slices of params, but params is empty (shape "
                f"{fmt_shape(params.shape)})"
            )
        if r == 0:
            return xp.broadcast_to(params, out_shape).copy()
        flat, ok, bad = _nd_indices(xp, indices, params.shape)
        if bad is not None and not ignore:
            raise InvalidArgumentError(
                f"indices[{bad}] = {host_ints(flat[bad])} does not index into param shape "
                f"{fmt_shape(params.shape)}"
            )
        if bad is not None:
            out = zeros(xp, (flat.shape[0],) + params.shape[r:], params.dtype)
            good = flat[ok]
            out[ok] = params[tuple(good[:, j] for j in range(r))]
            return out.reshape(out_shape)
        return params[tuple(flat[:, j] for j in range(r))].reshape(out_shape)

    return compute


@register_kernel("ScatterNd")
def scatter_nd(bad_indices_policy, xp):
    if bad_indices_policy not in ("", "DEFAULT", "ERROR", "IGNORE"):
        raise InvalidArgumentError(f"unknown bad_indices_policy {bad_indices_policy!r}")
    ignore = bad_indices_policy == "IGNORE"

    def compute(indices, updates, shape):
        dims = tuple(host_ints(shape))
        if shape.ndim != 1 or any(d < 0 for d in dims):
            raise InvalidArgumentError(f"shape must be a vector of sizes >= 0, got {list(dims)}")
        if indices.ndim < 1:
            raise InvalidArgumentError("indices must be at least a vector")
        r = indices.shape[-1]
        if r > len(dims):
            raise InvalidArgumentError(
                f"the innermost dimension of indices ({r}) must be <= the rank of shape "
                f"({len(dims)})"
            )
        want = indices.shape[:-1] + dims[r:]
        # TensorFlow's kernel also reads 1-D indices as len(indices) one-element tuples, and
        # needs updates to fit both readings (so 1-D indices almost never work there).
        if (
            updates.ndim == 0
            or updates.shape != want
            or (indices.ndim == 1 and updates.shape != indices.shape + dims[1:])
        ):
            raise InvalidArgumentError(
                f"updates has shape {fmt_shape(updates.shape)} but indices of shape "
                f"{fmt_shape(indices.shape)} into shape {fmt_shape(dims)} need updates of shape "
                f"{fmt_shape(want)}"
            )
        out = zeros(xp, dims, updates.dtype)
        if out.size == 0:
            if updates.size or (indices.size and not ignore):
                raise InvalidArgumentError(
                    f"indices and updates given for an empty output of shape {fmt_shape(dims)}"
                )
            return out
        if r == 0:
            vals = updates.reshape((_count(indices.shape[:-1]),) + dims)
            if out.dtype.kind == "b":
                return vals.any(axis=0)
            return vals.sum(axis=0, dtype=out.dtype) if vals.shape[0] else out
        flat, ok, bad = _nd_indices(xp, indices, dims)
        vals = updates.reshape((flat.shape[0],) + dims[r:])
        if bad is not None:
            if not ignore:
                raise InvalidArgumentError(
                    f"indices[{bad}] = {host_ints(flat[bad])} does not index into shape "
                    f"{fmt_shape(dims)}"
                )
            flat, vals = flat[ok], vals[ok]
        target = tuple(flat[:, j] for j in range(r))
        if out.dtype.kind == "b":
            np.logical_or.at(out, target, vals)
        elif out.dtype.kind in "fciu" and out.dtype.type.__module__ == "numpy":
            np.add.at(out, target, vals)
        else:
            # bfloat16 and strings have no ufunc.at loop: accumulate one update at a time.
            for k in range(flat.shape[0]):
                pos = tuple(int(c[k]) for c in target)
                out[pos] = out[pos] + vals[k]
        return out

    return compute


@register_kernel("OneHot", devices=_BOTH)
def one_hot(axis, xp):
    def compute(indices, depth, on_value, off_value):
        d = scalar_arg(depth, "depth")
        if d < 0:
            raise InvalidArgumentError(f"depth must be >= 0, got {d}")
        r = indices.ndim + 1
        if axis != -1 and not 0 <= axis < r:
            raise InvalidArgumentError(f"axis must be -1 or in [0, {r}), got {axis}")
        for name, v in (("on_value", on_value), ("off_value", off_value)):
            if v.ndim != 0:
                raise InvalidArgumentError(f"{name} must be a scalar, got {fmt_shape(v.shape)}")
        hot = indices.astype(np.int64)[..., None] == xp.arange(d, dtype=np.int64)
        out = xp.where(hot, on_value, off_value)
        return out if axis == -1 else xp.moveaxis(out, -1, axis).copy()

    return compute


@register_kernel("DynamicPartition", devices=_BOTH)
def dynamic_partition(num_partitions, xp):
    def bad_partition(partitions, bad):
        v = int(partitions.reshape(-1)[bad])
        return InvalidArgumentError(
            f"partitions[{_position(bad, partitions.shape)}] = {v} is not in [0, {num_partitions})"
        )

    def compute(data, partitions):
        pr = partitions.ndim
        if data.shape[:pr] != partitions.shape:
            raise InvalidArgumentError(
                f"data.shape must start with partitions.shape, got data.shape = "
                f"{fmt_shape(data.shape)}, partitions.shape = {fmt_shape(partitions.shape)}"
            )
        flat = data.reshape((_count(partitions.shape),) + data.shape[pr:])
        p = partitions.reshape(-1)
        lp = loops() if xp is np and p.dtype.kind in "iu" and p.size else None
        if lp is not None:
            # One compiled counting sort (which also finds a bad number) instead of a mask per
            # partition; each output is its own array, in the original order within its
            # partition.
            order = np.empty(p.size, np.int64)
            counts = np.zeros(num_partitions, np.int64)
            bad = lp.partition_order(np.ascontiguousarray(p), num_partitions, order, counts)
            if bad >= 0:
                raise bad_partition(partitions, bad)
            parts, start = [], 0
            for c in counts.tolist():
                parts.append(flat.take(order[start : start + c], axis=0))
                start += c
            return outputs(parts)
        bad = _first_bad(xp, (partitions < 0) | (partitions >= num_partitions))
        if bad is not None:
            raise bad_partition(partitions, bad)
        return outputs(flat[p == i] for i in range(num_partitions))

    return compute


@register_kernel("DynamicStitch")
def dynamic_stitch(N, xp):
    def compute(*args):
        indices, data = args[:N], args[N:]
        rest = None
        for m, (ix, dx) in enumerate(zip(indices, data)):
            if dx.shape[: ix.ndim] != ix.shape:
                raise InvalidArgumentError(
                    f"data[{m}].shape = {fmt_shape(dx.shape)} does not start with "
                    f"indices[{m}].shape = {fmt_shape(ix.shape)}"
                )
            tail = dx.shape[ix.ndim :]
            if rest is None:
                rest = tail
            elif tail != rest:
                raise InvalidArgumentError(
                    f"data[{m}].shape = {fmt_shape(dx.shape)} has slices of shape "
                    f"{fmt_shape(tail)}; data[0]'s slices have shape {fmt_shape(rest)}"
                )
        flat_idx = xp.concatenate([ix.reshape(-1) for ix in indices]).astype(np.int64)
        if flat_idx.size and int(flat_idx.min()) < 0:
            for m, ix in enumerate(indices):
                bad = _first_bad(xp, ix < 0)
                if bad is not None:
                    raise InvalidArgumentError(
                        f"indices[{m}][{_position(bad, ix.shape)}] = {int(ix.reshape(-1)[bad])} "
                        "is out of range (must be >= 0)"
                    )
        size = int(flat_idx.max()) + 1 if flat_idx.size else 0
        lp = loops() if xp is np and flat_idx.size else None
        if lp is not None:
            distinct = lp.all_distinct(flat_idx, size)
        else:
            distinct = flat_idx.size and int(xp.bincount(flat_idx, minlength=size).max()) == 1
        if distinct:
            # Every index once (the stitch of a partition): each input goes straight to its rows
            # (which cover every row when there are `size` indices: nothing to zero first).
            full = xp is np and flat_idx.size == size
            out = np.empty((size,) + rest, data[0].dtype) if full else zeros(
                xp, (size,) + rest, data[0].dtype)  # fmt: skip
            for ix, dx in zip(indices, data):
                out[ix.reshape(-1)] = dx.reshape((ix.size,) + rest)
            return out
        out = zeros(xp, (size,) + rest, data[0].dtype)
        flat_data = xp.concatenate([dx.reshape((ix.size,) + rest) for ix, dx in zip(indices, data)])
        if flat_idx.size:
            # Where an index repeats the later slice wins: keep each index's last occurrence.
            rev = flat_idx[::-1]
            uniq, first_in_rev = np.unique(rev, return_index=True)
            out[uniq] = flat_data[flat_idx.size - 1 - first_in_rev]
        return out

    return compute


@register_kernel("Where", devices=_BOTH)
def where(xp):
    def compute(x):
        if x.ndim == 0:
            raise InvalidArgumentError("Where needs an input of rank >= 1, got a scalar")
        nz = x if x.dtype == np.bool_ else x != 0
        return xp.argwhere(nz).astype(np.int64)

    return compute


@register_kernel("Unique", expensive=True)
def unique(out_idx):
    idx_dt = out_idx.np

    def compute(x):
        if x.ndim != 1:
            raise InvalidArgumentError(f"unique expects a vector, got shape {fmt_shape(x.shape)}")
        if x.size == 0:
            return x.copy(), np.zeros([0], idx_dt)
        lp = loops() if x.dtype.kind in "iu" and x.dtype.itemsize <= 8 else None
        if lp is not None:
            # First appearances through a compiled hash table: no sort.
            uniq = np.empty_like(x)
            inv = np.empty(x.size, idx_dt)
            m = lp.unique_ints(np.ascontiguousarray(x), uniq, inv)
            return (uniq if m == x.size else uniq[:m].copy()), inv
        kw = {"equal_nan": False} if x.dtype.kind in "fc" else {}
        _, first, inverse = np.unique(x, return_index=True, return_inverse=True, **kw)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return x[first[order]], rank[inverse.reshape(-1)].astype(idx_dt)

    return compute


@register_kernel("TopKV2", expensive=True)
def top_k_v2(sorted, index_type):
    del sorted  # unsorted order is unspecified in TensorFlow; both come back sorted here
    idx_dt = index_type.np

    def compute(x, k):
        kk = scalar_arg(k, "k")
        if kk < 0:
            raise InvalidArgumentError(f"k must be >= 0, got {kk}")
        if x.ndim < 1:
            raise InvalidArgumentError(f"input must be at least a vector, got shape {x.shape}")
        n = x.shape[-1]
        if n < kk:
            raise InvalidArgumentError(f"input has {n} entries in its last dimension, needs k={kk}")
        # A stable ascending sort of the reversed rows, read backwards, is descending with ties
        # in ascending index order (and NaN first, as numpy sorts NaN last).
        asc = np.argsort(x[..., ::-1], axis=-1, kind="stable")
        idx = (n - 1 - asc[..., ::-1])[..., :kk]
        return np.take_along_axis(x, idx, axis=-1), idx.astype(idx_dt)

    return compute
