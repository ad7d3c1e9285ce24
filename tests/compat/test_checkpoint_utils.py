"""Fine-tuning from a checkpoint (tf.train.init_from_checkpoint), reading one
(NewCheckpointReader / load_checkpoint), and tf.train.Example protos for TFRecord writing."""

import numpy as np
import pytest

import rill.compat.v1 as tf


def _pretrain(path):
    with tf.Graph().as_default():
        with tf.variable_scope("pre"):
            w = tf.get_variable("w", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
            b = tf.get_variable("b", initializer=np.float32([1, 2, 3]))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return tf.train.Saver().save(sess, path), sess.run([w, b])


def test_init_from_checkpoint_maps_scopes_and_single_tensors(tmp_path):
    prefix, (w0, b0) = _pretrain(str(tmp_path / "pre"))
    with tf.Graph().as_default():
        with tf.variable_scope("fine"):
            w = tf.get_variable("w", [2, 3])
            b = tf.get_variable("b", [3])
        head = tf.get_variable("head", [3])  # not in the map: keeps its own initializer
        tf.train.init_from_checkpoint(prefix, {"pre/": "fine/"})
        other = tf.get_variable("other_b", [3])
        tf.train.init_from_checkpoint(str(tmp_path), {"pre/b": other})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got_w, got_b, got_o, got_h = sess.run([w, b, other, head])
    np.testing.assert_array_equal(got_w, w0)
    np.testing.assert_array_equal(got_b, b0)
    np.testing.assert_array_equal(got_o, b0)
    assert got_h.shape == (3,)
    with tf.Graph().as_default():
        tf.get_variable("x", [4])
        with pytest.raises(tf.errors.NotFoundError, match="no variable 'y'"):
            tf.train.init_from_checkpoint(prefix, {"pre/b": "y"})
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"variable x is float32"):
            tf.train.init_from_checkpoint(prefix, {"pre/b": "x"})


def test_checkpoint_reader_and_example_protos(tmp_path):
    prefix, (w0, _) = _pretrain(str(tmp_path / "pre"))
    reader = tf.train.NewCheckpointReader(prefix)
    assert reader.get_variable_to_shape_map() == {"pre/b": [3], "pre/w": [2, 3]}
    np.testing.assert_array_equal(reader.get_tensor("pre/w"), w0)
    assert reader.has_tensor("pre/b") and not reader.has_tensor("nope")
    with pytest.raises(tf.errors.NotFoundError, match="Key nope not found"):
        reader.get_tensor("nope")
    assert (
        tf.train.load_checkpoint(str(tmp_path)).get_variable_to_dtype_map()["pre/w"] == tf.float32
    )
    ex = tf.train.Example(
        features=tf.train.Features(
            feature={
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, 1.5])),
                "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a"])),
            }
        )
    )
    back = tf.train.Example.FromString(ex.SerializeToString())
    assert back.features.feature["label"].int64_list.value == [3]
    assert list(back.features.feature["x"].float_list.value) == [0.5, 1.5]
