"""A small CNN train step — conv 5×5×32, max pool, conv 5×5×64, max pool, dense 1024, dense 10;
batch 64 on 28×28×1, SGD with momentum — against TensorFlow 1.x graph mode and PyTorch.

Rows: the step's wall time on the default threads; the step's CPU time on one thread (rill and
TensorFlow with intra_op = inter_op = 1: the figure that holds on a shared, loaded machine); the
CPU time of the second convolution's three kernels alone (one thread), the step's largest; and
of the first convolution's two (its forward with the bias and Relu fused, as in the step, and
its filter gradient; one input channel, so a GEMM of inner size 25).
"""

from __future__ import annotations

import numpy as np

from tools.bench import Row, measure_time, run_peer

BATCH = 64

PEER = """
import json, time, statistics
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
tf.compat.v1.enable_resource_variables()
def timeit(f, n=None, clock=time.perf_counter):
    f(); f()
    ts = []
    for _ in range(7):
        t0 = clock(); f(); ts.append((clock() - t0) * 1000)
    return statistics.median(ts)
rng = np.random.default_rng(0)
xv = rng.random((%(B)d, 28, 28, 1), dtype=np.float32)
yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, %(B)d)]
out = {}
g = tf.Graph()
with g.as_default():
    tf.compat.v1.set_random_seed(0)
    x = tf.compat.v1.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.compat.v1.placeholder(tf.float32, [None, 10])
    def var(shape, scale):
        return tf.Variable(tf.random.uniform(shape, -scale, scale))
    w1, b1 = var([5, 5, 1, 32], 0.1), tf.Variable(tf.zeros([32]))
    w2, b2 = var([5, 5, 32, 64], 0.05), tf.Variable(tf.zeros([64]))
    w3, b3 = var([7 * 7 * 64, 1024], 0.02), tf.Variable(tf.zeros([1024]))
    w4, b4 = var([1024, 10], 0.05), tf.Variable(tf.zeros([10]))
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w1, 1, "SAME"), b1))
    h = tf.nn.max_pool2d(h, 2, 2, "SAME")
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w2, 1, "SAME"), b2))
    h = tf.nn.max_pool2d(h, 2, 2, "SAME")
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), w3) + b3)
    logits = tf.matmul(h, w4) + b4
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.compat.v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
    init = tf.compat.v1.global_variables_initializer()
    # The kernels' inputs are variables and their outputs are not fetched, so that the figures
    # are the kernels' (no feed or fetch copies), as rill's are.
    cx = tf.Variable(tf.random.uniform([%(B)d, 14, 14, 32]))
    cw = tf.Variable(tf.random.uniform([5, 5, 32, 64]))
    cdy = tf.Variable(tf.random.uniform([%(B)d, 14, 14, 64]))
    conv_ops = {
        "fwd": tf.nn.conv2d(cx, cw, 1, "SAME"),
        "input": tf.compat.v1.nn.conv2d_backprop_input([%(B)d, 14, 14, 32], cw, cdy,
                                                      [1, 1, 1, 1], "SAME"),
        "filter": tf.compat.v1.nn.conv2d_backprop_filter(cx, [5, 5, 32, 64], cdy,
                                                        [1, 1, 1, 1], "SAME"),
    }
    c1x = tf.Variable(tf.random.uniform([%(B)d, 28, 28, 1]))
    c1w = tf.Variable(tf.random.uniform([5, 5, 1, 32]))
    c1b = tf.Variable(tf.random.uniform([32]))
    c1dy = tf.Variable(tf.random.uniform([%(B)d, 28, 28, 32]))
    conv_ops["conv1_fwd"] = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(c1x, c1w, 1, "SAME"), c1b))
    conv_ops["conv1_filter"] = tf.compat.v1.nn.conv2d_backprop_filter(
        c1x, [5, 5, 1, 32], c1dy, [1, 1, 1, 1], "SAME")
    conv_init = tf.compat.v1.variables_initializer([cx, cw, cdy, c1x, c1w, c1b, c1dy])
sess = tf.compat.v1.Session(graph=g)
sess.run(init)
out["tensorflow"] = timeit(lambda: sess.run(train, {x: xv, y: yv}))
one = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
sess1 = tf.compat.v1.Session(graph=g, config=one)
sess1.run([init, conv_init])
out["tensorflow_cpu1"] = timeit(lambda: sess1.run(train, {x: xv, y: yv}), clock=time.process_time)
for k, op in conv_ops.items():
    out["tensorflow_conv_" + k] = timeit(lambda: sess1.run(op.op), clock=time.process_time)
try:
    import torch
    torch.set_num_threads(2)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(7 * 7 * 64, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    tx = torch.from_numpy(xv.transpose(0, 3, 1, 2).copy()); ty = torch.from_numpy(yv)
    def step():
        opt.zero_grad()
        l = torch.nn.functional.cross_entropy(net(tx), ty)
        l.backward(); opt.step()
    out["pytorch"] = timeit(step)
except ImportError:
    pass
print(json.dumps(out))
""" % {"B": BATCH}


