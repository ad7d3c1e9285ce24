"""import_onnx of onnxruntime's com.microsoft quantized ops (import_ms_quant), against
onnxruntime, which implements them.

Quantized activations are graph inputs (so the rules, not import-time folding, compute them);
scales and zero points sit in initializers, as onnxruntime's quantization tool writes them. Where
onnxruntime's integer kernels round an intermediate differently from dequantize → float op →
quantize (the test says which), a difference of one quantization step is allowed; everywhere else
the results agree bit for bit. Bad input must name the node.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_rill

from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(7)
MS = "com.microsoft"
ELEM = {np.uint8: TP.UINT8, np.int8: TP.INT8, np.float32: TP.FLOAT, np.int32: TP.INT32}


def vi(name, dtype, shape=None):
    return oh.make_tensor_value_info(name, ELEM[dtype], shape)


def init(name, value, dtype=np.float32):
    return nh.from_array(np.asarray(value, dtype), name)


def model(nodes, inputs, outputs, inits=()):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", 17), oh.make_opsetid(MS, 1)]
    return oh.make_model(g, opset_imports=ops, ir_version=8)


def check(m, feeds, steps=0):
    """rill's outputs against onnxruntime's: same type and shape, and equal (quantized outputs
    within `steps` quantization steps)."""
    got, want = run_rill(m, feeds), run_ort(m, feeds)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        if steps:
            diff = np.abs(a.astype(np.int32) - b.astype(np.int32))
            assert diff.max() <= steps, diff.max()
        else:
            np.testing.assert_array_equal(a, b)
    return got, want


def ints(dtype, *shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def u8s8_weights(*shape):
    """int8 weights for a uint8 input in onnxruntime's "reduce_range" (7 bits): its u8s8
    products on x86 CPUs without VNNI (AVX2: Zen 3) add pairs of u8·s8 products in 16 bits,
    saturating (full-range weights gave results up to 6 steps off the exact product there),
    so only such weights have a CPU-independent onnxruntime result to compare with."""
    return RNG.integers(-64, 64, shape).astype(np.int8)


def zp_of(dtype):
    return 128 if dtype == np.uint8 else 3


# -- QLinearAdd / QLinearMul -----------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_add_and_mul_broadcast_match_onnxruntime(op_type, dtype):
    # onnxruntime's kernels fold the scales into ratios (A_scale / C_scale, ...); rill follows
    # their arithmetic (QLinearAdd's AVX2 kernel where it runs, QLinearMul's on any x86-64).
    a, b = ints(dtype, 2, 3, 4, 5), ints(dtype, 4, 1)
    node = oh.make_node(op_type, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS)
    z = zp_of(dtype)
    inits = [init("as", 0.05), init("az", z, dtype), init("bs", 0.03), init("bz", z - 7, dtype),
             init("cs", 0.07 if op_type == "QLinearAdd" else 0.4), init("cz", z + 2, dtype)]  # fmt: skip
    m = model([node], [vi("a", dtype, a.shape), vi("b", dtype, b.shape)], [vi("c", dtype)], inits)
    exact = op_type == "QLinearMul" or _avx2_fma()  # both in onnxruntime's x86-64 arithmetic
    check(m, {"a": a, "b": b}, steps=0 if exact else 1)


def _avx2_fma() -> bool:
    """Whether onnxruntime runs its AVX2 kernels here (rill's QLinearAdd follows their
    arithmetic; elsewhere onnxruntime's kernel rounds differently)."""
    try:
        flags = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("b_shape", [(2, 16, 9, 9), (1, 16, 1, 1), (1,), (9,)],
                         ids=["same", "per_channel", "scalar", "last_axis"])  # fmt: skip
@pytest.mark.parametrize("scales", [(0.007976649, 0.02002803, 0.010470914),
                                    (0.05, 0.03, 0.07), (0.5, 0.011, 0.3)])  # fmt: skip
def test_qlinear_add_is_onnxruntimes_bits(dtype, b_shape, scales):
    """QLinearAdd in onnxruntime's x86-64 arithmetic: every value equal, not one step off
    where a sum lies near half a step (ResNet-18 ½ quantized by onnxruntime's quantize_static
    differed from onnxruntime in 11 of 50176 values of one residual add before)."""
    a, b = ints(dtype, 2, 16, 9, 9), ints(dtype, *b_shape)
    node = oh.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"],
                        domain=MS)  # fmt: skip
    z = zp_of(dtype)
    sa, sb, sc = scales
    inits = [init("as", sa), init("az", z + 2, dtype), init("bs", sb), init("bz", z - 25, dtype),
             init("cs", sc), init("cz", z - 1, dtype)]  # fmt: skip
    m = model([node], [vi("a", dtype, a.shape), vi("b", dtype, b.shape)], [vi("c", dtype)], inits)
    check(m, {"a": a, "b": b}, steps=0 if _avx2_fma() else 1)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("b_shape", [(2, 16, 9, 9), (1, 16, 1, 1), (1,)],
                         ids=["same", "per_channel", "scalar"])  # fmt: skip
