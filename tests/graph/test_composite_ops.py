"""TensorFlow 1.x's composite array helpers, against numpy."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.ops import composite_ops as co


def _run(fn, *feeds):
    with rg.Graph().as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(f).dtype), np.shape(f)) for f in feeds]
        out = fn(*phs)
        with Session() as sess:
            return sess.run(out, dict(zip(phs, feeds)))


def test_boolean_mask_and_sequence_mask():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = np.array([[True, False, True], [False, False, True]])
    np.testing.assert_array_equal(_run(co.boolean_mask, x, m), x[m])
    m1 = np.array([True, False, True])
    np.testing.assert_array_equal(_run(lambda a, b: co.boolean_mask(a, b, axis=1), x, m1), x[:, m1])
    lens = np.array([0, 2, 4], np.int32)
    want = np.arange(4)[None, :] < lens[:, None]
    np.testing.assert_array_equal(_run(co.sequence_mask, lens), want)
    np.testing.assert_array_equal(
        _run(lambda a: co.sequence_mask(a, 5, dtype=rg.float32), lens),
        (np.arange(5)[None, :] < lens[:, None]).astype(np.float32),
    )
    with rg.Graph().as_default(), pytest.raises(TypeError, match="mask must be bool"):
        co.boolean_mask(rg.constant([1, 2]), rg.constant([1, 0]))


def test_eye_norm_tensordot_meshgrid():
    np.testing.assert_array_equal(_run(lambda: co.eye(3, 4)), np.eye(3, 4, dtype=np.float32))
    np.testing.assert_array_equal(
        _run(lambda: co.eye(2, batch_shape=[3], dtype=rg.int32)),
        np.broadcast_to(np.eye(2), (3, 2, 2)),
    )
    x = np.random.RandomState(0).randn(3, 4).astype(np.float64)
    for ord_, axis, want in [
        ("euclidean", None, np.linalg.norm(x)),
        (1, 1, np.abs(x).sum(1)),
        (np.inf, 0, np.abs(x).max(0)),
        (3, 1, (np.abs(x) ** 3).sum(1) ** (1 / 3)),
        ("fro", [0, 1], np.linalg.norm(x, "fro")),
    ]:
        got = _run(lambda a, o=ord_, ax=axis: co.norm(a, ord=o, axis=ax), x)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    a = np.random.RandomState(1).randn(2, 3, 4)
    b = np.random.RandomState(2).randn(4, 3, 5)
    np.testing.assert_allclose(
        _run(lambda p, q: co.tensordot(p, q, [[1, 2], [1, 0]]), a, b),
        np.tensordot(a, b, [[1, 2], [1, 0]]),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        _run(lambda p, q: co.tensordot(p, q, 1), a, b), np.tensordot(a, b, 1)
    )
    xs, ys = np.arange(3), np.arange(4) * 10
    for indexing in ("xy", "ij"):
        got = _run(lambda p, q, i=indexing: co.meshgrid(p, q, indexing=i), xs, ys)
        for g_, w in zip(got, np.meshgrid(xs, ys, indexing=indexing)):
            np.testing.assert_array_equal(g_, w)


def test_sort_argsort_repeat():
    x = np.array([[3, 1, 2], [0, 5, -4]], np.int32)
    np.testing.assert_array_equal(_run(co.sort, x), np.sort(x, -1))
    np.testing.assert_array_equal(
        _run(lambda a: co.sort(a, axis=0, direction="DESCENDING"), x), -np.sort(-x, 0)
    )
    np.testing.assert_array_equal(_run(co.argsort, x), np.argsort(x, -1, kind="stable"))
    np.testing.assert_array_equal(_run(lambda a: co.repeat(a, 2), x), np.repeat(x, 2))
    np.testing.assert_array_equal(
        _run(lambda a: co.repeat(a, [1, 0, 3], axis=1), x), np.repeat(x, [1, 0, 3], axis=1)
    )


def test_tuple_saturate_cast_batch_gather_accumulate_confusion():
    with rg.Graph().as_default():
        v = rg.Variable(0, name="v")
        bump = v.assign_add(1)
        a, b = co.tuple_([rg.constant(1), rg.constant(2)], control_inputs=[bump])
        with Session() as sess:
            sess.run(v.initializer)
            assert sess.run([a, b]) == [1, 2] and sess.run(v.value()) == 1
    np.testing.assert_array_equal(
        _run(lambda t: co.saturate_cast(t, rg.uint8), np.array([-5.0, 3.7, 300.0])), [0, 3, 255]
    )
    params = np.arange(12).reshape(3, 4)
    idx = np.array([[3, 0], [1, 1], [2, 0]])
    np.testing.assert_array_equal(
        _run(co.batch_gather, params, idx), np.take_along_axis(params, idx, 1)
    )
    np.testing.assert_array_equal(
        _run(lambda p, q: co.accumulate_n([p, q, p]), params, params), 3 * params
    )
    labels, preds = np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1])
    want = np.zeros((3, 3), np.int32)
    np.add.at(want, (labels, preds), 1)
    np.testing.assert_array_equal(_run(co.confusion_matrix, labels, preds), want)


def test_static_shape_helpers():
    assert co.broadcast_static_shape([2, 1, 3], [4, 1]).as_list() == [2, 4, 3]
    with pytest.raises(ValueError, match="Incompatible shapes"):
        co.broadcast_static_shape([2, 3], [4, 3])
    assert (
        co.dimension_value(5) == 5 and co.dimension_at_index(rg.TensorShape([2, None]), 1) is None
    )
