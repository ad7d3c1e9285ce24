"""The structured path (conds as `if`, loops as `while`) agrees with the dataflow executor."""

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import ConfigProto, Session
from rill.exec.executor.dataflow import DataflowPartition
from rill.exec.executor.structured import StructuredPartition
from rill.graph.errors import InvalidArgumentError


def _both(fetches, feed, graph):
    out = []
    kinds = []
    for disable in (False, True):
        cfg = ConfigProto()
        cfg.rill.disable_compiled_path = disable
        with Session(graph=graph, config=cfg) as s:
            out.append(s.run(fetches, feed))
            plan = next(iter(s._plans.values()))
            kinds.append(type(plan.partitions[0][1]))
    assert kinds == [StructuredPartition, DataflowPartition]
    return out


def _assert_same(a, b):
    if isinstance(a, (list, tuple)):
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        np.testing.assert_array_equal(a, b)


def test_programs_agree(graph):
    x = rg.placeholder(rg.float64, [3], name="x")
    n = rg.placeholder(rg.int32, [], name="n")
    p = rg.placeholder(rg.bool_, [], name="p")

    def body(i, a, acc):
        a2 = rg.cond(rg.reduce_sum(a) > 2.0, lambda: a * 0.5, lambda: a * a + x)

        def inner(k, c):
            return k + 1, c + rg.cast(k, rg.float64)

        _, c = rg.while_loop(lambda k, c: k < i, inner, (0, rg.reduce_sum(a2)))
        return i + 1, a2, acc + c

    _, a, acc = rg.while_loop(lambda i, a, acc: i < n, body,
                              (0, x, rg.constant(0.0, rg.float64)))  # fmt: skip
    y = rg.cond(p, lambda: acc * 2.0, lambda: rg.reduce_sum(a))
    (dx,) = gradients(y, [x])
    xv = np.array([0.3, 0.6, 0.9])
    for k in (0, 1, 4):
        for pv in (True, False):
            s_out, d_out = _both([a, acc, y, dx], {x: xv, n: k, p: pv}, graph)
            _assert_same(s_out, d_out)


def test_tensor_array_loop_agrees(graph):
    x = rg.placeholder(rg.float32, [5, 2], name="x")
    ta = rg.TensorArray(rg.float32, size=5)
    ta = ta.unstack(x)
    out = rg.TensorArray(rg.float32, size=5)

    def body(i, total, out):
        v = ta.read(i)
        total = total + v
        return i + 1, total, out.write(i, total)

    _, _, out = rg.while_loop(lambda i, t, o: i < 5, body, (0, rg.zeros([2]), out))
    cum = out.stack()
    xv = np.arange(10, dtype=np.float32).reshape(5, 2)
    s_out, d_out = _both(cum, {x: xv}, graph)
    np.testing.assert_array_equal(s_out, np.cumsum(xv, axis=0))
    np.testing.assert_array_equal(s_out, d_out)


def test_dead_fetch_and_untaken_branch(graph):
    p = rg.placeholder(rg.bool_, [], name="p")
    x = rg.placeholder(rg.float32, [], name="x")
    v = rg.Variable(0.0, name="counter")
    with graph.control_dependencies([v.initializer]):
        x1 = rg.identity(x)

    def taken():
        return v.assign_add(1.0) + x1

    y = rg.cond(p, taken, lambda: x1 * 2.0)
    with Session() as s:
        assert s.run(y, {p: False, x: 3.0}) == 6.0
        assert s.run(v) == 0.0  # the true branch's assign never ran
        assert s.run(y, {p: True, x: 3.0}) == 4.0
        f, t = rg.ops.control_flow_ops.switch(x, p)
        with pytest.raises(InvalidArgumentError, match="dead"):
            s.run(t + 1.0, {p: False, x: 1.0})


def test_two_devices_use_the_dataflow_executor(graph):
    n = rg.placeholder(rg.int32, [], name="n")
    with graph.device("/device:CPU:1"):
        two = rg.constant(2)
    i = rg.while_loop(lambda i: i < n, lambda i: i + two, 0)
    with Session(config=ConfigProto(device_count={"CPU": 2})) as s:
        assert s.run(i, {n: 7}) == 8
        plan = next(iter(s._plans.values()))
        assert all(isinstance(ex, DataflowPartition) for _, ex in plan.partitions)


