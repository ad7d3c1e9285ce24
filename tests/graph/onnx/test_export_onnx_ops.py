"""ONNX round trips of the ops the importer builds as rill's own (_OnnxNonMaxSuppression,
_OnnxRoiAlign, _OnnxGridSample, _OnnxDeformConv, _OnnxMaxRoiPool, _OnnxRegexFullMatch,
_OnnxStringNormalizer, _OnnxTfIdfVectorizer): a one-node ONNX model is imported, exported again
at a given opset, checked (onnx.checker, full_check), and the exported model run in onnxruntime
or onnx's ReferenceEvaluator must compute what rill's Session computes on the imported graph.

onnxruntime 1.31 lacks RoiAlign-22 and MaxRoiPool-22 (which the ReferenceEvaluator lacks too),
and needs the en_US.UTF-8 locale, absent here, for a StringNormalizer that changes case or
compares case-insensitively: the ReferenceEvaluator runs those, on ASCII words with no empty
string (it strips accents when it changes case and drops empty strings).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import AttributeProto as AP
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import UnimplementedError
from rill.graph.onnx import export_onnx, import_onnx

RNG = np.random.default_rng(20260502)
NEWEST = onnx.defs.onnx_opset_version()
ORT_NEWEST = 26  # the newest opset onnxruntime 1.31 loads (test_export_ops checks it)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def one_node(op_type, inputs, outputs, *, opset, **attrs):
    """A model of one node; `inputs` maps each graph input name to (elem type, shape)."""
    node = oh.make_node(op_type, list(inputs), outputs, name="n", **attrs)
    g = oh.make_graph([node], "t", [vi(k, *v) for k, v in inputs.items()],
                      [vi(o, TP.UNDEFINED) for o in outputs])  # fmt: skip
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def assert_same(got, want, what, rtol):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == object:  # rill's strings are bytes, the runtimes' str
        got, want = (np.vectorize(_text, otypes=[object])(v) for v in (got, want))
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, rill gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, rill gives {want.shape}"
    if want.dtype.kind == "f":
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def run_exported(em, feeds, peer):
    by_name = {i.name: v for i, v in zip(em.graph.input, feeds)}
    if peer == "ort":
        sess = ort.InferenceSession(em.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, by_name)
    return ReferenceEvaluator(em).run(None, by_name)


def check_graph(g, inputs, outputs, feeds, opset, peer="ort", rtol=1e-5):
    """Exports the rill graph at `opset`; the peer's outputs must equal rill's."""
    em = export_onnx(g, inputs, outputs, opset=opset)
    onnx.checker.check_model(em, full_check=True)
    with Session(graph=g) as s:
        want = s.run(list(outputs), dict(zip(inputs, feeds)))
    got = run_exported(em, feeds, peer)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"{peer} output {k} at opset {opset}", rtol)
    return em


def round_trip(m, feeds, opset, peer="ort", rtol=1e-5):
    """Imports m, exports it at `opset`, compares; returns the exported model."""
    g, ins, outs = import_onnx(m)
    inputs = [ins[i.name] for i in m.graph.input]
    outputs = [outs[o.name] for o in m.graph.output]
    return check_graph(g, inputs, outputs, [feeds[i.name] for i in m.graph.input], opset, peer,
                       rtol)  # fmt: skip


def the_node(em, op_type):
    nodes = [n for n in em.graph.node if n.op_type == op_type]
    assert len(nodes) == 1, [n.op_type for n in em.graph.node]
    return nodes[0]


def attrs_of(node) -> dict:
    return {a.name: oh.get_attribute_value(a) for a in node.attribute}


def refused(m, opset, match):
    g, ins, outs = import_onnx(m)
    with pytest.raises(UnimplementedError, match=match):
        export_onnx(g, [ins[i.name] for i in m.graph.input],
                    [outs[o.name] for o in m.graph.output], opset=opset)  # fmt: skip


# -- NonMaxSuppression --------------------------------------------------------------------------


def random_boxes(batches, n):
    yx = RNG.uniform(0, 10, (batches, n, 2))
    hw = RNG.uniform(1, 4, (batches, n, 2))
    return np.concatenate([yx, yx + hw], axis=-1).astype(np.float32)


def nms_model(batches, classes, n, n_inputs=5, **attrs):
    ins = {"boxes": (TP.FLOAT, [batches, n, 4]), "scores": (TP.FLOAT, [batches, classes, n]),
           "max": (TP.INT64, [1]),
           "iou": (TP.FLOAT, [1]), "score": (TP.FLOAT, [1])}  # fmt: skip
    return one_node("NonMaxSuppression", dict(list(ins.items())[:n_inputs]), ["sel"], opset=11,
                    **attrs)  # fmt: skip


@pytest.mark.parametrize("opset", [13, ORT_NEWEST])
@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms(opset, center_point_box):
    feeds = {"boxes": random_boxes(2, 30), "scores": RNG.uniform(0, 1, (2, 3, 30)).astype(np.float32),
             "max": np.array([5], np.int64), "iou": np.array([0.3], np.float32),
             "score": np.array([0.2], np.float32)}  # fmt: skip
    em = round_trip(nms_model(2, 3, 30, center_point_box=center_point_box), feeds, opset)
    assert attrs_of(the_node(em, "NonMaxSuppression")).get("center_point_box", 0) == \
        center_point_box  # fmt: skip


def test_nms_missing_thresholds_stay_missing():
    """The importer's -inf for a missing score_threshold is not written back."""
    feeds = {"boxes": random_boxes(1, 12), "scores": RNG.uniform(0, 1, (1, 2, 12)).astype(np.float32),
             "max": np.array([4], np.int64)}  # fmt: skip
    em = round_trip(nms_model(1, 2, 12, n_inputs=3), feeds, ORT_NEWEST)
    assert len(the_node(em, "NonMaxSuppression").input) == 4


