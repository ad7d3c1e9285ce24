"""Synchronous replicas the way TensorFlow 1.x's distributed MNIST example drives them: a
`tf.train.Supervisor` per worker, `SyncReplicasOptimizer` with its chief queue runner and init
tokens op started by hand, `prepare_or_wait_for_session` on the chief and the other workers.
Only the import names rill.

    python examples/tf1/sync_replicas_supervisor.py --job_name=ps --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 &
    python examples/tf1/sync_replicas_supervisor.py --job_name=worker --task_index=0 ... &
    python examples/tf1/sync_replicas_supervisor.py --job_name=worker --task_index=1 ...
"""

import tempfile

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the PS tasks")
flags.DEFINE_string("worker_hosts", "localhost:2223", "comma-separated host:port of the workers")
flags.DEFINE_string("job_name", "worker", "'ps' or 'worker'")
flags.DEFINE_integer("task_index", 0, "index of the task within its job")
flags.DEFINE_integer("train_steps", 200, "global steps to train")
flags.DEFINE_integer("replicas_to_aggregate", None, "gradients per update (default: all)")
flags.DEFINE_float("learning_rate", 0.3, "gradient descent step size")
flags.DEFINE_float("ps_wait_secs", 0.0, "a PS stops after this many seconds (0: serve forever)")
FLAGS = flags.FLAGS


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
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
    labels = np.eye(10, dtype=np.float32)[digits.target]
    is_chief = FLAGS.task_index == 0
    num_workers = len(worker_hosts)
    worker_device = "/job:worker/task:%d/cpu:0" % FLAGS.task_index
    with tf.device(
        tf.train.replica_device_setter(
            worker_device=worker_device, ps_device="/job:ps/cpu:0", cluster=cluster
        )  # fmt: skip
    ):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        x = tf.placeholder(tf.float32, [None, 64])
        y_ = tf.placeholder(tf.float32, [None, 10])
        hid_w = tf.Variable(tf.truncated_normal([64, 100], stddev=1.0 / 8), name="hid_w")
        hid_b = tf.Variable(tf.zeros([100]), name="hid_b")
        sm_w = tf.Variable(tf.truncated_normal([100, 10], stddev=0.1), name="sm_w")
        sm_b = tf.Variable(tf.zeros([10]), name="sm_b")
        hid = tf.nn.relu(tf.nn.xw_plus_b(x, hid_w, hid_b))
        y = tf.nn.softmax(tf.nn.xw_plus_b(hid, sm_w, sm_b))
        cross_entropy = -tf.reduce_sum(y_ * tf.log(tf.clip_by_value(y, 1e-10, 1.0)))
        opt = tf.train.GradientDescentOptimizer(FLAGS.learning_rate / 64)
        opt = tf.train.SyncReplicasOptimizer(
            opt,
            replicas_to_aggregate=FLAGS.replicas_to_aggregate or num_workers,
            total_num_replicas=num_workers,
            name="mnist_sync_replicas",
        )
        train_step = opt.minimize(cross_entropy, global_step=global_step)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1)), tf.float32))
        local_init_op = opt.chief_init_op if is_chief else opt.local_step_init_op
        ready_for_local_init_op = opt.ready_for_local_init_op
        chief_queue_runner = opt.get_chief_queue_runner()
        sync_init_op = opt.get_init_tokens_op()
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(
        is_chief=is_chief,
        logdir=tempfile.mkdtemp(),
        init_op=init_op,
        local_init_op=local_init_op,
        ready_for_local_init_op=ready_for_local_init_op,
        recovery_wait_secs=1,
        global_step=global_step,
        save_model_secs=0,
        save_summaries_secs=0,
    )
    config = tf.ConfigProto(
        allow_soft_placement=True,
        device_filters=["/job:ps", "/job:worker/task:%d" % FLAGS.task_index],
    )
    sess = sv.prepare_or_wait_for_session(server.target, config=config)
    if is_chief:
        sess.run(sync_init_op)
        sv.start_queue_runners(sess, [chief_queue_runner])
    rng = np.random.RandomState(FLAGS.task_index)
    local_step = 0
    step = 0
    try:
        while step < FLAGS.train_steps:
            idx = rng.randint(0, 1400, 100)
            _, step = sess.run([train_step, global_step], {x: images[idx], y_: labels[idx]})
            local_step += 1
    except tf.errors.OutOfRangeError:
        pass  # the chief finished and closed the token queue
    acc = sess.run(accuracy, {x: images[1400:], y_: labels[1400:]})
    print("worker %d: local steps %d, global step %d, test accuracy %.4f"
          % (FLAGS.task_index, local_step, step, acc), flush=True)  # fmt: skip
    sv.stop()


if __name__ == "__main__":
    tf.app.run()
