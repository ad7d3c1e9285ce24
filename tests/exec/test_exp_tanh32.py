"""The float32 exp and tanh of the compiled paths (rill.exec.kernels._exp_tanh_loops): within 2
ulp of the exact value over float32's whole range (subnormal results, overflow and the
thresholds between their formulas included), the special values right; the Exp and Tanh
kernels give them for float32 with the compiled loops on, numpy's values with them off and for
every other dtype."""

from __future__ import annotations

import numpy as np
import pytest
from sigmoid_bound import ulp_error

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.kernels import jit
from rill.exec.testing import run_kernel

pytestmark = pytest.mark.skipif(jit.exp_tanh() is None, reason="the compiled loops are off")

BOUND_ULP = 2
RNG = np.random.default_rng(32)


def _mod():
    return jit.exp_tanh()


def _all_float32(step: int, dense) -> np.ndarray:
    """Every step-th float32 bit pattern, the subnormals' first 4000, and dense runs."""
    spread = np.arange(0, 1 << 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
    tiny = np.arange(0, 4000, dtype=np.uint32).view(np.float32)
    return np.concatenate([spread, tiny, -tiny, *dense])


def _check(name, x, exact_fn):
    got = x.copy()
    getattr(_mod(), name + "32_flat")(got, 0, got.size)
    with np.errstate(all="ignore"):
        exact = exact_fn(x.astype(np.float64))
        r32 = exact.astype(np.float32)
    nan = np.isnan(exact)
    np.testing.assert_array_equal(np.isnan(got), nan)
    fin = np.isfinite(r32)
    # Where the exact value rounds to ±inf in float32, so does the result.
    np.testing.assert_array_equal(got[~fin & ~nan], r32[~fin & ~nan])
    err = ulp_error(got[fin], exact[fin])
    assert err.max() <= BOUND_ULP, (err.max(), x[fin][np.argmax(err)])
    return got, exact, fin, err


def test_exp32_within_the_bound_over_the_whole_range():
    dense = [
        np.linspace(-110, -80, 30001, dtype=np.float32),  # subnormal results, then 0
        np.linspace(-50, 50, 50001, dtype=np.float32),  # 2**n scaled by 2**±64 beyond ±44
        np.linspace(80, 90, 10001, dtype=np.float32),  # overflow from 88.7228
    ]
    x = _all_float32(4099, dense)
    got, exact, fin, err = _check("exp", x, np.exp)
    with np.errstate(over="ignore"):
        sub = fin & (exact < 2.0**-126) & (exact.astype(np.float32) > 0)
    assert sub.sum() > 1000 and err[sub[fin]].max() <= BOUND_ULP
    assert (got[x < -104] == 0).all() and (got[(x > 88.73) & ~np.isnan(x)] == np.inf).all()


def test_tanh32_within_the_bound_over_the_whole_range():
    dense = [
        np.linspace(-1, 1, 100001, dtype=np.float32),  # the polynomial and the formula's seam
        np.linspace(8, 10, 10001, dtype=np.float32),  # where tanh becomes 1
        np.float32(2.0**-12) * np.linspace(0.9, 1.1, 2001, dtype=np.float32),
    ]
    x = _all_float32(4099, dense)
    x = np.concatenate([x, -x])
    got, _, _, _ = _check("tanh", x, np.tanh)
    assert (np.abs(got[~np.isnan(got)]) <= 1).all()
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(x)]), np.signbit(x[~np.isnan(x)]))


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 1e30, -1e30, 9.5, -9.5], np.float32)
    e, t = x.copy(), x.copy()
    _mod().exp32_flat(e, 0, x.size)
    _mod().tanh32_flat(t, 0, x.size)
    np.testing.assert_array_equal(e[:8], np.float32([1, 1, np.inf, 0, 1, 1, np.inf, 0]))
    np.testing.assert_array_equal(t, np.float32([0, -0.0, 1, -1, 1e-45, -1e-45, 1, -1, 1, -1]))
    assert np.signbit(t[[1, 3, 5, 7, 9]]).all() and not np.signbit(t[[0, 2, 4, 6, 8]]).any()
    # A quiet NaN comes back as itself, payload and sign included; a signaling one quieted.
    nans = np.array([0x7FC01234, 0xFFC00005, 0x7F800001], np.uint32)
    for name in ("exp32_flat", "tanh32_flat"):
        v = nans.view(np.float32).copy()
        getattr(_mod(), name)(v, 0, v.size)
        np.testing.assert_array_equal(v.view(np.uint32), [0x7FC01234, 0xFFC00005, 0x7FC00001])


def test_a_range_is_applied_in_place_and_nothing_past_it():
    x = (RNG.standard_normal(1000) * 4).astype(np.float32)
    for name, ref in (("exp32_flat", np.exp), ("tanh32_flat", np.tanh)):
        v = x.copy()
        getattr(_mod(), name)(v, 13, 987)
        np.testing.assert_array_equal(v[:13], x[:13])
        np.testing.assert_array_equal(v[987:], x[987:])
        np.testing.assert_allclose(v[13:987], ref(x[13:987].astype(np.float64)), rtol=3e-7)


def _kernel(op_type, x):
    with rg.Graph().as_default() as g:
        p = rg.placeholder(rg.as_dtype(x.dtype))
        op = g.create_op(op_type, [p], {})
        (out,) = run_kernel(op, x)
    return out


@pytest.mark.parametrize("op_type, name, ufunc", [("Exp", "exp32_flat", np.exp),
                                                  ("Tanh", "tanh32_flat", np.tanh)])  # fmt: skip
@pytest.mark.parametrize("shape", [(7,), (3, 50, 1001), (0, 4), ()])
def test_the_float32_kernels_give_these_values_and_numpys_with_the_loops_off(
    op_type, name, ufunc, shape
):
    x = (RNG.standard_normal(shape) * 5).astype(np.float32)
    want = np.array(x)
    getattr(_mod(), name)(want.reshape(-1), 0, want.size)
    with np.errstate(all="ignore"):
        got = _kernel(op_type, x)
        strided = _kernel(op_type, x.T) if x.ndim > 1 else got
        assert got.dtype == np.float32 and got.shape == shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(strided, want.T)
        old = jit.set_enabled(False)
        try:
            np.testing.assert_array_equal(_kernel(op_type, x), ufunc(x))
        finally:
            jit.set_enabled(old)
        x64 = x.astype(np.float64)
        np.testing.assert_array_equal(_kernel(op_type, x64), ufunc(x64))
