"""ONNX import rules: scatters, detection and sampling (ScatterND, TensorScatter,
NonMaxSuppression, RoiAlign, GridSample, AffineGrid, Unique, Col2Im).

ScatterND, TensorScatter and AffineGrid are compositions of TensorFlow's ops (TensorScatter*,
UnsortedSegmentProd, GatherNd, BatchMatMulV2). The others have no TensorFlow counterpart close
enough to compose from — ONNX's NonMaxSuppression runs per batch and per class and keeps IoUs
equal to the threshold (TensorFlow's drops them), RoiAlign averages a per-roi adaptive sampling
grid, GridSample pads and interpolates in N dimensions, Unique sorts, Col2Im folds N-D blocks —
so they import as rill's own ops of rill.graph.ops.onnx_detect_ops, whose CPU kernels follow
the ONNX specification.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, static
from rill.graph.onnx.import_util import as_i64 as _as_i64
from rill.graph.onnx.import_util import i64 as _i64

I64 = dtypes.int64


def _shape(t):
    return op("Shape", [t], {"out_type": I64})


def _slice(t, begin: int, end: int | None = None):
    """t[begin:end] of a 1-D tensor (to its end when `end` is None)."""
    if end is None:
        return op("StridedSlice", [t, _i64([begin]), _i64([0]), _i64([1])], {"end_mask": 1})
    return op("StridedSlice", [t, _i64([begin]), _i64([end]), _i64([1])])


def _at(t, i: int):
    """t[i] of a 1-D tensor, a scalar."""
    return op("StridedSlice", [t, _i64([i]), _i64([i + 1]), _i64([1])], {"shrink_axis_mask": 1})


# -- ScatterND ----------------------------------------------------------------------------------

_TENSOR_SCATTER = {
    "none": "TensorScatterUpdate",
    "add": "TensorScatterAdd",
    "max": "TensorScatterMax",
    "min": "TensorScatterMin",
}


def _nonnegative(indices, data):
    """indices [..., k] with negative entries counted from the end of data's first k axes."""
    v = static(indices)
    if v is not None and (v >= 0).all():
        return indices
    k = indices.shape[-1] if indices.shape.rank is not None else None
    if k is None:
        k_t = op("StridedSlice", [_shape(indices), _i64([-1]), _i64([0]), _i64([1])],
                 {"end_mask": 1})  # fmt: skip
        dims = op("Slice", [_shape(data), _i64([0]), k_t])
    else:
        dims = _slice(_shape(data), 0, k)
    # An index below -dim stays as it is, so that the scatter's range error shows the model's value.
    wrapped = op("AddV2", [indices, dims])
    use = op("LogicalAnd", [op("Less", [indices, _i64(0)]), op("GreaterEqual", [wrapped, _i64(0)])])
    return op("SelectV2", [use, wrapped, indices])


@register_onnx_import("ScatterND")
def scatter_nd(n, data, indices, updates, *, reduction="none"):
    """TensorScatterUpdate / Add / Max / Min; reduction mul multiplies data by the product of
    the updates that land on each slice (UnsortedSegmentProd over the slices' flat positions,
    read through a GatherNd, which refuses an index out of range)."""
    return scatter_nd_into(data, _nonnegative(_as_i64(indices), data), updates, reduction)


def scatter_nd_into(data, idx, updates, reduction: str):
    """ScatterND of non-negative int64 indices `idx` [..., k] (also ScatterElements', whose
    coordinates are made whole); duplicates: the last update wins under reduction none, as in
    onnxruntime and onnx's reference."""
    indices = idx
    if reduction in _TENSOR_SCATTER:
        return op(_TENSOR_SCATTER[reduction], [data, idx, updates])
    if reduction != "mul":
        raise OnnxImportError(
            f"unknown ScatterND reduction {reduction!r} (ONNX has none, add, mul, max, min)"
        )
    if indices.shape.rank is None or indices.shape[-1] is None:
        raise OnnxImportError("ScatterND with reduction mul needs indices of known last dimension")
    k = indices.shape[-1]
    dshape = _shape(data)
    lead = _slice(dshape, 0, k)
    rest = _slice(dshape, k)
    count = op("Prod", [lead, _i64([0])])
    flat_pos = op("Reshape", [op("Range", [_i64(0), count, _i64(1)]), lead])
    segment = op("Reshape", [op("GatherNd", [flat_pos, idx]), _i64([-1])])
    rows = op("ConcatV2", [[_i64([-1]), rest], const(0, dtypes.int32)])
    prod = op("UnsortedSegmentProd", [op("Reshape", [updates, rows]), segment, count])
    out = op("Mul", [op("Reshape", [data, rows]), prod])
    return op("Reshape", [out, dshape])


