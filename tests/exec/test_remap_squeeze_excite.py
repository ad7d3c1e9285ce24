"""The remapper's squeeze-excite fusion: the squeeze of MobileNetV3's and EfficientNet's gate as
imported models spell it (Mean over the planes, then two 1×1 NCHW convolutions, each + bias and
an activation, which the first pass fuses into _FusedConv2D) becomes one _FusedSqueezeExcite
whose gate is bit for bit the one of the Mean and the two _FusedConv2D kernels it replaces (the
remapper with this fusion turned off; a float32 Sigmoid or Swish in _FusedConv2D is itself
within 4 ulp of the unfused chain's, see remap.py) — every activation the fused kernel takes,
float32 and float64, one image (the lean path) and several, with the compiled loops and
without, small inputs and one large enough for the Mean's split — and only that chain fuses."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import run_both as _run_both

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.kernels import fused_conv_kernels, jit, reduction_kernels
from rill.exec.plan import remap
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(2033)
FUSED = "_FusedSqueezeExcite"


def _op(type_, inputs, attrs=None):
    return rg.get_default_graph().create_op(type_, inputs, attrs or {}).outputs[0]


def _const(v, dtype):
    return rg.constant(np.asarray(v, dtype))


def _act(v, name, dtype):
    """The activation as imported models spell it out (remap_activations' chains)."""
    if name in ("", None):
        return v
    if name in ("Relu", "Relu6", "Sigmoid", "LeakyRelu"):
        return _op(name, [v])
    if name == "Swish":
        return _op("Mul", [v, _op("Sigmoid", [v])])
    hard = _op("Mul", [v, _const(1.0 / 6.0, dtype)])
    for t, c in (("AddV2", 0.5), ("Minimum", 1.0), ("Maximum", 0.0)):
        hard = _op(t, [hard, _const(c, dtype)])
    return hard if name == "HardSigmoid" else _op("Mul", [v, hard])


def _conv(x, c, o, dtype, act, k=1, strides=(1, 1)):
    w = rg.constant((RNG.standard_normal((k, k, c, o)) / np.sqrt(c)).astype(dtype))
    b = rg.constant(RNG.standard_normal(o).astype(dtype))
    attrs = {"strides": [1, 1, *strides], "padding": "SAME", "data_format": "NCHW"}
    y = _op("BiasAdd", [_op("Conv2D", [x, w], attrs), b], {"data_format": "NCHW"})
    return _act(y, act, dtype)


def _block(shape, dtype, acts, axes=(2, 3), keep=None, second_k=1, reuse=None):
    """A squeeze-excite block on x [n, c, h, w]: the gate, x · gate, a 1×1 projection."""
    g = rg.Graph()
    c = shape[1]
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, *shape[1:]], name="x")
        xi = _op("Identity", [x])
        m = _op("Mean", [xi, rg.constant(np.asarray(axes, np.int32))], {"keep_dims": True})
        h = _conv(m, c, max(2, c // 4), dtype, acts[0])
        gate = _conv(h, max(2, c // 4), c, dtype, acts[1], k=second_k)
        y = _conv(_op("Mul", [xi, gate]), c, 8, dtype, "")
        extra = []
        if keep == "mean":
            extra = [m]
        elif keep == "first":
            extra = [h]
        elif keep == "gate":
            extra = [gate]
        if reuse is not None:  # another op reads the Mean (or the first product)
            y = _op("AddV2", [y, _op("Sum", [m if reuse == "mean" else h, rg.constant([1, 2, 3])])])
    return g, x, [y, *extra]


def run_both(g, fetches, feeds):
    """(results with the squeeze-excite fusion, results with the remapper's other fusions
    only, op types of the first plan)."""
    fused, _, types = _run_both(g, fetches, feeds)
    real = remap.squeeze_excite
    remap.squeeze_excite = lambda *args: 0
    try:
        plain, _, others = _run_both(g, fetches, feeds)
    finally:
        remap.squeeze_excite = real
    assert FUSED not in others
    return fused, plain, types


def _assert_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


ACTS = [("Relu", "HardSigmoid"), ("Swish", "Sigmoid"), ("", ""), ("Relu6", "HardSwish"),
        ("HardSigmoid", "Swish"), ("Sigmoid", "Relu")]  # fmt: skip


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("acts", ACTS, ids=["-".join(a or "none" for a in p) for p in ACTS])
def test_the_squeeze_fuses_and_keeps_its_bits(acts, dtype, batch, compiled):
    shape = (batch, 24, 7, 9)
    g, x, fetches = _block(shape, dtype, acts)
    xv = (RNG.standard_normal(shape) * 3).astype(dtype)
    old = jit.set_enabled(compiled)
    try:
        fused, plain, types = run_both(g, fetches, {x: xv})
    finally:
        jit.set_enabled(old)
    assert types.count(FUSED) == 1
    assert "Mean" not in types and types.count("_FusedConv2D") == 1  # the projection
    for a, b in zip(fused, plain):
        _assert_bits(a, b)


@pytest.mark.parametrize("shape", [(1, 48, 112, 112), (1, 3, 1, 1), (2, 5, 1, 4)])
def test_large_and_degenerate_planes_keep_the_bits(shape):
    # [1, 48, 112, 112] has more values than one piece of the Mean kernel's row sums
    # (_ROWS_GRAIN), which the fused kernel then leaves to that kernel's split path.
    assert reduction_kernels._ROWS_GRAIN < 48 * 112 * 112
    g, x, fetches = _block(shape, np.float32, ("Relu", "HardSigmoid"))
    xv = RNG.standard_normal(shape).astype(np.float32)
    fused, plain, types = run_both(g, fetches + [fetches[0]], {x: xv})
    assert types.count(FUSED) == 1
    for a, b in zip(fused, plain):
        _assert_bits(a, b)


@pytest.mark.parametrize("axes", [(2, 3), (-1, -2)])
def test_a_fetched_gate_is_the_fused_op(axes):
    g, x, fetches = _block((1, 16, 5, 5), np.float32, ("Relu", "Sigmoid"), axes, keep="gate")
    xv = RNG.standard_normal((1, 16, 5, 5)).astype(np.float32)
    fused, plain, types = run_both(g, fetches, {x: xv})
    assert types.count(FUSED) == 1
    assert fused[1].shape == (1, 16, 1, 1)
    for a, b in zip(fused, plain):
        _assert_bits(a, b)


@pytest.mark.parametrize(
    "case",
    [
        {"keep": "mean"},  # the Mean fetched
        {"keep": "first"},  # the first product's value fetched
        {"reuse": "mean"},  # another op reads the Mean
        {"reuse": "first"},  # another op reads the first product
        {"axes": (2,)},  # the rows only
        {"second_k": 3},  # the second filter is not 1×1
        {"acts": ("LeakyRelu", "Sigmoid")},  # an activation the fused kernel does not take
    ],
    ids=[
        "fetched-mean",
        "fetched-first",
        "read-mean",
        "read-first",
        "rows-only",
        "3x3",
        "leaky",
    ],  # fmt: skip
)
def test_only_the_squeeze_chain_fuses(case):
    shape = (1, 8, 4, 4)
    acts = case.pop("acts", ("Relu", "HardSigmoid"))
    g, x, fetches = _block(shape, np.float32, acts, **case)
    xv = RNG.standard_normal(shape).astype(np.float32)
    fused, plain, types = run_both(g, fetches, {x: xv})
    assert FUSED not in types and "Mean" in types
    for a, b in zip(fused, plain):
        _assert_bits(a, b)


def test_the_kernel_checks_its_operands():
    with pytest.raises(InvalidArgumentError, match="two activations"):
        fused_conv_kernels.fused_squeeze_excite(dtypes.float32, ["Relu", "Elu"])
    with pytest.raises(InvalidArgumentError, match="two activations"):
        fused_conv_kernels.fused_squeeze_excite(dtypes.float32, ["Relu"])
    k = fused_conv_kernels.fused_squeeze_excite(dtypes.float32, ["Relu", "Sigmoid"])
    f = np.float32
    x = np.ones((1, 8, 3, 3), f)
    w1, b1 = np.ones((1, 1, 8, 2), f), np.ones(2, f)
    w2, b2 = np.ones((1, 1, 2, 8), f), np.ones(8, f)
    assert k(x, w1, b1, w2, b2).shape == (1, 8, 1, 1)
    for bad in (
        (x, np.ones((1, 1, 7, 2), f), b1, w2, b2),  # the first filter's channels
        (x, w1, np.ones(3, f), w2, b2),  # the first bias
        (x, w1, b1, np.ones((1, 1, 3, 8), f), b2),  # the second filter's channels
        (x, w1, b1, w2, np.ones(7, f)),  # the second bias
        (x, w1, b1, np.ones((3, 3, 2, 8), f), b2),  # not 1×1
    ):
        with pytest.raises(InvalidArgumentError, match="_FusedSqueezeExcite: the filters"):
            k(*bad)
    with pytest.raises(InvalidArgumentError, match="_FusedSqueezeExcite takes x"):
        k(x[0], w1, b1, w2, b2)


def test_the_op_checks_its_filters_shapes():
    with rg.Graph().as_default() as g:
        x = rg.placeholder(rg.float32, [1, 8, 3, 3])
        w1, b1 = rg.constant(np.ones((1, 1, 8, 2), np.float32)), rg.constant(np.ones(2, np.float32))
        w2, b2 = rg.constant(np.ones((1, 1, 3, 8), np.float32)), rg.constant(np.ones(8, np.float32))
        with pytest.raises(ValueError, match="second filter takes 3 channels; the first gives 2"):
            g.create_op(FUSED, [x, w1, b1, w2, b2], {"activations": ["", ""]}, name="se")
        w2 = rg.constant(np.ones((1, 1, 2, 8), np.float32))
        op = g.create_op(FUSED, [x, w1, b1, w2, b2], {"activations": ["", ""]}, name="se")
        assert op.outputs[0].shape.as_list() == [1, 8, 1, 1]
