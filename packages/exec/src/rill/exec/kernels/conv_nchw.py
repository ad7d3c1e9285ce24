"""The channels-first convolution of the CPU _FusedConv2D (imported ONNX / PyTorch-made models),
with compiled loops (numba) for its copies.

Conv2D's own kernel works in NHWC and reaches NCHW through transposing copies. This one stays in
NCHW: each image's input is copied once into its zero-padded stride phases (`_conv_loops`),
so that every filter tap reads, for a band of output rows, contiguous runs of a phase plane. A
band's patch matrix ([kh·kw·c, rows·ow], one row per tap and channel) times the filter matrix
(the HWIO filter read as [kh·kw·c, o], transposed in the GEMM, never copied) is the band's output
channels-first: the GEMM writes it into the output in place, and one pass over the band, while it
is in cache, adds the bias and applies the activation. (Where the phase width wq exceeds the
output width by more than _CROP_WIDTH columns, the patches are runs at width wq and one more
pass crops the product into the output.) Bands are sized to stay in cache. A 1×1 convolution
with stride 1 and no padding is one GEMM per image on the input as it is.

The bands are fixed by the shapes (`intra_op.parallel_blocks`), so the bits never depend on the
threads. The sums run in a different order than Conv2D's kernel (rounding differs in the last
bits; the results agree to float rounding).
"""

from __future__ import annotations

import importlib

import numpy as np

from rill.exec.kernels import jit
from rill.exec.kernels.intra_op import parallel_blocks, parallel_for, scratch
from rill.graph.errors import InvalidArgumentError

__all__ = ["nchw_conv"]

# Patch elements per band (512 KiB of float32): the band's patches, product and output stay in
# the cache of one core.
_BAND = 1 << 17
# Output elements per band (128 KiB of float32): with few filter rows k (an RGB stem's 27) and
# many output channels the band's product outgrows the patches; beyond this the GEMM slowed.
_OUT_BAND = 1 << 15
# The fewest patch rows (kh·kw·c) for which the bands split over threads. With fewer, each
# output value takes few multiply-adds and the bands are bound by memory and by their calls'
# Python: an RGB 3×3 stride-2 stem to 16 channels (k = 27) took 0.21 ms on one thread and
# 0.35 ms in bands over two at batch 1, SqueezeNet's to 64 channels 5.4 and 7.8 ms at batch 8;
# ResNet-18 ½'s 7×7 stem (k = 147) 1.46 and 0.95 ms at batch 1, 12.2 and 7.2 at batch 8.
_SPLIT_K = 64
# The most extra columns per row (the phase width wq past the output width ow) for which the
# patches are built at the output width, so that the GEMM writes the output band in place; with
# more (a padding wider than the window, rare), the product is built at the phase width and
# cropped (conv_crop).
_CROP_WIDTH = 8


def _loops():
    if jit.loops() is None:
        return None
    if not _LOOPS:  # looked up once (an import per call costs about a microsecond)
        _LOOPS.append(importlib.import_module("rill.exec.kernels._conv_loops"))
    return _LOOPS[0]


_LOOPS: list = []


def usable(x: np.ndarray, w: np.ndarray) -> bool:
    """Whether nchw_conv computes this (float32/float64, 4-D, one group, compiled loops on)."""
    return (
        x.dtype in jit.FLOATS
        and w.dtype == x.dtype
        and x.ndim == 4
        and w.ndim == 4
        and w.shape[2] == x.shape[1]
        and _loops() is not None
    )