# -- TensorScatter ------------------------------------------------------------------------------


@register_onnx_import("TensorScatter")
def tensor_scatter(n, past_cache, update, write_indices=None, *, axis=-2, mode="linear"):
    """update written into past_cache along `axis` from write_indices[b] on (per batch entry b;
    modulo the axis length under mode circular): a TensorScatterUpdate on the cache with the
    sequence axis moved next to the batch axis."""
    r = past_cache.shape.rank
    if r is None:
        raise OnnxImportError("TensorScatter needs a past_cache of known rank")
    if mode not in ("linear", "circular"):
        raise OnnxImportError(f"unknown TensorScatter mode {mode!r} (ONNX has linear, circular)")
    ax = axis + r if axis < 0 else axis
    if not 1 <= ax < r:
        raise OnnxImportError(f"TensorScatter axis {axis} is not a non-batch axis of rank {r}")
    perm = [0, ax] + [a for a in range(1, r) if a != ax]
    cache = op("Transpose", [past_cache, const(perm, dtypes.int32)])
    upd = op("Transpose", [update, const(perm, dtypes.int32)])
    ushape = _shape(upd)
    batch, seq = _at(ushape, 0), _at(ushape, 1)
    b = op("Reshape", [op("Range", [_i64(0), batch, _i64(1)]), _i64([-1, 1])])
    s = op("Reshape", [op("Range", [_i64(0), seq, _i64(1)]), _i64([1, -1])])
    start = (
        op("ZerosLike", [b])
        if write_indices is None
        else op("Reshape", [_as_i64(write_indices), _i64([-1, 1])])
    )
    pos = op("AddV2", [start, s])
    if mode == "circular":
        pos = op("FloorMod", [pos, _at(_shape(cache), 1)])
    b = op("BroadcastTo", [b, op("Shape", [pos], {"out_type": I64})])
    idx = op("Pack", [[b, pos]], {"axis": -1})
    out = op("TensorScatterUpdate", [cache, idx, upd])
    return op("Transpose", [out, const(list(np.argsort(perm)), dtypes.int32)])


# -- AffineGrid ---------------------------------------------------------------------------------


def _positions(length, align_corners: int, dtype):
    """The normalized coordinates of `length` evenly spaced pixels in [-1, 1] (a scalar int64
    length): pixel centres at the ends under align_corners, pixel edges otherwise; 0 for one
    pixel under align_corners."""
    f = op("Cast", [length], {"DstT": dtype})
    one = const(1, dtype)
    i = op("Range", [const(0, dtype), f, one])
    span = op("Sub", [f, one])
    num = op("Sub", [op("Mul", [i, const(2, dtype)]), span])
    den = op("Maximum", [span, one]) if align_corners else f
    return op("RealDiv", [num, den])


@register_onnx_import("AffineGrid")
def affine_grid(n, theta, size, *, align_corners=0):
    """grid[n, ..., :] = theta[n] · (x, y[, z], 1) over the normalized positions of the output
    size (x along the last axis): one BatchMatMulV2 of the [positions, r + 1] homogeneous
    coordinates with theta transposed."""
    r = None
    if theta.shape.rank == 3 and theta.shape[1] is not None:
        r = theta.shape[1]
    elif size.shape.rank == 1 and size.shape[0] is not None:
        r = size.shape[0] - 2
    if r not in (2, 3):
        raise OnnxImportError(
            f"AffineGrid needs theta of shape [N, 2, 3] or [N, 3, 4] (found {theta.shape}) or a "
            f"size of length 4 or 5 (found {size.shape})"
        )
    dt = theta.dtype
    size = _as_i64(size)
    spatial = [_at(size, 2 + a) for a in range(r)]
    axes = []
    for a, length in enumerate(spatial):
        view = [1] * r
        view[a] = -1
        axes.append(op("Reshape", [_positions(length, align_corners, dt), _i64(view)]))
    out_dims = op("Pack", [spatial], {"axis": 0})
    coords = [op("BroadcastTo", [c, out_dims]) for c in reversed(axes)]
    coords.append(op("Fill", [out_dims, const(1, dt)]))
    base = op("Reshape", [op("Pack", [coords], {"axis": -1}), _i64([1, -1, r + 1])])
    grid = op("BatchMatMulV2", [base, theta], {"adj_y": True})
    shape = op("ConcatV2", [[_slice(size, 0, 1), out_dims, _i64([r])], const(0, dtypes.int32)])
    return op("Reshape", [grid, shape])


