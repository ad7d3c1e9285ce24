"""Kernels for rill.graph.ops.reduction_ops: reductions, arg-max/min and cumulative sums.

Sums and products accumulate in the input's own type (integers wrap), as TensorFlow's do; numpy
would widen small integers. Reduction axes may be negative; duplicates and out-of-range axes are
InvalidArgumentError, and an empty axis list reduces nothing.
"""

from __future__ import annotations

import functools

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import jit
from rill.exec.kernels.intra_op import parallel_for
from rill.graph.errors import InvalidArgumentError

# Values per piece of a split trailing-axes sum (numpy releases the GIL in its reduction, so
# its blocks of long rows split too: EfficientNet-B0 ½'s [8, 48, 56, 56] global average pool,
# 0.17 ms on one thread, 0.11 on two). The sum is memory-bound, and a second thread pays only
# from a few MB (quiet, polling hand-offs: an add of two 1 MB float32 arrays took 130 µs on
# one thread and 163 µs in two halves, of 4 MB ones 470 and 348 µs): a pool of [8, 576, 7, 7]
# (0.9 MB) stays one piece.
_ROWS_GRAIN = 1 << 19


@functools.lru_cache(maxsize=256)
def _program(n: int) -> np.ndarray:
    return jit.conv_loops().pairwise_program(n)


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _axes_reader():
    """Returns axes(indices, rank) -> tuple of normalized axes.

    Reduction indices are nearly always the same Const array step after step (the Const kernel
    returns one array), so the last answer is kept against that array's identity.
    """
    last = [None, -1, ()]

    def axes(indices, rank: int) -> tuple:
        if indices is last[0] and rank == last[1]:
            return last[2]
        out = []
        for a in np.asarray(indices).reshape(-1).tolist():
            if not -rank <= a < rank:
                raise InvalidArgumentError(
                    f"Invalid reduction dimension ({a} for input with {rank} dimension(s)"
                )
            a %= rank
            if a in out:
                raise InvalidArgumentError(
                    f"Invalid reduction arguments: Axes contains duplicate dimension: {a}"
                )
            out.append(a)
        result = tuple(out)
        last[:] = [indices, rank, result]
        return result

    return axes


def _reduction(reduce):
    """A kernel factory for reduce(x, axes, keep_dims) -> array of the input's dtype."""

    def factory(keep_dims, xp):
        axes = _axes_reader()

        def compute(x, indices):
            return reduce(xp, x, axes(indices, x.ndim), keep_dims)

        return compute

    return factory


