"""A TF1 convolutional network with dropout on the handwritten digits (8x8), the layout of
TensorFlow's "Deep MNIST for experts" tutorial — only the import names rill."""

import numpy as np
from sklearn.datasets import load_digits

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("steps", 200, "training steps")
FLAGS = flags.FLAGS


def weight_variable(shape):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1))


def bias_variable(shape):
    return tf.Variable(tf.constant(0.1, shape=shape))


def conv2d(x, W):
    return tf.nn.conv2d(x, W, strides=[1, 1, 1, 1], padding="SAME")


def max_pool_2x2(x):
    return tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def main(_):
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[digits.target]

    tf.set_random_seed(2)
    x = tf.placeholder(tf.float32, [None, 64])
    y_ = tf.placeholder(tf.float32, [None, 10])
    x_image = tf.reshape(x, [-1, 8, 8, 1])

    W_conv1, b_conv1 = weight_variable([3, 3, 1, 16]), bias_variable([16])
    h_pool1 = max_pool_2x2(tf.nn.relu(conv2d(x_image, W_conv1) + b_conv1))
    W_conv2, b_conv2 = weight_variable([3, 3, 16, 32]), bias_variable([32])
    h_pool2 = max_pool_2x2(tf.nn.relu(conv2d(h_pool1, W_conv2) + b_conv2))

    W_fc1, b_fc1 = weight_variable([2 * 2 * 32, 64]), bias_variable([64])
    h_pool2_flat = tf.reshape(h_pool2, [-1, 2 * 2 * 32])
    h_fc1 = tf.nn.relu(tf.matmul(h_pool2_flat, W_fc1) + b_fc1)
    keep_prob = tf.placeholder(tf.float32)
    h_fc1_drop = tf.nn.dropout(h_fc1, keep_prob)
    W_fc2, b_fc2 = weight_variable([64, 10]), bias_variable([10])
    y_conv = tf.matmul(h_fc1_drop, W_fc2) + b_fc2

    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y_conv)
    )
    train_step = tf.train.AdamOptimizer(1e-2).minimize(cross_entropy)
    correct_prediction = tf.equal(tf.argmax(y_conv, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        rng = np.random.RandomState(0)
        for i in range(FLAGS.steps):
            idx = rng.randint(0, 1400, 50)
            batch = (images[idx], labels[idx])
            if i % 50 == 0:
                train_accuracy = accuracy.eval(
                    feed_dict={x: batch[0], y_: batch[1], keep_prob: 1.0}
                )
                print("step %d, training accuracy %g" % (i, train_accuracy))
            train_step.run(feed_dict={x: batch[0], y_: batch[1], keep_prob: 0.5})
        acc = accuracy.eval(feed_dict={x: images[1400:], y_: labels[1400:], keep_prob: 1.0})
        print("test accuracy %g" % acc)


if __name__ == "__main__":
    tf.app.run()
