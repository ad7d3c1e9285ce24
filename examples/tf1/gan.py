"""A TF1 GAN with two optimizers: a generator learns to turn noise into samples of N(3, 0.5²),
a discriminator learns to tell them from real ones; each optimizer updates only its network's
variables (var_list from the variable scopes). Only the import names rill."""

import numpy as np

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("steps", 600, "training steps (one D and one G update each)")
FLAGS = flags.FLAGS


def generator(z):
    with tf.variable_scope("G"):
        h = tf.layers.dense(z, 16, activation=tf.nn.relu, name="h")
        return tf.layers.dense(h, 1, name="out")


def discriminator(x, reuse=False):
    with tf.variable_scope("D", reuse=reuse):
        h = tf.layers.dense(x, 16, activation=tf.nn.leaky_relu, name="h")
        return tf.layers.dense(h, 1, name="out")


def main(_):
    tf.set_random_seed(5)
    real = tf.placeholder(tf.float32, [None, 1])
    z = tf.placeholder(tf.float32, [None, 4])
    fake = generator(z)
    d_real = discriminator(real)
    d_fake = discriminator(fake, reuse=True)
    d_loss = tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.ones_like(d_real), logits=d_real)
        + tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros_like(d_fake), logits=d_fake)
    )
    g_loss = tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.ones_like(d_fake), logits=d_fake)
    )
    d_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="D")
    g_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="G")
    d_train = tf.train.AdamOptimizer(0.01, beta1=0.5).minimize(d_loss, var_list=d_vars)
    g_train = tf.train.AdamOptimizer(0.01, beta1=0.5).minimize(g_loss, var_list=g_vars)

    rng = np.random.RandomState(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(FLAGS.steps):
            batch = rng.normal(3.0, 0.5, (64, 1)).astype(np.float32)
            noise = rng.uniform(-1, 1, (64, 4)).astype(np.float32)
            sess.run(d_train, {real: batch, z: noise})
            sess.run(g_train, {z: rng.uniform(-1, 1, (64, 4)).astype(np.float32)})
        samples = sess.run(fake, {z: rng.uniform(-1, 1, (2000, 4)).astype(np.float32)})
    print("generated mean %.3f std %.3f (target 3.000, 0.500)" % (samples.mean(), samples.std()))
    print("D variables %d, G variables %d" % (len(d_vars), len(g_vars)))


if __name__ == "__main__":
    tf.app.run()
