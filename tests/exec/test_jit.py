"""The compiled loops (rill.exec.kernels.jit): each kernel gives bit-for-bit the results of its
numpy path, including NaN, infinite, signed-zero and tied values, and the switch turns them off."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from rill.exec.kernels import jit
from rill.exec.kernels import optimizer_steps as steps
from rill.exec.kernels import pool_kernels as pk
from rill.exec.kernels import training_kernels as tk

pytestmark = pytest.mark.skipif(jit.loops() is None, reason="numba is not installed")

RNG = np.random.default_rng(11)


@pytest.fixture
def both_paths():
    """Calls fn() with the compiled loops off, then on; returns both results."""
    old = jit.enabled()

    def run(fn):
        out = []
        for on in (False, True):
            jit.set_enabled(on)
            with np.errstate(all="ignore"):
                out.append(fn())
        return out

    yield run
    jit.set_enabled(old)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def assert_bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(_bits(a), _bits(b))


def _awkward(shape, dtype):
    """Values with NaN, ±inf, ±0 and many ties (few distinct values)."""
    x = RNG.integers(-3, 4, size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = -0.0
    flat[5::13] = np.inf
    flat[9::17] = -np.inf
    return x


CASES = [
    # shape, ksize, strides, padding
    ((4, 8, 8, 16), (2, 2), (2, 2), "VALID"),
    ((3, 9, 10, 5), (2, 2), (2, 2), "VALID"),  # the last row and column are in no window
    ((2, 12, 12, 3), (3, 3), (3, 3), "SAME"),
    ((2, 6, 9, 4), (1, 3), (1, 3), "VALID"),
    ((2, 7, 7, 8), (3, 3), (2, 2), "VALID"),  # overlapping windows (the forward only)
    ((64, 14, 14, 64), (2, 2), (2, 2), "SAME"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ksize,strides,padding", CASES)
def test_max_pool_and_gradients_match_numpy(both_paths, dtype, shape, ksize, strides, padding):
    k, s = [1, *ksize, 1], [1, *strides, 1]
    x = _awkward(shape, dtype)
    fwd = pk.max_pool(k, s, padding, [], "NHWC")
    plain, fused = both_paths(lambda: fwd(x))
    assert_bits_equal(plain, fused)
    g = RNG.standard_normal(plain.shape).astype(dtype)
    g.reshape(-1)[::5] = np.inf
    g.reshape(-1)[2::9] = -g.reshape(-1)[2::9]
    for kernel in (pk.max_pool_grad, pk.fused_max_pool_grad):
        grad = kernel(k, s, padding, [], "NHWC")
        a, b = both_paths(lambda grad=grad: grad(x, plain, g))
        assert_bits_equal(a, b)


def test_max_pool_gradient_routes_to_the_first_maximum(both_paths):
    x = np.array([[1, 3], [3, 2]], np.float32).reshape(1, 2, 2, 1)
    g = np.array([5], np.float32).reshape(1, 1, 1, 1)
    grad = pk.max_pool_grad([1, 2, 2, 1], [1, 2, 2, 1], "VALID", [], "NHWC")
    for dx in both_paths(lambda: grad(x, None, g)):
        np.testing.assert_array_equal(dx.reshape(2, 2), [[0, 5], [0, 0]])


def test_fused_gradient_masks_non_positive_maxima(both_paths):
    x = np.array([[-1, -3], [-2, -4]], np.float32).reshape(1, 2, 2, 1)
    g = np.array([-np.inf], np.float32).reshape(1, 1, 1, 1)
    grad = pk.fused_max_pool_grad([1, 2, 2, 1], [1, 2, 2, 1], "VALID", [], "NHWC")
    for dx in both_paths(lambda: grad(x, None, g)):
        assert np.isnan(dx[0, 0, 0, 0])  # ReluGrad's -inf * 0, as the unfused ops give
        np.testing.assert_array_equal(dx.reshape(-1)[1:], [0, 0, 0])


def test_non_contiguous_input_is_read_correctly(both_paths):
    base = _awkward((2, 8, 8, 6), np.float32)
    x = base[..., ::2]
    fwd = pk.max_pool([1, 2, 2, 1], [1, 2, 2, 1], "VALID", [], "NHWC")
    a, b = both_paths(lambda: fwd(x))
    assert_bits_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_update_matches_numpy(both_paths, dtype, nesterov):
    n = 3 * tk._CHUNK + 17  # chunks of both paths, and a ragged tail
    g = RNG.standard_normal(n).astype(dtype)
    v0 = RNG.standard_normal(n).astype(dtype)
    a0 = RNG.standard_normal(n).astype(dtype)
    g[::1001] = np.inf
    a0[7::999] = np.nan
    hyper = (dtype(0.01), dtype(0.9), nesterov)

    def update():
        v, a = v0.copy(), a0.copy()
        out = tk._apply_dense(steps.momentum, g, [v, a], hyper)
        assert out[0] is v and out[1] is a  # written in place
        return v, a

    (v1, a1), (v2, a2) = both_paths(update)
    assert_bits_equal(v1, v2)
    assert_bits_equal(a1, a2)
    assert not np.array_equal(v1, v0)


def test_gradient_descent_matches_numpy(both_paths):
    n = 2 * tk._CHUNK + 5
    g = RNG.standard_normal(n).astype(np.float32)
    v0 = RNG.standard_normal(n).astype(np.float32)
    a, b = both_paths(
        lambda: tk._apply_dense(steps.gradient_descent, g, [v0.copy()], (np.float32(0.3),))[0]
    )
    assert_bits_equal(a, b)


def test_mixed_precision_hyperparameters_keep_the_numpy_path():
    g = np.ones(tk._CHUNK * 2, np.float32)
    assert tk._compiled(steps.momentum, g.dtype, (np.float64(0.1), np.float32(0.9), False)) is None
    assert tk._compiled(steps.momentum, g.dtype, (np.float32(0.1), np.float32(0.9), False))


def test_turned_off_by_the_environment():
    code = "from rill.exec.kernels import jit; print(jit.loops() is None)"
    env = dict(os.environ, RILL_JIT="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("act", [None, "Relu", "Relu6"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_conv_epilogue_matches_numpy(both_paths, act, dtype):
    from rill.exec.kernels import fused_kernels as fk

    ops = ["BiasAdd"] if act is None else ["BiasAdd", act]
    conv = fk.fused_conv2d([1] * 4, "SAME", [], "NHWC", [1] * 4, ops, 1, 0.2, "HWIO", 0)
    x = _awkward((3, 10, 10, 4), dtype)
    x[np.isnan(x)] = 1  # NaN products come from the bias below
    w = RNG.integers(-2, 3, size=(3, 3, 4, 8)).astype(dtype)
    bias = np.array([0, -0.0, np.nan, 6, -6, np.inf, 1, -1], dtype)
    a, b = both_paths(lambda: conv(x, w, bias))
    assert_bits_equal(a, b)
    if act is not None:
        assert (a[~np.isnan(a)] >= 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("update_slots", [True, False])
@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("n", [37, 2 * tk._CHUNK + 9])
def test_adagrad_update_matches_numpy(both_paths, dtype, update_slots, v2, n):
    g = RNG.standard_normal(n).astype(dtype)
    v0 = RNG.standard_normal(n).astype(dtype)
    a0 = np.abs(RNG.standard_normal(n)).astype(dtype)
    g[::13] = 0
    a0[::17] = 0  # 0 / 0 is NaN, as in TensorFlow
    step = steps.adagrad_v2 if v2 else steps.adagrad
    hyper = (dtype(0.1), dtype(1e-7), update_slots) if v2 else (dtype(0.1), update_slots)

    def update():
        v, a = v0.copy(), a0.copy()
        tk._apply_dense(step, g, [v, a], hyper)
        return v, a

    (v1, a1), (v2_, a2) = both_paths(update)
    assert_bits_equal(v1, v2_)
    assert_bits_equal(a1, a2)
    assert not np.array_equal(v1, v0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("n", [37, 2 * tk._CHUNK + 9])
def test_adam_update_matches_numpy(both_paths, dtype, nesterov, n):
    g = RNG.standard_normal(n).astype(dtype)
    v0 = RNG.standard_normal(n).astype(dtype)
    m0 = RNG.standard_normal(n).astype(dtype)
    s0 = np.abs(RNG.standard_normal(n)).astype(dtype)
    g[::11] = np.inf
    hyper = (dtype(0.9**3), dtype(0.999**3), dtype(1e-3), dtype(0.9), dtype(0.999), dtype(1e-7))

    def update():
        v, m, s = v0.copy(), m0.copy(), s0.copy()
        tk._apply_dense(steps.adam, g, [v, m, s], (*hyper, nesterov))
        return v, m, s

    first, second = both_paths(update)
    for a, b in zip(first, second):
        assert_bits_equal(a, b)
    assert not np.array_equal(first[0], v0)


def test_fused_conv_with_a_wrong_bias_names_it(both_paths):
    from rill.exec.kernels import fused_kernels as fk
    from rill.graph.errors import InvalidArgumentError

    conv = fk.fused_conv2d([1] * 4, "SAME", [], "NHWC", [1] * 4, ["BiasAdd", "Relu"], 1, 0.2,
                           "HWIO", 0)  # fmt: skip
    x = np.ones((2, 6, 6, 3), np.float32)
    w = np.ones((3, 3, 3, 4), np.float32)
    for on in (False, True):
        jit.set_enabled(on)
        with pytest.raises(InvalidArgumentError, match=r"bias has shape \[5\].*_FusedConv2D"):
            conv(x, w, np.zeros(5, np.float32))


# -- row scatter-adds (UnsortedSegmentSum, ResourceScatterAdd/Sub, ScatterAdd/Sub) ------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("subtract", [False, True])
@pytest.mark.parametrize("rest", [(), (5,), (3, 4)])
def test_row_scatter_matches_ufunc_at_with_repeated_rows(both_paths, dtype, subtract, rest):
    from rill.exec.kernels.scatter_rows import add_rows_at

    out0 = _awkward((9, *rest), dtype)
    rows = _awkward((40, *rest), dtype) * dtype(1.5)
    idx = RNG.integers(0, 9, 40)  # every row of out hit several times, in a mixed order

    def scatter():
        out = out0.copy()
        add_rows_at(out, idx, rows, subtract=subtract)
        return out

    a, b = both_paths(scatter)
    ref = out0.copy()
    (np.subtract if subtract else np.add).at(ref, idx, rows)
    assert_same_but_nan_sign(a, ref)
    assert_same_but_nan_sign(b, ref)


def assert_same_but_nan_sign(a, b):
    """Bit-equal but for the sign of a NaN (an inf - inf made by the compiled loop carries the
    processor's default NaN, numpy's ufunc.at a positive one): NaN where the other has NaN."""
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    keep = ~np.isnan(a)
    assert_bits_equal(a[keep], b[keep])


def test_row_scatter_falls_back_for_other_dtypes_and_broadcast_updates(both_paths):
    from rill.exec.kernels.scatter_rows import add_rows_at

    idx = np.array([2, 0, 2], np.int32)
    for out0, rows in (
        (np.arange(12, dtype=np.int32).reshape(4, 3), np.ones((3, 3), np.int32)),
        (np.zeros((4, 3), np.float32), np.float32(2.0)),  # a scalar update
        (np.zeros((4, 3), np.float32), np.ones((3, 3), np.float64)),  # another dtype
    ):
        ref = out0.copy()
        np.add.at(ref, idx, rows)
        for got in both_paths(
            lambda out0=out0, rows=rows: _scattered(add_rows_at, out0, idx, rows)
        ):
            np.testing.assert_array_equal(got, ref)


def _scattered(add_rows_at, out0, idx, rows):
    out = out0.copy()
    add_rows_at(out, idx, rows)
    return out


def test_unsorted_segment_sum_and_scatter_kernels_match_ufunc_at(both_paths):
    from rill.exec.kernels.grad_kernels import unsorted_segment_sum

    data = _awkward((64, 8), np.float32)
    ids = RNG.integers(-1, 20, 64).astype(np.int32)  # -1: dropped, as in TensorFlow
    uss = unsorted_segment_sum(np)
    a, b = both_paths(lambda: uss(data, ids, np.int32(20)))
    ref = np.zeros((20, 8), np.float32)
    keep = ids >= 0
    np.add.at(ref, ids[keep], data[keep])
    assert_same_but_nan_sign(a, ref)
    assert_same_but_nan_sign(b, ref)
