"""Second derivatives: `hessians`, TensorFlow's tf.hessians.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [3], name="x")
...     (h,) = hessians(rg.reduce_sum(x * x * x), [x])
>>> h.shape.rank
2
"""

from __future__ import annotations

from rill.autodiff.gradients import gradients
from rill.autodiff.indexed_slices import IndexedSlices, convert_to_dense
from rill.graph import dtypes
from rill.graph.control_flow import while_loop
from rill.graph.graph import constant, get_default_graph
from rill.graph.ops.array_ops import shape, size
from rill.graph.ops.gather_ops import gather
from rill.graph.ops.reshape_ops import concat, reshape
from rill.graph.ops.tensor_array_ops import TensorArray

__all__ = ["hessians"]


def hessians(ys, xs, name: str = "hessians", colocate_gradients_with_ops: bool = False,
             gate_gradients: bool = False, aggregation_method=None) -> list:  # fmt: skip
    """The Hessian of sum(ys) with respect to each x in xs, of shape x.shape + x.shape: the
    gradient with respect to x, flattened, then, in a while loop over its n elements (n known
    at run time), the gradient of each element with respect to x, stacked and reshaped.
    An x that sum(ys) does not depend on gives None, as `gradients` does.

    Raises:
        GraphValueError / LookupError as `gradients` does (an op on the path without a
        second derivative names the op).
    """
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    del colocate_gradients_with_ops, gate_gradients  # TensorFlow's; no effect here
    out = []
    g = get_default_graph()
    with g.name_scope(name):
        firsts = gradients(ys, xs, aggregation_method=aggregation_method)
        for i, (x, first) in enumerate(zip(xs, firsts)):
            if first is None:
                out.append(None)
                continue
            if isinstance(first, IndexedSlices):
                first = convert_to_dense(first)
            flat = reshape(first, [-1])
            n = size(x, out_type=dtypes.int32)
            rows = TensorArray(first.dtype, size=n, element_shape=x.shape, name=f"rows_{i}")

            def body(j, acc, flat=flat, x=x):
                (row,) = gradients(gather(flat, j), [x], aggregation_method=aggregation_method,
                                   unconnected_gradients="zero")  # fmt: skip
                if isinstance(row, IndexedSlices):
                    row = convert_to_dense(row)
                return j + 1, acc.write(j, row)

            _, rows = while_loop(lambda j, _acc, n=n: j < n, body,
                                 [constant(0, dtypes.int32), rows], name=f"hessian_{i}")  # fmt: skip
            s = shape(x, out_type=dtypes.int32)
            out.append(reshape(rows.stack(), concat([s, s], 0)))
    return out
