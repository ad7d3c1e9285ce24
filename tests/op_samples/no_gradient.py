"""Samples for ops without a gradient, for the suites beyond gradients that draw on every sample
(ONNX export, the simulated GPU): SparseToDense, ListDiff and ResizeArea."""

import numpy as np

from op_samples import rand, sample
from rill.graph.ops import image_ops, set_search_ops, sparse_ops


def _sparse_to_dense(indices, values):
    return sparse_ops.sparse_to_dense(indices, np.array([3, 4], np.int32), values, -1.0)


sample("SparseToDense", [np.array([[0, 1], [1, 3], [2, 0]], np.int32), rand(3)], _sparse_to_dense)
sample("SparseToDense", [np.array([0, 2, 5], np.int64)],
       lambda i: sparse_ops.sparse_to_dense(i, np.array([6], np.int64), np.int32(4), np.int32(0)),
       name="vector_scalar")  # fmt: skip
sample("ListDiff", [np.array([5, 1, 7, 1, 3, 8], np.int32), np.array([1, 8, 2], np.int32)],
       lambda x, y: list(set_search_ops.setdiff1d(x, y)))  # fmt: skip
sample("ListDiff", [rand(5), np.array([0.5], np.float64)],
       lambda x, y: list(set_search_ops.setdiff1d(x, y, np.int64)), name="float_int64")  # fmt: skip
sample("ResizeArea", [rand(2, 4, 6, 3)], lambda x: image_ops.resize_area(x, [2, 3]))
