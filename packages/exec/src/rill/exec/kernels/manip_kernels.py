"""Kernels for rill.graph.ops.manip_ops (Cumprod, CumulativeLogsumexp, Roll, LinSpace, Einsum)
and rill.graph.ops.diag_ops (Diag, DiagPart, MatrixBandPart, MatrixDiag*, MatrixSetDiag*)."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.diag_ops import diag_length, diag_range
from rill.graph.ops.manip_ops import parse_einsum
from rill.graph.shapes import TensorShape


def _axis(x, axis) -> int:
    if np.ndim(axis) != 0:
        raise InvalidArgumentError(f"ScanOp: axis must be a scalar, not {TensorShape(axis.shape)}")
    a, r = int(axis), x.ndim
    if not -r <= a < r:
        raise InvalidArgumentError(
            f"ScanOp: Expected scan axis in the range [{-r}, {r}), but got {a}"
        )
    return a % r


def _scan(x, a, exclusive, reverse, accumulate, identity):
    if reverse:
        x = np.flip(x, axis=a)
    out = accumulate(x, axis=a)
    if exclusive:
        shifted = np.full_like(out, identity)
        src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
        src[a], dst[a] = slice(0, -1), slice(1, None)
        shifted[tuple(dst)] = out[tuple(src)]
        out = shifted
    return np.flip(out, axis=a) if reverse else out


@register_kernel("Cumprod")
def cumprod(exclusive, reverse, T):
    def compute(x, axis):
        a = _axis(x, axis)
        return _scan(x, a, exclusive, reverse,
                     lambda v, axis: np.cumprod(v, axis=axis, dtype=v.dtype), 1)  # fmt: skip

    return compute


@register_kernel("CumulativeLogsumexp")
def cumulative_logsumexp(exclusive, reverse, T):
    def acc(v, axis):
        with np.errstate(all="ignore"):
            return np.logaddexp.accumulate(v.astype(np.float64), axis=axis)

    def compute(x, axis):
        a = _axis(x, axis)
        out = _scan(x, a, exclusive, reverse, acc, -np.inf)
        return out.astype(x.dtype)

    return compute


@register_kernel("Roll")
def roll(T, Tshift, Taxis):
    def compute(x, shift, axis):
        s, a = np.atleast_1d(shift), np.atleast_1d(axis)
        if s.ndim != 1 or a.ndim != 1 or s.shape != a.shape:
            raise InvalidArgumentError(
                f"shift and axis must be scalars or vectors of one size, got "
                f"{TensorShape(s.shape)} and {TensorShape(a.shape)}"
            )
        for ax in a:
            if not -x.ndim <= ax < x.ndim:
                raise InvalidArgumentError(f"axis {int(ax)} is out of range for rank {x.ndim}")
        return np.roll(x, tuple(int(v) for v in s), tuple(int(v) for v in a))

    return compute


@register_kernel("LinSpace")
def linspace(T, Tidx):
    def compute(start, stop, num):
        for v, what in ((start, "start"), (stop, "stop"), (num, "num")):
            if np.ndim(v) != 0:
                raise InvalidArgumentError(f"{what} must be a scalar, not {TensorShape(v.shape)}")
        n = int(num)
        if n <= 0:
            raise InvalidArgumentError(f"Requires num > 0: {n}")
        if n == 1:
            return np.asarray([start], dtype=T.np)
        # TensorFlow's formula: start + i * step, step = (stop - start) / (num - 1), in T.
        step = (stop.astype(np.float64) - start) / (n - 1)
        out = start.astype(np.float64) + np.arange(n) * step
        return out.astype(T.np)

    return compute


@register_kernel("Einsum", expensive=True)
def einsum(equation, N, T):
    def compute(*xs):
        try:
            subs, out = parse_einsum(equation, [x.ndim for x in xs])
            spec = ",".join(subs) + "->" + out
            return np.asarray(np.einsum(spec, *xs, optimize=len(xs) > 2)).astype(T.np)
        except ValueError as e:
            raise InvalidArgumentError(f"einsum {equation!r}: {e}") from None

    return compute


# -- diagonals ------------------------------------------------------------------------------------


@register_kernel("Diag")
def diag(T):
    def compute(d):
        n = d.size
        out = np.zeros((n, n), dtype=d.dtype)
        out[np.arange(n), np.arange(n)] = d.reshape(-1)
        return out.reshape(d.shape + d.shape)

    return compute


@register_kernel("DiagPart")
def diag_part(T):
    def compute(x):
        h = x.ndim // 2
        if x.ndim % 2 or x.shape[:h] != x.shape[h:]:
            raise InvalidArgumentError(
                f"DiagPart needs an input of shape s + s, got {TensorShape(x.shape)}"
            )
        n = int(np.prod(x.shape[:h], dtype=np.int64))
        return x.reshape(n, n)[np.arange(n), np.arange(n)].reshape(x.shape[:h])

    return compute


@register_kernel("MatrixBandPart")
def matrix_band_part(T, Tindex):
    def compute(x, lower, upper):
        m, n = x.shape[-2:]
        lo, up = int(lower), int(upper)
        if lo > m or up > n:
            raise InvalidArgumentError(
                f"num_lower ({lo}) must not exceed the rows ({m}) nor num_upper ({up}) the "
                f"columns ({n})"
            )
        i = np.arange(m)[:, None]
        j = np.arange(n)[None, :]
        keep = ((lo < 0) | (i - j <= lo)) & ((up < 0) | (j - i <= up))
        return np.where(keep, x, np.zeros((), x.dtype))

    return compute


def _left_aligned(d: int, align: str) -> bool:
    sup, sub = align.split("_")
    return (d >= 0 and sup == "LEFT") or (d <= 0 and sub == "LEFT")


def _diagonals(m: int, n: int, lo: int, hi: int, align: str):
    """(d, row in the packed array, offset in that row, rows, cols) for each diagonal."""
    width = max((diag_length(m, n, d) for d in range(lo, hi + 1)), default=0)
    out = []
    for d in range(hi, lo - 1, -1):
        length = diag_length(m, n, d)
        off = 0 if _left_aligned(d, align) else width - length
        idx = np.arange(length)
        out.append((d, hi - d, off, idx + max(-d, 0), idx + max(d, 0)))
    return width, out


def _check_k(k, m, n):
    try:
        lo, hi = diag_range(k)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
    if m is not None and ((m > 0 and lo <= -m) or (n > 0 and hi >= n)):
        raise InvalidArgumentError(
            f"the diagonal range k = ({lo}, {hi}) lies outside a {m}x{n} matrix"
        )
    return lo, hi


@register_kernel("MatrixDiagPartV3")
def matrix_diag_part_v3(T, align):
    def compute(x, k, pad):
        if x.ndim < 2:
            raise InvalidArgumentError(
                f"input must be at least a matrix, got {TensorShape(x.shape)}"
            )
        m, n = x.shape[-2:]
        lo, hi = _check_k(k, m, n)
        width, diags = _diagonals(m, n, lo, hi, align)
        out = np.full((*x.shape[:-2], hi - lo + 1, width), pad, dtype=x.dtype)
        for _, row, off, r, c in diags:
            out[..., row, off : off + len(r)] = x[..., r, c]
        return out[..., 0, :] if lo == hi else out

    return compute


@register_kernel("MatrixDiagPart")
def matrix_diag_part(T):
    inner = matrix_diag_part_v3(T, "RIGHT_LEFT")
    return lambda x: inner(x, np.int32(0), np.zeros((), x.dtype))


@register_kernel("MatrixSetDiagV3")
def matrix_set_diag_v3(T, align):
    def compute(x, diagonal, k):
        m, n = x.shape[-2:]
        lo, hi = _check_k(k, m, n)
        width, diags = _diagonals(m, n, lo, hi, align)
        want = (*x.shape[:-2], *(() if lo == hi else (hi - lo + 1,)), width)
        if diagonal.shape != want:
            raise InvalidArgumentError(
                f"diagonal must have shape {TensorShape(want)}, got {TensorShape(diagonal.shape)}"
            )
        dg = diagonal[..., None, :] if lo == hi else diagonal
        out = x.copy()
        for _, row, off, r, c in diags:
            out[..., r, c] = dg[..., row, off : off + len(r)]
        return out

    return compute


@register_kernel("MatrixSetDiag")
def matrix_set_diag(T):
    inner = matrix_set_diag_v3(T, "RIGHT_LEFT")
    return lambda x, d: inner(x, d, np.int32(0))


@register_kernel("MatrixDiagV3")
def matrix_diag_v3(T, align):
    def compute(diagonal, k, num_rows, num_cols, pad):
        lo, hi = _check_k(k, None, None)
        if diagonal.ndim < (1 if lo == hi else 2):
            raise InvalidArgumentError(
                f"diagonal has too few dimensions for k = ({lo}, {hi}): "
                f"{TensorShape(diagonal.shape)}"
            )
        dg = diagonal[..., None, :] if lo == hi else diagonal
        if dg.shape[-2] != hi - lo + 1:
            raise InvalidArgumentError(
                f"diagonal has {dg.shape[-2]} diagonals, k = ({lo}, {hi}) names {hi - lo + 1}"
            )
        length = dg.shape[-1]
        min_rows, min_cols = length - min(hi, 0), length + max(lo, 0)
        rows, cols = int(num_rows), int(num_cols)
        if rows == -1 and cols == -1:
            rows = cols = max(min_rows, min_cols)
        elif rows == -1:
            rows = min_rows
        elif cols == -1:
            cols = min_cols
        if rows < min_rows or cols < min_cols:
            raise InvalidArgumentError(
                f"a {rows}x{cols} output cannot hold diagonals of length {length} at k = "
                f"({lo}, {hi})"
            )
        width, diags = _diagonals(rows, cols, lo, hi, align)
        if width != length and lo == hi:
            raise InvalidArgumentError(
                f"diagonal {lo} of a {rows}x{cols} matrix has length {width}, got {length}"
            )
        out = np.full((*dg.shape[:-2], rows, cols), pad, dtype=dg.dtype)
        for _, row, off, r, c in diags:
            out[..., r, c] = dg[..., row, off : off + len(r)]
        return out

    return compute


@register_kernel("MatrixDiag")
def matrix_diag(T):
    inner = matrix_diag_v3(T, "RIGHT_LEFT")
    return lambda d: inner(d, np.int32(0), np.int32(-1), np.int32(-1), np.zeros((), d.dtype))
