"""CPU kernels for rill.graph.ops.conv_ops: Conv2D and its gradient ops (the window helpers the
pooling and depthwise kernels share are in conv_common; depthwise convolutions are in
depthwise_kernels).

Convolutions work in NHWC (NCHW arguments are viewed as NHWC; the one copy that padding or
patch building makes anyway does the transpose) and spend their time in large GEMMs:

- forward: patches of the padded input, gathered with `as_strided` into a reused per-thread
  buffer in blocks of about _BLOCK_BYTES (large fresh allocations page-fault on every call and
  cost as much as the copy), each block multiplied by the [kh*kw*in, out] filter straight into
  the output;
- filter gradient: the same patch blocks, transposed, times out_backprop, summed over blocks
  (for a small filter, in blocks that stay in cache and as stacks of short products);
- input gradient: out_backprop times the filter, one [rows, in] slab per filter tap (a stacked
  matmul), each slab added into the strided window of the input it came from (col2im).

Stride-1 convolutions with an even output width (the usual case) take the widened-patch path
instead (conv_wide): less copying, wider GEMMs, and an input gradient without col2im. With the
compiled loops on, a filter matrix of few rows (a first layer: few channels and taps) takes the
direct loops of conv_direct (forward and filter gradient), and 3×3 and 5×5 stride-1 ones of
enough channels the Winograd paths of conv_winograd.

The blocks are fixed by the shapes and shared out over the intra-op threads
(`intra_op.parallel_blocks`; rill.exec.threads decides how many): each block's copy and product
run on one thread; the filter gradient keeps one partial sum per fixed group of blocks and adds
the groups in order. So the result's bits never depend on the thread count or the load.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rill.exec import threads
from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import pointwise
from rill.exec.kernels.conv_common import (  # noqa: F401 - re-exported for the pool/depthwise kernels
    _blocks,
    _check_shape,
    _compute_dtype,
    _groups,
    _in_window,
    _invalid,
    _out_window,
    _padded,
    _pads_used,
    _sizes_vector,
    _tap_range,
    _taps,
    _Window,
)
from rill.exec.kernels.conv_direct import direct_backprop_filter, direct_forward, direct_ok
from rill.exec.kernels.conv_wide import (
    _wide_backprop_filter,
    _wide_backprop_input,
    _wide_forward,
    _wide_ok,
)
from rill.exec.kernels.conv_winograd import (
    winograd_backprop_filter,
    winograd_backprop_input,
    winograd_forward,
    winograd_nchw,
    winograd_tile,
)
from rill.exec.kernels.intra_op import groups_of, parallel_blocks, scratch
from rill.graph.errors import InvalidArgumentError

# The size of a patch block. Larger blocks make fewer, larger GEMMs; smaller ones hold less
# scratch memory per thread and give the threads more blocks to share out. On the MNIST CNN's
# shapes 2-3 MB ran 10-15% faster than 12 MB.
_BLOCK_BYTES = 3 << 20
# The patch block size for a small [k, out] filter matrix (k * out at most _SMALL_RESULT), whose
# GEMMs do little work per patch byte: a block that stays in cache between its copy and its
# GEMM saves a trip to memory. On the MNIST CNN's first convolution, with its inputs out of
# cache as in a training step, 512 KiB took the forward from 1.8 to 1.3 ms and the filter
# gradient from 2.0 to 1.7 ms.
_SMALL_BLOCK_BYTES = 512 << 10
_SMALL_RESULT = 4096


def _block_bytes(k: int, o: int) -> int:
    """The patch block size for a [k, o] filter matrix."""
    return _SMALL_BLOCK_BYTES if k * o <= _SMALL_RESULT else _BLOCK_BYTES


class _Patches:
    """The patch matrix of a convolution in blocks covering every output position: `block(i)`
    copies block i into the calling thread's scratch memory and gives (first row, [rows,
    kh*kw*c] patch matrix).

    A patch row holds the window of one output position in (kh, kw, c) order, matching the
    [kh*kw*c, out] filter matrix. Two layouts, whichever copies in longer contiguous runs:
    rows-major from the NHWC input (runs of kw*c), or, for few channels, columns-major from a
    channels-first copy (runs along the output width); the second gives a transposed view.
    """

    def __init__(self, x, kh, kw, win: _Window, oh, ow, pads, block_bytes: int):
        n, h, wd, c = x.shape
        self.k, self.oh, self.ow, self.dtype = kh * kw * c, oh, ow, x.dtype
        (sh, sw), (dh, dw) = win.strides, win.dilations
        hp, wp = _pads_used(h, wd, kh, kw, oh, ow, win, pads)
        run_rows = kw * c if dw == 1 else c
        run_cols = ow if sw == 1 else 1
        self.channels_first = run_cols >= 2 * run_rows
        xp = _padded(x, hp, wp, channels_first=self.channels_first)
        s0, s1, s2, s3 = xp.strides
        if self.channels_first:
            shape, strides = (kh, kw, c, n, oh, ow), (s2 * dh, s3 * dw, s1, s0, s2 * sh, s3 * sw)
        else:
            shape, strides = (n, oh, ow, kh, kw, c), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3)
        self.view = as_strided(xp, shape, strides, writeable=False)
        self.blocks = _blocks(n, oh, ow * self.k, x.itemsize, block_bytes)

    def block(self, i: int):
        n0, n1, h0, h1 = self.blocks[i]
        m = (n1 - n0) * (h1 - h0) * self.ow
        buf = scratch("patches", self.k * m, self.dtype)
        if self.channels_first:
            buf = buf.reshape(self.view.shape[:3] + (n1 - n0, h1 - h0, self.ow))
            np.copyto(buf, self.view[:, :, :, n0:n1, h0:h1])
            return (n0 * self.oh + h0) * self.ow, buf.reshape(self.k, m).T
        buf = buf.reshape((n1 - n0, h1 - h0) + self.view.shape[2:])
        np.copyto(buf, self.view[n0:n1, h0:h1])
        return (n0 * self.oh + h0) * self.ow, buf.reshape(m, self.k)


def _conv_forward(x, w, win: _Window, oh, ow, pads, channels_first: bool = False, epilogue=None,
                  filters=None, cf_epilogue=None):  # fmt: skip
    """x [n, h, w, c] ⋆ w [kh, kw, c, o] → [n, oh, ow, o] (or [n, o, oh, ow]), one group.
    `filters`: the node's cache of a channels-first Winograd filter transform (see
    conv_winograd.winograd_nchw). `cf_epilogue`: [bias, code, False, side], a fused
    channels-first convolution's bias and compiled activation (or residual side input and Relu),
    which the Winograd path applies as it writes the output (and then sets the flag True); the
    other paths leave it to the caller.

    Channels-first output comes straight from per-image products w^T · patches^T, so NCHW
    needs no transposing copy of the output. `epilogue(rows)`, for channels-last output only,
    is applied in place to each block of output rows ([rows, o]) right after its product, while
    the block is in cache (a fused op's bias and activation).
    """
    assert epilogue is None or not channels_first
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    out = np.empty((n, o, oh, ow) if channels_first else (n, oh, ow, o), x.dtype)
    if out.size == 0:
        return out
    if x.size == 0 or kh * kw * c == 0:
        out[...] = 0
        return out
    k = kh * kw * c
    wm = w.reshape(k, o)
    work = n * oh * ow * k * o
    one_by_one = kh == kw == 1 and win.strides == (1, 1) and pads == (0, 0)
    if channels_first:
        per_image = out.reshape(n, o, oh * ow)
        wt = wm.T
        strided = (kh == kw == 1 and pads == (0, 0) and not one_by_one
                   and (oh - 1) * win.strides[0] < h and (ow - 1) * win.strides[1] < wd)  # fmt: skip
        if (one_by_one and (oh, ow) == (h, wd)) or strided:
            xt = x.transpose(0, 3, 1, 2)
            if strided:
                # A strided 1×1 filter (a residual block's downsampling shortcut): the input's
                # sampled positions, copied channels-first, then the 1×1 product (the patches'
                # path took 6× as long on ResNet-18 ½'s 32×56×56 → 64×28×28).
                sh, sw = win.strides
                xt = np.ascontiguousarray(xt[:, :, : (oh - 1) * sh + 1 : sh,
                                             : (ow - 1) * sw + 1 : sw])  # fmt: skip
            xt = xt.reshape(n, c, oh * ow)
            if n == 1:  # split over the threads without changing a bit (pointwise)
                pointwise.matmul(wt, xt[0], per_image[0])
                return out
            parallel_blocks(
                n, lambda i: pointwise.matmul(wt, xt[i], per_image[i], pointwise.NO_SPLIT), work
            )
            return out
        if filters is not None and x.dtype == w.dtype:  # x: the channels-first input's view
            fused = None if cf_epilogue is None else (cf_epilogue[0], cf_epilogue[1],
                                                      cf_epilogue[3])  # fmt: skip
            done = winograd_nchw(win, x.transpose(0, 3, 1, 2), w, oh, ow, pads, out, filters,
                                 fused)  # fmt: skip
            if done is not None:
                if cf_epilogue is not None:
                    cf_epilogue[2] = True
                return done
        patches = _Patches(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o))

        def one_cf(i):
            start, p = patches.block(i)
            n0, r0 = divmod(start, oh * ow)
            rows = len(p)
            images = max(1, rows // (oh * ow))
            dst = per_image[n0 : n0 + images, :, r0 : r0 + rows // images]
            split = pointwise.SPLIT_GRAIN if single else pointwise.NO_SPLIT
            if p.flags.c_contiguous:
                # Row-major patches: one GEMM, then a cache-resident transposing copy (per-image
                # products with a transposed operand are much slower in BLAS). The compiled
                # product where it runs (split over the threads, the team included, when the
                # patches are one block: the same bits on any thread).
                block = scratch("block", rows * o, x.dtype).reshape(rows, o)
                if pointwise.product(p, wm, block, split_from=split):
                    pass  # compiled
                elif single:  # halves over the threads where they give one call's bits
                    threads.matmul(p, wm, out=block, most=2, exact=True)
                else:
                    np.matmul(p, wm, out=block)
                dst[...] = block.reshape(images, rows // images, o).transpose(0, 2, 1)
            elif images == 1 and pointwise.compiled(wt, p.T, dst[0]) is not None:
                pointwise.matmul(wt, p.T, dst[0], split)  # channels-first patches [k, rows]
            else:
                by_image = p.T.reshape(k, images, rows // images).transpose(1, 0, 2)
                np.matmul(wt, by_image, out=dst)

        single = len(patches.blocks) == 1  # batch-1 inference's small layers
        parallel_blocks(len(patches.blocks), one_cf, work)
        return out
    flat = out.reshape(n * oh * ow, o)
    if one_by_one and (oh, ow) == (h, wd):
        threads.matmul(x.reshape(n * h * wd, c), wm, out=flat)
        if epilogue is not None:
            epilogue(flat)
        return out
    if direct_ok(win, kh, kw, c, o, n, oh, ow, x.dtype) and w.dtype == x.dtype:
        return direct_forward(x, w, win, oh, ow, pads, epilogue, out)
    tile = winograd_tile(win, kh, kw, c, o, n, oh, ow, pads, x.dtype)
    if tile:
        return winograd_forward(x, w, oh, ow, pads, tile, epilogue)
    if _wide_ok(win, ow, kw * c):
        return _wide_forward(x, w, oh, ow, pads, epilogue)
    patches = _Patches(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o))

    def one(i):
        start, p = patches.block(i)
        block = flat[start : start + len(p)]
        np.matmul(p, wm, out=block)
        if epilogue is not None:
            epilogue(block)

    parallel_blocks(len(patches.blocks), one, work)
    return out


def _conv_backprop_filter(x, dy, kh, kw, win: _Window, pads):
    """d(loss)/d(filter) [kh, kw, c, o] from x [n, h, w, c] and dy [n, oh, ow, o], one group.

    The blocks' products are summed in fixed groups, one partial sum per group, then the groups
    in order (the same bits on any number of threads)."""
    n, h, wd, c = x.shape
    _, oh, ow, o = dy.shape
    k = kh * kw * c
    if x.size == 0 or dy.size == 0 or k == 0:
        return np.zeros((kh, kw, c, o), x.dtype)
    if direct_ok(win, kh, kw, c, o, n, oh, ow, x.dtype) and dy.dtype == x.dtype:
        return direct_backprop_filter(x, dy, kh, kw, win, pads)
    tile = winograd_tile(win, kh, kw, c, o, n, oh, ow, pads, x.dtype)
    if tile:
        return winograd_backprop_filter(x, dy, kh, pads, tile)
    if _wide_ok(win, ow, kw * c):
        return _wide_backprop_filter(x, dy, kh, kw, pads)
    dy2 = dy.reshape(n * oh * ow, o)
    patches = _Patches(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o))
    groups = groups_of(len(patches.blocks))
    parts = np.empty((len(groups), k, o), x.dtype)

    def one(g):
        acc, tmp = parts[g], None
        for i in groups[g]:
            start, p = patches.block(i)
            rows = dy2[start : start + len(p)]
            if tmp is None:
                _long_product(p.T, rows, acc)
                tmp = scratch("partial", acc.size, acc.dtype).reshape(acc.shape)
            else:
                _long_product(p.T, rows, tmp)
                acc += tmp

    parallel_blocks(len(groups), one, n * oh * ow * k * o)
    acc = parts[0]
    for g in range(1, len(groups)):
        acc += parts[g]
    return acc.reshape(kh, kw, c, o)


# _long_product's pieces hold about this many multiply-adds each. On the MNIST CNN's first filter
# gradient ([25, 50176] times [50176, 32]) one GEMM took 1.1 ms and 256 pieces of 196 rows
# 0.66 ms (100-400 rows were alike).
_PIECE_MACS = 160_000


def _long_product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a [k, m] @ b [m, o], for the filter gradient's long inner dimension m.

    A small [k, o] result with a long inner dimension is a poor GEMM for threaded BLAS (which
    splits the result among its threads, not the inner dimension); it runs faster as a stack of
    products over short pieces of m, summed.
    """
    k, m = a.shape
    o = b.shape[1]
    piece = max(1, _PIECE_MACS // max(k * o, 1))
    pieces = m // piece
    if k * o > _SMALL_RESULT or pieces < 4:
        np.matmul(a, b, out=out)
        return
    head = pieces * piece
    parts = scratch("parts", pieces * k * o, out.dtype).reshape(pieces, k, o)
    stacked_a = a[:, :head].reshape(k, pieces, piece).transpose(1, 0, 2)
    np.matmul(stacked_a, b[:head].reshape(pieces, piece, o), out=parts)
    np.add.reduce(parts, axis=0, out=out)
    if head < m:
        out += a[:, head:] @ b[head:]


def _conv_backprop_input(dy, w, n, h, wd, win: _Window, pads):
    """d(loss)/d(input) [n, h, w, c] from dy [n, oh, ow, o] and w [kh, kw, c, o], one group.

    Blocks of whole images write disjoint images of dx and run on the intra-op threads; blocks
    of rows of one image overlap in dx and run in order on the caller."""
    _, oh, ow, o = dy.shape
    kh, kw, c, _ = w.shape
    tile = winograd_tile(win, kh, kw, o, c, n, h, wd, pads, dy.dtype) if n * h * wd * c else 0
    if tile and dy.size:
        return winograd_backprop_input(dy, w, h, wd, pads, tile)
    if n * h * wd * c and dy.size and _wide_ok(win, wd, kw * o):
        return _wide_backprop_input(dy, w, h, wd, pads)
    dx = np.zeros((n, h, wd, c), dy.dtype)
    if dx.size == 0 or dy.size == 0 or o == 0:
        return dx
    taps = kh * kw
    # [taps, o, c]: one slab of the filter per tap, contiguous for the stacked matmul.
    wt = np.ascontiguousarray(w.reshape(taps, c, o).transpose(0, 2, 1))
    dy2 = dy.reshape(n * oh * ow, o)
    tap_list = list(_taps(win, kh, kw, oh, ow, h, wd, pads))
    blocks = _blocks(n, oh, ow * taps * c, dy.itemsize, _BLOCK_BYTES)

    def one(b):
        n0, n1, h0, h1 = blocks[b]
        m = (n1 - n0) * (h1 - h0) * ow
        start = (n0 * oh + h0) * ow
        cols = scratch("cols", taps * m * c, dy.dtype).reshape(taps, m, c)
        np.matmul(dy2[None, start : start + m], wt, out=cols)
        cols = cols.reshape(taps, n1 - n0, h1 - h0, ow, c)
        dxb = dx[n0:n1]
        for i, j, rows, cls, first in tap_list:
            r0, r1 = max(rows[0], h0), min(rows[1], h1)
            if r0 >= r1 or cls[0] >= cls[1]:
                continue
            first_row = first[0] + (r0 - rows[0]) * win.strides[0]
            dst = _in_window(dxb, (r0, r1), cls, (first_row, first[1]), win.strides)
            dst += cols[i * kw + j, :, r0 - h0 : r1 - h0, cls[0] : cls[1]]

    if all(h0 == 0 and h1 == oh for _, _, h0, h1 in blocks):
        parallel_blocks(len(blocks), one, n * oh * ow * taps * c * o)
    else:
        for b in range(len(blocks)):
            one(b)
    return dx


# -- Conv2D and its gradients ---------------------------------------------------------------------

_CONV_KW = dict(expensive=True)


@register_kernel("Conv2D", **_CONV_KW)
def conv2d(strides, padding, explicit_paddings, data_format, dilations):
    return _conv2d(strides, padding, explicit_paddings, data_format, dilations)


def _conv2d(strides, padding, explicit_paddings, data_format, dilations, fused=None):
    """Conv2D's compute(x, w); with `fused` (a fused op's epilogue), compute(x, w, *args) gives
    fused(product, *args), applied to each block of output rows while it is in cache where
    `fused.blockwise(out_channels, args)` (which checks the args) can be: channels-last output
    computed in its own dtype."""
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)
    filters = [None, None] if win.nchw else None  # this node's Winograd filter transforms

    def compute(x, w, *args):
        if x.ndim != 4 or w.ndim != 4:
            raise InvalidArgumentError(
                f"input and filter must be 4-D, got shapes {list(x.shape)} and {list(w.shape)}"
            )
        dt = x.dtype
        ct = _compute_dtype(dt)
        xn = win.to_nhwc(x).astype(ct, copy=False)
        w = w.astype(ct, copy=False)
        n, h, wd, c = xn.shape
        kh, kw, kc, o = w.shape
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        if groups == 1:
            # Blocks are finished in the compute dtype; a half-precision result keeps the
            # unfused rounding (the product is rounded before the bias is added).
            blockwise = fused is not None and not win.nchw and ct == dt
            epilogue = fused.blockwise(o, args) if blockwise else None
            # A channels-first fused op whose epilogue is a bias and a compiled activation
            # (fused_conv_kernels.nchw_epilogue's `code`), or a bias, a residual side input and
            # Relu or none (`residual`): the Winograd path applies it.
            cf = getattr(fused, "code", None) if win.nchw and ct == dt else None
            if cf is not None:
                cf = _cf_epilogue(fused, cf, args, (n, o, oh, ow), dt)
            out = _conv_forward(xn, w, win, oh, ow, pads, win.nchw, epilogue, filters, cf)
            if cf is not None and cf[2]:
                return out
            out = out.astype(dt, copy=False)
            return fused(out, *args) if fused is not None and not blockwise else out
        else:
            out = np.empty((n, oh, ow, o), ct)
            og = o // groups
            for g in range(groups):
                xg = xn[..., g * kc : (g + 1) * kc]
                wg = np.ascontiguousarray(w[..., g * og : (g + 1) * og])
                out[..., g * og : (g + 1) * og] = _conv_forward(xg, wg, win, oh, ow, pads)
        out = win.from_nhwc(out).astype(dt, copy=False)
        return out if fused is None else fused(out, *args)

    return compute


def _cf_epilogue(fused, code, args, shape, dt):
    """_conv_forward's cf_epilogue for a fused op's (bias,) or (bias, side) args, or None where
    they are not of the output's channels, shape and dtype (the fused op then checks them)."""
    bias = args[0] if args else None
    if not (isinstance(bias, np.ndarray) and bias.shape == shape[1:2] and bias.dtype == dt):
        return None
    side = np.empty((0, 0, 0, 0), dt)
    if getattr(fused, "residual", False):
        side = args[1] if len(args) == 2 else None
        if not (isinstance(side, np.ndarray) and side.shape == shape and side.dtype == dt):
            return None
        side = np.ascontiguousarray(side)
    elif len(args) != 1:
        return None
    return [np.ascontiguousarray(bias), code, False, side]


@register_kernel("Conv2DBackpropInput", **_CONV_KW)
def conv2d_backprop_input(strides, padding, explicit_paddings, data_format, dilations):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(input_sizes, w, dy):
        sizes = _sizes_vector(input_sizes, "input_sizes")
        dt = dy.dtype
        ct = _compute_dtype(dt)
        dyn = win.to_nhwc(dy).astype(ct, copy=False)
        w = w.astype(ct, copy=False)
        if w.ndim != 4 or dyn.ndim != 4:
            raise InvalidArgumentError("filter and out_backprop must be 4-D")
        kh, kw, kc, o = w.shape
        if len(sizes) == 2:
            n, h, wd = dyn.shape[0], sizes[0], sizes[1]
            c = kc
        elif len(sizes) == 4:
            n, c = sizes[0], sizes[1 if win.nchw else 3]
            h, wd = (sizes[2], sizes[3]) if win.nchw else (sizes[1], sizes[2])
        else:
            raise InvalidArgumentError(f"input_sizes must have 4 (or 2) values, got {sizes}")
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, o))
        if groups == 1:
            dx = _conv_backprop_input(dyn, w, n, h, wd, win, pads)
        else:
            dx = np.empty((n, h, wd, c), ct)
            og = o // groups
            for g in range(groups):
                wg = w[..., g * og : (g + 1) * og]
                dyg = dyn[..., g * og : (g + 1) * og]
                dx[..., g * kc : (g + 1) * kc] = _conv_backprop_input(dyg, wg, n, h, wd, win, pads)
        return win.from_nhwc(dx).astype(dt, copy=False)

    return compute


