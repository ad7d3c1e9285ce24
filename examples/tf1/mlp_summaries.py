"""A TF1 MLP on the handwritten digits, with TensorBoard summaries — written as a TensorFlow
1.x user writes it; only the import names rill.

    python examples/tf1/mlp_summaries.py --steps=300 --logdir=/tmp/mlp
    tensorboard --logdir=/tmp/mlp
"""

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("steps", 300, "training steps")
flags.DEFINE_float("learning_rate", 0.5, "gradient descent step size")
flags.DEFINE_string("logdir", "/tmp/rill_tf1_mlp", "where to write the event file")
FLAGS = flags.FLAGS


def main(_):
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[digits.target]
    train_x, test_x = images[:1400], images[1400:]
    train_y, test_y = labels[:1400], labels[1400:]

    tf.set_random_seed(1)
    x = tf.placeholder("float", [None, 64], name="x")
    y_ = tf.placeholder("float", [None, 10], name="y_")
    with tf.name_scope("hidden"):
        W1 = tf.Variable(tf.truncated_normal([64, 100], stddev=0.1), name="weights")
        b1 = tf.Variable(tf.zeros([100]), name="biases")
        h = tf.nn.relu(tf.matmul(x, W1) + b1)
        tf.summary.histogram("weights", W1)
    with tf.name_scope("softmax"):
        W2 = tf.Variable(tf.truncated_normal([100, 10], stddev=0.1), name="weights")
        b2 = tf.Variable(tf.zeros([10]), name="biases")
        logits = tf.nn.xw_plus_b(h, W2, b2)
    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=logits)
    )
    tf.summary.scalar("cross_entropy", cross_entropy)
    correct = tf.equal(tf.argmax(logits, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    tf.summary.scalar("accuracy", accuracy)
    train_step = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(cross_entropy)
    merged = tf.summary.merge_all()

    with tf.Session() as sess:
        writer = tf.summary.FileWriter(FLAGS.logdir, sess.graph)
        sess.run(tf.initialize_all_variables())
        rng = np.random.RandomState(0)
        for i in range(FLAGS.steps):
            idx = rng.randint(0, len(train_x), 100)
            summary, _ = sess.run([merged, train_step], {x: train_x[idx], y_: train_y[idx]})
            if i % 50 == 0:
                writer.add_summary(summary, i)
        writer.close()
        acc = sess.run(accuracy, feed_dict={x: test_x, y_: test_y})
    print("test accuracy %.4f" % acc)


if __name__ == "__main__":
    tf.app.run()
