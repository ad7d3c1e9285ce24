"""Segment reductions and N-d scatters: Segment{Sum,Mean,Max,Min,Prod} (sorted ids),
UnsortedSegment{Max,Min,Prod}, TensorScatter{Update,Add,Sub,Max,Min}, and the resource-variable
ResourceScatterNd{Update,Add,Sub} and ResourceGatherNd.

Empty segments follow TensorFlow: 0 for the sorted reductions except SegmentProd (1); the
reduction's identity for the unsorted ones (the lowest value for Max, the highest for Min, 1 for
Prod).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     d = rg.placeholder(rg.float32, [6, 3])
...     s = segment_max(d, rg.constant([0, 0, 1, 1, 1, 3]))
...     u = unsorted_segment_prod(d, rg.placeholder(rg.int32, [6]), 4)
...     t = tensor_scatter_add(d, rg.constant([[1], [4]]), rg.ones([2, 3]))
>>> s.shape, u.shape, t.shape
(TensorShape([4, 3]), TensorShape([4, 3]), TensorShape([6, 3]))
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.grad_ops import _unsorted_segment_shape
from rill.graph.ops.state_ops import variable_shape_and_dtype
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = [
    "segment_sum",
    "segment_mean",
    "segment_max",
    "segment_min",
    "segment_prod",
    "unsorted_segment_max",
    "unsorted_segment_min",
    "unsorted_segment_prod",
    "tensor_scatter_update",
    "tensor_scatter_add",
    "tensor_scatter_sub",
    "tensor_scatter_max",
    "tensor_scatter_min",
    "resource_scatter_nd_update",
    "resource_scatter_nd_add",
    "resource_scatter_nd_sub",
    "resource_gather_nd",
]

_REAL = (
    "T: {float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, uint32, "
    "uint64}"
)
_IDS = "Tindices: {int32, int64}"


def _segment_shape(op):
    data, ids = op._inputs[0].shape, op._inputs[1].shape
    if ids.rank not in (None, 1):
        raise ValueError(f"segment_ids must be a vector, got shape {ids}")
    if data.rank == 0:
        raise ValueError("data must have rank >= 1")
    if data.rank is not None and ids.rank == 1 and not ids.is_compatible_with(data[:1]):
        raise ValueError(f"segment_ids has shape {ids} but data has {data[0]} rows")
    v = constant_value(op._inputs[1])
    rows = None if v is None else (int(v[-1]) + 1 if len(v) else 0)
    if data.rank is None:
        return [unknown_shape()]
    return [TensorShape([rows]).concatenate(data[1:])]


for _name, _types, _doc in (
    ("SegmentSum", "T: numbertypes", "sum"),
    ("SegmentMean", "T: numbertypes", "mean"),
    ("SegmentMax", _REAL, "maximum"),
    ("SegmentMin", _REAL, "minimum"),
    ("SegmentProd", "T: numbertypes", "product"),
):
    defop(
        _name,
        inputs=["data: T", "segment_ids: Tindices"],
        outputs=["output: T"],
        attrs=[_types, _IDS],
        shape=_segment_shape,
        doc=f"output[i] = the {_doc} of the rows of data whose (sorted) segment id is i; for an "
        "empty segment 0 (1 for the product).",
    )

for _name, _types, _doc in (
    ("UnsortedSegmentMax", _REAL, "maximum (the lowest value when empty)"),
    ("UnsortedSegmentMin", _REAL, "minimum (the highest value when empty)"),
    ("UnsortedSegmentProd", "T: numbertypes", "product (1 when empty)"),
):
    defop(
        _name,
        inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
        outputs=["output: T"],
        attrs=[_types, _IDS, "Tnumsegments: {int32, int64} = int32"],
        shape=_unsorted_segment_shape,
        doc=f"output[i] = the {_doc} of the slices data[j...] with segment_ids[j...] == i; "
        "negative ids are dropped.",
    )


def _tensor_scatter_shape(op):
    t, idx, upd = (x.shape for x in op._inputs)
    if idx.rank == 0:
        raise ValueError("indices must have rank >= 1")
    if t.rank is not None and idx.rank is not None and upd.rank is not None and idx[-1] is not None:
        k = idx[-1]
        if k > t.rank:
            raise ValueError(f"indices.shape[-1] = {k} exceeds the rank of tensor ({t.rank})")
        want = idx[:-1].concatenate(t[k:])
        if not upd.is_compatible_with(want):
            raise ValueError(
                f"updates has shape {upd}; it must be indices.shape[:-1] + tensor.shape[K:] = "
                f"{want}"
            )
    return [t]


for _name, _ids, _doc in (
    ("TensorScatterUpdate", "Tindices: {int16, int32, int64, uint16}", "replaced by"),
    ("TensorScatterAdd", _IDS, "plus"),
    ("TensorScatterSub", _IDS, "minus"),
    ("TensorScatterMax", _IDS, "the maximum with"),
    ("TensorScatterMin", _IDS, "the minimum with"),
):
    defop(
        _name,
        inputs=["tensor: T", "indices: Tindices", "updates: T"],
        outputs=["output: T"],
        attrs=["T: type", _ids, "bad_indices_policy: string = ''"],
        shape=_tensor_scatter_shape,
        doc=f"A copy of tensor with the elements or slices that indices name {_doc} updates.",
    )

for _name, _lock, _doc in (
    ("ResourceScatterNdUpdate", "true", "="),
    ("ResourceScatterNdAdd", "true", "+="),
    ("ResourceScatterNdSub", "true", "-="),
):
    defop(
        _name,
        inputs=["ref: resource", "indices: Tindices", "updates: T"],
        attrs=["T: type", _IDS, f"use_locking: bool = {_lock}", "bad_indices_policy: string = ''"],
        shape=None,
        stateful=True,
        doc=f"variable[indices] {_doc} updates, indices naming elements or slices.",
    )


def _resource_gather_nd_shape(op):
    vshape, _ = variable_shape_and_dtype(op._inputs[0])
    idx = op._inputs[1].shape
    if vshape.rank is None or idx.rank is None or idx[-1] is None:
        return [unknown_shape()]
    return [idx[:-1].concatenate(vshape[idx[-1] :])]


defop(
    "ResourceGatherNd",
    inputs=["resource: resource", "indices: Tindices"],
    outputs=["output: dtype"],
    attrs=["dtype: type", _IDS],
    shape=_resource_gather_nd_shape,
    stateful=True,
    doc="GatherNd from a resource variable's value.",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def _segment(op_type):
    def build(data, segment_ids, name=None) -> Tensor:
        return _op(op_type, [data, segment_ids], name=name).outputs[0]

    build.__doc__ = f"{op_type}(data, segment_ids)."
    return build


def _unsorted(op_type):
    def build(data, segment_ids, num_segments, name=None) -> Tensor:
        return _op(op_type, [data, segment_ids, num_segments], name=name).outputs[0]

    build.__doc__ = f"{op_type}(data, segment_ids, num_segments)."
    return build


def _tensor_scatter(op_type):
    def build(tensor, indices, updates, name=None) -> Tensor:
        tensor = convert_to_tensor(tensor, name="tensor")
        updates = convert_to_tensor(updates, dtype=tensor.dtype, name="updates")
        return _op(op_type, [tensor, indices, updates], name=name).outputs[0]

    build.__doc__ = f"{op_type}(tensor, indices, updates)."
    return build


def _resource_scatter(op_type):
    def build(ref, indices, updates, name=None) -> Operation:
        handle = ref.handle if hasattr(ref, "handle") else ref
        dtype = getattr(ref, "dtype", None)
        updates = convert_to_tensor(updates, dtype=dtype, name="updates")
        return _op(op_type, [handle, indices, updates], name=name)

    build.__doc__ = f"{op_type} on a resource variable."
    return build


segment_sum, segment_mean = _segment("SegmentSum"), _segment("SegmentMean")
segment_max, segment_min = _segment("SegmentMax"), _segment("SegmentMin")
segment_prod = _segment("SegmentProd")
unsorted_segment_max = _unsorted("UnsortedSegmentMax")
unsorted_segment_min = _unsorted("UnsortedSegmentMin")
unsorted_segment_prod = _unsorted("UnsortedSegmentProd")
tensor_scatter_update = _tensor_scatter("TensorScatterUpdate")
tensor_scatter_add = _tensor_scatter("TensorScatterAdd")
tensor_scatter_sub = _tensor_scatter("TensorScatterSub")
tensor_scatter_max = _tensor_scatter("TensorScatterMax")
tensor_scatter_min = _tensor_scatter("TensorScatterMin")
resource_scatter_nd_update = _resource_scatter("ResourceScatterNdUpdate")
resource_scatter_nd_add = _resource_scatter("ResourceScatterNdAdd")
resource_scatter_nd_sub = _resource_scatter("ResourceScatterNdSub")


def resource_gather_nd(ref, indices, name=None) -> Tensor:
    """GatherNd from a resource variable (ResourceGatherNd)."""
    handle = ref.handle if hasattr(ref, "handle") else ref
    dtype = ref.dtype if hasattr(ref, "handle") else variable_shape_and_dtype(handle)[1]
    return _op(
        "ResourceGatherNd", [handle, indices], {"dtype": dtypes.as_dtype(dtype)}, name
    ).outputs[0]
