"""A TF1 dynamic_rnn (LSTM) classifier: each 8x8 digit is read as 8 time steps of 8 pixels —
the pattern of the TF1 "recurrent network on MNIST" examples; only the import names rill."""

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("steps", 150, "training steps")
flags.DEFINE_integer("num_hidden", 32, "LSTM units")
FLAGS = flags.FLAGS


def main(_):
    digits = load_digits()
    seqs = (digits.images / 16.0).astype(np.float32)  # [n, 8 time steps, 8 inputs]
    labels = digits.target.astype(np.int64)

    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 8, 8])
    y = tf.placeholder(tf.int64, [None])
    cell = tf.nn.rnn_cell.LSTMCell(FLAGS.num_hidden)
    outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    last = state.h  # an LSTMStateTuple
    logits = tf.layers.dense(last, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    train_op = tf.train.AdamOptimizer(0.02).minimize(loss)
    accuracy, accuracy_update = tf.metrics.accuracy(labels=y, predictions=tf.argmax(logits, 1))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        rng = np.random.RandomState(0)
        for step in range(FLAGS.steps):
            idx = rng.randint(0, 1400, 64)
            l, _ = sess.run([loss, train_op], {x: seqs[idx], y: labels[idx]})
            if step % 50 == 0:
                print("step %d loss %.4f" % (step, l))
        sess.run(tf.local_variables_initializer())
        for start in range(1400, len(seqs), 100):
            sess.run(
                accuracy_update, {x: seqs[start : start + 100], y: labels[start : start + 100]}
            )
        print("test accuracy %.4f" % sess.run(accuracy))


if __name__ == "__main__":
    tf.app.run()
