"""Models the core runtime's tests run both locally and on a cluster (variables on PS tasks)."""

from __future__ import annotations

import itertools

import rill.graph as rg
import rill.train as rt


def ps_round_robin(num_ps: int, worker: str = "/job:worker/task:0"):
    """A device function: variables round-robin over the PS tasks, everything else on `worker`."""
    counter = itertools.count()

    def place(op):
        if op.type in ("VarHandleOp", "VariableV2"):
            return f"/job:ps/task:{next(counter) % num_ps}"
        return op.device or worker

    return place


def figure1_mlp(device=None, lr: float = 0.1):
    g = rg.Graph()
    with g.as_default(), g.device(device):
        g.seed = 1
        x = rg.placeholder(rg.float32, [None, 784], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")
        w_1 = rg.Variable(rg.random_uniform([784, 100], -0.08, 0.08), name="W_1")
        b_1 = rg.Variable(rg.zeros([100]), name="b_1")
        layer_1 = rg.relu(rg.matmul(x, w_1) + b_1, name="layer_1")
        w_2 = rg.Variable(rg.random_uniform([100, 10], -0.08, 0.08), name="W_2")
        b_2 = rg.Variable(rg.zeros([10]), name="b_2")
        logits = rg.identity(rg.matmul(layer_1, w_2) + b_2, name="logits")
        loss = rg.reduce_mean(
            rg.softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss"
        )
        train = rt.AdagradOptimizer(lr).minimize(loss)
        init = rg.global_variables_initializer()
    return g, dict(x=x, y=y, logits=logits, loss=loss, train=train, init=init)


def small_cnn(device=None, lr: float = 0.05):
    g = rg.Graph()
    with g.as_default(), g.device(device):
        g.seed = 2
        x = rg.placeholder(rg.float32, [None, 784], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")
        images = rg.reshape(x, [-1, 28, 28, 1])
        h = rt.layers.conv2d(images, 8, 5, padding="same", activation=rg.relu, name="conv1")
        h = rt.layers.max_pooling2d(h, 2, 2, name="pool1")
        h = rt.layers.conv2d(h, 16, 5, padding="same", activation=rg.relu, name="conv2")
        h = rt.layers.max_pooling2d(h, 2, 2, name="pool2")
        h = rt.layers.flatten(h)
        h = rt.layers.dense(h, 32, activation=rg.relu, name="dense1")
        logits = rg.identity(rt.layers.dense(h, 10, name="dense2"), name="logits")
        loss = rt.losses.softmax_cross_entropy(y, logits)
        train = rt.MomentumOptimizer(lr, 0.9).minimize(loss)
        init = rg.global_variables_initializer()
    return g, dict(x=x, y=y, logits=logits, loss=loss, train=train, init=init)
