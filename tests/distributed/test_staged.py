"""Staged steps (rill.distributed.staged), in process (each task its own gRPC server on loopback):
a step on the master's task and other rill tasks runs as a chain of RunGraph calls whose
requests and responses carry every value that crosses — no pulls — and gives what the concurrent
form gives; what cannot be cut runs as before."""

from __future__ import annotations

import time

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.distributed import Server, staged
from rill.distributed.worker import Worker
from rill.exec import Session
from rill.exec.proto import config_pb2
from rill.graph import errors

from ._core_tasks import free_ports

PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"


@pytest.fixture
def pulls(monkeypatch):
    """Counts the pulls (RecvTensor, RecvTensors) every task of the test serves."""
    seen = []
    one, many = Worker.RecvTensor, Worker.RecvTensors

    def recv_tensor(self, req, context):
        seen.append(req.rendezvous_key)
        return one(self, req, context)

    def recv_tensors(self, req, context):
        seen.extend(req.rendezvous_key)
        yield from many(self, req, context)

    monkeypatch.setattr(Worker, "RecvTensor", recv_tensor)
    monkeypatch.setattr(Worker, "RecvTensors", recv_tensors)
    return seen


def _tasks(n_workers: int = 1):
    ports = free_ports(1 + n_workers)
    spec = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
    return [Server(spec, "ps", 0)] + [Server(spec, "worker", i) for i in range(n_workers)]


def _ps_tasks(n_ps: int):
    """`n_ps` PS tasks and one worker (last)."""
    ports = free_ports(n_ps + 1)
    spec = {"ps": [f"localhost:{p}" for p in ports[:-1]], "worker": [f"localhost:{ports[-1]}"]}
    return [Server(spec, "ps", i) for i in range(n_ps)] + [Server(spec, "worker", 0)]


def _no_step_left(tasks, timeout: float = 60.0) -> None:
    """Waits until no task holds a step: a failed step stays on a task until the master's
    CleanupGraph, which the master sends without waiting for it."""
    deadline = time.monotonic() + timeout
    while any(t._worker._steps for t in tasks):
        assert time.monotonic() < deadline, [list(t._worker._steps) for t in tasks]
        time.sleep(0.01)


def _plans(server):
    return [p for s in server._master.sessions.values() for p in s.plans.values()]


def _mlp(device_fn=None):
    """A small MLP: variables (and Adagrad's slots) on the PS, the rest on the worker."""
    g = rg.Graph()
    with g.as_default(), g.device(device_fn or _ps_or_worker):
        g.seed = 7
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        y = rg.placeholder(rg.float32, [None, 3], name="y")
        w1 = rg.Variable(rg.random_uniform([6, 5], -0.5, 0.5), name="w1")
        b1 = rg.Variable(rg.zeros([5]), name="b1")
        w2 = rg.Variable(rg.random_uniform([5, 3], -0.5, 0.5), name="w2")
        h = rg.relu(rg.matmul(x, w1) + b1)
        loss = rg.reduce_mean(
            rg.softmax_cross_entropy_with_logits(labels=y, logits=rg.matmul(h, w2))
        )
        train = rt.AdagradOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, y, loss, train, init, [w1, b1, w2]


def _ps_or_worker(op):
    return PS if op.type in ("VariableV2", "VarHandleOp") else WORKER


def _batch():
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((8, 6)).astype(np.float32)
    yv = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    return xv, yv


