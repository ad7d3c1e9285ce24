"""Kernels for rill.graph.ops.set_search_ops and rill.graph.ops.image_ops."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


@register_kernel("Bucketize")
def bucketize(T, boundaries):
    bounds = np.asarray(boundaries, dtype=np.float64)
    if (np.diff(bounds) < 0).any():
        raise InvalidArgumentError(f"Expected sorted boundaries, got {list(boundaries)}")

    def compute(x):
        return np.searchsorted(bounds, x.astype(np.float64), side="right").astype(np.int32)

    return compute


def _bound(side: str):
    def factory(T, out_type):
        def compute(sorted_inputs, values):
            if sorted_inputs.shape[:-1] != values.shape[:-1]:
                raise InvalidArgumentError(
                    f"Leading dim_size of both tensors must match: {TensorShape(sorted_inputs.shape)}"
                    f" vs {TensorShape(values.shape)}"
                )
            s = sorted_inputs.reshape(-1, sorted_inputs.shape[-1])
            v = values.reshape(-1, values.shape[-1])
            out = np.stack([np.searchsorted(a, b, side=side) for a, b in zip(s, v)]) if len(s) \
                else np.zeros(v.shape, np.int64)  # fmt: skip
            return out.reshape(values.shape).astype(out_type.np)

        return compute

    return factory


register_kernel("UpperBound")(_bound("right"))
register_kernel("LowerBound")(_bound("left"))


@register_kernel("ListDiff")
def list_diff(T, out_idx):
    def compute(x, y):
        if x.ndim != 1 or y.ndim != 1:
            raise InvalidArgumentError("x and y must be vectors")
        keep = ~np.isin(x, y) if x.dtype != object else np.array([v not in set(y) for v in x])
        where = np.nonzero(keep)[0]
        return x[where], where.astype(out_idx.np)

    return compute


@register_kernel("UniqueWithCounts")
def unique_with_counts(T, out_idx):
    def compute(x):
        if x.ndim != 1:
            raise InvalidArgumentError(f"x must be a vector, got {TensorShape(x.shape)}")
        first = {}
        idx = np.empty(x.shape[0], dtype=out_idx.np)
        for i, v in enumerate(x.tolist()):
            idx[i] = first.setdefault(v, len(first))
        order = np.zeros(len(first), dtype=np.int64)
        for i in range(x.shape[0] - 1, -1, -1):
            order[idx[i]] = i
        counts = np.bincount(idx, minlength=len(first)).astype(out_idx.np)
        return x[order], idx, counts

    return compute


@register_kernel("Bincount")
def bincount(T):
    def compute(arr, size, weights):
        n = int(size)
        if n < 0:
            raise InvalidArgumentError(f"size ({n}) must be non-negative")
        if (arr < 0).any():
            raise InvalidArgumentError("Input arr must be non-negative!")
        flat = arr.reshape(-1)
        keep = flat < n
        if weights.size == 0:
            return np.bincount(flat[keep], minlength=n)[:n].astype(T.np)
        if weights.shape != arr.shape:
            raise InvalidArgumentError(
                f"weights must be empty or have arr's shape {TensorShape(arr.shape)}, got "
                f"{TensorShape(weights.shape)}"
            )
        w = weights.reshape(-1)[keep]
        out = np.zeros(n, dtype=np.float64 if T.is_floating else np.int64)
        np.add.at(out, flat[keep], w)
        return out.astype(T.np)

    return compute


@register_kernel("DenseBincount")
def dense_bincount(Tidx, T, binary_output):
    def row(values, weights, n):
        keep = values < n
        out = np.zeros(n, dtype=np.float64 if T.is_floating else np.int64)
        w = 1 if weights.size == 0 else weights[keep]
        np.add.at(out, values[keep], w)
        if binary_output:
            out = (out != 0).astype(out.dtype)
        return out

    def compute(x, size, weights):
        n = int(size)
        if n < 0:
            raise InvalidArgumentError(f"size ({n}) must be non-negative")
        if (x < 0).any():
            raise InvalidArgumentError("Input must be non-negative")
        if weights.size and weights.shape != x.shape:
            raise InvalidArgumentError("weights must be empty or have the input's shape")
        if x.ndim == 1:
            return row(x, weights, n).astype(T.np)
        if x.ndim != 2:
            raise InvalidArgumentError(f"input must be 1-D or 2-D, got {TensorShape(x.shape)}")
        rows = [row(x[i], weights[i] if weights.size else weights, n) for i in range(x.shape[0])]
        return np.stack(rows).astype(T.np) if rows else np.zeros((0, n), T.np)

    return compute


@register_kernel("HistogramFixedWidth")
def histogram_fixed_width(T, dtype):
    def compute(values, value_range, nbins):
        n = int(nbins)
        if n <= 0:
            raise InvalidArgumentError(f"nbins should be a positive number, but got '{n}'")
        lo, hi = (float(v) for v in value_range.reshape(-1)[:2])
        if not lo < hi:
            raise InvalidArgumentError(f"Invalid value range: [{lo}, {hi}]")
        v = values.reshape(-1).astype(np.float64)
        idx = np.floor((v - lo) / (hi - lo) * n)
        idx = np.clip(idx, 0, n - 1).astype(np.int64)
        return np.bincount(idx, minlength=n).astype(dtype.np)

    return compute


# -- image_ops ------------------------------------------------------------------------------------


def _nhwc(x, fmt):
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must have rank 4, got {TensorShape(x.shape)}")
    if fmt == "NCHW_VECT_C":
        raise InvalidArgumentError("data_format NCHW_VECT_C is not supported")
    return x if fmt == "NHWC" else np.transpose(x, (0, 2, 3, 1))


def _back(y, fmt):
    return y if fmt == "NHWC" else np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2)))


@register_kernel("SpaceToDepth")
def space_to_depth(T, block_size, data_format):
    b = block_size

    def compute(x):
        x = _nhwc(x, data_format)
        n, h, w, c = x.shape
        if h % b or w % b:
            raise InvalidArgumentError(
                f"Image width {w} and height {h} should be divisible by block_size: {b}"
            )
        y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
        return _back(y.reshape(n, h // b, w // b, b * b * c), data_format)

    return compute


@register_kernel("DepthToSpace")
def depth_to_space(T, block_size, data_format):
    b = block_size

    def compute(x):
        x = _nhwc(x, data_format)
        n, h, w, c = x.shape
        if c % (b * b):
            raise InvalidArgumentError(f"Input depth dimension {c} should be divisible by: {b * b}")
        y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
        return _back(y.reshape(n, h * b, w * b, c // (b * b)), data_format)

    return compute
