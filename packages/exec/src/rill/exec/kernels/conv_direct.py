"""Direct NHWC convolutions for a filter matrix of few rows (a few input channels and taps: the
first layer of an image network, a 5×5 filter on one channel), forward and filter gradient,
when the compiled loops are on (`jit.loops()`; with RILL_JIT=0 the convolution kernels keep
their GEMM paths, the reference these results are tested against).

Through a GEMM such a convolution is a product of inner dimension kh·kw·c (25 for the MNIST
CNN's first layer), which BLAS runs far below its speed, after a copy of the patch matrix that
is kh·kw times the input. The loops of _direct_conv_loops read the zero-padded input in place
instead: the forward keeps 32 output channels of 4 pixels in vector registers and adds every
tap's input times its filter row; the filter gradient keeps 32 channels of 5 taps and adds each
pixel's input times its output gradient. On the MNIST CNN's first convolution (batch 64, one
thread) the forward took 0.8 ms against the GEMM path's 1.7, the filter gradient 1.3 against 1.6.

Sums run in a fixed order: a forward output over the taps in order; the filter gradient over
each block's pixels in order, then the blocks in order. Blocks are fixed by the shapes and
shared out over the intra-op threads, so the bits never depend on the thread count. Results
differ from the GEMM paths by rounding only (multiply-adds may be fused).

The loops' channels are named scalars; the compiler packs them into vector registers only with
its superword-level vectorizer, which numba leaves off by default, so the loops are compiled
with it on (`_direct_conv_loops.compiled`), under numba's compiler lock.
"""

from __future__ import annotations

import importlib

import numpy as np

from rill.exec.kernels import jit
from rill.exec.kernels.conv_common import (
    _blocks,
    _pad_into,
    _padded,
    _pads_used,
    _Window,
    balanced_step,
)
from rill.exec.kernels.intra_op import parallel_blocks, scratch

_enabled = [True]
# At most this many filter-matrix rows (kh·kw·c): past that the GEMM path's inner dimension is
# long enough for BLAS.
_MAX_ROWS = 32
# Below this many multiply-adds the GEMM path is as good (and compiles nothing).
_MIN_WORK = 1 << 20
# The output (forward) or output-gradient (filter gradient) bytes of one block: it stays in
# cache for the fused epilogue or across the filter gradient's passes over the taps.
_BLOCK_BYTES = 512 << 10


def set_enabled(on: bool) -> bool:
    """Turns the direct paths on or off (tests and benchmarks); returns the old setting."""
    old, _enabled[0] = _enabled[0], bool(on)
    return old


def _loops():
    if jit.loops() is None:
        return None
    return importlib.import_module("rill.exec.kernels._direct_conv_loops")


def direct_ok(win: _Window, kh: int, kw: int, c: int, o: int, n: int, oh: int, ow: int,
              dtype) -> bool:  # fmt: skip
    """Whether the direct loops take this NHWC convolution (forward or filter gradient)."""
    if not _enabled[0] or np.dtype(dtype) not in jit.FLOATS:
        return False
    if kh * kw * c > _MAX_ROWS or o % 16 or n * oh * ow * kh * kw * c * o < _MIN_WORK:
        return False
    return _loops() is not None


def _compiled(name: str, args: tuple):
    """The loop `name` of _direct_conv_loops, compiled for `args`' types with the superword-level
    vectorizer on (`_direct_conv_loops.compiled`). Looked up by a key of the arguments' dtypes,
    dimensions and layouts: numba's typeof over the 16 arguments cost 40-130 µs a call, run
    before the kernel's threads start."""
    key = (name, *map(_arg_key, args))
    fn = _ready.get(key)
    if fn is None:
        fn = _ready[key] = _loops().compiled(name, args)
    return fn


_ready: dict = {}


