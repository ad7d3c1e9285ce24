"""ADD, SUB, MUL, data movement (RESHAPE, SQUEEZE, EXPAND_DIMS, CONCATENATION, PAD, TRANSPOSE,
STRIDED_SLICE, GATHER), MEAN, QUANTIZE and DEQUANTIZE: rill's kernels against LiteRT's reference
kernels (BUILTIN_REF) on one-operator models; float within 1e-5 relative, int8 bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
from mobile.kernel_testing import RNG, check, fp, q8, run_single, sample
from mobile.tflite_builder import Op, T, build, quant, rill_run, single_op

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3

BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((1, 5, 5, 3), (3,)), ((4, 1), (1, 6)), ((2, 1, 3), ())]


def _ic(values, dtype=np.int32) -> T:
    v = np.asarray(values, dtype)
    return T(v.shape, dtype, v)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", [NONE, RELU, RELU6, RELU_N1_TO_1])
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_float(op, act, shapes):
    a, b = shapes
    out = np.broadcast_shapes(a, b)
    run_single(op, [fp(*a), fp(*b)], [fp(*out)], {"fused_activation_function": act})


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", [NONE, RELU, RELU6])
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_int8(op, act, shapes):
    a, b = shapes
    out = np.broadcast_shapes(a, b)
    scale = float(RNG.uniform(0.02, 0.1)) if op != "MUL" else float(RNG.uniform(0.5, 2.0)) * 0.03
    run_single(op, [q8(*a), q8(*b)], [q8(*out, scale=scale)], {"fused_activation_function": act},
               version=2)  # fmt: skip


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_binary_int32(op):
    model = single_op(op, [T((2, 3), np.int32), T((3,), np.int32)], [T((2, 3), np.int32)])
    a = RNG.integers(-1000, 1000, (2, 3)).astype(np.int32)
    b = RNG.integers(-1000, 1000, (3,)).astype(np.int32)
    check(model, [a, b])


def test_add_int8_constant_operand():
    c = quant((4,), np.int8, 0.05, 3, RNG.integers(-128, 128, 4).astype(np.int8))
    run_single("ADD", [q8(2, 4), c], [q8(2, 4)], version=2)


@pytest.mark.parametrize("dtype", ["float", "int8"])
def test_reshape(dtype):
    x = fp(2, 3, 4) if dtype == "float" else q8(2, 3, 4)
    out = (lambda *s: fp(*s)) if dtype == "float" else (
        lambda *s: quant(s, np.int8, x.scale, x.zero_point))  # fmt: skip
    run_single("RESHAPE", [x, _ic([4, -1])], [out(4, 6)])
    run_single("RESHAPE", [x, _ic([24])], [out(24)])
    run_single("RESHAPE", [x], [out(6, 4)], {"new_shape": [6, 4]})


def test_squeeze_and_expand_dims():
    run_single("SQUEEZE", [fp(1, 3, 1, 2)], [fp(3, 2)])
    run_single("SQUEEZE", [fp(1, 3, 1, 2)], [fp(1, 3, 2)], {"squeeze_dims": [2]})
    run_single("EXPAND_DIMS", [fp(3, 2), _ic([1])], [fp(3, 1, 2)])
    run_single("EXPAND_DIMS", [fp(3, 2), _ic(-1)], [fp(3, 2, 1)])
    x = q8(2, 5)
    run_single("EXPAND_DIMS", [x, _ic([0])], [quant((1, 2, 5), np.int8, x.scale, x.zero_point)])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation_float(axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, k in zip(shapes, (1, 2, 3)):
        s[axis] = k
    out = list(shapes[0])
    out[axis] = 6
    run_single("CONCATENATION", [fp(*s) for s in shapes], [fp(*out)], {"axis": axis})


def test_concatenation_fused_activation_is_rejected():
    from rill.mobile.errors import PrepareError

    model = single_op("CONCATENATION", [fp(2, 3), fp(2, 2)], [fp(2, 5)],
                      {"axis": 1, "fused_activation_function": RELU})  # fmt: skip
    with pytest.raises(PrepareError, match="#0 CONCATENATION.*fused activation"):
        rill_run(model, [sample(fp(2, 3)), sample(fp(2, 2))])


def test_concatenation_int8():
    a = q8(1, 4, 4, 3)
    same = [quant((1, 4, 4, c), np.int8, a.scale, a.zero_point) for c in (3, 5)]
    run_single("CONCATENATION", same, [quant((1, 4, 4, 8), np.int8, a.scale, a.zero_point)],
               {"axis": 3}, version=2)  # fmt: skip


@pytest.mark.parametrize("dtype", ["float", "int8"])
def test_pad(dtype):
    pads = _ic([[0, 0], [1, 2], [2, 1], [0, 0]])
    if dtype == "float":
        run_single("PAD", [fp(1, 3, 3, 2), pads], [fp(1, 6, 6, 2)])
    else:
        x = q8(1, 3, 3, 2)
        run_single("PAD", [x, pads], [quant((1, 6, 6, 2), np.int8, x.scale, x.zero_point)],
                   version=2)  # fmt: skip


@pytest.mark.parametrize("perm", [[1, 0], [0, 2, 1], [3, 1, 0, 2]])
def test_transpose(perm):
    shape = [(3, 4), (2, 3, 4), (2, 3, 4, 5)][len(perm) - 2]
    run_single("TRANSPOSE", [fp(*shape), _ic(perm)], [fp(*(shape[p] for p in perm))])
    x = q8(*shape)
    out = quant(tuple(shape[p] for p in perm), np.int8, x.scale, x.zero_point)
    run_single("TRANSPOSE", [x, _ic(perm)], [out], version=2)


# (shape, begin, end, strides, options, expected output shape) — TF semantics
SLICES = [
    ((5, 6), [1, 0], [4, 6], [1, 2], {}, (3, 3)),
    ((5, 6), [-1, 0], [0, 6], [-1, 1], {}, (4, 6)),
    ((5, 6), [0, 2], [0, 0], [1, 1], {"begin_mask": 1, "end_mask": 3}, (5, 4)),
    ((4, 5, 3), [1, 0, 0], [2, 5, 3], [1, 1, 1], {"shrink_axis_mask": 1}, (5, 3)),
    ((4, 5, 3), [0, 1], [0, 4], [1, 1], {"ellipsis_mask": 1}, (4, 5, 3)),
    ((6,), [5], [-7], [-2], {}, (3,)),
]


@pytest.mark.parametrize("case", SLICES)
def test_strided_slice(case):
    shape, b, e, s, opts, out = case
    if opts.get("ellipsis_mask"):
        # LiteRT's reference kernel rejects ellipsis: compare with numpy instead.
        model = single_op("STRIDED_SLICE", [fp(*shape), _ic(b), _ic(e), _ic(s)], [fp(4, 5, 2)],
                          opts, version=4)  # fmt: skip
        x = sample(fp(*shape))
        (got,) = rill_run(model, [x])
        np.testing.assert_array_equal(got, x[..., 1:4])
        return
    run_single("STRIDED_SLICE", [fp(*shape), _ic(b), _ic(e), _ic(s)], [fp(*out)], opts, version=4)
    x = q8(*shape)
    run_single("STRIDED_SLICE", [x, _ic(b), _ic(e), _ic(s)],
               [quant(out, np.int8, x.scale, x.zero_point)], opts, version=4)  # fmt: skip


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    shape = (4, 5, 3)
    idx_shape = (2, 3)
    out = list(shape[: axis % 3]) + list(idx_shape) + list(shape[axis % 3 + 1 :])
    limit = shape[axis]
    idx = T(idx_shape, np.int32, RNG.integers(0, limit, idx_shape).astype(np.int32))
    run_single("GATHER", [fp(*shape), idx], [fp(*out)], {"axis": axis})
    x = q8(*shape)
    run_single("GATHER", [x, idx], [quant(tuple(out), np.int8, x.scale, x.zero_point)],
               {"axis": axis}, version=2)  # fmt: skip


def test_gather_runtime_indices_out_of_range():
    model = single_op("GATHER", [fp(4, 3), T((2,), np.int32)], [fp(2, 3)], {"axis": 0})
    x = sample(fp(4, 3))
    (got,) = rill_run(model, [x, np.array([3, 0], np.int32)])
    np.testing.assert_array_equal(got, x[[3, 0]])
    with pytest.raises(ValueError, match="index 4 is out of range"):
        rill_run(model, [x, np.array([1, 4], np.int32)])


# (shape, axes, keep_dims)
MEANS = [((1, 6, 6, 4), [1, 2], True), ((2, 5, 5, 3), [1, 2], False), ((3, 7), [-1], False),
         ((2, 3, 4), [0, 2], True), ((4, 9), [0], False)]  # fmt: skip


@pytest.mark.parametrize("case", MEANS)
def test_mean_float(case):
    shape, axes, keep = case
    out = np.mean(np.zeros(shape), axis=tuple(axes), keepdims=keep).shape
    run_single("MEAN", [fp(*shape), _ic(axes)], [fp(*out)], {"keep_dims": keep})


@pytest.mark.parametrize("same_quant", [True, False])
@pytest.mark.parametrize("case", MEANS)
def test_mean_int8(case, same_quant):
    shape, axes, keep = case
    out = np.mean(np.zeros(shape), axis=tuple(axes), keepdims=keep).shape
    x = q8(*shape)
    o = quant(out, np.int8, x.scale, x.zero_point) if same_quant else q8(*out)
    run_single("MEAN", [x, _ic(axes)], [o], {"keep_dims": keep}, version=2)


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_sum_same_quantization_saturates_as_litert(dtype):
    """SUM with one quantization on both sides (int16 must have it): the raw sum saturated to
    the type, as LiteRT's builtin kernel (its BUILTIN_REF SUM is wrong on int8/int16, see
    tools/fixtures/make_tflite_op_fixtures.py)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    scale, zp = (0.05, 3) if dtype == np.int8 else (0.001, 0)
    x, out = quant((2, 5, 3), dtype, scale, zp), quant((2, 3), dtype, scale, zp)
    model = single_op("SUM", [x, _ic([1])], [out], {"keep_dims": False}, version=2)
    info = np.iinfo(dtype)
    feed = (RNG.integers(info.min, info.max + 1, (2, 5, 3)) // 4).astype(dtype)
    feed[0, :, 0] = info.max  # saturates
    it = Interpreter(model_content=model, experimental_op_resolver_type=(
        OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))  # fmt: skip
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], feed)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    got = rill_run(model, [feed])[0]
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == info.max and len(np.unique(got)) > 3


