"""ONNX export of MaxPoolWithArgmax, StringLower / StringUpper, (Static)RegexFullMatch,
CumulativeLogsumexp, SparseToDense, ListDiff, ResizeArea and the random ops (export_remaining).

Deterministic ops: each model passes onnx.checker and computes what a rill Session computes in
onnxruntime (at opsets 13 and the newest it loads) and, where onnx's ReferenceEvaluator has the
op, in it too. The random ops cannot draw rill's values: their models are checked for shape,
dtype and the moments of their distribution in onnxruntime.
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
from rill.graph.ops import image_ops, manip_ops, pool_extra_ops, set_search_ops, string_ops

NEWEST = onnx.defs.onnx_opset_version()
ORT_MAX = min(runtime_max_opset() or NEWEST, NEWEST)


def _graph(build, feeds):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(v).dtype), np.asarray(v).shape,
                              name=f"x{i}") for i, v in enumerate(feeds)]  # fmt: skip
        out = build(*phs)
    return g, phs, list(out) if isinstance(out, (list, tuple)) else [out]


def _text(v, to_str: bool):
    """onnxruntime takes and gives strings as str, rill as bytes."""
    v = np.asarray(v)
    if v.dtype != object:
        return v
    conv = (lambda s: s.decode()) if to_str else (lambda s: s.encode())
    return np.array([conv(s) for s in v.reshape(-1)], dtype=object).reshape(v.shape)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {vi.name: _text(v, True) for vi, v in zip(model.graph.input, feeds)})
    return [_text(v, False) for v in got]


def check(build, feeds, opsets=(13, ORT_MAX), reference=True, rtol=1e-6):
    """Exports at each opset and compares onnxruntime (and the ReferenceEvaluator) with rill."""
    g, phs, outs = _graph(build, feeds)
    with Session(graph=g) as sess:
        want = sess.run(outs, dict(zip(phs, feeds)))
    for opset in opsets:
        model = export_onnx(g, phs, outs, opset=opset)
        onnx.checker.check_model(model, full_check=True)
        runs = [("ort", _ort(model, feeds))]
        if reference:
            by_name = {vi.name: np.asarray(v) for vi, v in zip(model.graph.input, feeds)}
            runs.append(("reference", ReferenceEvaluator(model).run(None, by_name)))
        for who, got in runs:
            for k, (a, b) in enumerate(zip(got, want)):
                a, b = np.asarray(a), np.asarray(b)
                what = f"{who} opset {opset} output {k}"
                assert a.dtype == b.dtype, f"{what}: dtype {a.dtype}, rill {b.dtype}"
                assert a.shape == b.shape, f"{what}: shape {a.shape}, rill {b.shape}"
                if b.dtype.kind == "f":
                    scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
                    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=what)
                else:
                    np.testing.assert_array_equal(a, b, err_msg=what)


def refused(build, feeds, match, opset=ORT_MAX):
    g, phs, outs = _graph(build, feeds)
    with pytest.raises(rg.errors.UnimplementedError, match=match):
        export_onnx(g, phs, outs, opset=opset)


_rng = np.random.default_rng(11)


# -- MaxPoolWithArgmax -------------------------------------------------------------------------


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("batch_in_index", [False, True])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_max_pool_with_argmax(padding, batch_in_index, dtype):
    x = _rng.permutation(2 * 5 * 7 * 3).reshape(2, 5, 7, 3).astype(np.float32)
    check(lambda t: pool_extra_ops.max_pool_with_argmax(t, [1, 3, 2, 1], [1, 2, 2, 1], padding,
                                                        batch_in_index, dtype), [x])  # fmt: skip


def test_max_pool_with_argmax_ties_keep_the_first_maximum():
    x = np.zeros((1, 4, 4, 2), np.float32)
    x[0, 1, 1, 0] = x[0, 1, 2, 0] = 5.0
    # ONNX leaves ties open; onnxruntime keeps the first, onnx's ReferenceEvaluator another.
    check(lambda t: pool_extra_ops.max_pool_with_argmax(t, [1, 2, 3, 1], [1, 1, 1, 1], "VALID",
                                                        True), [x], reference=False)  # fmt: skip


def test_max_pool_with_argmax_unknown_batch():
    x = _rng.standard_normal((3, 4, 4, 2)).astype(np.float32)
    g = rg.Graph()
    with g.as_default():
        p = rg.placeholder(rg.float32, [None, None, None, 2], name="x")
        y, arg = pool_extra_ops.max_pool_with_argmax(p, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", True)
    with Session(graph=g) as sess:
        want = sess.run([y, arg], {p: x})
    got = _ort(export_onnx(g, [p], [y, arg], opset=ORT_MAX), [x])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


# -- strings -----------------------------------------------------------------------------------


def _op(op_type, inputs, **attrs):
    return rg.get_default_graph().create_op(op_type, list(inputs), attrs).outputs[0]


WORDS = np.array([[b"Hello World", b"\xc3\x89t\xc3\xa9"], [b"ABC-def_9", b""]], dtype=object)


@pytest.mark.parametrize("fn", [string_ops.string_lower, string_ops.string_upper],
                         ids=["lower", "upper"])  # fmt: skip
def test_string_case_utf8(fn):
    # ReferenceEvaluator's StringNormalizer needs a locale this machine may lack.
    check(lambda t: fn(t, encoding="utf-8"), [WORDS], reference=False)


@pytest.mark.parametrize("fn", [string_ops.string_lower, string_ops.string_upper],
                         ids=["lower", "upper"])  # fmt: skip
def test_string_case_ascii_only_without_encoding(fn):
    check(fn, [WORDS], reference=False)


def test_static_regex_full_match():
    x = np.array([b"abc123", b"abc", b"x1", b"123"], dtype=object)
    # ReferenceEvaluator's RegexFullMatch needs the re2 module.
    check(lambda t: _op("StaticRegexFullMatch", [t], pattern=r"[a-z]+\d+"), [x], opsets=(ORT_MAX,),
          reference=False)  # fmt: skip
    refused(lambda t: _op("StaticRegexFullMatch", [t], pattern="a"), [x], "opset 20", opset=18)


def test_regex_full_match_with_a_constant_pattern():
    x = np.array([[b"a.b", b"ab"], [b"a-b", b"aab"]], dtype=object)
    check(lambda t: _op("RegexFullMatch", [t, rg.constant(rb"a\.b|a+b")]), [x], opsets=(ORT_MAX,),
          reference=False)  # fmt: skip


# -- CumulativeLogsumexp -----------------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumulative_logsumexp(exclusive, reverse, axis):
    x = (_rng.standard_normal((4, 5)) * 30).astype(np.float32)
    x[1, 2] = -np.inf
    check(lambda t: manip_ops.cumulative_logsumexp(t, axis, exclusive=exclusive,
                                                   reverse=reverse), [x], rtol=1e-5)  # fmt: skip


def test_cumulative_logsumexp_float64_and_infinities():
    x = np.array([[-np.inf, -np.inf, -np.inf], [1.0, np.inf, 2.0], [700.0, 0.0, -300.0]])
    check(lambda t: manip_ops.cumulative_logsumexp(t, 1), [x], rtol=1e-12)


@pytest.mark.parametrize("dtype", [rg.float16, rg.bfloat16])
def test_cumulative_logsumexp_half_types(dtype):
    x = (_rng.standard_normal((3, 6)) * 4).astype(np.float32)
    check(lambda t: rg.cast(manip_ops.cumulative_logsumexp(rg.cast(t, dtype), 1, reverse=True),
                            rg.float32), [x], rtol=1e-2)  # fmt: skip


# -- SparseToDense, ListDiff -------------------------------------------------------------------


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_sparse_to_dense_matrix_indices(index_dtype):
    idx = np.array([[0, 1], [2, 3], [1, 0]], index_dtype)
    vals = np.array([1.5, -2.0, 3.0], np.float32)
    check(lambda i, v: rg.sparse_to_dense(i, np.array([3, 4], index_dtype), v, 7.0,
                                          validate_indices=False), [idx, vals])  # fmt: skip


def test_sparse_to_dense_vector_indices_scalar_value():
    idx = np.array([0, 2, 4], np.int64)
    check(lambda i: rg.sparse_to_dense(i, np.array([6], np.int64), np.int32(9), np.int32(-1)),
          [idx])  # fmt: skip


def test_sparse_to_dense_dynamic_shape():
    idx = np.array([[1, 1]], np.int32)
    shape = np.array([2, 3], np.int32)
    check(lambda i, s: rg.sparse_to_dense(i, s, 5.0, 0.0), [idx, shape])


@pytest.mark.parametrize("out_idx", [rg.int32, rg.int64])
def test_list_diff(out_idx):
    x = np.array([4, 1, 7, 1, 3, 9, 4], np.int32)
    y = np.array([4, 3, 8], np.int32)
    check(lambda a, b: set_search_ops.setdiff1d(a, b, out_idx), [x, y])


def test_list_diff_floats_and_empty_y():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    check(lambda a, b: set_search_ops.setdiff1d(a, b), [x, np.zeros(0, np.float32)])
    check(lambda a, b: set_search_ops.setdiff1d(a, b), [x, x])


def test_list_diff_strings_from_opset_19():
    x = np.array([b"a", b"bc", b"a", b"d"], dtype=object)
    y = np.array([b"d", b"e"], dtype=object)
    check(lambda a, b: set_search_ops.setdiff1d(a, b), [x, y], opsets=(19, ORT_MAX),
          reference=False)  # fmt: skip
    refused(lambda a, b: set_search_ops.setdiff1d(a, b), [x, y], "opset 19", opset=18)


# -- ResizeArea --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float64])
def test_resize_area_integer_factors(dtype):
    x = _rng.uniform(0, 200, (2, 6, 8, 3)).astype(dtype)
    check(lambda t: image_ops.resize_area(t, [3, 2]), [x], rtol=1e-5)


def test_resize_area_other_sizes_are_refused():
    x = np.zeros((1, 6, 8, 1), np.float32)
    refused(lambda t: image_ops.resize_area(t, [4, 4]), [x], "integer down-scaling")
    refused(lambda t: image_ops.resize_area(t, [12, 8]), [x], "integer down-scaling")
    refused(lambda t: image_ops.resize_area(t, [3, 4], align_corners=True), [x], "align_corners")


# -- random ops: shape, dtype, moments ---------------------------------------------------------


# onnxruntime 1.32 implements RandomNormalLike, RandomUniformLike and Multinomial at their
# first versions only, not opset 22's (which adds bfloat16): it loads them up to opset 21.
RANDOM_OPSET = min(ORT_MAX, 21)


def _draw(build, opset=RANDOM_OPSET):
    g = rg.Graph()
    with g.as_default():
        out = build()
    model = export_onnx(g, [], [out], opset=opset)
    onnx.checker.check_model(model, full_check=True)
    return _ort(model, [])[0]


@pytest.mark.parametrize("dtype", [rg.float32, rg.float64])
def test_random_standard_normal(dtype):
    v = _draw(lambda: rg.random_normal([200, 100], dtype=dtype, seed=7))
    assert v.dtype == dtype.np and v.shape == (200, 100)
    assert abs(v.mean()) < 0.02 and abs(v.std() - 1) < 0.02


def test_random_uniform():
    v = _draw(lambda: rg.random_uniform([300, 100], seed=3), opset=13)
    assert v.dtype == np.float32 and v.shape == (300, 100)
    assert v.min() >= 0 and v.max() < 1
    assert abs(v.mean() - 0.5) < 0.01 and abs(v.var() - 1 / 12) < 0.005


@pytest.mark.parametrize("opset", [13, RANDOM_OPSET])
def test_truncated_normal_redraws_beyond_two(opset):
    v = _draw(lambda: rg.truncated_normal([400, 100], seed=5), opset=opset)
    assert v.dtype == np.float32 and v.shape == (400, 100)
    assert np.abs(v).max() <= 2
    # A standard normal truncated to [-2, 2] has variance 0.7737.
    assert abs(v.mean()) < 0.02 and abs(v.var() - 0.7737) < 0.02


def test_multinomial():
    p = np.array([[0.2, 0.5, 0.3], [0.9, 0.05, 0.05]])
    v = _draw(lambda: rg.multinomial(np.log(p).astype(np.float32), 20000))
    assert v.dtype == np.int64 and v.shape == (2, 20000)
    freq = np.stack([np.bincount(r, minlength=3) / r.size for r in v])
    np.testing.assert_allclose(freq, p, atol=0.02)