@pytest.mark.parametrize("scales", [(0.0123, 0.0456, 0.0033), (0.05, 0.03, 0.07), (0.5, 0.2, 2.3)])
def test_qlinear_mul_is_onnxruntimes_bits(dtype, b_shape, scales):
    """QLinearMul in onnxruntime's x86-64 arithmetic (the integer product times the ratio
    sa·sb/sc, plus zc), every value equal (the squeeze-and-excite gates of a QOperator
    MobileNetV3 or EfficientNet)."""
    a, b = ints(dtype, 2, 16, 9, 9), ints(dtype, *b_shape)
    node = oh.make_node("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"],
                        domain=MS)  # fmt: skip
    z = zp_of(dtype)
    sa, sb, sc = scales
    inits = [init("as", sa), init("az", z - 3, dtype), init("bs", sb), init("bz", z + 11, dtype),
             init("cs", sc), init("cz", z + 1, dtype)]  # fmt: skip
    m = model([node], [vi("a", dtype, a.shape), vi("b", dtype, b.shape)], [vi("c", dtype)], inits)
    check(m, {"a": a, "b": b})


def test_qlinear_add_without_zero_points_takes_them_as_zero():
    # onnxruntime refuses the omitted zero points (its type inference), so it runs the same model
    # with explicit zeros.
    a, b = ints(np.uint8, 3, 8), ints(np.uint8, 3, 8)
    inits = [init("as", 0.01), init("bs", 0.02), init("cs", 0.05), init("z", 0, np.uint8)]
    io = [vi("a", np.uint8, a.shape), vi("b", np.uint8, b.shape)], [vi("c", np.uint8)]
    omitted = oh.make_node("QLinearAdd", ["a", "as", "", "b", "bs", "", "cs"], ["c"], domain=MS)
    zeros = oh.make_node("QLinearAdd", ["a", "as", "z", "b", "bs", "z", "cs", "z"], ["c"],
                         domain=MS)  # fmt: skip
    got = run_rill(model([omitted], *io, inits), {"a": a, "b": b})[0]
    want = run_ort(model([zeros], *io, inits), {"a": a, "b": b})[0]
    assert got.dtype == want.dtype
    assert np.abs(got.astype(np.int32) - want).max() <= 1


# -- unary: QLinearSigmoid / QLinearLeakyRelu --------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op_type, attrs", [("QLinearSigmoid", {}),
                                            ("QLinearLeakyRelu", {"alpha": 0.2})])  # fmt: skip
def test_qlinear_unary_matches_onnxruntime_for_every_input_value(dtype, op_type, attrs):
    # onnxruntime builds a 256-entry table with its own float sigmoid: one step allowed there.
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype).reshape(4, 64)
    z = zp_of(dtype)
    node = oh.make_node(op_type, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, **attrs)
    ys = 1 / 255 if op_type == "QLinearSigmoid" else 0.03
    inits = [init("xs", 0.05), init("xz", z, dtype), init("ys", ys), init("yz", z - 5, dtype)]
    m = model([node], [vi("x", dtype, x.shape)], [vi("y", dtype)], inits)
    check(m, {"x": x}, steps=1 if op_type == "QLinearSigmoid" else 0)


# -- QLinearConcat -----------------------------------------------------------------------------------


