"""Kernels for rill.graph.ops.image_ops' SpaceToBatchND / BatchToSpaceND and the bilinear and
nearest-neighbor resizes with their gradients.

Pixel mapping (TensorFlow's): scale = (in - 1) / (out - 1) with align_corners (and out > 1),
else in / out. Bilinear samples at i·scale, or (i + ½)·scale - ½ with half_pixel_centers,
between floor (clamped at 0) and ceil (clamped at in - 1). Nearest takes floor(i·scale)
(round with align_corners; (i + ½)·scale with half_pixel_centers), clamped to [0, in - 1].
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _blocks(block_shape, amounts, x, what):
    block = [int(b) for b in np.asarray(block_shape).reshape(-1)]
    m = len(block)
    a = np.asarray(amounts).reshape(-1)
    if a.size != 2 * m:
        raise InvalidArgumentError(f"{what} must have shape [{m}, 2], got {a.size} values")
    a = a.reshape(m, 2).astype(np.int64)
    if any(b < 1 for b in block):
        raise InvalidArgumentError(f"block_shape must be positive, got {block}")
    if (a < 0).any():
        raise InvalidArgumentError(f"{what} must be non-negative, got {a.tolist()}")
    if x.ndim < m + 1:
        raise InvalidArgumentError(
            f"input rank should be >= {m + 1} instead of {x.ndim} (shape {TensorShape(x.shape)})"
        )
    return block, a


@register_kernel("SpaceToBatchND")
def space_to_batch_nd(T, Tblock_shape, Tpaddings):
    def compute(x, block_shape, paddings):
        block, pads = _blocks(block_shape, paddings, x, "paddings")
        m = len(block)
        width = [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)] * (x.ndim - m - 1)
        padded = np.pad(x, width)
        for i, b in enumerate(block):
            if padded.shape[1 + i] % b:
                raise InvalidArgumentError(
                    f"padded_shape[{i}]={padded.shape[1 + i]} is not divisible by "
                    f"block_shape[{i}]={b}"
                )
        n, rest = padded.shape[0], padded.shape[m + 1 :]
        shape = [n]
        for i, b in enumerate(block):
            shape += [padded.shape[1 + i] // b, b]
        y = padded.reshape(*shape, *rest)
        perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
        perm += list(range(1 + 2 * m, y.ndim))
        y = y.transpose(perm)
        return np.ascontiguousarray(
            y.reshape(
                n * int(np.prod(block)),
                *[padded.shape[1 + i] // b for i, b in enumerate(block)],
                *rest,
            )
        )

    return compute


@register_kernel("BatchToSpaceND")
def batch_to_space_nd(T, Tblock_shape, Tcrops):
    def compute(x, block_shape, crops):
        block, cr = _blocks(block_shape, crops, x, "crops")
        m = len(block)
        prod = int(np.prod(block))
        if x.shape[0] % prod:
            raise InvalidArgumentError(
                f"Input batch dimension ({x.shape[0]}) is not divisible by product of block "
                f"sizes ({prod})"
            )
        n = x.shape[0] // prod
        spatial, rest = x.shape[1 : m + 1], x.shape[m + 1 :]
        y = x.reshape(*block, n, *spatial, *rest)
        perm = [m]
        for i in range(m):
            perm += [m + 1 + i, i]
        perm += list(range(2 * m + 1, y.ndim))
        y = y.transpose(perm).reshape(n, *[s * b for s, b in zip(spatial, block)], *rest)
        index = [slice(None)]
        for i in range(m):
            size = y.shape[1 + i]
            lo, hi = int(cr[i, 0]), int(cr[i, 1])
            if lo + hi > size:
                raise InvalidArgumentError(f"crops {cr[i].tolist()} exceed dimension {size}")
            index.append(slice(lo, size - hi))
        return np.ascontiguousarray(y[tuple(index)])

    return compute


# -- resizing -------------------------------------------------------------------------------------


def _scale(in_size: int, out_size: int, align_corners: bool) -> float:
    if align_corners and out_size > 1:
        return (in_size - 1) / (out_size - 1)
    return in_size / out_size


def _bilinear_weights(in_size, out_size, align_corners, half_pixel):
    scale = _scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=np.float64)
    src = (i + 0.5) * scale - 0.5 if half_pixel else i * scale
    src = src.astype(np.float32)
    floor = np.floor(src)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(src), in_size - 1).astype(np.int64)
    lerp = (src - floor).astype(np.float32)
    return lower, upper, lerp


def _nearest_index(in_size, out_size, align_corners, half_pixel):
    scale = np.float32(_scale(in_size, out_size, align_corners))
    i = np.arange(out_size, dtype=np.float32)
    src = (i + np.float32(0.5)) * scale if half_pixel else i * scale
    idx = np.floor(src + np.float32(0.5)) if align_corners else np.floor(src)  # roundf: halves up
    return np.clip(idx.astype(np.int64), 0, in_size - 1)


def _size(size, x):
    s = np.asarray(size).reshape(-1)
    if s.size != 2:
        raise InvalidArgumentError(f"size must be a 1-D int32 Tensor of 2 elements, got {s.size}")
    h, w = int(s[0]), int(s[1])
    if h <= 0 or w <= 0:
        raise InvalidArgumentError(f"output dimensions must be positive, got {h}x{w}")
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional, got {TensorShape(x.shape)}")
    return h, w


def _check_half_pixel(align_corners, half_pixel_centers):
    if align_corners and half_pixel_centers:
        raise InvalidArgumentError("If half_pixel_centers is True, align_corners must be False.")


@register_kernel("ResizeBilinear")
def resize_bilinear(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(images, size):
        h, w = _size(size, images)
        x = images.astype(np.float32)
        y0, y1, ly = _bilinear_weights(x.shape[1], h, align_corners, half_pixel_centers)
        x0, x1, lx = _bilinear_weights(x.shape[2], w, align_corners, half_pixel_centers)
        top_left = x[:, y0][:, :, x0]
        top_right = x[:, y0][:, :, x1]
        bottom_left = x[:, y1][:, :, x0]
        bottom_right = x[:, y1][:, :, x1]
        lx_ = lx[None, None, :, None]
        top = top_left + (top_right - top_left) * lx_
        bottom = bottom_left + (bottom_right - bottom_left) * lx_
        return (top + (bottom - top) * ly[None, :, None, None]).astype(np.float32)

    return compute


@register_kernel("ResizeBilinearGrad")
def resize_bilinear_grad(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(grads, original_image):
        n, h, w, c = original_image.shape
        gh, gw = grads.shape[1:3]
        y0, y1, ly = _bilinear_weights(h, gh, align_corners, half_pixel_centers)
        x0, x1, lx = _bilinear_weights(w, gw, align_corners, half_pixel_centers)
        g = grads.astype(np.float64)
        out = np.zeros((n, h, w, c), np.float64)
        wy = [(y0, 1 - ly), (y1, ly)]
        wx = [(x0, 1 - lx), (x1, lx)]
        for ys, fy in wy:
            for xs, fx in wx:
                contrib = g * fy[None, :, None, None] * fx[None, None, :, None]
                np.add.at(out, (slice(None), ys[:, None], xs[None, :]), contrib)
        return out.astype(T.np)

    return compute


@register_kernel("ResizeNearestNeighbor")
def resize_nearest_neighbor(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(images, size):
        h, w = _size(size, images)
        ys = _nearest_index(images.shape[1], h, align_corners, half_pixel_centers)
        xs = _nearest_index(images.shape[2], w, align_corners, half_pixel_centers)
        return np.ascontiguousarray(images[:, ys][:, :, xs])

    return compute


@register_kernel("ResizeNearestNeighborGrad")
def resize_nearest_neighbor_grad(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(grads, size):
        h, w = _size(size, grads)
        n, gh, gw, c = grads.shape
        # forward map: output pixel (i, j) took input (ys[i], xs[j]) of an h x w image
        ys = _nearest_index(h, gh, align_corners, half_pixel_centers)
        xs = _nearest_index(w, gw, align_corners, half_pixel_centers)
        out = np.zeros((n, h, w, c), grads.dtype)
        np.add.at(out, (slice(None), ys[:, None], xs[None, :]), grads)
        return out

    return compute
