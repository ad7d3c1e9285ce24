"""A TF1 MLP on the handwritten digits fed by a tf.data pipeline — written as a TensorFlow 1.x
user writes it; only the import names rill.

The training data go through placeholders into `Dataset.from_tensor_slices`, are shuffled,
batched and repeated for `--epochs`, and read by an initializable iterator; the training loop
runs until the pipeline raises OutOfRangeError. The same iterator is then re-initialized with
the test set (new feeds) to evaluate.

    python examples/tf1/mlp_dataset.py --epochs=10
"""

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("epochs", 10, "passes over the training set")
flags.DEFINE_integer("batch_size", 64, "examples per step")
flags.DEFINE_float("learning_rate", 0.3, "gradient descent step size")
FLAGS = flags.FLAGS


def main(_):
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    train_x, test_x = images[:1400], images[1400:]
    train_y, test_y = labels[:1400], labels[1400:]

    tf.set_random_seed(1)
    features_ph = tf.placeholder(tf.float32, [None, 64], name="features")
    labels_ph = tf.placeholder(tf.int64, [None], name="labels")
    epochs_ph = tf.placeholder(tf.int64, [], name="epochs")
    dataset = tf.data.Dataset.from_tensor_slices((features_ph, labels_ph))
    dataset = dataset.shuffle(buffer_size=1000, seed=7).batch(FLAGS.batch_size).repeat(epochs_ph)
    iterator = dataset.make_initializable_iterator()
    x, y = iterator.get_next()

    hidden = tf.layers.dense(x, 100, activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, 10, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(
        loss, global_step=global_step
    )
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int32))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(iterator.initializer,
                 {features_ph: train_x, labels_ph: train_y, epochs_ph: FLAGS.epochs})  # fmt: skip
        first = None
        while True:
            try:
                _, l = sess.run([train_op, loss])
            except tf.errors.OutOfRangeError:
                break
            first = l if first is None else first
        print("steps %d loss %.4f -> %.4f" % (sess.run(global_step), first, l))

        sess.run(iterator.initializer, {features_ph: test_x, labels_ph: test_y, epochs_ph: 1})
        right = 0
        while True:
            try:
                right += sess.run(correct)
            except tf.errors.OutOfRangeError:
                break
    print("test accuracy %.4f" % (right / len(test_x)))


if __name__ == "__main__":
    tf.app.run()
