"""GPU kernels for convolutions, pooling and sparse softmax cross-entropy, written against `xp`.

Convolutions are im2col + GEMM on the device: the patches of each filter tap are copied (clipped
to the input, so padding is never built) into a [n, oh, ow, kh, kw, c] buffer, which one matmul
(cuBLAS) multiplies by the [kh·kw·c, out] filter. The filter gradient is the transposed product;
the input gradient multiplies out_backprop by the filter and adds each tap's slab back into the
window it came from (col2im); at stride 1 it is the full convolution of out_backprop with the
rotated filter (one more im2col + GEMM). Half types compute in float32 as on the CPU. NCHW
arguments are transposed to NHWC and back. On cupy, im2col, col2im and the pools whose windows
tile the input are CUDA C kernels (`cuda`); the whole-array paths here are the simulated GPU's
and the fallback.

Pooling loops over the window taps with whole-tensor operations on strided windows (the CPU
kernels' tap geometry); MaxPoolGrad routes each window's gradient to the first maximum in
row-major order, as TensorFlow's CPU kernel does.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.conv_kernels import (
    _check_shape,
    _groups,
    _in_window,
    _pads_used,
    _sizes_vector,
    _taps,
    _Window,
)
from rill.exec.kernels.gpu import cuda
from rill.exec.kernels.pool_kernels import _lowest, _Pool
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

_FLOATS = {"T": (dtypes.float16, dtypes.float32, dtypes.float64)}

# On cupy, a stride-1 input gradient is one im2col of out_backprop and one GEMM (True) or one
# GEMM into the patches' gradients and col2im (False, as strided ones are). True was the faster
# on an H200: the CNN train step at batch 512 took 3.04 ms against 3.60 ms (its second
# convolution's input gradient: a [100352, 1600] × [1600, 32] product against a
# [100352, 64] × [64, 800] one and the gather). The GPU suite runs both.
STRIDE1_FULL_CONV = True


def _ct(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _nhwc(xp, win, x):
    return xp.ascontiguousarray(x.transpose(0, 2, 3, 1)) if win.nchw else x


def _from_nhwc(xp, win, x):
    return xp.ascontiguousarray(x.transpose(0, 3, 1, 2)) if win.nchw else x


def _as_strided(xp, a, shape, strides):
    if getattr(xp, "is_simulated", False):
        return xp.as_strided(a, shape, strides)
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def _cols(xp, x, kh, kw, win, oh, ow, pads):
    """The [n*oh*ow, kh*kw*c] patch matrix of NHWC x: the input padded once, its windows
    viewed with strides and copied out by one kernel (zeros where a tap reads padding)."""
    n, h, w, c = x.shape
    (sh, sw), (dh, dw) = win.strides, win.dilations
    (pt, pb), (pl, pr) = _pads_used(h, w, kh, kw, oh, ow, win, pads)
    if pt < 0 or pl < 0:
        return None
    xpad = xp.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0))) if pt or pb or pl or pr else x
    xpad = xp.ascontiguousarray(xpad)
    s0, s1, s2, s3 = xpad.strides
    view = _as_strided(xp, xpad, (n, oh, ow, kh, kw, c),
                       (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3))  # fmt: skip
    return view.reshape(n * oh * ow, kh * kw * c)


def _cols_by_taps(xp, x, kh, kw, win, oh, ow, pads):
    """_cols for windows that start before the input (negative padding use): tap by tap."""
    n, h, w, c = x.shape
    cols = xp.zeros((n, oh, ow, kh, kw, c), x.dtype)
    for i, j, rows, cs, first in _taps(win, kh, kw, oh, ow, h, w, pads):
        if rows[0] < rows[1] and cs[0] < cs[1]:
            cols[:, rows[0] : rows[1], cs[0] : cs[1], i, j, :] = _in_window(
                x, rows, cs, first, win.strides
            )
    return cols.reshape(n * oh * ow, kh * kw * c)


def _patches(xp, x, kh, kw, win, oh, ow, pads):
    if cuda.usable(xp, x.dtype):
        cols = cuda.im2col(xp, x, kh, kw, win.strides, win.dilations, pads, oh, ow)
        if cols is not None:
            return cols
    cols = _cols(xp, x, kh, kw, win, oh, ow, pads)
    return cols if cols is not None else _cols_by_taps(xp, x, kh, kw, win, oh, ow, pads)


def _forward(xp, x, w, win, oh, ow, pads):
    n, h, wd, c = x.shape
    kh, kw, kc, o = w.shape
    if kh == kw == 1 and win.strides == (1, 1) and pads == (0, 0) and (oh, ow) == (h, wd):
        return xp.matmul(x.reshape(-1, c), w.reshape(c, o)).reshape(n, oh, ow, o)
    cols = _patches(xp, x, kh, kw, win, oh, ow, pads)
    return xp.matmul(cols, w.reshape(-1, o)).reshape(n, oh, ow, o)


def _backprop_filter(xp, x, dy, kh, kw, win, pads):
    n, oh, ow, o = dy.shape
    c = x.shape[3]
    cols = _patches(xp, x, kh, kw, win, oh, ow, pads)
    return xp.matmul(cols.T, dy.reshape(-1, o)).reshape(kh, kw, c, o)


def _backprop_input(xp, dy, w, n, h, wd, win, pads):
    kh, kw, c, o = w.shape
    _, oh, ow, _ = dy.shape
    if win.strides == (1, 1) and win.dilations == (1, 1):
        # Stride 1: the input gradient is the "full" convolution of out_backprop with the
        # filter rotated by 180 degrees and its channels swapped (one im2col + one GEMM).
        top, left = kh - 1 - pads[0], kw - 1 - pads[1]
        bottom, right = h + kh - 1 - oh - top, wd + kw - 1 - ow - left
        wr = xp.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2)).reshape(-1, c)
        if cuda.usable(xp, dy.dtype) and STRIDE1_FULL_CONV:
            # The kernel reads dy where each window reaches it: any padding, no padded copy.
            cols = cuda.im2col(xp, dy, kh, kw, (1, 1), (1, 1), (top, left), h, wd)
            if cols is not None:
                return xp.matmul(cols, wr).reshape(n, h, wd, c)
        if min(top, left, bottom, right) >= 0:
            dyp = xp.pad(dy, ((0, 0), (top, bottom), (left, right), (0, 0)))
            dyp = xp.ascontiguousarray(dyp)
            s0, s1, s2, s3 = dyp.strides
            view = _as_strided(xp, dyp, (n, h, wd, kh, kw, o), (s0, s1, s2, s1, s2, s3))
            return xp.matmul(view.reshape(n * h * wd, kh * kw * o), wr).reshape(n, h, wd, c)
    dcols = xp.matmul(dy.reshape(-1, o), w.reshape(-1, o).T)
    if cuda.usable(xp, dy.dtype):
        dx = cuda.col2im(xp, dcols, (n, h, wd, c), kh, kw, win.strides, win.dilations, pads, oh, ow)
        if dx is not None:
            return dx
    dcols = dcols.reshape(n, oh, ow, kh, kw, c)
    dx = xp.zeros((n, h, wd, c), dy.dtype)
    for i, j, rows, cs, first in _taps(win, kh, kw, oh, ow, h, wd, pads):
        if rows[0] < rows[1] and cs[0] < cs[1]:
            dst = _in_window(dx, rows, cs, first, win.strides)
            dst += dcols[:, rows[0] : rows[1], cs[0] : cs[1], i, j, :]
    return dx


def _check4(**arrays):
    for name, a in arrays.items():
        if a.ndim != 4:
            raise InvalidArgumentError(f"{name} must be 4-D, got shape {list(a.shape)}")


@register_kernel("Conv2D", devices="GPU", constraints=_FLOATS, expensive=True)
def conv2d(strides, padding, explicit_paddings, data_format, dilations, xp):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(x, w):
        _check4(input=x, filter=w)
        dt = x.dtype
        ct = _ct(dt)
        xn = _nhwc(xp, win, x).astype(ct, copy=False)
        w = w.astype(ct, copy=False)
        n, h, wd, c = xn.shape
        kh, kw, kc, o = w.shape
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        if groups == 1:
            out = _forward(xp, xn, w, win, oh, ow, pads)
        else:
            og = o // groups
            out = xp.concatenate(
                [_forward(xp, xn[..., g * kc : (g + 1) * kc], w[..., g * og : (g + 1) * og],
                          win, oh, ow, pads) for g in range(groups)], axis=3)  # fmt: skip
        return _from_nhwc(xp, win, out.astype(dt, copy=False))

    return compute


@register_kernel("Conv2DBackpropInput", devices="GPU", constraints=_FLOATS, expensive=True)
def conv2d_backprop_input(strides, padding, explicit_paddings, data_format, dilations, xp):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(input_sizes, w, dy):
        sizes = _sizes_vector(input_sizes, "input_sizes")
        _check4(filter=w, out_backprop=dy)
        dt = dy.dtype
        ct = _ct(dt)
        dyn = _nhwc(xp, win, dy).astype(ct, copy=False)
        w = w.astype(ct, copy=False)
        kh, kw, kc, o = w.shape
        if len(sizes) == 2:
            n, h, wd, c = dyn.shape[0], sizes[0], sizes[1], kc
        elif len(sizes) == 4:
            n, c = sizes[0], sizes[1 if win.nchw else 3]
            h, wd = (sizes[2], sizes[3]) if win.nchw else (sizes[1], sizes[2])
        else:
            raise InvalidArgumentError(f"input_sizes must have 4 (or 2) values, got {sizes}")
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, o))
        if groups == 1:
            dx = _backprop_input(xp, dyn, w, n, h, wd, win, pads)
        else:
            og = o // groups
            dx = xp.concatenate(
                [_backprop_input(xp, xp.ascontiguousarray(dyn[..., g * og : (g + 1) * og]),
                                 w[..., g * og : (g + 1) * og], n, h, wd, win, pads)
                 for g in range(groups)], axis=3)  # fmt: skip
        return _from_nhwc(xp, win, dx.astype(dt, copy=False))

    return compute


@register_kernel("Conv2DBackpropFilter", devices="GPU", constraints=_FLOATS, expensive=True)
def conv2d_backprop_filter(strides, padding, explicit_paddings, data_format, dilations, xp):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(x, filter_sizes, dy):
        sizes = _sizes_vector(filter_sizes, "filter_sizes")
        if len(sizes) != 4:
            raise InvalidArgumentError(f"filter_sizes must have 4 values, got {sizes}")
        _check4(input=x, out_backprop=dy)
        dt = x.dtype
        ct = _ct(dt)
        xn = _nhwc(xp, win, x).astype(ct, copy=False)
        dyn = _nhwc(xp, win, dy).astype(ct, copy=False)
        kh, kw, kc, o = sizes
        n, h, wd, c = xn.shape
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, o))
        if groups == 1:
            dw = _backprop_filter(xp, xn, dyn, kh, kw, win, pads)
        else:
            og = o // groups
            dw = xp.concatenate(
                [_backprop_filter(xp, xp.ascontiguousarray(xn[..., g * kc : (g + 1) * kc]),
                                  xp.ascontiguousarray(dyn[..., g * og : (g + 1) * og]),
                                  kh, kw, win, pads) for g in range(groups)], axis=3)  # fmt: skip
        return dw.astype(dt, copy=False)

    return compute


# -- pooling ----------------------------------------------------------------------------------


@register_kernel("MaxPool", devices="GPU", constraints=_FLOATS, expensive=True)
def max_pool(ksize, strides, padding, explicit_paddings, data_format, xp):
    pool = _Pool(ksize, strides, padding, explicit_paddings, data_format, "MaxPool")

    def compute(x):
        out_shape, taps = pool.geometry(x.shape)
        windows = _tiled_windows(pool, x, out_shape)
        if windows is not None:
            a1 = pool.axes[0]
            if cuda.usable(xp, x.dtype):
                out = cuda.tiled_max_pool(xp, x, a1, *pool.ksize)
                if out is not None:
                    return out
            return windows.max(axis=(a1 + 1, a1 + 3))
        out = xp.full(out_shape, _lowest(x.dtype), x.dtype)
        if out.size == 0:
            return out
        for _, _, rows, cols, first in taps:
            dst = pool.at(out, rows, cols)
            xp.maximum(dst, pool.read(x, rows, cols, first), out=dst)
        return out

    return compute


@register_kernel("MaxPoolGrad", devices="GPU", constraints=_FLOATS, expensive=True)
def max_pool_grad(ksize, strides, padding, explicit_paddings, data_format, xp):
    pool = _Pool(ksize, strides, padding, explicit_paddings, data_format, "MaxPoolGrad")

    def compute(orig_input, orig_output, grad):
        x = orig_input
        out_shape, taps = pool.geometry(x.shape)
        if tuple(grad.shape) != out_shape:
            raise InvalidArgumentError(
                f"grad has shape {list(grad.shape)}, expected the pooled shape {list(out_shape)}"
            )
        if grad.size and x.size:
            windows = _tiled_windows(pool, x, out_shape)
            if windows is not None:
                if cuda.usable(xp, x.dtype) and x.dtype == grad.dtype:
                    dx = cuda.tiled_max_pool_grad(xp, x, grad, pool.axes[0], *pool.ksize)
                    if dx is not None:
                        return dx
                return _tiled_max_pool_grad(xp, pool, windows, grad)
        dx = xp.zeros(x.shape, grad.dtype)
        if grad.size == 0 or x.size == 0:
            return dx
        # The chosen position of each window, scanned in row-major tap order: a later tap
        # replaces the choice only when strictly greater (the first maximum wins ties).
        best = xp.full(out_shape, _lowest(x.dtype), x.dtype)
        choice = xp.full(out_shape, -1, np.int32)
        for t, (_, _, rows, cols, first) in enumerate(taps):
            b = pool.at(best, rows, cols)
            ch = pool.at(choice, rows, cols)
            v = pool.read(x, rows, cols, first)
            better = (v > b) | (ch < 0)
            ch[...] = xp.where(better, t, ch)
            b[...] = xp.where(better, v, b)
        for t, (_, _, rows, cols, first) in enumerate(taps):
            dst = pool.read(dx, rows, cols, first)
            g = pool.at(grad, rows, cols)
            dst += xp.where(pool.at(choice, rows, cols) == t, g, 0).astype(grad.dtype)
        return dx

    return compute


def _tiled_windows(pool, x, out_shape):
    """x viewed as [.., oh, kh, ow, kw, ..] when the windows tile it exactly (ksize == strides,
    no padding reached), else None."""
    (kh, kw), (sh, sw) = pool.ksize, pool.win.strides
    a1, a2 = pool.axes
    oh, ow = out_shape[a1], out_shape[a2]
    if (kh, kw) != (sh, sw) or oh * kh != x.shape[a1] or ow * kw != x.shape[a2]:
        return None
    _, _, pads = pool.win.resolve(x.shape[a1], x.shape[a2], kh, kw)
    if pads != (0, 0):
        return None
    shape = list(x.shape)
    shape[a1 : a2 + 1] = [oh, kh, ow, kw]  # the spatial axes are adjacent (NHWC or NCHW)
    return x.reshape(shape)


def _tiled_max_pool_grad(xp, pool, windows, grad):
    """Each window's gradient to its first maximum in row-major order (a NaN only as the
    window's first value), as the tap-by-tap path and TensorFlow's CPU kernel choose."""
    a1, _ = pool.axes
    (kh, kw) = pool.ksize
    nd = windows.ndim  # 6: the window axes are a1 + 1 and a1 + 3
    order = [d for d in range(nd) if d not in (a1 + 1, a1 + 3)] + [a1 + 1, a1 + 3]
    flat = windows.transpose(order).reshape(*grad.shape, kh * kw)
    if flat.dtype.kind == "f":
        first_nan = xp.isnan(flat[..., 0])
        pick = xp.where(first_nan, 0, xp.where(xp.isnan(flat), -np.inf, flat).argmax(axis=-1))
    else:
        pick = flat.argmax(axis=-1)
    hot = (xp.arange(kh * kw) == pick[..., None]) * grad[..., None]
    back = [0] * nd
    for k, d in enumerate(order):
        back[d] = k
    dx = hot.astype(grad.dtype, copy=False).reshape(*grad.shape, kh, kw).transpose(back)
    return xp.ascontiguousarray(dx).reshape(_merged(windows.shape, a1))


def _merged(shape, a1):
    """The input shape from the windowed shape [.., oh, kh, ow, kw, ..]."""
    return (*shape[:a1], shape[a1] * shape[a1 + 1], shape[a1 + 2] * shape[a1 + 3], *shape[a1 + 4 :])


@register_kernel("AvgPool", devices="GPU", constraints=_FLOATS, expensive=True)
def avg_pool(ksize, strides, padding, data_format, xp):
    pool = _Pool(ksize, strides, padding, (), data_format, "AvgPool")
    counts_cache: dict = {}

    def counts(shape, ct):
        key = (tuple(shape), ct)
        c = counts_cache.get(key)
        if c is None:
            c = counts_cache[key] = xp.asarray(pool.counts(shape, ct))
        return c

    def compute(x):
        out_shape, taps = pool.geometry(x.shape)
        ct = _ct(x.dtype)
        out = xp.zeros(out_shape, ct)
        if out.size == 0:
            return out.astype(x.dtype)
        xc = x.astype(ct, copy=False)
        for _, _, rows, cols, first in taps:
            dst = pool.at(out, rows, cols)
            dst += pool.read(xc, rows, cols, first)
        out /= counts(x.shape, ct)
        return out.astype(x.dtype, copy=False)

    return compute


@register_kernel("AvgPoolGrad", devices="GPU", constraints=_FLOATS, expensive=True)
def avg_pool_grad(ksize, strides, padding, data_format, xp):
    pool = _Pool(ksize, strides, padding, (), data_format, "AvgPoolGrad")

    def compute(orig_input_shape, grad):
        shape = _sizes_vector(orig_input_shape, "orig_input_shape")
        if len(shape) != 4:
            raise InvalidArgumentError(f"orig_input_shape must have 4 values, got {shape}")
        out_shape, taps = pool.geometry(tuple(shape))
        if tuple(grad.shape) != out_shape:
            raise InvalidArgumentError(
                f"grad has shape {list(grad.shape)}, expected the pooled shape {list(out_shape)}"
            )
        ct = _ct(grad.dtype)
        dx = xp.zeros(shape, ct)
        if grad.size == 0 or dx.size == 0:
            return dx.astype(grad.dtype)
        g = grad.astype(ct) / xp.asarray(pool.counts(shape, ct))
        for _, _, rows, cols, first in taps:
            dst = pool.read(dx, rows, cols, first)
            dst += pool.at(g, rows, cols)
        return dx.astype(grad.dtype, copy=False)

    return compute


# -- softmax cross-entropy with sparse labels ---------------------------------------------------


@register_kernel("SparseSoftmaxCrossEntropyWithLogits", devices="GPU", constraints=_FLOATS)
def sparse_softmax_cross_entropy_with_logits(xp):
    """As TensorFlow's GPU kernel: a label outside [0, classes) gives NaN for its row (checking
    would copy the labels to the host every step)."""

    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 1:
            raise InvalidArgumentError(
                f"logits must be 2-D and labels 1-D, got shapes {list(features.shape)} and "
                f"{list(labels.shape)}"
            )
        n, classes = features.shape
        if labels.shape[0] != n:
            raise InvalidArgumentError(
                f"logits and labels must have the same first dimension, got logits shape "
                f"{list(features.shape)} and labels shape {list(labels.shape)}"
            )
        if n and classes == 0:
            raise InvalidArgumentError(
                f"Must have at least one class, but got logits shape {list(features.shape)}"
            )
        dt = features.dtype
        f = features.astype(_ct(dt), copy=False)
        shifted = f - f.max(axis=1, keepdims=True)
        logp = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        bad = (labels < 0) | (labels >= classes)
        safe = xp.where(bad, 0, labels)
        rows = xp.arange(n)
        loss = -logp[rows, safe]
        backprop = xp.exp(logp)
        backprop[rows, safe] -= 1
        loss = xp.where(bad, np.nan, loss)
        backprop = xp.where(bad[:, None], np.nan, backprop)
        return loss.astype(dt), backprop.astype(dt)

    return compute
