"""The bound the float32 Sigmoid and Swish of rill.exec's fused epilogues keep
(rill.exec.kernels._conv_loops.sigmoid32), shared by the tests that compare them with numpy.

sigmoid32 is within 4 ulp of the exact value (tests/exec/test_sigmoid32.py), numpy's unfused
chain 1 / (1 + exp(-x)) within about 2, so the two agree to 8 ulp of the unfused value; except
where numpy's exp(-x) overflows (x < -88.7): there numpy gives 0 where the exact value, which
sigmoid32 keeps, is below 2**-120 in magnitude (Sigmoid) or 2**-110 (Swish)."""

from __future__ import annotations

import numpy as np

ULP_VS_NUMPY = 8
ATOL_VS_NUMPY = 2.0**-110


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of float32's spacing at the exact value rounded to float32 (the
    spacing of the subnormals, 2**-149, near 0), for finite exact values."""
    r32 = exact.astype(np.float32)
    with np.errstate(over="ignore"):
        sp = np.spacing(np.abs(r32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / sp


def assert_sigmoid_close(got, want) -> None:
    """got (sigmoid32's Sigmoid or Swish, float32) against want (numpy's unfused chain): the
    same NaNs and infinities, the finite values within the bound above."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~nan], want[~fin & ~nan])
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    err = np.abs(g - w)
    with np.errstate(over="ignore"):
        tol = ULP_VS_NUMPY * np.spacing(np.abs(want[fin])).astype(np.float64)
    bad = (err > tol) & (err > ATOL_VS_NUMPY)
    assert not bad.any(), (
        f"{bad.sum()} values beyond {ULP_VS_NUMPY} ulp of numpy's, e.g. {g[bad][:4]} for "
        f"{w[bad][:4]}"
    )
