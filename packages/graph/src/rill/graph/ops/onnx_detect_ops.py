"""rill's own ops for the ONNX ops that no TensorFlow op or short composition computes (names
start with "_"; the ONNX importer builds them, users do not): detection (_OnnxNonMaxSuppression,
_OnnxRoiAlign), sampling (_OnnxGridSample), _OnnxUnique and _OnnxCol2Im. Each computes what the
ONNX operator of the same name specifies; the attrs are ONNX's, already checked by the importer.
"""

from __future__ import annotations

from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__: list[str] = []

_FLOAT = "{float16, bfloat16, float32, float64}"


def _nms_shape(op):
    boxes, scores = op._inputs[0].shape, op._inputs[1].shape
    if boxes.rank not in (None, 3) or (boxes.rank == 3 and boxes[2] not in (None, 4)):
        raise ValueError(f"boxes must have shape [num_batches, num_boxes, 4], got {boxes}")
    if scores.rank not in (None, 3):
        raise ValueError(f"scores must have shape [num_batches, num_classes, num_boxes], got "
                         f"{scores}")  # fmt: skip
    return TensorShape([None, 3])


defop(
    "_OnnxNonMaxSuppression",
    inputs=[
        "boxes: T",
        "scores: T",
        "max_output_boxes_per_class: int64",
        "iou_threshold: float32",
        "score_threshold: float32",
    ],
    outputs=["selected_indices: int64"],
    attrs=[f"T: {_FLOAT}", "center_point_box: int = 0"],
    shape=_nms_shape,
    doc="ONNX's NonMaxSuppression: per batch and class, boxes chosen greedily by descending "
    "score (ties to the lower index) among those scoring above score_threshold, skipping any "
    "whose IoU with a chosen one is strictly greater than iou_threshold, at most "
    "max_output_boxes_per_class of them; rows [batch, class, box]. Boxes are [y1, x1, y2, x2] "
    "(any diagonal corners) or, with center_point_box 1, [x_center, y_center, width, height].",
)


def _roi_align_shape(op):
    x, rois = op._inputs[0].shape, op._inputs[1].shape
    if x.rank not in (None, 4):
        raise ValueError(f"X must be 4-D [N, C, H, W], got {x}")
    if rois.rank not in (None, 2) or (rois.rank == 2 and rois[1] not in (None, 4)):
        raise ValueError(f"rois must have shape [num_rois, 4], got {rois}")
    n = rois[0] if rois.rank == 2 else None
    c = x[1] if x.rank == 4 else None
    return TensorShape([n, c, op.attrs["output_height"], op.attrs["output_width"]])


defop(
    "_OnnxRoiAlign",
    inputs=["x: T", "rois: T", "batch_indices: int64"],
    outputs=["y: T"],
    attrs=[
        f"T: {_FLOAT}",
        "mode: {'avg', 'max'} = 'avg'",
        "output_height: int >= 1 = 1",
        "output_width: int >= 1 = 1",
        "sampling_ratio: int >= 0 = 0",
        "spatial_scale: float = 1.0",
        "half_pixel: bool = true",
    ],
    shape=_roi_align_shape,
    doc="ONNX's RoiAlign: each roi [x1, y1, x2, y2] (times spatial_scale, less half a pixel "
    "under half_pixel) of image batch_indices[i] pooled into output_height × output_width bins, "
    "each the average (or maximum) of a grid of bilinear samples, sampling_ratio² of them or "
    "ceil(bin size) per side when it is 0.",
)


def _grid_sample_shape(op):
    x, grid = op._inputs[0].shape, op._inputs[1].shape
    if x.rank is not None and x.rank < 3:
        raise ValueError(f"X must be [N, C, d1, ..., dr] with r >= 1, got {x}")
    if x.rank is not None and grid.rank is not None:
        if grid.rank != x.rank:
            raise ValueError(f"grid must have the rank of X ({x.rank}), got {grid}")
        if grid[-1] is not None and grid[-1] != x.rank - 2:
            raise ValueError(f"grid's last dimension must be {x.rank - 2} for X of shape {x}, got "
                             f"{grid}")  # fmt: skip
    if grid.rank is None:
        return TensorShape(None)
    n = grid[0] if grid[0] is not None else (x[0] if x.rank is not None else None)
    c = x[1] if x.rank is not None else None
    return TensorShape([n, c, *list(grid)[1:-1]])


defop(
    "_OnnxGridSample",
    inputs=["x: T", "grid: Tgrid"],
    outputs=["y: T"],
    attrs=[
        f"T: {_FLOAT}",
        f"Tgrid: {_FLOAT}",
        "mode: {'linear', 'nearest', 'cubic'} = 'linear'",
        "padding_mode: {'zeros', 'border', 'reflection'} = 'zeros'",
        "align_corners: bool = false",
    ],
    shape=_grid_sample_shape,
    doc="ONNX's GridSample: y[n, c, o...] interpolates x[n, c] at the normalized position "
    "grid[n, o..., :] (the last entry for x's first spatial axis, x for the last), N-linear, "
    "nearest (ties to even) or N-cubic (a = -0.75), positions outside padded with zeros, the "
    "border or reflections.",
)


def _unique_shape(op):
    x = op._inputs[0].shape
    axis = op.attrs["axis"]
    if not axis:
        return [TensorShape([None])] * 4
    if x.rank is None:
        return [TensorShape(None), TensorShape([None]), TensorShape([None]), TensorShape([None])]
    a = axis[0] % x.rank
    y = list(x)
    y[a] = None
    return [TensorShape(y), TensorShape([None]), TensorShape([x[a]]), TensorShape([None])]


defop(
    "_OnnxUnique",
    inputs=["x: T"],
    outputs=["y: T", "indices: int64", "inverse_indices: int64", "counts: int64"],
    attrs=["T: type", "axis: list(int) = []", "sorted: bool = true"],
    shape=_unique_shape,
    doc="ONNX's Unique: the distinct elements of x flattened (or, with one axis in axis, its "
    "distinct slices along it), ascending when sorted, else in order of first occurrence; the "
    "index of each one's first occurrence, each element's (slice's) position in y, and counts.",
)


def _col2im_shape(op):
    x = op._inputs[0].shape
    if x.rank not in (None, 3):
        raise ValueError(f"input must be 3-D [N, C * prod(block_shape), L], got {x}")
    image = constant_value(op._inputs[1])
    block = constant_value(op._inputs[2])
    if image is None:
        r = op._inputs[1].shape[0] if op._inputs[1].shape.rank == 1 else None
        return TensorShape(None if r is None else [None] * (r + 2))
    n = x[0] if x.rank == 3 else None
    c = None
    if block is not None and x.rank == 3 and x[1] is not None:
        kb = int(block.prod())
        c = x[1] // kb if kb > 0 and x[1] % kb == 0 else None
    return TensorShape([n, c, *(int(v) for v in image.reshape(-1))])


defop(
    "_OnnxCol2Im",
    inputs=["input: T", "image_shape: int64", "block_shape: int64"],
    outputs=["image: T"],
    attrs=[
        "T: {float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
        "uint32, uint64, complex64, complex128}",
        "dilations: list(int) = []",
        "pads: list(int) = []",
        "strides: list(int) = []",
    ],
    shape=_col2im_shape,
    doc="ONNX's Col2Im: the columns [N, C · prod(block_shape), L] of blocks (as Im2Col reads "
    "them, with dilations, pads and strides; empty means all 1 or all 0) summed back into an "
    "image [N, C, *image_shape].",
)
