"""ONNX export, op by op: every exported model passes onnx.checker (full_check) and computes
what a rill Session computes, in onnxruntime and in onnx's ReferenceEvaluator.

Registry-driven part: every op with an ONNX export rule is exported on each of its samples
(tests/op_samples, in float32) at opsets 13, 17, 18 (onnxruntime) and the newest onnx ships
(ReferenceEvaluator; onnxruntime 1.31 stops below it). Hand-written cases cover the attr
variants and integer semantics the samples do not: comparisons, logic, casts, integer division,
arg-reductions, shapes, strided-slice masks, one-hot, fills, ...
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator
from op_samples import load_all

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx
from rill.graph.onnx.registry import export_rules
from rill.graph.ops import extra_ops

NEWEST = onnx.defs.onnx_opset_version()
SAMPLES = load_all()


@functools.cache
def ort_max_opset() -> int:
    """The newest opset this onnxruntime loads (it refuses opsets newer than its release)."""
    for opset in range(NEWEST, 12, -1):
        g = rg.Graph()
        with g.as_default():
            x = rg.placeholder(rg.float32, [1], name="x")
            y = rg.identity(x + 1.0)
        try:
            ort.InferenceSession(export_onnx(g, [x], [y], opset=opset).SerializeToString(),
                                 providers=["CPUExecutionProvider"])  # fmt: skip
            return opset
        except Exception:
            continue
    raise AssertionError("onnxruntime loads no opset >= 13")


def assert_same(got, want, what: str, rtol: float = 1e-5) -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, rill gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, rill gives {want.shape}"
    if want.dtype.kind in "fc":
        # Relative to the output's magnitude: elements near zero carry rounding of the others.
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check(g, inputs, outputs, feeds, opset=None, oracle="ort", session=None, rtol=1e-5):
    """Export, validate, and compare the ONNX model's outputs with the rill Session's."""
    opset = opset or NEWEST
    model = export_onnx(g, inputs, outputs, opset=opset, session=session)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == opset
    if session is not None:
        want = session.run(list(outputs), dict(zip(inputs, feeds)))
    else:
        with Session(graph=g) as sess:
            want = sess.run(list(outputs), dict(zip(inputs, feeds)))
    by_name = {vi.name: np.asarray(v) for vi, v in zip(model.graph.input, feeds)}
    oracles = [oracle] if isinstance(oracle, str) else list(oracle)
    for o in oracles:
        if o == "ort":
            assert opset <= ort_max_opset(), "onnxruntime cannot load this opset"
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])  # fmt: skip
            got = sess.run(None, by_name)
        else:
            got = ReferenceEvaluator(model).run(None, by_name)
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_same(np.asarray(a), b, f"{o} output {k} ({outputs[k].name})", rtol)
    return model


# -- the samples -------------------------------------------------------------------------------

# sample id -> why its export is refused (the test checks the refusal names the op)
REFUSED = {
    "Cast-via_complex": "ONNX runtimes have no complex tensors",
    **{
        sid: "MatrixDiag*V3 exports only k = 0 (the main diagonal)"
        for sid in (
            "MatrixDiagV3-band",
            "MatrixDiagV3-superdiagonal",
            "MatrixDiagPartV3",
            "MatrixDiagPartV3-left_left",
            "MatrixSetDiagV3",
        )
    },  # fmt: skip
}
# (sample id, opset) -> reason
REFUSED_AT = {
    (sid, 13): "ScatterND sums repeated indices (reduction='add') only from opset 16"
    for sid in (
        "ScatterNd",
        "ScatterNd-rows",
        "UnsortedSegmentSum",
        "UnsortedSegmentSum-matrix_ids",
    )  # fmt: skip
}
# export_bits: ScatterND reduces with add from opset 16, with max and min from 18; CumProd is
# opset 26's.
for _sid, _since in (("TensorScatterAdd", 16), ("TensorScatterAdd-elements_repeated", 16),
                     ("TensorScatterSub", 16), ("TensorScatterMax", 18), ("TensorScatterMin", 18),
                     ("Cumprod", 26), ("Cumprod-exclusive_reverse", 26)):  # fmt: skip
    REFUSED_AT.update({(_sid, o): f"needs opset {_since}" for o in (13, 17, 18) if o < _since})
# export_gather: the segment reductions are ScatterND reductions (add and mul from opset 16, max
# and min from 18).
for _sid, _since in (("SegmentSum", 16), ("SegmentMean", 16), ("SegmentProd", 16),
                     ("SegmentProd-zeros", 16), ("UnsortedSegmentProd", 16), ("SegmentMax", 18),
                     ("SegmentMin", 18), ("UnsortedSegmentMax", 18),
                     ("UnsortedSegmentMin", 18)):  # fmt: skip
    REFUSED_AT.update({(_sid, o): f"needs opset {_since}" for o in (13, 17, 18) if o < _since})
# Where onnx 1.23.2's ReferenceEvaluator is wrong (onnxruntime agrees with rill on these):
# its LRN loops over the batch axis instead of the channels (reference/ops/op_lrn.py), and its
# grouped ConvTranspose slices the weight by output instead of input channels
# (reference/ops/op_conv_transpose.py), which matters when a group has several of them.
REFERENCE_WRONG = {
    "LRN",
    "LRN-radius_1",
    "DepthwiseConv2dNativeBackpropInput-same_nhwc",
    "DepthwiseConv2dNativeBackpropInput-same_nchw",
}


# Samples whose export computes what ONNX defines rather than rill's exact bits, with the
# tolerance they agree to: TensorFlow's (and rill's) ResizeBicubic reads its cubic weights from a
# table of 1025 steps; ONNX's Resize computes them (up to 1e-3 apart on values near 1).
LOOSE = {"ResizeBicubic": 2e-3, "ResizeBicubic-half_pixel": 2e-3,
         "ResizeBicubic-align_corners": 2e-3}  # fmt: skip


def _sample_cases():
    for op in sorted(SAMPLES):
        if export_rules.has(op):
            yield from SAMPLES[op]


def _is_list_sample(s) -> bool:
    """TensorList samples: their builders fix element_dtype=float64, and they export as ONNX
    sequences, which need opset 14."""
    return s.op_type.startswith("TensorList")


def _build(s):
    inputs = [x.astype(np.float32) if x.dtype == np.float64 and not _is_list_sample(s) else x
              for x in s.inputs]  # fmt: skip
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(x.dtype), x.shape, name=f"in{i}")
               for i, x in enumerate(inputs)]  # fmt: skip
        out = s.build(*phs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return g, phs, outs, inputs


_OPSETS = [13, 17, 18, "newest"]


@pytest.mark.no_roundtrip("covered by the op tests; these graphs are the samples'")
@pytest.mark.parametrize("opset", _OPSETS)
@pytest.mark.parametrize("s", list(_sample_cases()), ids=lambda s: s.id)
def test_sample_exports(s, opset):
    g, phs, outs, inputs = _build(s)
    oracle = "ort"
    if opset == "newest":
        opset = NEWEST
        if opset > ort_max_opset():
            if s.id in REFERENCE_WRONG:
                pytest.skip("onnx's ReferenceEvaluator is wrong here (see REFERENCE_WRONG)")
            oracle = "reference"
    if _is_list_sample(s) and opset < 14:
        with pytest.raises(rg.errors.UnimplementedError, match="need opset >= 14"):
            export_onnx(g, phs, outs, opset=opset)
        return
    reason = REFUSED.get(s.id) or REFUSED_AT.get((s.id, opset))
    if reason:
        with pytest.raises(rg.errors.UnimplementedError, match=f"cannot export {s.op_type} op"):
            export_onnx(g, phs, outs, opset=opset)
        return
    check(g, phs, outs, inputs, opset=opset, oracle=oracle, rtol=LOOSE.get(s.id, 1e-5))


def test_reference_evaluator_agrees_on_samples():
    """The second oracle on every sample at opset 18 (both oracles load it)."""
    checked = 0
    for s in _sample_cases():
        if s.id in REFUSED or s.id in REFERENCE_WRONG or (s.id, 18) in REFUSED_AT:
            continue
        g, phs, outs, inputs = _build(s)
        check(g, phs, outs, inputs, opset=18, oracle=("ort", "reference"),
              rtol=LOOSE.get(s.id, 1e-5))  # fmt: skip
        checked += 1
    assert checked > 250


# -- hand-written cases ------------------------------------------------------------------------


def _export_one(build, feeds, opset=None, oracle=("ort",), rtol=1e-5):
    """build(*placeholders) -> tensor(s); placeholders follow the feeds' dtypes and shapes."""
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(v).dtype), np.asarray(v).shape,
                              name=f"x{i}") for i, v in enumerate(feeds)]  # fmt: skip
        out = build(*phs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    opset = opset or min(NEWEST, ort_max_opset())
    return check(g, phs, outs, feeds, opset=opset, oracle=oracle, rtol=rtol)


_rng = np.random.default_rng(7)
F = _rng.uniform(-2, 2, (3, 4)).astype(np.float32)
G = _rng.uniform(-2, 2, (3, 4)).astype(np.float32)
I = np.array([[-7, -3, 0, 5], [7, 3, -1, 9], [1, -2, 4, -8]], np.int32)
J = np.array([[2, -2, 3, -4], [-3, 2, 2, 3], [1, 1, -3, 5]], np.int32)


@pytest.mark.parametrize("fn", [rg.equal, rg.not_equal, rg.greater, rg.greater_equal, rg.less,
                                rg.less_equal], ids=lambda f: f.__name__)  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_comparisons(fn, dtype):
    a, b = (F, np.round(G)) if dtype == "float32" else (I, J)
    a = a.copy()
    a[0, 0] = b[0, 0]  # a tie
    _export_one(fn, [a, b[1]], oracle=("ort", "reference"))


@pytest.mark.parametrize("fn", [rg.logical_and, rg.logical_or], ids=lambda f: f.__name__)
def test_logic(fn):
    a, b = F > 0, G[0] > 0
    _export_one(lambda x, y: rg.logical_not(fn(x, y)), [a, b], oracle=("ort", "reference"))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("float32", "bool"), ("bool", "float32"),
                                     ("int32", "int64"), ("float32", "float64")])  # fmt: skip
