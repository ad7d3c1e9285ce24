"""CPU kernels for rill.graph.ops.conv_ops: Conv2D and its gradient ops, and the window helpers
the pooling and depthwise kernels share (depthwise convolutions are in depthwise_kernels).

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
instead (see its section): less copying, wider GEMMs, and an input gradient without col2im.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.intra_op import scratch
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.conv_ops import (
    check_batch_and_depth,
    explicit_pads,
    spatial_pair,
    windowed_output_size,
)

# The size of a patch block. Larger blocks make fewer, larger GEMMs; smaller ones hold less
# scratch memory per thread. On the MNIST CNN's shapes 4-16 MB were within 5% of each other.
_BLOCK_BYTES = 12 << 20
# The patch block size for a small [k, out] filter matrix (k * out at most _SMALL_RESULT), whose
# GEMMs do little work per patch byte: a block that stays in cache between its copy and its
# GEMM saves a trip to memory. On the MNIST CNN's first convolution, with its inputs out of
# cache as in a training step, 512 KiB took the forward from 1.8 to 1.3 ms and the filter
# gradient from 2.0 to 1.7 ms.
_SMALL_BLOCK_BYTES = 512 << 10
_SMALL_RESULT = 4096


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """Half types compute in float32 (numpy has no fast half GEMM); others in their own type."""
    if dtype == np.float16 or dtype == dtypes.bfloat16.np:
        return np.dtype(np.float32)
    return dtype


def _invalid(fn):
    """Runs fn(), turning the ValueError of a window/shape check into InvalidArgumentError."""
    try:
        return fn()
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None


class _Window:
    """The per-node window attrs, parsed once: strides, dilations and padding per spatial axis."""

    def __init__(self, strides, dilations, padding, explicit_paddings, data_format):
        def parse():
            check_batch_and_depth(strides, "strides", data_format)
            check_batch_and_depth(dilations, "dilations", data_format)
            self.strides = spatial_pair(strides, "strides", data_format)
            self.dilations = spatial_pair(dilations, "dilations", data_format)
            self.explicit = explicit_pads(padding, explicit_paddings, data_format)

        _invalid(parse)
        self.padding = padding
        self.nchw = data_format.startswith("NCHW")

    def resolve(self, h: int, w: int, kh: int, kw: int):
        """(out_h, out_w, (pad_top, pad_left)) for an h×w input and a kh×kw window."""
        pads = self.explicit or ((0, 0), (0, 0))

        def sizes():
            oh, pt, _ = windowed_output_size(
                h, kh, self.strides[0], self.dilations[0], self.padding, pads[0], strict=False
            )
            ow, pl, _ = windowed_output_size(
                w, kw, self.strides[1], self.dilations[1], self.padding, pads[1], strict=False
            )
            return oh, ow, (pt, pl)

        return _invalid(sizes)

    def to_nhwc(self, x: np.ndarray) -> np.ndarray:
        return x.transpose(0, 2, 3, 1) if self.nchw else x

    def from_nhwc(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if self.nchw else x


def _tap_range(out_size: int, in_size: int, offset: int, stride: int) -> tuple[int, int]:
    """The outputs o in [lo, hi) whose tap input o*stride + offset lies inside [0, in_size)."""
    lo = max(0, -(offset // stride))
    last = in_size - 1 - offset
    hi = last // stride + 1 if last >= 0 else 0
    return lo, max(lo, min(hi, out_size))


def _taps(win: _Window, kh, kw, oh, ow, h, w, pads):
    """Per filter tap: (i, j, output row/col ranges, input row/col start), clipped to the input."""
    (sh, sw), (dh, dw) = win.strides, win.dilations
    for i in range(kh):
        oi = i * dh - pads[0]
        r0, r1 = _tap_range(oh, h, oi, sh)
        for j in range(kw):
            oj = j * dw - pads[1]
            c0, c1 = _tap_range(ow, w, oj, sw)
            yield i, j, (r0, r1), (c0, c1), (r0 * sh + oi, c0 * sw + oj)


def _in_window(a: np.ndarray, rows, cols, start, stride, axes=(1, 2)) -> np.ndarray:
    """The strided view of `a` read by one tap for the outputs in rows × cols."""
    index = [slice(None)] * a.ndim
    index[axes[0]] = slice(start[0], start[0] + (rows[1] - rows[0] - 1) * stride[0] + 1, stride[0])
    index[axes[1]] = slice(start[1], start[1] + (cols[1] - cols[0] - 1) * stride[1] + 1, stride[1])
    return a[tuple(index)]


def _out_window(a: np.ndarray, rows, cols, axes=(1, 2)) -> np.ndarray:
    index = [slice(None)] * a.ndim
    index[axes[0]] = slice(*rows)
    index[axes[1]] = slice(*cols)
    return a[tuple(index)]


# -- convolution cores (NHWC, compute dtype) ------------------------------------------------------


def _padded(x: np.ndarray, h_pad, w_pad, channels_first: bool = False) -> np.ndarray:
    """x [n, h, w, c] zero-padded in its spatial dims, in scratch memory, as [n, h', w', c] or
    (channels_first) [n, c, h', w']; x itself when nothing is padded or moved."""
    if not channels_first and not any(h_pad) and not any(w_pad):
        return x
    n, h, w, c = x.shape
    hp, wp = h + h_pad[0] + h_pad[1], w + w_pad[0] + w_pad[1]
    if channels_first:
        xp = scratch("pad", n * hp * wp * c, x.dtype).reshape(n, c, hp, wp)
        view = xp.transpose(0, 2, 3, 1)  # the same memory indexed as NHWC
    else:
        xp = view = scratch("pad", n * hp * wp * c, x.dtype).reshape(n, hp, wp, c)
    top, left = h_pad[0], w_pad[0]
    view[:, :top] = 0
    view[:, top + h :] = 0
    view[:, top : top + h, :left] = 0
    view[:, top : top + h, left + w :] = 0
    view[:, top : top + h, left : left + w] = x
    return xp


def _pads_used(h, w, kh, kw, oh, ow, win, pads):
    """(top, bottom), (left, right): the padding the windows actually reach."""
    (sh, sw), (dh, dw) = win.strides, win.dilations
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - pads[0] - h)
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - pads[1] - w)
    return (pads[0], bottom), (pads[1], right)


def _block_bytes(k: int, o: int) -> int:
    """The patch block size for a [k, o] filter matrix."""
    return _SMALL_BLOCK_BYTES if k * o <= _SMALL_RESULT else _BLOCK_BYTES


def _blocks(n: int, oh: int, row_elems: int, itemsize: int, block_bytes: int | None = None):
    """Blocks (n0, n1, h0, h1) of output rows: whole images, or rows of one large image."""
    block_bytes = block_bytes or _BLOCK_BYTES
    per_image = max(oh * row_elems * itemsize, 1)
    if per_image <= block_bytes:
        step = max(1, block_bytes // per_image)
        for n0 in range(0, n, step):
            yield n0, min(n, n0 + step), 0, oh
    else:
        rows = max(1, block_bytes // max(row_elems * itemsize, 1))
        for n0 in range(n):
            for h0 in range(0, oh, rows):
                yield n0, n0 + 1, h0, min(oh, h0 + rows)


def _patch_blocks(x, kh, kw, win: _Window, oh, ow, pads, block_bytes: int | None = None):
    """Yields (first row, [rows, kh*kw*c] patch matrix) blocks covering every output position.

    A patch row holds the window of one output position in (kh, kw, c) order, matching the
    [kh*kw*c, out] filter matrix. Two layouts, whichever copies in longer contiguous runs:
    rows-major from the NHWC input (runs of kw*c), or, for few channels, columns-major from a
    channels-first copy (runs along the output width); the second yields a transposed view.
    """
    n, h, wd, c = x.shape
    k = kh * kw * c
    (sh, sw), (dh, dw) = win.strides, win.dilations
    hp, wp = _pads_used(h, wd, kh, kw, oh, ow, win, pads)
    run_rows = kw * c if dw == 1 else c
    run_cols = ow if sw == 1 else 1
    if run_cols >= 2 * run_rows:
        xp = _padded(x, hp, wp, channels_first=True)
        s0, s1, s2, s3 = xp.strides
        view = as_strided(
            xp,
            (kh, kw, c, n, oh, ow),
            (s2 * dh, s3 * dw, s1, s0, s2 * sh, s3 * sw),
            writeable=False,
        )
        for n0, n1, h0, h1 in _blocks(n, oh, ow * k, x.itemsize, block_bytes):
            m = (n1 - n0) * (h1 - h0) * ow
            buf = scratch("patches", k * m, x.dtype).reshape(kh, kw, c, n1 - n0, h1 - h0, ow)
            np.copyto(buf, view[:, :, :, n0:n1, h0:h1])
            yield (n0 * oh + h0) * ow, buf.reshape(k, m).T
        return
    xp = _padded(x, hp, wp)
    s0, s1, s2, s3 = xp.strides
    view = as_strided(
        xp, (n, oh, ow, kh, kw, c), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False
    )
    for n0, n1, h0, h1 in _blocks(n, oh, ow * k, x.itemsize, block_bytes):
        m = (n1 - n0) * (h1 - h0) * ow
        buf = scratch("patches", m * k, x.dtype).reshape(n1 - n0, h1 - h0, ow, kh, kw, c)
        np.copyto(buf, view[n0:n1, h0:h1])
        yield (n0 * oh + h0) * ow, buf.reshape(m, k)


# -- stride-1 convolutions over widened patches ---------------------------------------------------
#
# A patch row here covers two adjacent output columns: the window rows i, the kw + 1 input columns
# both windows read, all channels. Its product with a widened filter matrix ([kh, kw+1, c] rows,
# [2, out] columns; zero where a column is outside a window) gives both outputs at once, which
# in NHWC are adjacent in memory. That costs (kw + 1) / kw of the multiplications but copies
# (kw + 1) / (2 kw) of the patch data, and gives the GEMM twice as many columns. The input
# gradient is the convolution of the padded out_backprop with the flipped filter (no scatter-add)
# over shifted slices of one smaller patch matrix. On the MNIST CNN's second convolution (in a
# training step) the forward ran 12% faster, the filter gradient 20%, the input gradient 25%.

_WIDE = 2


def _wide_ok(win: _Window, width: int, row_run: int) -> bool:
    """Whether the widened path applies: stride and dilation 1, an even output width, and enough
    channels that patch rows copy in long runs (the channels-first patches serve the others)."""
    return (
        win.strides == (1, 1)
        and win.dilations == (1, 1)
        and width % _WIDE == 0
        and width < 2 * row_run
    )


def _widen(w: np.ndarray) -> np.ndarray:
    """w [kh, kw, c, o] as the [kh * (kw+1) * c, 2 * o] matrix of widened patch rows."""
    kh, kw, c, o = w.shape
    ww = np.zeros((kh, kw + _WIDE - 1, c, _WIDE, o), w.dtype)
    for k in range(_WIDE):
        ww[:, k : k + kw, :, k, :] = w
    return ww.reshape(kh * (kw + _WIDE - 1) * c, _WIDE * o)


def _fill_wide(dst: np.ndarray, src: np.ndarray, left: int) -> None:
    """dst[..., x2, j, :] = src[..., 2*x2 + j - left, :], zero where that column is outside src.

    This gathers widened patch rows straight from the unpadded input: one strided copy for the
    pairs of columns whose windows lie inside, a short copy and zeros for each pair at a border.
    """
    *_, w2, kw2, _ = dst.shape
    wd = src.shape[-2]
    lo = min(w2, max(0, -(-left // _WIDE)))
    hi = max(lo, min(w2, (wd - kw2 + left) // _WIDE + 1))
    if hi > lo:
        base = src[..., _WIDE * lo - left :, :]
        *lead, s_col, s_ch = base.strides
        view = as_strided(
            base,
            dst.shape[:-3] + (hi - lo, kw2, dst.shape[-1]),
            (*lead, s_col * _WIDE, s_col, s_ch),
            writeable=False,
        )
        np.copyto(dst[..., lo:hi, :, :], view)
    for x2 in (*range(lo), *range(hi, w2)):
        first = _WIDE * x2 - left  # the source column of j = 0
        j0, j1 = max(0, -first), max(0, min(kw2, wd - first))
        if j1 <= j0:
            dst[..., x2, :, :] = 0
            continue
        dst[..., x2, :j0, :] = 0
        dst[..., x2, j1:, :] = 0
        dst[..., x2, j0:j1, :] = src[..., first + j0 : first + j1, :]


def _fill_rows(dst: np.ndarray, src: np.ndarray, first: int, left: int) -> None:
    """_fill_wide of dst's rows (axis 0) from src's rows first, first + 1, ...: zero outside."""
    r0 = min(len(dst), max(0, -first))
    r1 = max(r0, min(len(dst), len(src) - first))
    dst[:r0] = 0
    dst[r1:] = 0
    if r1 > r0:
        _fill_wide(dst[r0:r1], src[first + r0 : first + r1], left)


def _wide_patch_blocks(xp: np.ndarray, oh: int, ow: int, kh: int, kw: int):
    """Yields (first row, widened patch matrix) blocks over every pair of output columns of a
    stride-1 convolution of the padded NHWC xp (at least oh+kh-1 rows and ow+kw-1 columns)."""
    n, _, _, c = xp.shape
    kw2, ow2 = kw + _WIDE - 1, ow // _WIDE
    k = kh * kw2 * c
    s0, s1, s2, s3 = xp.strides
    view = as_strided(xp, (n, oh, ow2, kh, kw2, c), (s0, s1, s2 * _WIDE, s1, s2, s3))
    for n0, n1, h0, h1 in _blocks(n, oh, ow2 * k, xp.itemsize):
        m = (n1 - n0) * (h1 - h0) * ow2
        buf = scratch("patches", m * k, xp.dtype).reshape(n1 - n0, h1 - h0, ow2, kh, kw2, c)
        np.copyto(buf, view[n0:n1, h0:h1])
        yield (n0 * oh + h0) * ow2, buf.reshape(m, k)


def _wide_forward(x, w, oh, ow, pads, epilogue=None) -> np.ndarray:
    """x [n, h, w, c] ⋆ w [kh, kw, c, o] → [n, oh, ow, o] for stride 1 and an even ow."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    out = np.empty((n, oh, ow, o), x.dtype)
    xp = _padded(x, (pads[0], oh + kh - 1 - h - pads[0]), (pads[1], ow + kw - 1 - wd - pads[1]))
    ww = _widen(w)
    flat = out.reshape(-1, _WIDE * o)
    for start, patches in _wide_patch_blocks(xp, oh, ow, kh, kw):
        block = flat[start : start + len(patches)]
        np.matmul(patches, ww, out=block)
        if epilogue is not None:
            epilogue(block.reshape(-1, o))
    return out