def _trailing(xp, x, axes, mean: bool):
    """Sum (or Mean) of a C-contiguous float32/float64 array over its last len(axes) axes, rows
    split over the intra-op threads, reshaped without the reduced axes; None where this does
    not apply. The rows go through the compiled row loops (_conv_loops.row_pairwise_sums:
    numpy's pairwise sums, its additions in its order, so its bits, with four rows' chains of
    additions side by side and without numpy's call per row: a global average pool of
    [96, 56, 56] took 41 µs through numpy's reduction and 12.5 here, of [1000, 13, 13] 35
    and 8.5, of [576, 7, 7] 12.7 and 2.8). Each row's sum is the same pairwise sum however the
    rows are grouped, so the bits are numpy's over the whole array whatever the threads."""
    if (
        xp is not np
        or not axes
        or x.dtype not in jit.FLOATS
        or not x.flags.c_contiguous
        or x.size == 0
        or sorted(axes) != list(range(x.ndim - len(axes), x.ndim))
    ):
        return None
    loops = jit.conv_loops()
    if loops is None:
        return None
    inner = _count(x, axes)
    rows = x.reshape(x.size // inner, inner)
    out = np.empty(rows.shape[0], x.dtype)
    prog = _program(inner)
    parallel_for(rows.shape[0], lambda lo, hi: loops.row_pairwise_sums(rows, out, prog, mean,
                                                                      lo, hi),
                 grain=max(1, _ROWS_GRAIN // inner))  # fmt: skip
    return out.reshape(x.shape[: x.ndim - len(axes)])


def _sum(xp, x, axes, keep):
    got = _trailing(xp, x, axes, mean=False)
    if got is not None:
        return got.reshape(got.shape + (1,) * len(axes)) if keep else got
    return xp.sum(x, axis=axes, dtype=x.dtype, keepdims=keep)


def _prod(xp, x, axes, keep):
    return xp.prod(x, axis=axes, dtype=x.dtype, keepdims=keep)


def _count(x, axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _mean(xp, x, axes, keep):
    n = _count(x, axes)
    kind = x.dtype.kind
    if kind in "iu":
        # Integers: the sum in 64 bits, divided with truncation toward zero; 0 when empty.
        wide = np.int64 if kind == "i" else np.uint64
        s = xp.sum(x, axis=axes, dtype=wide, keepdims=keep)
        if n == 0:
            return xp.zeros_like(s, dtype=x.dtype)
        q = s // wide(n)
        if kind == "i":
            q = q + ((s < 0) & (s % wide(n) != 0)).astype(wide)
        return q.astype(x.dtype)
    got = _trailing(xp, x, axes, mean=True) if kind == "f" else None
    if got is not None:
        return got.reshape(got.shape + (1,) * len(axes)) if keep else got
    s = _sum(xp, x, axes, keep)  # in the input's own type: a float16 sum may overflow, as in TF
    if n == 0:
        # TensorFlow's mean of nothing: NaN for real floats, 0 for complex.
        return xp.full_like(s, 0 if kind == "c" else np.nan)
    return xp.true_divide(s, x.dtype.type(n))


def _extreme(largest: bool):
    fn = "max" if largest else "min"

    def reduce(xp, x, axes, keep):
        kind = x.dtype.kind
        if kind in "iu":
            info = np.iinfo(x.dtype)
            initial = info.min if largest else info.max
        else:
            initial = -np.inf if largest else np.inf
        # `initial` gives TensorFlow's result for an empty reduction: the type's lowest (highest).
        return getattr(xp, fn)(x, axis=axes, keepdims=keep, initial=initial)

    return reduce


def _all(xp, x, axes, keep):
    return xp.all(x, axis=axes, keepdims=keep)


def _any(xp, x, axes, keep):
    return xp.any(x, axis=axes, keepdims=keep)


for _op, _fn in (
    ("Sum", _sum),
    ("Prod", _prod),
    ("Mean", _mean),
    ("Max", _extreme(True)),
    ("Min", _extreme(False)),
    ("All", _all),
    ("Any", _any),
):
    register_kernel(_op, devices="CPU")(_reduction(_fn))


def _scalar_axis(axis, what: str) -> int:
    if axis.ndim != 0:
        raise InvalidArgumentError(
            f"{what} must be a scalar, but received tensor of shape: {_dims(axis.shape)}"
        )
    return int(axis)


def _arg_reduce(largest: bool):
    def factory(T, output_type, xp):
        pick = xp.argmax if largest else xp.argmin
        fill = -np.inf if largest else np.inf
        want = output_type.np
        floating = T.is_floating

        def compute(x, dimension):
            d = _scalar_axis(dimension, "dim")
            r = x.ndim
            if not -r <= d < r:
                raise InvalidArgumentError(
                    f"Expected dimension in the range [{-r}, {r}), but got {d}"
                )
            d %= r
            if x.shape[d] == 0:
                raise InvalidArgumentError(f"Reduction axis {d} is empty in shape {_dims(x.shape)}")
            if floating:
                nan = xp.isnan(x)
                if bool(nan.any()):
                    # TensorFlow keeps the first strictly better value, so NaN is never picked.
                    x = xp.where(nan, x.dtype.type(fill), x)
            return pick(x, axis=d).astype(want)

        return compute

    return factory


register_kernel("ArgMax", devices="CPU")(_arg_reduce(True))
register_kernel("ArgMin", devices="CPU")(_arg_reduce(False))


@register_kernel("Cumsum", devices="CPU")
def cumsum(exclusive, reverse, xp):
    def compute(x, axis):
        a = _scalar_axis(axis, "axis")
        r = x.ndim
        if not -r <= a < r:
            raise InvalidArgumentError(
                f"ScanOp: Expected scan axis in the range [{-r}, {r}), but got {a}"
            )
        a %= r
        if reverse:
            x = xp.flip(x, axis=a)
        out = xp.cumsum(x, axis=a, dtype=x.dtype)
        if exclusive:
            # Shift by one instead of subtracting x, so that float sums are those of the prefix.
            shifted = xp.zeros_like(out)
            src = [slice(None)] * r
            dst = [slice(None)] * r
            src[a], dst[a] = slice(0, -1), slice(1, None)
            shifted[tuple(dst)] = out[tuple(src)]
            out = shifted
        return xp.flip(out, axis=a) if reverse else out

    return compute
