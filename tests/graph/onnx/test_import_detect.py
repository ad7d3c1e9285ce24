"""import_onnx of ScatterND, TensorScatter, NonMaxSuppression, RoiAlign, GridSample, AffineGrid,
Unique and Col2Im beyond onnx's node suite: duplicate and negative indices, several batches and
classes, every GridSample mode × padding × align_corners, against onnx's ReferenceEvaluator or
the specification's loop; and bad inputs, refused with the node named."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator
from onnx_run import run_rill

from rill.graph.errors import InvalidArgumentError
from rill.graph.onnx import import_onnx
from rill.graph.onnx.import_util import OnnxImportError

RNG = np.random.default_rng(20260501)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def one_node(op_type, inputs, outputs, *, opset=18, inits=(), name="n", **attrs):
    """A model of one node; `inputs` maps each graph input name to (elem type, shape)."""
    node = oh.make_node(op_type, list(inputs) + [i.name for i in inits], outputs, name=name,
                        **attrs)  # fmt: skip
    g = oh.make_graph([node], "t", [vi(k, *v) for k, v in inputs.items()],
                      [vi(o, TP.UNDEFINED) for o in outputs], list(inits))  # fmt: skip
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def check(m, feeds, rtol=1e-5, atol=1e-6, peer="reference"):
    """rill's outputs equal onnx's ReferenceEvaluator's (or onnxruntime's): dtypes, shapes and
    values."""
    got = run_rill(m, feeds)
    if peer == "reference":
        want = ReferenceEvaluator(m).run(None, feeds)
    else:
        typed = copy.deepcopy(m)
        for o, a in zip(typed.graph.output, got, strict=True):
            o.type.tensor_type.elem_type = oh.np_dtype_to_tensor_dtype(a.dtype)
        sess = ort.InferenceSession(typed.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        b = np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return got


# -- ScatterND ----------------------------------------------------------------------------------


def scatter_nd_loop(data, indices, updates, reduction):
    """The specification's loop."""
    out = data.copy()
    f = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}.get(reduction)
    for idx in np.ndindex(indices.shape[:-1]):
        at = tuple(indices[idx])
        out[at] = updates[idx] if f is None else f(out[at], updates[idx])
    return out