def test_cast(src, dst):
    x = (F * 3).astype(src) if src != "bool" else F > 0
    _export_one(lambda t: rg.cast(t, dst), [x], oracle=("ort", "reference"))


_NARROW_FEED = np.array([0.3, 1.5, -2.5, 3.0, 250.0, 1e6, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                 "float8_e5m2fnuz", "float4_e2m1fn", "int4", "uint4", "int2",
                                 "uint2", "float8_e8m0fnu"])  # fmt: skip
def test_cast_to_narrow_types(dst):
    """rill's Cast does not saturate: ONNX's Cast with saturate=0 (float8e8m0: round_mode
    nearest). Only the newest opset has every narrow type, so onnx's reference checks it."""
    x = np.abs(_NARROW_FEED[:5]) if dst == "float8_e8m0fnu" else _NARROW_FEED  # no sign
    g = rg.Graph()
    with g.as_default():
        t = rg.placeholder(rg.float32, x.shape, name="x")
        y = rg.cast(t, dst)
    model = export_onnx(g, [t], [y], opset=NEWEST)
    onnx.checker.check_model(model, full_check=True)
    (node,) = model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    floating = rg.as_dtype(dst).is_floating and dst != "float4_e2m1fn"
    assert attrs.get("saturate") == (0 if floating else None)
    (got,) = ReferenceEvaluator(model).run(None, {"x": x})
    with Session(graph=g) as sess:
        want = sess.run(y, {t: x})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_cast_to_a_narrow_type_needs_the_opset_that_has_it():
    with pytest.raises(rg.errors.UnimplementedError, match="ONNX has int4 from opset 21"):
        _export_one(lambda t: rg.cast(t, rg.int4), [F], opset=19)


