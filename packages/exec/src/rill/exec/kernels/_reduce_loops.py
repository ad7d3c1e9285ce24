"""The compiled loops behind reduction_kernels' Sum and Mean over short trailing axes (import
that module).

numpy sums a C-contiguous array over its trailing axes row by row, one inner-loop call per row
of the flattened [rows, n] view, each a pairwise sum; up to 128 values that is: below 8 values
in order from 0, else eight running sums, combined ((r0 + r1) + (r2 + r3)) + ((r4 + r5) +
(r6 + r7)), then the rest in order. The result is 0 + that sum. These loops do the same
operations in the same order (no fast-math, no fused multiply-add), so the bits are numpy's,
without numpy's call per row, which for a global average pool of 7×7 planes costs more than
the sums. (Longer rows stay with numpy, whose vectorized running sums are faster there.)
"""

from __future__ import annotations

import numba

# error_model="numpy": IEEE results (inf, NaN) instead of exceptions.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
# Inlined: a call per row that passes an array costs more than a short row's sum.
_inline = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                     inline="always")  # fmt: skip

# The longest rows these loops sum (numpy's pairwise sum splits longer ones in halves).
MAX_ROW = 128


@_inline
def _block(a, row, n):  # pragma: no cover - compiled
    """numpy's pairwise sum of a[row, :n] for n <= MAX_ROW."""
    if n < 8:
        res = a.dtype.type(0)
        for i in range(n):
            res += a[row, i]
        return res
    r0, r1, r2, r3 = a[row, 0], a[row, 1], a[row, 2], a[row, 3]
    r4, r5, r6, r7 = a[row, 4], a[row, 5], a[row, 6], a[row, 7]
    end = n - n % 8
    i = 8
    while i < end:
        r0 += a[row, i]
        r1 += a[row, i + 1]
        r2 += a[row, i + 2]
        r3 += a[row, i + 3]
        r4 += a[row, i + 4]
        r5 += a[row, i + 5]
        r6 += a[row, i + 6]
        r7 += a[row, i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[row, i]
        i += 1
    return res


@_jit
def row_sums(x, out, lo, hi):  # pragma: no cover - compiled
    """out[r] = 0 + numpy's pairwise sum of x[r] for the rows r in [lo, hi) of x [rows, n],
    n <= MAX_ROW."""
    zero = x.dtype.type(0)
    n = x.shape[1]
    for r in range(lo, hi):
        out[r] = zero + _block(x, r, n)


@_jit
def row_means(x, out, lo, hi):  # pragma: no cover - compiled
    """out[r] = (0 + numpy's pairwise sum of x[r]) / n for the rows r in [lo, hi) of x
    [rows, n], n <= MAX_ROW (Mean's sum, then its division by the count in the dtype)."""
    zero = x.dtype.type(0)
    n = x.shape[1]
    count = x.dtype.type(n)
    for r in range(lo, hi):
        out[r] = (zero + _block(x, r, n)) / count
