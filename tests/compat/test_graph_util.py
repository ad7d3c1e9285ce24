"""tf.graph_util: freezing a trained TF1 model into constants and running it elsewhere."""

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.graph.errors import GraphValueError


def _model():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    ids = tf.placeholder(tf.int32, [None], name="ids")
    emb = tf.get_variable("emb", [10, 4])
    w = tf.Variable(tf.random_normal([4, 3], seed=1), name="w")
    b = tf.get_variable("b", [3], initializer=tf.zeros_initializer())
    h = tf.nn.embedding_lookup(emb, ids) + x
    logits = tf.nn.bias_add(tf.matmul(tf.check_numerics(h, "h"), w), b)
    probs = tf.nn.softmax(logits, name="probs")
    loss = tf.reduce_mean(tf.square(logits))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return x, ids, probs, train


def test_frozen_graph_has_no_variables_and_gives_the_sessions_outputs():
    rng = np.random.RandomState(0)
    feed_x = rng.rand(5, 4).astype(np.float32)
    feed_ids = np.array([1, 3, 3, 9, 0], np.int32)
    with tf.Graph().as_default() as g:
        x, ids, probs, train = _model()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(train, {x: feed_x, ids: feed_ids})
            want = sess.run(probs, {x: feed_x, ids: feed_ids})
            frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["probs"])
    ops = {n.op for n in frozen.node}
    assert not ops & {"VarHandleOp", "VariableV2", "ReadVariableOp", "ResourceGather"}
    assert not any("GradientDescent" in n.name for n in frozen.node)  # training is cut away
    lean = tf.graph_util.remove_training_nodes(frozen)
    assert "CheckNumerics" not in {n.op for n in lean.node}
    for gd in (frozen, lean):
        with tf.Graph().as_default():
            tf.import_graph_def(gd, name="")
            with tf.Session() as sess:
                got = sess.run("probs:0", {"x:0": feed_x, "ids:0": feed_ids})
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_blacklisted_variables_stay_variables_and_bad_names_are_clear_errors():
    with tf.Graph().as_default() as g:
        x, ids, probs, train = _model()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            gd = g.as_graph_def()
            part = tf.graph_util.convert_variables_to_constants(
                sess, gd, ["probs"], variable_names_blacklist=["w"]
            )
            assert {n.name for n in part.node if n.op == "VarHandleOp"} == {"w"}
            with pytest.raises(GraphValueError, match="'nope' is not in the graph"):
                tf.graph_util.convert_variables_to_constants(sess, gd, ["nope"])
            with pytest.raises(TypeError, match="list of node names"):
                tf.graph_util.extract_sub_graph(gd, "probs")
