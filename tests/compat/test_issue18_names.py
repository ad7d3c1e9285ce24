"""TensorFlow 1's names for issue 18's op families (tf.linalg, tf.image, tf.io, tf.random,
tf.strings, tf.bitwise, tf.math, the readers) run through rill.compat.v1 and give the right
values."""

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.exec.kernels.farmhash import fingerprint64
from rill.exec.proto import example_pb2


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def test_linalg_names():
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    b = np.array([[1.0], [2.0], [3.0]])
    tall = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    with tf.Graph().as_default():
        t = tf.constant(a)
        outs = _run({
            "inv": tf.linalg.inv(t), "det": tf.linalg.det(t), "slogdet": tf.linalg.slogdet(t)[1],
            "logdet": tf.linalg.logdet(t), "solve": tf.linalg.solve(t, b),
            "lstsq": tf.linalg.lstsq(tf.constant(tall), tf.constant(b)),
            "eigvalsh": tf.linalg.eigvalsh(t), "band": tf.linalg.band_part(t, 0, 0),
            "diag": tf.linalg.diag(tf.constant([1.0, 2.0])),
            "einsum": tf.linalg.einsum("ij,jk->ik", t, t), "top_inv": tf.matrix_inverse(t),
        })  # fmt: skip
    np.testing.assert_allclose(outs["inv"], np.linalg.inv(a))
    np.testing.assert_allclose(outs["top_inv"], np.linalg.inv(a))
    np.testing.assert_allclose(outs["det"], np.linalg.det(a))
    np.testing.assert_allclose(outs["slogdet"], np.log(np.linalg.det(a)))
    np.testing.assert_allclose(outs["logdet"], np.log(np.linalg.det(a)))
    np.testing.assert_allclose(outs["solve"], np.linalg.solve(a, b))
    np.testing.assert_allclose(outs["lstsq"], np.linalg.lstsq(tall, b, rcond=None)[0])
    np.testing.assert_allclose(outs["eigvalsh"], np.linalg.eigvalsh(a))
    np.testing.assert_allclose(outs["band"], np.diag(np.diag(a)))
    np.testing.assert_allclose(outs["diag"], np.diag([1.0, 2.0]))
    np.testing.assert_allclose(outs["einsum"], a @ a)


def test_image_names():
    img = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    boxes = np.array([[0, 0, 1, 1], [0, 0, 0.9, 1], [0.5, 0.5, 1, 1]], np.float32)
    with tf.Graph().as_default():
        near = tf.image.resize_images(tf.constant(img), [2, 2],
                                      method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)  # fmt: skip
        single = tf.image.resize_images(tf.constant(img[0]), [8, 8])
        # tf.image.resize: resize_images's second name (bilinear by default)
        same = tf.image.resize(tf.constant(img), [8, 8]) - tf.image.resize_bilinear(img, [8, 8])
        nms = tf.image.non_max_suppression(tf.constant(boxes), tf.constant([0.9, 0.8, 0.7]), 3)
        s2d = tf.space_to_depth(tf.constant(img), 2)
        n, s, k, d, z = _run([near, single, nms, s2d, same])
    np.testing.assert_array_equal(z, np.zeros((1, 8, 8, 1), np.float32))
    np.testing.assert_array_equal(n[0, :, :, 0], [[0, 2], [8, 10]])
    assert s.shape == (8, 8, 1)
    np.testing.assert_array_equal(k, [0, 2])
    assert d.shape == (1, 2, 2, 4)


def test_strings_and_bitwise_names():
    words = [b"", b"a", b"hello", b"x" * 70]
    with tf.Graph().as_default():
        w = tf.constant(words)
        outs = _run({
            "fast": tf.strings.to_hash_bucket_fast(w, 1000),
            "top": tf.string_to_hash_bucket_fast(w, 7),
            "join": tf.strings.join([w, tf.constant(b"!")], separator="-"),
            "upper": tf.strings.upper(tf.constant(b"abc")),
            "and": tf.bitwise.bitwise_and(tf.constant([12, 10]), tf.constant([10, 6])),
        })  # fmt: skip
    assert outs["fast"].tolist() == [fingerprint64(x) % 1000 for x in words]
    assert outs["top"].tolist() == [fingerprint64(x) % 7 for x in words]
    assert outs["join"].tolist() == [x + b"-!" for x in words]
    assert outs["upper"] == b"ABC" and outs["and"].tolist() == [8, 2]