def test_a_training_step_runs_staged_without_pulls_and_equals_a_local_session(pulls):
    xv, yv = _batch()
    g, x, y, loss, train, init, vs = _mlp()
    with Session(graph=g, config=config_pb2.ConfigProto(allow_soft_placement=True)) as local:
        local.run(init)
        for _ in range(3):
            local.run(train, {x: xv, y: yv})
        want = local.run(vs + [loss], {x: xv, y: yv})
    ps, worker = _tasks()
    with ps, worker:
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            del pulls[:]
            for _ in range(3):
                sess.run(train, {x: xv, y: yv})
            got = sess.run(vs + [loss], {x: xv, y: yv})
            plan = next(p for p in _plans(worker) if p.targets == (train.name,))
            # A: the PS reads, M1: the worker computes, B: the PS applies. The train op's wait
            # for B (a stage M2 of NoOps) is dropped: B's call returns when B has run, so B
            # sends no acknowledgement back.
            assert [(st.job, st.local) for st in plan.stages] == [
                ("ps", False), ("worker", True), ("ps", False)]  # fmt: skip
            assert all(st.needs or st.makes for st in plan.stages)
            assert plan.stages[-1].makes == [] and not plan.stages[-1].more
            assert not any(nd.op == "_Send" for nd in plan.stages[-1].graph_def.node)
    assert pulls == []  # every value crossed in a request or a response
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert not ps._worker._steps and not worker._worker._steps  # no step left behind


def test_feeds_and_fetches_on_both_tasks_of_a_staged_step():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            v = rg.Variable(rg.constant([1.0, 2.0]), name="v")
            scale = rg.placeholder(rg.float32, [], name="scale")
            read = v * scale  # stage A: the PS's feed
        with g.device(WORKER):
            shift = rg.placeholder(rg.float32, [2], name="shift")
            delta = read + shift  # stage M1
        with g.device(PS):
            updated = rg.assign_add(v, delta)  # stage B
            after = rg.identity(updated) * 10.0
        with g.device(WORKER):
            last = after + 1.0  # stage M2
        init = rg.global_variables_initializer()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        got = sess.run([read, delta, after, last], {scale: 3.0, shift: [0.5, 0.25]})
        plan = next(p for p in _plans(worker) if p.fetches and p.stages)
        assert len(plan.stages) == 4
        np.testing.assert_allclose(got[0], [3.0, 6.0])
        np.testing.assert_allclose(got[1], [3.5, 6.25])
        np.testing.assert_allclose(got[2], [45.0, 82.5])
        np.testing.assert_allclose(got[3], [46.0, 83.5])
        np.testing.assert_allclose(sess.run(v), [4.5, 8.25])


def test_a_small_constant_of_the_master_is_copied_into_the_stage_that_takes_it(pulls):
    big = np.full(600, 0.001, np.float32)  # 2400 bytes: still sent
    g = rg.Graph()
    with g.as_default():
        with g.device(WORKER):
            rate = rg.constant(0.5, name="rate")
            only_ps = rg.constant([2.0, 3.0], name="only_ps")
            large = rg.constant(big, name="large")
            x = rg.placeholder(rg.float32, [2], name="x")
        with g.device(PS):
            v = rg.Variable(rg.constant([1.0, 2.0]), name="v")
            read = v * only_ps  # stage A
        with g.device(WORKER):
            delta = read * rate + x  # M1: the worker reads `rate` too
        with g.device(PS):
            step = rg.assign_sub(v, delta * rate + rg.reduce_sum(large * delta[0]))  # B
        init = rg.global_variables_initializer()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        del pulls[:]
        got = sess.run([step, delta], {x: [1.0, -1.0]})
        plan = next(p for p in _plans(worker) if p.fetches and p.stages)
        a, m1, b = plan.stages
        assert (a.job, m1.job, b.job) == ("ps", "worker", "ps")

        def consts(st):  # the sources of a stage's constants (a copy keeps its _Recv's name)
            return {nd.name.split("/")[0] for nd in st.graph_def.node if nd.op == "Const"}

        assert "only_ps" in consts(a) and a.needs == []  # a copy: nothing sent for stage A
        assert "rate" in consts(b) and "large" not in consts(b)
        assert len(b.needs) == 2  # delta and `large`; not `rate`
        assert "rate" in consts(m1) and "only_ps" not in consts(m1)  # the worker keeps its own
        want_delta = np.array([1.0, 3.0], np.float32) + np.array([1.0, -1.0], np.float32)
        np.testing.assert_allclose(got[1], want_delta)
        want_v = np.array([1.0, 2.0]) - (want_delta * 0.5 + 600 * 0.001 * want_delta[0])
        np.testing.assert_allclose(got[0], want_v, rtol=1e-5)
    assert pulls == []


