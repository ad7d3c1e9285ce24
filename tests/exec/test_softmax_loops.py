"""Softmax over the last axis of a C-contiguous float32/float64 tensor with the compiled loops
(_loops.softmax_shift, the exp, _loops.softmax_scale) gives the numpy kernel's bits, its exp
for float32 being the Exp kernel's exp32 (_exp_tanh_loops; numpy's for float64): rows of 1 to
1808 values, NaN, ±inf, all -0 and all -inf rows, every leading shape, float16 widened to
float32 and back; longer rows and strided inputs keep numpy's path."""

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


def _exp32(x):
    out = np.array(x, np.float32)
    jit.exp_tanh().exp32_flat(out.reshape(-1), 0, out.size)
    return out


def _numpy_ops(x, exp):
    """The numpy kernel's operations, with `exp` for its exp."""
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):
        e = exp(wide - wide.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


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
    if dtype == np.float64 or shape[-1] > 1808:  # numpy's exp; rows too long stay numpy's
        _assert_bits(got, want)
    else:
        _assert_bits(got, _numpy_ops(x, _exp32))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=1e-44)


def test_strided_and_half_inputs_keep_numpys_bits():
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    got, want = _both(x[:, ::2])
    _assert_bits(got, want)
    h = x.astype(np.float16)
    got, want = _both(h)
    assert got.dtype == np.float16
    _assert_bits(got, _numpy_ops(h, _exp32))  # widened to float32: exp32