def scatter_model(data_shape, idx_shape, upd_shape, reduction, dtype=TP.FLOAT):
    return one_node("ScatterND", {"d": (dtype, data_shape), "i": (TP.INT64, idx_shape),
                                  "u": (dtype, upd_shape)}, ["y"], reduction=reduction)  # fmt: skip


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_duplicate_indices_reduce_every_update(reduction):
    data = RNG.uniform(0.5, 2, (4, 3)).astype(np.float32)
    indices = np.array([[1], [3], [1], [1], [0]], np.int64)
    updates = RNG.uniform(0.5, 2, (5, 3)).astype(np.float32)
    m = scatter_model([4, 3], [5, 1], [5, 3], reduction)
    (got,) = run_rill(m, {"d": data, "i": indices, "u": updates})
    np.testing.assert_allclose(got, scatter_nd_loop(data, indices, updates, reduction), rtol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_negative_indices_count_from_the_end(reduction):
    data = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    indices = np.array([[-1, -3], [0, 1], [-2, 2]], np.int64)
    updates = RNG.integers(-5, 5, (3, 4)).astype(np.int64)
    m = scatter_model([2, 3, 4], [3, 2], [3, 4], reduction, TP.INT64)
    (got,) = run_rill(m, {"d": data, "i": indices, "u": updates})
    np.testing.assert_array_equal(got, scatter_nd_loop(data, indices, updates, reduction))


@pytest.mark.parametrize("reduction", ["none", "mul"])
def test_scatter_nd_slices_with_static_indices(reduction):
    """Indices in an initializer (as exported cache updates hold them), each naming a slice."""
    data = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    indices = np.array([[[2]], [[-3]]], np.int64)
    updates = RNG.standard_normal((2, 1, 2, 4)).astype(np.float32)
    m = one_node("ScatterND", {"d": (TP.FLOAT, [3, 2, 4]), "u": (TP.FLOAT, [2, 1, 2, 4])}, ["y"],
                 inits=[nh.from_array(indices, "i")], reduction=reduction)  # fmt: skip
    m.graph.node[0].input[:] = ["d", "i", "u"]
    (got,) = run_rill(m, {"d": data, "u": updates})
    np.testing.assert_allclose(got, scatter_nd_loop(data, indices, updates, reduction))


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_nd_index_out_of_range_names_the_node(reduction):
    m = scatter_model([4, 3], [2, 1], [2, 3], reduction)
    feeds = {"d": np.zeros((4, 3), np.float32), "i": np.array([[1], [4]], np.int64),
             "u": np.ones((2, 3), np.float32)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"(?s)does not index into.*%n/"):
        run_rill(m, feeds)
    with pytest.raises(InvalidArgumentError, match=r"(?s)\[-5\] does not index into.*%n/"):
        run_rill(m, {**feeds, "i": np.array([[1], [-5]], np.int64)})


# -- TensorScatter ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_per_batch_write_positions(mode):
    cache = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    update = RNG.standard_normal((2, 3, 2, 4)).astype(np.float32)
    write = np.array([3, 1] if mode == "linear" else [4, 2], np.int64)
    m = one_node("TensorScatter", {"c": (TP.FLOAT, [2, 3, 5, 4]), "u": (TP.FLOAT, [2, 3, 2, 4]),
                                   "w": (TP.INT64, [2])}, ["y"], opset=24, mode=mode)  # fmt: skip
    (got,) = run_rill(m, {"c": cache, "u": update, "w": write})
    want = cache.copy()
    for b, s in itertools.product(range(2), range(2)):
        want[b, :, (write[b] + s) % 5] = update[b, :, s]
    np.testing.assert_array_equal(got, want)


def test_tensor_scatter_linear_past_the_end_names_the_node():
    m = one_node("TensorScatter", {"c": (TP.FLOAT, [1, 4, 2]), "u": (TP.FLOAT, [1, 2, 2]),
                                   "w": (TP.INT64, [1])}, ["y"], opset=24)  # fmt: skip
    feeds = {"c": np.zeros((1, 4, 2), np.float32), "u": np.ones((1, 2, 2), np.float32),
             "w": np.array([3], np.int64)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"(?s)does not index into.*%n/"):
        run_rill(m, feeds)


# -- NonMaxSuppression --------------------------------------------------------------------------


def nms_model(center_point_box=0, n_inputs=5):
    ins = {"boxes": (TP.FLOAT, None), "scores": (TP.FLOAT, None), "max": (TP.INT64, [1]),
           "iou": (TP.FLOAT, [1]), "score": (TP.FLOAT, [1])}  # fmt: skip
    ins = dict(list(ins.items())[:n_inputs])
    return one_node("NonMaxSuppression", ins, ["sel"], opset=11,
                    center_point_box=center_point_box)  # fmt: skip


def random_boxes(batches, n):
    yx = RNG.uniform(0, 10, (batches, n, 2))
    hw = RNG.uniform(1, 4, (batches, n, 2))
    return np.concatenate([yx, yx + hw], axis=-1).astype(np.float32)


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms_several_batches_and_classes(center_point_box):
    boxes = random_boxes(3, 40)
    scores = RNG.uniform(0, 1, (3, 4, 40)).astype(np.float32)
    feeds = {"boxes": boxes, "scores": scores, "max": np.array([6], np.int64),
             "iou": np.array([0.3], np.float32), "score": np.array([0.2], np.float32)}  # fmt: skip
    (got,) = check(nms_model(center_point_box), feeds)
    assert set(got[:, 0]) == {0, 1, 2} and set(got[:, 1]) == {0, 1, 2, 3}


def test_nms_score_threshold_and_zero_max_output():
    boxes = random_boxes(2, 30)
    scores = RNG.uniform(0, 1, (2, 3, 30)).astype(np.float32)
    feeds = {"boxes": boxes, "scores": scores, "max": np.array([100], np.int64),
             "iou": np.array([0.5], np.float32), "score": np.array([0.7], np.float32)}  # fmt: skip
    (got,) = check(nms_model(), feeds)
    assert (scores[got[:, 0], got[:, 1], got[:, 2]] > 0.7).all()
    (none,) = check(nms_model(), {**feeds, "max": np.array([0], np.int64)})
    assert none.shape == (0, 3) and none.dtype == np.int64


def test_nms_missing_optional_inputs():
    """No max_output_boxes_per_class selects nothing; no thresholds keep every score and drop
    only boxes that overlap at all (onnxruntime as the peer: the ReferenceEvaluator needs every
    input)."""
    boxes = random_boxes(1, 12)
    scores = RNG.uniform(0, 1, (1, 2, 12)).astype(np.float32)
    (none,) = check(nms_model(n_inputs=2), {"boxes": boxes, "scores": scores}, peer="ort")
    assert none.shape == (0, 3)
    feeds = {"boxes": boxes, "scores": scores, "max": np.array([5], np.int64)}
    (got,) = check(nms_model(n_inputs=3), feeds, peer="ort")
    assert len(got) > 0


def test_nms_mismatched_scores_are_refused_with_the_node_named():
    feeds = {"boxes": random_boxes(1, 5), "scores": np.zeros((1, 2, 6), np.float32),
             "max": np.array([3], np.int64), "iou": np.array([0.5], np.float32),
             "score": np.array([0.0], np.float32)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"(?s)NonMaxSuppression: scores must be.*%n/"):
        run_rill(nms_model(), feeds)


# -- RoiAlign -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "ctm", "sampling_ratio"), [
    ("avg", "half_pixel", 0), ("avg", "output_half_pixel", 2), ("max", "half_pixel", 2),
    ("max", "output_half_pixel", 0),
])  # fmt: skip
def test_roi_align_against_the_reference(mode, ctm, sampling_ratio):
    x = RNG.standard_normal((2, 3, 12, 10)).astype(np.float32)
    xy = RNG.uniform(-2, 16, (7, 2))
    rois = np.concatenate([xy, xy + RNG.uniform(0.5, 9, (7, 2))], axis=1).astype(np.float32)
    bi = RNG.integers(0, 2, 7).astype(np.int64)
    m = one_node("RoiAlign", {"x": (TP.FLOAT, [2, 3, 12, 10]), "rois": (TP.FLOAT, [7, 4]),
                              "bi": (TP.INT64, [7])}, ["y"], opset=16, mode=mode,
                 coordinate_transformation_mode=ctm, output_height=3, output_width=4,
                 sampling_ratio=sampling_ratio, spatial_scale=0.75)  # fmt: skip
    check(m, {"x": x, "rois": rois, "bi": bi}, rtol=1e-4, atol=1e-5)


