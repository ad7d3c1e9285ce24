"""Non-maximum suppression for object detection: NonMaxSuppressionV3, V4 (padding to
max_output_size) and V5 (soft-NMS with a Gaussian weight, selected scores).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     boxes = rg.placeholder(rg.float32, [None, 4])
...     scores = rg.placeholder(rg.float32, [None])
...     idx = non_max_suppression(boxes, scores, 10, iou_threshold=0.5)
>>> idx.dtype, idx.shape
(rill.int32, TensorShape([None]))
"""

from __future__ import annotations

from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = ["non_max_suppression", "non_max_suppression_padded", "non_max_suppression_with_scores"]


def _nms_shape(op):
    boxes, scores = op._inputs[0].shape, op._inputs[1].shape
    if boxes.rank not in (None, 2) or (boxes.rank == 2 and boxes[1] not in (None, 4)):
        raise ValueError(f"boxes must have shape [num_boxes, 4], got {boxes}")
    if scores.rank not in (None, 1):
        raise ValueError(f"scores must be a vector, got shape {scores}")
    for t in op._inputs[2:]:
        if t.shape.rank not in (None, 0):
            raise ValueError(f"{t.name} must be a scalar, got shape {t.shape}")
    n = None
    if op.attrs.get("pad_to_max_output_size"):
        v = constant_value(op._inputs[2])
        n = None if v is None else int(v)
    outs = [TensorShape([n])]
    if op.type == "NonMaxSuppressionV5":
        outs.append(TensorShape([n]))
    if op.type != "NonMaxSuppressionV3":
        outs.append(TensorShape([]))
    return outs


_IN = ["boxes: T", "scores: T", "max_output_size: int32"]
_T = "T: {float16, float32} = float32"
defop(
    "NonMaxSuppressionV3",
    inputs=[*_IN, "iou_threshold: T_threshold", "score_threshold: T_threshold"],
    outputs=["selected_indices: int32"],
    attrs=[_T, "T_threshold: {float16, float32} = float32"],
    shape=_nms_shape,
    doc="Indices of boxes chosen greedily by descending score, skipping boxes whose IoU with a "
    "chosen one reaches iou_threshold and boxes scoring at most score_threshold.",
)
defop(
    "NonMaxSuppressionV4",
    inputs=[*_IN, "iou_threshold: T_threshold", "score_threshold: T_threshold"],
    outputs=["selected_indices: int32", "valid_outputs: int32"],
    attrs=[_T, "T_threshold: {float16, float32} = float32", "pad_to_max_output_size: bool = false"],
    shape=_nms_shape,
    doc="NonMaxSuppressionV3, optionally padded with zeros to max_output_size; valid_outputs "
    "counts the real ones.",
)
defop(
    "NonMaxSuppressionV5",
    inputs=[*_IN, "iou_threshold: T", "score_threshold: T", "soft_nms_sigma: T"],
    outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
    attrs=[_T, "pad_to_max_output_size: bool = false"],
    shape=_nms_shape,
    doc="NonMaxSuppressionV4 with soft-NMS: overlapping boxes' scores decay by "
    "exp(-iou²/(2·sigma)) instead of being dropped when soft_nms_sigma > 0.",
)


def _op(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def _scalars(boxes, *values):
    boxes = convert_to_tensor(boxes, name="boxes")
    return boxes, [convert_to_tensor(v, dtype=boxes.dtype) for v in values]


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5,
                        score_threshold=float("-inf"), name=None) -> Tensor:  # fmt: skip
    """tf.image.non_max_suppression (NonMaxSuppressionV3)."""
    boxes, (iou, score) = _scalars(boxes, iou_threshold, score_threshold)
    return _op("NonMaxSuppressionV3", [boxes, scores, max_output_size, iou, score],
               name=name).outputs[0]  # fmt: skip


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5,
                               score_threshold=float("-inf"), pad_to_max_output_size=False,
                               name=None):  # fmt: skip
    """(selected_indices, valid_outputs) (NonMaxSuppressionV4)."""
    boxes, (iou, score) = _scalars(boxes, iou_threshold, score_threshold)
    op = _op("NonMaxSuppressionV4", [boxes, scores, max_output_size, iou, score],
             {"pad_to_max_output_size": pad_to_max_output_size}, name)  # fmt: skip
    return op.outputs[0], op.outputs[1]


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold=0.5,
                                    score_threshold=float("-inf"), soft_nms_sigma=0.0,
                                    pad_to_max_output_size=False, name=None):  # fmt: skip
    """(selected_indices, selected_scores, valid_outputs) (NonMaxSuppressionV5)."""
    boxes, (iou, score, sigma) = _scalars(boxes, iou_threshold, score_threshold, soft_nms_sigma)
    op = _op("NonMaxSuppressionV5", [boxes, scores, max_output_size, iou, score, sigma],
             {"pad_to_max_output_size": pad_to_max_output_size}, name)  # fmt: skip
    return tuple(op.outputs)
