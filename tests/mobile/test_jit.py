"""The interpreter's compiled loops (rill.mobile.kernels.jit) against its numpy paths: the same
bits on every kernel they replace, on hand-made operators with awkward values (−0, NaN, ties of
the roundings) and on every converter-made model fixture; and the compiled output stage against
the int64 Requantizer."""

from __future__ import annotations

import itertools
import pathlib

import numpy as np
import pytest
from mobile.kernel_testing import RNG, fconst, fp, q8, qbias, quant, qweights, sample
from mobile.tflite_builder import T, rill_run, single_op

from rill.mobile import program
from rill.mobile.kernels import jit
from rill.mobile.quant import Requantizer

pytest.importorskip("numba")

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
SAME, VALID = 0, 1


@pytest.fixture(autouse=True)
def _per_operator():
    """These tests hold the per-operator loops to the numpy path's bits; whole-subgraph
    programs (tests/mobile/test_program.py) agree to float rounding only, so they stay off."""
    old = program.set_enabled(False)
    yield
    program.set_enabled(old)


@pytest.fixture
def compiled():
    old = jit.set_enabled(True)
    assert jit.loops() is not None
    yield
    jit.set_enabled(old)


def _both(model: bytes, feeds) -> tuple[list[np.ndarray], list[np.ndarray]]:
    old = jit.set_enabled(False)
    try:
        plain = rill_run(model, feeds)
        jit.set_enabled(True)
        fast = rill_run(model, feeds)
    finally:
        jit.set_enabled(old)
    return plain, fast


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def _conv_out(size, k, stride, dil, pad):
    eff = (k - 1) * dil + 1
    return -(-size // stride) if pad == SAME else (size - eff) // stride + 1


# (input NHWC, multiplier, kernel, stride, dilation, padding, activation)
DW_CASES = [
    ((1, 8, 8, 3), 1, (3, 3), (1, 1), (1, 1), SAME, 1),
    ((1, 9, 9, 3), 2, (3, 3), (2, 2), (1, 1), SAME, 0),
    ((2, 7, 6, 4), 1, (2, 3), (1, 2), (1, 1), VALID, 3),
    ((1, 10, 10, 2), 3, (3, 3), (1, 1), (2, 2), SAME, 0),
    ((1, 12, 12, 24), 1, (5, 5), (2, 2), (1, 1), SAME, 3),
]


def _dw_options(stride, dil, pad, act, mult):
    return {"padding": pad, "stride_w": stride[1], "stride_h": stride[0],
            "dilation_w_factor": dil[1], "dilation_h_factor": dil[0],
            "fused_activation_function": act, "depth_multiplier": mult}  # fmt: skip


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_float_compiled_is_bit_identical(case):
    shape, mult, (kh, kw), stride, dil, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    filt = RNG.standard_normal((1, kh, kw, c * mult)).astype(np.float32)
    filt[0, 0, 0, 0] = -0.0
    model = single_op("DEPTHWISE_CONV_2D", [fp(*shape), fconst(filt),
                                            fconst(RNG.standard_normal(c * mult))],
                      [fp(n, oh, ow, c * mult)], _dw_options(stride, dil, pad, act, mult))  # fmt: skip
    x = RNG.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, 0], x[0, -1, -1, -1] = np.nan, -0.0  # NaN stays NaN through every clamp
    x[0, 1] = 0.0  # products of zeros: −0 where the weight is negative
    plain, fast = _both(model, [x])
    _same_bits(plain[0], fast[0])
    assert np.isnan(fast[0]).any()


def test_depthwise_float_negative_zero_through_relu_and_relu6():
    """np.maximum turns −0 into +0, np.clip keeps it: the compiled clamp does the same."""
    filt = np.ones((1, 1, 1, 4), np.float32)
    bias = np.full(4, -0.0, np.float32)
    x = np.full((1, 2, 2, 4), -0.0, np.float32)
    for act in (0, 1, 3):
        model = single_op("DEPTHWISE_CONV_2D", [fp(1, 2, 2, 4), fconst(filt), fconst(bias)],
                          [fp(1, 2, 2, 4)], _dw_options((1, 1), (1, 1), VALID, act, 1))  # fmt: skip
        plain, fast = _both(model, [x])
        _same_bits(plain[0], fast[0])


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_int8_compiled_is_bit_identical(case):
    shape, mult, (kh, kw), stride, dil, pad, act = case
    n, h, w, c = shape
    oh, ow = _conv_out(h, kh, stride[0], dil[0], pad), _conv_out(w, kw, stride[1], dil[1], pad)
    x = q8(*shape)
    filt = qweights((1, kh, kw, c * mult), 3)
    out = q8(n, oh, ow, c * mult, scale=float(RNG.uniform(0.05, 0.3)))
    model = single_op("DEPTHWISE_CONV_2D", [x, filt, qbias(c * mult, x, filt)], [out],
                      _dw_options(stride, dil, pad, act, mult), version=3)  # fmt: skip
    plain, fast = _both(model, [sample(x)])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 10  # not a saturated output


