"""import_onnx of the random generators (RandomNormal, RandomUniform, their Like forms,
Bernoulli, Multinomial) and of BitCast, GlobalLpPool, MaxRoiPool and DeformConv.

The generators' values are rill's own (ONNX leaves the generator unspecified), so their tests
check distributions on large samples (mean and variance within several standard errors), ranges,
shapes, dtypes and seeding. The other ops are checked against onnx's ReferenceEvaluator, or
onnxruntime where the evaluator lacks the op, on random inputs.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from rill.exec import Session
from rill.graph.errors import OpError
from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(20240611)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=22):
    g = oh.make_graph(nodes, "t", inputs, outputs)
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def one_node(op_type, inputs, out_elem=TP.FLOAT, opset=22, **attrs):
    """A model of one node named 'the_node': inputs are (name, elem type, shape) triples."""
    node = oh.make_node(op_type, [i[0] for i in inputs], ["y"], name="the_node", **attrs)
    return model([node], [vi(*i) for i in inputs], [vi("y", out_elem)], opset)


def run(m, feeds=None, runs=1, session=None):
    """rill's output of `m` for `runs` runs of one session (a list when runs > 1)."""
    g, inputs, outputs = import_onnx(m)
    feed = {inputs[k]: v for k, v in (feeds or {}).items()}
    with Session(graph=g) as s:
        got = [np.asarray(s.run(outputs["y"], feed)) for _ in range(runs)]
    return got[0] if runs == 1 else got


def reference(m, feeds):
    return ReferenceEvaluator(m).run(None, feeds)[0]


def onnxruntime(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def assert_moments(y, mean, var, n_sigma=6.0, check_var=True):
    """y's sample mean (and variance) are within n_sigma standard errors of mean and var. The
    variance check suits normal and uniform samples (the variance of a sample variance is 2σ⁴/n
    for the normal, less for the uniform); a 0/1 sample's variance follows from its mean."""
    n = y.size
    y = y.astype(np.float64)
    assert abs(y.mean() - mean) <= n_sigma * np.sqrt(var / n), (y.mean(), mean)
    if check_var:
        assert abs(y.var() - var) <= n_sigma * var * np.sqrt(2.0 / n), (y.var(), var)


# -- RandomNormal, RandomUniform ---------------------------------------------------------------


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16])
def test_random_normal_has_the_asked_shape_dtype_mean_and_scale(elem):
    m = one_node("RandomNormal", [], elem, shape=[200, 300], mean=2.5, scale=3.0, dtype=elem)
    y = run(m)
    assert y.shape == (200, 300)
    assert y.dtype == {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16}[elem]
    assert_moments(y, 2.5, 9.0)


def test_random_normal_defaults_to_standard_float32():
    y = run(one_node("RandomNormal", [], shape=[100000]))
    assert y.dtype == np.float32 and y.shape == (100000,)
    assert_moments(y, 0.0, 1.0)


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16])
def test_random_uniform_stays_in_range_with_the_uniform_moments(elem):
    m = one_node("RandomUniform", [], elem, shape=[300, 200], low=-2.0, high=5.0, dtype=elem)
    y = run(m)
    assert y.shape == (300, 200)
    assert y.min() >= -2.0 and y.max() <= 5.0
    assert y.min() < -1.9 and y.max() > 4.9
    assert_moments(y, 1.5, 49.0 / 12.0)


def test_random_uniform_defaults_to_the_unit_interval():
    y = run(one_node("RandomUniform", [], shape=[4, 25000]))
    assert y.dtype == np.float32 and y.shape == (4, 25000)
    assert y.min() >= 0.0 and y.max() < 1.0
    assert_moments(y, 0.5, 1.0 / 12.0)


