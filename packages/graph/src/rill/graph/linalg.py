"""TensorFlow's `tf.linalg` namespace over rill.graph's builders (re-exports and TensorFlow's
aliases only).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     rg.linalg.matmul(rg.ones([2, 3]), rg.ones([3, 4])).shape
TensorShape([2, 4])
"""

from rill.graph.ops.matmul_ops import matmul
from rill.graph.ops.nn_impl import l2_normalize
from rill.graph.ops.reshape_ops import transpose


def matrix_transpose(a, name: str = "matrix_transpose", conjugate: bool = False):
    """Transposes the last two dimensions of `a` (`tf.linalg.matrix_transpose`); the rank
    must be known."""
    from rill.graph.graph import convert_to_tensor
    from rill.graph.ops.math_ops import conj

    a = convert_to_tensor(a, name="a")
    rank = a.shape.rank
    if rank is None or rank < 2:
        raise ValueError(f"matrix_transpose needs a tensor of known rank >= 2, got {a.shape}")
    out = transpose(a, [*range(rank - 2), rank - 1, rank - 2], name=name)
    return conj(out) if conjugate else out


__all__ = ["matmul", "l2_normalize", "matrix_transpose", "transpose"]
