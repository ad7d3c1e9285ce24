"""TF1 queue-based input: slice_input_producer + shuffle_batch feed a linear regression, with a
Coordinator and start_queue_runners; num_epochs ends the input with OutOfRangeError, as in
TensorFlow's "Reading data" guide. Only the import names rill."""

import numpy as np

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("num_epochs", 20, "passes over the data")
flags.DEFINE_integer("batch_size", 32, "examples per step")
FLAGS = flags.FLAGS


def main(_):
    rng = np.random.RandomState(0)
    features = rng.uniform(-1, 1, (256, 3)).astype(np.float32)
    true_w = np.array([[2.0], [-1.0], [0.5]], np.float32)
    targets = (features @ true_w + 0.3).astype(np.float32)

    tf.set_random_seed(6)
    x, y = tf.train.slice_input_producer([features, targets], num_epochs=FLAGS.num_epochs)
    x_batch, y_batch = tf.train.shuffle_batch(
        [x, y],
        batch_size=FLAGS.batch_size,
        capacity=200,
        min_after_dequeue=50,
        allow_smaller_final_batch=True,
    )
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x_batch, w) + b - y_batch))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=global_step)

    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while not coord.should_stop():
                sess.run(train_op)
        except tf.errors.OutOfRangeError:
            print("done training after %d steps" % sess.run(global_step))
        finally:
            coord.request_stop()
        coord.join(threads)
        print("w", np.round(sess.run(w).ravel(), 3), "b", np.round(sess.run(b), 3))


if __name__ == "__main__":
    tf.app.run()
