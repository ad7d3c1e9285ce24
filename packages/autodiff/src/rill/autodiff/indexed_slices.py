"""IndexedSlices: a sparse gradient — rows `values` of a dense tensor at `indices`.

The gradient of a gather is an IndexedSlices; it stays sparse through aggregation (several
slices concatenate) and into the optimizer's sparse update. It becomes dense only when an op
needs a dense input (Graph.create_op converts it through `_as_tensor`).
"""

from __future__ import annotations

from typing import NamedTuple

from rill.graph.graph import Tensor, get_default_graph

__all__ = ["IndexedSlices", "IndexedSlicesValue", "convert_to_dense"]


class IndexedSlicesValue(NamedTuple):
    """The value of a fetched IndexedSlices: numpy `values`, `indices` and `dense_shape`
    (None when the IndexedSlices has none), as TensorFlow's `tf.IndexedSlicesValue`."""

    values: object
    indices: object
    dense_shape: object


class IndexedSlices:
    __slots__ = ("values", "indices", "dense_shape")

    def __init__(self, values: Tensor, indices: Tensor, dense_shape: Tensor | None = None):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def name(self) -> str:
        return self.values.name

    @property
    def op(self):
        return self.values.op

    @property
    def graph(self):
        return self.values.graph

    @property
    def device(self) -> str:
        return self.values.device

    @property
    def shape(self):
        from rill.graph.tensor_util import constant_value_as_shape

        if self.dense_shape is not None:
            return constant_value_as_shape(self.dense_shape)
        return self.values.shape

    def _as_tensor(self, dtype=None) -> Tensor:
        return convert_to_dense(self)

    def _fetch_components(self):
        """Session.run fetches the components and returns an IndexedSlicesValue."""
        if self.dense_shape is None:
            return [self.values, self.indices], lambda v: IndexedSlicesValue(v[0], v[1], None)
        return [self.values, self.indices, self.dense_shape], lambda v: IndexedSlicesValue(*v)

    def __neg__(self):
        from rill.graph.ops import math_ops

        return IndexedSlices(math_ops.negative(self.values), self.indices, self.dense_shape)

    def __repr__(self) -> str:
        return f"IndexedSlices(values={self.values!r}, indices={self.indices!r})"


def convert_to_dense(s: IndexedSlices, name: str = "IndexedSlicesToDense") -> Tensor:
    """Sums the slices into a dense tensor of shape `dense_shape` (duplicates add up)."""
    from rill.graph.ops import gather_ops, math_ops, reshape_ops

    if s.dense_shape is None:
        raise ValueError(
            f"cannot convert IndexedSlices {s.name} to a dense tensor: its dense_shape is unknown"
        )
    g = get_default_graph()
    with g.name_scope(name):
        shape = s.dense_shape
        if shape.dtype is not s.indices.dtype:
            shape = math_ops.cast(shape, s.indices.dtype)
        idx = reshape_ops.expand_dims(s.indices, 1)
        return gather_ops.scatter_nd(idx, s.values, shape)


def is_indexed_slices(x) -> bool:
    return isinstance(x, IndexedSlices)