def test_folded_weight_gradient_of_a_loop_matmul(monkeypatch):
    """A loop's per-iteration weight gradients folded into one GEMM: it agrees with the dataflow
    executor's running sum, and keeps its bits on any number of threads."""
    from rill.exec import threads
    from rill.exec.executor import structured
    from rill.exec.kernels import intra_op

    folds = []
    real = structured._fold_matmuls

    def watch(acc, a_rows, g_rows):
        (rows, k), n = a_rows.matrix().shape, g_rows.matrix().shape[1]
        folds.append((len(a_rows), threads.gemm_pieces(k, rows, n)))
        return real(acc, a_rows, g_rows)

    monkeypatch.setattr(structured, "_fold_matmuls", watch)
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1)
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    rng = np.random.default_rng(3)
    g = rg.Graph()
    with g.as_default():
        xs = rg.placeholder(rg.float32, [6, 130, 128], name="xs")
        w = rg.Variable(rng.standard_normal((128, 128)).astype(np.float32) * 0.05, name="w")
        ta = rg.TensorArray(rg.float32, size=6).unstack(xs)

        def body(t, h):
            return t + 1, rg.tanh(rg.matmul(ta.read(t) + h, w))

        _, h = rg.while_loop(lambda t, h: t < 6, body, (0, rg.zeros([130, 128])))
        (dw,) = gradients(rg.reduce_sum(h * h), [w])
        init = rg.global_variables_initializer()
    feed = {xs: rng.standard_normal((6, 130, 128)).astype(np.float32)}
    got = []
    for free in (1, 2, 1):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        with Session(graph=g) as s:
            s.run(init)
            got.append(s.run(dw, feed))
            # The fold writes no initial value the next step starts from again.
            assert np.array_equal(s.run(dw, feed), got[-1])
    # The six iterations' products in one GEMM, split in row blocks over the threads.
    assert folds and all(n == 6 and pieces > 1 for n, (_, pieces) in folds)
    assert all(np.array_equal(got[0], r) for r in got[1:])
    cfg = ConfigProto()
    cfg.rill.disable_compiled_path = True
    with Session(graph=g, config=cfg) as s:
        s.run(init)
        np.testing.assert_allclose(s.run(dw, feed), got[0], rtol=1e-4, atol=1e-4)


def test_fold_rows_stack_as_they_come_and_fall_back_to_a_list():
    """The folded gradient's operands: float matrices stacked as appended (growing, reusing
    memory after release), other parts kept as a list; the matrix is their concatenation."""
    from rill.exec.executor.fold import Rows, fold_matmuls

    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(40)]
    r = Rows()
    for p in parts:
        r.append(p)
    assert len(r) == 40
    np.testing.assert_array_equal(r.matrix(), np.concatenate(parts))
    r.release()
    again = Rows()
    for p in parts[:5]:
        again.append(p * 2)
    np.testing.assert_array_equal(again.matrix(), np.concatenate(parts[:5]) * 2)
    # A part of another width turns the stack into a list of the parts, in order.
    mixed = Rows()
    mixed.append(parts[0])
    mixed.append(np.ones((2, 4), np.float64))
    mixed.append(parts[1])
    want = np.concatenate([parts[0], np.ones((2, 4)), parts[1]])
    np.testing.assert_array_equal(mixed.matrix(), want)
    assert mixed.matrix().dtype == np.float64
    # acc + aᵀ·g over the appended parts, into a new array (acc is the loop's initial value,
    # never written); nothing appended gives a copy of acc.
    g = Rows()
    for p in parts[:5]:
        g.append(p[:, :2])
    acc = np.ones((4, 2), np.float32)
    want = 1 + (2 * np.concatenate(parts[:5])).T @ np.concatenate([p[:, :2] for p in parts[:5]])
    got = fold_matmuls(acc, again, g)
    np.testing.assert_allclose(got - want, 0, atol=1e-5)
    assert got is not acc and np.array_equal(acc, np.ones((4, 2), np.float32))
    empty = np.zeros((4, 2), np.float32)
    copy = fold_matmuls(empty, Rows(), Rows())
    assert copy is not empty and np.array_equal(copy, empty) and copy.dtype == empty.dtype
    # Memory given back is reused by the next loop, which sees only its own rows.
    third = Rows()
    for p in parts[5:8]:
        third.append(p)
    np.testing.assert_array_equal(third.matrix(), np.concatenate(parts[5:8]))


