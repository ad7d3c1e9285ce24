"""The channels-first convolution of the CPU _FusedConv2D (imported ONNX / PyTorch-made models)
for few input channels (an RGB stem), with compiled loops (numba) for its copies.

Conv2D's own kernel works in NHWC and reaches NCHW through transposing copies. This one stays in
NCHW: each image's input is copied once into its zero-padded stride phases (`_conv_loops`),
so that every filter tap reads, for a run of output columns, one contiguous run of a phase
plane. From there the convolution is summed directly (`_conv_vec`: blocks of 8 output channels
by 16 or 32 columns kept in vector registers over all the taps, a fused multiply-add each; an
implicit GEMM with no patch matrix), a band of output rows at a time, the bias and the
activation applied in registers and the sums stored into the output. With RILL_CONV_DIRECT=0
in the environment the bands are a patch matrix
([kh·kw·c, rows·ow], one row per tap and channel) times the filter matrix (the HWIO filter read
as [kh·kw·c, o], transposed in the GEMM, never copied), the GEMM writing the output in place.
(Where the phase width wq exceeds the output width by more than _CROP_WIDTH columns, the patches
are runs at width wq and one more pass crops the product into the output.) A 1×1 convolution
with stride 1 and no padding is one GEMM per image on the input as it is.

The bands are fixed by the shapes (`intra_op.parallel_blocks`), so the bits never depend on the
threads. The sums run in a different order than Conv2D's kernel (rounding differs in the last
bits; the results agree to float rounding)."""

from __future__ import annotations

import numpy as np

from rill.exec.kernels import intra_op, jit, pointwise
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
# The fewest patch rows (kh·kw·c) of a convolution whose windows tile the image (a vision
# transformer's 16×16 stride-16 patches: k = 768) computed as its patch matrix times the filter
# (pointwise.matmul, through the team) rather than summed directly: ViT-small's patch
# embedding at batch 1 took 0.75 ms directly, its 14 output columns under a block's 16.
_TILED_K = 64
# The most extra columns per row (the phase width wq past the output width ow) for which the
# patches are built at the output width, so that the GEMM writes the output band in place; with
# more (a padding wider than the window, rare), the product is built at the phase width and
# cropped (conv_crop).
_CROP_WIDTH = 8


def _loops():
    return jit.conv_loops()


def _vec():
    """The direct convolution's module (_conv_vec), or None where it does not run (the compiled
    loops off, or RILL_CONV_DIRECT=0 in the environment: the patches and a GEMM then)."""
    return jit.direct("_conv_vec")


# Taps' offsets in the phases by geometry (c, kh, kw, sh, sw, dh, dw, hq, wq).
_OFFSETS: dict = {}


def _tap_offsets(c, kh, kw, sh, sw, dh, dw, hq, wq) -> np.ndarray:
    """Where each filter tap (i, j, channel), in the HWIO filter's row order, reads the first
    output position's input in one image's phases [c, sh·sw, hq·wq]."""
    key = (c, kh, kw, sh, sw, dh, dw, hq, wq)
    got = _OFFSETS.get(key)
    if got is None:
        i, j, ci = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(c), indexing="ij")
        phase = (i * dh) % sh * sw + (j * dw) % sw
        got = (ci * sh * sw + phase) * hq * wq + (i * dh) // sh * wq + (j * dw) // sw
        got = _OFFSETS[key] = np.ascontiguousarray(got.reshape(-1), dtype=np.int64)
    return got


