"""Sparse to dense: SparseToDense and TF1's `sparse_to_dense` / `sparse_tensor_to_dense`.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     d = sparse_to_dense([[0, 1], [2, 0]], [3, 2], [5, 6], default_value=-1)
...     Session().run(d)
array([[-1,  5],
       [-1, -1],
       [ 6, -1]], dtype=int32)
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = ["sparse_to_dense", "sparse_tensor_to_dense"]


def _dense_shape(op):
    shape = constant_value(op._inputs[1])
    if shape is not None:
        return [TensorShape([int(d) for d in shape.reshape(-1)])]
    n = op._inputs[1].shape.num_elements() if op._inputs[1].shape.is_fully_defined() else None
    return [TensorShape([None] * n) if n is not None else TensorShape(None)]


defop(
    "SparseToDense",
    inputs=["sparse_indices: Tindices", "output_shape: Tindices", "sparse_values: T",
            "default_value: T"],
    outputs=["dense: T"],
    attrs=["validate_indices: bool = true", "T: type", "Tindices: {int32, int64}"],
    shape=_dense_shape,
    doc="A dense tensor of output_shape with sparse_values at sparse_indices (a scalar, a vector "
    "or an [n, rank] matrix) and default_value elsewhere.",
)  # fmt: skip


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices: bool = True, name=None) -> Tensor:  # fmt: skip
    """TF1's tf.sparse_to_dense."""
    g = get_default_graph()
    values = convert_to_tensor(sparse_values)
    idx = convert_to_tensor(sparse_indices)
    shape = convert_to_tensor(output_shape, dtype=idx.dtype)
    default = convert_to_tensor(default_value, dtype=values.dtype)
    op = g.create_op(
        "SparseToDense", [idx, shape, values, default],
        attrs={"validate_indices": bool(validate_indices)}, name=name or "SparseToDense",
    )  # fmt: skip
    return op.outputs[0]


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices: bool = True,
                           name=None) -> Tensor:  # fmt: skip
    """A SparseTensor as a dense tensor, default_value (0, or b"" for strings) elsewhere."""
    values = sp_input.values
    if default_value is None:
        default_value = b"" if values.dtype is dtypes.string else 0
    return sparse_to_dense(
        sp_input.indices, sp_input.dense_shape, values, default_value,
        validate_indices=validate_indices, name=name or "SparseTensorToDense",
    )  # fmt: skip
