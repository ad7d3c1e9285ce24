"""ONNX import rules: constants, ranges, one-hot, gathers, NonZero, Trilu and EyeLike."""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_linalg import _dim
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype, static
from rill.graph.onnx.import_util import as_i64 as _as_i64
from rill.graph.onnx.import_util import i64 as _i64


@register_onnx_import("Constant")
def constant(n, **attrs):
    if len(attrs) != 1:
        raise OnnxImportError(f"Constant needs exactly one value attribute, got {sorted(attrs)}")
    ((kind, v),) = attrs.items()
    if kind == "sparse_value":
        raise OnnxImportError("Constant with a sparse_value is not supported")
    if kind in ("value_float", "value_floats"):
        v = np.asarray(v, np.float32)
    elif kind in ("value_int", "value_ints"):
        v = np.asarray(v, np.int64)
    elif kind in ("value_string", "value_strings"):
        v = np.asarray(v, object)
    elif kind != "value":
        raise OnnxImportError(f"Constant attribute {kind!r} is not supported")
    return const(np.asarray(v))


@register_onnx_import("ConstantOfShape")
def constant_of_shape(n, shape, *, value=None):
    v = np.zeros(1, np.float32) if value is None else np.asarray(value)
    return op("Fill", [_as_i64(shape), const(v.reshape(()), dtypes.as_dtype(v.dtype))])


@register_onnx_import("Range")
def range_(n, start, limit, delta, *, stash_type=None):
    s, lm, d = (op("Reshape", [t, const([], dtypes.int32)]) for t in (start, limit, delta))
    return op("Range", [s, lm, d])


@register_onnx_import("OneHot")
def one_hot(n, indices, depth, values, *, axis=-1):
    """Negative indices count from the end of the depth; out-of-range ones give all off."""
    d = op("Reshape", [depth, const([], dtypes.int32)])
    d = op("Cast", [d], {"DstT": dtypes.int64}) if d.dtype != dtypes.int64 else d
    idx = indices
    if idx.dtype.is_floating:
        idx = op("Cast", [idx], {"DstT": dtypes.int64})
    idx = _as_i64(idx)
    idx = op("SelectV2", [op("Less", [idx, _i64(0)]), op("AddV2", [idx, d]), idx])
    off = op("StridedSlice", [values, _i64([0]), _i64([1]), _i64([1])], {"shrink_axis_mask": 1})
    on = op("StridedSlice", [values, _i64([1]), _i64([2]), _i64([1])], {"shrink_axis_mask": 1})
    r = indices.shape.rank
    if axis < -1:
        if r is None:
            raise OnnxImportError("OneHot with a negative axis needs indices of known rank")
        axis = axis + r + 1
    return op("OneHot", [idx, op("Cast", [d], {"DstT": dtypes.int32}), on, off], {"axis": axis})


def _wrap_negative(indices, size):
    """Negative indices counted from the end (ONNX allows them; TensorFlow's gathers do not)."""
    v = static(indices)
    if v is not None and (v >= 0).all():
        return indices
    if v is not None and isinstance(size, int):
        return const(np.where(v < 0, v + size, v).astype(v.dtype))
    idx = indices
    zero = const(0, idx.dtype)
    s = const(size, idx.dtype) if isinstance(size, int) else op("Cast", [size], {"DstT": idx.dtype})
    return op("SelectV2", [op("Less", [idx, zero]), op("AddV2", [idx, s]), idx])


@register_onnx_import("Gather")
def gather(n, x, indices, *, axis=0):
    r = x.shape.rank
    if axis < 0:
        if r is None:
            raise OnnxImportError("Gather with a negative axis needs an input of known rank")
        axis += r
    idx = _wrap_negative(indices, _dim(x, axis))
    return op("GatherV2", [x, idx, const(axis, dtypes.int32)])


def _coordinates(shape_of, rank: int, axis_index, axis: int):
    """[..., rank] int64 coordinates: `axis_index` on `axis`, the position on every other axis."""
    shp = op("Shape", [shape_of], {"out_type": dtypes.int64})
    parts = []
    for a in range(rank):
        if a == axis:
            parts.append(_as_i64(axis_index))
            continue
        d = op("StridedSlice", [shp, _i64([a]), _i64([a + 1]), _i64([1])],
               {"shrink_axis_mask": 1})  # fmt: skip
        iota = op("Range", [_i64(0), d, _i64(1)])
        view = [1] * rank
        view[a] = -1
        parts.append(op("BroadcastTo", [op("Reshape", [iota, _i64(view)]), shp]))
    return op("Pack", [parts], {"axis": -1})


@register_onnx_import("GatherElements")
def gather_elements(n, x, indices, *, axis=0):
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("GatherElements needs an input of known rank")
    axis %= r
    idx = _wrap_negative(_as_i64(indices), _dim(x, axis))
    return op("GatherNd", [x, _coordinates(indices, r, idx, axis)])


