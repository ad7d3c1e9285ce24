"""MonitoredSession / MonitoredTrainingSession: init or restore, stopping, checkpoints, restart,
recovery, and closing."""

import glob
import os
from pathlib import Path

import numpy as np
import pytest

import rill.graph as rg
from rill.graph.errors import AbortedError, DeadlineExceededError, OutOfRangeError
from rill.train import checkpoint_management as cm
from rill.train.hooks import SessionRunArgs, SessionRunHook, StopAtStepHook
from rill.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from rill.train.saver import Saver
from rill.train.training_util import get_or_create_global_step


def _model():
    """A global step, a variable w, and a "train op" adding 1 to both (no optimizer needed)."""
    step = get_or_create_global_step()
    w = rg.Variable(np.zeros(2, np.float32), name="w")
    train = rg.group(step.assign_add(1), w.assign_add([1.0, 1.0]), name="train")
    return step, w, train


def _steps(directory) -> list[int]:
    return sorted(
        int(p.rsplit("-", 1)[1].split(".")[0])
        for p in glob.glob(os.path.join(directory, "*.index"))
    )


def test_stops_at_last_step(graph):
    step, w, train = _model()
    runs = 0
    with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=7)]) as sess:
        assert graph.finalized
        while not sess.should_stop():
            sess.run(train)
            runs += 1
        with pytest.raises(RuntimeError, match="should_stop"):
            sess.run(train)
        assert sess.run_step_fn(lambda ctx: ctx.session.run(step)) == 7
    assert runs == 7 and sess.should_stop()
    assert not graph.finalized  # un-finalized again, as it was before
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(train)


def test_num_steps_counts_from_the_start(graph):
    step, w, train = _model()
    scaffold = Scaffold(init_fn=lambda scaffold, sess: step.load(10, sess))
    with MonitoredTrainingSession(scaffold=scaffold, hooks=[StopAtStepHook(num_steps=3)]) as s:
        values = []
        while not s.should_stop():
            s.run(train)
            values.append(int(s.run_step_fn(lambda ctx: ctx.session.run(step))))
    assert values == [11, 12, 13]


def test_checkpoints_every_n_steps_and_at_the_end(graph, tmp_path):
    step, w, train = _model()
    d = str(tmp_path / "ckpt")
    hooks = [StopAtStepHook(last_step=10)]
    with MonitoredTrainingSession(checkpoint_dir=d, save_checkpoint_steps=3, hooks=hooks) as s:
        while not s.should_stop():
            s.run(train)
    # At session creation (step 0), every 3 steps, and at the end (step 10).
    assert _steps(d) == [0, 3, 6, 9, 10]
    assert cm.latest_checkpoint(d) == os.path.join(d, "model.ckpt-10")
    with rg.Graph().as_default() as imported:
        rg.import_graph_def(Path(d, "graph.pb").read_bytes(), name="")
    assert imported.get_operation_by_name("save/restore_all").type == "NoOp"
    values = cm.load_variable(d, "w")
    np.testing.assert_array_equal(values, [10.0, 10.0])


def test_a_second_session_continues_from_the_saved_step(tmp_path):
    d = str(tmp_path / "ckpt")

    def train(num_steps):
        with rg.Graph().as_default():
            step, w, train_op = _model()
            with MonitoredTrainingSession(
                checkpoint_dir=d, save_checkpoint_steps=3, hooks=[StopAtStepHook(num_steps)]
            ) as s:
                first = s.run_step_fn(lambda ctx: ctx.session.run([step, w]))
                while not s.should_stop():
                    s.run(train_op)
                last = s.run_step_fn(lambda ctx: ctx.session.run([step, w]))
        return first, last

    (s0, w0), (s1, w1) = train(10)
    assert (s0, s1) == (0, 10) and list(w1) == [10.0, 10.0]
    index_10 = Path(d, "model.ckpt-10.index").read_bytes()
    (s2, w2), (s3, w3) = train(5)
    # The checkpoint the second session started from is not rewritten in place.
    assert Path(d, "model.ckpt-10.index").read_bytes() == index_10
    assert s2 == 10 and list(w2) == [10.0, 10.0]  # restored, not re-initialized
    assert s3 == 15 and list(w3) == [15.0, 15.0]
    # The restarted Saver took over the directory's bookkeeping: it went on deleting the
    # oldest checkpoints (max_to_keep=5) that the first session wrote.
    assert _steps(d) == [6, 9, 10, 13, 15]


def test_default_checkpoint_schedule_is_every_600_secs(graph, tmp_path):
    step, w, train = _model()
    d = str(tmp_path)
    with MonitoredTrainingSession(checkpoint_dir=d, hooks=[StopAtStepHook(last_step=4)]) as s:
        while not s.should_stop():
            s.run(train)
    assert _steps(d) == [0, 4]  # at the start and at the end, none in between


