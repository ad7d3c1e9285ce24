"""import_onnx of node patterns PyTorch's exporters write that onnx's node suite has no case for:
a Concat of one input (TorchScript's torch.cat of a one-element list, a DenseNet block's first
layer), a Slice inside a Loop whose starts have a length known only at run time and no axes
(the dynamo exporter's EmbeddingBag), ScatterElements with duplicate indices (Tensor.scatter
with repeated positions: the last update wins, as in onnxruntime), 3-D convolutions
(torch.nn.Conv3d), tf2onnx's Resize scales and GatherND with negative indices (the dynamo
exporter's x[..., -2]), each against onnxruntime or onnx's
ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_ref, run_rill

from rill.graph.onnx.import_util import OnnxImportError

RNG = np.random.default_rng(20261127)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def test_a_concat_of_one_input_is_that_input_and_feeds_the_next_layer():
    w = nh.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    w2 = nh.from_array(RNG.standard_normal((2, 4, 3, 3)).astype(np.float32), "w2")
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        oh.make_node("Concat", ["c"], ["cat"], axis=1),
        oh.make_node("Relu", ["cat"], ["r"]),
        oh.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1]),
        oh.make_node("Concat", ["c", "y"], ["z"], axis=1),
    ]
    m = model(nodes, [vi("x", shape=[1, 3, 8, 8])], [vi("z", shape=None)], [w, w2])
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    assert got.shape == (1, 6, 8, 8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_concat_of_one_input_with_its_axis_out_of_range_is_refused():
    m = model([oh.make_node("Concat", ["x"], ["y"], axis=2, name="cat1")],
              [vi("x", shape=[2, 3])], [vi("y", shape=None)])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"cat1.*axis 2 is out of range"):
        run_rill(m, {"x": np.ones((2, 3), np.float32)})


def test_a_slice_in_a_loop_with_run_time_starts_and_no_axes():
    """Each iteration slices offsets[i : i + 1] with starts from the loop's untyped state (a
    Reshape to [-1] of the counter), as the dynamo exporter's EmbeddingBag loop does."""
    body = oh.make_graph(
        [
            oh.make_node("Reshape", ["i_in", "minus1"], ["start"]),
            oh.make_node("Add", ["start", "one"], ["stop"]),
            oh.make_node("Slice", ["offsets", "start", "stop"], ["piece"]),
            oh.make_node("Add", ["i_in", "step"], ["i_out"]),
            oh.make_node("Less", ["i_out", "n"], ["cond_out"]),
            oh.make_node("Mul", ["piece", "piece"], ["sq"]),
        ],
        "body",
        [vi("iter", TP.INT64, []), vi("cond", TP.BOOL, []), oh.make_value_info("i_in", oh.TypeProto())],
        [vi("cond_out", TP.BOOL, []), vi("i_out", TP.INT64, None), vi("sq", TP.INT64, None)],
    )  # fmt: skip
    inits = [nh.from_array(np.array([-1], np.int64), "minus1"),
             nh.from_array(np.array([1], np.int64), "one"),
             nh.from_array(np.array(1, np.int64), "step"),
             nh.from_array(np.array([3, 1, 4, 1, 5], np.int64), "offsets"),
             nh.from_array(np.array(4, np.int64), "n"),
             nh.from_array(np.array(True), "go"),
             nh.from_array(np.array(0, np.int64), "i0")]  # fmt: skip
    loop = oh.make_node("Loop", ["", "go", "i0"], ["i_end", "squares"], body=body)
    m = model([loop], [], [vi("i_end", TP.INT64, None), vi("squares", TP.INT64, None)], inits)
    got, want = run_rill(m, {}), run_ref(m, {})
    np.testing.assert_array_equal(got[1].reshape(-1), [9, 1, 16, 1])
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, np.asarray(b))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_with_duplicate_indices_matches_onnxruntime(reduction, axis):
    data = RNG.standard_normal((3, 8)).astype(np.float32)
    d = data.shape[axis]
    idx = RNG.integers(-d, d, (3, 5) if axis != 0 else (6, 8)).astype(np.int64)
    idx[0, :2] = idx[0, 0]  # a duplicate at least
    upd = RNG.standard_normal(idx.shape).astype(np.float32)
    attrs = {} if reduction == "none" else {"reduction": reduction}
    m = model([oh.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, **attrs)],
              [vi("x", shape=[3, 8]), vi("i", TP.INT64, list(idx.shape)),
               vi("u", shape=list(idx.shape))], [vi("y", shape=None)], opset=18)  # fmt: skip
    feeds = {"x": data, "i": idx, "u": upd}
    np.testing.assert_allclose(run_rill(m, feeds)[0], run_ort(m, feeds)[0], rtol=1e-6)