@register_onnx_import("ScatterElements")
def scatter_elements(n, x, indices, updates, *, axis=0, reduction="none"):
    """data with updates written (reduction none: the last of duplicates wins) or combined (add,
    mul, max, min) at the positions GatherElements with the same indices would read: ScatterND
    of the whole coordinates."""
    from rill.graph.onnx.import_detect import scatter_nd_into

    r = x.shape.rank
    if r is None:
        raise OnnxImportError("ScatterElements needs an input of known rank")
    axis %= r
    idx = _wrap_negative(_as_i64(indices), _dim(x, axis))
    coords = op("Reshape", [_coordinates(indices, r, idx, axis), _i64([-1, r])])
    return scatter_nd_into(x, coords, op("Reshape", [updates, _i64([-1])]), reduction)


def _wrap_negative_nd(indices, x, batch_dims: int):
    """GatherND's index tuples with negative entries counted from the end of the axis each one
    indexes (data's axes batch_dims, batch_dims + 1, ...: ONNX allows them, TensorFlow's
    GatherNd does not; PyTorch's exporter writes them for x[..., -2] style indexing)."""
    v = static(indices)
    if v is not None and (v >= 0).all():
        return indices
    q = indices.shape.as_list()[-1] if indices.shape.rank else None
    shp = op("Shape", [x], {"out_type": indices.dtype})
    if q is not None:
        end = const(np.array([batch_dims + q], np.int64))
    else:
        ishp = op("Shape", [indices], {"out_type": dtypes.int64})
        last = op("StridedSlice", [ishp, _i64([-1]), _i64([0]), _i64([1])], {"end_mask": 1})
        end = op("AddV2", [last, _i64([batch_dims])])
    sizes = op("StridedSlice", [shp, _i64([batch_dims]), end, _i64([1])])
    zero = const(0, indices.dtype)
    return op("SelectV2", [op("Less", [indices, zero]), op("AddV2", [indices, sizes]), indices])


@register_onnx_import("GatherND")
def gather_nd(n, x, indices, *, batch_dims=0):
    indices = _wrap_negative_nd(indices, x, batch_dims)
    if batch_dims == 0:
        return op("GatherNd", [x, indices])
    ri = indices.shape.rank
    if ri is None:
        raise OnnxImportError("GatherND with batch_dims needs indices of known rank")
    # Prefix every index tuple with its batch coordinates, then gather without batch dims.
    ishp = op("Shape", [indices], {"out_type": dtypes.int64})
    lead = op("StridedSlice", [ishp, _i64([0]), _i64([ri - 1]), _i64([1])])
    parts = []
    for a in range(batch_dims):
        d = op("StridedSlice", [ishp, _i64([a]), _i64([a + 1]), _i64([1])], {"shrink_axis_mask": 1})
        view = [1] * (ri - 1)
        view[a] = -1
        iota = op("Reshape", [op("Range", [_i64(0), d, _i64(1)]), _i64(view)])
        parts.append(op("ExpandDims", [op("BroadcastTo", [iota, lead]), const(-1, dtypes.int32)]))
    full = op("ConcatV2", [[*parts, _as_i64(indices)], const(-1, dtypes.int32)])
    return op("GatherNd", [x, full])


@register_onnx_import("NonZero")
def non_zero(n, x):
    return op("Transpose", [op("Where", [x]), const([1, 0], dtypes.int32)])


@register_onnx_import("Trilu")
def trilu(n, x, k=None, *, upper=1):
    """Keeps j - i >= k (upper) or j - i <= k (lower) over the last two axes."""
    shp = op("Shape", [x], {"out_type": dtypes.int64})
    r = x.shape.rank
    if r is None or r < 2:
        raise OnnxImportError("Trilu needs an input of known rank >= 2")
    rows = op(
        "StridedSlice", [shp, _i64([r - 2]), _i64([r - 1]), _i64([1])], {"shrink_axis_mask": 1}
    )
    cols = op("StridedSlice", [shp, _i64([r - 1]), _i64([r]), _i64([1])], {"shrink_axis_mask": 1})
    i = op("Reshape", [op("Range", [_i64(0), rows, _i64(1)]), _i64([-1, 1])])
    j = op("Reshape", [op("Range", [_i64(0), cols, _i64(1)]), _i64([1, -1])])
    kk = _i64(0) if k is None else op("Reshape", [_as_i64(k), _i64([])])
    diff = op("Sub", [j, i])
    keep = op("GreaterEqual" if upper else "LessEqual", [diff, kk])
    return op("SelectV2", [keep, x, op("ZerosLike", [x])])


@register_onnx_import("EyeLike")
def eye_like(n, x, *, dtype=None, k=0):
    dt = rill_dtype(dtype) if dtype is not None else x.dtype
    shp = op("Shape", [x], {"out_type": dtypes.int64})
    rows = op("StridedSlice", [shp, _i64([0]), _i64([1]), _i64([1])], {"shrink_axis_mask": 1})
    cols = op("StridedSlice", [shp, _i64([1]), _i64([2]), _i64([1])], {"shrink_axis_mask": 1})
    i = op("Reshape", [op("Range", [_i64(0), rows, _i64(1)]), _i64([-1, 1])])
    j = op("Reshape", [op("Range", [_i64(0), cols, _i64(1)]), _i64([1, -1])])
    on = op("Equal", [op("Sub", [j, i]), _i64(int(k))])
    return op("Cast", [on], {"DstT": dt}) if dt != dtypes.bool_ else on
