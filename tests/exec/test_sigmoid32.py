"""The float32 Sigmoid and Swish of the fused epilogues (rill.exec.kernels._conv_loops.sigmoid32):
within 4 ulp of the exact value over float32's whole range (subnormal results included), the
special values right, vectorized; float64, non-contiguous pieces and RILL_JIT=0 keep numpy's
unfused chain bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sigmoid_bound import ulp_error

from rill.exec.kernels import jit
from rill.exec.kernels.fused_conv_kernels import extra_activation

pytestmark = pytest.mark.skipif(jit.loops() is None, reason="numba is not available")

BOUND_ULP = 4


def _loops():
    from rill.exec.kernels import _conv_loops

    return _conv_loops


def _exact(x: np.ndarray, swish: bool) -> np.ndarray:
    """Sigmoid / Swish in float64 (exp(-|x|), no cancellation), float32 x's exact value to
    about 1e-16 relative."""
    with np.errstate(all="ignore"):
        d = x.astype(np.float64)
        e = np.exp(-np.abs(d))
        s = np.where(d >= 0, 1 / (1 + e), e / (1 + e))
        return d * s if swish else s


def _all_float32(step: int) -> np.ndarray:
    """Every step-th float32 bit pattern, and dense runs where the formula changes: around 0,
    the subnormal inputs, and the tails where the result becomes subnormal, 0 or x itself."""
    spread = np.arange(0, 1 << 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = [
        np.linspace(-130, -80, 20001, dtype=np.float32),
        np.linspace(-20, 20, 40001, dtype=np.float32),
        np.linspace(80, 130, 2001, dtype=np.float32),
        np.arange(0, 4000, dtype=np.uint32).view(np.float32),  # subnormals
        -np.arange(0, 4000, dtype=np.uint32).view(np.float32),
    ]
    return np.concatenate([spread, *dense])


@pytest.mark.parametrize("swish", [False, True], ids=["Sigmoid", "Swish"])
def test_within_the_bound_over_the_whole_range(swish):
    x = _all_float32(4099)
    got = x.copy()
    _loops().sigmoid32_flat(got, swish, 0, x.size)
    exact = _exact(x, swish)
    nan = np.isnan(exact)  # NaN inputs, and Swish(-inf)
    np.testing.assert_array_equal(np.isnan(got), nan)
    fin = np.isfinite(exact)
    err = ulp_error(got[fin], exact[fin])
    assert err.max() <= BOUND_ULP, (err.max(), x[fin][np.argmax(err)])
    inf = ~fin & ~nan
    np.testing.assert_array_equal(got[inf], exact[inf].astype(np.float32))
    # Results that are subnormal (Sigmoid for -103 < x < -87) are as close, in their ulp.
    sub = fin & (np.abs(exact) < 2.0**-126) & (exact != 0)
    assert sub.sum() > 1000 and err[sub[fin]].max() <= BOUND_ULP


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, -121.0, -1e30, 1e30], np.float32)
    sig, sw = x.copy(), x.copy()
    _loops().sigmoid32_flat(sig, False, 0, x.size)
    _loops().sigmoid32_flat(sw, True, 0, x.size)
    np.testing.assert_array_equal(sig, [0.5, 0.5, 1, 0, 0.5, 0.5, 0, 0, 1])
    np.testing.assert_array_equal(sw[[0, 1, 2, 6, 7, 8]], np.float32([0, 0, np.inf, 0, 0, 1e30]))
    assert np.isnan(sw[3])  # -inf · sigmoid(-inf) = -inf · 0, as in the unfused chain
    assert np.signbit(sw[[1, 5, 6, 7]]).all() and not np.signbit(sw[[0, 4]]).any()
    np.testing.assert_array_equal(sw[4:6], np.float32([1e-45, -1e-45]) * np.float32(0.5))
    # A quiet NaN comes back as itself, payload and sign included; a signaling one quieted
    # (its payload kept), as IEEE arithmetic (numpy's unfused chain) returns it.
    nans = np.array([0x7FC00001, 0xFFC00123, 0x7F800005], np.uint32).view(np.float32)
    want = np.array([0x7FC00001, 0xFFC00123, 0x7FC00005], np.uint32)
    for swish in (False, True):
        out = nans.copy()
        _loops().sigmoid32_flat(out, swish, 0, nans.size)
        np.testing.assert_array_equal(out.view(np.uint32), want)
        # and inside a run the vector loops take (its four quarters side by side)
        run = np.linspace(-8, 8, 203, dtype=np.float32)
        at = [0, 7, 51, 60, 102, 130, 160, 199, 202]
        run[at] = np.resize(nans, len(at))
        _loops().sigmoid32_flat(run, swish, 0, run.size)
        np.testing.assert_array_equal(run[at].view(np.uint32), np.resize(want, len(at)))
        assert not np.isnan(np.delete(run, at)).any()


@pytest.mark.parametrize("swish", [False, True], ids=["Sigmoid", "Swish"])
def test_planes_add_the_bias_then_activate(swish):
    rng = np.random.default_rng(7)
    planes = (rng.standard_normal((6, 37)) * 30).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    want_in = planes + np.tile(bias, 2)[:, None]
    for b in (bias, bias[:0]):
        p = planes.copy()
        _loops().sigmoid32_planes(p, b, swish, 1, 5)  # rows [1, 5) only
        v = want_in if b.size else planes
        np.testing.assert_array_equal(p[[0, 5]], planes[[0, 5]])
        assert ulp_error(p[1:5], _exact(v[1:5], swish)).max() <= BOUND_ULP


def _numpy_chain(a: np.ndarray, swish: bool) -> np.ndarray:
    one = a.dtype.type(1)
    with np.errstate(all="ignore"):
        s = np.reciprocal(np.exp(np.negative(a)) + one)
        return a * s if swish else s


@pytest.mark.parametrize("name", ["Sigmoid", "Swish"])
def test_extra_activation_paths(name):
    swish = name == "Swish"
    rng = np.random.default_rng(3)
    apply = extra_activation(name)
    base = (rng.standard_normal((4, 8, 9)) * 20).astype(np.float32)
    # Contiguous float32: the compiled pass, within the bound.
    a = base.copy()
    apply(a)
    assert ulp_error(a, _exact(base, swish)).max() <= BOUND_ULP
    # A non-contiguous piece and float64 keep numpy's chain, bit for bit.
    b = base.copy()
    view = b[:, ::2, 1:]
    want = _numpy_chain(view.copy(), swish)
    with np.errstate(all="ignore"):
        apply(view)
    np.testing.assert_array_equal(view, want)
    d = base.astype(np.float64)
    want = _numpy_chain(d.copy(), swish)
    with np.errstate(all="ignore"):
        apply(d)
    np.testing.assert_array_equal(d, want)
    # RILL_JIT=0 (the loops off): numpy's chain for float32 too.
    old = jit.set_enabled(False)
    try:
        c = base.copy()
        with np.errstate(all="ignore"):
            apply(c)
    finally:
        jit.set_enabled(old)
    np.testing.assert_array_equal(c, _numpy_chain(base, swish))


def test_the_loop_vectorizes():
    # Branch-free by design: LLVM's loop vectorizer turns the loop into vector arithmetic (a
    # branch or a libm call in it would keep it scalar, several times slower).
    import numba

    cached = _loops().sigmoid32_flat  # numba shows no code for a loop loaded from its cache
    opts = {k: v for k, v in cached.targetoptions.items() if k != "nopython"}
    fn = numba.njit(cached.py_func, **opts, cache=False)
    x = np.ones(16, np.float32)
    fn(x, True, 0, 16)
    sig = [s for s in fn.signatures if str(s[0].dtype) == "float32"][0]
    ir = fn.inspect_llvm(sig)
    assert re.search(r"fdiv[\w ]*<(4|8|16) x float>", ir)  # the division on vectors
    assert "gather" not in ir and "scatter" not in ir  # contiguous vector loads and stores


@pytest.mark.parametrize("swish", [False, True], ids=["Sigmoid", "Swish"])
def test_span_activates_one_band_of_one_image(swish):
    # conv_nchw's bands: elements [lo, hi) of every channel plane of image b, nothing else.
    rng = np.random.default_rng(11)
    out = (rng.standard_normal((2, 3, 4, 5)) * 30).astype(np.float32)
    before = out.copy()
    _loops().sigmoid32_span(out, 1, swish, 5, 15)
    flat, ref = out.reshape(2, 3, 20), before.reshape(2, 3, 20)
    assert ulp_error(flat[1, :, 5:15], _exact(ref[1, :, 5:15], swish)).max() <= BOUND_ULP
    np.testing.assert_array_equal(flat[0], ref[0])
    np.testing.assert_array_equal(flat[1, :, :5], ref[1, :, :5])
    np.testing.assert_array_equal(flat[1, :, 15:], ref[1, :, 15:])


def _sig():
    from rill.exec.kernels import _sigmoid_loops

    return _sigmoid_loops


def _ordinary_values() -> np.ndarray:
    """Float32 values from -87 (ORDINARY_LOW) up: every 257th bit pattern of [-87, -0] and of
    [0, inf], dense runs where sigmoid32 switches its scaling (|x| near 44.36) and near -87,
    subnormal inputs, +inf and positive NaNs."""
    neg = np.arange(0x80000000, 0xC2AE0001, 257, dtype=np.uint64).astype(np.uint32)
    pos = np.arange(0, 0x7F800001, 257, dtype=np.uint64).astype(np.uint32)
    dense = [
        np.linspace(-87, -80, 20001, dtype=np.float32),
        np.linspace(-46, -42, 20001, dtype=np.float32),
        np.linspace(42, 90, 20001, dtype=np.float32),
        np.float32([-87.0, np.inf, 0.0, -0.0, 1e-45, -1e-45]),
        np.array([0x7FC00001, 0x7F800005], np.uint32).view(np.float32),
    ]
    return np.concatenate([neg.view(np.float32), pos.view(np.float32), *dense])


@pytest.mark.parametrize("swish", [False, True], ids=["Sigmoid", "Swish"])
def test_ordinary_runs_have_the_tail_handling_paths_bits(swish):
    # A run with no value below -87 takes the lean formula; one more value below sends the
    # whole run through sigmoid32 itself. Both give the same bits for every value of the run.
    x = _ordinary_values()
    assert _sig().ordinary(x)
    lean = x.copy()
    _loops().sigmoid32_flat(lean, swish, 0, x.size)
    full = np.concatenate([x, np.float32([-100.0])])
    assert not _sig().ordinary(full)
    _loops().sigmoid32_flat(full, swish, 0, full.size)
    np.testing.assert_array_equal(lean.view(np.uint32), full[:-1].view(np.uint32))
    # And the lean run is within the bound of the exact value.
    exact = _exact(x, swish)
    fin = np.isfinite(exact)
    assert ulp_error(lean[fin], exact[fin]).max() <= BOUND_ULP


def test_what_counts_as_ordinary():
    below = np.nextafter(np.float32(-87.0), np.float32(-np.inf))
    neg_nan = np.array([0xFFC00001], np.uint32).view(np.float32)[0]
    pos_nan = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    for v, want in [(-87.0, True), (below, False), (-np.inf, False), (neg_nan, False),
                    (pos_nan, True), (np.inf, True), (-0.0, True), (3.0e38, True)]:  # fmt: skip
        run = np.float32([1.0, v, -2.0])
        assert _sig().ordinary(run) is want, v
        assert _sig().ordinary(run[:1])  # only the run looked at counts
    # A planes call looks at its own rows only: a low value outside [lo, hi) leaves the lean
    # formula to the rows inside, which get the same bits as alone.
    rng = np.random.default_rng(5)
    planes = (rng.standard_normal((4, 9)) * 30).astype(np.float32)
    planes[0, 3] = -500.0
    for swish in (False, True):
        p = planes.copy()
        _loops().sigmoid32_planes(p, planes[0, :0], swish, 1, 4)
        alone = planes[1:].copy().reshape(-1)
        _loops().sigmoid32_flat(alone, swish, 0, alone.size)
        np.testing.assert_array_equal(p[1:].reshape(-1).view(np.uint32), alone.view(np.uint32))
        np.testing.assert_array_equal(p[0], planes[0])
