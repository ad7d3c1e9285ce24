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


# -- patches --------------------------------------------------------------------------------------


def _patch_geometry(x_shape, ksizes, strides, rates, padding):
    _, h, w, _ = x_shape
    kh, kw = ksizes[1:3]
    sh, sw = strides[1:3]
    rh, rw = rates[1:3]
    eh, ew = kh + (kh - 1) * (rh - 1), kw + (kw - 1) * (rw - 1)
    if padding == "VALID":
        oh, ow = (h - eh) // sh + 1, (w - ew) // sw + 1
        top = left = 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        top = max((oh - 1) * sh + eh - h, 0) // 2
        left = max((ow - 1) * sw + ew - w, 0) // 2
    oh, ow = max(oh, 0), max(ow, 0)
    return kh, kw, sh, sw, rh, rw, oh, ow, top, left


@register_kernel("ExtractImagePatches")
def extract_image_patches(ksizes, strides, rates, T, padding):
    def compute(x):
        if x.ndim != 4:
            raise InvalidArgumentError(f"images must be 4-D, got {TensorShape(x.shape)}")
        n, h, w, c = x.shape
        kh, kw, sh, sw, rh, rw, oh, ow, top, left = _patch_geometry(
            x.shape, ksizes, strides, rates, padding
        )
        out = np.zeros((n, oh, ow, kh, kw, c), x.dtype)
        rows = np.arange(oh) * sh - top
        cols = np.arange(ow) * sw - left
        for i in range(kh):
            r = rows + i * rh
            rin = (r >= 0) & (r < h)
            for j in range(kw):
                cc = cols + j * rw
                cin = (cc >= 0) & (cc < w)
                v = x[:, np.clip(r, 0, h - 1)][:, :, np.clip(cc, 0, w - 1)]
                mask = (rin[:, None] & cin[None, :])[None, :, :, None]
                out[:, :, :, i, j] = np.where(mask, v, np.zeros((), x.dtype))
        return out.reshape(n, oh, ow, kh * kw * c)

    return compute


@register_kernel("_ExtractImagePatchesGrad")
def extract_image_patches_grad(ksizes, strides, rates, T, padding):
    def compute(grad, x):
        n, h, w, c = x.shape
        kh, kw, sh, sw, rh, rw, oh, ow, top, left = _patch_geometry(
            x.shape, ksizes, strides, rates, padding
        )
        g = grad.reshape(n, oh, ow, kh, kw, c).astype(np.float64)
        out = np.zeros((n, h, w, c), np.float64)
        rows = np.arange(oh) * sh - top
        cols = np.arange(ow) * sw - left
        for i in range(kh):
            r = rows + i * rh
            for j in range(kw):
                cc = cols + j * rw
                ri = np.nonzero((r >= 0) & (r < h))[0]
                ci = np.nonzero((cc >= 0) & (cc < w))[0]
                if ri.size == 0 or ci.size == 0:
                    continue
                np.add.at(out, (slice(None), r[ri][:, None], cc[ci][None, :]),
                          g[:, ri][:, :, ci][:, :, :, i, j])  # fmt: skip
        return out.astype(x.dtype)

    return compute


# -- crop and resize ------------------------------------------------------------------------------


def _crop_coords(box_lo, box_hi, size, crop):
    """Sample positions (float32) of one axis of one box, TensorFlow's formula."""
    if crop > 1:
        scale = (box_hi - box_lo) * (size - 1) / (crop - 1)
        return (box_lo * (size - 1) + np.arange(crop) * scale).astype(np.float32)
    return np.full(1, 0.5 * (box_lo + box_hi) * (size - 1), np.float32)


def _check_crop_inputs(image, boxes, box_ind):
    if image.ndim != 4:
        raise InvalidArgumentError(f"image must be 4-D, got {TensorShape(image.shape)}")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise InvalidArgumentError(
            f"boxes must be 2-D [num_boxes, 4], got {TensorShape(boxes.shape)}"
        )
    if box_ind.shape != (boxes.shape[0],):
        raise InvalidArgumentError("box_index has incompatible shape")
    bad = (box_ind < 0) | (box_ind >= image.shape[0])
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(
            f"box_index has values outside [0, batch_size): box_ind[{i}] = {int(box_ind[i])}"
        )


def _crop_size(crop_size):
    s = np.asarray(crop_size).reshape(-1)
    if s.size != 2 or s[0] <= 0 or s[1] <= 0:
        raise InvalidArgumentError(f"crop_size must be two positive values, got {s.tolist()}")
    return int(s[0]), int(s[1])