def test_roi_align_batch_index_out_of_range_names_the_node():
    m = one_node("RoiAlign", {"x": (TP.FLOAT, [1, 1, 4, 4]), "rois": (TP.FLOAT, [1, 4]),
                              "bi": (TP.INT64, [1])}, ["y"], opset=16)  # fmt: skip
    feeds = {"x": np.zeros((1, 1, 4, 4), np.float32), "rois": np.ones((1, 4), np.float32),
             "bi": np.array([1], np.int64)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"(?s)batch_indices\[0\] = 1.*%n/"):
        run_rill(m, feeds)


# -- GridSample and AffineGrid ------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "padding_mode", "align_corners"), list(itertools.product(
    ["linear", "nearest", "cubic"], ["zeros", "border", "reflection"], [0, 1])))  # fmt: skip
def test_grid_sample_against_the_reference(mode, padding_mode, align_corners):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = RNG.uniform(-1.6, 1.6, (2, 4, 6, 2)).astype(np.float32)
    m = one_node("GridSample", {"x": (TP.FLOAT, [2, 3, 5, 7]), "g": (TP.FLOAT, [2, 4, 6, 2])},
                 ["y"], opset=20, mode=mode, padding_mode=padding_mode,
                 align_corners=align_corners)  # fmt: skip
    # Under cubic with border padding onnx's ReferenceEvaluator clamps the position before
    # taking the taps; rill clamps each tap, as PyTorch's grid_sample and onnxruntime do.
    peer = "ort" if (mode, padding_mode) == ("cubic", "border") else "reference"
    check(m, {"x": x, "g": grid}, rtol=1e-4, atol=1e-5, peer=peer)


@pytest.mark.parametrize(("mode", "padding_mode"), [("linear", "reflection"),
                                                    ("nearest", "border")])  # fmt: skip
def test_grid_sample_volumetric(mode, padding_mode):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (1, 2, 3, 2, 3)).astype(np.float32)
    m = one_node("GridSample", {"x": (TP.FLOAT, None), "g": (TP.FLOAT, None)}, ["y"], opset=20,
                 mode=mode, padding_mode=padding_mode)  # fmt: skip
    check(m, {"x": x, "g": grid}, rtol=1e-4, atol=1e-5)


def test_grid_sample_opset_16_mode_names():
    """bilinear and bicubic (onnxruntime as the peer: the ReferenceEvaluator knows only opset
    20's names)."""
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    grid = RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    for mode in ("bilinear", "bicubic"):
        m = one_node("GridSample", {"x": (TP.FLOAT, None), "g": (TP.FLOAT, None)}, ["y"],
                     opset=16, mode=mode)  # fmt: skip
        check(m, {"x": x, "g": grid}, rtol=1e-4, atol=1e-5, peer="ort")


def test_grid_sample_grid_of_wrong_last_dim_is_refused():
    """Known while importing (declared shapes) and while running (fed shapes)."""
    ins = {"x": (TP.FLOAT, [1, 1, 4, 4]), "g": (TP.FLOAT, [1, 3, 3, 3])}
    with pytest.raises(OnnxImportError, match=r"node 'n' \(GridSample.*last dimension must be 2"):
        import_onnx(one_node("GridSample", ins, ["y"], opset=20))
    m = one_node("GridSample", {"x": (TP.FLOAT, None), "g": (TP.FLOAT, None)}, ["y"], opset=20)
    feeds = {"x": np.zeros((1, 1, 4, 4), np.float32), "g": np.zeros((1, 3, 3, 3), np.float32)}
    with pytest.raises(InvalidArgumentError, match=r"(?s)GridSample: grid must be.*%n/"):
        run_rill(m, feeds)


