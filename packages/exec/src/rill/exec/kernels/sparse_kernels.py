"""Kernels for rill.graph.ops.sparse_ops: SparseToDense."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError


@register_kernel("SparseToDense")
def sparse_to_dense(validate_indices, T, Tindices):
    def compute(indices, output_shape, values, default_value):
        shape = [int(d) for d in np.asarray(output_shape).reshape(-1)]
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"output_shape has a negative dimension: {shape}")
        idx = np.asarray(indices)
        if idx.ndim == 0:
            idx = idx.reshape(1, 1)
        elif idx.ndim == 1:
            idx = idx.reshape(-1, 1)
        if idx.ndim != 2 or idx.shape[1] != len(shape):
            raise InvalidArgumentError(
                f"sparse_indices of shape {list(np.shape(indices))} do not index a tensor of "
                f"rank {len(shape)}"
            )
        n = idx.shape[0]
        vals = np.asarray(values)
        if vals.ndim not in (0, 1) or (vals.ndim == 1 and vals.shape[0] != n):
            raise InvalidArgumentError(
                f"sparse_values must be a scalar or hold {n} values, got shape {list(vals.shape)}"
            )
        if np.ndim(default_value) != 0:
            raise InvalidArgumentError("default_value must be a scalar")
        if n and ((idx < 0).any() or (idx >= np.asarray(shape)).any()):
            bad = int(np.nonzero(((idx < 0) | (idx >= np.asarray(shape))).any(1))[0][0])
            raise InvalidArgumentError(
                f"sparse_indices[{bad}] = {idx[bad].tolist()} is out of bounds for shape {shape}"
            )
        if validate_indices and n > 1:
            flat = np.ravel_multi_index(tuple(idx.T), shape) if shape else np.zeros(n, np.int64)
            if (np.diff(flat) <= 0).any():
                i = int(np.nonzero(np.diff(flat) <= 0)[0][0]) + 1
                what = "repeated" if flat[i] == flat[i - 1] else "out of order"
                raise InvalidArgumentError(f"sparse_indices[{i}] = {idx[i].tolist()} is {what}")
        out = np.full(shape, np.asarray(default_value)[()], dtype=T.np)
        if n:
            out[tuple(idx.T)] = vals
        return out

    return compute