@register_kernel("CropAndResize")
def crop_and_resize(T, method, extrapolation_value):
    ext = np.float32(extrapolation_value)

    def compute(image, boxes, box_ind, crop_size):
        _check_crop_inputs(image, boxes, box_ind)
        ch, cw = _crop_size(crop_size)
        _, h, w, c = image.shape
        img = image.astype(np.float32)
        out = np.empty((boxes.shape[0], ch, cw, c), np.float32)
        for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float32)):
            ys = _crop_coords(y1, y2, h, ch)
            xs = _crop_coords(x1, x2, w, cw)
            yok = (ys >= 0) & (ys <= h - 1)
            xok = (xs >= 0) & (xs <= w - 1)
            im = img[box_ind[b]]
            if method == "bilinear":
                y0 = np.clip(np.floor(ys), 0, h - 1).astype(np.int64)
                y1_ = np.clip(np.ceil(ys), 0, h - 1).astype(np.int64)
                x0 = np.clip(np.floor(xs), 0, w - 1).astype(np.int64)
                x1_ = np.clip(np.ceil(xs), 0, w - 1).astype(np.int64)
                ly = (ys - np.floor(ys))[:, None, None]
                lx = (xs - np.floor(xs))[None, :, None]
                tl, tr = im[y0][:, x0], im[y0][:, x1_]
                bl, br = im[y1_][:, x0], im[y1_][:, x1_]
                top = tl + (tr - tl) * lx
                bottom = bl + (br - bl) * lx
                v = top + (bottom - top) * ly
            else:
                yi = np.clip(np.floor(ys + np.float32(0.5)), 0, h - 1).astype(np.int64)
                xi = np.clip(np.floor(xs + np.float32(0.5)), 0, w - 1).astype(np.int64)
                v = im[yi][:, xi]
            out[b] = np.where((yok[:, None] & xok[None, :])[:, :, None], v, ext)
        return out

    return compute


@register_kernel("CropAndResizeGradImage")
def crop_and_resize_grad_image(T, method):
    def compute(grads, boxes, box_ind, image_size):
        n, h, w, c = (int(v) for v in np.asarray(image_size).reshape(-1))
        out = np.zeros((n, h, w, c), np.float64)
        _, ch, cw, _ = grads.shape
        for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float32)):
            ys = _crop_coords(y1, y2, h, ch)
            xs = _crop_coords(x1, x2, w, cw)
            g = grads[b].astype(np.float64)
            k = int(box_ind[b])
            for i, yv in enumerate(ys):
                if not 0 <= yv <= h - 1:
                    continue
                for j, xv in enumerate(xs):
                    if not 0 <= xv <= w - 1:
                        continue
                    if method == "bilinear":
                        t, bo = int(np.floor(yv)), int(np.ceil(yv))
                        le, r = int(np.floor(xv)), int(np.ceil(xv))
                        ly, lx = float(yv - np.floor(yv)), float(xv - np.floor(xv))
                        out[k, t, le] += (1 - ly) * (1 - lx) * g[i, j]
                        out[k, t, r] += (1 - ly) * lx * g[i, j]
                        out[k, bo, le] += ly * (1 - lx) * g[i, j]
                        out[k, bo, r] += ly * lx * g[i, j]
                    else:
                        out[k, int(np.floor(yv + 0.5)), int(np.floor(xv + 0.5))] += g[i, j]
        return out.astype(T.np)

    return compute


@register_kernel("CropAndResizeGradBoxes")
def crop_and_resize_grad_boxes(T, method):
    def compute(grads, image, boxes, box_ind):
        _, h, w, _ = image.shape
        _, ch, cw, _ = grads.shape
        img = image.astype(np.float64)
        out = np.zeros(boxes.shape, np.float64)
        for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float32)):
            ys = _crop_coords(y1, y2, h, ch)
            xs = _crop_coords(x1, x2, w, cw)
            im = img[int(box_ind[b])]
            hr = (h - 1) / (ch - 1) if ch > 1 else 0.0
            wr = (w - 1) / (cw - 1) if cw > 1 else 0.0
            for i, yv in enumerate(ys):
                if not 0 <= yv <= h - 1:
                    continue
                t, bo = int(np.floor(yv)), int(np.ceil(yv))
                ly = float(yv - np.floor(yv))
                for j, xv in enumerate(xs):
                    if not 0 <= xv <= w - 1:
                        continue
                    le, r = int(np.floor(xv)), int(np.ceil(xv))
                    lx = float(xv - np.floor(xv))
                    tl, tr, bl, br = im[t, le], im[t, r], im[bo, le], im[bo, r]
                    gy = (1 - lx) * (bl - tl) + lx * (br - tr)
                    gx = (1 - ly) * (tr - tl) + ly * (br - bl)
                    vy = float(np.dot(grads[b, i, j], gy))
                    vx = float(np.dot(grads[b, i, j], gx))
                    if ch > 1:
                        out[b, 0] += vy * (h - 1 - i * hr)
                        out[b, 2] += vy * (i * hr)
                    else:
                        out[b, 0] += vy * 0.5 * (h - 1)
                        out[b, 2] += vy * 0.5 * (h - 1)
                    if cw > 1:
                        out[b, 1] += vx * (w - 1 - j * wr)
                        out[b, 3] += vx * (j * wr)
                    else:
                        out[b, 1] += vx * 0.5 * (w - 1)
                        out[b, 3] += vx * 0.5 * (w - 1)
        return out.astype(np.float32)

    return compute


