"""The compiled path runs two independent expensive kernels side by side (executor/compiled.py
_Pair): B on an intra-op worker while A runs on the step's thread, each on one thread, once both
ran long lately and a second core is idle; A then B otherwise. Results and errors are those of
running them one after the other."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import ConfigProto, Session, threads
from rill.exec.executor import compiled
from rill.exec.kernels import intra_op
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(77)


@pytest.fixture
def two_cores(monkeypatch):
    """Two idle cores, pairs from any running time, and a record of (op name, thread, other
    kernels running beside) for every MatMul kernel call."""
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    monkeypatch.setattr(compiled, "PAIR_NS", 0)
    made = []
    real = compiled._Pair.__init__

    def spy(self, ka, kb, na, nb):
        made.append((na.name, nb.name))
        real(self, ka, kb, na, nb)

    monkeypatch.setattr(compiled._Pair, "__init__", spy)
    return made


def _dense_grads():
    """A dense layer's forward and both gradients: the input and weight gradients are
    independent MatMuls, adjacent in the plan."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [64, 300], name="x")
        w = rg.placeholder(rg.float32, [300, 200], name="w")
        dy = rg.placeholder(rg.float32, [64, 200], name="dy")
        dx = rg.matmul(dy, w, transpose_b=True, name="dx")
        dw = rg.matmul(x, dy, transpose_a=True, name="dw")
    feeds = {x: RNG.standard_normal((64, 300)).astype(np.float32),
             w: RNG.standard_normal((300, 200)).astype(np.float32),
             dy: RNG.standard_normal((64, 200)).astype(np.float32)}  # fmt: skip
    return g, [dx, dw], feeds


def _run(g, fetches, feeds, steps=3, config=None):
    with Session(graph=g, config=config) as s:
        return [s.run(fetches, feeds) for _ in range(steps)]


def test_independent_kernels_pair_and_give_the_sequential_results(two_cores, monkeypatch):
    g, fetches, feeds = _dense_grads()
    seen = []
    real = intra_op.hand_off

    def watch(fn):
        job = real(fn)
        seen.append(job is not None)
        return job

    monkeypatch.setattr(intra_op, "hand_off", watch)
    runs = _run(g, fetches, feeds)
    assert two_cores == [("dx", "dw")]
    assert seen and all(seen)  # every step handed dw to a worker
    monkeypatch.setattr(compiled, "PAIR_NS", 10**15)  # never side by side
    seq = _run(g, fetches, feeds)
    for got, want in zip(runs, seq):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    want_dx = feeds[g.get_tensor_by_name("dy:0")] @ feeds[g.get_tensor_by_name("w:0")].T
    np.testing.assert_allclose(runs[0][0], want_dx, rtol=1e-4, atol=1e-4)


def test_a_kernel_beside_another_runs_on_one_thread(two_cores, monkeypatch):
    """While B runs on the worker, A's intra-op bound is shared with it: A does not split."""
    g, fetches, feeds = _dense_grads()
    limits = {}
    real = compiled._Pair.__call__

    def call(self, a_args, b_args):
        ka = self.ka

        def a(*args):
            limits["a"] = (threads.intra_op_limit(), len(threads.BESIDE))
            return ka(*args)

        self.ka = a
        try:
            return real(self, a_args, b_args)
        finally:
            self.ka = ka

    monkeypatch.setattr(compiled._Pair, "__call__", call)
    _run(g, fetches, feeds, steps=2)
    assert limits["a"] == (1, 1)


def test_dependent_and_stateful_kernels_do_not_pair(two_cores):
    g = rg.Graph()
    with g.as_default():
        a = rg.placeholder(rg.float32, [40, 40])
        b = rg.matmul(a, a)
        c = rg.matmul(b, a)  # reads b: runs after it
        v = rg.Variable(np.ones((40, 40), np.float32))
        d = rg.matmul(c, v)
        upd = v.assign_add(d)  # stateful
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        s.run([c, upd], {a: np.eye(40, dtype=np.float32)})
    assert two_cores == []


def test_a_kernel_reading_another_through_an_identity_does_not_pair(two_cores):
    """An Identity is elided in the compiled plan, so the reader's input is the writer's own
    output: the two must run in turn (the importer's Identity for an ONNX one-input Concat
    between a convolution and the next layer made the reader read an unbound variable)."""
    g = rg.Graph()
    with g.as_default():
        a = rg.placeholder(rg.float32, [40, 40])
        b = rg.matmul(a, a, name="b")
        c = rg.matmul(rg.identity(b), a, name="c")
        d = rg.matmul(rg.identity(rg.identity(c)), b, name="d")
    x = RNG.standard_normal((40, 40)).astype(np.float32)
    with Session(graph=g) as s:
        got = s.run(d, {a: x})
    np.testing.assert_allclose(got, x @ x @ x @ (x @ x), rtol=1e-4, atol=1e-3)
    assert two_cores == []


@pytest.mark.parametrize("failing", ["dx", "dw"])
def test_an_error_names_the_failing_op_and_leaves_nothing_running(two_cores, monkeypatch,
                                                                   failing):  # fmt: skip
    g, fetches, feeds = _dense_grads()
    with Session(graph=g) as s:
        s.run(fetches, feeds)  # the pair is built; make one of its kernels fail
        pair = next(v for v in _bound_pairs(s))
        which = "ka" if failing == "dx" else "kb"
        real = getattr(pair, which)
        finished = threading.Event()

        def boom(*args):
            if threading.current_thread() is not threading.main_thread():
                finished.set()  # (on the worker: the other kernel is the caller's)
            raise ValueError("no good")

        other = "kb" if which == "ka" else "ka"
        real_other = getattr(pair, other)

        def slow(*args):
            out = real_other(*args)
            finished.set()
            return out

        setattr(pair, which, boom)
        setattr(pair, other, slow)
        with pytest.raises(InvalidArgumentError, match=f"MatMul '{failing}'.*no good"):
            s.run(fetches, feeds)
        assert finished.is_set()  # the other kernel had finished before the error came out
        setattr(pair, which, real)
        setattr(pair, other, real_other)
        out = s.run(fetches, feeds)  # the session goes on
    assert out[0].shape == (64, 300)


def test_without_an_idle_core_or_a_second_thread_they_run_in_turn(two_cores, monkeypatch):
    g, fetches, feeds = _dense_grads()
    jobs = []
    real = intra_op.hand_off

    def watch(fn):
        job = real(fn)
        jobs.append(job)
        return job

    monkeypatch.setattr(intra_op, "hand_off", watch)
    monkeypatch.setattr(threads, "cores_idle", lambda: 1)  # another task on the host
    busy = _run(g, fetches, feeds)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    cfg = ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    one = _run(g, fetches, feeds, config=cfg)
    assert two_cores and jobs and not any(jobs)  # pairs were built; each ran A then B
    for a, b in zip(busy[-1], one[-1]):
        np.testing.assert_array_equal(a, b)


def _bound_pairs(sess):
    """The _Pair objects bound into the session's compiled step functions."""
    for plan in list(sess._plans.values()):
        for _, ex in getattr(plan, "partitions", []):
            fn = getattr(ex, "_fn", None)
            for cell in getattr(fn, "__closure__", None) or ():
                if isinstance(cell.cell_contents, compiled._Pair):
                    yield cell.cell_contents
