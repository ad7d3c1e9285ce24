"""A loop's folded weight gradient (see structured.py): the per-iteration operands of a MatMul
whose product is summed over the iterations are kept one below the other as the loop runs, and
the sum Σ aᵢᵀ·gᵢ is one GEMM after the loop.

Each operand is copied into the stacked matrix when its iteration makes it, while it is still
in cache, and is then free: no list of per-iteration arrays outlives its iteration, and no
second pass over memory stacks them after the loop (on the LSTM 512×64×50 step, 39 MB a step).
The stacked matrices' memory is reused from step to step.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["Rows", "fold_matmuls"]

# Free stacked matrices by (dtype, width), the largest last; at most _KEEP of each.
_free: dict[tuple, list[np.ndarray]] = {}
_free_lock = threading.Lock()
_KEEP = 1
# The rows the last loop stacked, by (dtype, width): the next loop's first guess, so that from
# the second step on a loop stacks into a matrix of its own size (no growing, no slack).
_last_rows: dict[tuple, int] = {}


def _take(dtype: np.dtype, width: int, rows: int) -> np.ndarray:
    """A free [>= rows, width] matrix of dtype: a kept one when it is large enough and at most a
    quarter larger, else a new one of `rows` rows (a kept one much too large is dropped)."""
    with _free_lock:
        kept = _free.get((dtype, width))
        if kept and kept[-1].shape[0] >= rows:
            buf = kept.pop()
            if buf.shape[0] <= rows + rows // 4:
                return buf
    return np.empty((rows, width), dtype)


def _give(buf: np.ndarray) -> None:
    """Keeps buf for a later loop (the largest _KEEP of its kind)."""
    with _free_lock:
        kept = _free.setdefault((buf.dtype, buf.shape[1]), [])
        kept.append(buf)
        kept.sort(key=len)
        del kept[:-_KEEP]


class Rows:
    """The matrices appended to it, one below the other.

    Numeric 2-D arrays of one dtype and width are copied as they come into a matrix sized from
    the last loop's rows (a loop that outgrows it goes on in a further chunk, and the chunks are
    concatenated once, when the matrix is asked for); anything else (another shape or type)
    turns it into a plain list of the parts. The same values either way."""

    __slots__ = ("buf", "used", "total", "full", "parts", "count", "pending")

    def __init__(self):
        self.buf = None  # the current chunk (rows in use: self.used)
        self.used = 0
        self.total = 0  # rows stacked in all chunks
        self.full = []  # the earlier chunks, filled
        self.parts = None  # the list form, once a part does not fit the matrix
        self.count = 0
        self.pending = None  # the copy an intra-op worker is making (intra_op.hand_off)

    def __len__(self) -> int:
        return self.count

    def append(self, p) -> None:
        self.count += 1
        if self.parts is None and self._fits(p):
            block = self._block(p.shape[0], p.shape[1], p.dtype)
            self._copy(lambda: np.copyto(block, p))
            return
        self._wait()
        if self.parts is None:
            # The chunks are this object's own (none goes back to the pool now): views serve.
            self.parts = self._chunks()
            self.buf, self.full = None, []
        self.parts.append(p)

    def append_parts(self, parts, concat, axis) -> None:
        """Appends concat(*parts, axis), the parts side by side (ConcatV2 along the columns),
        copying each part straight into its columns of the stacked matrix (no concatenated
        copy first); concat (the ConcatV2 kernel) runs only where the parts are not matrices of
        one float dtype and row count that fit the matrix, or the axis is not the columns."""
        p0 = parts[0]
        width = 0
        ok = self.parts is None and int(axis) in (1, -1)
        for p in parts:
            if not ok:
                break
            ok = type(p) is np.ndarray and p.ndim == 2 and p.dtype == p0.dtype
            ok = ok and p.shape[0] == p0.shape[0]
            width += p.shape[1] if ok else 0
        if (
            not ok
            or p0.dtype.kind not in "fc"
            or (self.buf is not None and (p0.dtype != self.buf.dtype or width != self.buf.shape[1]))
        ):
            self.append(concat(*parts, axis))
            return
        self.count += 1
        block = self._block(p0.shape[0], width, p0.dtype)

        def copy():
            c = 0
            for p in parts:
                block[:, c : c + p.shape[1]] = p
                c += p.shape[1]

        self._copy(copy)

    def _copy(self, fn) -> None:
        """Runs the copy fn, on an idle intra-op worker where there is one (it overlaps the
        caller's next work: the LSTM gradient loop's 0.8 MB a step into memory out of cache,
        about 0.13 ms); the previous copy finishes first."""
        from rill.exec.kernels import intra_op

        self._wait()
        self.pending = intra_op.hand_off(fn)
        if self.pending is None:
            fn()

    def _wait(self) -> None:
        if self.pending is not None:
            from rill.exec.kernels import intra_op

            job, self.pending = self.pending, None
            intra_op.finish(job)

    def _block(self, rows: int, width: int, dtype) -> np.ndarray:
        """The view of the stacked matrix that the next `rows` rows go to."""
        if self.buf is None:
            guess = _last_rows.get((dtype, width), 16 * rows)
            self.buf = _take(dtype, width, max(rows, guess))
        elif self.used + rows > self.buf.shape[0]:
            self.full.append(self.buf[: self.used])
            self.buf = np.empty((max(rows, self.total), width), dtype)
            self.used = 0
        lo = self.used
        self.used += rows
        self.total += rows
        return self.buf[lo : self.used]

    def _fits(self, p) -> bool:
        if type(p) is not np.ndarray or p.ndim != 2 or p.dtype.kind not in "fc":
            return False
        return self.buf is None or (p.dtype == self.buf.dtype and p.shape[1] == self.buf.shape[1])

    def _chunks(self) -> list:
        return self.full + [self.buf[: self.used]] if self.buf is not None else []

    def matrix(self):
        """The parts one below the other (a view of memory that release() gives back)."""
        self._wait()
        parts = self.parts if self.parts is not None else self._chunks()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def release(self) -> None:
        """Gives the stacked matrix's memory back for a later loop (after matrix() is used); a
        loop that needed several chunks gives none back, and the next one takes its size."""
        self._wait()
        if self.buf is not None:
            _last_rows[(self.buf.dtype, self.buf.shape[1])] = self.total
            if not self.full:
                _give(self.buf)
        self.buf, self.full, self.used, self.total = None, [], 0, 0


def fold_matmuls(acc, a_rows: Rows, g_rows: Rows):
    """acc + Σ aᵢᵀ·gᵢ as one GEMM: [a₀; a₁; …]ᵀ · [g₀; g₁; …] (the same sum, reassociated).

    Float products go through rill.exec.kernels.serial_gemm (threads.matmul's fixed blocks
    over the intra-op threads, or one call where that gives their bits: the same bits on any
    thread count).

    acc is the loop's initial value, not a copy of its own (the loop never writes it): the sum
    goes into the fresh product, or into a new array."""
    from rill.exec.executor.structured import _private_copy
    from rill.exec.kernels import serial_gemm

    if not len(a_rows):
        return _private_copy(acc)
    try:
        a, g = a_rows.matrix(), g_rows.matrix()
        if a.ndim == g.ndim == 2 and a.dtype == g.dtype and a.dtype in (np.float32, np.float64):
            total = serial_gemm.product(a.T, g)
        else:
            total = np.matmul(a.T, g)
    finally:
        a_rows.release()
        g_rows.release()
    total = total.astype(acc.dtype, copy=False)
    if (
        type(acc) is np.ndarray
        and type(total) is np.ndarray
        and total.dtype == acc.dtype
        and np.broadcast_shapes(acc.shape, total.shape) == total.shape
    ):
        return np.add(acc, total, out=total)
    return np.add(acc, total)
