"""A loop's LSTM input projection hoisted out of it (see structured.py): where an LSTMBlockCell
in a while loop takes its input x from a TensorArray read, and its weights w from outside the
loop, the products x_t · w[:input size] of the elements the loop will read are large GEMMs over
the stacked elements, and each iteration's cell multiplies only h by the rest of w (the LSTM
512×64×50 step's forward: [2048, 512] x [512, 2048] and [1152, 512] x [512, 2048], then
[64, 512] x [512, 2048] per iteration, against [64, 1024] x [1024, 2048] per iteration; the
large products run about 1.4 times as fast per multiply-add as the thin one here).

The projection is made in blocks of iterations of at most BLOCK_BYTES, each when the loop first
reaches it. The gates are the same sums reassociated ([x, h] · w = x · w_x + h · w_h), so they
differ from the cell's one GEMM by rounding only; the blocks depend on the shapes alone, so the
bits do not depend on the threads. The projection is used for an iteration only when its x is
the very array projected at that index and w the same array; any other iteration (an element
written in the loop, another w) runs the cell as it is, and so does the rest of a loop that
goes back to a block it has left.
"""

from __future__ import annotations

import numpy as np

__all__ = ["InputProjection"]


# The most bytes of projected rows held at once: the projection is made in blocks of iterations
# of at most this size (the LSTM 512x64x50 step's 26 MB in two blocks of 32 and 18 iterations),
# each when the loop reaches it, so that a long sequence does not hold its whole projection.
BLOCK_BYTES = 1 << 24


class InputProjection:
    """One run of a loop's projection for one LSTMBlockCell: its blocks are made as the loop
    reaches them and it is dropped with the loop's end (the structured executor makes one per
    loop run)."""

    __slots__ = ("state", "xs", "w", "rows", "per_block", "block", "xw", "done")

    def __init__(self):
        self.state = None  # None: not tried yet; False: not applicable (any more) this run
        self.xs = self.w = self.xw = None
        self.rows = self.per_block = 0
        self.block = -1  # the block of iterations self.xw holds
        self.done: set = set()  # the blocks made so far

    def cell(self, ctx, handle, index, compute, x, cs_prev, h_prev, w, wci, wcf, wco, b):
        """LSTMBlockCell's outputs for this iteration (compute is its kernel), with x · w_x
        taken from the projection where it applies. `x` is the element just read at `index`
        of the TensorArray `handle`."""
        xw = self._rows(ctx, handle, index, x, w)
        if xw is None:
            return compute(x, cs_prev, h_prev, w, wci, wcf, wco, b)
        return compute(x, cs_prev, h_prev, w, wci, wcf, wco, b, xw)

    def _rows(self, ctx, handle, index, x, w):
        if self.state is None:
            self.state = self._check(ctx, handle, index, x, w)
        if not self.state:
            return None
        i = int(index)
        if not (0 <= i < len(self.xs) and self.xs[i] is x and w is self.w):
            return None
        k, at = divmod(i, self.per_block)
        if k != self.block:
            if k in self.done:  # iterations out of order: a block would be made twice
                self.state, self.xw = False, None
                return None
            from rill.exec.kernels import serial_gemm

            lo = k * self.per_block
            part = self.xs[lo : lo + self.per_block]
            self.xw = serial_gemm.product(_stacked(part), w[: x.shape[1]])
            self.block = k
            self.done.add(k)
        return self.xw[at * self.rows : (at + 1) * self.rows]

    def _check(self, ctx, handle, index, x, w) -> bool:
        """Whether every element of the array is there to project (of x's shape and dtype)."""
        from rill.exec.kernels.tensor_array_kernels import peek_elements

        if (
            type(x) is not np.ndarray
            or type(w) is not np.ndarray
            or x.ndim != 2
            or w.ndim != 2
            or x.dtype not in (np.float32, np.float64)
            or w.dtype != x.dtype
            or not 0 < x.shape[1] < w.shape[0]
            or x.shape[0] == 0
        ):
            return False
        xs = list(peek_elements(ctx, handle))
        i = int(index)
        if len(xs) < 2 or not 0 <= i < len(xs):
            return False
        xs[i] = x  # read (and maybe cleared) just now
        if any(type(v) is not np.ndarray or v.shape != x.shape or v.dtype != x.dtype for v in xs):
            return False
        self.xs, self.w, self.rows = xs, w, x.shape[0]
        self.per_block = max(1, BLOCK_BYTES // (x.shape[0] * w.shape[1] * x.itemsize))
        return True


def _stacked(parts: list) -> np.ndarray:
    """The matrices one below the other: a view where they already lie so in one buffer (the
    elements of a TensorArray that one scatter filled: rows of one copy of its value), else
    their concatenation. The same values either way."""
    first = parts[0]
    base, step = first.base, first.nbytes
    if base is None or not first.flags.c_contiguous:
        return np.concatenate(parts)
    at = first.ctypes.data
    for j, p in enumerate(parts):
        if p.base is not base or not p.flags.c_contiguous or p.ctypes.data != at + j * step:
            return np.concatenate(parts)
    rows = len(parts) * first.shape[0]
    return np.lib.stride_tricks.as_strided(first, (rows, first.shape[1]), first.strides,
                                           writeable=False)  # fmt: skip