def test_nms_float16_boxes_widen_and_float64_is_refused():
    boxes, scores = random_boxes(1, 10), RNG.uniform(0, 1, (1, 2, 10))
    for dt in (rg.float16, rg.float64):
        g = rg.Graph()
        with g.as_default():
            b = rg.placeholder(dt, [1, 10, 4], name="b")
            s = rg.placeholder(dt, [1, 2, 10], name="s")
            consts = [rg.constant(np.int64(3)), rg.constant(np.float32(0.4)),
                      rg.constant(np.float32(0.1))]  # fmt: skip
            sel = g.create_op("_OnnxNonMaxSuppression", [b, s, *consts], {}, name="NMS").outputs[0]
        feeds = [boxes.astype(dt.np), scores.astype(dt.np)]
        if dt == rg.float16:
            em = check_graph(g, [b, s], [sel], feeds, ORT_NEWEST)
            assert sum(n.op_type == "Cast" for n in em.graph.node) == 2
        else:
            with pytest.raises(UnimplementedError,
                               match=r"cannot export _OnnxNonMaxSuppression.*float64"):  # fmt: skip
                export_onnx(g, [b, s], [sel], opset=ORT_NEWEST)


# -- RoiAlign -----------------------------------------------------------------------------------


def roi_feeds():
    x = RNG.standard_normal((2, 3, 12, 10)).astype(np.float32)
    xy = RNG.uniform(-2, 16, (7, 2))
    rois = np.concatenate([xy, xy + RNG.uniform(0.5, 9, (7, 2))], axis=1).astype(np.float32)
    return {"x": x, "rois": rois, "bi": RNG.integers(0, 2, 7).astype(np.int64)}


def roi_model(opset, dtype=TP.FLOAT, **attrs):
    return one_node("RoiAlign", {"x": (dtype, [2, 3, 12, 10]), "rois": (dtype, [7, 4]),
                                 "bi": (TP.INT64, [7])}, ["y"], opset=opset, output_height=3,
                    output_width=4, spatial_scale=0.75, **attrs)  # fmt: skip


@pytest.mark.parametrize(("opset", "peer"), [(16, "ort"), (21, "ort"), (NEWEST, "reference")])
@pytest.mark.parametrize(("mode", "ctm", "sampling_ratio"), [
    ("avg", "half_pixel", 0), ("avg", "output_half_pixel", 2), ("max", "half_pixel", 2),
    ("max", "output_half_pixel", 0),
])  # fmt: skip
def test_roi_align(opset, peer, mode, ctm, sampling_ratio):
    m = roi_model(16, mode=mode, coordinate_transformation_mode=ctm, sampling_ratio=sampling_ratio)
    em = round_trip(m, roi_feeds(), opset, peer, rtol=1e-4)
    assert attrs_of(the_node(em, "RoiAlign"))["coordinate_transformation_mode"] == ctm.encode()


