"""Window geometry and patch-block helpers shared by the convolution and pooling kernels:
the parsed window attrs, filter taps and their input windows, zero padding into scratch memory,
and the blocks of output rows a convolution works through.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernels.intra_op import scratch
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.conv_ops import (
    check_batch_and_depth,
    explicit_pads,
    spatial_pair,
    windowed_output_size,
)


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
        """(out_h, out_w, (pad_top, pad_left)) for an h×w input and a kh×kw window (the last
        answer is kept: a node meets the same shapes step after step)."""
        key = (h, w, kh, kw)
        last = self.__dict__.get("_last")
        if last is not None and last[0] == key:
            return last[1]
        result = self._resolve(h, w, kh, kw)
        self._last = (key, result)
        return result

    def _resolve(self, h: int, w: int, kh: int, kw: int):
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
    _pad_into(x, h_pad, w_pad, view)
    return xp


def _pad_into(x: np.ndarray, h_pad, w_pad, view: np.ndarray) -> None:
    """Writes x [n, h, w, c] zero-padded by h_pad and w_pad into view [n, h', w', c]."""
    h, w = x.shape[1:3]
    top, left = h_pad[0], w_pad[0]
    view[:, :top] = 0
    view[:, top + h :] = 0
    view[:, top : top + h, :left] = 0
    view[:, top : top + h, left + w :] = 0
    view[:, top : top + h, left : left + w] = x


def _pads_used(h, w, kh, kw, oh, ow, win, pads):
    """(top, bottom), (left, right): the padding the windows actually reach."""
    (sh, sw), (dh, dw) = win.strides, win.dilations
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - pads[0] - h)
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - pads[1] - w)
    return (pads[0], bottom), (pads[1], right)


def _blocks(n: int, oh: int, row_elems: int, itemsize: int, block_bytes: int) -> list:
    """Blocks (n0, n1, h0, h1) of output rows of about block_bytes of patches each: groups of
    whole images, or rows of one image where an image holds more. Blocks are as even as may be
    and a function of the shapes only (never of the threads), so results keep their bits."""
    per_image = max(oh * row_elems * itemsize, 1)
    if per_image <= block_bytes:
        count = -(-n * per_image // block_bytes)
        step = -(-n // max(count, 1))
        return [(n0, min(n, n0 + step), 0, oh) for n0 in range(0, n, step)]
    rows = max(1, block_bytes // max(row_elems * itemsize, 1))
    rows = -(-oh // -(-oh // rows))
    return [(n0, n0 + 1, h0, min(oh, h0 + rows)) for n0 in range(n) for h0 in range(0, oh, rows)]


def balanced_step(n: int, step: int, multiple: int = 4) -> int:
    """Images per block for n images in blocks of at most `step`: the largest step, down to half
    of it, that makes a multiple of `multiple` blocks (so that 2 or 4 threads taking blocks in
    turn finish together: 13 blocks on two threads take as long as 14), else `step`. A function
    of the shapes only."""
    if step >= n or n <= multiple:
        return step
    for s in range(step, max(1, step // 2) - 1, -1):
        if -(-n // s) % multiple == 0:
            return s
    return step


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
