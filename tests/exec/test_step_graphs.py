"""Straight-line GPU steps captured and replayed as CUDA graphs (rill.exec.step_graphs), on the
simulated GPU: the bookkeeping (warm-up, input and variable buffers, checks, fallbacks). The real
capture runs in tests/gpu (marker gpu)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import RunOptions, Session, step_graphs
from rill.exec.simgpu import simulated_gpus
from rill.train import AdamOptimizer, GradientDescentOptimizer, MomentumOptimizer


def _model(opt="sgd"):
    g = rg.Graph()
    with g.as_default():
        g.seed = 3
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        y = rg.placeholder(rg.float32, [None, 3], name="y")
        w = rg.Variable(rg.random_uniform([6, 3], -0.5, 0.5), name="w")
        b = rg.Variable(rg.zeros([3]), name="b")
        logits = rg.matmul(x, w) + b
        loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        o = {"sgd": lambda: GradientDescentOptimizer(0.5),
             "momentum": lambda: MomentumOptimizer(0.1, 0.9),
             "adam": lambda: AdamOptimizer(0.05)}[opt]()  # fmt: skip
        train = o.minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, y, w, b, loss, train, init


def _data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 6)).astype(np.float32),
            np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)])  # fmt: skip


def _session(graphs: bool, opt="sgd"):
    m = _model(opt)
    with simulated_gpus(1, graphs=graphs):
        sess = Session(graph=m[0])
    sess.run(m[-1])
    return sess, m


def _train_plan(sess):
    plans = [p for p in sess._plans.values()
             if p.graphs is not None and p.graphs.captures and p.feed_checks]  # fmt: skip
    assert len(plans) == 1
    return plans[0].graphs


@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_replayed_steps_match_normal_steps(opt):
    """(Adam's beta powers stay on the device: read on the host they would end the capture.)"""
    a, (_, x, y, w, b, loss, train, _) = _session(True, opt)
    c, m = _session(False, opt)
    xv, yv = _data()
    for _ in range(8):
        la, _ = a.run([loss, train], {x: xv, y: yv})
        lc, _ = c.run([m[5], m[6]], {m[1]: xv, m[2]: yv})
        assert la == lc  # the same kernels, the same order: the same bits
    g = _train_plan(a)
    assert g.off is None and g.captures == 1
    assert g.replays == 8 - step_graphs.WARM_RUNS - 1  # the capture's own run is a normal one
    np.testing.assert_array_equal(a.run(w), c.run(m[3]))
    np.testing.assert_array_equal(a.run(b), c.run(m[4]))


def test_a_fetched_variable_value_is_read_before_the_update():
    a, (_, x, y, w, _, _, train, _) = _session(True)
    xv, yv = _data()
    for _ in range(6):
        before = a.run(w)
        got, _ = a.run([w, train], {x: xv, y: yv})
        np.testing.assert_array_equal(got, before)
        assert not np.array_equal(a.run(w), before)
    assert _train_plan(a).replays > 0


def test_an_assignment_between_steps_is_seen_and_the_step_is_captured_again():
    a, (g, x, y, w, _, loss, train, _) = _session(True)
    c, m = _session(False)
    with g.as_default():
        reset = w.assign(rg.zeros([6, 3]))
    with m[0].as_default():
        reset_c = m[3].assign(rg.zeros([6, 3]))
    xv, yv = _data()
    for i in range(14):
        if i == 7:
            a.run(reset)
            c.run(reset_c)
        assert (
            a.run([loss, train], {x: xv, y: yv})[0] == c.run([m[5], m[6]], {m[1]: xv, m[2]: yv})[0]
        )
    gr = _train_plan(a)
    assert gr.captures == 2 and gr.off is None
    np.testing.assert_array_equal(a.run(w), c.run(m[3]))


def test_each_feed_signature_has_its_graph():
    a, (_, x, y, w, _, loss, train, _) = _session(True)
    c, m = _session(False)
    for i in range(12):
        xv, yv = _data(n=8 if i % 2 else 5, seed=i)
        assert (
            a.run([loss, train], {x: xv, y: yv})[0] == c.run([m[5], m[6]], {m[1]: xv, m[2]: yv})[0]
        )
    gr = _train_plan(a)
    assert gr.captures == 2 and len(gr._graphs) == 2 and gr.replays > 0


def test_a_step_that_copies_to_the_host_is_not_captured():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None], name="x")
        i = rg.placeholder(rg.int64, [None], name="i")
        v = rg.Variable(rg.ones([5]), name="v")
        # GatherV2's GPU kernel checks the indices on the host (a device-to-host copy).
        out = rg.gather(v, i) * rg.reduce_sum(x)
        init = rg.global_variables_initializer()
    with simulated_gpus(1, graphs=True):
        sess = Session(graph=g)
    sess.run(init)
    for _ in range(5):
        got = sess.run(out, {x: np.ones(3, np.float32), i: np.array([0, 4], np.int64)})
        np.testing.assert_array_equal(got, [3.0, 3.0])
    gr = [p.graphs for p in sess._plans.values() if p.graphs is not None and p.graphs.off]
    assert gr and "capturing" in gr[0].off and gr[0].replays == 0