def test_qlinear_concat_of_differently_scaled_inputs_matches_onnxruntime():
    x0, x1 = ints(np.uint8, 2, 3, 4), ints(np.uint8, 2, 5, 4)
    x2 = ints(np.uint8, 2, 1, 4)
    ins = ["ys", "yz", "x0", "s0", "z0", "x1", "s1", "z1", "x2", "s2", "z2"]
    node = oh.make_node("QLinearConcat", ins, ["y"], domain=MS, axis=1)
    inits = [init("ys", 0.04), init("yz", 120, np.uint8), init("s0", 0.02),
             init("z0", 128, np.uint8), init("s1", 0.07), init("z1", 100, np.uint8),
             init("s2", 0.04), init("z2", 120, np.uint8), init("x2", x2, np.uint8)]  # fmt: skip
    m = model([node], [vi("x0", np.uint8, x0.shape), vi("x1", np.uint8, x1.shape)],
              [vi("y", np.uint8)], inits)  # fmt: skip
    check(m, {"x0": x0, "x1": x1})


# -- pools -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_global_average_pool_matches_onnxruntime(channels_last, dtype):
    x = ints(dtype, 4, 64, 5, 7) if not channels_last else ints(dtype, 4, 5, 7, 64)
    z = zp_of(dtype)
    node = oh.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                        domain=MS, channels_last=channels_last)  # fmt: skip
    inits = [init("xs", 0.05), init("xz", z, dtype), init("ys", 0.02), init("yz", z + 4, dtype)]
    m = model([node], [vi("x", dtype, x.shape)], [vi("y", dtype)], inits)
    got, _ = check(m, {"x": x})
    assert got[0].shape == ((4, 64, 1, 1) if not channels_last else (4, 1, 1, 64))


def test_qlinear_global_average_pool_of_unknown_spatial_size_matches_onnxruntime():
    x = ints(np.uint8, 2, 8, 3, 9)
    node = oh.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                        domain=MS)  # fmt: skip
    inits = [init("xs", 0.05), init("xz", 128, np.uint8), init("ys", 0.02),
             init("yz", 120, np.uint8)]  # fmt: skip
    m = model([node], [vi("x", np.uint8, ["n", 8, "h", "w"])], [vi("y", np.uint8)], inits)
    check(m, {"x": x})


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_qlinear_average_pool_padded_matches_onnxruntime(channels_last, count_include_pad):
    # onnxruntime's pooling kernel rounds its window sums differently: one step allowed.
    x = ints(np.uint8, 1, 3, 7, 6)
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    node = oh.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                        kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 1],
                        count_include_pad=count_include_pad, channels_last=channels_last)  # fmt: skip
    inits = [init("xs", 0.05), init("xz", 128, np.uint8), init("ys", 0.04),
             init("yz", 125, np.uint8)]  # fmt: skip
    m = model([node], [vi("x", np.uint8, x.shape)], [vi("y", np.uint8)], inits)
    check(m, {"x": x}, steps=1)


# -- QGemm -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out", ["uint8", "int8", "float"])
@pytest.mark.parametrize("trans_a, trans_b", [(0, 1), (1, 0)])
def test_qgemm_matches_onnxruntime(out, trans_a, trans_b):
    # onnxruntime quantizes Y to A's type: int8 output takes int8 A.
    a_type = np.int8 if out == "int8" else np.uint8
    a = ints(a_type, *((6, 5) if not trans_a else (5, 6)))
    b_shape = (5, 4) if not trans_b else (4, 5)
    b = u8s8_weights(*b_shape) if a_type == np.uint8 else ints(np.int8, *b_shape)
    c = RNG.integers(-3000, 3000, (4,)).astype(np.int32)
    ins = ["a", "as", "az", "b", "bs", "bz", "c"]
    inits = [init("as", 0.02), init("az", zp_of(a_type), a_type), init("b", b, np.int8),
             init("bs", 0.01), init("bz", 0, np.int8), init("c", c, np.int32)]  # fmt: skip
    if out == "float":
        y_type = np.float32
    else:
        y_type = np.uint8 if out == "uint8" else np.int8
        ins += ["ys", "yz"]
        inits += [init("ys", 0.3), init("yz", zp_of(y_type), y_type)]
    node = oh.make_node("QGemm", ins, ["y"], domain=MS, alpha=0.75, transA=trans_a,
                        transB=trans_b)  # fmt: skip
    m = model([node], [vi("a", a_type, a.shape)], [vi("y", y_type)], inits)
    if out == "float":
        got, want = run_rill(m, {"a": a}), run_ort(m, {"a": a})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    else:
        check(m, {"a": a})


