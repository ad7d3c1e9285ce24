"""The program's own exp and GELU (rill.mobile.kernels._program_math: range reduction and
polynomials, no libm call, so the loops vectorise) against float64 references over float32's
whole range: large |x|, ±inf, NaN, -0, subnormal inputs and outputs; SOFTMAX rows of many
lengths. The float32 results must be within a few units in the last place of the correctly
rounded ones — far inside the 1e-5 relative agreement with LiteRT the fixtures ask."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mobile.kernel_testing import fp
from mobile.tflite_builder import OPTIONS, single_op

from rill.mobile.interpreter import Interpreter

pytest.importorskip("numba")
OPTIONS.setdefault("GELU", "GeluOptions")
TINY = float(np.finfo(np.float32).tiny)


pytestmark = pytest.mark.usefixtures("programs_on")


def _program(name, x, options=None):
    """Runs one operator on x as a program (asserting it became one)."""
    it = Interpreter(model_content=single_op(name, [fp(*x.shape)], [fp(*x.shape)], options))
    it.allocate_tensors()
    assert it._main.program is not None
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _values() -> np.ndarray:
    rng = np.random.default_rng(19)
    f32 = np.finfo(np.float32)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, f32.tiny, -f32.tiny, 1e-45, -1e-45, 3e-40,
               -3e-40, 1e-8, -1e-8, 88.72, 88.7228, 88.73, 89.0, -87.3, -103.9, -104.0, -150.0,
               5.0, -5.0, 10.0, -10.0, 13.0, -13.0, 14.0, -14.0, 20.0, -20.0, 3e38, -3e38,
               f32.max, -f32.max]  # fmt: skip
    mags = np.exp(rng.uniform(-100.0, 88.0, 20000)) * rng.choice([-1.0, 1.0], 20000)
    return np.concatenate([special, rng.uniform(-110.0, 100.0, 20000),
                           rng.standard_normal(20000) * 4, mags]).astype(np.float32)  # fmt: skip


def _agree(got: np.ndarray, want: np.ndarray, ulps: int) -> None:
    """got equals want (float64, rounded here to float32) to `ulps` units in the last place,
    with the same NaNs, infinities, zeros and signs."""
    with np.errstate(over="ignore"):  # float64 beyond float32's range rounds to ±inf
        want32 = want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32))
    ok = ~np.isnan(want32)
    g, w = got[ok], want32[ok]
    np.testing.assert_array_equal(np.isinf(g), np.isinf(w))
    np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
    assert np.array_equal(np.signbit(g), np.signbit(w)), "sign differs"
    finite = np.isfinite(w)
    with np.errstate(over="ignore"):  # one unit in the last place (subnormal ones too)
        step = np.spacing(np.abs(w[finite])).astype(np.float64)
    step[np.isinf(step)] = 2.0**104  # float32's largest value's unit
    err = np.abs(g[finite].astype(np.float64) - w[finite].astype(np.float64))
    worst = int(np.argmax(err / step)) if err.size else 0
    assert np.all(err <= ulps * step), (
        g[finite][worst],
        w[finite][worst],
        err[worst] / step[worst],
    )


def test_exp_over_the_whole_range():
    x = _values()
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    _agree(_program("EXP", x.reshape(1, -1)).ravel(), want, 1)


def test_logistic_over_the_whole_range():
    x = _values()
    with np.errstate(over="ignore"):
        want = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    _agree(_program("LOGISTIC", x.reshape(1, -1)).ravel(), want, 1)


def test_gelu_over_the_whole_range():
    x = _values()
    want = np.array([0.5 * v * math.erfc(-v * math.sqrt(0.5)) if math.isfinite(v) else
                     (v if v > 0 or v != v else math.nan)  # -inf · 0: NaN, as 0.5·x·(1+erf)
                     for v in x.astype(np.float64)])  # fmt: skip
    got = _program("GELU", x.reshape(1, -1)).ravel()
    _agree(got, want, 2)
    assert np.isnan(got[3]) and got[1] == 0.0 and np.signbit(got[1])  # -inf and -0


@pytest.mark.parametrize("beta", [1.0, 0.125, 3.0])
def test_softmax_rows_of_many_lengths(beta):
    rng = np.random.default_rng(7)
    for depth in [1, 3, 8, 9, 17, 33, 100, 257]:
        x = (rng.standard_normal((3, depth)) * rng.choice([0.1, 5.0, 40.0])).astype(np.float32)
        x[0, :: max(1, depth // 3)] -= 200.0  # terms that underflow to 0 or subnormals
        # (x − max)·beta is float32 arithmetic in LiteRT's kernels and rill's alike; from there on
        # the reference is float64
        d = (x - x.max(-1, keepdims=True)) * np.float32(beta)
        e = np.exp(d.astype(np.float64))
        want = e / e.sum(-1, keepdims=True)
        got = _program("SOFTMAX", x, {"beta": beta})
        big = want >= TINY
        np.testing.assert_allclose(got[big], want[big], rtol=2e-6)
        assert np.all(np.abs(got[~big] - want[~big]) <= 4 * 2.0**-149)
