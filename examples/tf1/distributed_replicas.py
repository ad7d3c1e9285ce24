"""Between-graph replicated training in the style of TensorFlow 1.x's distributed MNIST example:
one process per task, `tf.train.ClusterSpec` + `tf.train.Server`, variables placed on the PS by
`tf.train.replica_device_setter`, and `tf.train.MonitoredTrainingSession` on each worker (the
chief initializes; the others wait for it). Only the import names rill.

    python examples/tf1/distributed_replicas.py --job_name=ps --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 &
    python examples/tf1/distributed_replicas.py --job_name=worker --task_index=0 ... &
    python examples/tf1/distributed_replicas.py --job_name=worker --task_index=1 ...

The PS serves until it is killed (TensorFlow's PS tasks never return from `server.join()`); pass
--ps_wait_secs to make it stop on its own.
"""

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the PS tasks")
flags.DEFINE_string("worker_hosts", "localhost:2223", "comma-separated host:port of the workers")
flags.DEFINE_string("job_name", "worker", "'ps' or 'worker'")
flags.DEFINE_integer("task_index", 0, "index of the task within its job")
flags.DEFINE_integer("steps", 300, "global training steps")
flags.DEFINE_float("learning_rate", 0.3, "gradient descent step size")
flags.DEFINE_float("ps_wait_secs", 0.0, "a PS stops after this many seconds (0: serve forever)")
FLAGS = flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec(
        {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")}
    )
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        if FLAGS.ps_wait_secs > 0:
            server.join(FLAGS.ps_wait_secs)
            server.stop()
        else:
            server.join()
        return

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    train_x, test_x = images[:1400], images[1400:]
    train_y, test_y = labels[:1400], labels[1400:]

    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.placeholder(tf.int64, [None])
        hidden = tf.layers.dense(x, 64, activation=tf.nn.relu, name="hidden")
        logits = tf.layers.dense(hidden, 10, name="logits")
        loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(
            loss, global_step=global_step
        )
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))

    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps)]
    # This worker's sessions use the PS tasks and this task only: without the filter a session
    # waits for every task of the cluster to answer (TensorFlow's masters do the same), and the
    # other worker may have finished and exited before this one opens its evaluation session.
    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    rng = np.random.RandomState(FLAGS.task_index)
    local_steps = 0
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        hooks=hooks,
        save_checkpoint_secs=None,
        config=config,
    ) as sess:
        while not sess.should_stop():
            idx = rng.randint(0, len(train_x), 64)
            _, step = sess.run([train_op, global_step], {x: train_x[idx], y: train_y[idx]})
            local_steps += 1
            if not sess.should_stop() and local_steps % 50 == 0:
                print("worker %d: global step %d" % (FLAGS.task_index, step), flush=True)
    # A fresh session on the same cluster reads the trained variables from the PS.
    with tf.Session(server.target, config=config) as sess:
        acc = sess.run(accuracy, {x: test_x, y: test_y})
    print("worker %d: local steps %d, test accuracy %.4f" % (FLAGS.task_index, local_steps, acc))


if __name__ == "__main__":
    tf.app.run()