CONV3D = [
    # (x shape, w shape, attrs)
    ((1, 2, 4, 8, 8), (4, 2, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1], "strides": [1, 2, 2]}),
    ((2, 3, 5, 6, 7), (4, 3, 2, 3, 1), {"pads": [0, 1, 0, 1, 2, 0], "dilations": [2, 1, 1]}),
    ((1, 4, 6, 5, 5), (6, 2, 3, 3, 3), {"group": 2, "strides": [2, 1, 2]}),
    ((1, 4, 5, 6, 6), (4, 1, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2, 1]}),
    ((1, 2, 5, 6, 7), (3, 2, 2, 2, 3), {"auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", range(len(CONV3D)))
def test_a_3d_conv_matches_onnxruntime(case, bias):
    """torch.nn.Conv3d's exports: padding, strides, dilations, groups, depthwise, auto_pad."""
    xs, ws, attrs = CONV3D[case]
    inits = [nh.from_array(RNG.standard_normal(ws).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(nh.from_array(RNG.standard_normal(ws[0]).astype(np.float32), "b"))
        ins.append("b")
    m = model([oh.make_node("Conv", ins, ["y"], **attrs)], [vi("x", shape=list(xs))],
              [vi("y", shape=None)], inits)  # fmt: skip
    x = RNG.standard_normal(xs).astype(np.float32)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_3d_conv_with_its_filter_fed_and_a_batch_of_unknown_size():
    m = model([oh.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0, 1, 1, 0, 1])],
              [vi("x", shape=["n", 2, 4, 5, 6]), vi("w", shape=[3, 2, 3, 2, 3])],
              [vi("y", shape=None)])  # fmt: skip
    feeds = {"x": RNG.standard_normal((3, 2, 4, 5, 6)).astype(np.float32),
             "w": RNG.standard_normal((3, 2, 3, 2, 3)).astype(np.float32)}  # fmt: skip
    np.testing.assert_allclose(run_rill(m, feeds)[0], run_ort(m, feeds)[0], rtol=1e-4, atol=1e-4)


def test_a_3d_conv_whose_input_depth_is_unknown_is_refused_naming_the_node():
    m = model([oh.make_node("Conv", ["x", "w"], ["y"], name="c3")],
              [vi("x", shape=[1, 2, "d", 5, 6]), vi("w", shape=[3, 2, 3, 2, 3])],
              [vi("y", shape=None)])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"c3.*spatial dimensions of its input"):
        run_rill(m, {"x": np.ones((1, 2, 4, 5, 6), np.float32),
                     "w": np.ones((3, 2, 3, 2, 3), np.float32)})  # fmt: skip