def test_what_cannot_be_cut_runs_unstaged():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            p = rg.placeholder(rg.bool_, [], name="p")
            a = rg.Variable(rg.constant(2.0), name="a")
        with g.device(WORKER):
            # A cond whose branches live on different tasks: dead values cross.
            out = rg.cond(p, lambda: a * 3.0, lambda: a + 1.0)
            plain = a * 5.0
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(a.initializer)
        assert float(sess.run(out, {p: True})) == 6.0
        assert float(sess.run(out, {p: False})) == 3.0
        assert float(sess.run(plain)) == 10.0
        by_fetch = {pl.fetches: pl for pl in _plans(worker)}
        assert by_fetch[(out.name,)].stages is None  # control flow
        assert by_fetch[(plain.name,)].stages is not None


def test_a_task_that_is_not_rill_s_is_never_staged(monkeypatch):
    # A TensorFlow worker pulls the values its partition needs: it is called as before.
    real = Worker.device_attributes

    def tensorflow_like(self, devices=None):
        out = real(self, devices)
        if self.job == "ps":
            for da in out:
                da.physical_device_desc = "device: 0, name: CPU"
        return out

    monkeypatch.setattr(Worker, "device_attributes", tensorflow_like)
    xv, yv = _batch()
    g, x, y, loss, train, init, _ = _mlp()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        before = float(sess.run(loss, {x: xv, y: yv}))
        for _ in range(5):
            sess.run(train, {x: xv, y: yv})
        assert float(sess.run(loss, {x: xv, y: yv})) < before
        assert all(pl.stages is None for pl in _plans(worker))


def test_a_value_between_two_other_tasks_is_never_staged():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            a = rg.Variable(rg.constant(2.0), name="a")
        with g.device("/job:worker/task:1"):
            b = a * 3.0  # the PS's value goes to a task that is not the master's
        with g.device(WORKER):
            c = b + a
    ps, w0, w1 = _tasks(2)
    with ps, w0, w1, Session(w0.target, graph=g) as sess:
        sess.run(a.initializer)
        assert float(sess.run(c)) == 8.0
        assert all(pl.stages is None for pl in _plans(w0))


def test_an_error_in_a_stage_reaches_the_client_and_the_tasks_keep_serving():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            v = rg.Variable(rg.constant(1.0), name="v")
        with g.device(WORKER):
            x = rg.placeholder(rg.float32, [], name="x")
            d = rg.identity(v) * x
        with g.device(PS):
            bad = rg.assign_add(v, rg.check_numerics(d * 1.0, "the update is not finite"))
        with g.device(WORKER):
            done = bad + 0.0
        init = rg.global_variables_initializer()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match="not finite"):
            sess.run(done, {x: np.float32(np.inf)})
        assert float(sess.run(done, {x: 1.0})) != 0.0  # the next step runs
        _no_step_left([ps, worker])


def test_a_blocked_stage_ends_at_the_step_deadline():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            q = rg.FIFOQueue(2, [rg.float32], shapes=[[]], name="q")
            v = rg.Variable(rg.constant(1.0), name="v")
        with g.device(WORKER):
            x = rg.identity(v) + 1.0
        with g.device(PS):
            with g.control_dependencies([rg.assign(v, x)]):
                taken = q.dequeue()  # nothing is ever enqueued: stage B waits
        with g.device(WORKER):
            out = taken * 2.0
        init = rg.global_variables_initializer()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        opts = config_pb2.RunOptions(timeout_in_ms=300)
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(out, options=opts)
        assert next(p for p in _plans(worker) if p.fetches == (out.name,)).stages is not None
        # The server keeps serving. Stage B's assign ran before its dequeue blocked, unless the
        # deadline passed before stage B began (a very slow machine): either value is right.
        assert float(sess.run(v)) in (1.0, 2.0)