def test_integer_division_and_modulo_follow_tensorflow():
    """Div truncates, FloorDiv floors, FloorMod takes the divisor's sign."""
    ops = lambda a, b: [rg.get_default_graph().create_op("Div", [a, b]).outputs[0],  # noqa: E731
                        rg.floordiv(a, b), rg.floormod(a, b)]  # fmt: skip
    model = _export_one(ops, [I, J], oracle=("ort", "reference"))
    assert {"Mod", "Div"} <= {n.op_type for n in model.graph.node}


def test_float_floor_div_and_mod():
    _export_one(lambda a, b: [rg.floordiv(a, b), rg.floormod(a, b)], [F * 3, G + 3.0])


@pytest.mark.parametrize("fn", [rg.reduce_all, rg.reduce_any], ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis,keep", [(None, False), (1, False), (0, True)])
def test_all_any(fn, axis, keep):
    x = F > -1.5
    _export_one(lambda t: fn(t, axis=axis, keepdims=keep), [x], oracle=("ort", "reference"))


@pytest.mark.parametrize("fn", [rg.argmax, rg.argmin], ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("out", ["int64", "int32"])
def test_arg_max_min(fn, axis, out):
    x = F.copy()
    x[1, 2] = x[1, 0] = 9.0  # ties: the first index wins on both sides
    _export_one(lambda t: fn(t, axis, output_type=out), [x], oracle=("ort", "reference"))


def test_shape_size_rank_of_unknown_dims():
    def build(x):
        y = rg.placeholder_with_default(x, [None, None])
        return [rg.shape(y), rg.size(y), rg.rank(y), rg.shape(y, out_type="int64")]

    _export_one(build, [F], oracle=("ort", "reference"))


def test_static_shapes_fold_to_initializers():
    model = _export_one(lambda x: rg.reshape(x, rg.stack([rg.shape(x)[0] * 0 + 4, 3])), [F])
    assert [n.op_type for n in model.graph.node] == ["Reshape"]


def test_dynamic_reshape_keeps_tensorflow_zero():
    def build(x, s):
        return rg.reshape(x, s)

    _export_one(build, [np.zeros((0, 3), np.float32), np.array([3, 0], np.int32)])


@pytest.mark.parametrize(
    "spec",
    [
        (slice(1, None), slice(None, None, 2)),
        (slice(None, None, -1),),
        (Ellipsis, 1),
        (1, Ellipsis),
        (None, slice(0, 2), None, -1),
        (slice(-1, 0, -1), slice(3, 0, -2)),
        (-1,),
        (slice(None), None),
    ],
    ids=[
        "begin_stride",
        "reverse",
        "ellipsis_shrink",
        "shrink_ellipsis",
        "new_axes",
        "negative_strides",
        "shrink_last",
        "new_axis_last",
    ],  # fmt: skip
)
def test_strided_slice_masks(spec):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _export_one(lambda t: t[spec], [x], oracle=("ort", "reference"))


def test_strided_slice_with_runtime_bounds():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _export_one(lambda t, b: rg.strided_slice(t, b, b + 2, [1, 1]),
                [x, np.array([1, 1], np.int32)])  # fmt: skip


@pytest.mark.parametrize(
    "index",
    [
        lambda t, i, k: t[i],
        lambda t, i, k: t[:, :k],
        lambda t, i, k: t[::k],
        lambda t, i, k: t[-k:],
        lambda t, i, k: t[..., i],
        lambda t, i, k: t[i, None, 1:k, -1],
        lambda t, i, k: t[:, i:, ::-1],
        lambda t, i, k: t[k - 1 :: -1],
        lambda t, i, k: t[:, -1 - i],
        lambda t, i, k: t[..., ::-k],
        lambda t, i, k: t[::-k, :-1:k],
    ],
    ids=["index", "end", "stride", "negative_begin", "ellipsis_index", "mixed", "reverse_tail",
         "reverse_from", "negative_index", "negative_runtime_stride", "runtime_strides"],
)  # fmt: skip
def test_strided_slice_with_runtime_bounds_and_masks(index):
    """x[:n], x[i], x[::k] with tensors: masks with bounds known only at run time."""
    x = np.arange(40, dtype=np.float32).reshape(4, 5, 2)
    _export_one(index, [x, np.array(1, np.int32), np.array(2, np.int32)],
                oracle=("ort", "reference"))  # fmt: skip


def test_strided_slice_with_runtime_strides_keeps_its_rank():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None, 5, 4])
        k = rg.placeholder(rg.int32, [])
        assert x[::k].shape.as_list() == [None, 5, 4]
        assert x[..., ::k].shape.as_list() == [None, 5, None]
        assert x[None, 1, ::k].shape.as_list() == [1, None, 4]
        assert x[2:3, ::k].shape.as_list() == [None, None, 4]  # strides [1, k]: not constant