def nchw_conv(
    x: np.ndarray, w: np.ndarray, win, bias: np.ndarray, code: int, swish=None
) -> np.ndarray:
    """x [n, c, h, w] ⋆ w [kh, kw, c, o] → [n, o, oh, ow] under window `win` (a conv_common
    _Window), then + bias (when it has elements) and the compiled activation `code`
    (_conv_loops' epilogue: 0 none, 1 Relu, 2 Relu6, 3 HardSigmoid, 4 HardSwish); or, for
    float32 with `swish` False or True (code 0), Sigmoid or Swish (_conv_loops.sigmoid32), each
    band's while it is in cache."""
    loops = _loops()
    if swish is not None and x.dtype != np.float32:
        raise InvalidArgumentError(f"the compiled Sigmoid / Swish takes float32, got {x.dtype}")
    n, c, h, wd = x.shape
    kh, kw, _, o = w.shape
    oh, ow, (top, left) = win.resolve(h, wd, kh, kw)
    out = np.empty((n, o, oh, ow), x.dtype)
    if out.size == 0:
        return out
    x = np.ascontiguousarray(x)
    k = kh * kw * c
    wm = w.reshape(k, o).T  # [o, k], a transposed view for the GEMM
    bias = np.ascontiguousarray(bias.astype(x.dtype, copy=False))
    (sh, sw), (dh, dw) = win.strides, win.dilations
    if k == 0:
        out[...] = 0
        planes = out.reshape(n * o, oh * ow)
        if swish is not None:
            loops.sigmoid32_planes(planes, bias, swish, 0, n * o)
        elif bias.size:
            loops.bias_activation_planes(planes, bias, code, 0, n * o)
        return out
    work = n * oh * ow * k * o
    if kh == kw == 1 and (sh, sw) == (1, 1) and (oh, ow) == (h, wd) and (top, left) == (0, 0):
        xs = x.reshape(n, c, h * wd)
        planes = out.reshape(n, o, oh * ow)

        def one_image(i):
            np.matmul(wm, xs[i], out=planes[i])
            if swish is not None:
                loops.sigmoid32_planes(planes[i], bias, swish, 0, o)
            elif bias.size:
                loops.bias_activation_planes(planes[i], bias, code, 0, o)

        parallel_blocks(n, one_image, work)
        return out
    hp = max((oh - 1) * sh + (kh - 1) * dh + 1, top + h)
    wp = max((ow - 1) * sw + (kw - 1) * dw + 1, left + wd)
    hq, wq = -(-hp // sh), -(-wp // sw)
    ph = scratch("nchw_phases", n * c * sh * sw * hq * wq, x.dtype)
    ph = ph.reshape(n, c, sh * sw, hq * wq)

    def fill(lo, hi):
        for i in range(lo, hi):
            loops.conv_phases(x, i, ph[i], hq, wq, sh, sw, top, left)

    split = k >= _SPLIT_K  # else the bands and their input copy are memory-bound: one thread
    if split:
        parallel_for(n, fill)
    rows = max(1, min(oh, (_BAND // k - ow) // wq + 1, _OUT_BAND // (o * ow)))
    bands = [(i, r0, min(oh, r0 + rows)) for i in range(n) for r0 in range(0, oh, rows)]

    flat = out.reshape(n, o, oh * ow)

    def one_band(j):
        i, r0, r1 = bands[j]
        if wq - ow > _CROP_WIDTH:  # wide padding: products at the phase width, then cropped
            length = (r1 - r0 - 1) * wq + ow
            p = scratch("nchw_patches", k * length, x.dtype).reshape(k, length)
            loops.conv_patches(ph[i], p, wq, kh, kw, sh, sw, dh, dw, r0 * wq, length)
            e = scratch("nchw_product", o * length, x.dtype).reshape(o, length)
            np.matmul(wm, p, out=e)
            loops.conv_crop(e, out, i, bias, code, r0, r1, wq)
            if swish is not None:
                loops.sigmoid32_span(out, i, swish, r0 * ow, r1 * ow)
            return
        # Patches at the output width: the product is the output band, written in place.
        length = (r1 - r0) * ow
        p = scratch("nchw_patches", k * length, x.dtype).reshape(k, length)
        loops.conv_patch_rows(ph[i], p, wq, kh, kw, sh, sw, dh, dw, r0, r1, ow)
        np.matmul(wm, p, out=flat[i, :, r0 * ow : r1 * ow])
        if bias.size:
            loops.bias_activation_span(out, i, bias, code, r0 * ow, r1 * ow)
        if swish is not None:
            loops.sigmoid32_span(out, i, swish, r0 * ow, r1 * ow)

    if split:
        parallel_blocks(len(bands), one_band, work)
        return out
    # Few filter rows (memory-bound bands): each image's phases right before its bands, so that
    # they are still in cache (all images' first, at batch 8, sent the phases out to memory and
    # back: MobileNetV3-small's stem at batch 8, one thread: 2.06 -> 1.80 ms); at batch > 1 the
    # images go to the threads whole, each in its own core's cache.
    per_image = len(bands) // n

    def image(i):
        fill(i, i + 1)
        for j in range(i * per_image, (i + 1) * per_image):
            one_band(j)

    parallel_blocks(n, image, work)
    return out
