"""The remapper's tanh-GELU fusion: the chain PyTorch exports for GELU(approximate="tanh") (and
GPT-2's hand-written gelu), 0.5 · (x · (1 + tanh(sqrt(2/pi) · (x + 0.044715 · (x · (x · x)))))),
becomes one _FusedTanhGelu whose results are the unfused chain's bit for bit — with the compiled
loops and without them, in float32 and float64, for NaN, ±inf, ±0 and saturated values — and it
fuses only the exact chain whose intermediates nothing else reads."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import run_both

import rill.graph as rg
from rill.exec.kernels import fused_kernels, jit

RNG = np.random.default_rng(2026)
_A, _B = 0.044715, float(np.sqrt(2.0 / np.pi))


def _op(type_, inputs, attrs=None):
    return rg.get_default_graph().create_op(type_, inputs, attrs or {}).outputs[0]


def _const(v, dtype):
    return rg.constant(np.asarray(v, dtype))


def _gelu(x, dtype, swap=False, a=_A, b=_B, c=1.0, d=0.5, keep=None):
    """The exported chain on x (operands swapped where `swap`); keep collects intermediates."""

    def mul(p, q):
        return _op("Mul", [q, p] if swap else [p, q])

    def add(p, q):
        return _op("AddV2", [q, p] if swap else [p, q])

    m1 = mul(x, mul(x, x))
    inner = mul(_const(b, dtype), add(x, mul(_const(a, dtype), m1)))
    t = _op("Tanh", [inner])
    if keep is not None:
        keep.append(t)
    return mul(_const(d, dtype), mul(x, add(_const(c, dtype), t)))


def _values(shape, dtype):
    x = (RNG.standard_normal(shape) * 3).astype(dtype)
    flat = x.reshape(-1)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 20.0, -20.0]
    flat[: len(special)] = np.asarray(special, dtype)
    return x


def _assert_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan], b[~nan])
    np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 5, 7), (3, 70000), (0, 4)])
def test_the_chain_fuses_and_keeps_its_bits(shape, dtype, swap, compiled):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None] * len(shape), name="x")
        y = _gelu(_op("Identity", [x]), dtype, swap)
    old = jit.set_enabled(compiled)
    try:
        with np.errstate(all="ignore"):
            xv = _values(shape, dtype) if np.prod(shape) else np.zeros(shape, dtype)
            fused, plain, types = run_both(g, y, {x: xv})
    finally:
        jit.set_enabled(old)
    assert types.count("_FusedTanhGelu") == 1 and "Tanh" not in types and "Mul" not in types
    _assert_bits(fused, plain)
    if xv.size:  # and the value is GELU's (to float rounding) where it is finite
        ok = np.isfinite(xv) & (np.abs(xv) < 1e3)
        v = xv[ok].astype(np.float64)
        ref = 0.5 * v * (1 + np.tanh(_B * (v + _A * v**3)))
        np.testing.assert_allclose(np.asarray(fused)[ok], ref, rtol=1e-5, atol=1e-6)


def test_other_coefficients_fuse_as_they_are():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None], name="x")
        y = _gelu(_op("Identity", [x]), np.float32, a=0.05, b=0.8, c=1.5, d=0.25)
    with np.errstate(all="ignore"):
        fused, plain, types = run_both(g, y, {x: _values((1000,), np.float32)})
    assert "_FusedTanhGelu" in types
    _assert_bits(fused, plain)


def test_a_chain_whose_tanh_is_fetched_or_reused_does_not_fuse():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None], name="x")
        keep = []
        y = _gelu(_op("Identity", [x]), np.float32, keep=keep)
        z = _gelu(_op("Identity", [x]), np.float32, keep=[])
        other = _op("Neg", [z.op.inputs[1]])  # a second reader of an intermediate
    xv = _values((64,), np.float32)
    with np.errstate(all="ignore"):
        fused, plain, types = run_both(g, [y, keep[0], z, other], {x: xv})
    assert "_FusedTanhGelu" not in types
    for a, b in zip(fused, plain):
        _assert_bits(a, b)


def test_an_integer_or_half_chain_is_left_alone():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float16, [None], name="x")
        y = _gelu(_op("Identity", [x]), np.float16)
    fused, plain, types = run_both(g, y, {x: np.linspace(-3, 3, 50).astype(np.float16)})
    assert "_FusedTanhGelu" not in types
    _assert_bits(fused, plain)


def test_the_kernel_checks_its_coefficients():
    from rill.graph import dtypes
    from rill.graph.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="4 coefficients"):
        fused_kernels.fused_tanh_gelu(dtypes.float32, [0.5, 1.0])


@pytest.mark.parametrize(
    "dtype, cases",
    [
        # float32: one compiled call a piece of _GELU_GRAIN values or more
        (np.float32, (((197, 1536), 9), ((3, 10000), 0))),
        # float64: _GELU_PIECES_PER_THREAD pieces of three calls or more (ViT-small's [197,
        # 1536] at batch 1 lost split in two)
        (np.float64, (((197, 1536), 0), ((1576, 1536), 4))),
    ],
)
def test_large_inputs_split_over_threads_with_the_same_bits(monkeypatch, dtype, cases):
    """_FusedTanhGelu splits over the intra-op threads only in grains of work large enough;
    every piece is computed the same way on whichever thread, so the bits are the one-thread
    run's. (With no worker polling: where one polls, float32 takes the pool's team instead,
    tests/exec/test_team_kernels.py.)"""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    monkeypatch.setattr(intra_op, "team", lambda: None)
    compute = fused_kernels.fused_tanh_gelu(rg.as_dtype(dtype), [0.044715, 0.7978846, 1.0, 0.5])
    calls = []
    real = fused_kernels.parallel_for

    def watch(n, body, grain=1, pieces_per_thread=1, max_threads=None):
        calls.append(n // grain)
        return real(n, body, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(fused_kernels, "parallel_for", watch)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    for shape, grains in cases:
        with np.errstate(all="ignore"):
            x = _values(shape, dtype)
            monkeypatch.setattr(intra_op, "_THREADS", 1)
            one = compute(x)
            monkeypatch.setattr(intra_op, "_THREADS", 2)
            calls.clear()
            two = compute(x)
        assert calls == [grains]  # whole grains of pieces: 0 and 1 run on one thread
        _assert_bits(two, one)
