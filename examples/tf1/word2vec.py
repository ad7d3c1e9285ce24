"""A TF1 skip-gram word2vec on a tiny corpus — the structure of TensorFlow's
word2vec_basic.py; only the import names rill.

`tf.nn.embedding_lookup` reads the rows of the batch, and `tf.nn.nce_loss` trains them against
`num_sampled` negative words drawn by the log-uniform candidate sampler, as in TensorFlow's
tutorial.
"""

import collections

import numpy as np

import rill.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("steps", 400, "training steps")
flags.DEFINE_integer("embedding_size", 16, "dimension of the embeddings")
flags.DEFINE_integer("num_sampled", 6, "negative examples per batch")
FLAGS = flags.FLAGS

CORPUS = (
    "the king rules the land . the queen rules the land . the king and the queen live in the "
    "castle . a dog runs in the park . a cat runs in the park . the dog and the cat play . "
) * 20


def build_dataset(words):
    count = collections.Counter(words).most_common()
    dictionary = {w: i for i, (w, _) in enumerate(count)}
    data = [dictionary[w] for w in words]
    return data, dictionary, {i: w for w, i in dictionary.items()}


def skipgram_batches(data, batch_size, window, rng):
    while True:
        centers = rng.randint(window, len(data) - window, batch_size)
        offsets = rng.choice([o for o in range(-window, window + 1) if o], batch_size)
        yield (
            np.array([data[c] for c in centers]),
            np.array([data[c + o] for c, o in zip(centers, offsets)]),
        )


def main(_):
    words = CORPUS.split()
    data, dictionary, reverse = build_dataset(words)
    vocab = len(dictionary)

    tf.set_random_seed(4)
    train_inputs = tf.placeholder(tf.int32, shape=[None])
    train_labels = tf.placeholder(tf.int64, shape=[None])
    embeddings = tf.Variable(tf.random_uniform([vocab, FLAGS.embedding_size], -1.0, 1.0))
    embed = tf.nn.embedding_lookup(embeddings, train_inputs)
    nce_weights = tf.Variable(tf.truncated_normal([vocab, FLAGS.embedding_size], stddev=0.5))
    nce_biases = tf.Variable(tf.zeros([vocab]))
    loss = tf.reduce_mean(
        tf.nn.nce_loss(
            weights=nce_weights,
            biases=nce_biases,
            labels=tf.reshape(train_labels, [-1, 1]),
            inputs=embed,
            num_sampled=FLAGS.num_sampled,
            num_classes=vocab,
        )
    )
    optimizer = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    normalized = tf.nn.l2_normalize(embeddings, 1)
    probe = tf.constant([dictionary["king"], dictionary["dog"]])
    similarity = tf.matmul(tf.gather(normalized, probe), normalized, transpose_b=True)

    with tf.Session() as session:
        tf.global_variables_initializer().run()
        batches = skipgram_batches(data, 64, 1, np.random.RandomState(0))
        first = None
        for _ in range(FLAGS.steps):
            inputs, labels = next(batches)
            _, l = session.run([optimizer, loss], {train_inputs: inputs, train_labels: labels})
            first = l if first is None else first
        sim = similarity.eval()
        for row, word in zip(sim, ["king", "dog"]):
            nearest = [reverse[i] for i in (-row).argsort()[1:4]]
            print("nearest to %s: %s" % (word, ", ".join(nearest)))
        print("loss %.4f -> %.4f" % (first, l))


if __name__ == "__main__":
    tf.app.run()
