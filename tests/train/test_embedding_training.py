"""Training sharded embeddings on several CPU devices of one session: every optimizer's sparse
path gives the same rows as the unsharded embedding, touches only the looked-up rows, and the
gradient graph never builds a dense gradient of a shard."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff import IndexedSlices
from rill.exec import ConfigProto, Session

V, D = 61, 5
INIT = np.random.default_rng(0).standard_normal((V, D))
W_OUT = np.random.default_rng(1).standard_normal((D, 1))
IDS = np.array([4, 60, 4, 0, 13, 4, 9, 60, 1, 37], np.int64)

OPTIMIZERS = {
    "sgd": lambda: rt.GradientDescentOptimizer(0.3),
    "momentum": lambda: rt.MomentumOptimizer(0.3, 0.9),
    "nesterov": lambda: rt.MomentumOptimizer(0.3, 0.9, use_nesterov=True),
    "adagrad": lambda: rt.AdagradOptimizer(0.3),
    "adadelta": lambda: rt.AdadeltaOptimizer(1.0),
    "rmsprop": lambda: rt.RMSPropOptimizer(0.1, momentum=0.5),
    "rmsprop_centered": lambda: rt.RMSPropOptimizer(0.1, centered=True),
    "adam": lambda: rt.AdamOptimizer(0.1),
    "ftrl": lambda: rt.FtrlOptimizer(0.3, l1_regularization_strength=0.01),
}


def shard_values(n: int, strategy: str) -> list[np.ndarray]:
    if strategy == "mod":
        return [INIT[p::n] for p in range(n)]
    sizes = [V // n + (1 if p < V % n else 0) for p in range(n)]
    return np.split(INIT, np.cumsum(sizes)[:-1])


def unshard(parts: list[np.ndarray], strategy: str) -> np.ndarray:
    if strategy == "div":
        return np.concatenate(parts)
    out = np.empty((V, D))
    for p, part in enumerate(parts):
        out[p :: len(parts)] = part
    return out


def train(n: int, strategy: str, opt_name: str, steps: int = 3, probe: bool = False):
    """(the embedding after `steps` steps, the graph's gradient ops, the shard gradients); with
    probe, the gradient ops are (op, the values of its float outputs in one step)."""
    g = rg.Graph()
    with g.as_default():
        shards = []
        for p, value in enumerate(shard_values(n, strategy)):
            with g.device(f"/device:CPU:{p % 3}"):
                shards.append(rg.Variable(value, name=f"emb/part_{p}"))
        ids = rg.placeholder(rg.int64, [None], name="ids")
        params = shards if n > 1 else shards[0]
        rows = rg.embedding_lookup(params, ids, partition_strategy=strategy)
        loss = rg.reduce_sum(rg.tanh(rg.matmul(rows, rg.constant(W_OUT))))
        opt = OPTIMIZERS[opt_name]()
        before = len(g.get_operations())
        grads_and_vars = opt.compute_gradients(loss, var_list=shards)
        grad_ops = g.get_operations()[before:]
        step = opt.apply_gradients(grads_and_vars)
        init = rg.global_variables_initializer()
    with Session(graph=g, config=ConfigProto(device_count={"CPU": 3})) as s:
        s.run(init)
        for _ in range(steps):
            s.run(step, {ids: IDS})
        parts = s.run([v.value() for v in shards])
        if probe:
            outs = [[t for t in op.outputs if t.dtype.is_floating] for op in grad_ops]
            grad_ops = list(zip(grad_ops, s.run(outs, {ids: IDS})))
    return unshard(parts, strategy), grad_ops, [gv[0] for gv in grads_and_vars]


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("strategy,n", [("mod", 3), ("div", 4), ("div", 5), ("mod", 2)])
def test_sharded_training_equals_unsharded(opt_name, strategy, n):
    want, _, _ = train(1, strategy, opt_name)
    got, _, grads = train(n, strategy, opt_name)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert all(isinstance(gr, IndexedSlices) for gr in grads)
    untouched = np.setdiff1d(np.arange(V), IDS)
    # (TensorFlow's Adam decays the first moment of every row on a sparse step, so rows that
    # were looked up once keep moving; rows never looked up keep their values with every
    # optimizer.)
    np.testing.assert_array_equal(got[untouched], INIT[untouched])
    assert not np.allclose(got[np.unique(IDS)], INIT[np.unique(IDS)])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_no_dense_gradient_of_a_shard_is_built(strategy):
    n = 3
    _, probed, grads = train(n, strategy, "adagrad", steps=1, probe=True)
    sizes = {v.shape[0] for v in shard_values(n, strategy)}
    assert len(np.unique(IDS)) not in sizes  # so a dense shard gradient cannot hide
    assert len(probed) > 20
    for op, values in probed:
        for t, value in zip([t for t in op.outputs if t.dtype.is_floating], values):
            assert not (value.ndim == 2 and value.shape[0] in sizes), (
                f"{op.name} ({op.type}) builds a dense {value.shape} gradient of a shard"
            )
            assert value.size <= len(IDS) * D, f"{t.name} holds {value.size} values"
    for gr in grads:
        assert isinstance(gr, IndexedSlices)
        # The rows sent back to each shard are the distinct rows it served.
        assert gr.values.shape.as_list() == [None, D]


def _address(var) -> int:
    return var._value.__array_interface__["data"][0]


def _in_place_steps(opt_name, config, tries):
    """Whether each of up to `tries` steps wrote the embedding's rows into the variable's own
    memory; stops at the first that did. Checks first that a fetched value is never written (a
    fetch is the caller's copy). The variable's memory is read from its resource: comparing the
    addresses of two fetched copies would only observe the allocator reusing a freed block."""
    g = rg.Graph()
    with g.as_default():
        emb = rg.Variable(INIT, name="emb")
        ids = rg.placeholder(rg.int64, [None])
        loss = rg.reduce_sum(rg.embedding_lookup(emb, ids))
        step = OPTIMIZERS[opt_name]().minimize(loss)
        init = rg.global_variables_initializer()
    with Session(graph=g, config=config) as s:
        s.run(init)
        s.run(step, {ids: IDS})
        held = s.run(emb.value())
        snapshot = held.copy()
        s.run(step, {ids: IDS})  # a fetched value is never written
        np.testing.assert_array_equal(held, snapshot)
        assert not np.array_equal(s.run(emb.value()), snapshot)
        del held
        var = s._devices[0].resources.lookup("", "emb")
        in_place = []
        for _ in range(tries):
            address = _address(var)
            s.run(step, {ids: IDS})
            in_place.append(_address(var) == address)
            if in_place[-1]:
                break
        return in_place


@pytest.mark.parametrize("opt_name", ["sgd", "adagrad", "momentum"])
def test_sparse_updates_write_rows_in_place_unless_a_reader_holds_the_value(opt_name):
    # Ops on the caller's thread: nothing but the variable holds its value between steps, so
    # the very first step writes in place.
    caller_thread = ConfigProto(inter_op_parallelism_threads=-1)
    assert _in_place_steps(opt_name, caller_thread, tries=1) == [True]
    # With the op pool, the thread that produced the last fetched value may still hold it for
    # a moment after run() returns (on a loaded machine, for a whole step), and that step
    # copies; an implementation that always copies fails all the tries.
    in_place = _in_place_steps(opt_name, None, tries=50)
    assert in_place[-1], in_place