def test_sum_int16_needs_one_quantization():
    from rill.mobile.errors import PrepareError

    x, out = quant((2, 5), np.int16, 0.001, 0), quant((2,), np.int16, 0.002, 0)
    model = single_op("SUM", [x, _ic([1])], [out], {"keep_dims": False}, version=2)
    with pytest.raises(PrepareError, match="operator #0 SUM.*must share quantization"):
        rill_run(model, [np.zeros((2, 5), np.int16)])


def test_quantize_float_to_int8():
    model = single_op("QUANTIZE", [fp(3, 40)], [quant((3, 40), np.int8, 0.0173, -7)])
    x = (RNG.standard_normal((3, 40)) * 2).astype(np.float32)
    # Exact halves of the scale: the rounding of ties (away from zero) shows here.
    x[0, :10] = (np.arange(10, dtype=np.float32) - 5.5) * np.float32(0.0173)
    # Far out of range (TFLite's float→int32 conversion overflows beyond ±2^31: not compared).
    x[1, :4] = [1e6, -1e6, 0.0, -0.0]
    check(model, [x])


@pytest.mark.parametrize("src", [np.int8, np.uint8])
def test_quantize_requantize(src):
    zp = 3 if src == np.int8 else 131
    model = single_op("QUANTIZE", [quant((2, 128), src, 0.031, zp)],
                      [quant((2, 128), np.int8, 0.047, -11)], version=2)  # fmt: skip
    x = np.arange(256).astype(np.uint8).view(src).reshape(2, 128).copy()
    check(model, [x])