def test_qgemm_per_column_weights_without_bias_matches_onnxruntime():
    a, b = ints(np.uint8, 3, 8), u8s8_weights(8, 5)
    node = oh.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz", "", "ys", "yz"], ["y"],
                        domain=MS)  # fmt: skip
    inits = [init("as", 0.02), init("az", 100, np.uint8), init("b", b, np.int8),
             init("bs", [0.01, 0.02, 0.005, 0.03, 0.01]), init("bz", [0] * 5, np.int8),
             init("ys", 0.5), init("yz", 128, np.uint8)]  # fmt: skip
    m = model([node], [vi("a", np.uint8, a.shape)], [vi("y", np.uint8)], inits)
    check(m, {"a": a})


# -- bad input ---------------------------------------------------------------------------------------


def test_a_non_scalar_scale_is_refused_naming_the_node():
    node = oh.make_node("QLinearAdd", ["a", "as", "", "b", "bs", "", "cs"], ["c"], domain=MS,
                        name="add7")  # fmt: skip
    inits = [init("as", [0.1, 0.2, 0.3]), init("bs", 0.1), init("cs", 0.1)]
    m = model([node], [vi("a", np.uint8, [2, 3]), vi("b", np.uint8, [2, 3])],
              [vi("c", np.uint8)], inits)  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"add7.*QLinearAdd.*A scale must be a scalar"):
        import_onnx(m)


def test_qlinear_concat_with_an_incomplete_triple_is_refused_naming_the_node():
    node = oh.make_node("QLinearConcat", ["ys", "yz", "x0", "s0"], ["y"], domain=MS, axis=0,
                        name="cat1")  # fmt: skip
    inits = [init("ys", 0.1), init("yz", 0, np.uint8), init("s0", 0.1)]
    m = model([node], [vi("x0", np.uint8, [2])], [vi("y", np.uint8)], inits)
    with pytest.raises(OnnxImportError, match=r"cat1.*triples"):
        import_onnx(m)


# -- QLinearSoftmax --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize(
    "shape, axis, opset",
    [((3, 5, 40), None, 13), ((3, 5, 40), 1, 13), ((3, 5, 40), None, 12), ((2, 3, 4, 7), 1, 11),
     ((2, 3, 4, 7), 0, 13), ((6, 3), -1, 13)],
)  # fmt: skip
@pytest.mark.parametrize("scales", [(0.1, 1 / 256, 0), (0.023, 1 / 255, 3), (0.5, 1 / 128, 0)])
def test_qlinear_softmax_is_onnxruntimes_bits(dtype, shape, axis, opset, scales):
    """onnxruntime's kernel: a table of exp over the input's steps, a float32 sum in order,
    round(e · floor(1 / y_scale) / sum) + zero point, saturated (the quantization tool writes
    it for the Softmax of a QOperator-quantized transformer)."""
    xs, ys, yz = scales
    if dtype == np.int8 and yz == 0:
        yz = -128
    attrs = {"opset": opset} | ({} if axis is None else {"axis": axis})
    node = oh.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                        **attrs)  # fmt: skip
    inits = [init("xs", xs), init("xz", 3, dtype), init("ys", ys), init("yz", yz, dtype)]
    x = ints(dtype, *shape)
    m = model([node], [vi("x", dtype, shape)], [vi("y", dtype)], inits)
    check(m, {"x": x})


def test_qlinear_softmax_needs_a_constant_input_scale():
    node = oh.make_node("QLinearSoftmax", ["x", "xs", "", "ys", "yz"], ["y"], domain=MS, opset=13,
                        name="sm3")  # fmt: skip
    m = model([node], [vi("x", np.uint8, (2, 5)), vi("xs", np.float32, ())], [vi("y", np.uint8)],
              [init("ys", 1 / 256), init("yz", 0, np.uint8)])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"sm3.*QLinearSoftmax needs a constant X scale"):
        import_onnx(m)