def test_roi_align_before_opset_16_is_output_half_pixel():
    """An opset-10 model (output_half_pixel, no attribute) exports to opset 13 as it was; a
    half_pixel one cannot, and says which opset it needs."""
    em = round_trip(roi_model(10, mode="avg", sampling_ratio=2), roi_feeds(), 13, rtol=1e-4)
    assert "coordinate_transformation_mode" not in attrs_of(the_node(em, "RoiAlign"))
    m = roi_model(16, coordinate_transformation_mode="half_pixel")
    refused(m, 15, r"(?s)cannot export _OnnxRoiAlign op 'n/RoiAlign.*half_pixel coordinates needs "
                   r"opset 16 or newer")  # fmt: skip


def test_roi_align_bfloat16_before_opset_22_is_refused():
    refused(roi_model(22, dtype=TP.BFLOAT16), 21,
            r"cannot export _OnnxRoiAlign.*takes X of .*tensor\(double\), not bfloat16")  # fmt: skip


# -- GridSample ---------------------------------------------------------------------------------


def grid_model(opset, x_shape, g_shape, **attrs):
    return one_node("GridSample", {"x": (TP.FLOAT, x_shape), "g": (TP.FLOAT, g_shape)}, ["y"],
                    opset=opset, **attrs)  # fmt: skip


@pytest.mark.parametrize("opset", [16, 19, 20, ORT_NEWEST])
@pytest.mark.parametrize(("mode", "padding_mode", "align_corners"), [
    ("linear", "zeros", 0), ("nearest", "border", 1), ("cubic", "reflection", 0),
    ("cubic", "border", 1),
])  # fmt: skip
def test_grid_sample(opset, mode, padding_mode, align_corners):
    """Opsets 16 to 19 name the modes bilinear and bicubic."""
    m = grid_model(20, [2, 3, 5, 7], [2, 4, 6, 2], mode=mode, padding_mode=padding_mode,
                   align_corners=align_corners)  # fmt: skip
    feeds = {"x": RNG.standard_normal((2, 3, 5, 7)).astype(np.float32),
             "g": RNG.uniform(-1.6, 1.6, (2, 4, 6, 2)).astype(np.float32)}  # fmt: skip
    em = round_trip(m, feeds, opset, rtol=1e-4)
    names = {"linear": "bilinear", "cubic": "bicubic"} if opset < 20 else {}
    assert attrs_of(the_node(em, "GridSample"))["mode"] == names.get(mode, mode).encode()


def test_grid_sample_volumetric_needs_opset_20():
    m = grid_model(20, [1, 2, 3, 4, 5], [1, 2, 3, 2, 3], mode="linear",
                   padding_mode="reflection")  # fmt: skip
    feeds = {"x": RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32),
             "g": RNG.uniform(-1.4, 1.4, (1, 2, 3, 2, 3)).astype(np.float32)}  # fmt: skip
    round_trip(m, feeds, 20, rtol=1e-4)
    refused(m, 19, r"cannot export _OnnxGridSample.*5-D needs opset 20 or newer.*4-D inputs only")
    refused(grid_model(20, None, None), 19, r"of unknown rank needs opset 20")


def test_grid_sample_before_opset_16_is_refused():
    refused(grid_model(16, [1, 1, 4, 4], [1, 2, 2, 2]), 15,
            r"cannot export _OnnxGridSample op 'n/GridSample.*ONNX has GridSample from opset 16 on, "
            r"and this export targets opset 15")  # fmt: skip


# -- DeformConv ---------------------------------------------------------------------------------


