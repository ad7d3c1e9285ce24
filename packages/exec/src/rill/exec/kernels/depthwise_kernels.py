"""CPU kernels for the depthwise convolutions of rill.graph.ops.conv_ops and their gradients.

They loop over the filter taps (a few) with whole-tensor numpy operations on strided windows,
clipped to the input so that padding is never materialized.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import jit
from rill.exec.kernels.conv_kernels import (
    _CONV_KW,
    _check_shape,
    _compute_dtype,
    _in_window,
    _out_window,
    _sizes_vector,
    _taps,
    _Window,
)
from rill.exec.kernels.intra_op import scratch
from rill.graph.errors import InvalidArgumentError


def _depthwise_geometry(win, x_shape, kh, kw):
    n, h, wd, c = x_shape
    oh, ow, pads = win.resolve(h, wd, kh, kw)
    return n, h, wd, c, oh, ow, pads


@register_kernel("DepthwiseConv2dNative", **_CONV_KW)
def depthwise_conv2d_native(strides, padding, explicit_paddings, data_format, dilations):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)
    from rill.exec.kernels import fused_conv_kernels as fused  # it imports this module

    def compute(x, w):
        dt = x.dtype
        if win.nchw and dt in jit.FLOATS and w.dtype == dt and x.ndim == 4 and w.ndim == 4:
            # The compiled loops of _FusedDepthwiseConv2dNative, with no bias and no activation:
            # the same sums in the same order as the numpy path below, about ten times faster
            # ([1, 144, 56, 56] 3×3 float32: 1.84 ms through numpy).
            loops = fused._loops()
            if loops is not None and x.size:
                got = fused.depthwise_nchw(loops, win, x, w, np.empty(0, dt), 0, None,
                                           fused._PLAIN)  # fmt: skip
                if got is not None:
                    return got
        ct = _compute_dtype(dt)
        small = False
        if win.nchw and x.ndim == 4 and w.ndim == 4:
            # Wide planes: work on them in place. Small ones (short rows make numpy's inner
            # loops short): one contiguous NHWC copy, whose inner loops run over the channels.
            small = x.shape[3] < 16
            if not small:
                return _forward_nchw(win, x.astype(ct, copy=False),
                                     w.astype(ct, copy=False)).astype(dt, copy=False)  # fmt: skip
        xn = win.to_nhwc(x).astype(ct, copy=False)
        if small:
            xn = np.ascontiguousarray(xn)
        w = w.astype(ct, copy=False)
        kh, kw, kc, mult = w.shape
        n, h, wd, c, oh, ow, pads = _depthwise_geometry(win, xn.shape, kh, kw)
        if kc != c:
            raise InvalidArgumentError(f"input depth {c} differs from the filter's depth {kc}")
        # With one output per channel the trailing multiplier axis (of size 1) is dropped, so
        # numpy's inner loops run over the channels instead of over that single element.
        out = np.zeros((n, oh, ow, c) if mult == 1 else (n, oh, ow, c, mult), ct)
        taps = w[:, :, :, 0] if mult == 1 else w
        for i, j, rows, cols, first in _taps(win, kh, kw, oh, ow, h, wd, pads):
            if rows[0] >= rows[1] or cols[0] >= cols[1]:
                continue
            xs = _in_window(xn, rows, cols, first, win.strides)
            if mult != 1:
                xs = xs[..., None]
            dst = _out_window(out, rows, cols)
            dst += xs * taps[i, j]
        out = out.reshape(n, oh, ow, c * mult)
        if small:
            return np.ascontiguousarray(win.from_nhwc(out)).astype(dt, copy=False)
        return win.from_nhwc(out).astype(dt, copy=False)

    return compute


def _forward_nchw(win, x, w):
    """The forward pass on NCHW data in place. The input is zero-padded once (scratch memory),
    so every tap reads one strided window of whole channel planes; the output is built a block
    of channels at a time, small enough to stay in cache across the taps. Each output is
    0 + p(tap 0) + p(tap 1) + ... in the NHWC loop's tap order, and the padding's taps add
    exact zeros, so the results are bit-identical to the NHWC kernel's."""
    n, c, h, wd = x.shape
    kh, kw, kc, mult = w.shape
    oh, ow, pads = win.resolve(h, wd, kh, kw)
    if kc != c:
        raise InvalidArgumentError(f"input depth {c} differs from the filter's depth {kc}")
    out = np.empty((n, c, mult, oh, ow), x.dtype)
    if out.size == 0:
        return out.reshape(n, c * mult, oh, ow)
    (sh, sw), (dh, dw) = win.strides, win.dilations
    top, left = pads
    hp = max((oh - 1) * sh + (kh - 1) * dh + 1, top + h)
    wp = max((ow - 1) * sw + (kw - 1) * dw + 1, left + wd)
    if (top, left, hp, wp) == (0, 0, h, wd):
        xp = x
    else:
        xp = scratch("depthwise_pad", n * c * hp * wp, x.dtype).reshape(n, c, hp, wp)
        xp[...] = 0
        xp[:, :, top : top + h, left : left + wd] = x
    plane = mult * oh * ow
    block = max(1, min(c, 16384 // max(plane, 1)))
    tmp_all = scratch("depthwise_tap", block * plane, x.dtype)
    for b in range(n):
        for c0 in range(0, c, block):
            c1 = min(c, c0 + block)
            dst = out[b, c0:c1]
            dst[...] = 0
            tmp = tmp_all[: (c1 - c0) * plane].reshape(c1 - c0, mult, oh, ow)
            src = xp[b, c0:c1, None]
            for i in range(kh):
                rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
                for j in range(kw):
                    cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
                    np.multiply(src[:, :, rows, cols], w[i, j, c0:c1, :, None, None], out=tmp)
                    dst += tmp
    return out.reshape(n, c * mult, oh, ow)


@register_kernel("DepthwiseConv2dNativeBackpropInput", **_CONV_KW)
def depthwise_conv2d_native_backprop_input(
    strides, padding, explicit_paddings, data_format, dilations
):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(input_sizes, w, dy):
        sizes = _sizes_vector(input_sizes, "input_sizes")
        if len(sizes) != 4:
            raise InvalidArgumentError(f"input_sizes must have 4 values, got {sizes}")
        dt = dy.dtype
        ct = _compute_dtype(dt)
        w = w.astype(ct, copy=False)
        dyn = win.to_nhwc(dy).astype(ct, copy=False)
        n, c = sizes[0], sizes[1 if win.nchw else 3]
        h, wd = (sizes[2], sizes[3]) if win.nchw else (sizes[1], sizes[2])
        kh, kw, kc, mult = w.shape
        if kc != c:
            raise InvalidArgumentError(f"input depth {c} differs from the filter's depth {kc}")
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, c * mult))
        dy5 = dyn.reshape(n, oh, ow, c, mult)
        dx = np.zeros((n, h, wd, c), ct)
        for i, j, rows, cols, first in _taps(win, kh, kw, oh, ow, h, wd, pads):
            if rows[0] >= rows[1] or cols[0] >= cols[1]:
                continue
            src = _out_window(dy5, rows, cols)
            dst = _in_window(dx, rows, cols, first, win.strides)
            if mult == 1:
                dst += src[..., 0] * w[i, j, :, 0]
            else:
                dst += np.einsum("nhwcm,cm->nhwc", src, w[i, j])
        return win.from_nhwc(dx).astype(dt, copy=False)

    return compute


