"""The compiled row loop behind _FusedLayerNorm (rill.exec.kernels.fused_kernels): the layer
normalization chain the ONNX importer builds, row by row, with the unfused kernels' arithmetic
in their order — Mean as numpy's pairwise sum (0 + the sum, then / n: reduction_kernels._mean's
bits), SquaredDifference as (x - mean)², AddV2, Rsqrt as 1 / sqrt, Sub, Mul, Mul, AddV2 — so the
results are the chain's bit for bit. No fast-math, no fused multiply-add."""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
_inline = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                     inline="always")  # fmt: skip


@_inline
def _leaf(a, s, n):  # pragma: no cover - compiled
    """numpy's pairwise block of a[s:s + n], n <= 128: below 8 values in order from 0, else
    eight running sums combined ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
    rest in order."""
    if n < 8:
        res = a.dtype.type(0)
        for i in range(s, s + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[s], a[s + 1], a[s + 2], a[s + 3]
    r4, r5, r6, r7 = a[s + 4], a[s + 5], a[s + 6], a[s + 7]
    end = s + n - n % 8
    i = s + 8
    while i < end:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < s + n:
        res += a[i]
        i += 1
    return res


# numpy's pairwise sum splits a sum of more than 128 values at n2 = n // 2 rounded down to a
# multiple of 8 and sums each part the same way; numba cannot cache a recursive function, so the
# levels are written out: _p1 takes up to 240 values, _p2 464, _p3 912, _p4 1808 (each part of
# a split is at most n / 2 + 8 long).
ROW_MAX = 1808


@_inline
def _p1(a, s, n):  # pragma: no cover - compiled
    if n <= 128:
        return _leaf(a, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _leaf(a, s, n2) + _leaf(a, s + n2, n - n2)


@_inline
def _p2(a, s, n):  # pragma: no cover - compiled
    if n <= 128:
        return _leaf(a, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _p1(a, s, n2) + _p1(a, s + n2, n - n2)


@_inline
def _p3(a, s, n):  # pragma: no cover - compiled
    if n <= 128:
        return _leaf(a, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _p2(a, s, n2) + _p2(a, s + n2, n - n2)


@_jit
def pairwise(a, s, n):  # pragma: no cover - compiled
    """numpy's pairwise sum of a[s:s + n], n <= ROW_MAX."""
    if n <= 128:
        return _leaf(a, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _p3(a, s, n2) + _p3(a, s + n2, n - n2)


@_jit
def layer_norm_rows(x, scale, offset, eps, out, lo, hi):  # pragma: no cover - compiled
    """out[r] for the rows r in [lo, hi) of x [rows, n]: ((x - m) · (1 / sqrt(v + eps))) ·
    scale + offset, m the mean of the row, v the mean of (x - m)², as the chain computes them."""
    n = x.shape[1]
    zero, one = x.dtype.type(0), x.dtype.type(1)
    count = x.dtype.type(n)
    sq = np.empty(n, x.dtype)
    for r in range(lo, hi):
        row = x[r]
        dst = out[r]
        mean = (zero + pairwise(row, 0, n)) / count
        for j in range(n):
            d = row[j] - mean
            sq[j] = d * d
        var = (zero + pairwise(sq, 0, n)) / count
        inv = one / np.sqrt(var + eps)
        for j in range(n):
            dst[j] = ((row[j] - mean) * inv) * scale[j] + offset[j]
