"""`tf.sparse` of TensorFlow 1.x: SparseTensor, its placeholder, conversion to dense, and the
sparse arithmetic of rill.graph.ops.sparse_math (matmul, reductions, add, segments, reshaping,
concat/slice/split, softmax, maximum/minimum) under TF1's `tf.sparse.*` names."""

# ruff: noqa: F401 - a namespace of re-exports

from __future__ import annotations

from rill.autodiff.indexed_slices import IndexedSlices
from rill.graph.graph import get_default_graph
from rill.graph.ops.gather_ops import gather
from rill.graph.ops.set_search_ops import setdiff1d
from rill.graph.ops.sparse_math import sparse_add as add
from rill.graph.ops.sparse_math import sparse_concat as concat
from rill.graph.ops.sparse_math import sparse_fill_empty_rows as fill_empty_rows
from rill.graph.ops.sparse_math import sparse_maximum as maximum
from rill.graph.ops.sparse_math import sparse_merge as merge
from rill.graph.ops.sparse_math import sparse_minimum as minimum
from rill.graph.ops.sparse_math import sparse_reduce_max as reduce_max
from rill.graph.ops.sparse_math import sparse_reduce_max_sparse as reduce_max_sparse
from rill.graph.ops.sparse_math import sparse_reduce_sum as reduce_sum
from rill.graph.ops.sparse_math import sparse_reduce_sum_sparse as reduce_sum_sparse
from rill.graph.ops.sparse_math import sparse_reorder as reorder
from rill.graph.ops.sparse_math import sparse_reshape as reshape
from rill.graph.ops.sparse_math import sparse_retain as retain
from rill.graph.ops.sparse_math import sparse_segment_mean as segment_mean
from rill.graph.ops.sparse_math import sparse_segment_sqrt_n as segment_sqrt_n
from rill.graph.ops.sparse_math import sparse_segment_sum as segment_sum
from rill.graph.ops.sparse_math import sparse_slice as slice  # noqa: A004 - TensorFlow's name
from rill.graph.ops.sparse_math import sparse_softmax as softmax
from rill.graph.ops.sparse_math import sparse_split as split
from rill.graph.ops.sparse_math import sparse_tensor_dense_matmul as matmul
from rill.graph.ops.sparse_math import sparse_tensor_dense_matmul as sparse_dense_matmul
from rill.graph.ops.sparse_math import sparse_to_indicator as to_indicator
from rill.graph.ops.sparse_math import sparse_transpose as transpose
from rill.graph.ops.sparse_ops import sparse_tensor_to_dense as to_dense
from rill.graph.ops.sparse_ops import sparse_to_dense
from rill.graph.sparse_tensor import SparseTensor, SparseTensorValue
from rill.graph.sparse_tensor import sparse_placeholder as placeholder


def sparse_mask(a, mask_indices, name=None):
    """The slices of IndexedSlices `a` whose indices are not in `mask_indices` (TF1's
    tf.sparse_mask / tf.sparse.mask).

    Raises:
        TypeError: a is not an IndexedSlices.
    """
    if not isinstance(a, IndexedSlices):
        raise TypeError(f"sparse_mask: a must be an IndexedSlices, got {type(a).__name__}")
    with get_default_graph().name_scope(name or "sparse_mask"):
        out_indices, to_gather = setdiff1d(a.indices, mask_indices)
        return IndexedSlices(gather(a.values, to_gather), out_indices, a.dense_shape)


mask = sparse_mask
