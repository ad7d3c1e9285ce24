"""CPU kernels for rill.graph.ops.pool_ops: max and average pooling and their gradient ops.

They loop over the window taps (a few) with whole-tensor numpy operations on strided windows,
clipped to the input so that padding is never materialized. Temporaries of the max-pool gradient
live in per-thread scratch memory: fresh ones page-fault on every call.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import intra_op, jit
from rill.exec.kernels.conv_kernels import (
    _compute_dtype,
    _in_window,
    _invalid,
    _out_window,
    _sizes_vector,
    _tap_range,
    _Window,
)
from rill.exec.kernels.intra_op import parallel_for, scratch
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, UnimplementedError
from rill.graph.ops.conv_ops import check_batch_and_depth, spatial_pair


class _Pool:
    """Parsed pooling attrs; windows are clipped to the input (padding is never built)."""

    def __init__(self, ksize, strides, padding, explicit_paddings, data_format, op):
        if data_format == "NCHW_VECT_C":
            raise UnimplementedError(f"{op} with data_format NCHW_VECT_C is not supported")

        def parse():
            if len(ksize) != 4 or len(strides) != 4:
                raise ValueError(f"ksize and strides must have 4 values: {ksize}, {strides}")
            check_batch_and_depth(ksize, "ksize", data_format)
            check_batch_and_depth(strides, "strides", data_format)
            self.ksize = spatial_pair(ksize, "ksize", data_format)
            self.win = _Window(strides, (1, 1, 1, 1), padding, explicit_paddings, data_format)

        _invalid(parse)
        self.axes = (2, 3) if data_format.startswith("NCHW") else (1, 2)

    def geometry(self, shape):
        if len(shape) != 4:
            raise InvalidArgumentError(f"input must be 4-D, got shape {list(shape)}")
        h, w = shape[self.axes[0]], shape[self.axes[1]]
        oh, ow, pads = self.win.resolve(h, w, *self.ksize)
        out_shape = list(shape)
        out_shape[self.axes[0]], out_shape[self.axes[1]] = oh, ow
        taps = [t for t in self._taps(oh, ow, h, w, pads) if _nonempty(t[2], t[3])]
        return tuple(out_shape), taps

    def _taps(self, oh, ow, h, w, pads):
        """The taps of conv_kernels._taps that read the input at all: a window (SAME padding)
        may be far larger than the input, and the work must not grow with it."""
        (kh, kw), (sh, sw) = self.ksize, self.win.strides
        rows = _useful(kh, pads[0], oh, h, sh)
        cols = _useful(kw, pads[1], ow, w, sw)
        for i in rows:
            r0, r1 = _tap_range(oh, h, i - pads[0], sh)
            for j in cols:
                c0, c1 = _tap_range(ow, w, j - pads[1], sw)
                yield i, j, (r0, r1), (c0, c1), (r0 * sh + i - pads[0], c0 * sw + j - pads[1])

    def counts(self, shape, dtype) -> np.ndarray:
        """How many input positions each output window covers, broadcastable to the output."""
        h, w = shape[self.axes[0]], shape[self.axes[1]]
        oh, ow, pads = self.win.resolve(h, w, *self.ksize)
        per_axis = []
        for size, out, k, stride, pad in zip((h, w), (oh, ow), self.ksize, self.win.strides, pads):
            n = np.zeros(out, np.int64)
            for t in _useful(k, pad, out, size, stride):
                lo, hi = _tap_range(out, size, t - pad, stride)
                n[lo:hi] += 1
            per_axis.append(n)
        full = [1, 1, 1, 1]
        full[self.axes[0]], full[self.axes[1]] = oh, ow
        return np.outer(*per_axis).astype(dtype).reshape(full)

    def read(self, a, rows, cols, first):
        return _in_window(a, rows, cols, first, self.win.strides, self.axes)

    def at(self, a, rows, cols):
        return _out_window(a, rows, cols, self.axes)


def _useful(k: int, pad: int, out: int, size: int, stride: int) -> range:
    """The window offsets t in [0, k) that some output o in [0, out) reads inside the input:
    0 <= o*stride + t - pad < size. At most size + (out-1)*stride of them, whatever k is."""
    return range(max(0, pad - max(out - 1, 0) * stride), max(0, min(k, pad + size)))


def _nonempty(rows, cols) -> bool:
    return rows[0] < rows[1] and cols[0] < cols[1]


def _lowest(dtype: np.dtype):
    if dtype.kind == "f" or dtype == dtypes.bfloat16.np:
        return -np.inf
    return np.iinfo(dtype).min


@register_kernel("MaxPool", expensive=True)
def max_pool(ksize, strides, padding, explicit_paddings, data_format):
    pool = _Pool(ksize, strides, padding, explicit_paddings, data_format, "MaxPool")

    def compute(x):
        out_shape, taps = pool.geometry(x.shape)
        if pool.axes == (2, 3) and taps and x.dtype in jit.FLOATS and x.size:
            nchw = _nchw_loops()
            out = None if nchw is None else _max_pool_nchw(nchw, pool, x, out_shape)
            if out is not None:
                return out
        if len(taps) > 1 and _unclipped(pool, taps, out_shape):
            loops = _loops_for(pool, x)
            if loops is not None:
                out = np.empty(out_shape, x.dtype)
                xc = np.ascontiguousarray(x)
                (kh, kw), (sh, sw) = pool.ksize, pool.win.strides
                _split(x, lambda lo, hi: loops.max_pool(xc, out, kh, kw, sh, sw, lo, hi))
                return out
            # Every window has every tap: the first two start the maxima (no fill pass).
            views = [pool.read(x, rows, cols, first) for _, _, rows, cols, first in taps]
            out = np.maximum(views[0], views[1])
            for v in views[2:]:
                np.maximum(out, v, out=out)
            return out
        out = np.full(out_shape, _lowest(x.dtype), x.dtype)
        if out.size == 0:
            return out
        for _, _, rows, cols, first in taps:
            dst = pool.at(out, rows, cols)
            np.maximum(dst, pool.read(x, rows, cols, first), out=dst)
        return out

    return compute


def _nchw_loops():
    """The compiled channels-first loops, or None where numpy runs."""
    return jit.conv_loops()


def _max_pool_nchw(loops, pool: _Pool, x: np.ndarray, out_shape):
    """NCHW max pooling in one compiled pass per plane (see _conv_loops.max_pool_nchw: the
    numpy path's values); None for windows of more than 64 taps (a window far larger than the
    input: the numpy path visits only the taps that read it)."""
    n, c, h, w = x.shape
    oh, ow = out_shape[2], out_shape[3]
    (kh, kw), (sh, sw) = pool.ksize, pool.win.strides
    if kh * kw > 64:
        return None
    _, _, (top, left) = pool.win.resolve(h, w, kh, kw)
    out = np.empty(out_shape, x.dtype)
    if out.size == 0:
        return out
    xs = np.ascontiguousarray(x).reshape(n * c, h, w)
    planes = out.reshape(n * c, oh, ow)
    team = intra_op.team() if n == 1 and x.size >= _TEAM_GRAIN and c > 1 else None
    if team is not None:  # one image: runs of planes over the team (no Python in the hand-off)
        loops.max_pool_team(xs, planes, kh, kw, sh, sw, top, left, 4, team,
                            loops.max_pool_piece_function(x.dtype))  # fmt: skip
        return out
    grain = max(1, (_SPLIT_GRAIN if n > 1 else _SPLIT_GRAIN_B1) // max(h * w, 1))
    parallel_for(n * c, lambda lo, hi: loops.max_pool_planes(
        xs, planes, kh, kw, sh, sw, top, left, lo, hi), grain=grain)  # fmt: skip
    return out


def _loops_for(pool: _Pool, x: np.ndarray):
    """The compiled loops, when they serve this pooling (NHWC, float32 or float64)."""
    if pool.axes != (1, 2) or x.dtype not in jit.FLOATS:
        return None
    return jit.loops()


# Images per piece of a compiled pooling loop: at least this many elements.
_SPLIT_GRAIN = 1 << 15
# At batch 1, input elements per piece of an NCHW max pooling: a split of a few hundred KB
# loses more than it saves (its input was written by the threads the previous kernel split
# over, and its output is read by the next one on the calling thread): ResNet-18 ½ b1's stem
# pooling, [1, 32, 112, 112] 3×3 stride 2, took 86 µs a step on one thread and 139 µs in
# pieces of 2^15 over two (default threads, quiet).
_SPLIT_GRAIN_B1 = 1 << 19
# The fewest input values of a batch-1 NCHW max pooling split over the pool's team (a hand-off
# of about a microsecond where a worker polls): SqueezeNet's pools, 64×111×111 to 256×27×27,
# ran on one thread over the Python pool's hand-offs.
_TEAM_GRAIN = 1 << 16


def _split(x: np.ndarray, fn) -> None:
    """fn(lo, hi) over the images of x, split over the intra-op threads."""
    n = x.shape[0]
    per_image = max(1, x.size // max(n, 1))
    parallel_for(n, fn, grain=-(-_SPLIT_GRAIN // per_image), pieces_per_thread=4)


def _unclipped(pool: _Pool, taps, out_shape) -> bool:
    """Whether every window lies wholly inside the input (no tap is clipped anywhere)."""
    oh, ow = out_shape[pool.axes[0]], out_shape[pool.axes[1]]
    return len(taps) == pool.ksize[0] * pool.ksize[1] and all(
        t[2] == (0, oh) and t[3] == (0, ow) for t in taps
    )


def _bits(a: np.ndarray) -> np.ndarray:
    """`a` viewed as unsigned integers of its width: multiplying those by a 0/1 mask selects
    values exactly (a NaN or infinite value that the mask drops does not turn into NaN)."""
    return a if a.dtype.kind in "iu" else a.view(f"u{a.dtype.itemsize}")


def _best(dtype: np.dtype):
    """The window-maximum ufunc: fmax for floating types, so a NaN never becomes the maximum."""
    return np.maximum if dtype.kind in "iu" else np.fmax


# MaxPoolGrad on non-overlapping windows works through the batch in pieces of about this many
# output elements, so that its temporaries stay in cache.
_POOL_CHUNK = 1 << 18


@register_kernel("MaxPoolGrad", expensive=True)
def max_pool_grad(ksize, strides, padding, explicit_paddings, data_format):
    """Each window's gradient goes to one input position, chosen as TensorFlow's CPU kernel
    does from orig_input (orig_output's values are not read): the window is scanned in
    row-major order and a position replaces the current choice only when it is strictly
    greater. So the first maximum wins ties, and NaN wins only as the window's first value.
    """
    return _max_pool_grad(ksize, strides, padding, explicit_paddings, data_format, False)


@register_kernel("_FusedMaxPoolGrad", expensive=True)
def fused_max_pool_grad(ksize, strides, padding, explicit_paddings, data_format):
    """ReluGrad(MaxPoolGrad(x, y, g), x): a window's gradient reaches its chosen position only
    where that position's value is positive. Tiling windows do it while routing (the ReluGrad
    pass over the full-size tensor disappears); other windows run the two kernels' math."""
    return _max_pool_grad(ksize, strides, padding, explicit_paddings, data_format, True)