def test_scaffold_init_feed_dict_and_init_fn(graph):
    x = rg.placeholder_with_default(np.float32(0.0), [], name="x")
    v = rg.Variable(x, name="v")
    calls = []
    scaffold = Scaffold(
        init_op=v.initializer,
        init_feed_dict={x: np.float32(4.0)},
        init_fn=lambda scaffold, sess: calls.append(sess.run(v)),
    )
    with SingularMonitoredSession(scaffold=scaffold) as s:
        assert s.run(v) == 4.0 and s.raw_session().run(v) == 4.0
    assert calls == [4.0]


def test_a_model_left_uninitialized_is_an_error(graph):
    rg.Variable([1.0], name="never_initialized")
    with pytest.raises(RuntimeError, match=r"did not make model ready.*never_initialized"):
        MonitoredSession(ChiefSessionCreator(Scaffold(init_op=rg.no_op())))
    assert not graph.finalized  # a failed start leaves the graph as it found it


def test_restore_from_a_given_checkpoint_file(tmp_path):
    with rg.Graph().as_default():
        step, w, train = _model()
        saver = Saver()
        with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=2)]) as s:
            while not s.should_stop():
                s.run(train)
            path = s.run_step_fn(lambda ctx: saver.save(ctx.session, str(tmp_path / "m")))
    with rg.Graph().as_default():
        step, w, train = _model()
        with SingularMonitoredSession(checkpoint_filename_with_path=path) as s:
            assert s.run(step) == 2


def test_end_of_input_closes_normally(graph):
    step, w, train = _model()
    ends = []

    class End(SessionRunHook):
        def end(self, session):
            ends.append(session.run(step))

    with MonitoredTrainingSession(hooks=[End()]) as s:
        s.run(train)
        raise OutOfRangeError("end of the input")
    assert ends == [1]
    with pytest.raises(ValueError, match="boom"):
        with MonitoredTrainingSession(hooks=[End()]) as s:
            raise ValueError("boom")
    assert ends == [1]  # end() is not called after an error


def test_recovers_from_aborted_by_restoring_the_latest_checkpoint(tmp_path):
    g = rg.Graph()
    with g.as_default():
        step, w, train = _model()
    created = []

    class FailOnce(SessionRunHook):
        failed = False

        def after_create_session(self, session, coord):
            created.append(int(session.run(step)))

        def before_run(self, run_context):
            if not self.failed and int(run_context.session.run(step)) == 5:
                self.failed = True
                raise AbortedError("the parameter server restarted")

    d = str(tmp_path)
    hooks = [StopAtStepHook(last_step=8), FailOnce()]
    with g.as_default():
        session = MonitoredTrainingSession(checkpoint_dir=d, save_checkpoint_steps=3, hooks=hooks)
    # Running (and re-creating the session) outside the graph's `as_default` block.
    with session as s:
        while not s.should_stop():
            s.run(train)
        final = s.run_step_fn(lambda ctx: ctx.session.run([step, w]))
    # Steps 4 and 5 were lost with the old session; training resumed from the checkpoint at 3.
    assert created == [0, 3]
    assert final[0] == 8 and list(final[1]) == [8.0, 8.0]


def test_singular_session_does_not_recover(graph):
    step, w, train = _model()

    class Fail(SessionRunHook):
        def before_run(self, run_context):
            raise AbortedError("aborted")

    with pytest.raises(AbortedError):
        with SingularMonitoredSession(hooks=[Fail()]) as s:
            s.run(train)


def test_worker_waits_for_the_chief_then_gives_up(graph):
    _model()
    creator = WorkerSessionCreator(max_wait_secs=0.2, recovery_wait_secs=0.05)
    with pytest.raises(DeadlineExceededError, match="not ready after waiting.*global_step"):
        MonitoredSession(creator)


def test_hooks_feed_and_conflicts(graph):
    x = rg.placeholder(rg.float32, [], name="x")
    y = x * 2.0

    class Feeder(SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs(fetches=None, feed_dict={x: 3.0})

    with SingularMonitoredSession(hooks=[Feeder()]) as s:
        assert s.run(y) == 6.0
        with pytest.raises(RuntimeError, match="fed by a SessionRunHook and user"):
            s.run(y, feed_dict={x: 1.0})
    with SingularMonitoredSession(hooks=[Feeder(), Feeder()]) as s:
        with pytest.raises(RuntimeError, match="fed by two hooks"):
            s.run(y)


def test_a_master_url_goes_through_execs_session_targets(graph):
    # grpc:// reaches rill.distributed (tests/distributed/test_rendezvous.py runs one); a
    # scheme no package serves is a clear error naming it.
    from rill.graph.errors import InvalidArgumentError

    _model()
    with pytest.raises(InvalidArgumentError, match="nosuch"):
        MonitoredTrainingSession(master="nosuch://localhost:2222")


def test_chief_only_hooks_run_only_on_the_chief(graph):
    step, w, train = _model()
    seen = []

    class Mark(SessionRunHook):
        def __init__(self, tag):
            self.tag = tag

        def begin(self):
            seen.append(self.tag)

    with MonitoredTrainingSession(hooks=[Mark("all")], chief_only_hooks=[Mark("chief")]):
        pass
    assert seen == ["chief", "all"]