@pytest.mark.parametrize("op_type", ["RandomNormalLike", "RandomUniformLike"])
def test_like_forms_take_the_input_shape_and_dtype_unless_dtype_is_given(op_type):
    x = np.zeros((30, 40, 50), np.float64)
    y = run(one_node(op_type, [("x", TP.DOUBLE, [None, 40, 50])], TP.DOUBLE), {"x": x})
    assert y.shape == x.shape and y.dtype == np.float64
    xi = np.zeros((7, 3), np.int32)
    y = run(one_node(op_type, [("x", TP.INT32, [7, 3])], TP.FLOAT16, dtype=TP.FLOAT16),
            {"x": xi})  # fmt: skip
    assert y.shape == (7, 3) and y.dtype == np.float16


def test_like_forms_draw_with_their_parameters():
    x = np.zeros((400, 250), np.float32)
    y = run(one_node("RandomNormalLike", [("x", TP.FLOAT, [400, 250])], mean=-1.0, scale=0.5),
            {"x": x})  # fmt: skip
    assert_moments(y, -1.0, 0.25)
    y = run(one_node("RandomUniformLike", [("x", TP.FLOAT, [400, 250])], low=10.0, high=12.0),
            {"x": x})  # fmt: skip
    assert y.min() >= 10.0 and y.max() <= 12.0
    assert_moments(y, 11.0, 4.0 / 12.0)


@pytest.mark.parametrize(
    "op_type, attrs",
    [("RandomNormal", {"shape": [50]}), ("RandomUniform", {"shape": [50]}),
     ("RandomNormalLike", {}), ("RandomUniformLike", {}), ("Bernoulli", {})],
)  # fmt: skip
def test_a_seed_gives_the_same_values_in_every_fresh_session(op_type, attrs):
    inputs = [] if "shape" in attrs else [("x", TP.FLOAT, [50])]
    feeds = {} if "shape" in attrs else {"x": np.full(50, 0.5, np.float32)}

    def make(**more):
        return one_node(op_type, inputs, **attrs, **more)

    first, second = run(make(seed=3.0), feeds, runs=2)
    again = run(make(seed=3.0), feeds)
    np.testing.assert_array_equal(first, again)
    # As with TensorFlow's op seeds, one session's runs continue the sequence.
    assert not np.array_equal(first, second)
    assert not np.array_equal(first, run(make(seed=4.0), feeds))
    assert not np.array_equal(first, run(make(seed=0.0), feeds))
    np.testing.assert_array_equal(run(make(seed=0.0), feeds), run(make(seed=0.0), feeds))
    # Without a seed, each fresh session draws afresh.
    assert not np.array_equal(run(make(), feeds), run(make(), feeds))


def test_random_generators_refuse_non_float_dtypes_naming_the_node():
    with pytest.raises(OnnxImportError, match=r"'the_node'.*RandomNormal.*not int32"):
        import_onnx(one_node("RandomNormal", [], TP.INT32, shape=[2], dtype=TP.INT32))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*not int64.*dtype attribute"):
        import_onnx(one_node("RandomUniformLike", [("x", TP.INT64, [2])], TP.INT64))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*negative dimension"):
        import_onnx(one_node("RandomUniform", [], shape=[2, -1]))


# -- Bernoulli, Multinomial -------------------------------------------------------------------


def test_bernoulli_draws_one_with_probability_p():
    probs = np.array([0.0, 0.1, 0.5, 0.85, 1.0])
    p = np.repeat(probs[:, None], 40000, axis=1).astype(np.float32)
    y = run(one_node("Bernoulli", [("p", TP.FLOAT, [5, 40000])]), {"p": p})
    assert y.dtype == np.float32 and y.shape == p.shape
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert not y[0].any() and y[4].all()
    for row, q in zip(y[1:4], probs[1:4], strict=True):
        assert_moments(row, q, q * (1 - q), check_var=False)


@pytest.mark.parametrize(
    "in_elem, out_elem, np_out",
    [(TP.DOUBLE, TP.INT32, np.int32), (TP.FLOAT, TP.BOOL, np.bool_),
     (TP.FLOAT16, TP.DOUBLE, np.float64), (TP.DOUBLE, None, np.float64)],
)  # fmt: skip
def test_bernoulli_gives_the_dtype_asked_or_the_input_dtype(in_elem, out_elem, np_out):
    attrs = {} if out_elem is None else {"dtype": out_elem}
    m = one_node("Bernoulli", [("p", in_elem, [3, 4])], out_elem or in_elem, **attrs)
    p = np.full((3, 4), 0.5, oh.tensor_dtype_to_np_dtype(in_elem))
    y = run(m, {"p": p})
    assert y.dtype == np_out and y.shape == (3, 4)


