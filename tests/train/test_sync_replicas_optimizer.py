"""SyncReplicasOptimizer in one process: replicas are threads sharing one Session, each with its
own train op built by its own optimizer (the accumulators and the token queue are shared by name,
as between-graph replicas share them on the PS)."""

import logging
import re
import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import DeadlineExceededError, OutOfRangeError
from rill.train import GradientDescentOptimizer
from rill.train.sync_replicas_optimizer import SyncReplicasOptimizer
from rill.train.training_util import get_or_create_global_step


def _build(n_replicas, to_aggregate, coeffs, timeout=30.0, lr=0.1):
    g = rg.Graph()
    with g.as_default():
        step = get_or_create_global_step()
        w = rg.Variable(np.zeros(2, np.float32), name="w")
        opts, trains = [], []
        for i in range(n_replicas):
            loss = rg.reduce_sum(w * rg.constant(coeffs[i], rg.float32))
            opt = SyncReplicasOptimizer(
                GradientDescentOptimizer(lr),
                replicas_to_aggregate=to_aggregate,
                total_num_replicas=n_replicas,
                replica_id=i,
                barrier_timeout_secs=timeout,
            )
            trains.append(opt.minimize(loss, global_step=step))
            opts.append(opt)
        hooks = [o.make_session_run_hook(is_chief=(i == 0)) for i, o in enumerate(opts)]
        init = [rg.global_variables_initializer(), rg.local_variables_initializer()]
    return g, step, w, opts, trains, hooks, init


def _start(g, hooks, init):
    sess = Session(graph=g)
    sess.run(init)
    for h in hooks:
        h.begin()
    # The chief first (it sets the accumulators' step and hands out the first tokens).
    for h in hooks:
        h.after_create_session(sess, None)
    return sess


def _replica_loop(sess, train, step, last_step, errors, delay=0.0):
    try:
        while sess.run(step) < last_step:
            if delay:
                time.sleep(delay)
            sess.run(train)
    except OutOfRangeError:
        pass  # the chief closed the barrier: training is over
    except Exception as e:  # noqa: BLE001 - recorded for the assertion
        errors.append(e)


def test_two_of_two_applies_the_mean_gradient_once_per_global_step():
    # Both replicas have the same gradient, so every update moves w by -lr * c however many
    # gradients each one averaged.
    coeffs = [np.array([1.0, 2.0]), np.array([1.0, 2.0])]
    g, step, w, opts, trains, hooks, init = _build(2, 2, coeffs)
    sess = _start(g, hooks, init)
    errors = []
    threads = [
        threading.Thread(target=_replica_loop, args=(sess, t, step, 5, errors)) for t in trains
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    hooks[0].end(sess)
    assert not errors, errors
    k = int(sess.run(step))
    assert k >= 5
    stats = opts[0].stats
    assert stats.steps == k
    # One update per global step, each of exactly one gradient from each replica (a token queue
    # per replica: a fast replica cannot stand in for the other, as it can in TensorFlow).
    assert [s for s, _ in stats.history] == list(range(1, k + 1))
    assert all(list(c) == [1, 1, 0] for _, c in stats.history), stats.history
    np.testing.assert_allclose(sess.run(w), -0.1 * k * coeffs[0], rtol=1e-5)
    sess.close()


def test_backup_worker_gradients_are_dropped_and_counted(caplog):
    coeffs = [np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0, 1.0])]
    g, step, w, opts, trains, hooks, init = _build(3, 2, coeffs)
    sess = _start(g, hooks, init)
    errors = []
    pushed_at = []  # the global step right after the straggler's gradient went in

    def straggler():
        # Replica 2 computes its gradient at local step 0 but pushes it only once the others
        # have moved the global step on: it is stale and must be dropped. Ordered by the global
        # step, not by sleeping, so a fast machine cannot finish before the straggler pushes.
        try:
            deadline = time.monotonic() + 30
            while sess.run(step) < 2:
                assert time.monotonic() < deadline, "the fast replicas made no progress"
                time.sleep(0.002)
            sess.run(trains[2])
            pushed_at.append(int(sess.run(step)))
        except OutOfRangeError:
            errors.append("the chief closed the barrier before the straggler pushed")
        except Exception as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    def fast(train):
        # At least 12 steps, and at least one update after the straggler's push (the update
        # that counts its dropped gradient).
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                s = int(sess.run(step))
                if s >= 12 and pushed_at and s > pushed_at[0]:
                    return
                sess.run(train)
            errors.append("replica ran out of time")
        except OutOfRangeError:
            pass  # the other fast replica finished and the chief closed the barrier
        except Exception as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    threads = [threading.Thread(target=fast, args=(t,)) for t in trains[:2]]
    threads.append(threading.Thread(target=straggler))
    with caplog.at_level(logging.INFO, logger="rill.train.sync_replicas"):
        for t in threads:
            t.start()
        threads[2].join(60)
        # Once one fast replica is done, the other may be waiting for an update that needs a
        # second fresh gradient: the chief's end releases it (OutOfRangeError, the normal end).
        deadline = time.monotonic() + 60
        while all(t.is_alive() for t in threads[:2]) and time.monotonic() < deadline:
            threads[0].join(0.05)
        hooks[0].end(sess)
        threads[0].join(30)
        threads[1].join(30)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    stats = opts[0].stats
    k = int(sess.run(step))
    assert stats.steps == k >= 12
    # Every update aggregated at least replicas_to_aggregate fresh gradients.
    assert all(c.sum() >= 2 for _, c in stats.history)
    assert stats.dropped >= 1
    assert stats.contributions[2] == 0 < stats.contributions[0]
    lines = [r.getMessage() for r in caplog.records if "contributed" in r.getMessage()]
    assert len(lines) == k
    # At least the straggler's gradient; under load a fast replica's can go stale too.
    assert any(re.search(r"\b[1-9]\d* stale gradient\(s\) dropped", line) for line in lines)
    sess.close()