@pytest.mark.parametrize("fed", [False, True])
def test_resize_sizes_from_float32_scales_are_onnxruntimes(fed):
    """tf2onnx writes tf.image.resize(7×6 → 13×11) as float32 scales 13/7 and 11/6: 7 · 13/7
    is 12.9999996 in float64 and 13 in float32, which onnxruntime (and the exporting model)
    use."""
    scales = np.array([1, 1, 13 / 7, 11 / 6], np.float32)
    ins = [vi("x", shape=[1, 2, 7, 6])]
    inits = []
    if fed:
        ins.append(vi("s", shape=[4]))
    else:
        inits.append(nh.from_array(scales, "s"))
    m = model([oh.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel")],
              ins, [vi("y", shape=None)], inits, opset=18)  # fmt: skip
    feeds = {"x": RNG.standard_normal((1, 2, 7, 6)).astype(np.float32)}
    if fed:
        feeds["s"] = scales
    got, want = run_rill(m, feeds)[0], run_ort(m, feeds)[0]
    assert got.shape == want.shape == (1, 2, 13, 11)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_slice_whose_starts_and_ends_are_scalars():
    """tf2onnx's CropAndResize loop slices the boxes with the scalar loop counter (onnxruntime
    takes a scalar for a one-element list)."""
    m = model([oh.make_node("Add", ["i", "one"], ["j"]),
               oh.make_node("Slice", ["x", "i", "j", "zero"], ["y"])],
              [vi("x", shape=[4, 3]), vi("i", TP.INT64, [])], [vi("y", shape=None)],
              [nh.from_array(np.array(1, np.int64), "one"),
               nh.from_array(np.array(0, np.int64), "zero")])  # fmt: skip
    feeds = {"x": RNG.standard_normal((4, 3)).astype(np.float32), "i": np.array(2, np.int64)}
    np.testing.assert_array_equal(run_rill(m, feeds)[0], feeds["x"][2:3])


def test_a_constant_unique_with_unnamed_outputs_folds():
    """tf2onnx's SegmentMax: Unique of constant segment ids naming only some of its outputs."""
    ids = nh.from_array(np.array([0, 0, 1, 3, 3], np.int64), "ids")
    m = model([oh.make_node("Unique", ["ids"], ["u", "", "inv"], sorted=1),
               oh.make_node("Cast", ["inv"], ["y"], to=TP.FLOAT),
               oh.make_node("Add", ["x", "y"], ["z"])],
              [vi("x", shape=[5])], [vi("z", shape=None), vi("u", TP.INT64, None)],
              [ids])  # fmt: skip
    x = np.zeros(5, np.float32)
    z, u = run_rill(m, {"x": x})
    np.testing.assert_array_equal(z, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(u, [0, 1, 3])


@pytest.mark.parametrize("fed", [False, True])
@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_with_negative_indices_counts_from_the_end(fed, batch_dims):
    """PyTorch's dynamo exporter writes GatherND with negative indices for indexing like
    x[:, :, -2] (Falcon's attention): each entry counts from the end of the axis it indexes."""
    x = RNG.standard_normal((3, 4, 5, 2)).astype(np.float32)
    if batch_dims:
        idx = np.array([[[-1, 0], [2, -5]], [[0, -1], [-4, 4]], [[1, 1], [-2, -3]]], np.int64)
    else:
        idx = np.array([[[-1, 0], [2, -4]], [[0, -1], [-3, 3]]], np.int64)
    node = oh.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    if fed:
        m = model([node], [vi("x", shape=list(x.shape)), vi("i", TP.INT64, [None] * idx.ndim)],
                  [vi("y")])  # fmt: skip
        feeds = {"x": x, "i": idx}
    else:
        m = model([node], [vi("x", shape=list(x.shape))], [vi("y")], [nh.from_array(idx, "i")])
        feeds = {"x": x}
    (got,), (want,) = run_rill(m, feeds), run_ort(m, feeds)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16])
@pytest.mark.parametrize("bound", ["min", "max"])
def test_a_clip_with_one_bound_takes_the_types_extreme_for_the_other(elem, bound):
    """torch.clamp(x, min=0) exports as Clip(x, 0, <absent>): ONNX's absent max is the type's
    largest value, so +inf becomes it (onnxruntime does so), and likewise -inf for min."""
    dt = np.float32 if elem == TP.FLOAT else np.float16
    zero = nh.from_array(np.array(0, dt), "zero")
    inputs = ["x", "zero", ""] if bound == "min" else ["x", "", "zero"]
    m = model([oh.make_node("Clip", inputs, ["y"])], [vi("x", elem, [6])], [vi("y", elem)], [zero])
    x = np.array([np.inf, -np.inf, 1.5, -2.0, 0.0, 3.0], dt)
    (got,), (want,) = run_rill(m, {"x": x}), run_ort(m, {"x": x})
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all()
