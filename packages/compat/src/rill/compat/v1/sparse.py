"""`tf.sparse` of TensorFlow 1.x: what rill has of it (SparseTensor, its placeholder and its
conversion to a dense tensor; sparse arithmetic is not there)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.sparse_ops import sparse_tensor_to_dense as to_dense
from rill.graph.ops.sparse_ops import sparse_to_dense
from rill.graph.sparse_tensor import SparseTensor, SparseTensorValue
from rill.graph.sparse_tensor import sparse_placeholder as placeholder