def test_split_declines_a_value_that_would_cross_inside_one_task():
    g = rg.Graph()
    with g.as_default():
        with g.device(PS):
            v = rg.Variable(rg.constant(3.0), name="v")
            early = rg.identity(v) * 2.0  # computed before the worker's value arrives...
        with g.device(WORKER):
            w = rg.identity(v) + 1.0
        with g.device(PS):
            both = early + w  # ...and used after it: it would have to cross from A to B
        with g.device(WORKER):
            out = both * 1.0
        init = rg.global_variables_initializer()
    ps, worker = _tasks()
    with ps, worker, Session(worker.target, graph=g) as sess:
        sess.run(init)
        assert float(sess.run(out)) == 10.0
        assert next(p for p in _plans(worker) if p.fetches == (out.name,)).stages is None
    assert staged.split([], ("worker", 0), []) is None


def _three_ps(op):
    """w1, b1, w2 (and their slots) each on its own PS; the rest on the worker."""
    if op.type not in ("VariableV2", "VarHandleOp"):
        return WORKER
    return f"/job:ps/task:{['w1', 'b1', 'w2'].index(op.name.split('/')[0])}"


def test_a_step_over_three_ps_runs_staged_in_parallel_and_equals_a_local_session(pulls):
    xv, yv = _batch()
    g, x, y, loss, train, init, vs = _mlp(_three_ps)
    with Session(graph=g, config=config_pb2.ConfigProto(allow_soft_placement=True)) as local:
        local.run(init)
        for _ in range(3):
            local.run(train, {x: xv, y: yv})
        want = local.run(vs + [loss], {x: xv, y: yv})
    tasks = _ps_tasks(3)
    worker = tasks[-1]
    try:
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            del pulls[:]
            for _ in range(3):
                sess.run(train, {x: xv, y: yv})
            got = sess.run(vs + [loss], {x: xv, y: yv})
            plan = next(p for p in _plans(worker) if p.targets == (train.name,))
            # A: the three PS read (one group, called together), M1, B: the three apply (the
            # train op's wait for them, M2, is dropped).
            assert [(st.group, st.job, st.local) for st in plan.stages] == (
                [(0, "ps", False)] * 3 + [(1, "worker", True)] + [(2, "ps", False)] * 3
            )  # fmt: skip
            assert not any(st.makes for st in plan.stages if st.group == 2)
            assert sorted(st.task for st in plan.stages if st.group == 2) == [0, 1, 2]
        assert pulls == []  # every value crossed in a request or a response
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        assert not any(t._worker._steps for t in tasks)  # no step left behind
    finally:
        for t in tasks:
            t.stop()


def _embedding(n_ps: int, vocab: int = 11):
    g = rg.Graph()
    spec = {"ps": [f"h:{i}" for i in range(n_ps)], "worker": ["h:9"]}
    setter = rt.replica_device_setter(cluster=spec, worker_device=WORKER)
    with g.as_default(), g.device(setter):
        emb = rt.get_variable("emb", [vocab, 4], partitioner=rt.fixed_size_partitioner(n_ps),
                              initializer=rt.random_uniform_initializer(-1.0, 1.0, seed=5))  # fmt: skip
        ids = rg.placeholder(rg.int64, [None], name="ids")
        rows = rg.embedding_lookup(emb, ids, partition_strategy="mod")
        loss = rg.reduce_sum(rows * rows)
        train = rt.GradientDescentOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    return g, ids, rows, loss, train, init