def _max_pool_grad(ksize, strides, padding, explicit_paddings, data_format, relu: bool):
    op = "_FusedMaxPoolGrad" if relu else "MaxPoolGrad"
    pool = _Pool(ksize, strides, padding, explicit_paddings, data_format, op)

    def compute(orig_input, orig_output, grad):
        out_shape, taps = pool.geometry(orig_input.shape)
        if tuple(grad.shape) != out_shape:
            raise InvalidArgumentError(
                f"grad has shape {list(grad.shape)}, expected the pooled shape {list(out_shape)}"
            )
        if grad.size == 0 or orig_input.size == 0:
            return np.zeros(orig_input.shape, grad.dtype)
        if pool.win.strides == pool.ksize and _unclipped(pool, taps, out_shape):
            return _max_pool_grad_tiled(pool, orig_input, grad, taps, out_shape, relu)
        dx = _max_pool_grad_general(pool, orig_input, grad, taps, out_shape)
        if relu:
            np.multiply(dx, orig_input > 0, out=dx)
        return dx

    return compute


def _max_pool_grad_tiled(pool: _Pool, x, grad, taps, out_shape, relu: bool) -> np.ndarray:
    """Windows that tile the input (stride == ksize, none clipped): every input position is in
    at most one window, so each tap's routed gradient is written straight into dx.

    With `relu`, the gradient is masked by the chosen position's value being positive: a later
    tap is chosen only where it equals the window's maximum, so its mask is `max > 0`, applied
    to the gradient once; the first tap may be chosen for a NaN, so it is masked by its own
    value.
    """
    h, w = x.shape[pool.axes[0]], x.shape[pool.axes[1]]
    oh, ow = out_shape[pool.axes[0]], out_shape[pool.axes[1]]
    covered = oh * pool.ksize[0] == h and ow * pool.ksize[1] == w
    dx = (np.empty if covered else np.zeros)(x.shape, grad.dtype)
    loops = _loops_for(pool, x) if grad.dtype == x.dtype else None
    if loops is not None and len(taps) > 1:
        xc, gc = np.ascontiguousarray(x), np.ascontiguousarray(grad)
        (kh, kw), c = pool.ksize, x.shape[-1]

        def rows(lo, hi):
            best, pick = np.empty(c, x.dtype), np.empty(c, np.intp)
            loops.max_pool_grad_tiled(xc, gc, dx, kh, kw, relu, best, pick, lo, hi)

        _split(x, rows)
        return dx
    xs = [pool.read(x, rows, cols, first) for _, _, rows, cols, first in taps]
    ds = [pool.read(_bits(dx), rows, cols, first) for _, _, rows, cols, first in taps]
    gb = _bits(grad)
    if len(xs) == 1:
        np.copyto(ds[0], gb)
        if relu:
            np.multiply(grad, x > 0, out=dx)
        return dx
    best = _best(x.dtype)
    per_image = grad[:1].size

    def part(lo, hi):
        step = max(1, _POOL_CHUNK // per_image)
        for a in range(lo, hi, step):
            b = min(hi, a + step)
            size, shape = (b - a) * per_image, (b - a, *out_shape[1:])
            t = [v[a:b] for v in xs]
            g = gb[a:b]
            m = scratch("pool_best", size, x.dtype).reshape(shape)
            pending = scratch("pool_pending", size, np.bool_).reshape(shape)
            hit = scratch("pool_hit", size, np.bool_).reshape(shape)
            best(t[0], t[1], out=m)
            for v in t[2:]:
                best(m, v, out=m)
            # The first tap wins unless it is below the maximum (a NaN there is not below it).
            np.less(t[0], m, out=pending)
            if relu:
                # ReluGrad's float products (an infinite gradient times 0 is NaN, as unfused),
                # then routed bit-exactly like the unfused gradient.
                gf = grad[a:b]
                masked = scratch("pool_grad", size, grad.dtype).reshape(shape)
                np.greater(t[0], 0, out=hit)
                np.multiply(gf, hit, out=masked)
                np.logical_not(pending, out=hit)
                np.multiply(_bits(masked), hit, out=ds[0][a:b])
                np.greater(m, 0, out=hit)
                np.multiply(gf, hit, out=masked)
                g = _bits(masked)
            else:
                np.logical_not(pending, out=hit)
                np.multiply(g, hit, out=ds[0][a:b])
            for k in range(1, len(t) - 1):
                np.equal(t[k], m, out=hit)
                np.logical_and(hit, pending, out=hit)
                np.logical_xor(pending, hit, out=pending)
                np.multiply(g, hit, out=ds[k][a:b])
            # Every window has a winner, so what is still pending is the last tap's.
            np.multiply(g, pending, out=ds[-1][a:b])

    parallel_for(x.shape[0], part, pieces_per_thread=4)
    return dx


def _max_pool_grad_general(pool: _Pool, x, grad, taps, out_shape) -> np.ndarray:
    """Any windows: the routed gradients of overlapping windows add up in dx."""
    dx = np.zeros(x.shape, grad.dtype)
    size = grad.size
    best = _best(x.dtype)
    m = scratch("pool_best", size, x.dtype).reshape(out_shape)
    m.fill(_lowest(x.dtype))
    for _, _, rows, cols, first in taps:
        b = pool.at(m, rows, cols)
        best(b, pool.read(x, rows, cols, first), out=b)
    # Windows whose first value is NaN route to their first position (every later value
    # compares false against NaN); elsewhere the first value equal to the maximum wins.
    first_nan = None
    if x.dtype.kind not in "iu" and np.isnan(x).any():
        first_nan = scratch("pool_first_nan", size, np.bool_).reshape(out_shape)
        for _, _, rows, cols, first in reversed(taps):
            np.isnan(pool.read(x, rows, cols, first), out=pool.at(first_nan, rows, cols))
    pending = scratch("pool_pending", size, np.bool_).reshape(out_shape)
    pending.fill(True)
    hit = scratch("pool_hit", size, np.bool_).reshape(out_shape)
    routed = scratch("pool_routed", size, grad.dtype).reshape(out_shape)
    gb, rb = _bits(grad), _bits(routed)
    for _, _, rows, cols, first in taps:
        h, p = pool.at(hit, rows, cols), pool.at(pending, rows, cols)
        np.equal(pool.read(x, rows, cols, first), pool.at(m, rows, cols), out=h)
        if first_nan is not None:
            np.logical_or(h, pool.at(first_nan, rows, cols), out=h)
        np.logical_and(h, p, out=h)
        np.logical_xor(p, h, out=p)
        # Mask into a temporary, then a plain add: ufuncs with where= are slow on strided views.
        np.multiply(pool.at(gb, rows, cols), h, out=pool.at(rb, rows, cols))
        dst = pool.read(dx, rows, cols, first)
        dst += pool.at(routed, rows, cols)
    return dx


@register_kernel("AvgPool", expensive=True)
def avg_pool(ksize, strides, padding, data_format):
    pool = _Pool(ksize, strides, padding, (), data_format, "AvgPool")

    def compute(x):
        out_shape, taps = pool.geometry(x.shape)
        ct = _compute_dtype(x.dtype)
        out = np.zeros(out_shape, ct)
        if out.size == 0:
            return out.astype(x.dtype)
        xc = x.astype(ct, copy=False)
        for _, _, rows, cols, first in taps:
            dst = pool.at(out, rows, cols)
            dst += pool.read(xc, rows, cols, first)
        out /= pool.counts(x.shape, ct)
        return out.astype(x.dtype, copy=False)

    return compute


@register_kernel("AvgPoolGrad", expensive=True)
def avg_pool_grad(ksize, strides, padding, data_format):
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
        ct = _compute_dtype(grad.dtype)
        dx = np.zeros(shape, ct)
        if grad.size == 0 or dx.size == 0:
            return dx.astype(grad.dtype)
        g = grad.astype(ct) / pool.counts(shape, ct)
        for _, _, rows, cols, first in taps:
            dst = pool.read(dx, rows, cols, first)
            dst += pool.at(g, rows, cols)
        return dx.astype(grad.dtype, copy=False)

    return compute