@pytest.mark.parametrize("op", ["CONV_2D", "FULLY_CONNECTED"])
@pytest.mark.parametrize("act", [0, 1])
def test_int8_products_compiled_stage_is_bit_identical(op, act):
    x = q8(1, 6, 6, 20) if op == "CONV_2D" else q8(3, 40)
    if op == "CONV_2D":
        filt = qweights((12, 3, 3, 20), 0)
        out = q8(1, 6, 6, 12, scale=float(RNG.uniform(0.3, 0.8)))
        opts = {"padding": SAME, "stride_w": 1, "stride_h": 1, "fused_activation_function": act}
    else:
        filt = qweights((12, 40), 0)
        out = q8(3, 12, scale=float(RNG.uniform(0.3, 0.8)))
        opts = {"fused_activation_function": act}
    model = single_op(op, [x, filt, qbias(12, x, filt)], [out], opts, version=3)
    plain, fast = _both(model, [sample(x)])
    _same_bits(plain[0], fast[0])


@pytest.mark.parametrize("single", [False, True])
def test_compiled_output_stage_equals_int64_requantizer(single, compiled):
    from rill.mobile.kernels.common import OutputStage

    class K:  # a stand-in kernel collecting scratch requests
        def scratch(self, shape, dtype):
            raise AssertionError("the compiled stage needs no scratch")

    rng = np.random.default_rng(5)
    ms = rng.uniform(1e-4, 0.9, 6)
    ms[0], ms[1] = 1.5, 0.75  # a left shift; shift 0 (no second rounding)
    acc = rng.integers(-(2**20), 2**20, (3000, 6))
    acc[:9, :] = [[v] * 6 for v in (-4, -3, -2, -1, 0, 1, 2, 3, 4)]  # small values, many ties
    # A bound of 2^21 keeps P = acc · M below 2^53 (the folded loop); 2^30 does not (the
    # integer loop); the accumulators stay within both.
    for (lo, hi), bound in itertools.product(((-128, 127), (-20, 127), (5, 60)), (2**21, 2**30)):
        stage = OutputStage(K(), ms, np.full(6, float(bound)), -7, lo, hi, (3000, 6), single)
        assert stage.compiled is not None
        assert (stage.cfold is not None) == (bound == 2**21)
        assert stage.acc_dtype == (np.float32 if bound == 2**21 else np.float64)
        out = np.empty((3000, 6), np.int8)
        stage.bind([])(acc.astype(np.float32), out)
        want = acc.astype(np.int64)
        Requantizer(ms, -7, lo, hi, single_rounding=single).apply(want, np.empty_like(want))
        np.testing.assert_array_equal(out, want)


def _fixture_models():
    names = ["cnn_float", "cnn_int8"]
    names += sorted(f"models/{p.stem}" for p in (FIXTURES / "models").glob("*.tflite"))
    return names


@pytest.mark.parametrize("name", _fixture_models())
def test_fixture_models_same_bits_with_and_without_compiled_loops(name):
    model = (FIXTURES / f"{name}.tflite").read_bytes()
    data = np.load(FIXTURES / f"{name}.npz")
    keys = sorted((k for k in data.files if k.startswith("input_")), key=lambda k: int(k[6:]))
    feeds = [data[k] for k in keys]
    plain, fast = _both(model, feeds)
    for a, b in zip(plain, fast):
        _same_bits(a, b)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "SQUARED_DIFFERENCE"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((1, 16, 1), (1, 1, 32)),
                                    ((3, 1, 5, 2), ()), ((7,), (2, 3, 7))])  # fmt: skip
def test_int8_pair_lookup_compiled_is_bit_identical(op, shapes):
    sa, sb = shapes
    out_shape = np.broadcast_shapes(sa, sb)
    a, b, out = q8(*sa), q8(*sb), q8(*out_shape)
    opts = {} if op == "SQUARED_DIFFERENCE" else {"fused_activation_function": 1}
    model = single_op(op, [a, b], [out], opts, version=2 if op == "SQUARED_DIFFERENCE" else 1)
    plain, fast = _both(model, [sample(a), sample(b)])
    _same_bits(plain[0], fast[0])