@register_kernel("DepthwiseConv2dNativeBackpropFilter", **_CONV_KW)
def depthwise_conv2d_native_backprop_filter(
    strides, padding, explicit_paddings, data_format, dilations
):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(x, filter_sizes, dy):
        sizes = _sizes_vector(filter_sizes, "filter_sizes")
        if len(sizes) != 4:
            raise InvalidArgumentError(f"filter_sizes must have 4 values, got {sizes}")
        dt = x.dtype
        ct = _compute_dtype(dt)
        xn = win.to_nhwc(x).astype(ct, copy=False)
        dyn = win.to_nhwc(dy).astype(ct, copy=False)
        kh, kw, kc, mult = sizes
        n, h, wd, c, oh, ow, pads = _depthwise_geometry(win, xn.shape, kh, kw)
        if kc != c:
            raise InvalidArgumentError(f"input depth {c} differs from filter_sizes' depth {kc}")
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, c * mult))
        dy5 = dyn.reshape(n, oh, ow, c, mult)
        dw = np.zeros((kh, kw, c, mult), ct)
        for i, j, rows, cols, first in _taps(win, kh, kw, oh, ow, h, wd, pads):
            if rows[0] >= rows[1] or cols[0] >= cols[1]:
                continue
            xs = _in_window(xn, rows, cols, first, win.strides)
            dw[i, j] = np.einsum("nhwc,nhwcm->cm", xs, _out_window(dy5, rows, cols))
        return dw.astype(dt, copy=False)

    return compute
