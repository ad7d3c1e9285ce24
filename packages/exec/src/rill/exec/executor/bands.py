"""Elementwise, row-wise and concatenating kernels split in bands over the intra-op threads.

A kernel whose every output element depends only on the input elements at the same place
(Mul, AddV2, Tanh, ...: with broadcasting, the places the operands broadcast to), or whose
every row of the last axis depends only on that row (Softmax, LogSoftmax), or that reduces
trailing axes (Mean, Sum, Max, Min: each result from its own values in its own order), or that
copies (ConcatV2), gives the same bits whether it runs once over the whole tensor or once per
band of it. For large float tensors on the CPU the executor therefore wraps such kernels (`wrap`,
called where the kernel table builds them): the output is allocated once and its bands,
fixed by the shape along one axis that is not the row axis, are computed by the intra-op
threads, each band's result written into its place. Plain ufunc kernels run straight into
their band of the output (`out=`); the others run the kernel itself on the band's inputs and
copy its (cache-sized) result in.

The split happens only where it can pay: from MIN_WORK element-passes, and onto idle cores only
(the bands are fine-grained: `rill.exec.threads.cores_for`), within the step's
intra_op_parallelism_threads. Where one thread would run it, the kernel runs as it is, once.
Kernels written by other modules stay untouched; anything the wrapper does not recognise
(other dtypes, shapes that do not broadcast, a kernel returning another shape) goes to the
kernel as it is, which then raises its own error.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernels import intra_op
from rill.exec.kernels.intra_op import parallel_for

__all__ = ["wrap", "MIN_WORK", "BAND"]

# Element-passes (output elements x the kernel's passes over them) from which a kernel splits.
# These kernels are memory-bound, and a second thread adds little bandwidth to a small one:
# quiet, with polling hand-offs, an add of two 1 MB float32 arrays took 130 µs on one thread
# and 163 µs in two halves; of 4 MB ones 470 and 348 µs; of 16 MB ones 1.9 and 1.15 ms. In
# whole models (default threads, same process, alternating) splitting from 2^20 instead of
# 2^18 took EfficientNet-B0 ½ b1 12.2 -> 11.7 ms, MobileNetV3-small b8 27.1 -> 25.3 ms,
# EfficientNet-B0 ½ b8 60.4 -> 58.0 ms, ViT-small b1 21.6 -> 20.5 ms, and changed no other
# imported model by more than noise.
MIN_WORK = 1 << 20
# Output elements per band of a kernel of several passes (512 KiB of float32): its
# temporaries (Softmax makes three of its size) stay in the core's caches until its result is
# copied into place.
BAND = 1 << 17
# A one-pass ufunc kernel needs no cache-sized bands: bands of about this many elements, at
# least two and at most UFUNC_BANDS (enough for two to four threads taking them in turn, a
# thread whose core is busy doing fewer; few enough that their calls cost little).
UFUNC_ELEMENTS = 1 << 17
UFUNC_BANDS = 8
# The fewest bands of a split kernel of several passes (where its axis has that many
# entries): a small kernel of many passes (Erf) still shares out.
_LEAST_BANDS = 4

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# Kernels that are a plain numpy ufunc on float32/float64 (math_kernels): run into the output.
_UFUNCS = {
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "RealDiv": np.true_divide,
    "Tanh": np.tanh,
    "Exp": np.exp,
    "Sqrt": np.sqrt,
    "Neg": np.negative,
    "Abs": np.absolute,
    "Square": np.square,
    "Log": np.log,
}
# Other elementwise kernels (run per band, their result copied in), with their passes.
_ELEMENTWISE = {"SquaredDifference": 2, "Rsqrt": 2, "Pow": 2, "Sigmoid": 4, "Relu": 1,
                "Erf": 12}  # fmt: skip
# Kernels independent per row of the last axis, with their passes.
_ROWWISE = {"Softmax": 5, "LogSoftmax": 6}
# Reductions (x, axes): independent per index of the axes before the first reduced one.
_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min"})
# Reductions whose kernel splits a reduction over trailing axes itself (reduction_kernels'
# compiled row sums): those calls are left to it. Banded as well, the [8, 96, 56, 56] global
# average pool took 594 µs on two threads against the kernel's own 512 µs.
_SPLIT_TRAILING = frozenset({"Mean", "Sum"})
OPS = (frozenset(_UFUNCS) | frozenset(_ELEMENTWISE) | frozenset(_ROWWISE) | _REDUCTIONS
       | {"ConcatV2"})  # fmt: skip


def wrap(op_type: str, compute):
    """compute, or a wrapper splitting it in bands where op_type is a kernel this module knows
    (OPS) and the call's tensors are large float arrays."""
    if op_type in _UFUNCS and _is_ufunc(compute, _UFUNCS[op_type]):
        return _ufunc_bands(compute, _UFUNCS[op_type])
    if op_type in _UFUNCS:  # a kernel of its own (not the plain ufunc): run it per band
        return _compute_bands(compute, 1, rowwise=False)
    if op_type in _ELEMENTWISE:
        return _compute_bands(compute, _ELEMENTWISE[op_type], rowwise=False)
    if op_type in _ROWWISE:
        return _compute_bands(compute, _ROWWISE[op_type], rowwise=True)
    if op_type == "ConcatV2":
        return _concat_bands(compute)
    if op_type in _REDUCTIONS:
        return _reduce_bands(compute, trailing_own=op_type in _SPLIT_TRAILING)
    return compute


