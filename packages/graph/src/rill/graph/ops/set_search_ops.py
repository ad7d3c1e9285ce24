"""Counting, bucketing, searching and set differences: Bucketize, UpperBound, LowerBound,
ListDiff, UniqueWithCounts, Bincount, HistogramFixedWidth.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 2])
...     b = bucketize(x, [0.0, 1.0, 5.0])
...     out, idx = setdiff1d(rg.constant([1, 2, 3]), rg.constant([2]))
>>> b.dtype, b.shape, out.shape
(rill.int32, TensorShape([None, 2]), TensorShape([None]))
"""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = [
    "bucketize",
    "searchsorted",
    "setdiff1d",
    "unique_with_counts",
    "bincount",
    "histogram_fixed_width",
]

defop(
    "Bucketize",
    inputs=["input: T"],
    outputs=["output: int32"],
    attrs=["T: {int32, int64, float32, float64}", "boundaries: list(float)"],
    shape=shape_fns.unchanged,
    doc="The index of the bucket of each element: the number of boundaries <= it.",
)


def _bound_shape(op):
    s, v = op._inputs[0].shape, op._inputs[1].shape
    for name, x in (("sorted_inputs", s), ("values", v)):
        if x.rank is not None and x.rank < 1:
            raise ValueError(f"{name} must have rank >= 1, got {x}")
    if s.rank is not None and v.rank is not None and not s[:-1].is_compatible_with(v[:-1]):
        raise ValueError(f"sorted_inputs {s} and values {v} must have the same leading dimensions")
    return [v]


for _name, _doc in (("UpperBound", "after"), ("LowerBound", "before")):
    defop(
        _name,
        inputs=["sorted_inputs: T", "values: T"],
        outputs=["output: out_type"],
        attrs=["T: type", "out_type: {int32, int64} = int32"],
        shape=_bound_shape,
        doc=f"Per row, the index that inserts each value {_doc} its equals in the sorted row.",
    )


def _vector_shape(op):
    for t in op._inputs:
        if t.shape.rank not in (None, 1):
            raise ValueError(f"{t.name} must be a vector, got shape {t.shape}")
    n = len(op.outputs)
    return [TensorShape([None])] * n


defop(
    "ListDiff",
    inputs=["x: T", "y: T"],
    outputs=["out: T", "idx: out_idx"],
    attrs=["T: type", "out_idx: {int32, int64} = int32"],
    shape=_vector_shape,
    doc="The elements of x that are not in y, in x's order, and their positions in x.",
)


def _unique_with_counts_shape(op):
    x = op._inputs[0].shape
    if x.rank not in (None, 1):
        raise ValueError(f"x must be a vector, got shape {x}")
    return [TensorShape([None]), x if x.rank is not None else TensorShape([None]),
            TensorShape([None])]  # fmt: skip


defop(
    "UniqueWithCounts",
    inputs=["x: T"],
    outputs=["y: T", "idx: out_idx", "count: out_idx"],
    attrs=["T: type", "out_idx: {int32, int64} = int32"],
    shape=_unique_with_counts_shape,
    doc="The distinct values of x in order of appearance, each element's index into them, and "
    "how often each occurs.",
)


def _bincount_shape(op):
    n = constant_value(op._inputs[1])
    return [TensorShape([None if n is None else int(n)])]


defop(
    "Bincount",
    inputs=["arr: int32", "size: int32", "weights: T"],
    outputs=["bins: T"],
    attrs=["T: {int32, int64, float32, float64}"],
    shape=_bincount_shape,
    doc="bins[i] = the number (or weight sum) of the values of arr equal to i, for i < size.",
)


def _dense_bincount_shape(op):
    x = op._inputs[0].shape
    n = constant_value(op._inputs[1])
    bins = None if n is None else int(n)
    if x.rank == 2:
        return [TensorShape([x[0], bins])]
    return [TensorShape([bins])]


defop(
    "DenseBincount",
    inputs=["input: Tidx", "size: Tidx", "weights: T"],
    outputs=["output: T"],
    attrs=["Tidx: {int32, int64}", "T: {int32, int64, float32, float64}",
           "binary_output: bool = false"],
    shape=_dense_bincount_shape,
    doc="Bincount of a vector, or of each row of a matrix; binary_output counts presence only.",
)  # fmt: skip


def _histogram_shape(op):
    n = constant_value(op._inputs[2])
    return [TensorShape([None if n is None else int(n)])]


defop(
    "HistogramFixedWidth",
    inputs=["values: T", "value_range: T", "nbins: int32"],
    outputs=["out: dtype"],
    attrs=["T: {int32, int64, float32, float64}", "dtype: {int32, int64} = int32"],
    shape=_histogram_shape,
    doc="Counts of values in nbins equal-width bins over value_range (outliers go to the end "
    "bins).",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def bucketize(input, boundaries, name=None) -> Tensor:  # noqa: A002
    attrs = {"boundaries": tuple(float(b) for b in boundaries)}
    return _op("Bucketize", [input], attrs, name).outputs[0]


def searchsorted(sorted_sequence, values, side: str = "left", out_type=dtypes.int32, name=None):
    """tf.searchsorted: LowerBound (side="left") or UpperBound (side="right")."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    op_type = "LowerBound" if side == "left" else "UpperBound"
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    return _op(op_type, [sorted_sequence, values], attrs, name).outputs[0]


def setdiff1d(x, y, index_dtype=dtypes.int32, name=None) -> tuple[Tensor, Tensor]:
    x = convert_to_tensor(x, name="x")
    y = convert_to_tensor(y, dtype=x.dtype, name="y")
    op = _op("ListDiff", [x, y], {"out_idx": dtypes.as_dtype(index_dtype)}, name)
    return op.outputs[0], op.outputs[1]


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    op = _op("UniqueWithCounts", [x], {"out_idx": dtypes.as_dtype(out_idx)}, name)
    return tuple(op.outputs)


def bincount(arr, size, weights=None, name=None) -> Tensor:
    """Counts (or sums weights) of the values of arr in [0, size) (Bincount; empty weights
    count ones)."""
    arr = convert_to_tensor(arr, dtype=dtypes.int32, name="arr")
    size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
    if weights is None:
        weights = convert_to_tensor([], dtype=dtypes.int32, name="weights")
    return _op("Bincount", [arr, size, weights], name=name).outputs[0]


def histogram_fixed_width(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    values = convert_to_tensor(values, name="values")
    value_range = convert_to_tensor(value_range, dtype=values.dtype, name="value_range")
    nbins = convert_to_tensor(nbins, dtype=dtypes.int32, name="nbins")
    attrs = {"dtype": dtypes.as_dtype(dtype)}
    return _op("HistogramFixedWidth", [values, value_range, nbins], attrs, name).outputs[0]
