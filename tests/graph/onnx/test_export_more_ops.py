"""ONNX export of the TensorFlow ops composed from several ONNX ops: Atan2, TruncateDiv /
TruncateMod, ApproximateEqual, Bucketize, LowerBound / UpperBound, LinSpace, the segment
reductions, MatrixBandPart, the MatrixDiag family, Roll, SpaceToBatchND / BatchToSpaceND and
Unique on the integer types onnxruntime's Unique lacks.

The op samples (tests/op_samples) run through test_export_ops; the cases here are the ones the
samples cannot carry (integer dtypes of differentiable ops, signed zeros and infinities, empty
segments) and whole programs: an embedding lookup of int32 ids on a variable, and a causal
mask in a small attention graph. Each model passes onnx.checker and computes what a rill Session
computes, in onnxruntime (at every opset it loads from 13) and in onnx's ReferenceEvaluator (at
the newest opset onnx ships).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx
from rill.graph.onnx.versions import runtime_max_opset
from rill.graph.ops import special_math_ops as sm

NEWEST = onnx.defs.onnx_opset_version()
ORT_MAX = min(runtime_max_opset() or NEWEST, NEWEST)


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, rill gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, rill gives {want.shape}"
    if want.dtype.kind == "f":
        scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale, err_msg=what)
        # Signed zeros and infinities must come out as rill's.
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _check(g, inputs, outputs, feeds, opset, session=None):
    model = export_onnx(g, inputs, outputs, opset=opset, session=session)
    onnx.checker.check_model(model, full_check=True)
    if session is not None:
        want = session.run(list(outputs), dict(zip(inputs, feeds)))
    else:
        with Session(graph=g) as sess:
            want = sess.run(list(outputs), dict(zip(inputs, feeds)))
    by_name = {vi.name: np.asarray(v) for vi, v in zip(model.graph.input, feeds)}
    reference = opset == NEWEST or opset > ORT_MAX
    if opset <= ORT_MAX:
        try:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])  # fmt: skip
        except Exception as e:  # noqa: BLE001 - only a missing kernel is tolerated, below
            if "Could not find an implementation" not in str(e):
                raise
            sess, reference = None, True  # onnxruntime lacks the type (Atan on float64)
        for k, (a, b) in enumerate(zip(sess.run(None, by_name) if sess else [], want)):
            _same(a, b, f"onnxruntime opset {opset} output {k}")
    if reference:
        for k, (a, b) in enumerate(zip(ReferenceEvaluator(model).run(None, by_name), want)):
            _same(a, b, f"reference opset {opset} output {k}")
    return model


def _opsets(since: int = 13):
    return sorted({o for o in (13, 16, 17, 18, ORT_MAX, NEWEST) if o >= since})


def _export(build, feeds, since: int = 13):
    """build(*placeholders) exported and checked at every opset from `since`."""
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(v).dtype), np.asarray(v).shape,
                              name=f"x{i}") for i, v in enumerate(feeds)]  # fmt: skip
        out = build(*phs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    for opset in _opsets(since):
        _check(g, phs, outs, feeds, opset)


def _refused(build, feeds, opset, match):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(v).dtype), np.asarray(v).shape)
               for v in feeds]  # fmt: skip
        out = build(*phs)
    with pytest.raises(rg.errors.UnimplementedError, match=match):
        export_onnx(g, phs, [out], opset=opset)


# -- elementwise -------------------------------------------------------------------------------

_Z = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, np.nan])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_quadrants_zeros_and_infinities(dtype):
    y = np.repeat(_Z, len(_Z)).astype(dtype)
    x = np.tile(_Z, len(_Z)).astype(dtype)
    _export(sm.atan2, [y, x])


INTS = np.array([7, -7, 7, -7, 0, 6, -6, 1], np.int32)
DIVS = np.array([2, 2, -2, -2, 3, 4, -4, -1], np.int32)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.float32, np.float64])
def test_truncate_div_and_mod_negative_operands(dtype):
    x, y = INTS.astype(dtype), DIVS.astype(dtype)
    if np.dtype(dtype).kind == "f":
        x, y = x * 1.25, y * 0.5
    ops = [sm.truncatediv] + ([sm.truncatemod] if dtype in (np.int32, np.int64) or
                              np.dtype(dtype).kind == "f" else [])  # fmt: skip
    _export(lambda a, b: [f(a, b) for f in ops], [x, y])


def test_truncate_div_unsigned():
    _export(sm.truncatediv, [np.array([7, 200, 9], np.uint8), np.array([2, 3, 10], np.uint8)])


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32, np.float64])
def test_approximate_equal(dtype):
    x = np.array([0, 1, 2, 250, 3], dtype)
    y = np.array([0, 2, 2, 3, 3], dtype)
    if np.dtype(dtype).kind == "f":
        y = y + np.array([1e-7, 0, 4e-3, 0, -6e-3], dtype)
    _export(lambda a, b: sm.approximate_equal(a, b, tolerance=5e-3), [x, y])


def test_bucketize_edges_and_nan():
    from rill.graph.ops.set_search_ops import bucketize

    x = np.array([[-5.0, 0.0, 0.5], [1.0, 9.0, np.nan]], np.float32)
    _export(lambda t: [bucketize(t, [0.0, 0.5, 1.0, 1.0, 4.0]), bucketize(t, [])], [x])
    _export(lambda t: bucketize(t, [-1.0, 2.0]), [np.array([-1, 0, 2, 3], np.int64)])


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("out_type", [rg.int32, rg.int64])
def test_searchsorted(side, out_type):
    from rill.graph.ops.set_search_ops import searchsorted

    s = np.array([[0, 1, 1, 3, 7], [-2, -2, 0, 0, 5]], np.int32)
    v = np.array([[-1, 1, 3, 8], [-2, 0, 4, 5]], np.int32)
    _export(lambda a, b: searchsorted(a, b, side=side, out_type=out_type), [s, v])
    _export(lambda a, b: searchsorted(a, b, side=side, out_type=out_type),
            [s.astype(np.float32), v.astype(np.float32) + 0.5])  # fmt: skip


@pytest.mark.parametrize("num", [1, 2, 7])
def test_lin_space(num):
    from rill.graph.ops.manip_ops import linspace

    _export(lambda a, b, n: linspace(a, b, n),
            [np.float32(-1.5), np.float32(2.0), np.int32(num)])  # fmt: skip
    _export(lambda a, b: linspace(a, b, num), [np.float64(3.0), np.float64(-3.0)])


# -- Unique ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int16, np.float32, np.float16])
@pytest.mark.parametrize("out_idx", [rg.int32, rg.int64])
def test_unique_and_counts(dtype, out_idx):
    from rill.graph.ops.gather_ops import unique
    from rill.graph.ops.set_search_ops import unique_with_counts

    x = np.array([5, 3, 5, 0, 3, 3, 7], dtype)
    _export(lambda t: [*unique(t, out_idx=out_idx), *unique_with_counts(t, out_idx=out_idx)], [x])


def test_embedding_lookup_of_int32_ids_on_a_variable():
    """tf.nn.embedding_lookup of an int32 id placeholder: Unique on int32, then a gather from
    the frozen variable."""
    from rill.graph.ops.embedding_ops import embedding_lookup

    g = rg.Graph()
    with g.as_default():
        ids = rg.placeholder(rg.int32, [None], name="ids")
        table = rg.Variable(np.arange(12, dtype=np.float32).reshape(6, 2) * 0.5, name="table")
        out = embedding_lookup(table, ids)
        init = rg.global_variables_initializer()
    feeds = [np.array([4, 1, 4, 0, 5], np.int32)]
    with Session(graph=g) as sess:
        sess.run(init)
        for opset in _opsets():
            model = _check(g, [ids], [out], feeds, opset, session=sess)
    assert "Unique" in [n.op_type for n in model.graph.node]


# -- segment reductions ------------------------------------------------------------------------

_UNSORTED = {"UnsortedSegmentSum": (16, "unsorted_segment_sum"),
             "UnsortedSegmentProd": (16, "unsorted_segment_prod"),
             "UnsortedSegmentMax": (18, "unsorted_segment_max"),
             "UnsortedSegmentMin": (18, "unsorted_segment_min")}  # fmt: skip
_SORTED = {"SegmentSum": (16, "segment_sum"), "SegmentMean": (16, "segment_mean"),
           "SegmentProd": (16, "segment_prod"), "SegmentMax": (18, "segment_max"),
           "SegmentMin": (18, "segment_min")}  # fmt: skip


def _segment_fn(name):
    from rill.graph.ops import grad_ops
    from rill.graph.ops import segment_ops as so

    return getattr(so, name, None) or getattr(grad_ops, name)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("op", sorted(_UNSORTED))
def test_unsorted_segments_empty_and_dropped(op, dtype):
    """Segment 1 and 4 are empty (the identity: 0, 1, lowest, highest); id -1 is dropped."""
    since, fn = _UNSORTED[op]
    data = np.array([[3, -2], [5, 1], [-4, 7], [2, 2], [6, -1]], dtype)
    ids = np.array([0, 2, -1, 0, 3], np.int32)
    build = lambda d, i: _segment_fn(fn)(d, i, 5)  # noqa: E731
    _export(build, [data, ids], since=since)
    _refused(build, [data, ids], since - 1, f"cannot export {op} op")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("op", sorted(_SORTED))
def test_sorted_segments_empty_rows_and_run_time_count(op, dtype):
    """ids skip 1 and 2 (empty: 0, a product 1); the row count comes from the ids at run time,
    and an empty ids vector gives no rows."""
    since, fn = _SORTED[op]
    data = np.array([[3, -2, 1], [5, 1, 0], [-4, 7, 2], [2, 2, -3], [6, -1, 5]], dtype)
    for ids in (np.array([0, 0, 3, 3, 4], np.int64), np.array([1, 1, 1, 1, 1], np.int32)):
        _export(lambda d, i: _segment_fn(fn)(d, i), [data, ids], since=since)
    _export(lambda d, i: _segment_fn(fn)(d, i), [data[:0], np.zeros(0, np.int32)], since=since)
    _refused(lambda d, i: _segment_fn(fn)(d, i), [data, ids], since - 1, f"cannot export {op} op")


def test_segment_mean_of_integers_truncates():
    data = np.array([[-7], [2], [5], [-2], [9]], np.int32)
    _export(lambda d, i: _segment_fn("segment_mean")(d, i),
            [data, np.array([0, 0, 1, 1, 2], np.int32)], since=16)  # fmt: skip


# -- band parts, diagonals, rolls, blocks ------------------------------------------------------


@pytest.mark.parametrize("bands", [(-1, 0), (0, -1), (1, 2), (0, 0), (-1, -1), (3, 1)])
def test_band_part_constant_bands(bands):
    from rill.graph.ops.diag_ops import matrix_band_part

    x = np.arange(2 * 4 * 5, dtype=np.int32).reshape(2, 4, 5) - 17
    _export(lambda t: matrix_band_part(t, *bands), [x])
    _export(lambda t: matrix_band_part(t, *bands), [x > 0])


def test_band_part_run_time_bands_and_unknown_dims():
    from rill.graph.ops.diag_ops import matrix_band_part

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, None, None])
        lo, up = rg.placeholder(rg.int64, []), rg.placeholder(rg.int64, [])
        out = matrix_band_part(x, lo, up)
    v = np.random.default_rng(3).standard_normal((2, 5, 4)).astype(np.float32)
    for bands in ((-1, 0), (1, -1), (2, 1), (0, 0)):
        feeds = [v, np.int64(bands[0]), np.int64(bands[1])]
        for opset in _opsets():
            _check(g, [x, lo, up], [out], feeds, opset)


def test_causal_mask_in_attention():
    """softmax(q·kᵀ/√d + (1 - band_part(ones, -1, 0))·-1e9)·v, the TF1 causal-attention idiom,
    with the sequence length unknown."""
    from rill.graph.ops.diag_ops import matrix_band_part

    g = rg.Graph()
    with g.as_default():
        q = rg.placeholder(rg.float32, [None, None, 8], name="q")
        k = rg.placeholder(rg.float32, [None, None, 8], name="k")
        v = rg.placeholder(rg.float32, [None, None, 8], name="v")
        n = rg.shape(q)[1]
        causal = matrix_band_part(rg.ones(rg.stack([n, n])), -1, 0)
        scores = rg.matmul(q, k, transpose_b=True) / np.sqrt(8.0).astype(np.float32)
        scores = scores + (1.0 - causal) * -1e9
        out = rg.matmul(rg.nn.softmax(scores), v)
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal((2, 6, 8)).astype(np.float32) for _ in range(3)]
    for opset in _opsets():
        model = _check(g, [q, k, v], [out], feeds, opset)
    assert "Where" in [nd.op_type for nd in model.graph.node]


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.bool_])
def test_matrix_diag_family_main_diagonal(dtype):
    from rill.graph.ops import diag_ops as do

    rng = np.random.default_rng(11)
    x = (rng.integers(-5, 5, (2, 3, 4)) > 0) if dtype is np.bool_ else \
        rng.integers(-5, 5, (2, 3, 4)).astype(dtype)  # fmt: skip
    d = x[..., 0]
    raw = rg.get_default_graph  # the V1 ops through create_op, as the op samples build them

    def v1(op_type, *ts):
        return raw().create_op(op_type, list(ts), name=op_type).outputs[0]

    pad = np.zeros((), dtype)
    _export(lambda t, u: [v1("MatrixDiag", u), v1("MatrixDiagPart", t),
                          v1("MatrixSetDiag", t, u), do.matrix_diag(u, padding_value=pad),
                          do.matrix_diag(u, num_cols=4, padding_value=np.ones((), dtype)),
                          do.matrix_diag_part(t, padding_value=pad),
                          do.matrix_set_diag(t, u)], [x, d])  # fmt: skip
    tall = np.swapaxes(x, -1, -2)
    _export(lambda t, u: [do.matrix_diag_part(t, padding_value=pad), do.matrix_set_diag(t, u)],
            [tall, d])  # fmt: skip


def test_matrix_diag_v3_off_the_main_diagonal_is_refused():
    from rill.graph.ops import diag_ops as do

    d = np.ones((2, 3), np.float32)
    _refused(lambda t: do.matrix_diag(t, k=1), [d], NEWEST, "only k = 0")


def test_roll_unknown_dims_and_int_values():
    from rill.graph.ops import manip_ops as mo

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.int32, [None, 4, None])
        out = mo.roll(x, [3, -5, 7, 1], [0, 1, 2, 2])
    v = np.arange(3 * 4 * 5, dtype=np.int32).reshape(3, 4, 5)
    for opset in _opsets():
        _check(g, [x], [out], [v], opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_space_to_batch_round_trip_unknown_batch(dtype):
    from rill.graph.ops import image_ops

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, 5, 4, 3])
        s2b = image_ops.space_to_batch_nd(x, rg.constant([2, 3]), rg.constant([[1, 0], [1, 1]]))
        b2s = image_ops.batch_to_space_nd(s2b, rg.constant([2, 3]), rg.constant([[1, 0], [1, 1]]))
        one = image_ops.space_to_batch_nd(x, rg.constant([5]), rg.constant([[0, 0]]))
    v = np.arange(2 * 5 * 4 * 3).reshape(2, 5, 4, 3).astype(dtype)
    for opset in _opsets():
        _check(g, [x], [s2b, b2s, one], [v], opset)
