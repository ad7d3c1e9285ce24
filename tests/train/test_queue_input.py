"""Queue-based input (producers, batch/shuffle_batch/batch_join), QueueRunner, Coordinator,
start_queue_runners and Supervisor: every run ends in bounded time with no thread left."""

import threading
import time

import numpy as np
import pytest

import rill.graph as rg
from rill import train
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError, OutOfRangeError
from rill.train import input as tin
from rill.train.coordinator import Coordinator
from rill.train.queue_runner import QueueRunner, start_queue_runners
from rill.train.supervisor import Supervisor


def _drain(sess, fetch, coord, threads, limit=1000):
    out = []
    try:
        for _ in range(limit):
            out.append(sess.run(fetch))
    except OutOfRangeError:
        pass
    finally:
        coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    assert not any(t.is_alive() for t in threads)
    return out


def _session():
    s = Session()
    s.run([rg.global_variables_initializer(), rg.local_variables_initializer()])
    return s


def test_slice_input_producer_and_batch_cover_every_example_per_epoch():
    with rg.Graph().as_default():
        x = np.arange(10, dtype=np.float32)
        y = np.arange(10, dtype=np.int64) * 10
        xs, ys = tin.slice_input_producer([x, y], num_epochs=3, seed=4)
        batch = tin.batch({"x": xs, "y": ys}, 4, allow_smaller_final_batch=True)
        assert batch["x"].shape.as_list() == [None] and batch["y"].dtype is rg.int64
        s = _session()
        coord = Coordinator()
        threads = start_queue_runners(s, coord)
        got = _drain(s, batch, coord, threads)
    xs_all = np.concatenate([b["x"] for b in got])
    ys_all = np.concatenate([b["y"] for b in got])
    assert len(xs_all) == 30
    np.testing.assert_array_equal(ys_all, xs_all * 10)  # rows stay paired
    np.testing.assert_array_equal(np.sort(xs_all), np.repeat(x, 3))
    assert not np.array_equal(xs_all[:10], x)  # shuffled


def test_string_and_range_producers_and_shuffle_batch():
    with rg.Graph().as_default():
        names = tin.string_input_producer(["a.txt", "b.txt", "c.txt"], num_epochs=2, shuffle=False)
        name = names.dequeue()
        r = tin.range_input_producer(5, num_epochs=1, shuffle=False).dequeue()
        sb = tin.shuffle_batch([r], 2, capacity=10, min_after_dequeue=2, seed=1,
                               allow_smaller_final_batch=True)  # fmt: skip
        s = _session()
        coord = Coordinator()
        threads = start_queue_runners(s, coord)
        got = [s.run(name) for _ in range(6)]
        assert [np.asarray(g).item().decode() for g in got] == ["a.txt", "b.txt", "c.txt"] * 2
        with pytest.raises(OutOfRangeError):
            s.run(name)
        vals = _drain(s, sb, coord, threads)
    assert sorted(np.concatenate([v[0] for v in vals]).tolist()) == [0, 1, 2, 3, 4]


def test_batch_join_reads_every_list():
    with rg.Graph().as_default():
        a = tin.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
        b = tin.range_input_producer(4, num_epochs=1, shuffle=False).dequeue() + 100
        out = tin.batch_join([[a], [b]], 3, allow_smaller_final_batch=True)
        s = _session()
        coord = Coordinator()
        vals = _drain(s, out, coord, start_queue_runners(s, coord))
    flat = sorted(np.concatenate([v[0] for v in vals]).tolist())
    assert flat == [0, 1, 2, 3, 100, 101, 102, 103]


def test_an_error_in_a_runner_reaches_join_and_a_stop_unblocks_full_queues():
    with rg.Graph().as_default():
        x = rg.placeholder_with_default(rg.constant([1.0]), [1])
        q = rg.FIFOQueue(2, [rg.float32], shapes=[[1]])
        bad = rg.assert_op(rg.constant(False), ["input broke"])
        with rg.control_dependencies([bad]):
            failing = q.enqueue([rg.identity(x)])
        qr = QueueRunner(q, [q.enqueue([x]), failing])
        s = Session()
        coord = Coordinator()
        threads = qr.create_threads(s, coord, start=True)
        with pytest.raises(InvalidArgumentError, match="input broke"):
            coord.join(threads, stop_grace_period_secs=10)
        assert not any(t.is_alive() for t in threads)  # the full-queue enqueue was cancelled


def test_coordinator_join_is_bounded_and_names_live_threads():
    coord = Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, args=(5,), name="stuck-reader", daemon=True)
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="stuck-reader"):
        coord.join([t], stop_grace_period_secs=0.1)
    release.set()
    t.join()
    coord.clear_stop()
    assert not coord.should_stop()
    with pytest.raises(ValueError, match="no default session"):
        start_queue_runners()


def test_supervisor_restores_from_logdir_and_writes_summaries(tmp_path):
    def build():
        step = train.get_or_create_global_step()
        w = rg.Variable(0.0, name="w")
        x = tin.range_input_producer(100, shuffle=False).dequeue()
        train_op = rg.group(w.assign_add(rg.cast(x, rg.float32)), step.assign_add(1))
        train.summary.scalar("w", w)
        return step, w, train_op

    with rg.Graph().as_default():
        step, w, train_op = build()
        sv = Supervisor(logdir=tmp_path, save_model_secs=0, save_summaries_secs=3600)
        with sv.managed_session() as sess:
            for _ in range(5):
                sess.run(train_op)
            assert float(sess.run(w)) == 0 + 1 + 2 + 3 + 4
            sv.saver.save(sess, sv.save_path, global_step=step)
            sv.summary_computed(sess, sess.run(sv.summary_op))
        assert sv.should_stop()
    with rg.Graph().as_default():
        step, w, train_op = build()
        sv = Supervisor(logdir=tmp_path, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session() as sess:
            assert int(sess.run(step)) == 5 and float(sess.run(w)) == 10.0
            raise OutOfRangeError("end of input")  # a clean stop, swallowed
    files = list(tmp_path.glob("events.out.tfevents.*"))
    assert files
    # The checkpoint service saves at once, then every save_model_secs.
    other = tmp_path / "other"
    with rg.Graph().as_default():
        build()
        sv = Supervisor(logdir=other, save_model_secs=3600, save_summaries_secs=0)
        with sv.managed_session():
            for _ in range(200):
                if train.latest_checkpoint(other):
                    break
                time.sleep(0.05)
        assert train.latest_checkpoint(other).endswith("model.ckpt-0")
    with rg.Graph().as_default():
        build()
        sv = Supervisor(logdir=None)
        with pytest.raises(ZeroDivisionError), sv.managed_session():
            raise ZeroDivisionError("user error")


def test_monitored_training_session_starts_and_stops_queue_runners():
    with rg.Graph().as_default():
        x = tin.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
        total = rg.Variable(0, name="total")
        train_op = total.assign_add(x)
        seen = []

        class Hook(train.SessionRunHook):
            def after_create_session(self, session, coord):
                seen.append(coord)

        with train.MonitoredTrainingSession(hooks=[Hook()]) as sess:
            while not sess.should_stop():
                last = sess.run(train_op)
        assert int(last) == 15 and isinstance(seen[0], Coordinator)
        assert seen[0].should_stop() and seen[0].joined