def build_rill():
    import rill.graph as rg
    from rill.train import MomentumOptimizer

    g = rg.Graph()
    with g.as_default():
        g.seed = 0
        x = rg.placeholder(rg.float32, [None, 28, 28, 1], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")

        def var(shape, scale):
            return rg.Variable(rg.random_uniform(shape, -scale, scale))

        w1, b1 = var([5, 5, 1, 32], 0.1), rg.Variable(rg.zeros([32]))
        w2, b2 = var([5, 5, 32, 64], 0.05), rg.Variable(rg.zeros([64]))
        w3, b3 = var([7 * 7 * 64, 1024], 0.02), rg.Variable(rg.zeros([1024]))
        w4, b4 = var([1024, 10], 0.05), rg.Variable(rg.zeros([10]))
        h = rg.relu(rg.bias_add(rg.conv2d(x, w1, [1, 1, 1, 1], "SAME"), b1))
        h = rg.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = rg.relu(rg.bias_add(rg.conv2d(h, w2, [1, 1, 1, 1], "SAME"), b2))
        h = rg.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = rg.relu(rg.matmul(rg.reshape(h, [-1, 7 * 7 * 64]), w3) + b3)
        logits = rg.matmul(h, w4) + b4
        loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = MomentumOptimizer(0.01, 0.9).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, y, loss, train, init


def _cpu_ms(fn, repeats: int = 7) -> float:
    """The median CPU time of fn() in milliseconds (process_time: every thread of the process)."""
    import statistics
    import time

    fn()
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        ts.append((time.process_time() - t0) * 1000)
    return statistics.median(ts)


def _conv_kernels_cpu() -> dict:
    """CPU ms, on one intra-op thread, of the second convolution's forward, input- and
    filter-gradient kernels (batch 64, 14×14×32 → 64, 5×5 SAME) and of the first convolution's
    forward (with bias and Relu, the step's _FusedConv2D) and filter gradient (28×28×1 → 32),
    each computing its op's output."""
    import rill.exec.kernels  # noqa: F401 - registers every kernel
    import rill.graph as rg
    from rill.exec import threads
    from rill.exec.testing import run_kernel

    rng = np.random.default_rng(0)
    cx = rng.random((BATCH, 14, 14, 32), dtype=np.float32)
    cw = rng.random((5, 5, 32, 64), dtype=np.float32)
    cdy = rng.random((BATCH, 14, 14, 64), dtype=np.float32)
    c1x = rng.random((BATCH, 28, 28, 1), dtype=np.float32)
    c1w = rng.random((5, 5, 1, 32), dtype=np.float32)
    c1b = rng.random(32, dtype=np.float32)
    c1dy = rng.random((BATCH, 28, 28, 32), dtype=np.float32)
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NHWC")
    fused = dict(attrs, fused_ops=["BiasAdd", "Relu"], num_args=1)
    ops = {"fwd": ("Conv2D", [cx, cw], attrs),
           "input": ("Conv2DBackpropInput", [np.array(cx.shape, np.int32), cw, cdy], attrs),
           "filter": ("Conv2DBackpropFilter", [cx, np.array(cw.shape, np.int32), cdy], attrs),
           "conv1_fwd": ("_FusedConv2D", [c1x, c1w, [c1b], []], fused),
           "conv1_filter": ("Conv2DBackpropFilter", [c1x, np.array(c1w.shape, np.int32), c1dy],
                            attrs)}  # fmt: skip
    out = {}
    with threads.blas_owned(), threads.limits(1):
        for name, (op_type, inputs, op_attrs) in ops.items():
            flat: list[np.ndarray] = []

            def placeholder(a, flat=flat):
                if isinstance(a, list):  # a list input (the fused op's args)
                    return [placeholder(b) for b in a]
                flat.append(a)
                return rg.placeholder(rg.as_dtype(a.dtype))

            with rg.Graph().as_default() as g:
                phs = [placeholder(a) for a in inputs]
                op = g.create_op(op_type, phs, dict(op_attrs), name=name)
            out[name] = _cpu_ms(lambda op=op, flat=flat: run_kernel(op, *flat))
    return out


def run() -> list[Row]:
    from rill.exec import ConfigProto, Session

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    xv = rng.random((BATCH, 28, 28, 1), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
    sess = Session(graph=g)
    sess.run(init)
    first = sess.run(loss, {x: xv, y: yv})
    for _ in range(5):
        sess.run(train, {x: xv, y: yv})
    assert sess.run(loss, {x: xv, y: yv}) < first  # it trains
    rill_ms = measure_time(lambda: sess.run(train, {x: xv, y: yv}), min_time=3.0, repeats=7)
    one = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess1 = Session(graph=g, config=one)
    sess1.run(init)
    rill_cpu1 = _cpu_ms(lambda: sess1.run(train, {x: xv, y: yv}))
    sess1.close()
    sess.close()
    kernels = _conv_kernels_cpu()
    peer = run_peer(PEER)
    rows = [Row("CNN train step (2 conv, 2 dense, momentum), batch 64", "ms", rill_ms,
                {"tensorflow": peer.get("tensorflow"), "pytorch": peer.get("pytorch")}),
            Row("CNN train step, CPU ms on one thread", "ms", rill_cpu1,
                {"tensorflow": peer.get("tensorflow_cpu1")})]  # fmt: skip
    for name, label in (("fwd", "forward"), ("input", "input gradient"),
                        ("filter", "filter gradient")):  # fmt: skip
        rows.append(Row(f"CNN conv2 {label} (64×14×14×32, 5×5×64), CPU ms, one thread", "ms",
                        kernels[name], {"tensorflow": peer.get("tensorflow_conv_" + name)}))  # fmt: skip
    for name, label in (("conv1_fwd", "forward + bias + Relu"),
                        ("conv1_filter", "filter gradient")):  # fmt: skip
        rows.append(Row(f"CNN conv1 {label} (64×28×28×1, 5×5×32), CPU ms, one thread", "ms",
                        kernels[name], {"tensorflow": peer.get("tensorflow_conv_" + name)}))  # fmt: skip
    return rows
