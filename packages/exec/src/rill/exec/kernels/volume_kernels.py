"""Kernels for rill.graph.ops.volume_ops, on gathered windows: each output position's window of
the input is gathered by index (out-of-bounds taps masked), so Conv3D is a matrix product of the
windows with the filter, its gradients the transposed products (the input's scattered back with
np.add.at), and the pools reductions over the window axes. NCDHW is transposed to NDHWC and
back."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.volume_ops import window_out_size
from rill.graph.shapes import TensorShape


def _to_ndhwc(x, fmt):
    return x if fmt == "NDHWC" else np.transpose(x, (0, 2, 3, 4, 1))


def _from_ndhwc(x, fmt):
    return x if fmt == "NDHWC" else np.ascontiguousarray(np.transpose(x, (0, 4, 1, 2, 3)))


def _spatial(values, fmt):
    v = list(values)
    return v[1:4] if fmt == "NDHWC" else v[2:5]


def _geometry(sizes, ksize, strides, dilations, padding):
    """Per spatial dim: (index array [out, k], valid mask [out, k], out size)."""
    idx, masks, outs = [], [], []
    for n, k, s, r in zip(sizes, ksize, strides, dilations):
        o, before = window_out_size(n, k, s, r, padding)
        pos = np.arange(o)[:, None] * s - before + np.arange(k)[None, :] * r
        masks.append((pos >= 0) & (pos < n))
        idx.append(np.clip(pos, 0, max(n - 1, 0)))
        outs.append(o)
    return idx, masks, outs


def _index(idx):
    d, h, w = idx
    return (slice(None), d[:, None, None, :, None, None], h[None, :, None, None, :, None],
            w[None, None, :, None, None, :])  # fmt: skip


def _mask(masks):
    d, h, w = masks
    return (d[:, None, None, :, None, None] & h[None, :, None, None, :, None]
            & w[None, None, :, None, None, :])  # fmt: skip


def _windows(x, idx, masks, fill):
    """[N, od, oh, ow, kd, kh, kw, C] windows of NDHWC x, `fill` outside."""
    win = x[_index(idx)]
    m = _mask(masks)[None, ..., None]
    return np.where(m, win, np.asarray(fill, x.dtype))


def _check5(x, what):
    if x.ndim != 5:
        raise InvalidArgumentError(f"{what} must be 5-dimensional, got {TensorShape(x.shape)}")


@register_kernel("Conv3D", expensive=True)
def conv3d(T, strides, padding, data_format, dilations):
    s, r = _spatial(strides, data_format), _spatial(dilations, data_format)

    def compute(x, f):
        _check5(x, "input")
        _check5(f, "filter")
        x = _to_ndhwc(x, data_format)
        if x.shape[4] != f.shape[3]:
            raise InvalidArgumentError(
                f"input depth {x.shape[4]} must equal the filter's in_channels {f.shape[3]}"
            )
        idx, masks, out = _geometry(x.shape[1:4], f.shape[:3], s, r, padding)
        win = _windows(x, idx, masks, 0)
        n = x.shape[0]
        y = win.reshape(n * int(np.prod(out)), -1) @ f.reshape(-1, f.shape[4])
        return _from_ndhwc(y.reshape(n, *out, f.shape[4]).astype(x.dtype), data_format)

    return compute


@register_kernel("Conv3DBackpropInputV2", expensive=True)
def conv3d_backprop_input(T, strides, padding, data_format, dilations, Tshape):
    s, r = _spatial(strides, data_format), _spatial(dilations, data_format)

    def compute(sizes, f, g):
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        xshape = sizes if data_format == "NDHWC" else [sizes[0], *sizes[2:5], sizes[1]]
        g = _to_ndhwc(g, data_format)
        idx, masks, out = _geometry(xshape[1:4], f.shape[:3], s, r, padding)
        n = xshape[0]
        cols = g.reshape(-1, f.shape[4]).astype(np.float64) @ f.reshape(-1, f.shape[4]).T
        cols = cols.reshape(n, *out, *f.shape[:3], f.shape[3])
        cols = cols * _mask(masks)[None, ..., None]
        dx = np.zeros(xshape, np.float64)
        np.add.at(dx, _index(idx), cols)
        return _from_ndhwc(dx.astype(T.np), data_format)

    return compute


@register_kernel("Conv3DBackpropFilterV2", expensive=True)
def conv3d_backprop_filter(T, strides, padding, data_format, dilations):
    s, r = _spatial(strides, data_format), _spatial(dilations, data_format)

    def compute(x, sizes, g):
        fshape = [int(v) for v in np.asarray(sizes).reshape(-1)]
        x = _to_ndhwc(x, data_format)
        g = _to_ndhwc(g, data_format)
        idx, masks, out = _geometry(x.shape[1:4], fshape[:3], s, r, padding)
        win = _windows(x, idx, masks, 0).astype(np.float64)
        df = win.reshape(-1, int(np.prod(fshape[:4]))).T @ g.reshape(-1, fshape[4])
        return df.reshape(fshape).astype(T.np)

    return compute


def _pool_geometry(x, ksize, strides, padding, fmt):
    k, s = _spatial(ksize, fmt), _spatial(strides, fmt)
    return _geometry(x.shape[1:4], k, s, (1, 1, 1), padding)


@register_kernel("MaxPool3D", expensive=True)
def max_pool3d(ksize, strides, padding, data_format, T):
    def compute(x):
        _check5(x, "input")
        x = _to_ndhwc(x, data_format)
        idx, masks, _ = _pool_geometry(x, ksize, strides, padding, "NDHWC" if data_format ==
                                       "NDHWC" else data_format)  # fmt: skip
        win = _windows(x, idx, masks, -np.inf)
        return _from_ndhwc(win.max(axis=(4, 5, 6)).astype(x.dtype), data_format)

    return compute


@register_kernel("MaxPool3DGrad", expensive=True)
def max_pool3d_grad(ksize, strides, padding, data_format, T, TInput):
    def compute(x, y, g):
        x = _to_ndhwc(x, data_format)
        g = _to_ndhwc(g, data_format)
        idx, masks, out = _pool_geometry(x, ksize, strides, padding, data_format)
        win = _windows(x.astype(np.float64), idx, masks, -np.inf)
        n, c = x.shape[0], x.shape[4]
        flat = win.reshape(n, *out, -1, c)
        first = np.argmax(flat, axis=4)  # the first maximum in scan order
        pick = np.zeros(flat.shape, bool)
        np.put_along_axis(pick, first[:, :, :, :, None, :], True, axis=4)
        contrib = pick.reshape(win.shape) * g[:, :, :, :, None, None, None, :].astype(np.float64)
        dx = np.zeros(x.shape, np.float64)
        np.add.at(dx, _index(idx), contrib * _mask(masks)[None, ..., None])
        return _from_ndhwc(dx.astype(T.np), data_format)

    return compute


@register_kernel("AvgPool3D", expensive=True)
def avg_pool3d(ksize, strides, padding, data_format, T):
    def compute(x):
        _check5(x, "input")
        x = _to_ndhwc(x, data_format)
        idx, masks, _ = _pool_geometry(x, ksize, strides, padding, data_format)
        win = _windows(x.astype(np.float64), idx, masks, 0)
        count = _mask(masks).sum(axis=(3, 4, 5))[None, ..., None]
        y = win.sum(axis=(4, 5, 6)) / np.maximum(count, 1)
        return _from_ndhwc(y.astype(x.dtype), data_format)

    return compute


@register_kernel("AvgPool3DGrad", expensive=True)
def avg_pool3d_grad(ksize, strides, padding, data_format, T):
    def compute(sizes, g):
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        xshape = sizes if data_format == "NDHWC" else [sizes[0], *sizes[2:5], sizes[1]]
        g = _to_ndhwc(g, data_format).astype(np.float64)
        k, s = _spatial(ksize, data_format), _spatial(strides, data_format)
        idx, masks, _ = _geometry(xshape[1:4], k, s, (1, 1, 1), padding)
        m = _mask(masks)
        count = m.sum(axis=(3, 4, 5))[None, ..., None]
        share = (g / np.maximum(count, 1))[:, :, :, :, None, None, None, :]
        dx = np.zeros(xshape, np.float64)
        np.add.at(dx, _index(idx), np.broadcast_to(share, (*g.shape[:4], *k, g.shape[4]))
                  * m[None, ..., None])  # fmt: skip
        return _from_ndhwc(dx.astype(T.np), data_format)

    return compute