# -- MatMulNBits -----------------------------------------------------------------------------------


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """codes [..., m] (m a multiple of 8 / bits) packed low bits first into uint8 [..., m·bits/8]."""
    per = 8 // bits
    c = codes.astype(np.uint8).reshape(*codes.shape[:-1], -1, per)
    out = np.zeros(c.shape[:-1], np.uint8)
    for j in range(per):
        out |= c[..., j] << np.uint8(j * bits)
    return out


def _nbits_model(k, n, bits, block, zp_kind, bias, rank3, g_idx=False):
    rng = np.random.default_rng(k * 7 + n + bits + block)
    blocks = -(-k // block)
    top = (1 << bits) - 1
    codes = rng.integers(0, top + 1, (n, blocks, block))
    scales = rng.uniform(0.01, 0.1, (n, blocks)).astype(np.float32)
    inputs = ["a", "b", "s"]
    inits = [nh.from_array(_pack(codes, bits), "b"), nh.from_array(scales, "s")]
    zps = rng.integers(0, top + 1, (n, blocks))
    if zp_kind == "packed":
        per_row = -(-blocks * bits // 8) * (8 // bits)
        padded = np.zeros((n, per_row), np.int64)
        padded[:, :blocks] = zps
        inits.append(nh.from_array(_pack(padded, bits), "z"))
        inputs.append("z")
    elif zp_kind == "float":
        inits.append(nh.from_array(zps.astype(np.float32), "z"))
        inputs.append("z")
    else:
        inputs.append("")
    if g_idx:
        inits.append(nh.from_array((np.arange(k) // block).astype(np.int32), "g"))
        inputs.append("g")
    else:
        inputs.append("")
    if bias:
        inits.append(nh.from_array(rng.normal(size=n).astype(np.float32), "bias"))
        inputs.append("bias")
    while inputs[-1] == "":
        inputs.pop()
    node = oh.make_node("MatMulNBits", inputs, ["y"], domain=MS, K=k, N=n, bits=bits,
                        block_size=block)  # fmt: skip
    shape = [2, 3, k] if rank3 else [4, k]
    a = rng.normal(size=shape).astype(np.float32)
    m = model([node], [vi("a", np.float32, shape)], [vi("y", np.float32)], inits)
    return m, a


@pytest.mark.parametrize(
    "k, n, bits, block, zp_kind, bias, rank3",
    [(64, 24, 4, 32, "none", False, False), (80, 16, 4, 32, "packed", True, True),
     (128, 8, 4, 64, "float", False, True), (48, 10, 8, 16, "packed", True, False),
     (96, 12, 2, 32, "packed", False, False), (40, 6, 4, 16, "packed", True, True)],
)  # fmt: skip
def test_matmul_nbits_matches_onnxruntime(k, n, bits, block, zp_kind, bias, rank3):
    """onnxruntime's weight-only quantized MatMul (what its int4 quantizer writes for LLMs):
    codes packed low bits first, zero points packed or float or absent (2^(bits-1)), K not a
    multiple of the block (80, 40), a bias, a 3-D input."""
    m, a = _nbits_model(k, n, bits, block, zp_kind, bias, rank3)
    got, want = run_rill(m, {"a": a}), run_ort(m, {"a": a})
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_matmul_nbits_with_the_deprecated_group_index_is_refused():
    m, _ = _nbits_model(64, 8, 4, 32, "packed", False, False, g_idx=True)
    with pytest.raises(OnnxImportError, match="MatMulNBits: the deprecated g_idx input"):
        import_onnx(m)


def test_matmul_nbits_with_a_wrong_weight_shape_is_refused_naming_the_node():
    m, _ = _nbits_model(64, 8, 4, 32, "none", False, False)
    m.graph.node[0].name = "qproj"
    for a in m.graph.node[0].attribute:
        if a.name == "N":
            a.i = 9
    with pytest.raises(OnnxImportError, match=r"qproj.*MatMulNBits: B has shape \[8, 2, 16\]"):
        import_onnx(m)
