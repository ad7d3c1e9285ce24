"""Softmax over the last axis of a C-contiguous float32/float64 tensor with the compiled loops:
float64 (_loops.softmax_shift, numpy's exp, _loops.softmax_scale) gives the numpy kernel's bits;
float32 (_exp_tanh_loops.softmax32_rows: exp32, the row's sum in vector lanes) its values to
float rounding, the same NaNs and zeros. Rows of 1 to 1808 values, NaN, ±inf, all -0 and all
-inf rows, every leading shape, float16 widened to float32 and back; longer rows and strided
inputs keep numpy's path."""

from __future__ import annotations

import numpy as np
import pytest

from rill.exec.kernels import jit, nn_kernels

RNG = np.random.default_rng(5)


def _both(x):
    k = nn_kernels.softmax(np)
    old = jit.set_enabled(True)
    try:
        with np.errstate(all="ignore"):
            compiled = k(x)
            jit.set_enabled(False)
            reference = k(x)
    finally:
        jit.set_enabled(old)
    return compiled, reference


def _assert_close(a, b):
    """float32 a within a few float32 roundings of b: the same NaNs and zeros, the rest within
    5e-7 relative (exp32's ulp or two, the sum's and the division's roundings)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan] == 0, b[~nan] == 0)
    np.testing.assert_allclose(a[~nan], b[~nan], rtol=5e-7, atol=1e-44)


def _assert_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan], b[~nan])
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape", [(3, 1), (5, 7), (1, 4, 64, 64), (2, 6, 19, 197), (6, 1000), (5, 1808), (4, 1900)]
)
def test_softmax_rows_are_numpys_bits(shape, dtype):
    x = (RNG.standard_normal(shape) * 20).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    rows[0, 0] = np.nan
    rows[1, 0] = np.inf
    rows[2 % len(rows)] = -0.0
    rows[3 % len(rows)] = -np.inf
    rows[4 % len(rows), -1] = -np.inf
    got, want = _both(x)
    if dtype == np.float64 or shape[-1] > 1808:  # numpy's path for rows too long
        _assert_bits(got, want)
    else:
        _assert_close(got, want)
        # Each row's own arithmetic: the same bits in any pieces of rows.
        n = shape[-1]
        pieces = np.empty_like(rows)
        mod = jit.exp_tanh()
        mod.softmax32_rows(rows, pieces, 0, len(rows) // 3)
        mod.softmax32_rows(rows, pieces, len(rows) // 3, len(rows))
        _assert_bits(pieces, got.reshape(-1, n))


def test_strided_and_half_inputs_keep_numpys_bits():
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    got, want = _both(x[:, ::2])
    _assert_bits(got, want)
    h = x.astype(np.float16)
    got, want = _both(h)
    assert got.dtype == np.float16
    # Widened to float32 (exp32) and rounded back: numpy's or one float16 step from it.
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)