# -- rill's own ops -----------------------------------------------------------------------------


def _f32(t, default: float):
    if t is None:
        return const(default, dtypes.float32)
    return t if t.dtype == dtypes.float32 else op("Cast", [t], {"DstT": dtypes.float32})


@register_onnx_import("NonMaxSuppression")
def non_max_suppression(n, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None, *, center_point_box=0):  # fmt: skip
    """A missing max_output_boxes_per_class selects nothing (ONNX's default 0); a missing
    score_threshold keeps every score above -inf."""
    if center_point_box not in (0, 1):
        raise OnnxImportError(f"NonMaxSuppression center_point_box must be 0 or 1, got "
                              f"{center_point_box}")  # fmt: skip
    limit = _i64(0) if max_output_boxes_per_class is None else _as_i64(max_output_boxes_per_class)
    inputs = [boxes, scores, limit, _f32(iou_threshold, 0.0), _f32(score_threshold, -np.inf)]
    return op("_OnnxNonMaxSuppression", inputs, {"center_point_box": center_point_box}, name="NMS")


@register_onnx_import("RoiAlign")
def roi_align(n, x, rois, batch_indices, *, coordinate_transformation_mode=None, mode="avg",
              output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):  # fmt: skip
    """coordinate_transformation_mode defaults to half_pixel from opset 16 on; before it RoiAlign
    had no such attribute and behaved as output_half_pixel."""
    ctm = coordinate_transformation_mode or ("half_pixel" if n.opset >= 16 else
                                             "output_half_pixel")  # fmt: skip
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise OnnxImportError(f"unknown RoiAlign coordinate_transformation_mode {ctm!r} (ONNX "
                              "has half_pixel, output_half_pixel)")  # fmt: skip
    if mode not in ("avg", "max"):
        raise OnnxImportError(f"unknown RoiAlign mode {mode!r} (ONNX has avg, max)")
    if rois.dtype != x.dtype:
        rois = op("Cast", [rois], {"DstT": x.dtype})
    attrs = {"mode": mode, "output_height": output_height, "output_width": output_width,
             "sampling_ratio": sampling_ratio, "spatial_scale": float(spatial_scale),
             "half_pixel": ctm == "half_pixel"}  # fmt: skip
    return op("_OnnxRoiAlign", [x, rois, _as_i64(batch_indices)], attrs, name="RoiAlign")


_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}  # opset 16's names


@register_onnx_import("GridSample")
def grid_sample(n, x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    m = _GRID_MODES.get(mode, mode)
    if m not in ("linear", "nearest", "cubic"):
        raise OnnxImportError(f"unknown GridSample mode {mode!r} (ONNX has linear, nearest, "
                              "cubic; bilinear, bicubic before opset 20)")  # fmt: skip
    if padding_mode not in ("zeros", "border", "reflection"):
        raise OnnxImportError(f"unknown GridSample padding_mode {padding_mode!r} (ONNX has "
                              "zeros, border, reflection)")  # fmt: skip
    if not x.dtype.is_floating:
        raise OnnxImportError(f"rill imports GridSample of a floating-point X (float16, bfloat16, "
                              f"float32, float64), not {x.dtype.name}")  # fmt: skip
    if m == "cubic" and x.shape.rank not in (None, 4):
        raise OnnxImportError(f"GridSample mode {mode!r} needs a 4-D input, got {x.shape}")
    attrs = {"mode": m, "padding_mode": padding_mode, "align_corners": bool(align_corners)}
    return op("_OnnxGridSample", [x, grid], attrs, name="GridSample")


@register_onnx_import("Unique")
def unique(n, x, *, axis=None, sorted=1):  # noqa: A002 - ONNX's attribute name
    if axis is not None and x.shape.rank is not None and not -x.shape.rank <= axis < \
            x.shape.rank:  # fmt: skip
        raise OnnxImportError(f"Unique axis {axis} is out of range for an input of rank "
                              f"{x.shape.rank}")  # fmt: skip
    attrs = {"axis": [] if axis is None else [int(axis)], "sorted": bool(sorted)}
    return op("_OnnxUnique", [x], attrs, name="Unique")


@register_onnx_import("Col2Im")
def col2im(n, x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    attrs = {"dilations": list(dilations or []), "pads": list(pads or []),
             "strides": list(strides or [])}  # fmt: skip
    return op("_OnnxCol2Im", [x, _as_i64(image_shape), _as_i64(block_shape)], attrs, name="Col2Im")