def test_an_embedding_lookup_and_its_training_step_over_several_ps_run_staged(pulls):
    idv = np.array([7, 1, 7, 10, 0, 4, 3, 1], np.int64)  # repeated, out of order
    g, ids, rows, loss, train, init = _embedding(3)
    with Session(graph=g, config=config_pb2.ConfigProto(allow_soft_placement=True)) as local:
        local.run(init)
        want_rows = local.run(rows, {ids: idv})
        local.run(train, {ids: idv})
        want = local.run([rows, loss], {ids: idv})
    tasks = _ps_tasks(3)
    worker = tasks[-1]
    try:
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            del pulls[:]
            np.testing.assert_array_equal(sess.run(rows, {ids: idv}), want_rows)
            looked = next(p for p in _plans(worker) if p.fetches == (rows.name,))
            # M1 partitions the ids, B: the three PS gather together, M2 stitches.
            assert [st.group for st in looked.stages] == [1, 2, 2, 2, 3]
            assert pulls == []
            # The training step: M1 partitions the ids, the PS gather (B1), the worker computes
            # the gradients (M2), the PS apply them (B2: their update takes the ids B1 took
            # again, from the master); the step ends when B2's calls return (no stage M3 waits
            # for acknowledgements).
            sess.run(train, {ids: idv})
            got = sess.run([rows, loss], {ids: idv})
            trained = next(p for p in _plans(worker) if p.targets == (train.name,))
            assert [st.group for st in trained.stages] == [1, 2, 2, 2, 3, 4, 4, 4]
            assert not any(st.makes for st in trained.stages if st.group == 4)
            # Each PS takes its ids to gather, then its gradient rows and the same ids again;
            # the learning rate (a constant of the worker's) is a copy in the PS's stage.
            assert [len(st.needs) for st in trained.stages if not st.local] == [1] * 3 + [2] * 3
            assert all(any(nd.op == "Const" and nd.name.startswith("GradientDescent/learning_rate")
                           for nd in st.graph_def.node)
                       for st in trained.stages if st.group == 4)  # fmt: skip
            assert all(st.aliases for st in trained.stages if st.group == 4)
            assert pulls == []
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    finally:
        for t in tasks:
            t.stop()


def test_an_error_in_one_of_several_parallel_stages_reaches_the_client():
    g = rg.Graph()
    with g.as_default():
        vs = []
        for i in range(3):
            with g.device(f"/job:ps/task:{i}"):
                vs.append(rg.Variable(rg.constant(1.0), name=f"v{i}"))
        with g.device(WORKER):
            x = rg.placeholder(rg.float32, [], name="x")
            ds = [rg.identity(v) * x for v in vs]
        ups = []
        for i in range(3):
            with g.device(f"/job:ps/task:{i}"):
                d = rg.check_numerics(ds[i] * 1.0, "not finite") if i == 1 else ds[i]
                ups.append(rg.assign_add(vs[i], d))
        with g.device(WORKER):
            done = rg.add_n(ups)
        init = rg.global_variables_initializer()
    tasks = _ps_tasks(3)
    worker = tasks[-1]
    try:
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            with pytest.raises(errors.InvalidArgumentError, match="not finite"):
                sess.run(done, {x: np.float32(np.inf)})
            assert next(p for p in _plans(worker) if p.fetches == (done.name,)).stages
            sess.run([v.initializer for v in vs])
            assert float(sess.run(done, {x: 2.0})) == 9.0  # the next step runs
        _no_step_left(tasks)
    finally:
        for t in tasks:
            t.stop()


def test_a_blocked_stage_among_parallel_ones_ends_at_the_step_deadline():
    g = rg.Graph()
    with g.as_default():
        with g.device("/job:ps/task:1"):
            q = rg.FIFOQueue(2, [rg.float32], shapes=[[]], name="q")
        vs = []
        for i in range(2):
            with g.device(f"/job:ps/task:{i}"):
                vs.append(rg.Variable(rg.constant(1.0), name=f"v{i}"))
        with g.device(WORKER):
            xs = [rg.identity(v) + 1.0 for v in vs]
        with g.device("/job:ps/task:0"):
            fine = rg.assign(vs[0], xs[0])
        with g.device("/job:ps/task:1"):
            with g.control_dependencies([rg.assign(vs[1], xs[1])]):
                taken = q.dequeue()  # nothing is ever enqueued: this task's stage B waits
        with g.device(WORKER):
            out = taken * fine
        init = rg.global_variables_initializer()
    tasks = _ps_tasks(2)
    worker = tasks[-1]
    try:
        with Session(worker.target, graph=g) as sess:
            sess.run(init)
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(out, options=config_pb2.RunOptions(timeout_in_ms=300))
            plan = next(p for p in _plans(worker) if p.fetches == (out.name,))
            assert [st.group for st in plan.stages].count(2) == 2  # the two B ran together
            # The servers keep serving (what the aborted step assigned depends on how far it
            # got before its deadline).
            now = sess.run(vs)
            np.testing.assert_array_equal(sess.run(xs), np.array(now) + 1.0)
        _no_step_left(tasks)
    finally:
        for t in tasks:
            t.stop()
