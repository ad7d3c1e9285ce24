"""tf.lite in TF1 programs: convert a trained model from a session or a SavedModel and run it in
tf.lite.Interpreter."""

import numpy as np

import rill.compat.v1 as tf


def _model():
    rng = np.random.RandomState(0)
    x = tf.placeholder(tf.float32, [1, 8], name="x")
    w = tf.Variable(rng.randn(8, 4).astype(np.float32), name="w")
    y = tf.nn.softmax(tf.nn.relu(tf.matmul(x, w)), name="y")
    return x, y, rng.rand(1, 8).astype(np.float32)


def _invoke(model_bytes, feed):
    interp = tf.lite.Interpreter(model_content=model_bytes)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], feed)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_from_session_and_from_saved_model(tmp_path):
    with tf.Graph().as_default():
        x, y, feed = _model()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            want = sess.run(y, {x: feed})
            flat = tf.lite.TFLiteConverter.from_session(sess, [x], [y]).convert()
            tf.saved_model.simple_save(sess, str(tmp_path / "sm"), {"x": x}, {"y": y})
    np.testing.assert_allclose(_invoke(flat, feed), want, rtol=1e-5)
    conv = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
    np.testing.assert_allclose(_invoke(conv.convert(), feed), want, rtol=1e-5)
    conv = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = tf.lite.RepresentativeDataset(
        lambda: ([np.random.RandomState(i).rand(1, 8).astype(np.float32)] for i in range(8))
    )
    got = _invoke(conv.convert(), feed)
    np.testing.assert_allclose(got, want, atol=0.05)  # int8: a few quanta of a [0, 1] output
