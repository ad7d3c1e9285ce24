"""Kernels for rill.graph.ops.pool_extra_ops. The V2 ops reuse pool_kernels' MaxPool and
MaxPoolGrad with the window read from their inputs; the argmax family scans each window's taps
in row-major order keeping the first strictly greater value (TensorFlow's CPU rule), padding
never winning."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.pool_kernels import max_pool, max_pool_grad
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.conv_ops import spatial_pair


def _window(values, name):
    v = [int(x) for x in np.asarray(values).reshape(-1)]
    if len(v) != 4:
        raise InvalidArgumentError(f"{name} must have 4 elements, got {v}")
    return tuple(v)


@register_kernel("MaxPoolV2", expensive=True)
def max_pool_v2(T, padding, data_format):
    cache = {}

    def compute(x, ksize, strides):
        key = (_window(ksize, "ksize"), _window(strides, "strides"))
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = max_pool(key[0], key[1], padding, (), data_format)
        return fn(x)

    return compute


@register_kernel("MaxPoolGradV2", expensive=True)
def max_pool_grad_v2(padding, data_format, T):
    cache = {}

    def compute(orig_input, orig_output, grad, ksize, strides):
        key = (_window(ksize, "ksize"), _window(strides, "strides"))
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = max_pool_grad(key[0], key[1], padding, (), data_format)
        return fn(orig_input, orig_output, grad)

    return compute


def window_argmax(x: np.ndarray, ksize, strides, padding: str):
    """(max, flat y·W + x index in the input) of each window of NHWC x."""
    n, h, w, c = x.shape
    kh, kw = spatial_pair(ksize, "ksize", "NHWC")
    sh, sw = spatial_pair(strides, "strides", "NHWC")
    if padding == "VALID":
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        top = left = 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        top = max((oh - 1) * sh + kh - h, 0) // 2
        left = max((ow - 1) * sw + kw - w, 0) // 2
    oh, ow = max(oh, 0), max(ow, 0)
    best = np.zeros((n, oh, ow, c), x.dtype)
    where = np.full((n, oh, ow, c), -1, np.int64)
    rows = np.arange(oh) * sh - top
    cols = np.arange(ow) * sw - left
    for di in range(kh):
        r = rows + di
        rin = (r >= 0) & (r < h)
        for dj in range(kw):
            cc = cols + dj
            cin = (cc >= 0) & (cc < w)
            valid = rin[:, None] & cin[None, :]
            if not valid.any():
                continue
            v = x[:, np.clip(r, 0, h - 1)][:, :, np.clip(cc, 0, w - 1)]
            take = valid[None, :, :, None] & ((where < 0) | (v > best))
            best = np.where(take, v, best)
            flat = np.clip(r, 0, h - 1)[:, None] * w + np.clip(cc, 0, w - 1)[None, :]
            where = np.where(take, flat[None, :, :, None], where)
    return best, where


def _nhwc(x, fmt):
    return x if fmt == "NHWC" else np.transpose(x, (0, 2, 3, 1))


def _nhwc_window(v, fmt):
    v = list(v)
    return v if fmt == "NHWC" else [v[0], v[2], v[3], v[1]]


@register_kernel("MaxPoolWithArgmax", expensive=True)
def max_pool_with_argmax(ksize, strides, Targmax, padding, include_batch_in_index, T):
    def compute(x):
        if x.ndim != 4:
            raise InvalidArgumentError(f"input must be 4-dimensional, got {list(x.shape)}")
        best, where = window_argmax(x, ksize, strides, padding)
        n, h, w, c = x.shape
        arg = where * c + np.arange(c)
        if include_batch_in_index:
            arg = arg + (np.arange(n) * h * w * c)[:, None, None, None]
        return best, arg.astype(Targmax.np)

    return compute


@register_kernel("MaxPoolGradWithArgmax", expensive=True)
def max_pool_grad_with_argmax(ksize, strides, padding, include_batch_in_index, Targmax, T):
    def compute(x, grad, argmax):
        n = x.shape[0]
        per = x.size // n if n else 0
        out = np.zeros(x.size, grad.dtype)
        idx = argmax.reshape(n, -1).astype(np.int64)
        if not include_batch_in_index:
            idx = idx + (np.arange(n) * per)[:, None]
        if idx.size and (idx.min() < 0 or idx.max() >= x.size):
            raise InvalidArgumentError("argmax holds an index outside the input")
        np.add.at(out, idx.reshape(-1), grad.reshape(-1))
        return out.reshape(x.shape)

    return compute


def _grad_grad(ksize, strides, padding, data_format):
    def compute(orig_input, orig_output, grad):
        x = _nhwc(orig_input, data_format)
        g = _nhwc(grad, data_format)
        if g.shape != x.shape:
            raise InvalidArgumentError("grad must have orig_input's shape")
        k = _nhwc_window(ksize, data_format)
        s = _nhwc_window(strides, data_format)
        _, where = window_argmax(x, k, s, padding)
        n, h, w, c = x.shape
        flat = g.reshape(n, h * w, c)
        out = np.take_along_axis(flat, where.reshape(n, -1, c), axis=1).reshape(where.shape)
        return out if data_format == "NHWC" else np.ascontiguousarray(out.transpose(0, 3, 1, 2))

    return compute


@register_kernel("MaxPoolGradGrad", expensive=True)
def max_pool_grad_grad(ksize, strides, padding, data_format, T):
    return _grad_grad(ksize, strides, padding, data_format)


@register_kernel("MaxPoolGradGradV2", expensive=True)
def max_pool_grad_grad_v2(padding, data_format, T):
    def compute(orig_input, orig_output, grad, ksize, strides):
        fn = _grad_grad(_window(ksize, "ksize"), _window(strides, "strides"), padding, data_format)
        return fn(orig_input, orig_output, grad)

    return compute
