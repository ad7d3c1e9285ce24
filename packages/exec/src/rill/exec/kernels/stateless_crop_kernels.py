"""StatelessSampleDistortedBoundingBox on TensorFlow's Philox stream (issue 18).

The seed's stream is read one uint32 at a time. Each attempt (up to max_attempts) draws an
aspect ratio (a float uniform over the range), then a height uniform in the integers between
the heights whose areas bound area_range (exact rejection sampling of integers, as TensorFlow's
ExactUniformInt), then the crop's y and x offsets the same way; the crop is kept when it covers
at least min_object_covered of one box (or the whole image when there are none and that is
allowed). No attempt succeeding gives the whole image. Arithmetic is in float32, rounding to
nearest-even where TensorFlow calls lrintf.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.stateless_random_kernels import _uint32_to_float, key_counter
from rill.exec.kernels.stateless_sampling_kernels import _Stream
from rill.graph.errors import InvalidArgumentError

f32 = np.float32


class _Bits:
    """TensorFlow's SimplePhilox over one stream: uint32 values in order."""

    def __init__(self, s: _Stream):
        self.s, self.buf = s, []

    def rand32(self) -> int:
        if not self.buf:
            self.buf = [int(v) for v in self.s.call()][::-1]
        return self.buf.pop()

    def rand_float(self) -> np.float32:
        return _uint32_to_float(np.array([self.rand32()], np.uint32))[0]

    def uniform(self, n: int) -> int:
        n &= 0xFFFFFFFF
        if n == 0:
            self.rand32()
            return 0
        if n & (n - 1) == 0:
            return self.rand32() & (n - 1)
        rem = (0xFFFFFFFF % n) + 1
        while True:
            r = self.rand32()
            if r >= rem:
                return r % n


def _lrint(x) -> int:
    return int(np.rint(f32(x)))


def _area(r) -> np.float32:
    return f32((r[2] - r[0]) * (r[3] - r[1]))


def _covers(crop, minimum, boxes) -> bool:
    if _area(crop) < f32(1.0):
        return False
    for b in boxes:
        a = _area(b)
        if a < f32(1.0):
            continue
        lo_x, lo_y = max(crop[0], b[0]), max(crop[1], b[1])
        hi_x, hi_y = min(crop[2], b[2]), min(crop[3], b[3])
        inter = (0, 0, 0, 0) if lo_x > hi_x or lo_y > hi_y else (lo_x, lo_y, hi_x, hi_y)
        if f32(_area(inter) / a) >= minimum:
            return True
    return False


def _random_crop(width, height, min_rel, max_rel, aspect, bits: _Bits):
    if max_rel <= 0 or aspect <= 0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return None
    min_area = f32(f32(min_rel * f32(width)) * f32(height))
    max_area = f32(f32(max_rel * f32(width)) * f32(height))
    h = _lrint(np.sqrt(f32(min_area / aspect)))
    max_h = _lrint(np.sqrt(f32(max_area / aspect)))
    if _lrint(f32(max_h) * aspect) > width:
        max_h = int((width + 0.5 - float(f32(1e-7))) / float(aspect))
        if _lrint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += bits.uniform(max_h - h + 1)
    w = _lrint(f32(h) * aspect)
    area = f32(w * h)
    if area < min_area:
        h += 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area > max_area:
        h -= 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = bits.uniform(height - h) if h < height else 0
    x = bits.uniform(width - w) if w < width else 0
    return (x, y, x + w, y + h)


@register_kernel("StatelessSampleDistortedBoundingBox")
def stateless_sample_distorted_bounding_box(T, Tseed, aspect_ratio_range, area_range,
                                            max_attempts, use_image_if_no_bounding_boxes):  # fmt: skip
    ar, area = [f32(v) for v in aspect_ratio_range], [f32(v) for v in area_range]
    if len(ar) != 2 or not (ar[0] > 0 and ar[1] > 0):
        raise InvalidArgumentError(f"Aspect ratio range must be 2 positive values, got {ar}")
    if len(area) != 2 or not (0 < area[0] <= 1 and 0 < area[1] <= 1):
        raise InvalidArgumentError(f"Area range must be 2 values in (0, 1], got {area}")
    if max_attempts <= 0:
        raise InvalidArgumentError(f"Max attempts must be positive: {max_attempts}")

    def compute(image_size, bounding_boxes, min_object_covered, seed):
        size = np.asarray(image_size)
        if size.shape != (3,):
            raise InvalidArgumentError(
                f"image_size must be 1-dimensional with 3 elements, got shape {list(size.shape)}"
            )
        height, width = int(size[0]), int(size[1])
        if not (0 <= height < 2**31 - 1 and 0 <= width < 2**31 - 1):
            raise InvalidArgumentError("image height and width must be in [0, int32 max)")
        boxes = np.asarray(bounding_boxes, np.float32)
        if boxes.ndim != 3 or boxes.shape[-1] != 4:
            raise InvalidArgumentError(
                f"input boxes must be 3-dimensional [batch, num_boxes, 4], got shape "
                f"{list(boxes.shape)}"
            )
        moc = np.asarray(min_object_covered, np.float32)
        if moc.ndim:
            raise InvalidArgumentError(
                f"min_object_covered must be 0-D, got shape {list(moc.shape)}"
            )
        if not moc >= 0:
            raise InvalidArgumentError(f"Min object covered must be non-negative: {float(moc)}")
        flat = boxes.reshape(-1, 4)
        bad = ~((flat >= 0) & (flat <= 1))
        if bad.any():
            raise InvalidArgumentError(
                f"All bounding box coordinates must be in [0.0, 1.0]: {float(flat[bad][0])}"
            )
        rects = [(int(f32(b[1] * f32(width))), int(f32(b[0] * f32(height))),
                  int(f32(b[3] * f32(width))), int(f32(b[2] * f32(height)))) for b in flat]  # fmt: skip
        image = (0, 0, width, height)
        if not rects:
            if not use_image_if_no_bounding_boxes:
                raise InvalidArgumentError(
                    "No bounding boxes provided as input. One must enable "
                    "use_image_if_no_bounding_boxes if you wish to not provide any bounding "
                    "boxes."
                )
            rects = [image]
        key, base = key_counter(seed)
        bits = _Bits(_Stream(key, base, chunk=8))
        crop = None
        for _ in range(max_attempts):
            aspect = f32(bits.rand_float() * f32(ar[1] - ar[0]) + ar[0])
            c = _random_crop(width, height, area[0], area[1], aspect, bits)
            if c is not None and _covers(c, f32(moc), rects):
                crop = c
                break
        crop = crop or image
        t = np.dtype(T.np)
        begin = np.array([crop[1], crop[0], 0], np.int64).astype(t)
        # -1 keeps every channel (255 as uint8, wrapping as TensorFlow's cast)
        extent = np.array([crop[3] - crop[1], crop[2] - crop[0], -1], np.int64).astype(t)
        hf, wf = f32(height), f32(width)
        box = np.array([[[f32(crop[1]) / hf, f32(crop[0]) / wf, f32(crop[3]) / hf,
                          f32(crop[2]) / wf]]], np.float32)  # fmt: skip
        return begin, extent, box

    return compute