def _wide_backprop_filter(x, dy, kh, kw, pads) -> np.ndarray:
    """d(loss)/d(filter) for stride 1 and an even output width: the widened patches' product
    with dy (pairs of output columns as rows), then each widened column's share summed back."""
    n, h, wd, c = x.shape
    _, oh, ow, o = dy.shape
    xp = _padded(x, (pads[0], oh + kh - 1 - h - pads[0]), (pads[1], ow + kw - 1 - wd - pads[1]))
    dy2 = np.ascontiguousarray(dy).reshape(-1, _WIDE * o)
    acc = tmp = None
    for start, patches in _wide_patch_blocks(xp, oh, ow, kh, kw):
        rows = dy2[start : start + len(patches)]
        if acc is None:
            acc = patches.T @ rows
            tmp = np.empty_like(acc)
        else:
            np.matmul(patches.T, rows, out=tmp)
            acc += tmp
    acc = acc.reshape(kh, kw + _WIDE - 1, c, _WIDE, o)
    dw = acc[:, :kw, :, 0].copy()
    for k in range(1, _WIDE):
        dw += acc[:, k : k + kw, :, k]
    return dw


def _wide_backprop_input(dy, w, h, wd, pads) -> np.ndarray:
    """d(loss)/d(input) for stride 1 and an even input width.

    It is the convolution of the zero-padded out_backprop with the flipped, transposed filter,
    computed without a full patch matrix: the patch rows are laid out with the image rows
    outermost ([row, image, column pair, ...]), so the patch rows that kernel row i reads are
    those of kernel row 0 shifted by i rows of every image: one contiguous slice of a patch
    matrix over kernel row 0 (a fifth of the full one's size for 5×5), gathered straight from
    out_backprop. The kh products of those slices with the filter's rows add up to dx, rows
    outermost; one transposing copy brings it to NHWC.
    """
    n, oh, ow, o = dy.shape
    kh, kw, c, _ = w.shape
    top, left = kh - 1 - pads[0], kw - 1 - pads[1]
    kw2, w2 = kw + _WIDE - 1, wd // _WIDE
    ww = _widen(np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2)))
    ww = ww.reshape(kh, kw2 * o, _WIDE * c)
    dx = np.empty((n, h, wd, c), dy.dtype)
    src = dy.transpose(1, 0, 2, 3)  # [row, image, column, channel]
    shift = n * w2  # patch rows per image row
    # Blocks of output rows bound the patch matrix (a block of r rows reads r + kh - 1).
    per_row = shift * kw2 * o * dy.itemsize
    rows_per_block = max(1, min(h, 2 * _BLOCK_BYTES // per_row - (kh - 1)))
    for y0 in range(0, h, rows_per_block):
        y1 = min(h, y0 + rows_per_block)
        r = y1 - y0 + kh - 1
        rows = scratch("patches", r * shift * kw2 * o, dy.dtype).reshape(r, n, w2, kw2, o)
        _fill_rows(rows, src, y0 - top, left)
        rows = rows.reshape(r * shift, kw2 * o)
        total = (y1 - y0) * shift
        acc = scratch("block", total * _WIDE * c, dy.dtype).reshape(total, _WIDE * c)
        step = max(1, min(total, _ROW_BLOCK))
        tmp = scratch("cols", step * _WIDE * c, dy.dtype).reshape(step, _WIDE * c)
        for r0 in range(0, total, step):
            r1 = min(total, r0 + step)
            a, t = acc[r0:r1], tmp[: r1 - r0]
            np.matmul(rows[r0:r1], ww[0], out=a)
            for i in range(1, kh):
                np.matmul(rows[i * shift + r0 : i * shift + r1], ww[i], out=t)
                a += t
        dx[:, y0:y1] = acc.reshape(y1 - y0, n, wd, c).transpose(1, 0, 2, 3)
    return dx


# Rows per GEMM of _wide_backprop_input: its partial sums stay in cache between the products.
_ROW_BLOCK = 8192


def _conv_forward(x, w, win: _Window, oh, ow, pads, channels_first: bool = False, epilogue=None):
    """x [n, h, w, c] ⋆ w [kh, kw, c, o] → [n, oh, ow, o] (or [n, o, oh, ow]), one group.

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
    one_by_one = kh == kw == 1 and win.strides == (1, 1) and pads == (0, 0)
    if channels_first:
        per_image = out.reshape(n, o, oh * ow)
        wt = wm.T
        if one_by_one and (oh, ow) == (h, wd):
            np.matmul(wt, x.transpose(0, 3, 1, 2).reshape(n, c, h * wd), out=per_image)
            return out
        for start, patches in _patch_blocks(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o)):
            n0, r0 = divmod(start, oh * ow)
            rows = len(patches)
            images = max(1, rows // (oh * ow))
            dst = per_image[n0 : n0 + images, :, r0 : r0 + rows // images]
            if patches.flags.c_contiguous:
                # Row-major patches: one GEMM, then a cache-resident transposing copy (per-image
                # products with a transposed operand are much slower in BLAS).
                block = scratch("block", rows * o, x.dtype).reshape(rows, o)
                np.matmul(patches, wm, out=block)
                dst[...] = block.reshape(images, rows // images, o).transpose(0, 2, 1)
            else:
                by_image = patches.T.reshape(k, images, rows // images).transpose(1, 0, 2)
                np.matmul(wt, by_image, out=dst)
        return out
    flat = out.reshape(n * oh * ow, o)
    if one_by_one and (oh, ow) == (h, wd):
        np.matmul(x.reshape(n * h * wd, c), wm, out=flat)
        if epilogue is not None:
            epilogue(flat)
        return out
    if _wide_ok(win, ow, kw * c):
        return _wide_forward(x, w, oh, ow, pads, epilogue)
    for start, patches in _patch_blocks(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o)):
        block = flat[start : start + len(patches)]
        np.matmul(patches, wm, out=block)
        if epilogue is not None:
            epilogue(block)
    return out


def _conv_backprop_filter(x, dy, kh, kw, win: _Window, pads):
    """d(loss)/d(filter) [kh, kw, c, o] from x [n, h, w, c] and dy [n, oh, ow, o], one group."""
    n, h, wd, c = x.shape
    _, oh, ow, o = dy.shape
    k = kh * kw * c
    acc = np.zeros((k, o), x.dtype)
    if x.size == 0 or dy.size == 0 or k == 0:
        return acc.reshape(kh, kw, c, o)
    if _wide_ok(win, ow, kw * c):
        return _wide_backprop_filter(x, dy, kh, kw, pads)
    dy2 = dy.reshape(n * oh * ow, o)
    tmp = None
    for start, patches in _patch_blocks(x, kh, kw, win, oh, ow, pads, _block_bytes(k, o)):
        rows = dy2[start : start + len(patches)]
        if tmp is None:
            _long_product(patches.T, rows, acc)
            tmp = np.empty_like(acc)
        else:
            _long_product(patches.T, rows, tmp)
            acc += tmp
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
    """d(loss)/d(input) [n, h, w, c] from dy [n, oh, ow, o] and w [kh, kw, c, o], one group."""
    _, oh, ow, o = dy.shape
    kh, kw, c, _ = w.shape
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
    for n0, n1, h0, h1 in _blocks(n, oh, ow * taps * c, dy.itemsize):
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
    return dx


def _groups(c: int, kc: int, o: int) -> int:
    if kc == 0 or c % kc:
        raise InvalidArgumentError(
            f"the input depth ({c}) must be a multiple of the filter's input depth ({kc})"
        )
    g = c // kc
    if o % g:
        raise InvalidArgumentError(f"the output depth ({o}) must be a multiple of groups ({g})")
    return g


def _check_shape(what: str, got: tuple, want: tuple) -> None:
    if tuple(got) != tuple(want):
        raise InvalidArgumentError(
            f"{what} has shape {list(got)}, but the convolution's geometry needs {list(want)}"
        )


def _sizes_vector(sizes: np.ndarray, what: str) -> list[int]:
    v = np.asarray(sizes)
    if v.ndim != 1:
        raise InvalidArgumentError(f"{what} must be a 1-D vector, got shape {list(v.shape)}")
    vals = [int(d) for d in v]
    if any(d < 0 for d in vals):
        raise InvalidArgumentError(f"{what} must be non-negative, got {vals}")
    return vals


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
            out = _conv_forward(xn, w, win, oh, ow, pads, win.nchw, epilogue)
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