def test_grid_sample_of_integers_is_refused():
    m = one_node("GridSample", {"x": (TP.INT32, [1, 1, 4, 4]), "g": (TP.FLOAT, [1, 2, 2, 2])},
                 ["y"], opset=20)  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"node 'n' \(GridSample.*floating-point X"):
        import_onnx(m)


@pytest.mark.parametrize(("size", "align_corners"), [([2, 3, 5, 1], 0), ([2, 3, 3, 4], 1),
                                                     ([2, 1, 3, 4, 2], 1)])  # fmt: skip
def test_affine_grid_static_size(size, align_corners):
    r = len(size) - 2
    theta = RNG.standard_normal((2, r, r + 1)).astype(np.float32)
    m = one_node("AffineGrid", {"theta": (TP.FLOAT, [2, r, r + 1])}, ["grid"], opset=20,
                 inits=[nh.from_array(np.array(size, np.int64), "size")],
                 align_corners=align_corners)  # fmt: skip
    check(m, {"theta": theta})


def test_affine_grid_one_pixel_under_align_corners_is_at_zero():
    """PyTorch's affine_grid puts a single pixel at 0 under align_corners (onnx's
    ReferenceEvaluator divides by zero there, onnxruntime puts it at 1); rill follows PyTorch."""
    theta = np.tile(np.array([[1, 0, 0], [0, 1, 0]], np.float32), (2, 1, 1))
    m = one_node("AffineGrid", {"theta": (TP.FLOAT, [2, 2, 3])}, ["grid"], opset=20,
                 inits=[nh.from_array(np.array([2, 3, 1, 3], np.int64), "size")],
                 align_corners=1)  # fmt: skip
    (got,) = run_rill(m, {"theta": theta})
    want = np.stack(np.broadcast_arrays(np.array([-1.0, 0.0, 1.0]), np.zeros((1, 1))), axis=-1)
    np.testing.assert_array_equal(got, np.broadcast_to(want, (2, 1, 3, 2)))


# -- Unique and Col2Im --------------------------------------------------------------------------


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique_against_the_reference(axis, sorted_):
    x = RNG.integers(0, 3, (6, 4)).astype(np.float32)
    x[3] = x[1]
    x[:, 2] = x[:, 0]
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    m = one_node("Unique", {"x": (TP.FLOAT, [6, 4])}, ["y", "idx", "inv", "cnt"], opset=11,
                 **attrs)  # fmt: skip
    # onnx's ReferenceEvaluator fails on unsorted (an IndexError); onnxruntime is the peer there.
    check(m, {"x": x}, peer="reference" if sorted_ else "ort")


def test_unique_axis_out_of_range_is_refused():
    with pytest.raises(OnnxImportError, match=r"node 'n' \(Unique.*axis 2 is out of range"):
        import_onnx(one_node("Unique", {"x": (TP.FLOAT, [3, 3])}, ["y"], opset=11, axis=2))


@pytest.mark.parametrize(("image", "block", "attrs"), [
    ([6, 7], [2, 3], {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}),
    ([4, 3, 5], [2, 1, 2], {"strides": [1, 2, 2]}),
])  # fmt: skip
def test_col2im_against_the_reference(image, block, attrs):
    r = len(image)
    pads = attrs.get("pads", [0] * 2 * r)
    dil = attrs.get("dilations", [1] * r)
    steps = attrs.get("strides", [1] * r)
    counts = [(image[i] + pads[i] + pads[r + i] - dil[i] * (block[i] - 1) - 1) // steps[i] + 1
              for i in range(r)]  # fmt: skip
    cols = RNG.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(counts))))
    m = one_node("Col2Im", {"x": (TP.FLOAT, list(cols.shape))}, ["y"],
                 inits=[nh.from_array(np.array(image, np.int64), "image"),
                        nh.from_array(np.array(block, np.int64), "block")], **attrs)  # fmt: skip
    (got,) = check(m, {"x": cols.astype(np.float32)}, rtol=1e-5, atol=1e-5)
    assert got.shape == (2, 3, *image)


def test_col2im_wrong_block_count_names_the_node():
    m = one_node("Col2Im", {"x": (TP.FLOAT, None), "image": (TP.INT64, [2]),
                            "block": (TP.INT64, [2])}, ["y"])  # fmt: skip
    feeds = {"x": np.zeros((1, 4, 5), np.float32), "image": np.array([3, 3], np.int64),
             "block": np.array([2, 2], np.int64)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"(?s)Col2Im: 5 blocks given.*%n/"):
        run_rill(m, feeds)