def test_a_replay_that_differs_turns_capture_off_and_keeps_the_normal_result(monkeypatch):
    real = step_graphs._SimGraph.launch

    def off_by_one(self, feeds, on_device=False, step=None):
        return [o + 1 for o in real(self, feeds, on_device, step)]

    monkeypatch.setattr(step_graphs._SimGraph, "launch", off_by_one)
    a, (_, x, y, _, _, loss, train, _) = _session(True)
    c, m = _session(False)
    xv, yv = _data()
    for _ in range(6):
        assert (
            a.run([loss, train], {x: xv, y: yv})[0] == c.run([m[5], m[6]], {m[1]: xv, m[2]: yv})[0]
        )
    gr = [p.graphs for p in a._plans.values() if p.graphs is not None and p.graphs.off]
    assert gr and "differed" in gr[0].off and "fetched value" in gr[0].off


def test_traced_steps_and_the_switch_run_as_usual(monkeypatch):
    a, (_, x, y, _, _, loss, train, _) = _session(True)
    xv, yv = _data()
    opts = RunOptions(trace_level=RunOptions.FULL_TRACE)
    for _ in range(5):
        a.run([loss, train], {x: xv, y: yv}, options=opts)
    assert all(not p.graphs.captures for p in a._plans.values() if p.graphs is not None)
    monkeypatch.setenv("RILL_CUDA_GRAPHS", "0")
    b, _ = _session(True)
    assert all(p.graphs is None for p in b._plans.values())


def test_cpu_sessions_and_plain_simulated_gpus_have_no_graphs():
    m = _model()
    for ctx in (contextlib.nullcontext(), simulated_gpus(1)):
        with ctx:
            sess = Session(graph=m[0])
        sess.run(m[-1])
        assert all(p.graphs is None for p in sess._plans.values())


def _loop_model():
    g = rg.Graph()
    with g.as_default():
        g.seed = 5
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        w = rg.Variable(rg.random_uniform([4, 4], -0.5, 0.5), name="w")

        def body(i, h):
            return i + 1, rg.tanh(rg.matmul(h, w))

        _, h = rg.while_loop(lambda i, h: i < 5, body, [rg.constant(0), x])
        loss = rg.reduce_mean(rg.square(h - 0.5))
        train = GradientDescentOptimizer(0.3).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, w, loss, train, init


def test_a_gpu_step_with_a_while_loop_and_its_gradient_is_replayed():
    runs = []
    for graphs in (True, False):
        g, x, w, loss, train, init = _loop_model()
        with simulated_gpus(1, graphs=graphs):
            sess = Session(graph=g)
        sess.run(init)
        xv = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
        losses = [sess.run([loss, train], {x: xv})[0] for _ in range(7)]
        state = [(p.graphs.captures, p.graphs.replays, p.graphs.off)
                 for p in sess._plans.values() if p.graphs is not None and p.feed_checks]  # fmt: skip
        loops = any(p.has_control_flow for p in sess._plans.values())
        runs.append((losses, sess.run(w), state, loops))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][2] == [(1, 7 - step_graphs.WARM_RUNS - 1, None)], runs[0][2]
    assert runs[0][3]


@pytest.mark.parametrize("cell", ["GRUCell", "BasicRNNCell", "BasicLSTMCell", "static"])
def test_a_dynamic_rnn_train_step_is_replayed(cell):
    """TensorArrays, stacks of saved values and loop counters stay replayable: positions and
    int32 stack elements are host memory, as in TensorFlow."""
    import rill.train as rt

    runs = []
    for graphs in (True, False):
        g = rg.Graph()
        with g.as_default():
            g.seed = 0
            x = rg.placeholder(rg.float32, [7, 4, 5], name="x")
            if cell == "static":  # (its outputs joined by a Pack of 7)
                out = rg.stack(
                    rt.static_rnn(rt.BasicLSTMCell(8), rg.unstack(x), dtype=rg.float32)[0]
                )
            else:
                out = rt.dynamic_rnn(getattr(rt, cell)(8), x, dtype=rg.float32, time_major=True)[0]
            loss = rg.reduce_mean(rg.square(out))
            train = rt.GradientDescentOptimizer(0.5).minimize(loss)
            init = rg.global_variables_initializer()
        with simulated_gpus(1, graphs=graphs):
            sess = Session(graph=g)
        sess.run(init)
        xv = np.random.default_rng(0).standard_normal((7, 4, 5)).astype(np.float32)
        losses = [sess.run([loss, train], {x: xv})[0] for _ in range(6)]
        runs.append((losses, [(p.graphs.captures, p.graphs.replays, p.graphs.off)
                              for p in sess._plans.values()
                              if p.graphs is not None and p.feed_checks]))  # fmt: skip
    assert runs[0][0] == runs[1][0]
    assert runs[0][1] == [(1, 6 - step_graphs.WARM_RUNS - 1, None)], runs[0][1]


