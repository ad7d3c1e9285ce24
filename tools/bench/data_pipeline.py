"""tf.data input pipelines in graph mode: batches per second read through get_next."""

from __future__ import annotations

import numpy as np

from tools.bench import Row, measure_rate, run_peer

N, DIM, BATCH = 10_000, 64, 64


def _pipelines(tf, x, y):
    """(name, dataset) pairs; the same code builds TensorFlow's and rill's."""
    slices = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000, seed=1).batch(BATCH)
    mapped = tf.data.Dataset.range(10**9).map(lambda i: tf.cast(i, tf.float32) * 2.0 + 1.0)
    return [
        (f"from_tensor_slices [{N},{DIM}] + shuffle(1000) + batch({BATCH})", slices.repeat()),
        (f"range + map(cast, mul, add) + batch({BATCH})", mapped.batch(BATCH)),
    ]


PEER = f"""
import json, time, statistics
import numpy as np
import tensorflow as tf2
tf = tf2.compat.v1
tf.disable_eager_execution()
N, DIM, BATCH = {N}, {DIM}, {BATCH}
def pipelines(tf, x, y):
    slices = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000, seed=1).batch(BATCH)
    mapped = tf.data.Dataset.range(10**9).map(lambda i: tf.cast(i, tf.float32) * 2.0 + 1.0)
    return [slices.repeat(), mapped.batch(BATCH)]
rng = np.random.default_rng(0)
x = rng.normal(size=(N, DIM)).astype(np.float32)
y = rng.integers(0, 10, N).astype(np.int64)
out = {{}}
for k in range(2):
    g = tf.Graph()
    with g.as_default():
        ds = pipelines(tf, x, y)[k]
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
    sess = tf.Session(graph=g)
    f = lambda: sess.run(nxt)
    f()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n): f()
        if time.perf_counter() - t0 > 0.2: break
        n *= 2
    rates = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): f()
        rates.append(n / (time.perf_counter() - t0))
    out[str(k)] = statistics.median(rates)
print(json.dumps(out))
"""


def run() -> list[Row]:
    import rill.compat.v1 as tf

    peer = run_peer(PEER)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, DIM)).astype(np.float32)
    y = rng.integers(0, 10, N).astype(np.int64)
    rows = []
    for k in range(2):
        with tf.Graph().as_default():
            name, ds = _pipelines(tf, x, y)[k]
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            sess = tf.Session()
            first = sess.run(nxt)
            assert len(first[0] if isinstance(first, tuple) else first) == BATCH
            rate = measure_rate(lambda sess=sess, nxt=nxt: sess.run(nxt))
            sess.close()
        rows.append(Row(f"tf.data {name}", "batches/s", rate, {"tensorflow": peer.get(str(k))}))
    return rows
