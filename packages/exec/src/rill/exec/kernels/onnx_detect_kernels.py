"""CPU kernels for rill.graph.ops.onnx_detect_ops: ONNX's NonMaxSuppression, RoiAlign,
GridSample, Unique and Col2Im, as the ONNX specification describes them (numpy; interpolation in
float64, rounded to the input's dtype once at the end)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _shape(a) -> TensorShape:
    return TensorShape(np.shape(a))


# -- NonMaxSuppression --------------------------------------------------------------------------


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[..., 4] boxes as [ymin, xmin, ymax, xmax]."""
    if center_point_box:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)  # fmt: skip


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one [4] corner box with each of [k, 4] others (0 where either area is empty)."""
    ih = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iw = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.maximum(ih, 0) * np.maximum(iw, 0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    empty = (area <= 0) | (areas <= 0) | (union <= 0)
    return np.where(empty, 0, inter / np.where(empty, 1, union))


def _select(boxes: np.ndarray, scores: np.ndarray, limit: int, iou_t, score_t) -> list[int]:
    """Greedy selection for one batch entry and class: by score descending, ties to the lower
    index; each chosen box drops the remaining ones it overlaps by IoU > iou_t."""
    cand = np.flatnonzero(scores > score_t)
    order = cand[np.argsort(-scores[cand], kind="stable")]
    chosen: list[int] = []
    while order.size and len(chosen) < limit:
        i = int(order[0])
        chosen.append(i)
        rest = order[1:]
        order = rest[_iou(boxes[i], boxes[rest]) <= iou_t]
    return chosen


@register_kernel("_OnnxNonMaxSuppression", expensive=True)
def onnx_nms(T, center_point_box):
    if center_point_box not in (0, 1):
        raise InvalidArgumentError(
            f"NonMaxSuppression: center_point_box must be 0 or 1, got {center_point_box}"
        )

    def compute(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold):
        if boxes.ndim != 3 or boxes.shape[2] != 4:
            raise InvalidArgumentError(
                f"NonMaxSuppression: boxes must be [num_batches, num_boxes, 4], got {_shape(boxes)}"
            )
        if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != \
                boxes.shape[1]:  # fmt: skip
            raise InvalidArgumentError(
                f"NonMaxSuppression: scores must be [num_batches, num_classes, num_boxes] = "
                f"[{boxes.shape[0]}, ?, {boxes.shape[1]}] for boxes {_shape(boxes)}, got "
                f"{_shape(scores)}"
            )
        for name, v in (("max_output_boxes_per_class", max_output_boxes_per_class),
                        ("iou_threshold", iou_threshold),
                        ("score_threshold", score_threshold)):  # fmt: skip
            if np.size(v) != 1:
                raise InvalidArgumentError(
                    f"NonMaxSuppression: {name} must hold one value, got shape {_shape(v)}"
                )
        limit = max(int(np.reshape(max_output_boxes_per_class, ())), 0)
        iou_t = np.float32(np.reshape(iou_threshold, ()))
        score_t = np.float32(np.reshape(score_threshold, ()))
        if not 0 <= iou_t <= 1:
            raise InvalidArgumentError(
                f"NonMaxSuppression: iou_threshold must be in [0, 1], got {iou_t}"
            )
        corners = _corners(boxes.astype(np.float32), center_point_box)
        rows = []
        for b, c in itertools.product(range(scores.shape[0]), range(scores.shape[1])):
            for i in _select(corners[b], scores[b, c].astype(np.float32), limit, iou_t, score_t):
                rows.append((b, c, i))
        return np.asarray(rows, np.int64).reshape(-1, 3)

    return compute


# -- RoiAlign -----------------------------------------------------------------------------------


def _axis_taps(pos: np.ndarray, size: int):
    """Bilinear taps along one axis: (low, high, weight of low, weight of high); samples
    beyond one pixel outside the map weigh 0."""
    outside = (pos < -1) | (pos > size)
    p = np.maximum(pos, 0)
    low = np.floor(p).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    p = np.where(edge, low, p)
    frac = p - low
    keep = ~outside
    return low, high, (1 - frac) * keep, frac * keep


@register_kernel("_OnnxRoiAlign", expensive=True)
def onnx_roi_align(T, mode, output_height, output_width, sampling_ratio, spatial_scale,
                   half_pixel):  # fmt: skip
    oh, ow, sr = output_height, output_width, sampling_ratio
    offset = 0.5 if half_pixel else 0.0

    def compute(x, rois, batch_indices):
        if x.ndim != 4:
            raise InvalidArgumentError(f"RoiAlign: X must be 4-D [N, C, H, W], got {_shape(x)}")
        if rois.ndim != 2 or rois.shape[1] != 4:
            raise InvalidArgumentError(f"RoiAlign: rois must be [num_rois, 4], got "
                                       f"{_shape(rois)}")  # fmt: skip
        if batch_indices.shape != (rois.shape[0],):
            raise InvalidArgumentError(
                f"RoiAlign: batch_indices must be [num_rois] = [{rois.shape[0]}], got "
                f"{_shape(batch_indices)}"
            )
        bad = (batch_indices < 0) | (batch_indices >= x.shape[0])
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"RoiAlign: batch_indices[{i}] = {int(batch_indices[i])} is not an image of the "
                f"batch of {x.shape[0]}"
            )
        n_rois, (_, c, h, w) = rois.shape[0], x.shape
        y = np.zeros((n_rois, c, oh, ow), np.float64)
        for r in range(n_rois):
            x1, y1, x2, y2 = rois[r].astype(np.float64) * spatial_scale - offset
            rh, rw = y2 - y1, x2 - x1
            if not half_pixel:
                rh, rw = max(rh, 1.0), max(rw, 1.0)
            bh, bw = rh / oh, rw / ow
            gh = sr if sr > 0 else max(math.ceil(rh / oh), 0)
            gw = sr if sr > 0 else max(math.ceil(rw / ow), 0)
            if gh == 0 or gw == 0:
                continue
            ys = y1 + (np.arange(oh)[:, None] * bh + (np.arange(gh) + 0.5) * bh / gh).reshape(-1)
            xs = x1 + (np.arange(ow)[:, None] * bw + (np.arange(gw) + 0.5) * bw / gw).reshape(-1)
            ylo, yhi, wyl, wyh = _axis_taps(ys, h)
            xlo, xhi, wxl, wxh = _axis_taps(xs, w)
            img = x[int(batch_indices[r])].astype(np.float64)
            terms = [
                img[:, yi][:, :, xi] * (wy[:, None] * wx[None, :])
                for yi, wy in ((ylo, wyl), (yhi, wyh))
                for xi, wx in ((xlo, wxl), (xhi, wxh))
            ]
            if mode == "avg":
                s = sum(terms).reshape(c, oh, gh, ow, gw)
                y[r] = s.sum(axis=(2, 4)) / (gh * gw)
            else:
                s = np.maximum.reduce(terms).reshape(c, oh, gh, ow, gw)
                y[r] = s.max(axis=(2, 4))
        return y.astype(T.np)

    return compute


# -- GridSample ---------------------------------------------------------------------------------

_CUBIC_A = -0.75


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """The weights of the taps at -1, 0, 1, 2 around a position t ∈ [0, 1) past the tap 0."""
    a = _CUBIC_A

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.zeros_like(v)
    d = np.abs(v - lo)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, lo + extra, hi - extra)


def _pad(v: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    """A position (or tap) brought inside [0, size - 1] by border or reflection padding."""
    if padding == "border":
        return np.clip(v, 0, size - 1)
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    return np.clip(_reflect(v, lo, hi), 0, size - 1)


def _grid_taps(pos: np.ndarray, size: int, mode: str, padding: str, align: bool):
    """[(index, weight)] along one axis; an index out of range (zeros padding) has weight 0 and
    is clamped so that it can still be read."""
    if mode != "cubic" and padding != "zeros":
        pos = _pad(pos, size, padding, align)
    if mode == "nearest":
        taps = [(np.rint(pos), np.ones_like(pos))]
    elif mode == "linear":
        lo = np.floor(pos)
        t = pos - lo
        taps = [(lo, 1 - t), (lo + 1, t)]
    else:
        lo = np.floor(pos)
        taps = list(zip((lo - 1, lo, lo + 1, lo + 2), _cubic_weights(pos - lo), strict=True))
    out = []
    for idx, wt in taps:
        if padding == "zeros" or mode != "cubic":
            wt = np.where((idx < 0) | (idx > size - 1), 0.0, wt)
        else:
            idx = np.rint(_pad(idx, size, padding, align))
        out.append((np.clip(idx, 0, size - 1).astype(np.int64), wt))
    return out


@register_kernel("_OnnxGridSample", expensive=True)
def onnx_grid_sample(T, Tgrid, mode, padding_mode, align_corners):
    def compute(x, grid):
        r = x.ndim - 2
        if r < 1:
            raise InvalidArgumentError(
                f"GridSample: X must be [N, C, d1, ..., dr] with r >= 1, got {_shape(x)}"
            )
        if grid.ndim != r + 2 or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
            raise InvalidArgumentError(
                f"GridSample: grid must be [N, D1_out, ..., D{r}_out, {r}] with N = "
                f"{x.shape[0]} for X of shape {_shape(x)}, got {_shape(grid)}"
            )
        if mode == "cubic" and r != 2:
            raise InvalidArgumentError(f"GridSample: mode cubic needs 4-D X, got {_shape(x)}")
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        g = grid.astype(np.float64)
        taps = []
        for a, size in enumerate(spatial):
            u = g[..., r - 1 - a]
            pos = (u + 1) / 2 * (size - 1) if align_corners else ((u + 1) * size - 1) / 2
            taps.append(_grid_taps(pos, size, mode, padding_mode, align_corners))
        rows = np.moveaxis(x, 1, -1).reshape(-1, c).astype(np.float64)
        batch = np.arange(n).reshape((n,) + (1,) * r)
        acc = np.zeros(grid.shape[:-1] + (c,), np.float64)
        for combo in itertools.product(*taps):
            flat, weight = batch, 1.0
            for (idx, wt), size in zip(combo, spatial, strict=True):
                flat = flat * size + idx
                weight = weight * wt
            acc += rows[flat] * weight[..., None]
        return np.moveaxis(acc, -1, 1).astype(T.np)

    return compute


# -- Unique -------------------------------------------------------------------------------------


@register_kernel("_OnnxUnique", expensive=True)
def onnx_unique(T, axis, sorted):  # noqa: A002 - ONNX's attr name
    if len(axis) > 1:
        raise InvalidArgumentError(f"Unique: axis must be one axis or none, got {list(axis)}")

    def compute(x):
        if axis:
            if not -x.ndim <= axis[0] < x.ndim:
                raise InvalidArgumentError(
                    f"Unique: axis {axis[0]} is out of range for X of shape {_shape(x)}"
                )
            a = axis[0] % x.ndim
            keys = np.moveaxis(x, a, 0).reshape(x.shape[a], -1)
        else:
            a = None
            keys = x.reshape(-1, 1)
        if keys.dtype.kind not in "biufcUSO":
            keys = keys.astype(np.float64)  # bfloat16 and float8s: exact, and numpy sorts them
        if keys.shape[1] == 1:
            _, first, inverse, counts = np.unique(keys[:, 0], return_index=True,
                                                  return_inverse=True, return_counts=True)  # fmt: skip
        else:
            _, first, inverse, counts = np.unique(keys, axis=0, return_index=True,
                                                  return_inverse=True, return_counts=True)  # fmt: skip
        inverse = inverse.reshape(-1)
        if not sorted:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        y = x.reshape(-1)[first] if a is None else np.take(x, first, axis=a)
        return y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)

    return compute


# -- Col2Im -------------------------------------------------------------------------------------


@register_kernel("_OnnxCol2Im", expensive=True)
def onnx_col2im(T, dilations, pads, strides):
    def compute(cols, image_shape, block_shape):
        image = [int(v) for v in np.reshape(image_shape, -1)]
        block = [int(v) for v in np.reshape(block_shape, -1)]
        r = len(image)
        dil = list(dilations) or [1] * r
        pad = list(pads) or [0] * (2 * r)
        step = list(strides) or [1] * r
        if len(block) != r or len(dil) != r or len(step) != r or len(pad) != 2 * r:
            raise InvalidArgumentError(
                f"Col2Im: image_shape {image}, block_shape {block}, dilations {dil}, strides "
                f"{step} and pads {pad} must describe the same {r} spatial axes (pads twice)"
            )
        if cols.ndim != 3:
            raise InvalidArgumentError(
                f"Col2Im: input must be [N, C * prod(block_shape), L], got {_shape(cols)}"
            )
        kb = math.prod(block)
        if kb <= 0 or min(block) <= 0 or cols.shape[1] % kb:
            raise InvalidArgumentError(
                f"Col2Im: input's second dimension {cols.shape[1]} is not a multiple of "
                f"prod(block_shape {block}) = {kb}"
            )
        padded = [image[i] + pad[i] + pad[r + i] for i in range(r)]
        span = [dil[i] * (block[i] - 1) + 1 for i in range(r)]
        counts = [(padded[i] - span[i]) // step[i] + 1 for i in range(r)]
        if min(counts) < 1 or math.prod(counts) != cols.shape[2]:
            raise InvalidArgumentError(
                f"Col2Im: {cols.shape[2]} blocks given, but blocks {block} (dilations {dil}) at "
                f"strides {step} fit {counts} times into the padded image {padded}"
            )
        n, c = cols.shape[0], cols.shape[1] // kb
        out = np.zeros((n, c, *padded), cols.dtype)
        blocks = cols.reshape(n, c, *block, *counts)
        for k in np.ndindex(*block):
            at = tuple(
                slice(k[i] * dil[i], k[i] * dil[i] + (counts[i] - 1) * step[i] + 1, step[i])
                for i in range(r)
            )
            out[(slice(None), slice(None), *at)] += blocks[(slice(None), slice(None), *k)]
        crop = tuple(slice(pad[i], pad[i] + image[i]) for i in range(r))
        return out[(slice(None), slice(None), *crop)]

    return compute
