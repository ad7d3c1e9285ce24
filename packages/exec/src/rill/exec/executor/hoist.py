"""A loop's LSTM input projection hoisted out of it (see structured.py): where an LSTMBlockCell
in a while loop takes its input x from a TensorArray read, and its weights w from outside the
loop, the products x_t · w[:input size] of every element the loop will read are one GEMM over
the stacked elements, made at the loop's first iteration, and each iteration's cell multiplies
only h by the rest of w (the LSTM 512×64×50 step's forward: [3200, 512] x [512, 2048] once and
[64, 512] x [512, 2048] per iteration, against [64, 1024] x [1024, 2048] per iteration; the
large product runs about twice as fast per multiply-add as the thin one).

The gates are the same sums, reassociated ([x, h] · w = x · w_x + h · w_h), so they differ
from the cell's one GEMM by rounding only. The projection is used for an iteration only when
its x is the very array the projection was made from at that index and w the same array; any
other iteration (an element written in the loop, another w) runs the cell as it is.
"""

from __future__ import annotations

import numpy as np

__all__ = ["InputProjection"]


class InputProjection:
    """One run of a loop's projection for one LSTMBlockCell: made at the first call, dropped
    with the loop's end (the structured executor makes one per loop run)."""

    __slots__ = ("state", "xs", "w", "rows", "xw")

    def __init__(self):
        self.state = None  # None: not tried yet; False: not applicable this run
        self.xs = self.w = self.xw = None
        self.rows = 0

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
            self.state = self._project(ctx, handle, index, x, w)
        if not self.state:
            return None
        i = int(index)
        if 0 <= i < len(self.xs) and self.xs[i] is x and w is self.w:
            return self.xw[i * self.rows : (i + 1) * self.rows]
        return None

    def _project(self, ctx, handle, index, x, w) -> bool:
        from rill.exec import threads
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
        self.xw = threads.matmul(np.concatenate(xs), w[: x.shape[1]])
        return True