@pytest.mark.parametrize("elem, np_out", [(None, np.int32), (TP.INT32, np.int32),
                                          (TP.INT64, np.int64)])  # fmt: skip
def test_multinomial_samples_classes_by_unnormalized_log_probability(elem, np_out):
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
    logits = (np.log(np.maximum(probs, 1e-30)) + [[3.0], [-7.0]]).astype(np.float32)
    attrs = {} if elem is None else {"dtype": elem}
    m = one_node("Multinomial", [("x", TP.FLOAT, [2, 3])], elem or TP.INT32, sample_size=30000,
                 **attrs)  # fmt: skip
    y = run(m, {"x": logits})
    assert y.dtype == np_out and y.shape == (2, 30000)
    assert y.min() >= 0 and y.max() <= 2
    assert not (y[1] == 1).any()
    for row, pr in zip(y, probs, strict=True):
        for k, q in enumerate(pr):
            assert_moments((row == k).astype(np.float64), q, q * (1 - q), check_var=False)


def test_multinomial_with_a_seed_repeats_and_checks_its_attributes():
    m = one_node("Multinomial", [("x", TP.DOUBLE, [1, 4])], TP.INT64, sample_size=64,
                 dtype=TP.INT64, seed=1.5)  # fmt: skip
    x = np.zeros((1, 4))
    np.testing.assert_array_equal(run(m, {"x": x}), run(m, {"x": x}))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*int32 or int64 samples, not float32"):
        import_onnx(one_node("Multinomial", [("x", TP.FLOAT, [1, 4])], dtype=TP.FLOAT))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*2-D input"):
        import_onnx(one_node("Multinomial", [("x", TP.FLOAT, [4])], TP.INT32))


# -- BitCast ------------------------------------------------------------------------------------


BITCASTS = [
    (TP.FLOAT, TP.INT32), (TP.FLOAT, TP.UINT32), (TP.INT32, TP.FLOAT), (TP.DOUBLE, TP.INT64),
    (TP.UINT64, TP.DOUBLE), (TP.INT64, TP.COMPLEX64), (TP.COMPLEX64, TP.UINT64),
    (TP.FLOAT16, TP.INT16), (TP.BFLOAT16, TP.UINT16), (TP.UINT16, TP.FLOAT16),
    (TP.FLOAT16, TP.BFLOAT16), (TP.INT8, TP.UINT8), (TP.UINT8, TP.INT8), (TP.BOOL, TP.UINT8),
    (TP.UINT8, TP.FLOAT8E4M3FN), (TP.FLOAT8E5M2, TP.INT8),
]  # fmt: skip


def _bits(elem, shape):
    """Random values of an ONNX type whose bit patterns are all valid (no NaN payload issues:
    the patterns are compared, not the values)."""
    np_t = oh.tensor_dtype_to_np_dtype(elem)
    if elem == TP.BOOL:
        return RNG.integers(0, 2, shape).astype(np.bool_)
    width = np.dtype(np_t).itemsize
    raw = RNG.integers(0, 256, (*shape, width), dtype=np.uint8)
    return raw.view(np_t).reshape(shape)