def test_io_parse_example_with_feature_specs():
    ex = example_pb2.Example()
    ex.features.feature["age"].int64_list.value.append(42)
    ex.features.feature["tags"].bytes_list.value.extend([b"x", b"y"])
    with tf.Graph().as_default():
        s = tf.placeholder(tf.string, [])
        parsed = tf.io.parse_single_example(s, {
            "age": tf.io.FixedLenFeature([], tf.int64),
            "height": tf.io.FixedLenFeature([1], tf.float32, default_value=[1.5]),
            "tags": tf.io.VarLenFeature(tf.string),
        })  # fmt: skip
        age, height, tags = _run([parsed["age"], parsed["height"], parsed["tags"].values],
                                 {s: ex.SerializeToString()})  # fmt: skip
    assert age == 42 and height.tolist() == [1.5] and tags.tolist() == [b"x", b"y"]


def test_tf1_reader_pipeline_over_tfrecord_files(tmp_path):
    paths = []
    for i in range(2):
        p = str(tmp_path / f"part{i}.tfrecord")
        with tf.python_io.TFRecordWriter(p) as w:
            for j in range(3):
                w.write(f"{i}-{j}".encode())
        paths.append(p)
    assert list(tf.io.tf_record_iterator(paths[1])) == [b"1-0", b"1-1", b"1-2"]
    with tf.Graph().as_default():
        queue = tf.train.string_input_producer(paths, num_epochs=1, shuffle=False)
        reader = tf.TFRecordReader()
        key, value = reader.read(queue)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            got = []
            try:
                while True:
                    got.append(sess.run([key, value]))
            except tf.errors.OutOfRangeError:
                pass
            coord.request_stop()
            coord.join(threads)
    assert [v for _, v in got] == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
    assert got[1][0] == f"{paths[0]}:{16 + 3}".encode()  # file:offset of the second record


def test_random_names():
    with tf.Graph().as_default():
        seed = tf.constant([3, 4], tf.int64)
        u = tf.random.stateless_uniform([1000], seed, minval=-2, maxval=5, dtype=tf.int32)
        tn = tf.random.stateless_truncated_normal([1000], seed, mean=10.0, stddev=2.0)
        g = tf.random.gamma([2000], [1.0, 4.0], beta=2.0, seed=1)
        p = tf.random.poisson([3.0], [2000], seed=2)
        uv, tnv, gv, pv = _run([u, tn, g, p])
    assert uv.dtype == np.int32 and uv.min() == -2 and uv.max() == 4
    assert tnv.min() >= 6.0 and tnv.max() <= 14.0
    np.testing.assert_allclose(gv.mean(axis=0), [0.5, 2.0], rtol=0.1)
    assert gv.shape == (2000, 2) and pv.shape == (2000, 1)
    assert abs(pv.mean() - 3.0) < 0.2


def test_math_names():
    with tf.Graph().as_default():
        x = tf.constant([0.5, 1.5, 2.5], tf.float64)
        outs = _run({"lgamma": tf.math.lgamma(x), "cumprod": tf.math.cumprod(x),
                     "seg": tf.math.segment_sum(x, tf.constant([0, 0, 1])),
                     "bincount": tf.math.bincount(tf.constant([1, 1, 3]), minlength=6),
                     "div": tf.math.divide_no_nan(x, tf.constant([0.0, 1.0, 2.0], tf.float64))})  # fmt: skip
    from math import lgamma

    np.testing.assert_allclose(outs["lgamma"], [lgamma(v) for v in (0.5, 1.5, 2.5)])
    np.testing.assert_allclose(outs["cumprod"], [0.5, 0.75, 1.875])
    np.testing.assert_allclose(outs["seg"], [2.0, 2.5])
    assert outs["bincount"].tolist() == [0, 2, 0, 1, 0, 0]
    np.testing.assert_allclose(outs["div"], [0.0, 1.5, 1.25])


@pytest.mark.parametrize("name", ["TFRecordReader", "TextLineReader", "WholeFileReader",
                                  "FixedLengthRecordReader"])  # fmt: skip
def test_reader_classes_exist_at_the_top(name):
    assert issubclass(getattr(tf, name), tf.ReaderBase)
