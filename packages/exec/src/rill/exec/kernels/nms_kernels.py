"""Kernels for rill.graph.ops.nms_ops, following TensorFlow's CPU algorithm: candidates above
score_threshold in a priority queue by (score descending, index ascending); each popped
candidate is compared with the boxes selected since it was last examined, newest first; an IoU
at or above iou_threshold drops it. Under soft-NMS (sigma > 0) nothing is dropped by IoU: the
score decays by exp(-iou²/(2σ)) per overlap and, if it changed but stays above
score_threshold, the candidate goes back into the queue."""

from __future__ import annotations

import heapq
import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _iou(boxes: np.ndarray, i: int, j: int) -> float:
    a, b = boxes[i], boxes[j]
    ymin_i, ymax_i = min(a[0], a[2]), max(a[0], a[2])
    xmin_i, xmax_i = min(a[1], a[3]), max(a[1], a[3])
    ymin_j, ymax_j = min(b[0], b[2]), max(b[0], b[2])
    xmin_j, xmax_j = min(b[1], b[3]), max(b[1], b[3])
    area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i)
    area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j)
    if area_i <= 0 or area_j <= 0:
        return np.float32(0.0)
    inter_h = max(min(ymax_i, ymax_j) - max(ymin_i, ymin_j), np.float32(0.0))
    inter_w = max(min(xmax_i, xmax_j) - max(xmin_i, xmin_j), np.float32(0.0))
    inter = inter_h * inter_w
    return inter / (area_i + area_j - inter)


def nms(boxes, scores, max_output_size, iou_threshold, score_threshold, sigma=0.0):
    """(selected indices, their scores), as TensorFlow's DoNonMaxSuppressionOp."""
    boxes = np.asarray(boxes, np.float32)
    scores = np.asarray(scores, np.float32)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise InvalidArgumentError(
            f"boxes must be 2-D with 4 columns, got {TensorShape(boxes.shape)}"
        )
    if scores.shape != (boxes.shape[0],):
        raise InvalidArgumentError(
            f"scores has incompatible shape {TensorShape(scores.shape)} for {boxes.shape[0]} boxes"
        )
    n_out = int(max_output_size)
    if n_out < 0:
        raise InvalidArgumentError(f"max_output_size must be non-negative, got {n_out}")
    iou_t, score_t = np.float32(iou_threshold), np.float32(score_threshold)
    if not 0 <= iou_t <= 1:
        raise InvalidArgumentError(f"iou_threshold must be in [0, 1], got {iou_t}")
    sigma = float(sigma)
    if sigma < 0:
        raise InvalidArgumentError(f"soft_nms_sigma must be non-negative, got {sigma}")
    soft = sigma > 0
    scale = np.float32(-0.5 / sigma) if soft else np.float32(0.0)
    heap = [(-s, i, 0, s) for i, s in enumerate(scores) if s > score_t]
    heapq.heapify(heap)
    selected, selected_scores = [], []
    while len(selected) < n_out and heap:
        _, i, begin, score = heapq.heappop(heap)
        original = score
        hard = False
        for j in range(len(selected) - 1, begin - 1, -1):
            sim = _iou(boxes, i, selected[j])
            weight = np.float32(math.exp(scale * sim * sim))
            if not soft and sim > iou_t:
                weight = np.float32(0)
            score = np.float32(score * weight)
            if not soft and sim >= iou_t:
                hard = True
                break
            if score <= score_t:
                break
        if hard:
            continue
        if score == original:
            selected.append(i)
            selected_scores.append(score)
        elif score > score_t:
            heapq.heappush(heap, (-score, i, len(selected), score))
    return np.array(selected, np.int32), np.array(selected_scores, np.float32)


def _pad(values, n, dtype):
    out = np.zeros(n, dtype)
    out[: len(values)] = values
    return out


@register_kernel("NonMaxSuppressionV3")
def nms_v3(T, T_threshold):
    def compute(boxes, scores, max_output_size, iou_threshold, score_threshold):
        return nms(boxes, scores, max_output_size, iou_threshold, score_threshold)[0]

    return compute


@register_kernel("NonMaxSuppressionV4")
def nms_v4(T, T_threshold, pad_to_max_output_size):
    def compute(boxes, scores, max_output_size, iou_threshold, score_threshold):
        idx, _ = nms(boxes, scores, max_output_size, iou_threshold, score_threshold)
        valid = np.int32(len(idx))
        if pad_to_max_output_size:
            idx = _pad(idx, int(max_output_size), np.int32)
        return idx, valid

    return compute


@register_kernel("NonMaxSuppressionV5")
def nms_v5(T, pad_to_max_output_size):
    def compute(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma):
        idx, sc = nms(boxes, scores, max_output_size, iou_threshold, score_threshold,
                      soft_nms_sigma)  # fmt: skip
        valid = np.int32(len(idx))
        if pad_to_max_output_size:
            idx = _pad(idx, int(max_output_size), np.int32)
            sc = _pad(sc, int(max_output_size), np.float32)
        return idx, sc.astype(T.np), valid

    return compute