def test_slice_with_runtime_begin_and_size():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _export_one(lambda t, b, s: rg.slice(t, b, s),
                [x, np.array([1, 0], np.int32), np.array([-1, 3], np.int32)])  # fmt: skip


@pytest.mark.parametrize("axis", [-1, 0])
def test_one_hot_negative_and_out_of_range_indices(axis):
    idx = np.array([0, 2, -1, 5, 1], np.int32)
    _export_one(lambda t: rg.one_hot(t, 4, on_value=2.0, off_value=-1.0, axis=axis), [idx],
                oracle=("ort", "reference"))  # fmt: skip


def test_range_and_cumsum():
    _export_one(lambda s, d: rg.cumsum(rg.range(s, 7.0, d), exclusive=True),
                [np.float32(1.5), np.float32(0.75)])  # fmt: skip
    _export_one(lambda n: rg.range(n), [np.int32(5)], oracle=("ort", "reference"))


def test_where_coordinates():
    _export_one(lambda t: rg.where(t > 0), [F], oracle=("ort", "reference"))


def test_fill_zeros_ones_like():
    def build(x, v):
        return [rg.fill([2, 3], v), rg.fill(rg.shape(x), 2.5), rg.zeros_like(x), rg.ones_like(x)]

    _export_one(build, [I, np.float32(4.0)], oracle=("ort", "reference"))