@register_kernel("Conv2DBackpropFilter", **_CONV_KW)
def conv2d_backprop_filter(strides, padding, explicit_paddings, data_format, dilations):
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)

    def compute(x, filter_sizes, dy):
        sizes = _sizes_vector(filter_sizes, "filter_sizes")
        if len(sizes) != 4:
            raise InvalidArgumentError(f"filter_sizes must have 4 values, got {sizes}")
        dt = x.dtype
        ct = _compute_dtype(dt)
        xn = win.to_nhwc(x).astype(ct, copy=False)
        dyn = win.to_nhwc(dy).astype(ct, copy=False)
        kh, kw, kc, o = sizes
        n, h, wd, c = xn.shape
        groups = _groups(c, kc, o)
        oh, ow, pads = win.resolve(h, wd, kh, kw)
        _check_shape("out_backprop (as NHWC)", dyn.shape, (n, oh, ow, o))
        if groups == 1:
            dw = _conv_backprop_filter(xn, dyn, kh, kw, win, pads)
        else:
            dw = np.empty((kh, kw, kc, o), ct)
            og = o // groups
            for g in range(groups):
                xg = xn[..., g * kc : (g + 1) * kc]
                dyg = dyn[..., g * og : (g + 1) * og]
                dw[..., g * og : (g + 1) * og] = _conv_backprop_filter(xg, dyg, kh, kw, win, pads)
        return dw.astype(dt, copy=False)

    return compute