def _is_ufunc(compute, ufunc) -> bool:
    """Whether compute is `ufunc` itself or math_kernels' thin wrapper around it (so that the
    bands may call the ufunc straight into the output and give the kernel's bits)."""
    if compute is ufunc:
        return True
    cells = getattr(compute, "__closure__", None) or ()
    return len(cells) == 1 and cells[0].cell_contents is ufunc


def _threads(work: int) -> int:
    """The threads a fine-grained kernel of `work` element-passes gets now (1: run it whole)."""
    if work < MIN_WORK:
        return 1
    return intra_op.threads_now()


def _same_floats(args) -> np.dtype | None:
    """The one float32/float64 dtype of args, all numpy arrays; None otherwise."""
    dt = None
    for a in args:
        if type(a) is not np.ndarray:
            return None
        if dt is None:
            dt = a.dtype
            if dt not in _FLOATS:
                return None
        elif a.dtype != dt:
            return None
    return dt


def _broadcast(args) -> tuple[tuple | None, int]:
    """The operands' broadcast shape and its size; (None, 0) where they do not broadcast (the
    kernel then raises its own error)."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in args))
    except ValueError:
        return None, 0
    size = 1
    for d in shape:
        size *= d
    return shape, size


def _first_axis(shape, rowwise: bool) -> int | None:
    """The first axis with more than one entry (never the last one of a row-wise kernel):
    bands along it are contiguous parts of a C-contiguous tensor, so a kernel that takes
    another path for strided arrays (a compiled loop for contiguous ones) runs the same path
    on its bands as on the whole."""
    last = len(shape) - (1 if rowwise else 0)
    for d in range(last):
        if shape[d] >= 2:
            return d
        if shape[d] == 0:
            return None
    return None


def _split_axis(shape, rowwise: bool) -> int | None:
    """The axis the bands split: the first with at least 8 entries (else the first with 2),
    never the last one of a row-wise kernel."""
    last = len(shape) - (1 if rowwise else 0)
    first = None
    for d in range(last):
        if shape[d] >= 8:
            return d
        if first is None and shape[d] >= 2:
            first = d
    return first


class _Bands:
    """The bands of an output `shape` along `axis`, each at most about BAND elements, and each
    operand's part of a band (an operand that broadcasts along the axis is used whole)."""

    __slots__ = ("axis", "rows", "bounds", "ndim")

    def __init__(self, shape, axis: int, band: int = BAND, least: int = _LEAST_BANDS):
        size = 1
        for s in shape:
            size *= s
        self.axis, self.rows, self.ndim = axis, shape[axis], len(shape)
        per = max(1, band // max(size // max(self.rows, 1), 1))  # a row: all the other axes
        per = min(per, -(-self.rows // least))
        self.bounds = list(range(0, self.rows, per)) + [self.rows]

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def part(self, a, b: int):
        off = self.ndim - a.ndim
        d = self.axis - off
        if d < 0 or a.shape[d] == 1:
            return a
        return a[(slice(None),) * d + (slice(self.bounds[b], self.bounds[b + 1]),)]

    def out(self, out, b: int):
        return out[(slice(None),) * self.axis + (slice(self.bounds[b], self.bounds[b + 1]),)]


def _run(bands: _Bands, first: int, one, threads: int) -> None:
    """one(b) for every band from `first` on, over `threads` threads taking bands in turn."""

    def run(lo, hi):
        for b in range(first + lo, first + hi):
            one(b)

    n = len(bands) - first
    parallel_for(n, run, pieces_per_thread=n, max_threads=threads)


def _largest(args) -> int:
    """The most elements of any argument (a cheap first test: most calls are small)."""
    n = 0
    for a in args:
        s = getattr(a, "size", 0)
        if s > n:
            n = s
    return n


def _ufunc_bands(compute, ufunc):
    def banded(*args):
        if _largest(args) < MIN_WORK:
            return compute(*args)
        dt = _same_floats(args)
        if dt is None:
            return compute(*args)
        shape, size = _broadcast(args)
        if shape is None:
            return compute(*args)
        threads = _threads(size)
        axis = _split_axis(shape, False) if threads > 1 else None
        if axis is None:
            return compute(*args)
        count = max(2, min(UFUNC_BANDS, size // UFUNC_ELEMENTS))
        bands = _Bands(shape, axis, -(-size // count), count)
        if len(bands) < 2:
            return compute(*args)
        out = np.empty(shape, dt)
        _run(bands, 0, lambda b: ufunc(*(bands.part(a, b) for a in args), out=bands.out(out, b)),
             threads)  # fmt: skip
        return out

    return banded


def _compute_bands(compute, passes: int, rowwise: bool):
    def banded(*args):
        if _largest(args) * passes < MIN_WORK:
            return compute(*args)
        dt = _same_floats(args)
        if dt is None or (rowwise and (len(args) != 1 or args[0].ndim < 2)):
            return compute(*args)
        shape, size = _broadcast(args)
        if shape is None:
            return compute(*args)
        threads = _threads(size * passes)
        axis = _first_axis(shape, rowwise) if threads > 1 else None
        if axis is None:
            return compute(*args)
        bands = _Bands(shape, axis)
        if len(bands) < 2:
            return compute(*args)
        # Every kernel here keeps its float operands' dtype and the broadcast shape; a band
        # whose result does not (none should) makes the kernel run whole, as it would have.
        out = np.empty(shape, dt)
        odd = []

        def one(b):
            r = compute(*(bands.part(a, b) for a in args))
            dst = bands.out(out, b)
            if type(r) is not np.ndarray or r.dtype != dt or r.shape != dst.shape:
                odd.append(b)
            else:
                dst[...] = r

        _run(bands, 0, one, threads)
        return compute(*args) if odd else out

    return banded


def _concat_bands(compute):
    """ConcatV2(values..., axis) split along an axis before the concatenated one, each band
    through np.concatenate into its place (a copy: the same bytes as the kernel's). Values the
    kernel would refuse go to the kernel, which raises its error."""

    def banded(*args):
        values, axis = args[:-1], args[-1]
        if _largest(values) * 2 < MIN_WORK or len(values) < 2 or _same_floats(values) is None:
            return compute(*args)
        try:
            a = int(axis)
        except (TypeError, ValueError):
            return compute(*args)
        first = values[0]
        nd = first.ndim
        if not -nd <= a < nd or any(v.ndim != nd for v in values):
            return compute(*args)
        a %= nd
        if a == 0:
            return compute(*args)
        lead = first.shape[:a]
        if any(v.shape[:a] != lead for v in values):
            return compute(*args)
        size = sum(v.size for v in values)
        threads = _threads(size)
        d = _split_axis(lead, False) if threads > 1 else None
        if d is None:
            return compute(*args)
        shape = list(first.shape)
        shape[a] = sum(v.shape[a] for v in values)
        bands = _Bands(tuple(shape), d)
        if len(bands) < 2:
            return compute(*args)
        # The kernel's checks: every dimension but the axis equal (else it raises its error).
        if any(v.shape[i] != first.shape[i] for v in values for i in range(a + 1, nd)):
            return compute(*args)
        out = np.empty(tuple(shape), first.dtype)

        def one(b):
            np.concatenate([bands.part(v, b) for v in values], axis=a, out=bands.out(out, b))

        _run(bands, 0, one, threads)
        return out

    return banded


def _reduce_bands(compute, trailing_own: bool = False):
    """A reduction (x, axes) split along an axis before the first reduced one: each band's
    result is the kernel's on that band (a sum over the same values in the same order),
    copied into place. With `trailing_own`, a reduction over the trailing axes is left to the
    kernel whole (it splits those itself)."""

    def banded(x, axes):
        if getattr(x, "size", 0) < MIN_WORK:
            return compute(x, axes)
        if type(x) is not np.ndarray or x.dtype not in _FLOATS or x.ndim < 2:
            return compute(x, axes)
        try:
            raw = [int(a) for a in np.ravel(axes)]
        except (TypeError, ValueError):
            return compute(x, axes)
        if not raw or any(not -x.ndim <= a < x.ndim for a in raw):
            return compute(x, axes)
        first = min(a % x.ndim for a in raw)
        if trailing_own and sorted({a % x.ndim for a in raw}) == list(range(first, x.ndim)):
            return compute(x, axes)
        threads = _threads(x.size)
        d = _first_axis(x.shape[:first], False) if threads > 1 else None
        if d is None:
            return compute(x, axes)
        bands = _Bands(x.shape, d)
        if len(bands) < 2:
            return compute(x, axes)
        r = compute(bands.part(x, 0), axes)
        if (
            type(r) is not np.ndarray
            or r.ndim <= d
            or r.shape[:d] != x.shape[:d]
            or r.shape[d] != bands.bounds[1]
        ):
            return compute(x, axes)
        out = np.empty(r.shape[:d] + (bands.rows,) + r.shape[d + 1 :], r.dtype)
        bands.out(out, 0)[...] = r

        def one(b):
            bands.out(out, b)[...] = compute(bands.part(x, b), axes)

        _run(bands, 1, one, threads)
        return out

    return banded