def test_int8_mean_and_batch_matmul_compiled_are_bit_identical():
    x = q8(2, 5, 6, 7)
    axes = np.array([1, 2], np.int32)
    mean = single_op("MEAN", [x, T(axes.shape, np.int32, axes)], [q8(2, 1, 1, 7)],
                     {"keep_dims": True}, version=2)  # fmt: skip
    plain, fast = _both(mean, [sample(x)])
    _same_bits(plain[0], fast[0])
    lhs, rhs = q8(2, 4, 9), q8(2, 9, 5)
    bmm = single_op("BATCH_MATMUL", [lhs, rhs], [q8(2, 4, 5, scale=2.0)], {}, version=4)
    plain, fast = _both(bmm, [sample(lhs), sample(rhs)])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 5


def _awkward_floats(shape) -> np.ndarray:
    """Normal values spread over the tails, with −0, +0, ±inf, NaN, huge and tiny ones."""
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    special = [-0.0, 0.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-42, -1e-42, 9.5, -9.5, 30.0]
    flat[: len(special)] = special
    return x


def test_gelu_float_compiled_is_bit_identical():
    x = _awkward_floats((3, 7, 64))
    model = single_op("GELU", [fp(3, 7, 64)], [fp(3, 7, 64)], {"approximate": False}, version=2)
    plain, fast = _both(model, [x])
    _same_bits(plain[0], fast[0])
    assert np.isfinite(fast[0]).sum() > 1000


@pytest.mark.parametrize("depth", [5, 16, 37, 128, 200])  # rows up to 128 sum in the loop
@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_softmax_float_compiled_is_bit_identical(beta, depth):
    x = _awkward_floats((4, 9, depth))
    x[1, 2] = -0.0  # a row of −0 (its max is −0), a row of one NaN, a row of −inf
    x[2, 3, 1] = np.nan
    x[3, 1] = -np.inf
    model = single_op("SOFTMAX", [fp(4, 9, depth)], [fp(4, 9, depth)], {"beta": beta})
    plain, fast = _both(model, [x])
    _same_bits(plain[0], fast[0])
    assert np.isnan(fast[0][2, 3]).all() and np.isfinite(fast[0][0, 4]).all()


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_quantize_float_compiled_is_bit_identical(dtype):
    x = _awkward_floats((5, 40))
    x[1, :8] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997]  # ties of the rounding
    out = quant((5, 40), dtype, 0.5 if dtype == np.int8 else 0.01, 3 if dtype == np.int8 else 0)
    model = single_op("QUANTIZE", [fp(5, 40)], [out], {}, version=2 if dtype == np.int8 else 3)
    plain, fast = _both(model, [x])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 20


@pytest.mark.parametrize("depth", [6, 16, 128, 150])  # rows up to 128 sum in the loop
@pytest.mark.parametrize("beta", [1.0, 0.6])
def test_softmax_int8_compiled_is_bit_identical(beta, depth):
    x = q8(3, 11, depth, scale=0.09, zp=-4)
    feed = sample(x)
    feed[0, 0] = -128  # a row of equal values, a row with one extreme
    feed[0, 1, 3] = 127
    model = single_op("SOFTMAX", [x], [quant((3, 11, depth), np.int8, 1 / 256, -128)],
                      {"beta": beta}, version=2)  # fmt: skip
    plain, fast = _both(model, [feed])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 20


@pytest.mark.parametrize("op, dtype", [("TANH", np.int8), ("LOGISTIC", np.int8),
                                       ("DEQUANTIZE", np.int8), ("RELU6", np.int16),
                                       ("DEQUANTIZE", np.int16)])  # fmt: skip
def test_table_lookups_compiled_are_bit_identical(op, dtype):
    scale = 0.05 if dtype == np.int8 else 1 / 4096
    x = quant((4, 33), dtype, scale, 3 if dtype == np.int8 else 0)
    if op == "DEQUANTIZE":
        out = fp(4, 33)
    elif op == "RELU6":
        out = quant((4, 33), dtype, scale, 0)
    else:  # the fixed output scales of the int8 activations
        out = quant(
            (4, 33), dtype, 1 / 128 if op == "TANH" else 1 / 256, 0 if op == "TANH" else -128
        )
    info = np.iinfo(dtype)
    feed = RNG.integers(info.min, info.max + 1, (4, 33)).astype(dtype)
    feed[0, :2] = info.min, info.max
    model = single_op(op, [x], [out], {}, version=2 if op == "DEQUANTIZE" else 1)
    plain, fast = _both(model, [feed])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 30