def _arg_key(a):
    if isinstance(a, np.ndarray):
        f = a.flags
        return (a.dtype, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
    return type(a)


def _even_blocks(n, oh, row_elems, itemsize):
    """_blocks of about _BLOCK_BYTES, whole images in a multiple of 4 blocks where that can be
    (conv_common.balanced_step), so that the threads taking them finish together."""
    blocks = _blocks(n, oh, row_elems, itemsize, _BLOCK_BYTES)
    if len(blocks) < 2 or blocks[0][3] - blocks[0][2] != oh:
        return blocks
    step = balanced_step(n, blocks[0][1] - blocks[0][0])
    return [(n0, min(n, n0 + step), 0, oh) for n0 in range(0, n, step)]


def _by_image(blocks, oh: int) -> bool:
    """Whether every block is whole images (each can pad its own: no two share one)."""
    return all(b[2] == 0 and b[3] == oh for b in blocks)


class _Geometry:
    """The padded input as a flat array and the offsets the loops index it with.

    Where the blocks are whole images (`by_image`), each block pads its own images (`pad`, in
    the block's thread) instead of the caller padding all of them before the threads start."""

    def __init__(self, x, kh, kw, win: _Window, oh, ow, pads, by_image: bool = False):
        n, h, wd, c = x.shape
        (sh, sw), (dh, dw) = win.strides, win.dilations
        hp, wp = _pads_used(h, wd, kh, kw, oh, ow, win, pads)
        self.x, self.hp, self.wp = x, hp, wp
        hh, ww = h + hp[0] + hp[1], wd + wp[0] + wp[1]
        self.lazy = by_image and (any(hp) or any(wp) or not x.flags.c_contiguous)
        if self.lazy:
            self.xp4 = scratch("pad", n * hh * ww * c, x.dtype).reshape(n, hh, ww, c)
            self.xp = self.xp4.reshape(-1)
        else:
            self.xp = np.ascontiguousarray(_padded(x, hp, wp)).reshape(-1)
        self.img, self.rs, self.cs = hh * ww * c, sh * ww * c, sw * c
        taps = [(i * dh * ww + j * dw) * c + ci for i in range(kh) for j in range(kw)
                for ci in range(c)]  # fmt: skip
        self.offs = np.array(taps, np.uint64)

    def pad(self, n0: int, n1: int) -> None:
        """Writes images [n0, n1) of the padded input (when the blocks pad their own)."""
        if self.lazy:
            _pad_into(self.x[n0:n1], self.hp, self.wp, self.xp4[n0:n1])


def direct_forward(x, w, win: _Window, oh, ow, pads, epilogue=None, out=None) -> np.ndarray:
    """x [n, h, w, c] ⋆ w [kh, kw, c, o] → [n, oh, ow, o] (into `out`, C-contiguous, if given);
    `epilogue(rows)` is applied in place to each block of output rows ([rows, o]) while it is in
    cache."""
    n = x.shape[0]
    kh, kw, c, o = w.shape
    if out is None:
        out = np.empty((n, oh, ow, o), x.dtype)
    blocks = _even_blocks(n, oh, ow * o, x.itemsize)
    geo = _Geometry(x, kh, kw, win, oh, ow, pads, _by_image(blocks, oh))
    wf = np.ascontiguousarray(w).reshape(-1)
    flat = out.reshape(-1)
    q = 32 if o % 32 == 0 else 16
    zero = x.dtype.type(0)
    args = (geo.xp, wf, geo.offs, flat, zero, oh, ow, geo.rs, geo.cs, o, geo.img, 0, 0, 0, 0, 0)
    loop = _compiled(f"forward_q{q}", args)
    rows = out.reshape(-1, o)

    def one(i):
        n0, n1, y0, y1 = blocks[i]
        geo.pad(n0, n1)
        for q0 in range(0, o, q):
            loop(geo.xp, wf, geo.offs, flat, zero, oh, ow, geo.rs, geo.cs, o, geo.img, q0,
                 n0, n1, y0, y1)  # fmt: skip
        if epilogue is not None:
            epilogue(rows[(n0 * oh + y0) * ow : ((n1 - 1) * oh + y1) * ow])

    parallel_blocks(len(blocks), one, n * oh * ow * kh * kw * c * o)
    return out


def direct_backprop_filter(x, dy, kh, kw, win: _Window, pads) -> np.ndarray:
    """d(loss)/d(filter) [kh, kw, c, o] from x [n, h, w, c] and dy [n, oh, ow, o]: one partial
    sum per block of dy, the blocks added in order."""
    n, _, _, c = x.shape
    _, oh, ow, o = dy.shape
    k = kh * kw * c
    blocks = _even_blocks(n, oh, ow * o, x.itemsize)
    geo = _Geometry(x, kh, kw, win, oh, ow, pads, _by_image(blocks, oh))
    dyf = np.ascontiguousarray(dy).reshape(-1)
    q = 32 if o % 32 == 0 else 16
    zero = x.dtype.type(0)
    parts = np.empty((len(blocks), k * o), x.dtype)
    args = (geo.xp, dyf, geo.offs, parts[0], zero, oh, ow, geo.rs, geo.cs, o, geo.img, 0, 0, 0, 0)
    loop = _compiled(f"filter_block_q{q}", args)

    def one(i):
        n0, n1, y0, y1 = blocks[i]
        geo.pad(n0, n1)
        loop(geo.xp, dyf, geo.offs, parts[i], zero, oh, ow, geo.rs, geo.cs, o, geo.img,
             n0, n1, y0, y1)  # fmt: skip

    parallel_blocks(len(blocks), one, n * oh * ow * k * o)
    acc = parts[0].copy()
    for i in range(1, len(blocks)):
        acc += parts[i]
    return acc.reshape(kh, kw, c, o)
