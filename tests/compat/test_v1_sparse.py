"""tf.sparse_* / tf.sparse.* (rill.graph.ops.sparse_math) and tf.nn.safe_embedding_lookup_sparse:
values against TensorFlow 2.21's tf.compat.v1 (expected values computed there and pasted below),
gradients against analytic ones, unordered input, run-time dense shapes, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.autodiff import gradients


def _norm(v):
    if hasattr(v, "indices") and hasattr(v, "dense_shape"):
        return (
            "sp",
            np.asarray(v.indices).tolist(),
            np.round(np.asarray(v.values, np.float64), 5).tolist(),
            np.asarray(v.dense_shape).tolist(),
        )
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return np.round(np.asarray(v).astype(np.float64), 5).tolist()


def _program():
    """The program run under TensorFlow to make TF_EXPECTED (same calls, same inputs)."""
    sp = tf.SparseTensor([[0, 1], [1, 2], [2, 0], [2, 2]], [1.0, -4.0, 3.0, 2.0], [3, 3])
    sp2 = tf.SparseTensor([[0, 1], [1, 1], [2, 2]], [5.0, 1.0, -2.0], [3, 3])
    sp3 = tf.SparseTensor([[0, 0], [0, 3], [1, 1]], [1.0, 2.0, 3.0], [2, 4])
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    ids = tf.SparseTensor(
        [[0, 0], [0, 1], [2, 0], [3, 0]], np.array([1, -1, 2, 3], np.int64), [4, 2]
    )
    w = tf.SparseTensor([[0, 0], [0, 1], [2, 0], [3, 0]], [2.0, 1.0, 1.0, -1.0], [4, 2])
    emb = np.arange(12, dtype=np.float32).reshape(4, 3)
    ids3 = tf.SparseTensor(
        [[0, 0, 0], [0, 1, 0], [1, 0, 1]], np.array([1, 2, 3], np.int64), [2, 2, 2]
    )
    words = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([3, 1, 0], np.int64), [2, 2])
    return dict(
        mm=tf.sparse_tensor_dense_matmul(sp, b),
        mmab=tf.sparse_tensor_dense_matmul(sp, b.T, adjoint_a=True, adjoint_b=True),
        rs=tf.sparse_reduce_sum(sp),
        rs0=tf.sparse_reduce_sum(sp, 0),
        rs1k=tf.sparse_reduce_sum(sp, axis=-1, keepdims=True),
        rss=tf.sparse_reduce_sum_sparse(sp, 1),
        rm=tf.sparse_reduce_max(sp, 1),
        rms=tf.sparse.reduce_max_sparse(sp, 0, keepdims=True),
        rm_all=tf.sparse_reduce_max(sp),
        add=tf.sparse_add(sp, sp2),
        addt=tf.sparse.add(sp, sp2, threshold=1.5),
        addd=tf.sparse_add(sp, np.ones((3, 3), np.float32)),
        ss=tf.sparse_segment_sum(data, [0, 2, 3, 1], [0, 0, 1, 3]),
        sm=tf.sparse_segment_mean(data, [0, 2, 3], [0, 0, 2], num_segments=4),
        sq=tf.sparse.segment_sqrt_n(data, [0, 2, 3], [0, 0, 1]),
        ret=tf.sparse_retain(sp, [True, False, True, False]),
        reo=tf.sparse_reorder(tf.SparseTensor([[2, 0], [0, 1], [1, 2]], [1.0, 2.0, 3.0], [3, 3])),
        rsh=tf.sparse_reshape(sp, [9, -1]),
        rsh2=tf.sparse.reshape(sp3, [4, 2]),
        cc0=tf.sparse_concat(0, [sp, sp2]),
        cc1=tf.sparse_concat(1, [sp, sp3], expand_nonconcat_dim=True),
        tr=tf.sparse_transpose(sp),
        fe=tf.sparse_fill_empty_rows(tf.SparseTensor([[1, 1], [3, 0]], [5.0, 6.0], [5, 2]), -1.0),
        sl=tf.sparse_slice(sp, [1, 1], [5, 5]),
        sp_=tf.sparse_split(sp_input=sp3, num_split=3, axis=1),
        ind=tf.sparse_to_indicator(words, 4),
        smx=tf.sparse_softmax(sp3),
        mx=tf.sparse_maximum(sp, sp2),
        mn=tf.sparse_minimum(sp, sp2),
        mg=tf.sparse_merge(words, tf.SparseTensor(words.indices, [0.1, 0.2, 0.3], [2, 2]), 4),
        se=tf.nn.safe_embedding_lookup_sparse(emb, ids),
        sew=tf.nn.safe_embedding_lookup_sparse(emb, ids, w, default_id=3),
        sews=tf.nn.safe_embedding_lookup_sparse(emb, ids, w, combiner="sum"),
        se3=tf.nn.safe_embedding_lookup_sparse(emb, ids3, combiner="sqrtn"),
    )


# Computed with TensorFlow 2.21 (tf.compat.v1, graph mode) from the same program.
TF_EXPECTED = {
    "mm": [[2.0, 3.0], [-16.0, -20.0], [8.0, 13.0]],
    "mmab": [[12.0, 15.0], [0.0, 1.0], [0.0, -2.0]],
    "rs": 2.0,
    "rs0": [3.0, 1.0, -2.0],
    "rs1k": [[1.0], [-4.0], [5.0]],
    "rss": ("sp", [[0], [1], [2]], [1.0, -4.0, 5.0], [3]),
    "rm": [1.0, -4.0, 3.0],
    "rms": ("sp", [[0, 0], [0, 1], [0, 2]], [3.0, 1.0, 2.0], [1, 3]),
    "rm_all": 3.0,
    "add": ("sp", [[0, 1], [1, 1], [1, 2], [2, 0], [2, 2]], [6.0, 1.0, -4.0, 3.0, 0.0], [3, 3]),
    "addt": ("sp", [[0, 1], [1, 1], [1, 2], [2, 0]], [6.0, 1.0, -4.0, 3.0], [3, 3]),
    "addd": [[1.0, 2.0, 1.0], [1.0, 1.0, -3.0], [4.0, 1.0, 3.0]],
    "ss": [[4.0, 6.0], [6.0, 7.0], [0.0, 0.0], [2.0, 3.0]],
    "sm": [[2.0, 3.0], [0.0, 0.0], [6.0, 7.0], [0.0, 0.0]],
    "sq": [[2.82843, 4.24264], [6.0, 7.0]],
    "ret": ("sp", [[0, 1], [2, 0]], [1.0, 3.0], [3, 3]),
    "reo": ("sp", [[0, 1], [1, 2], [2, 0]], [2.0, 3.0, 1.0], [3, 3]),
    "rsh": ("sp", [[1, 0], [5, 0], [6, 0], [8, 0]], [1.0, -4.0, 3.0, 2.0], [9, 1]),
    "rsh2": ("sp", [[0, 0], [1, 1], [2, 1]], [1.0, 2.0, 3.0], [4, 2]),
    "cc0": (
        "sp",
        [[0, 1], [1, 2], [2, 0], [2, 2], [3, 1], [4, 1], [5, 2]],
        [1.0, -4.0, 3.0, 2.0, 5.0, 1.0, -2.0],
        [6, 3],
    ),
    "cc1": (
        "sp",
        [[0, 1], [0, 3], [0, 6], [1, 2], [1, 4], [2, 0], [2, 2]],
        [1.0, 1.0, 2.0, -4.0, 3.0, 3.0, 2.0],
        [3, 7],
    ),
    "tr": ("sp", [[0, 2], [1, 0], [2, 1], [2, 2]], [3.0, 1.0, -4.0, 2.0], [3, 3]),
    "fe": [
        ("sp", [[0, 0], [1, 1], [2, 0], [3, 0], [4, 0]], [-1.0, 5.0, -1.0, 6.0, -1.0], [5, 2]),
        [1.0, 0.0, 1.0, 0.0, 1.0],
    ],
    "sl": ("sp", [[0, 1], [1, 1]], [-4.0, 2.0], [2, 2]),
    "sp_": [
        ("sp", [[0, 0], [1, 1]], [1.0, 3.0], [2, 2]),
        ("sp", [], [], [2, 1]),
        ("sp", [[0, 0]], [2.0], [2, 1]),
    ],
    "ind": [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]],
    "smx": ("sp", [[0, 0], [0, 3], [1, 1]], [0.26894, 0.73106, 1.0], [2, 4]),
    "mx": ("sp", [[0, 1], [1, 1], [1, 2], [2, 0], [2, 2]], [5.0, 1.0, 0.0, 3.0, 2.0], [3, 3]),
    "mn": ("sp", [[0, 1], [1, 1], [1, 2], [2, 0], [2, 2]], [1.0, 0.0, -4.0, 0.0, -2.0], [3, 3]),
    "mg": ("sp", [[0, 1], [0, 3], [1, 0]], [0.2, 0.1, 0.3], [2, 4]),
    "se": [[3.0, 4.0, 5.0], [0.0, 0.0, 0.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]],
    "sew": [[3.0, 4.0, 5.0], [9.0, 10.0, 11.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]],
    "sews": [[6.0, 8.0, 10.0], [0.0, 0.0, 0.0], [6.0, 7.0, 8.0], [-9.0, -10.0, -11.0]],
    "se3": [[[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]], [[9.0, 10.0, 11.0], [0.0, 0.0, 0.0]]],
}


@pytest.mark.parametrize("key", sorted(TF_EXPECTED))
def test_values_match_tensorflow(key):
    with tf.Graph().as_default():
        fetch = _program()[key]
        with tf.Session() as sess:
            assert _norm(sess.run(fetch)) == TF_EXPECTED[key]


def test_tf_sparse_names():
    assert tf.sparse.sparse_dense_matmul is tf.sparse_tensor_dense_matmul
    assert tf.sparse.matmul is tf.sparse_tensor_dense_matmul
    assert tf.sparse.reduce_sum is tf.sparse_reduce_sum
    assert tf.sparse.segment_mean is tf.sparse_segment_mean
    assert tf.sparse.mask is tf.sparse_mask


def _dense(indices, values, shape):
    out = np.zeros(shape, np.float64)
    for i, v in zip(indices, values, strict=True):
        out[tuple(i)] += v
    return out


def test_matmul_unordered_duplicates_and_runtime_shape():
    idx = np.array([[2, 1], [0, 0], [2, 1], [1, 3]], np.int64)
    val = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.arange(12, dtype=np.float32).reshape(4, 3)
    with tf.Graph().as_default():
        sp = tf.sparse_placeholder(tf.float32, shape=[None, None])
        y = tf.sparse_tensor_dense_matmul(sp, b)
        with tf.Session() as sess:
            out = sess.run(y, {sp: tf.SparseTensorValue(idx, val, np.array([3, 4], np.int64))})
    np.testing.assert_allclose(out, _dense(idx, val, [3, 4]) @ b)


def test_matmul_gradients():
    idx = np.array([[0, 1], [2, 0], [1, 1]], np.int64)
    val = np.array([1.5, -2.0, 0.5], np.float32)
    bv = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = np.arange(9, dtype=np.float32).reshape(3, 3) + 1
    with tf.Graph().as_default():
        values = tf.constant(val)
        b = tf.constant(bv)
        y = tf.sparse_tensor_dense_matmul(tf.SparseTensor(idx, values, [3, 2]), b)
        dv, db = gradients(y, [values, b], grad_ys=tf.constant(g))
        with tf.Session() as sess:
            # b's gradient flows through a Gather: an IndexedSlices, made dense here.
            dv, db = sess.run([dv, tf.convert_to_tensor(db)])
    a = _dense(idx, val, [3, 2])
    np.testing.assert_allclose(db, a.T @ g, rtol=1e-6)
    # dy/dvalue_k = Σ_j g[row_k, j]·b[col_k, j]
    np.testing.assert_allclose(dv, [(g[r] * bv[c]).sum() for r, c in idx], rtol=1e-6)


def test_reduce_sum_gradient_wrt_values():
    idx = np.array([[1, 0], [0, 2], [1, 1]], np.int64)
    with tf.Graph().as_default():
        values = tf.constant([1.0, 2.0, 3.0])
        y = tf.sparse_reduce_sum(tf.SparseTensor(idx, values, [2, 3]), axis=1)
        (dv,) = gradients(y, [values], grad_ys=tf.constant([10.0, 20.0]))
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(dv), [20.0, 10.0, 20.0])


@pytest.mark.parametrize(
    "fn, scale",
    [
        (tf.sparse_segment_sum, lambda c: 1.0),
        (tf.sparse_segment_mean, lambda c: 1.0 / c),
        (tf.sparse_segment_sqrt_n, lambda c: 1.0 / np.sqrt(c)),
    ],
)
def test_segment_gradients_wrt_data(fn, scale):
    indices, segs = [0, 2, 2, 1], [0, 0, 1, 1]
    g = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    with tf.Graph().as_default():
        data = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
        (dd,) = gradients(fn(data, indices, segs), [data], grad_ys=tf.constant(g))
        with tf.Session() as sess:
            dd = sess.run(tf.convert_to_tensor(dd))
    want = np.zeros((3, 2))
    for i, s in zip(indices, segs, strict=True):
        want[i] += g[s] * scale(2.0)
    np.testing.assert_allclose(dd, want, rtol=1e-6)


def test_reorder_and_reduce_of_unordered_input():
    idx = [[1, 2], [0, 1], [1, 0], [0, 0]]
    with tf.Graph().as_default():
        sp = tf.SparseTensor(idx, [1.0, 2.0, 3.0, 4.0], [2, 3])
        with tf.Session() as sess:
            r, s = sess.run([tf.sparse_reorder(sp), tf.sparse_reduce_sum(sp, 0)])
    assert r.indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 2]]
    assert r.values.tolist() == [4.0, 2.0, 3.0, 1.0]
    np.testing.assert_allclose(s, [7.0, 2.0, 1.0])


def test_errors():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 1]], [1.0], [2, 3])
        with pytest.raises(ValueError, match="inner dimensions"):
            tf.sparse_tensor_dense_matmul(sp, np.ones((2, 2), np.float32))
        with pytest.raises(ValueError, match="rank 2"):
            tf.sparse_tensor_dense_matmul(
                tf.SparseTensor([[0, 0, 0]], [1.0], [1, 1, 1]), np.ones((1, 1), np.float32)
            )
        with pytest.raises(TypeError, match="SparseTensor"):
            tf.sparse_reduce_sum(np.ones((2, 2)))
        with pytest.raises(ValueError, match="out of range"):
            tf.sparse_reduce_sum(sp, axis=2)
        with pytest.raises(ValueError, match="cannot reshape"):
            tf.sparse_reshape(sp, [4, -1])
        with pytest.raises(ValueError, match="at most one -1"):
            tf.sparse_reshape(sp, [-1, -1])
        with pytest.raises(ValueError, match="differs"):
            tf.sparse_add(sp, tf.SparseTensor([[0, 1]], [1.0], [3, 3]))
        with pytest.raises(ValueError, match="to_retain has 2 entries"):
            tf.sparse_retain(sp, [True, False])
        with pytest.raises(ValueError, match="differ outside axis"):
            tf.sparse_concat(1, [sp, tf.SparseTensor([[0, 1]], [1.0], [3, 3])])
        with pytest.raises(ValueError, match="by keyword"):
            tf.sparse_split(sp, 2, 1)
        with pytest.raises(ValueError, match="pair up"):
            tf.sparse_segment_sum(np.ones((3, 2), np.float32), [0, 1], [0])
        with pytest.raises(ValueError, match="missing embedding_weights"):
            tf.nn.safe_embedding_lookup_sparse([], sp)
        with pytest.raises(TypeError, match="IndexedSlices"):
            tf.sparse_mask(sp, [0])


def test_sparse_mask_on_indexed_slices():
    from rill.autodiff.indexed_slices import IndexedSlices

    with tf.Graph().as_default():
        a = IndexedSlices(tf.constant([[1.0], [2.0], [3.0]]), tf.constant([4, 7, 9]), None)
        out = tf.sparse_mask(a, [7])
        with tf.Session() as sess:
            v, i = sess.run([out.values, out.indices])
    assert v.tolist() == [[1.0], [3.0]] and i.tolist() == [4, 9]


def test_runtime_dense_shape():
    value = tf.SparseTensorValue(
        np.array([[1, 2], [0, 0]], np.int64),
        np.array([1.0, 2.0], np.float32),
        np.array([2, 3], np.int64),
    )
    with tf.Graph().as_default():
        sp = tf.sparse_placeholder(tf.float32, shape=[None, None])
        fetches = [
            tf.sparse_reduce_sum(sp, 1),
            tf.sparse_reduce_sum_sparse(sp, 0),
            tf.sparse_reshape(sp, [-1]),
            tf.sparse_fill_empty_rows(sp, 0.0)[0],
            tf.sparse_split(sp_input=sp, num_split=2, axis=1)[0],
        ]
        with tf.Session() as sess:
            rsum, rsp, rsh, filled, first = sess.run(fetches, {sp: value})
    np.testing.assert_allclose(rsum, [2.0, 1.0])
    assert rsp.indices.tolist() == [[0], [2]] and rsp.dense_shape.tolist() == [3]
    assert rsh.indices.tolist() == [[5], [0]] and rsh.dense_shape.tolist() == [6]
    assert filled.indices.tolist() == [[0, 0], [1, 2]]
    assert first.indices.tolist() == [[0, 0]] and first.dense_shape.tolist() == [2, 2]
