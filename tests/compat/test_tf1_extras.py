"""TF1 names real programs use that are compositions or thin wrappers: sparse_to_dense,
bincount, tf.print, make_template, orthogonal_initializer, random_crop, trace,
clip_by_average_norm, unsorted_segment_mean/sqrt_n, the v1/v2 switches."""

import numpy as np
import pytest

import rill.compat.v1 as tf


def test_sparse_to_dense_numbers_strings_and_errors():
    with tf.Graph().as_default(), tf.Session() as sess:
        d = tf.sparse_to_dense([[0, 1], [2, 0]], [3, 2], [5, 6], default_value=-1)
        np.testing.assert_array_equal(sess.run(d), [[-1, 5], [-1, -1], [6, -1]])
        one_hot = tf.sparse_to_dense([1, 3], [5], 1.0)
        np.testing.assert_array_equal(sess.run(one_hot), [0, 1, 0, 1, 0])
        sp = tf.SparseTensor([[0, 0], [1, 2]], tf.constant([b"a", b"b"]), [2, 3])
        assert sess.run(tf.sparse_tensor_to_dense(sp)).tolist() == [
            [b"a", b"", b""], [b"", b"", b"b"],
        ]  # fmt: skip
        bad = tf.sparse_to_dense([[0], [5]], [3], [1, 2])
        with pytest.raises(
            tf.errors.InvalidArgumentError, match=r"sparse_indices\[1\] = \[5\] is out of bounds"
        ):
            sess.run(bad)
        unordered = tf.sparse_to_dense([[2], [0]], [3], [1, 2])
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of order"):
            sess.run(unordered)
        np.testing.assert_array_equal(
            sess.run(tf.sparse_to_dense([[2], [0]], [3], [1, 2], validate_indices=False)), [2, 0, 1]
        )


def test_bincount_and_segment_means():
    with tf.Graph().as_default(), tf.Session() as sess:
        arr = tf.constant([1, 1, 3, 0, 1])
        got = sess.run([
            tf.bincount(arr), tf.bincount(arr, minlength=6), tf.bincount(arr, maxlength=2),
            tf.bincount(arr, weights=[0.5, 0.5, 2.0, 1.0, 1.0]), tf.bincount(tf.constant([], tf.int32)),
        ])  # fmt: skip
        assert [g.tolist() for g in got] == [
            [1, 3, 0, 1], [1, 3, 0, 1, 0, 0], [1, 3], [1.0, 2.0, 0.0, 2.0], [],
        ]  # fmt: skip
        data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
        ids = [0, 2, 0]
        mean = sess.run(tf.unsorted_segment_mean(data, ids, 3))
        sqrt_n = sess.run(tf.unsorted_segment_sqrt_n(data, ids, 3))
    np.testing.assert_allclose(mean, [[3, 4], [0, 0], [3, 4]])
    np.testing.assert_allclose(
        sqrt_n, [[6 / np.sqrt(2), 8 / np.sqrt(2)], [0, 0], [3, 4]], rtol=1e-6
    )


def test_print_writes_tensors_and_text(capfd):
    import sys

    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant([1, 2, 3])
        sess.run(tf.print("x is", x, "and {braces}", output_stream=sys.stdout))
        sess.run(tf.print(x * 2, sep="|", end="!\n"))
    out, err = capfd.readouterr()
    assert "x is [1 2 3] and {braces}\n" in out
    assert "[2 4 6]!\n" in err


def test_make_template_shares_variables_across_calls():
    with tf.Graph().as_default():

        def dense(x, units):
            w = tf.get_variable("w", [x.shape[-1], units])
            return tf.matmul(x, w)

        layer = tf.make_template("layer", dense, units=3)
        a = layer(tf.ones([2, 4]))
        b = layer(tf.zeros([5, 4]))
        other = tf.make_template("layer", dense, units=3)
        c = other(tf.ones([1, 4]))
        assert [v.op.name for v in tf.trainable_variables()] == ["layer/w", "layer_1/w"]
        assert [v.op.name for v in layer.trainable_variables] == ["layer/w"]
        assert a.shape.as_list() == [2, 3] and b.shape.as_list() == [5, 3] and c is not None

        bad = tf.make_template("bad", lambda: tf.Variable(1.0) + 0.0)
        bad()
        with pytest.raises(ValueError, match="Trainable variable created when calling a template"):
            bad()


def test_orthogonal_random_crop_trace_clip():
    with tf.Graph().as_default(), tf.Session() as sess:
        w = tf.get_variable("w", [6, 4], initializer=tf.orthogonal_initializer(gain=2.0, seed=3))
        img = tf.reshape(tf.range(60), [5, 4, 3])
        crop = tf.random_crop(img, [2, 3, 3], seed=1)
        tr = tf.trace(tf.reshape(tf.range(18.0), [2, 3, 3]))
        t = tf.constant([3.0, 4.0])
        clipped = tf.clip_by_average_norm(t, 1.0)  # norm 5 over 2 elements = 2.5 > 1
        sess.run(tf.global_variables_initializer())
        wv, cv, trv, clv = sess.run([w, crop, tr, clipped])
    np.testing.assert_allclose(wv.T @ wv, 4.0 * np.eye(4), atol=1e-5)
    full = np.arange(60).reshape(5, 4, 3)
    assert cv.shape == (2, 3, 3)
    assert any(np.array_equal(cv, full[i : i + 2, j : j + 3]) for i in range(4) for j in range(2))
    np.testing.assert_allclose(trv, [12.0, 39.0])
    np.testing.assert_allclose(clv, np.array([3.0, 4.0]) * 2 / 5, rtol=1e-6)


def test_mode_switches():
    tf.disable_resource_variables()
    tf.disable_control_flow_v2()
    assert not tf.control_flow_v2_enabled() and not tf.executing_eagerly_outside_functions()
    with pytest.raises(NotImplementedError, match="graph mode only"):
        tf.enable_eager_execution()
    with tf.Graph().as_default():
        x = tf.constant(1.0)
        with tf.control_dependencies([x.op]), tf.init_scope():
            y = tf.constant(2.0)
        assert not y.op.control_inputs


def test_sparse_namespace_feeds_and_densifies():
    with tf.Graph().as_default():
        sp = tf.sparse.placeholder(tf.float32)
        d = tf.sparse.to_dense(sp, default_value=-1.0)
        with tf.Session() as sess:
            got = sess.run(d, {sp: tf.SparseTensorValue([[0, 1], [1, 0]], [2.0, 3.0], [2, 2])})
    np.testing.assert_array_equal(got, [[-1.0, 2.0], [3.0, -1.0]])