def test_dequantize():
    model = single_op("DEQUANTIZE", [quant((2, 128), np.int8, 0.0371, -9)], [fp(2, 128)],
                      version=2)  # fmt: skip
    x = np.arange(256).astype(np.uint8).view(np.int8).reshape(2, 128).copy()
    check(model, [x])


def test_dequantize_per_channel_constant():
    w = quant((3, 4), np.int8, [0.1, 0.2, 0.4], [0, 0, 0],
              RNG.integers(-127, 128, (3, 4)).astype(np.int8))  # fmt: skip
    model = build([w, fp(3, 4), fp(3, 4), fp(3, 4)],
                  [Op("DEQUANTIZE", [0], [2], None, 4), Op("ADD", [2, 1], [3])], [1], [3])  # fmt: skip
    x = sample(fp(3, 4))
    (got,) = rill_run(model, [x])
    want = w.data.astype(np.float32) * np.array([[0.1], [0.2], [0.4]], np.float32) + x
    np.testing.assert_allclose(got, want, rtol=1e-6)
    check(model, [x])


@pytest.mark.parametrize("scale", [0.01, 0.05, 0.2, 1.0])
def test_log_softmax_int8(scale):
    """int8 LOG_SOFTMAX against LiteRT's reference kernel, over input scales whose 256 codes
    span from a narrow to a saturating range of log-probabilities."""
    x = quant((6, 40), np.int8, scale, int(RNG.integers(-20, 20)))
    run_single("LOG_SOFTMAX", [x], [quant((6, 40), np.int8, 16.0 / 256, 127)], version=2)


def test_log_softmax_int8_needs_the_fixed_output_quantization():
    from rill.mobile.errors import PrepareError

    model = single_op("LOG_SOFTMAX", [q8(2, 8)], [quant((2, 8), np.int8, 0.1, 0)], version=2)
    with pytest.raises(PrepareError, match="operator #0 LOG_SOFTMAX.*16/256"):
        rill_run(model, [np.zeros((2, 8), np.int8)])
