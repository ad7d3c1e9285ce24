"""The fixed-point helpers against a plain-Python transcription of the reference kernels'
definitions (C integer semantics written out with Python's unbounded ints), and the exact
float64 output stage against the int64 one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rill.mobile.quant import (
    Requantizer,
    activation_range_quantized,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)


def _c_div(a: int, b: int) -> int:  # C's truncating division
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _srdhm(a: int, b: int) -> int:
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    return _c_div(ab + nudge, 2**31)


def _rdbp(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _mbqm(x: int, m0: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return _rdbp(_srdhm(x * (1 << left), m0), right)


def _quantize_multiplier(m: float) -> tuple[int, int]:
    if m == 0:
        return 0, 0
    q, shift = math.frexp(m)
    q_fixed = int(math.floor(abs(q) * 2**31 + 0.5)) * (1 if q > 0 else -1)
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


MULTIPLIERS = [0.5, 0.3, 1e-3, 2.7, 1.0, 0.999999999, 1.23e-5, 1 / 3, 0.0078125, 1e-11, 7.9]


@pytest.mark.parametrize("m", MULTIPLIERS)
def test_quantize_multiplier(m):
    assert quantize_multiplier(m) == _quantize_multiplier(m)
    m0, shift = quantize_multiplier(m)
    if m0:
        assert 2**30 <= m0 < 2**31
        assert abs(m0 * 2.0 ** (shift - 31) - m) <= m * 2**-30


def test_quantize_multiplier_rounding_up_to_two_pow_31():
    # q · 2^31 rounds to 2^31 exactly: M0 is halved and the shift grows.
    m = 1.0 - 2**-40
    assert quantize_multiplier(m) == (2**30, 1)


@pytest.mark.parametrize("m", MULTIPLIERS)
def test_multiply_by_quantized_multiplier(m):
    rng = np.random.default_rng(1)
    m0, shift = quantize_multiplier(m)
    xs = np.concatenate([rng.integers(-(2**24), 2**24, 3000), np.arange(-2048, 2048)])
    if m > 1:
        xs = xs // 64  # keep x · 2^left within int32, as the reference kernels' inputs are
    want = np.array([_mbqm(int(x), m0, shift) for x in xs])
    np.testing.assert_array_equal(multiply_by_quantized_multiplier(xs, m0, shift), want)
    acc = xs.astype(np.int64)
    Requantizer([m], 0, -(2**40), 2**40).apply(acc, np.empty_like(acc))
    np.testing.assert_array_equal(acc, want)


def test_requantizer_per_channel_with_zero_point_and_clamp():
    rng = np.random.default_rng(2)
    ms = np.array([0.3, 1e-12, 2.7, 0.001, 0.5])
    x = rng.integers(-(2**18), 2**18, (400, 5))
    r = Requantizer(ms, 7, -128, 127)
    acc = x.astype(np.int64)
    r.apply(acc, np.empty_like(acc))
    for c, m in enumerate(ms):
        m0, shift = quantize_multiplier(m)
        want = np.clip([_mbqm(int(v), m0, shift) + 7 for v in x[:, c]], -128, 127)
        np.testing.assert_array_equal(acc[:, c], want)


def test_ties_round_half_up_then_half_away_from_zero():
    # M = 0.5 exactly (M0 = 2^30, shift 0): x·M0/2^31 = x/2, ties go up (toward +inf).
    assert [_mbqm(x, 2**30, 0) for x in (-3, -1, 1, 3)] == [-1, 0, 1, 2]
    np.testing.assert_array_equal(multiply_by_quantized_multiplier([-3, -1, 1, 3], 2**30, 0),
                                  [-1, 0, 1, 2])  # fmt: skip
    # M = 0.25 (shift -1): the second rounding, ties away from zero: ±6/4 = ±1.5 → ±2.
    np.testing.assert_array_equal(multiply_by_quantized_multiplier([-6, -2, 2, 6], 2**30, -1),
                                  [-2, -1, 1, 2])  # fmt: skip


def test_activation_ranges():
    assert activation_range_quantized(0, 0.1, -5) == (-128, 127)
    assert activation_range_quantized(1, 0.1, -5) == (-5, 127)
    assert activation_range_quantized(3, 0.1, -5) == (-5, 55)
    assert activation_range_quantized(2, 0.1, -5) == (-15, 5)
    assert activation_range_quantized(3, 0.01, -128) == (-128, 127)
    with pytest.raises(ValueError, match="TANH"):
        activation_range_quantized(4, 0.1, 0)


@pytest.fixture
def numpy_only():
    """The numpy paths (the compiled output stage is tested in test_jit.py)."""
    from rill.mobile.kernels import jit

    old = jit.set_enabled(False)
    yield
    jit.set_enabled(old)


@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("lo_hi", [(-128, 127), (-20, 127), (5, 60)])
def test_folded_float64_output_stage_equals_int64(lo_hi, single, numpy_only):
    """OutputStage's float64 path (multiplier, roundings and zero point folded into the weights
    and bias, then one floor) against the int64 Requantizer on accumulators within its bound;
    with and without the negative-tie correction (clamp below / above the zero point)."""
    from rill.mobile.kernels.common import OutputStage

    class K:  # a stand-in kernel collecting scratch requests
        def __init__(self):
            self.specs = []

        def scratch(self, shape, dtype):
            self.specs.append((shape, dtype))
            return len(self.specs) - 1

    rng = np.random.default_rng(3)
    lo, hi = lo_hi
    ms = rng.uniform(1e-4, 0.9, 6)
    ms[0] = 1.5  # a left shift
    ms[1] = 0.75  # shift 0: no second rounding
    bound = np.full(6, 2.0**20)
    acc = rng.integers(-(2**20), 2**20, (3000, 6))
    acc[:9, :] = [[v] * 6 for v in (-4, -3, -2, -1, 0, 1, 2, 3, 4)]  # small values, many ties
    # Exact ties of the second rounding: acc·M0/2^31 + 1/2 lands on odd multiples of 2^(r-1).
    k = K()
    stage = OutputStage(k, ms, bound, -7, lo, hi, (3000, 6), single_rounding=single)
    assert stage.folded
    scratch = [np.empty(sh, d) for sh, d in k.specs]
    p = acc.astype(np.float64) * stage.fold + stage.bias_offset
    out = np.empty((3000, 6), np.int8)
    stage.bind(scratch)(p, out)
    want = acc.astype(np.int64)
    Requantizer(ms, -7, lo, hi, single_rounding=single).apply(want, np.empty_like(want))
    np.testing.assert_array_equal(out, want)


def test_output_stage_falls_back_to_int64_beyond_2_53(numpy_only):
    from rill.mobile.kernels.common import OutputStage

    class K:
        def scratch(self, shape, dtype):
            return 0

    stage = OutputStage(K(), [0.3], [2.0**30], 0, -128, 127, (4, 1))
    assert not stage.folded and stage.fold is None