def test_without_the_chief_hook_a_replica_fails_at_the_barrier_deadline():
    g, step, w, opts, trains, hooks, init = _build(2, 2, [np.ones(2)] * 2, timeout=0.3)
    with Session(graph=g) as sess:
        sess.run(init)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceededError, match="sync_token_q"):
            sess.run(trains[1])
        assert time.monotonic() - t0 < 10


def test_a_token_queue_closed_under_a_waiting_replica_ends_it():
    g, step, w, opts, trains, hooks, init = _build(2, 2, [np.ones(2)] * 2)
    with g.as_default():
        hooks[0] = opts[0].make_session_run_hook(is_chief=True, num_tokens=0)  # no first tokens
    sess = _start(g, hooks, init)
    result = []

    def wait_for_token():
        try:
            sess.run(trains[1])  # one gradient in; then it waits for a token that never comes
        except Exception as e:  # noqa: BLE001
            result.append(e)

    t = threading.Thread(target=wait_for_token)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    hooks[0].end(sess)
    t.join(10)
    assert not t.is_alive()
    assert result and isinstance(result[0], OutOfRangeError)
    sess.close()


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match="replicas_to_aggregate \\(3\\) > total_num_replicas"):
        SyncReplicasOptimizer(GradientDescentOptimizer(0.1), 3, 2)
    with pytest.raises(ValueError, match=">= 1"):
        SyncReplicasOptimizer(GradientDescentOptimizer(0.1), 0, 2)
    with pytest.raises(ValueError, match="replica_id 5"):
        SyncReplicasOptimizer(GradientDescentOptimizer(0.1), 1, 2, replica_id=5)
    opt = SyncReplicasOptimizer(GradientDescentOptimizer(0.1), 1, 2)
    with pytest.raises(ValueError, match="apply_gradients should be called"):
        opt.make_session_run_hook(True).begin()
    with rg.Graph().as_default():
        w = rg.Variable([1.0])
        with pytest.raises(ValueError, match="global_step"):
            opt.apply_gradients([(rg.constant([1.0]), w)])
        with pytest.raises(ValueError, match="too few tokens"):
            o = SyncReplicasOptimizer(GradientDescentOptimizer(0.1), 1, 3)
            o.minimize(rg.reduce_sum(w), global_step=get_or_create_global_step())
            o.get_init_tokens_op(num_tokens=-5)


def test_dense_gradients_bound_for_one_task_travel_as_one_tensor():
    from rill.exec.proto import config_pb2
    from rill.train.sync_replicas_support import _packed

    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:0"):
            a = rg.Variable(np.zeros((2, 3), np.float32), name="a")
            b = rg.Variable(np.zeros(4, np.float32), name="b")
        with g.device("/job:ps/task:1"):
            c = rg.Variable(np.zeros(2, np.float32), name="c")
        d = rg.Variable(np.zeros(2, np.float32), name="d")  # no task: nothing to pack
        with g.device("/job:worker/task:0"):
            grads = [
                rg.constant(np.arange(6, dtype=np.float32).reshape(2, 3)),
                rg.constant(np.arange(4, dtype=np.float32) + 10),
                rg.constant(np.array([7.0, 8.0], np.float32)),
                rg.constant(np.array([5.0, 6.0], np.float32)),
            ]
        pairs = list(zip(grads, [a, b, c, d]))
        out = _packed(g, pairs + [(None, d)])
    # a and b (both on ps:0) are joined on the worker and split beside a; c (alone on ps:1), d
    # (no task) and the missing gradient are left as they were.
    assert out[2:] == pairs[2:] + [(None, d)]
    assert [v for _, v in out[:2]] == [a, b]
    for packed, _ in out[:2]:
        assert packed.op.type == "Reshape" and packed.op.colocation_groups() == ["a"]
        split_op = packed.op.inputs[0].op
        assert split_op.type == "SplitV"
        assert split_op.inputs[0].op.type == "ConcatV2"
        assert split_op.inputs[0].op.device == "/job:worker/task:0"
    config = config_pb2.ConfigProto(allow_soft_placement=True)
    with Session(graph=g, config=config) as sess:
        got = sess.run([t for t, _ in out[:2]])
        want = sess.run(grads[:2])
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_update_reports_come_in_global_step_order():
    from rill.train.sync_replicas_support import _HELD_MAX, _InOrder

    got = []

    def report(step, out):
        got.append(step)

    r = _InOrder(last=4)
    r.put(6, {}, report)  # two updates in flight: 6 came back before 5
    assert got == []
    r.put(5, {}, report)
    assert got == [5, 6]
    r.put(8, {}, report)
    r.put(9, {}, report)  # one loop finished two updates while the other still holds 7
    assert got == [5, 6]
    r.put(7, {}, report)
    assert got == [5, 6, 7, 8, 9]
    r.put(11, {}, report)  # 10 never comes (its loop failed): given up when flushed
    r.wait_for(10, alive=lambda: False)  # nothing alive to report 10: no wait
    r.flush(report)
    assert got == [5, 6, 7, 8, 9, 11]
    r.put(10, {}, report)  # late: reported at once
    assert got == [5, 6, 7, 8, 9, 11, 10]
    for step in range(13, 13 + _HELD_MAX):  # a gap at 12 that nothing fills: given up
        r.put(step, {}, report)
    assert got[7:] == list(range(13, 13 + _HELD_MAX))