def _direct(vec, loops, x, w, out, bias, code, swish, taps, phases, work):
    """nchw_conv through _conv_vec.direct_rows: each image's phases (with room past them for
    the last column block's reads), then bands of output rows summed, biased and activated in
    registers straight into out; for swish its Sigmoid / Swish over each band."""
    n, c = x.shape[:2]
    kh, kw, sh, sw, dh, dw = taps
    top, left, hq, wq = phases
    o, oh, ow = out.shape[1:]
    k = kh * kw * c
    lanes = vec.VECTOR_BYTES // x.itemsize
    nv = vec.vectors_for(ow, x.itemsize)
    op = -(-o // vec.CO) * vec.CO
    per_image = c * sh * sw * hq * wq
    ph = scratch("nchw_phases", n * per_image + nv * lanes, x.dtype)
    wk = np.zeros((k, op), x.dtype)  # [k, op] → [op // CO, k, CO]: see _conv_vec._block
    wk[:, :o] = w.reshape(k, o)
    wk = np.ascontiguousarray(wk.reshape(k, op // vec.CO, vec.CO).transpose(1, 0, 2))
    toff = _tap_offsets(c, kh, kw, sh, sw, dh, dw, hq, wq)
    act = code if bias.size else vec.RAW

    def fill(i):
        loops.conv_phases(x, i, ph[i * per_image : (i + 1) * per_image].reshape(c, sh * sw, -1),
                          hq, wq, sh, sw, top, left)  # fmt: skip

    rows = max(1, min(oh, _OUT_BAND // (op * ow)))
    per_band = -(-oh // rows)

    def band(i, r0):
        r1 = min(oh, r0 + rows)
        vec.direct_rows(ph, wk, bias, out, toff, i * per_image + r0 * wq, wq, r1 - r0,
                        (i * o * oh + r0) * ow, act, nv)  # fmt: skip
        if swish is not None:
            loops.sigmoid32_span(out, i, swish, r0 * ow, r1 * ow)

    team = intra_op.team() if n == 1 and per_band > 1 else None
    if team is not None:  # the phases, then runs of bands over the pool's team
        fill(0)
        vec.direct_team(ph, wk, bias, out, toff, wq, rows, act, nv,
                        -1 if swish is None else int(swish), 4, team,
                        vec.bands_piece_function(x.dtype))  # fmt: skip
        return out
    if k >= _SPLIT_K or n == 1:  # all images' phases, then the bands over the threads
        # (the direct sums are compute-bound even for a 3×3 RGB stem: MobileNetV3-small's,
        # batch 1, 106 -> 88 µs on two threads, SqueezeNet's 309 -> 208)
        parallel_for(n, lambda lo, hi: [fill(i) for i in range(lo, hi)])
        parallel_blocks(n * per_band, lambda j: band(j // per_band, j % per_band * rows), work)
        return out

    def image(i):  # several images, few taps: each whole on a thread, its phases in cache
        fill(i)
        for r0 in range(0, oh, rows):
            band(i, r0)

    parallel_blocks(n, image, work)
    return out


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

        def one_image(i):  # (Conv2D's pointwise product: the same bits)
            pointwise.matmul(wm, xs[i], planes[i], pointwise.NO_SPLIT)
            if swish is not None:
                loops.sigmoid32_planes(planes[i], bias, swish, 0, o)
            elif bias.size:
                loops.bias_activation_planes(planes[i], bias, code, 0, o)

        parallel_blocks(n, one_image, work)
        return out
    if (kh, kw) == (sh, sw) and (dh, dw) == (1, 1) and (top, left) == (0, 0) and k >= _TILED_K:
        planes = out.reshape(n, o, oh * ow)
        p = scratch("nchw_tiles", k * oh * ow, x.dtype).reshape(k, oh * ow)
        plain = swish is None and bias.size
        if pointwise.compiled(wm, p, planes[0]) is not None:
            for i in range(n):
                loops.conv_tiles(x, i, p, kh, kw, oh, ow)
                done = pointwise.matmul(wm, p, planes[i], bias=bias if plain else None,
                                        code=code if plain else None)  # fmt: skip
                if swish is not None:
                    loops.sigmoid32_planes(planes[i], bias, swish, 0, o)
                elif plain and not done:
                    loops.bias_activation_planes(planes[i], bias, code, 0, o)
            return out
    hp = max((oh - 1) * sh + (kh - 1) * dh + 1, top + h)
    wp = max((ow - 1) * sw + (kw - 1) * dw + 1, left + wd)
    hq, wq = -(-hp // sh), -(-wp // sw)
    vec = _vec()
    if vec is not None:
        return _direct(vec, loops, x, w, out, bias, code, swish, (kh, kw, sh, sw, dh, dw),
                       (top, left, hq, wq), work)  # fmt: skip
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