def deform_case(with_mask, with_bias, offset_group=1, group=1):
    n, c, h, w, oc, k = 2, 4, 6, 5, 6, 3
    pads, strides = [1, 0, 1, 1], [1, 2]
    oh_, ow = (h + 2 - k) // 1 + 1, (w + 1 - k) // 2 + 1
    ins = {"x": (TP.FLOAT, [n, c, h, w]), "w": (TP.FLOAT, [oc, c // group, k, k]),
           "offset": (TP.FLOAT, [n, offset_group * k * k * 2, oh_, ow])}  # fmt: skip
    feeds = {"x": RNG.standard_normal((n, c, h, w)).astype(np.float32),
             "w": RNG.standard_normal((oc, c // group, k, k)).astype(np.float32),
             "offset": RNG.uniform(-1.5, 1.5, (n, offset_group * k * k * 2, oh_, ow)).astype(
                 np.float32)}  # fmt: skip
    names = ["x", "w", "offset"]
    if with_bias or with_mask:
        names.append("b" if with_bias else "")
        if with_bias:
            ins["b"] = (TP.FLOAT, [oc])
            feeds["b"] = RNG.standard_normal(oc).astype(np.float32)
    if with_mask:
        names.append("mask")
        ins["mask"] = (TP.FLOAT, [n, offset_group * k * k, oh_, ow])
        feeds["mask"] = RNG.uniform(0, 1, (n, offset_group * k * k, oh_, ow)).astype(np.float32)
    node = oh.make_node("DeformConv", names, ["y"], pads=pads, strides=strides, group=group,
                        offset_group=offset_group)  # fmt: skip
    g = oh.make_graph([node], "t", [vi(k_, *v) for k_, v in ins.items()], [vi("y", TP.UNDEFINED)])
    ops = [oh.make_opsetid("", 19)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops)), feeds


@pytest.mark.parametrize("opset", [19, ORT_NEWEST])
@pytest.mark.parametrize(("with_mask", "with_bias", "offset_group", "group"), [
    (False, False, 1, 1), (True, True, 1, 1), (True, False, 2, 2), (False, True, 2, 1),
])  # fmt: skip
def test_deform_conv(opset, with_mask, with_bias, offset_group, group):
    m, feeds = deform_case(with_mask, with_bias, offset_group, group)
    em = round_trip(m, feeds, opset, rtol=1e-4)
    node = the_node(em, "DeformConv")
    assert len(node.input) == (5 if with_mask else 3)  # the bias is an Add after it
    assert attrs_of(node)["kernel_shape"] == [3, 3]


def test_deform_conv_before_opset_19_is_refused():
    m, _ = deform_case(True, True)
    refused(m, 18, r"cannot export _OnnxDeformConv.*ONNX has DeformConv from opset 19 on")


# -- MaxRoiPool ---------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [13, 21, NEWEST])
def test_max_roi_pool(opset):
    """At opset 22 and newer only onnx.checker judges the model: onnxruntime lacks
    MaxRoiPool-22 and the ReferenceEvaluator has no MaxRoiPool."""
    m = one_node("MaxRoiPool", {"x": (TP.FLOAT, [2, 3, 10, 9]), "rois": (TP.FLOAT, [5, 5])},
                 ["y"], opset=13, pooled_shape=[3, 2], spatial_scale=0.5)  # fmt: skip
    corners = RNG.uniform(0, 18, (5, 2))
    rois = np.concatenate([RNG.integers(0, 2, (5, 1)), corners,
                           corners + RNG.uniform(1, 8, (5, 2))], axis=1)  # fmt: skip
    feeds = {"x": RNG.standard_normal((2, 3, 10, 9)).astype(np.float32),
             "rois": rois.astype(np.float32)}  # fmt: skip
    if opset < 22:
        em = round_trip(m, feeds, opset)
    else:
        g, ins, outs = import_onnx(m)
        em = export_onnx(g, [ins["x"], ins["rois"]], [outs["y"]], opset=opset)
        onnx.checker.check_model(em, full_check=True)
    assert attrs_of(the_node(em, "MaxRoiPool"))["pooled_shape"] == [3, 2]


# -- strings ------------------------------------------------------------------------------------

WORDS = np.array(["monday", "Tuesday", "MONDAY", "école", "x9", ""], dtype=object)
ASCII = np.array(["monday", "Tuesday", "MONDAY", "Ecole", "x9", "b"], dtype=object)


@pytest.mark.parametrize("opset", [20, ORT_NEWEST])
@pytest.mark.parametrize("pattern", [r"\w+\d$", r"(?i)mon\w*", r"[[:alpha:]]+", r"\x{e9}.*"])
def test_regex_full_match_writes_the_re2_pattern(opset, pattern):
    m = one_node("RegexFullMatch", {"s": (TP.STRING, [6])}, ["y"], opset=20, pattern=pattern)
    em = round_trip(m, {"s": WORDS}, opset)
    assert attrs_of(the_node(em, "RegexFullMatch"))["pattern"] == pattern.encode()


def test_regex_full_match_before_opset_20_is_refused():
    m = one_node("RegexFullMatch", {"s": (TP.STRING, [6])}, ["y"], opset=20, pattern="a+")
    refused(m, 19, r"cannot export _OnnxRegexFullMatch.*RegexFullMatch from opset 20 on")


@pytest.mark.parametrize("opset", [13, ORT_NEWEST])
@pytest.mark.parametrize(("attrs", "shape", "peer"), [
    ({}, [6], "ort"),
    ({"stopwords": ["monday", "x9"], "is_case_sensitive": 1}, [6], "ort"),
    ({"stopwords": ["monday"], "case_change_action": "UPPER"}, [1, 6], "reference"),
    ({"case_change_action": "LOWER"}, [6], "reference"),
    ({"stopwords": list(WORDS), "is_case_sensitive": 1}, [1, 6], "ort"),  # all dropped: [1, 1]
])  # fmt: skip
def test_string_normalizer(opset, attrs, shape, peer):
    m = one_node("StringNormalizer", {"s": (TP.STRING, shape)}, ["y"], opset=10, **attrs)
    words = WORDS if peer == "ort" else ASCII
    em = round_trip(m, {"s": words.reshape(shape)}, opset, peer)
    written = attrs_of(the_node(em, "StringNormalizer"))
    assert [w.decode() for w in written.get("stopwords", [])] == attrs.get("stopwords", [])


def tfidf_model(dtype, shape, pool, **attrs):
    key = "pool_strings" if dtype == TP.STRING else "pool_int64s"
    return one_node("TfIdfVectorizer", {"x": (dtype, shape)}, ["y"], opset=9, min_gram_length=1,
                    max_gram_length=2, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4, 5],
                    **{key: pool}, **attrs)  # fmt: skip


@pytest.mark.parametrize("opset", [13, ORT_NEWEST])
@pytest.mark.parametrize(("mode", "weights", "skip"), [
    ("TF", None, 0), ("IDF", [0.5, 1, 2, 1.5, 3, 0.25], 1), ("TFIDF", [2, 1, 1, 1, 1, 4], 3),
])  # fmt: skip
def test_tfidf_vectorizer(opset, mode, weights, skip):
    extra = {"weights": weights} if weights else {}
    ints = tfidf_model(TP.INT64, [2, 8], [2, 3, 5, 2, 3, 5, 7, 3, 4], mode=mode, max_skip_count=skip,
                       **extra)  # fmt: skip
    x = np.array([[2, 3, 5, 4, 5, 7, 3, 4], [5, 2, 3, 3, 5, 7, 3, 2]], np.int64)
    round_trip(ints, {"x": x}, opset)
    words = ["a", "b", "c", "a", "b", "c", "d", "b", "e"]
    strs = tfidf_model(TP.STRING, [9], words, mode=mode, max_skip_count=skip, **extra)
    s = np.array(["a", "b", "c", "e", "c", "d", "b", "e", "a"], dtype=object)
    em = round_trip(strs, {"x": s}, opset)
    written = attrs_of(the_node(em, "TfIdfVectorizer"))
    assert [w.decode() for w in written["pool_strings"]] == words
    assert ("weights" in written) == bool(weights)


def test_tfidf_vectorizer_of_an_empty_pool_is_refused():
    """rill imports it (it counts nothing); ONNX's schema refuses empty ngram_indexes."""
    m = one_node("TfIdfVectorizer", {"x": (TP.INT64, [3])}, ["y"], opset=9, mode="TF",
                 min_gram_length=1, max_gram_length=1, max_skip_count=0)  # fmt: skip
    for name in ("pool_int64s", "ngram_counts", "ngram_indexes"):
        m.graph.node[0].attribute.append(oh.make_attribute(name, [], attr_type=AP.INTS))
    refused(m, 13, r"cannot export _OnnxTfIdfVectorizer.*pool_int64s, ngram_counts and "
                   r"ngram_indexes that are not empty")  # fmt: skip


def test_deform_conv_scalar_mask_scales_the_output():
    """A scalar mask other than 1 (only a hand-built graph has one) is a Mul after DeformConv."""
    _, feeds = deform_case(False, False)
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.float32, feeds[k].shape, name=k) for k in ("x", "w", "offset")]
        mask = rg.placeholder(rg.float32, [], name="mask")
        attrs = {"strides": [1, 2], "pads": [1, 0, 1, 1], "dilations": [1, 1]}
        y = g.create_op("_OnnxDeformConv", [*phs, mask], attrs, name="dc").outputs[0]
    vals = [feeds[k] for k in ("x", "w", "offset")] + [np.array(0.5, np.float32)]
    em = check_graph(g, [*phs, mask], [y], vals, ORT_NEWEST, rtol=1e-4)
    assert [n.op_type for n in em.graph.node][-2:] == ["DeformConv", "Mul"]