@pytest.mark.parametrize("src, dst", BITCASTS)
def test_bitcast_keeps_the_bits(src, dst):
    x = _bits(src, (3, 5))
    m = one_node("BitCast", [("x", src, [3, 5])], dst, opset=26, to=dst)
    y = run(m, {"x": x})
    assert y.dtype == oh.tensor_dtype_to_np_dtype(dst) and y.shape == (3, 5)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))
    if src in (TP.FLOAT, TP.INT32, TP.DOUBLE, TP.INT64, TP.INT8, TP.UINT8, TP.BOOL):
        want = reference(m, {"x": x})
        np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_bitcast_of_scalars_same_type_bool_and_four_bit_types():
    m = one_node("BitCast", [("x", TP.FLOAT, [])], TP.INT32, opset=26, to=TP.INT32)
    assert run(m, {"x": np.float32(1.0)}) == np.int32(0x3F800000)
    m = one_node("BitCast", [("x", TP.FLOAT, [2])], TP.FLOAT, opset=26, to=TP.FLOAT)
    np.testing.assert_array_equal(run(m, {"x": np.float32([1, 2])}), [1, 2])
    m = one_node("BitCast", [("x", TP.UINT8, [4])], TP.BOOL, opset=26, to=TP.BOOL)
    np.testing.assert_array_equal(run(m, {"x": np.uint8([0, 1, 2, 255])}), [0, 1, 1, 1])
    m = one_node("BitCast", [("x", TP.INT4, [4])], TP.UINT4, opset=26, to=TP.UINT4)
    import ml_dtypes

    got = run(m, {"x": np.array([-1, -8, 7, 0], ml_dtypes.int4)})
    assert got.dtype == ml_dtypes.uint4
    np.testing.assert_array_equal(got.astype(np.int64), [15, 8, 7, 0])


def test_bitcast_between_widths_is_refused_naming_the_node():
    with pytest.raises(OnnxImportError, match=r"'the_node'.*float32 \(32 bits\).*int64 \(64"):
        import_onnx(one_node("BitCast", [("x", TP.FLOAT, [2])], TP.INT64, opset=26, to=TP.INT64))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*string"):
        import_onnx(one_node("BitCast", [("x", TP.INT64, [2])], TP.STRING, opset=26,
                             to=TP.STRING))  # fmt: skip