@pytest.mark.parametrize("axes", [[2], [-1], [1, 2], [0, 2], [0, 1, 2]])
def test_int8_mean_axes_compiled_is_bit_identical(axes):
    x = q8(3, 5, 40)
    ax = np.array(axes, np.int32)
    norm = sorted(a % 3 for a in axes)
    out_shape = tuple(1 if d in norm else n for d, n in enumerate((3, 5, 40)))
    model = single_op("MEAN", [x, T(ax.shape, np.int32, ax)], [q8(*out_shape, scale=0.004)],
                      {"keep_dims": True}, version=2)  # fmt: skip
    plain, fast = _both(model, [sample(x)])
    _same_bits(plain[0], fast[0])


@pytest.mark.parametrize("adj_x, adj_y", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("batch", [(3,), (2, 2), ()])
def test_int8_batch_matmul_adjoints_compiled_are_bit_identical(adj_x, adj_y, batch):
    lhs = q8(*batch, *((9, 4) if adj_x else (4, 9)))
    rhs = q8(*((1,) * len(batch) if batch == (2, 2) else batch), *((5, 9) if adj_y else (9, 5)))
    bmm = single_op("BATCH_MATMUL", [lhs, rhs], [q8(*batch, 4, 5, scale=2.0)],
                    {"adj_x": adj_x, "adj_y": adj_y}, version=4)  # fmt: skip
    plain, fast = _both(bmm, [sample(lhs), sample(rhs)])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 5


@pytest.mark.parametrize("shape, axes", [((3, 5), [1]), ((2, 7, 8), [2]), ((4, 33), [-1]),
                                         ((2, 3, 129), [2]), ((2, 6, 50), [1, 2]),
                                         ((1, 1000), [1]), ((2, 128), [1]), ((5, 6, 7), [1])])  # fmt: skip
def test_float_mean_compiled_is_bit_identical(shape, axes):
    """The compiled trailing-axes MEAN sums in numpy's pairwise order: the same bits, for row
    lengths below 8 and up to 128; longer rows and other axes keep numpy's reduce."""
    x = _awkward_floats(shape)
    x.reshape(-1)[:12] = RNG.standard_normal(12)  # specials only in the second row onwards
    flat = x.reshape(shape[0], -1)
    if shape[0] > 1:
        flat[1, :3] = [np.nan, 1.0, 2.0]
    if shape[0] > 2:
        flat[2, :] = -0.0  # an all −0 row sums to +0
    ax = np.array(axes, np.int32)
    norm = sorted(a % len(shape) for a in axes)
    out_shape = tuple(1 if d in norm else n for d, n in enumerate(shape))
    model = single_op("MEAN", [fp(*shape), T(ax.shape, np.int32, ax)], [fp(*out_shape)],
                      {"keep_dims": True})  # fmt: skip
    plain, fast = _both(model, [x])
    _same_bits(plain[0], fast[0])
    assert np.isfinite(fast[0]).any()


@pytest.mark.parametrize("size, window, stride, pad, act", [((25, 5), (25, 5), (1, 1), VALID, 0),
                                                          ((9, 8), (3, 3), (2, 2), SAME, 0),
                                                          ((7, 7), (2, 3), (1, 2), SAME, 3),
                                                          ((6, 6), (2, 2), (2, 2), VALID, 1)])  # fmt: skip
def test_int8_average_pool_compiled_is_bit_identical(size, window, stride, pad, act):
    h, w = size
    oh, ow = _conv_out(h, window[0], stride[0], 1, pad), _conv_out(w, window[1], stride[1], 1, pad)
    x = q8(2, h, w, 12, scale=0.1, zp=-3)
    out = quant((2, oh, ow, 12), np.int8, 0.1, -3)
    opts = {"padding": pad, "stride_h": stride[0], "stride_w": stride[1],
            "filter_height": window[0], "filter_width": window[1],
            "fused_activation_function": act}  # fmt: skip
    model = single_op("AVERAGE_POOL_2D", [x], [out], opts)
    feed = sample(x)
    feed[0, 0, 0] = -128  # halfway quotients come from small sums too
    plain, fast = _both(model, [feed])
    _same_bits(plain[0], fast[0])
    assert len(np.unique(fast[0])) > 3