def test_squeeze_all_and_expand_dims():
    x = F.reshape(3, 1, 4, 1)
    _export_one(lambda t: [rg.squeeze(t), rg.expand_dims(t, -1), rg.expand_dims(t, 0)], [x],
                oracle=("ort", "reference"))  # fmt: skip


def test_pack_unpack_negative_axis():
    _export_one(lambda a, b: [rg.stack([a, b], axis=-1), *rg.unstack(a, axis=-1)], [F, G],
                oracle=("ort", "reference"))  # fmt: skip


def test_unique_keeps_first_occurrence_order():
    x = np.array([4, 1, 4, 7, 1, 0, 7], np.int64)
    _export_one(lambda t: list(rg.unique(t)), [x], oracle=("ort", "reference"))


def test_gather_nd_and_integer_matmul():
    p = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array([[1, 2], [0, 0]], np.int64)
    _export_one(lambda t, i: rg.gather_nd(t, i), [p, idx], oracle=("ort", "reference"))
    a, b = I.astype(np.int64), J.T.astype(np.int64)
    _export_one(lambda x, y: rg.matmul(x, y, transpose_b=True), [a, b.T.copy()])


def test_broadcast_to_and_tile():
    _export_one(lambda t: [rg.broadcast_to(t[0], [2, 3, 4]), rg.tile(t, [2, 1])], [F],
                oracle=("ort", "reference"))  # fmt: skip


def test_activations_with_attrs():
    x = F * 4
    _export_one(lambda t: [rg.leaky_relu(t, alpha=0.3), rg.relu6(t), rg.elu(t), rg.selu(t),
                           rg.softplus(t), rg.softsign(t), rg.sigmoid(t), rg.tanh(t),
                           rg.erf(t)], [x], oracle=("ort", "reference"))  # fmt: skip


def test_select_v1_vector_condition():
    cond = np.array([True, False, True])
    _export_one(lambda c, a, b: rg.get_default_graph().create_op("Select", [c, a, b]).outputs[0],
                [cond, F, G], oracle=("ort", "reference"))  # fmt: skip


def test_reductions_with_runtime_axes_need_opset_18():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3, 4], name="x")
        axis = rg.placeholder(rg.int32, [], name="axis")
        y = rg.reduce_max(x, axis=axis)
    with pytest.raises(rg.errors.UnimplementedError, match="ReduceMax at opset 17 needs constant"):
        export_onnx(g, [x, axis], [y], opset=17)
    check(g, [x, axis], [y], [F, np.int32(1)], opset=18, oracle=("ort", "reference"))
    # ReduceSum took its axes as an input already at 13.
    with g.as_default():
        z = rg.reduce_sum(x, axis=axis)
    check(g, [x, axis], [z], [F, np.int32(0)], opset=13)


def test_in_top_k_shape_n_invert_permutation():
    pred = np.array([[0.1, 0.5, 0.5, 0.2], [0.9, np.nan, 0.3, 0.0], [1, 2, 3, 4]], np.float32)
    targets = np.array([2, 1, 7], np.int32)
    _export_one(lambda p, t: [rg.in_top_k(p, t, 2), rg.in_top_k(p, t, 1)], [pred, targets],
                oracle=("ort", "reference"))  # fmt: skip
    _export_one(
        lambda a, b: rg.shape_n([rg.placeholder_with_default(a, [None, None]), b]),
        [F, G[0]],
        oracle=("ort", "reference"),
    )
    perm = np.array([2, 0, 3, 1], np.int32)
    _export_one(lambda p: rg.invert_permutation(p), [perm], oracle=("ort", "reference"))


def test_conv2d_transpose_with_unknown_batch():
    w = _rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    dy = _rng.normal(size=(2, 3, 3, 4)).astype(np.float32)
    for padding, out in (("SAME", 6), ("VALID", 7)):
        _export_one(
            lambda d, p=padding, o=out: rg.conv2d_backprop_input(
                [2, o, o, 2], rg.constant(w), rg.placeholder_with_default(d, [None, 3, 3, 4]),
                strides=[1, 2, 2, 1], padding=p,
            ),
            [dy],
        )  # fmt: skip