def test_fold_rows_take_a_concatenation_part_by_part():
    """append_parts copies ConcatV2's parts straight into the stacked matrix's columns; where
    they are not float matrices of one row count, or the axis is not the columns, it calls the
    ConcatV2 kernel given to it and appends what that returns."""
    from rill.exec.executor.fold import Rows

    calls = []

    def concat(*args):
        calls.append(args[-1])
        return np.concatenate(args[:-1], axis=int(args[-1]))

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(30)]
    hs = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(30)]
    r = Rows()
    for k, (x, h) in enumerate(zip(xs, hs)):
        r.append_parts((x, h), concat, np.int32(1 if k % 2 else -1))
    assert calls == [] and len(r) == 30
    want = np.concatenate([np.concatenate([x, h], 1) for x, h in zip(xs, hs)])
    np.testing.assert_array_equal(r.matrix(), want)
    r.release()
    # Parts of other row counts, another axis or dtype go through the kernel.
    odd = Rows()
    odd.append_parts((xs[0], hs[0]), concat, 1)
    tall = (np.ones((2, 7), np.float32), np.zeros((1, 7), np.float32))
    odd.append_parts(tall, concat, 0)
    odd.append_parts((xs[3], hs[3].astype(np.float64)), concat, 1)
    assert calls == [0, 1] and len(odd) == 3
    want = [np.concatenate([xs[0], hs[0]], 1), np.concatenate(tall, 0),
            np.concatenate([xs[3], hs[3].astype(np.float64)], 1)]  # fmt: skip
    np.testing.assert_array_equal(odd.matrix(), np.concatenate(want))


def test_fold_rows_copy_on_an_idle_worker_with_the_same_result(monkeypatch):
    """Where a second intra-op thread may run, the stacking copies go to a worker (each
    finished before the next copy and before the matrix is read): the same matrix."""
    from rill.exec import threads
    from rill.exec.executor.fold import Rows
    from rill.exec.kernels import intra_op

    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    handed = []
    real = intra_op.hand_off

    def watch(fn):
        job = real(fn)
        handed.append(job is not None)
        return job

    monkeypatch.setattr(intra_op, "hand_off", watch)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((64, 96)).astype(np.float32) for _ in range(40)]
    r, cat = Rows(), Rows()
    for x in xs:
        r.append(x)
        cat.append_parts((x[:, :40], x[:, 40:]), None, 1)
    assert handed == [True] * 80
    np.testing.assert_array_equal(r.matrix(), np.concatenate(xs))
    np.testing.assert_array_equal(cat.matrix(), np.concatenate(xs))
    r.release()
    cat.release()


def test_values_are_dropped_after_their_last_use_so_updates_write_in_place():
    """The structured path lets go of each value after the statement that uses it last: a
    weight read for a loop is no longer referenced when the optimizer updates it, which then
    writes in place; the values of the step stay those of the dataflow executor."""
    from rill.train import GradientDescentOptimizer

    rng = np.random.default_rng(5)
    g = rg.Graph()
    with g.as_default():
        xs = rg.placeholder(rg.float32, [4, 8, 16], name="xs")
        w = rg.Variable(rng.standard_normal((16, 16)).astype(np.float32) * 0.1, name="w")
        ta = rg.TensorArray(rg.float32, size=4).unstack(xs)

        def body(t, h):
            return t + 1, rg.tanh(rg.matmul(ta.read(t) + h, w))

        _, h = rg.while_loop(lambda t, h: t < 4, body, (0, rg.zeros([8, 16])))
        loss = rg.reduce_sum(h * h)
        train = GradientDescentOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    feed = {xs: rng.standard_normal((4, 8, 16)).astype(np.float32)}
    got = []
    for disable in (False, True):
        cfg = ConfigProto()
        cfg.rill.disable_compiled_path = disable
        with Session(graph=g, config=cfg) as s:
            s.run(init)
            var = s._devices[0].resources.lookup("", "w")
            address = var.read().__array_interface__["data"][0]
            for _ in range(3):
                s.run(train, feed)
            if not disable:
                kinds = [type(ex) for p in s._plans.values() for _, ex in p.partitions]
                assert StructuredPartition in kinds  # the train step's
                assert var.read().__array_interface__["data"][0] == address
            got.append(s.run([w, loss], feed))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