def test_graphs_per_plan_are_bounded():
    """At most MAX_SIGNATURES graphs per plan, and at most MAX_CAPTURES captures (a variable
    reassigned before every step would otherwise be captured again and again)."""
    a, (g, x, y, w, _, loss, train, _) = _session(True)
    c, m = _session(False)
    for n in range(2, 2 + step_graphs.MAX_SIGNATURES + 2):  # more signatures than kept
        xv, yv = _data(n=n, seed=n)
        for _ in range(step_graphs.WARM_RUNS + 2):
            got = a.run([loss, train], {x: xv, y: yv})[0]
            assert got == c.run([m[5], m[6]], {m[1]: xv, m[2]: yv})[0]
    gr = _train_plan(a)
    assert len(gr._graphs) == step_graphs.MAX_SIGNATURES and gr.replays > 0

    a, (g, x, y, w, _, loss, train, _) = _session(True)
    (var,) = [r for r in a._devices[-1].resources.all() if r.name == "w"]
    xv, yv = _data()
    for _ in range((step_graphs.MAX_CAPTURES + 1) * (step_graphs.WARM_RUNS + 2)):
        a.run([loss, train], {x: xv, y: yv})
        var._value = var._value.copy()  # a new buffer (as a restore from the host installs)
    gr = _train_plan(a)
    assert gr.captures == step_graphs.MAX_CAPTURES
    assert gr.off is not None and "captured" in gr.off


def test_two_captured_plans_updating_one_variable_agree_with_normal_steps():
    """The train step and an assign_add step, both captured: each writes w's buffer in place and
    each sees the other's writes."""
    out = []
    for graphs in (True, False):
        a, (g, x, y, w, _, loss, train, _) = _session(graphs)
        with g.as_default():
            bump = w.assign_add(rg.ones([6, 3]) * 0.01)
        xv, yv = _data()
        losses = []
        for _ in range(10):
            losses.append(a.run([loss, train], {x: xv, y: yv})[0])
            a.run(bump)
        out.append((losses, a.run(w), [p.graphs.replays for p in a._plans.values() if p.graphs]))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert sum(out[0][2]) >= 2 * (10 - step_graphs.WARM_RUNS - 1)


def test_a_variable_sharing_its_value_with_another_is_not_written_through():
    """After v1.assign(v2) both hold one array; a graph that updates v2 in place must not change
    v1 (each gets a buffer of its own before the capture)."""
    out = []
    for graphs in (True, False):
        g = rg.Graph()
        with g.as_default():
            x = rg.placeholder(rg.float32, [None, 3])
            v1 = rg.Variable(rg.ones([3, 2]), name="v1")
            v2 = rg.Variable(rg.ones([3, 2]) * 2, name="v2")
            share = v1.assign(v2)
            loss = rg.reduce_sum(rg.matmul(x, v2))
            train = GradientDescentOptimizer(0.1).minimize(loss, var_list=[v2])
            init = rg.global_variables_initializer()
        with simulated_gpus(1, graphs=graphs):
            sess = Session(graph=g)
        sess.run(init)
        for i in range(6):
            if i == step_graphs.WARM_RUNS:  # shared when the step is captured
                sess.run(share)
            sess.run(train, {x: np.ones((2, 3), np.float32)})
        replays = sum(p.graphs.replays for p in sess._plans.values() if p.graphs is not None)
        out.append((sess.run(v1), sess.run(v2), replays))
    np.testing.assert_array_equal(out[0][0], out[1][0])  # v1 as assigned, 2 - 2·2·0.1
    np.testing.assert_allclose(out[0][0], np.full((3, 2), 1.6, np.float32), rtol=1e-6)
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert out[0][2] > 0


@pytest.mark.parametrize("which", ["figure1", "small_cnn"])
def test_the_demo_models_train_the_same_with_graphs(which):
    """The README demo's MLP and CNN, 8 train steps on a simulated GPU with and without graphs:
    the same losses and variables, the step replayed."""
    import pathlib
    import sys

    ex = str(pathlib.Path(__file__).resolve().parents[2] / "examples")
    if ex not in sys.path:
        sys.path.insert(0, ex)
    import demo

    rng = np.random.default_rng(4)
    xs = rng.random((8, 16, 784), dtype=np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, (8, 16))]
    runs = []
    for graphs in (True, False):
        g, m = getattr(demo, which)()
        with g.as_default():
            init = rg.global_variables_initializer()
            variables = rg.global_variables()
        with simulated_gpus(1, graphs=graphs):
            sess = Session(graph=g)
        sess.run(init)
        losses = [sess.run([m["loss"], m["train"]], {m["x"]: xs[i], m["y"]: ys[i]})[0]
                  for i in range(8)]  # fmt: skip
        replays = sum(p.graphs.replays for p in sess._plans.values() if p.graphs is not None)
        runs.append((losses, sess.run(variables), replays))
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(a, b)
    assert runs[0][2] == 8 - step_graphs.WARM_RUNS - 1