def test_conv2d_transpose_with_output_sizes_made_at_run_time():
    """tf.nn.conv2d_transpose(x, w, tf.stack([tf.shape(x)[0], 6, 6, 2]), ...): the batch is
    known only at run time; the spatial sizes and channels come from the static output shape."""
    w = _rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    dy = _rng.normal(size=(2, 3, 3, 4)).astype(np.float32)
    for padding, out in (("SAME", 6), ("VALID", 7)):

        def build(d, p=padding, o=out):
            d = rg.placeholder_with_default(d, [None, 3, 3, 4])
            sizes = rg.stack([rg.shape(d)[0], o, o, 2])
            return rg.conv2d_backprop_input(sizes, rg.constant(w), d, strides=[1, 2, 2, 1],
                                            padding=p)  # fmt: skip

        _export_one(build, [dy])
    with rg.Graph().as_default():  # nothing static to take the spatial sizes from
        d = rg.placeholder(rg.float32, [None, 3, 3, 4])
        sizes = rg.placeholder(rg.int32, [4])
        y = rg.conv2d_backprop_input(sizes, rg.constant(w), d, [1, 2, 2, 1], "SAME")
        with pytest.raises(Exception, match="input_sizes .* must be known at export time, or "
                                            "at least its output's spatial sizes"):  # fmt: skip
            export_onnx(rg.get_default_graph(), [d, sizes], [y])


def test_the_claimed_ops_have_rules():
    claimed = """Relu Relu6 LeakyRelu Elu Selu Softplus Softsign Sigmoid Tanh Erf Pow Sqrt Rsqrt
    Square Equal NotEqual Greater GreaterEqual Less LessEqual LogicalAnd LogicalOr LogicalNot
    Cast Select SelectV2 MatMul BatchMatMulV2 Conv2D DepthwiseConv2dNative MaxPool AvgPool
    FusedBatchNormV3 Sum Mean Max Min Prod All Any ArgMax ArgMin Shape Size Rank Reshape
    ExpandDims Squeeze ConcatV2 Split SplitV Slice StridedSlice Pack Unpack Transpose Tile Pad
    PadV2 MirrorPad Fill ZerosLike OnesLike GatherV2 GatherNd OneHot Range Cumsum TopKV2 Where
    BroadcastTo Identity Softmax LogSoftmax SoftmaxCrossEntropyWithLogits Switch Merge Enter
    Exit NextIteration LoopCond Const ReadVariableOp"""
    claimed = claimed.split()
    missing = [op for op in claimed if not export_rules.has(op)]
    assert not missing


def test_gather_nd_with_batch_dims_exports():
    p = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    i = np.array([[[3], [0]], [[1], [1]]], np.int32)
    _export_one(lambda a, b: rg.gather_nd(a, b, batch_dims=1), [p, i], oracle=("ort", "reference"))


def test_rint_rounds_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -0.4], np.float32)
    _export_one(lambda a: extra_ops.rint(a), [x], oracle=("ort", "reference"))


def test_broadcast_dynamic_shape():
    a = np.array([4, 1, 3], np.int32)
    b = np.array([5, 1], np.int32)

    def broadcast(s, t):
        return rg.get_default_graph().create_op("BroadcastArgs", [s, t]).outputs[0]

    _export_one(broadcast, [a, b], oracle=("ort", "reference"))
    _export_one(lambda s, t: broadcast(t, s), [a, b], oracle=("ort", "reference"))


def test_zero_padding_before_max_pool_survives_onnxruntimes_pad_fusion():
    """tf.pad then a VALID max pool over negative values: the padded zeros win the windows at
    the border. onnxruntime folds a Pad into a following MaxPool's pads (which pad with -inf)
    unless the Pad names its axes; the export names them (opset 18 and newer)."""
    x = -1.0 - np.abs(_rng.normal(size=(1, 2, 5, 5))).astype(np.float32)

    def build(t):
        p = rg.pad(t, [[0, 0], [0, 0], [1, 1], [1, 1]])
        return rg.max_pool(p, [1, 1, 3, 3], [1, 1, 2, 2], "VALID", data_format="NCHW")

    m = _export_one(build, [x])
    pad = next(n for n in m.graph.node if n.op_type == "Pad")
    assert len(pad.input) == 4  # data, pads, value, axes
    with rg.Graph().as_default():
        t = rg.placeholder(rg.float32, x.shape)
        y = build(t)
        with Session() as s:
            want = s.run(y, {t: x})
    assert (want[0, 0, 0] == 0).all()  # the padding's zeros
