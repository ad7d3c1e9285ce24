"""tf.train.Saver writes a meta graph next to each checkpoint; tf.train.import_meta_graph rebuilds
the graph, its collections and its Saver without the code that built them (TF1's usual way of
restoring a model for inference or to train on)."""

import os
from pathlib import Path

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.graph.errors import GraphValueError
from rill.graph.proto import meta_graph_pb2


def _train_and_save(path):
    rng = np.random.RandomState(0)
    xs = rng.rand(32, 3).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")
        w = tf.get_variable("w", [3, 1])
        pred = tf.identity(tf.matmul(x, w), name="pred")
        loss = tf.reduce_mean(tf.square(pred - y), name="loss")
        step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        tf.add_to_collection("train_op", train)
        tf.add_to_collection("lr", 0.1)
        tf.add_to_collection("note", "fitted")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(5):
                sess.run(train, {x: xs, y: ys})
            prefix = saver.save(sess, path, global_step=step)
            want = sess.run(pred, {x: xs})
            w_now = sess.run(w)
    return prefix, xs, ys, want, w_now


def test_import_meta_graph_restores_and_trains_on(tmp_path):
    prefix, xs, ys, want, w_now = _train_and_save(str(tmp_path / "model"))
    assert prefix.endswith("model-5") and os.path.isfile(prefix + ".meta")
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        assert [v.op.name for v in tf.global_variables()] == ["w", "global_step"]
        assert [v.op.name for v in tf.trainable_variables()] == ["w"]
        assert tf.get_collection("lr") == [pytest.approx(0.1)] and tf.get_collection("note") == [
            b"fitted"
        ]
        train = tf.get_collection("train_op")[0]
        with tf.Session() as sess:
            saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
            np.testing.assert_array_equal(sess.run(tf.trainable_variables()[0]), w_now)
            got = sess.run("pred:0", {"x:0": xs})
            np.testing.assert_array_equal(got, want)
            before = sess.run("loss:0", {"x:0": xs, "y:0": ys})
            sess.run(train, {"x:0": xs, "y:0": ys})  # the imported train op goes on training
            assert sess.run("loss:0", {"x:0": xs, "y:0": ys}) < before
            assert int(sess.run(tf.train.get_global_step(g))) == 6
            # The rebuilt Saver saves too, and a fresh import restores what it saved.
            again = saver.save(sess, str(tmp_path / "again"))
        with tf.Graph().as_default():
            saver2 = tf.train.import_meta_graph(again + ".meta", import_scope="copy")
            with tf.Session() as sess:
                saver2.restore(sess, again)
                assert int(sess.run("copy/global_step/Read/ReadVariableOp:0")) == 6


def test_text_form_and_bad_files(tmp_path):
    prefix, xs, _, want, _ = _train_and_save(str(tmp_path / "model"))
    m = meta_graph_pb2.MetaGraphDef.FromString(Path(prefix + ".meta").read_bytes())
    assert m.saver_def.restore_op_name and "variables" in m.collection_def
    with tf.Graph().as_default():
        text = tf.train.export_meta_graph(str(tmp_path / "m.pbtxt"), as_text=True,
                                          graph=tf.Graph())  # fmt: skip
        assert text.meta_info_def.meta_graph_version == "v1.0"
    text_path = tmp_path / "model.pbtxt"
    from google.protobuf import text_format

    text_path.write_text(text_format.MessageToString(m))
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(str(text_path))
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run("pred:0", {"x:0": xs}), want)
    bad = tmp_path / "bad.meta"
    bad.write_bytes(b"\xff\xfe not a meta graph")
    with tf.Graph().as_default(), pytest.raises(GraphValueError, match="bad.meta"):
        tf.train.import_meta_graph(str(bad))
    with pytest.raises(OSError, match="does not exist"):
        tf.train.import_meta_graph(str(tmp_path / "missing.meta"))