# -- bicubic and area resizes ---------------------------------------------------------------------

_TABLE_SIZE = 1 << 10


def _coeffs_table(a: float) -> np.ndarray:
    """TensorFlow's tabulated cubic-convolution weights: [i, 0] for |t| = i/1024 in [0, 1],
    [i, 1] for |t| = 1 + i/1024, in float32."""
    x = np.arange(_TABLE_SIZE + 1, dtype=np.float64) / _TABLE_SIZE
    t0 = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1.0
    t1 = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return np.stack([t0, t1], axis=1).astype(np.float32)


_KEYS = _coeffs_table(-0.5)
_LEGACY = _coeffs_table(-0.75)


def _bicubic_weights(in_size, out_size, align_corners, half_pixel):
    """(indices [out, 4], weights [out, 4] float32) of one axis."""
    scale = np.float32(_scale(in_size, out_size, align_corners))
    i = np.arange(out_size, dtype=np.float32)
    loc = (i + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else i * scale
    base = np.floor(loc).astype(np.int64)
    delta = loc - base.astype(np.float32)
    offset = np.rint(delta * _TABLE_SIZE).astype(np.int64)
    table = _KEYS if half_pixel else _LEGACY
    w = np.stack([table[offset, 1], table[offset, 0], table[_TABLE_SIZE - offset, 0],
                  table[_TABLE_SIZE - offset, 1]], axis=1)  # fmt: skip
    raw = base[:, None] + np.arange(-1, 3)[None, :]
    idx = np.clip(raw, 0, in_size - 1)
    if half_pixel:  # taps outside the image get no weight; the rest are renormalized
        w = np.where(idx == raw, w, np.float32(0))
        total = w.sum(axis=1, keepdims=True)
        ok = np.abs(total) >= 1000.0 * np.finfo(np.float32).tiny
        w = np.where(ok, w * (np.float32(1) / np.where(ok, total, 1)), w)
    return idx, w.astype(np.float32)


@register_kernel("ResizeBicubic", expensive=True)
def resize_bicubic(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(images, size):
        h, w = _size(size, images)
        x = images.astype(np.float32)
        yi, yw = _bicubic_weights(x.shape[1], h, align_corners, half_pixel_centers)
        xi, xw = _bicubic_weights(x.shape[2], w, align_corners, half_pixel_centers)
        rows = np.einsum("nhkwc,hk->nhwc", x[:, yi], yw)  # [n, h, in_w, c]
        return np.einsum("nhwkc,wk->nhwc", rows[:, :, xi], xw).astype(np.float32)

    return compute


@register_kernel("ResizeBicubicGrad", expensive=True)
def resize_bicubic_grad(T, align_corners, half_pixel_centers):
    _check_half_pixel(align_corners, half_pixel_centers)

    def compute(grads, original_image):
        n, h, w, c = original_image.shape
        gh, gw = grads.shape[1:3]
        yi, yw = _bicubic_weights(h, gh, align_corners, half_pixel_centers)
        xi, xw = _bicubic_weights(w, gw, align_corners, half_pixel_centers)
        out = np.zeros((n, h, w, c), np.float64)
        g = grads.astype(np.float64)
        for a in range(4):
            for b in range(4):
                contrib = g * yw[None, :, a, None, None] * xw[None, None, :, b, None]
                np.add.at(out, (slice(None), yi[:, a][:, None], xi[:, b][None, :]), contrib)
        return out.astype(T.np)

    return compute


def _area_matrix(in_size, out_size, align_corners):
    """[out, in] weights: the covered fraction of each input pixel (TensorFlow's ResizeArea,
    which also counts the part past the last pixel as that pixel)."""
    scale = _scale(in_size, out_size, align_corners)
    m = np.zeros((out_size, in_size), np.float64)
    for o in range(out_size):
        lo, hi = o * scale, (o + 1) * scale
        start, end = int(np.floor(lo)), int(np.ceil(hi))
        for i in range(start, end):
            frac = min(i + 1, hi) - max(i, lo)
            m[o, min(i, in_size - 1)] += frac
    return m / scale


@register_kernel("ResizeArea", expensive=True)
def resize_area(T, align_corners):
    def compute(images, size):
        h, w = _size(size, images)
        my = _area_matrix(images.shape[1], h, align_corners)
        mx = _area_matrix(images.shape[2], w, align_corners)
        x = images.astype(np.float64)
        return np.einsum("oh,nhwc,pw->nopc", my, x, mx).astype(np.float32)

    return compute