# -- GlobalLpPool -------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 5, 4), (1, 2, 3, 4, 5)])
def test_global_lp_pool_matches_onnxruntime(p, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    # onnxruntime implements GlobalLpPool and MaxRoiPool up to opset 21 (22 added bfloat16).
    m = one_node("GlobalLpPool", [("x", TP.FLOAT, list(shape))], opset=21, p=p)
    y = run(m, {"x": x})
    assert y.shape == shape[:2] + (1,) * (len(shape) - 2)
    np.testing.assert_allclose(y, onnxruntime(m, {"x": x}), rtol=1e-5, atol=1e-6)


def test_global_lp_pool_double_and_refusals():
    x = RNG.standard_normal((2, 2, 3, 3))
    m = one_node("GlobalLpPool", [("x", TP.DOUBLE, [2, 2, 3, 3])], TP.DOUBLE, p=4)
    want = (np.abs(x) ** 4).sum(axis=(2, 3), keepdims=True) ** 0.25
    np.testing.assert_allclose(run(m, {"x": x}), want, rtol=1e-12)
    with pytest.raises(OnnxImportError, match=r"'the_node'.*p=0 must be positive"):
        import_onnx(one_node("GlobalLpPool", [("x", TP.FLOAT, [1, 1, 2])], p=0))
    with pytest.raises(OnnxImportError, match=r"'the_node'.*not int32"):
        import_onnx(one_node("GlobalLpPool", [("x", TP.INT32, [1, 1, 2])], TP.INT32))


# -- MaxRoiPool ---------------------------------------------------------------------------------


def _rois(k, n, h, w, scale):
    """k random rois over n images of h × w (at 1/scale), some reaching past the borders."""
    b = RNG.integers(0, n, k)
    x1, x2 = np.sort(RNG.uniform(-2, w / scale + 2, (2, k)), axis=0)
    y1, y2 = np.sort(RNG.uniform(-2, h / scale + 2, (2, k)), axis=0)
    return np.stack([b, x1, y1, x2, y2], axis=1).astype(np.float32)


@pytest.mark.parametrize(
    "n, c, h, w, pooled, scale",
    [(1, 2, 6, 6, [2, 2], 1.0), (2, 3, 10, 8, [3, 2], 0.5), (3, 1, 12, 12, [4, 5], 0.25),
     (1, 4, 5, 9, [1, 1], 1.0), (2, 2, 7, 7, [7, 7], 1.0)],
)  # fmt: skip
def test_max_roi_pool_matches_onnxruntime(n, c, h, w, pooled, scale):
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    rois = _rois(6, n, h, w, scale)
    m = one_node("MaxRoiPool", [("x", TP.FLOAT, [n, c, h, w]), ("rois", TP.FLOAT, [6, 5])],
                 opset=21, pooled_shape=pooled, spatial_scale=scale)  # fmt: skip
    y = run(m, {"x": x, "rois": rois})
    assert y.shape == (6, c, *pooled)
    np.testing.assert_array_equal(y, onnxruntime(m, {"x": x, "rois": rois}))


def test_max_roi_pool_bad_input_names_the_node():
    m = one_node("MaxRoiPool", [("x", TP.FLOAT, [1, 1, 4, 4]), ("rois", TP.FLOAT, [1, 5])],
                 pooled_shape=[2, 2])  # fmt: skip
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(OpError, match=r"(?s)batch 3, not an image index in \[0, 1\).*%the_node/"):
        run(m, {"x": x, "rois": np.float32([[3, 0, 0, 1, 1]])})
    inputs = [("x", TP.FLOAT, [1, 1, 4, 4]), ("rois", TP.FLOAT, [1, 5])]
    with pytest.raises(OnnxImportError, match=r"'the_node'.*pooled_shape.*\[2\]"):
        import_onnx(one_node("MaxRoiPool", inputs, pooled_shape=[2]))
    inputs[1] = ("rois", TP.FLOAT, [1, 4])
    with pytest.raises(OnnxImportError, match=r"'the_node'.*rois must have shape"):
        import_onnx(one_node("MaxRoiPool", inputs, pooled_shape=[2, 2]))


# -- DeformConv ---------------------------------------------------------------------------------


def _deform_case(n, c, oc, hw, k, *, group=1, offset_group=1, strides=(1, 1), pads=(0, 0, 0, 0),
                 dilations=(1, 1), mask=False, bias=False, spread=2.0):  # fmt: skip
    h, w = hw
    oh_ = (h + pads[0] + pads[2] - dilations[0] * (k[0] - 1) - 1) // strides[0] + 1
    ow_ = (w + pads[1] + pads[3] - dilations[1] * (k[1] - 1) - 1) // strides[1] + 1
    taps = k[0] * k[1]
    feeds = {
        "x": RNG.standard_normal((n, c, h, w)).astype(np.float32),
        "w": RNG.standard_normal((oc, c // group, *k)).astype(np.float32),
        "offset": (RNG.standard_normal((n, offset_group * taps * 2, oh_, ow_)) * spread).astype(
            np.float32
        ),
    }
    names = ["x", "w", "offset"]
    if bias:
        feeds["b"] = RNG.standard_normal(oc).astype(np.float32)
    names.append("b" if bias else "")
    if mask:
        feeds["mask"] = RNG.uniform(0, 1, (n, offset_group * taps, oh_, ow_)).astype(np.float32)
        names.append("mask")
    node = oh.make_node("DeformConv", names, ["y"], name="the_node", group=group,
                        offset_group=offset_group, strides=list(strides), pads=list(pads),
                        dilations=list(dilations), kernel_shape=list(k))  # fmt: skip
    inputs = [vi(k_, TP.FLOAT, list(v.shape)) for k_, v in feeds.items()]
    return model([node], inputs, [vi("y")]), feeds


@pytest.mark.parametrize(
    "n, c, oc, hw, k, kw",
    [
        (1, 1, 1, (5, 5), (3, 3), {}),
        (2, 3, 4, (6, 7), (2, 3), {"pads": (1, 2, 0, 1), "bias": True}),
        (1, 4, 6, (8, 8), (3, 3), {"group": 2, "offset_group": 2, "mask": True}),
        (2, 4, 2, (9, 7), (3, 2), {"strides": (2, 1), "dilations": (1, 2), "mask": True,
                                   "bias": True, "offset_group": 4}),
        (1, 6, 3, (5, 6), (1, 1), {"group": 3, "offset_group": 3, "pads": (1, 1, 1, 1)}),
        (1, 2, 2, (4, 4), (2, 2), {"spread": 10.0, "pads": (2, 2, 2, 2), "strides": (3, 2)}),
    ],
)  # fmt: skip
def test_deform_conv_matches_the_reference_evaluator(n, c, oc, hw, k, kw):
    m, feeds = _deform_case(n, c, oc, hw, k, **kw)
    y = run(m, feeds)
    want = reference(m, feeds)
    assert y.shape == want.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spatial, k, pads", [((9,), (3,), [1, 2]), ((4, 5, 3), (2, 3, 1), [0, 1, 0, 1, 0, 0])]
)
def test_deform_conv_with_zero_offsets_is_a_convolution_in_1d_and_3d(spatial, k, pads):
    r = len(spatial)
    out = [s + pads[i] + pads[r + i] - k[i] + 1 for i, s in enumerate(spatial)]
    x = RNG.standard_normal((2, 3, *spatial)).astype(np.float32)
    w = RNG.standard_normal((4, 3, *k)).astype(np.float32)
    offset = np.zeros((2, int(np.prod(k)) * r, *out), np.float32)
    inputs = [vi("x", TP.FLOAT, list(x.shape)), vi("w", TP.FLOAT, list(w.shape))]
    conv = model([oh.make_node("Conv", ["x", "w"], ["y"], pads=pads)], inputs, [vi("y")])
    deform = model([oh.make_node("DeformConv", ["x", "w", "offset"], ["y"], pads=pads)],
                   [*inputs, vi("offset", TP.FLOAT, list(offset.shape))], [vi("y")])  # fmt: skip
    y = run(deform, {"x": x, "w": w, "offset": offset})
    np.testing.assert_allclose(y, onnxruntime(conv, {"x": x, "w": w}), rtol=1e-5, atol=1e-5)


def test_deform_conv_double_and_nan_offsets():
    m, feeds = _deform_case(1, 2, 2, (5, 5), (2, 2), mask=True)
    m64 = m.__class__()
    m64.CopyFrom(m)
    for v in (*m64.graph.input, *m64.graph.output):
        v.type.tensor_type.elem_type = TP.DOUBLE
    feeds64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    # onnx's evaluator samples through its GridSample helpers, which keep float32 weights.
    np.testing.assert_allclose(run(m64, feeds64), reference(m64, feeds64), rtol=1e-5)
    feeds["offset"][0, 0, 1, 1] = np.nan
    y = run(m, feeds)
    assert np.isnan(y[0, :, 1, 1]).all() and np.isfinite(np.delete(y.reshape(2, -1), 5, 1)).all()


def _set_attr(m, name, value):
    attr = next(a for a in m.graph.node[0].attribute if a.name == name)
    attr.CopyFrom(oh.make_attribute(name, value))


def test_deform_conv_bad_input_names_the_node():
    m, feeds = _deform_case(1, 2, 2, (5, 5), (2, 2))
    m.graph.input[2].type.tensor_type.ClearField("shape")
    feeds["offset"] = feeds["offset"][:, :4]
    with pytest.raises(OpError, match=r"(?s)offset must be \[N, offset_group.*%the_node/"):
        run(m, feeds)
    m, feeds = _deform_case(1, 3, 2, (5, 5), (2, 2))
    _set_attr(m, "group", 2)
    with pytest.raises(OnnxImportError, match=r"'the_node'.*C / group.*group 2"):
        import_onnx(m)
    m.graph.input[1].type.tensor_type.ClearField("shape")
    with pytest.raises(OpError, match=r"(?s)with group 2.*%the_node/"):
        run(m, feeds)
    _set_attr(m, "strides", [1])
    with pytest.raises(OnnxImportError, match=r"'the_node'.*strides \[1\] must have 2 values"):
        import_onnx(m)
