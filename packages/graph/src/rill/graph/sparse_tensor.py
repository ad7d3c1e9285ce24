"""SparseTensor: a sparse tensor as three dense tensors (TensorFlow's `tf.SparseTensor`).

- `indices`: int64 `[N, rank]`, the coordinates of the N non-zero values (row-major order);
- `values`: `[N]`, the values, of any dtype;
- `dense_shape`: int64 `[rank]`, the shape of the dense tensor it stands for.

`SparseTensorValue` is the same triple of numpy arrays (what a session feeds or returns).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     sp = SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])
...     sp.dtype, sp.shape, sp.indices.dtype
(rill.float32, TensorShape([3, 4]), rill.int64)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor, placeholder
from rill.graph.shapes import TensorShape, as_shape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_placeholder"]


class SparseTensorValue(NamedTuple):
    """A sparse tensor's value: numpy indices, values and dense_shape."""

    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray


class SparseTensor:
    """A sparse tensor: `indices` (int64 [N, rank]), `values` ([N]) and `dense_shape` (int64
    [rank]), each a Tensor (or a value converted to one).

    Raises:
        ValueError: the three parts do not fit together (ranks, N).
    """

    def __init__(self, indices, values, dense_shape):
        self._indices = convert_to_tensor(indices, dtypes.int64, name="indices")
        self._values = convert_to_tensor(values, name="values")
        self._dense_shape = convert_to_tensor(dense_shape, dtypes.int64, name="dense_shape")
        ishape, vshape, sshape = self._indices.shape, self._values.shape, self._dense_shape.shape
        if not _rank_ok(ishape, 2) or not _rank_ok(vshape, 1):
            raise ValueError(
                f"SparseTensor: indices must be [N, rank] and values [N], got indices {ishape} "
                f"and values {vshape}"
            )
        if not _rank_ok(sshape, 1):
            raise ValueError(f"SparseTensor: dense_shape must be a vector, got {sshape}")
        if ishape.rank == 2 and vshape.rank == 1:
            n1, n2 = ishape.dims[0], vshape.dims[0]
            if n1 is not None and n2 is not None and n1 != n2:
                raise ValueError(
                    f"SparseTensor: indices hold {n1} coordinates but values hold {n2} values"
                )

    @classmethod
    def from_value(cls, value: SparseTensorValue) -> SparseTensor:
        if isinstance(value, SparseTensor):
            return value
        return cls(value.indices, value.values, value.dense_shape)

    indices = property(lambda self: self._indices)
    values = property(lambda self: self._values)
    dense_shape = property(lambda self: self._dense_shape)
    dtype = property(lambda self: self._values.dtype)
    graph = property(lambda self: self._values.graph)
    op = property(lambda self: self._values.op)

    @property
    def shape(self) -> TensorShape:
        """The static dense shape: known where dense_shape is a constant."""
        value = constant_value(self._dense_shape)
        if value is not None:
            return as_shape([int(d) for d in np.asarray(value).reshape(-1)])
        rank = self._dense_shape.shape.dims[0] if self._dense_shape.shape.rank == 1 else None
        return unknown_shape(rank)

    def get_shape(self) -> TensorShape:
        return self.shape

    def _fetch_components(self):
        """Session.run fetches (and feeds) the three parts; a fetch returns a SparseTensorValue."""
        return [self._indices, self._values, self._dense_shape], lambda v: SparseTensorValue(*v)

    def __repr__(self) -> str:
        return (
            f"SparseTensor(indices={self._indices!r}, values={self._values!r}, "
            f"dense_shape={self._dense_shape!r})"
        )


def sparse_placeholder(dtype, shape=None, name: str | None = None) -> SparseTensor:
    """A SparseTensor of three placeholders (`<name>/indices`, `/values`, `/shape`); feed them
    from a SparseTensorValue. A fully known `shape` becomes a constant dense_shape."""
    prefix = name or "SparsePlaceholder"
    shape = as_shape(shape) if shape is not None else unknown_shape()
    rank = shape.rank
    values = placeholder(dtype, [None], name=f"{prefix}/values")
    indices = placeholder(dtypes.int64, [None, rank], name=f"{prefix}/indices")
    if shape.is_fully_defined():
        dense_shape = convert_to_tensor(np.array(shape.as_list(), np.int64), name=f"{prefix}/shape")
    else:
        dense_shape = placeholder(dtypes.int64, [rank], name=f"{prefix}/shape")
    return SparseTensor(indices, values, dense_shape)


def _rank_ok(shape: TensorShape, rank: int) -> bool:
    return shape.rank is None or shape.rank == rank
