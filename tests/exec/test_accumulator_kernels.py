"""Accumulator kernels against a numpy model of TensorFlow's ConditionalAccumulator semantics."""

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec.proto import config_pb2
from rill.graph.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
)
from rill.graph.ops.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator


class DenseModel:
    """The semantics, written down plainly: sum, count, global step, drops."""

    def __init__(self, reduction):
        self.reduction, self.sum, self.count, self.step, self.dropped = reduction, None, 0, 0, 0

    def apply(self, local_step, g):
        if local_step < self.step:
            self.dropped += 1
            return
        self.sum = g.copy() if self.count == 0 else self.sum + g
        self.count += 1

    def take(self):
        out = self.sum / self.count if self.reduction == "MEAN" else self.sum
        self.sum, self.count, self.step = None, 0, self.step + 1
        return out


def _dense_graph(reduction, resource, dtype=rg.float32):
    g = rg.Graph()
    with g.as_default():
        acc = ConditionalAccumulator(
            dtype, shape=[3], shared_name="acc", reduction_type=reduction, resource=resource
        )
        grad = rg.placeholder(dtype, [3])
        step = rg.placeholder(rg.int64, [])
        n = rg.placeholder(rg.int32, [])
        ops = {
            "apply": acc.apply_grad(grad, step),
            "take": acc.take_grad(n),
            "num": acc.num_accumulated(),
            "set": acc.set_global_step(step),
        }
        if resource:
            ops["dropped"] = acc.num_dropped()
    return g, ops, grad, step, n


@pytest.mark.parametrize("resource", [False, True])
@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
def test_random_operation_sequences_match_the_model(reduction, resource):
    g, ops, grad, step, n = _dense_graph(reduction, resource)
    rng = np.random.default_rng(7)
    model = DenseModel(reduction)
    with Session(graph=g) as sess:
        for _ in range(200):
            what = rng.choice(["apply", "apply", "apply", "take", "set"])
            if what == "apply":
                ls = int(rng.integers(max(model.step - 2, 0), model.step + 2))
                x = rng.standard_normal(3).astype(np.float32)
                sess.run(ops["apply"], {grad: x, step: ls})
                model.apply(ls, x)
            elif what == "take" and model.count > 0:
                k = int(rng.integers(1, model.count + 1))
                got = sess.run(ops["take"], {n: k})
                np.testing.assert_allclose(got, model.take(), rtol=1e-5)
            elif what == "set":
                s = int(rng.integers(0, model.step + 3))
                sess.run(ops["set"], {step: s})
                model.step = s
            assert sess.run(ops["num"]) == model.count
            if resource:
                assert sess.run(ops["dropped"]) == model.dropped
        assert model.dropped > 0  # the sequence exercised stale gradients


def test_integer_mean_keeps_the_dtype():
    g, ops, grad, step, n = _dense_graph("MEAN", True, rg.int32)
    with Session(graph=g) as sess:
        sess.run(ops["apply"], {grad: np.array([1, 2, 3], np.int32), step: 0})
        sess.run(ops["apply"], {grad: np.array([3, 4, 6], np.int32), step: 0})
        got = sess.run(ops["take"], {n: 2})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [2, 3, 4])


def test_take_waits_for_num_required_gradients_from_other_threads():
    g, ops, grad, step, n = _dense_graph("MEAN", False)
    with Session(graph=g) as sess:
        result = {}

        def taker():
            result["v"] = sess.run(ops["take"], {n: 3})

        t = threading.Thread(target=taker)
        t.start()
        for i in range(3):
            time.sleep(0.05)
            assert "v" not in result
            sess.run(ops["apply"], {grad: np.full(3, i, np.float32), step: 0})
        t.join(10)
        assert not t.is_alive()
        np.testing.assert_allclose(result["v"], [1, 1, 1])
        # The take advanced the global step: a gradient computed at step 0 is now stale.
        sess.run(ops["apply"], {grad: np.ones(3, np.float32), step: 0})
        assert sess.run(ops["num"]) == 0


def test_take_obeys_the_step_deadline_and_the_session_stays_usable():
    g, ops, grad, step, n = _dense_graph("MEAN", False)
    with Session(graph=g) as sess:
        opts = config_pb2.RunOptions(timeout_in_ms=200)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            sess.run(ops["take"], {n: 1}, options=opts)
        assert time.monotonic() - t0 < 5
        sess.run(ops["apply"], {grad: np.ones(3, np.float32), step: 0})
        np.testing.assert_allclose(sess.run(ops["take"], {n: 1}), np.ones(3))


