"""ONNX export of TensorFlow's detection ops: NonMaxSuppressionV3/V4/V5
(tf.image.non_max_suppression and its padded and scored forms) as ONNX's NonMaxSuppression,
where onnxruntime selects what rill selects, in the same order, on overlapping random boxes
(soft-NMS is refused); CropAndResize (tf.image.crop_and_resize), bilinear and nearest, with
boxes reaching outside the image, flipped boxes and one-sample crops; and ExtractImagePatches
over strides, rates and both paddings; against rill."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx
from rill.graph.ops import image_ops, nms_ops

RNG = np.random.default_rng(20261127)


def boxes_and_scores(n=40):
    lo = RNG.uniform(0, 8, (n, 2)).astype(np.float32)
    size = RNG.uniform(0.5, 4, (n, 2)).astype(np.float32)
    boxes = np.concatenate([lo, lo + size], axis=1)
    boxes[::7] = boxes[::7][:, [2, 3, 0, 1]]  # some given corner-flipped
    return boxes, RNG.permutation(n).astype(np.float32) / n


def both(build, feeds):
    g = rg.Graph()
    with g.as_default():
        b = rg.placeholder(rg.float32, [None, 4], name="boxes")
        s = rg.placeholder(rg.float32, [None], name="scores")
        outs = build(b, s)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
    with Session(graph=g) as sess:
        want = sess.run(outs, {b: feeds[0], s: feeds[1]})
    m = export_onnx(g, [b, s], outs)
    so = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = so.run(None, {"boxes": feeds[0], "scores": feeds[1]})
    return got, want


@pytest.mark.parametrize("score_threshold", [float("-inf"), 0.3])
@pytest.mark.parametrize("iou", [0.1, 0.5])
def test_v3_selects_what_rill_selects(iou, score_threshold):
    feeds = boxes_and_scores()
    got, want = both(lambda b, s: nms_ops.non_max_suppression(b, s, 15, iou, score_threshold),
                     feeds)  # fmt: skip
    assert got[0].dtype == np.int32 and len(want[0]) > 3
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("pad", [False, True])
def test_v4_and_v5_pad_and_count_as_rill(pad):
    feeds = boxes_and_scores()
    got, want = both(lambda b, s: nms_ops.non_max_suppression_padded(
        b, s, 30, 0.3, 0.2, pad_to_max_output_size=pad), feeds)  # fmt: skip
    for a, w in zip(got, want):
        np.testing.assert_array_equal(a, w)
    assert int(want[1]) < 30 and len(want[0]) == (30 if pad else int(want[1]))
    got, want = both(lambda b, s: nms_ops.non_max_suppression_with_scores(
        b, s, 30, 0.3, 0.2, pad_to_max_output_size=pad), feeds)  # fmt: skip
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w)


def test_soft_nms_is_refused():
    g = rg.Graph()
    with g.as_default():
        b = rg.placeholder(rg.float32, [None, 4])
        s = rg.placeholder(rg.float32, [None])
        out = nms_ops.non_max_suppression_with_scores(b, s, 5, soft_nms_sigma=0.5)
    with pytest.raises(rg.errors.UnimplementedError, match="soft-NMS"):
        export_onnx(g, [b, s], list(out))


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(5, 4), (1, 3)])
def test_crop_and_resize_matches_rill(method, crop):
    image = RNG.standard_normal((2, 9, 11, 3)).astype(np.float32)
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.3, 0.5, 1.3], [0.9, 0.7, 0.2, 0.1],
                      [0.33, 0.41, 0.67, 0.59]], np.float32)  # fmt: skip
    ind = np.array([0, 1, 1, 0], np.int32)
    g = rg.Graph()
    with g.as_default():
        im = rg.placeholder(rg.float32, [None, 9, 11, 3], name="image")
        bx = rg.placeholder(rg.float32, [None, 4], name="boxes")
        bi = rg.placeholder(rg.int32, [None], name="ind")
        out = image_ops.crop_and_resize(im, bx, bi, list(crop), method=method,
                                        extrapolation_value=-7.0)  # fmt: skip
    with Session(graph=g) as sess:
        want = sess.run(out, {im: image, bx: boxes, bi: ind})
    m = export_onnx(g, [im, bx, bi], [out])
    so = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = so.run(None, {"image": image, "boxes": boxes, "ind": ind})[0]
    assert (want == -7.0).any()  # some samples fall outside the image
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize(("ksizes", "strides", "rates"), [
    ((3, 3), (1, 1), (1, 1)), ((2, 3), (2, 3), (1, 1)), ((3, 2), (2, 1), (2, 3)), ((1, 1), (3, 2), (1, 1))])  # fmt: skip
def test_extract_image_patches_matches_rill(ksizes, strides, rates, padding):
    image = RNG.standard_normal((2, 10, 9, 3)).astype(np.float32)
    g = rg.Graph()
    with g.as_default():
        im = rg.placeholder(rg.float32, [None, 10, 9, 3], name="image")
        out = image_ops.extract_image_patches(im, [1, *ksizes, 1], [1, *strides, 1],
                                              [1, *rates, 1], padding)  # fmt: skip
    with Session(graph=g) as sess:
        want = sess.run(out, {im: image})
    m = export_onnx(g, [im], [out])
    so = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(so.run(None, {"image": image})[0], want)
