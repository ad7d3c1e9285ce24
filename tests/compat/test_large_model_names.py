"""TF1 names of the large-models and synchronous-replicas issues through `rill.compat.v1`."""

import numpy as np

import rill.compat.v1 as tf


def test_embedding_lookup_and_sampled_losses_are_tf_nn_names():
    with tf.Graph().as_default():
        params = tf.constant(np.arange(12, dtype=np.float32).reshape(6, 2))
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup([params[:3], params[3:]], ids, partition_strategy="div")
        with tf.Session() as sess:
            got = sess.run(rows, {ids: [5, 0, 3, 3]})
    np.testing.assert_array_equal(got, np.arange(12).reshape(6, 2)[[5, 0, 3, 3]])
    assert callable(tf.nn.nce_loss) and callable(tf.nn.sampled_softmax_loss)


def test_fetching_and_feeding_a_sparse_tensor():
    with tf.Graph().as_default():
        sp = tf.sparse_placeholder(tf.float32, name="sp")
        st = tf.SparseTensor(indices=[[0, 1], [2, 0]], values=[1.5, -2.0], dense_shape=[3, 2])
        with tf.Session() as sess:
            value = sess.run(st)
            assert isinstance(value, tf.SparseTensorValue)
            np.testing.assert_array_equal(value.indices, [[0, 1], [2, 0]])
            np.testing.assert_array_equal(value.values, [1.5, -2.0])
            np.testing.assert_array_equal(value.dense_shape, [3, 2])
            fed = sess.run(sp.values, {sp: value})
            np.testing.assert_array_equal(fed, [1.5, -2.0])


def test_replica_device_setter_partitioners_and_sync_replicas_are_tf_train_names():
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
            w = tf.get_variable("w", [8, 4], partitioner=tf.fixed_size_partitioner(2))
            step = tf.train.get_or_create_global_step()
        shards = list(w)
        assert len(shards) == 2
        assert {s.device for s in shards} == {"/job:ps/task:0", "/job:ps/task:1"}
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=1, total_num_replicas=1
        )
        opt.minimize(tf.reduce_sum(tf.concat(shards, 0)), global_step=step)
        assert isinstance(opt.make_session_run_hook(is_chief=True), tf.train.SessionRunHook)
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
        assert acc.take_grad(1).shape.as_list() == [2]