def test_closing_the_session_releases_a_waiting_take():
    g, ops, grad, step, n = _dense_graph("MEAN", True)
    sess = Session(graph=g)
    errors = []

    def taker():
        try:
            sess.run(ops["take"], {n: 2})
        except Exception as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    t = threading.Thread(target=taker)
    t.start()
    time.sleep(0.2)
    sess.close()
    t.join(10)
    assert not t.is_alive()
    assert errors and isinstance(errors[0], CancelledError)


def test_bad_input_is_a_clear_error():
    g, ops, grad, step, n = _dense_graph("MEAN", False)
    with g.as_default():
        other = rg.placeholder(rg.float32, [None])
        acc2 = ConditionalAccumulator(rg.float32, shape=None, shared_name="free")
        apply2 = acc2.apply_grad(other, 0)
    with Session(graph=g) as sess:
        with pytest.raises(InvalidArgumentError, match="num_required must be >= 1"):
            sess.run(ops["take"], {n: 0})
        sess.run(apply2, {other: np.ones(2, np.float32)})
        with pytest.raises(InvalidArgumentError, match="has shape \\[4\\]"):
            sess.run(apply2, {other: np.ones(4, np.float32)})
    with pytest.raises(ValueError, match="the gradient has shape"):
        with g.as_default():
            ConditionalAccumulator(rg.float32, shape=[3], shared_name="x").apply_grad([1.0, 2.0])


def test_a_shared_name_with_another_signature_is_refused():
    g = rg.Graph()
    with g.as_default():
        a = ConditionalAccumulator(rg.float32, shape=[3], shared_name="same")
        b = ConditionalAccumulator(rg.float64, shape=[3], shared_name="same")
    with Session(graph=g) as sess:
        sess.run(a.accumulator_ref)
        with pytest.raises(InvalidArgumentError, match="already exists"):
            sess.run(b.accumulator_ref)


def test_sparse_accumulator_averages_per_row():
    g = rg.Graph()
    with g.as_default():
        acc = SparseConditionalAccumulator(rg.float32, shape=[6, 2], shared_name="emb")
        idx = rg.placeholder(rg.int64, [None])
        vals = rg.placeholder(rg.float32, [None, 2])
        ls = rg.placeholder(rg.int64, [])
        apply = acc.apply_grad(idx, vals, [6, 2], local_step=ls)
        take = acc.take_grad(2)
        num = acc.num_accumulated()
    with Session(graph=g) as sess:
        # Row 3 twice in one gradient: summed, counted once for that gradient.
        sess.run(apply, {idx: [3, 1, 3], vals: [[1, 1], [2, 2], [3, 3]], ls: 0})
        sess.run(apply, {idx: [5, 3], vals: [[4, 4], [6, 6]], ls: 0})
        assert sess.run(num) == 2
        i, v, s = sess.run(take)
        np.testing.assert_array_equal(i, [1, 3, 5])
        np.testing.assert_allclose(v, [[2, 2], [5, 5], [4, 4]])  # row 3: (1+3+6)/2
        np.testing.assert_array_equal(s, [6, 2])
        sess.run(apply, {idx: [0], vals: [[1, 1]], ls: 0})  # stale now
        assert sess.run(num) == 0
        with pytest.raises(InvalidArgumentError, match="index 7 is out of range"):
            sess.run(apply, {idx: [7], vals: [[1, 1]], ls: 1})
        with pytest.raises(InvalidArgumentError, match="2 indices but values"):
            sess.run(apply, {idx: [1, 2], vals: [[1, 1]], ls: 1})


def test_sparse_sum_reduction():
    g = rg.Graph()
    with g.as_default():
        acc = SparseConditionalAccumulator(
            rg.float64, shape=[None, 1], shared_name="s", reduction_type="SUM"
        )
        a = acc.apply_grad([2, 0], [[1.0], [2.0]], local_step=0)
        b = acc.apply_grad([2], [[5.0]], local_step=0)
        take = acc.take_grad(2)
    with Session(graph=g) as sess:
        sess.run([a])
        sess.run([b])
        i, v, s = sess.run(take)
    np.testing.assert_array_equal(i, [0, 2])
    np.testing.assert_allclose(v, [[2.0], [6.0]])
    assert list(s) == [-1, 1]
