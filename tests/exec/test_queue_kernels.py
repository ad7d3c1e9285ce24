"""Kernels of the queue ops, run one at a time with run_kernel (threads stand in for steps)."""

import threading
import time

import numpy as np
import pytest

import rill.exec  # noqa: F401 - registers the kernels
import rill.graph as rg
from rill.exec.context import OpKernelContext, StepState
from rill.exec.device import CpuDevice
from rill.exec.kernel_registry import find_kernel
from rill.exec.resources import FIFOQueue, ResourceMgr
from rill.exec.testing import run_kernel
from rill.graph.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    OutOfRangeError,
)


class Env:
    def __init__(self, mgr=None):
        self.mgr = mgr or ResourceMgr()
        self.device = CpuDevice(0)

    def run(self, x, *inputs, step=None):
        op = x.op if isinstance(x, rg.Tensor) else x
        ctx = OpKernelContext(step or StepState(1), op, self.device, self.mgr)
        return run_kernel(op, *inputs, ctx=ctx)

    def run1(self, x, *inputs, step=None):
        (out,) = self.run(x, *inputs, step=step)
        return out


@pytest.fixture
def env():
    return Env()


def _threads(*fns, timeout=10.0):
    results = [None] * len(fns)

    def wrap(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:
            results[i] = e

    ts = [threading.Thread(target=wrap, args=(i, f), daemon=True) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "deadlock"
    return results


def test_kernels_are_registered_blocking():
    for op in ("QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
               "QueueDequeueUpToV2"):  # fmt: skip
        k = find_kernel(op, "CPU", {})
        assert k.blocking and k.context, op
    assert not find_kernel("QueueSizeV2", "CPU", {}).blocking


def test_create_enqueue_dequeue(env, graph):
    q = rg.FIFOQueue(5, [rg.float32, rg.string], shapes=[[2], []], name="q")
    h = env.run1(q.queue_ref)
    assert h[()].name == "q" and h[()].kind == "Queue"
    assert isinstance(env.mgr.lookup("", "q"), FIFOQueue)
    x = rg.placeholder(rg.float32, [2])
    s = rg.placeholder(rg.string, [])
    enq = q.enqueue((x, s))
    env.run(enq, h, np.array([1, 2], np.float32), np.array(b"one", dtype=object))
    env.run(enq, h, np.array([3, 4], np.float32), np.array(b"two", dtype=object))
    assert int(env.run1(q.size(), h)) == 2
    a, b = env.run(q.dequeue().__getitem__(0).op, h)
    np.testing.assert_array_equal(a, [1, 2])
    assert b[()] == b"one"
    assert int(env.run1(q.size(), h)) == 1


def test_enqueue_many_and_dequeue_many_stack(env, graph):
    q = rg.FIFOQueue(10, [rg.int32, rg.float64], shapes=[[], [3]])
    h = env.run1(q.queue_ref)
    ints = np.arange(4, dtype=np.int32)
    rows = np.arange(12, dtype=np.float64).reshape(4, 3)
    env.run(q.enqueue_many((rg.placeholder(rg.int32), rg.placeholder(rg.float64))), h, ints, rows)
    n = rg.placeholder(rg.int32, [])
    many = q.dequeue_many(n)
    a, b = env.run(many[0].op, h, np.int32(3))
    np.testing.assert_array_equal(a, [0, 1, 2])
    np.testing.assert_array_equal(b, rows[:3])
    a, b = env.run(many[0].op, h, np.int32(0))  # an empty batch has the element shape
    assert a.shape == (0,) and b.shape == (0, 3) and b.dtype == np.float64
    with pytest.raises(InvalidArgumentError, match="< 0"):
        env.run(many[0].op, h, np.int32(-1))
    env.run(q.close(), h)
    a, b = env.run(q.dequeue_up_to(n)[0].op, h, np.int32(5))
    np.testing.assert_array_equal(a, [3])
    np.testing.assert_array_equal(b, rows[3:])
    with pytest.raises(OutOfRangeError, match="closed"):
        env.run(q.dequeue_up_to(n)[0].op, h, np.int32(5))


def test_single_component_outputs(env, graph):
    q = rg.FIFOQueue(10, rg.int64, shapes=[[]])
    h = env.run1(q.queue_ref)
    env.run(q.enqueue_many(rg.placeholder(rg.int64, [None])), h, np.arange(3, dtype=np.int64))
    assert int(env.run1(q.dequeue(), h)) == 0
    np.testing.assert_array_equal(env.run1(q.dequeue_many(2), h, np.int32(2)), [1, 2])


def test_component_validation(env, graph):
    q = rg.FIFOQueue(10, [rg.float32], shapes=[[2]])
    h = env.run1(q.queue_ref)
    enq = q.enqueue(rg.placeholder(rg.float32, None))
    with pytest.raises(InvalidArgumentError, match=r"must have shape \[2\], got \[3\]"):
        env.run(enq, h, np.zeros(3, np.float32))
    with pytest.raises(InvalidArgumentError, match="must be float32"):
        env.run(enq, h, np.zeros(2, np.float64))
    wrong = graph.create_op("QueueDequeueV2", [rg.placeholder(rg.resource, [])],
                            {"component_types": [rg.int32]})  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="holds components of types"):
        env.run(wrong, h)
    no_shapes = rg.FIFOQueue(10, rg.float32, name="loose")
    lh = env.run1(no_shapes.queue_ref)
    with pytest.raises(InvalidArgumentError, match="without shapes"):
        env.run(no_shapes.dequeue_many(1), lh, np.int32(1))


def test_shared_queues(env, graph):
    a = rg.FIFOQueue(4, rg.float32, shapes=[[]], shared_name="shared", name="a")
    b = rg.FIFOQueue(4, rg.float32, shapes=[[]], shared_name="shared", name="b")
    c = rg.FIFOQueue(5, rg.float32, shapes=[[]], shared_name="shared", name="c")
    ha, hb = env.run1(a.queue_ref), env.run1(b.queue_ref)
    env.run(a.enqueue(rg.placeholder(rg.float32, [])), ha, np.float32(7))
    assert float(env.run1(b.dequeue(), hb)) == 7.0
    with pytest.raises(InvalidArgumentError, match="shared queue 'shared' already exists"):
        env.run1(c.queue_ref)
    # Running the creation op again finds the same queue.
    env.run(a.enqueue(rg.placeholder(rg.float32, [])), ha, np.float32(8))
    env.run1(a.queue_ref)
    assert int(env.run1(a.size(), ha)) == 1


def test_blocking_dequeue_meets_a_later_enqueue(env, graph):
    q = rg.FIFOQueue(1, rg.int32, shapes=[[]])
    h = env.run1(q.queue_ref)
    enq = q.enqueue(rg.placeholder(rg.int32, []))
    dq = q.dequeue()

    def consumer():
        return [int(env.run1(dq, h)) for _ in range(20)]

    def producer():
        for i in range(20):
            env.run(enq, h, np.int32(i))

    got, _ = _threads(consumer, producer)
    assert got == list(range(20))


def test_waiting_kernels_stop_on_deadline_and_cancellation(env, graph):
    q = rg.FIFOQueue(1, rg.int32, shapes=[[]])
    h = env.run1(q.queue_ref)
    dq = q.dequeue()
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        env.run(dq, h, step=StepState(1, deadline=time.monotonic() + 0.2))
    assert time.monotonic() - t0 < 2.0
    step = StepState(2)

    def waiter():
        env.run(dq, h, step=step)

    def cancel():
        time.sleep(0.1)
        step.cancel("closing the session")

    err, _ = _threads(waiter, cancel)
    assert isinstance(err, CancelledError) and "closing the session" in str(err)


def test_close_and_cancel_pending_enqueues(env, graph):
    q = rg.FIFOQueue(1, rg.int32, shapes=[[]])
    h = env.run1(q.queue_ref)
    enq = q.enqueue(rg.placeholder(rg.int32, []))
    env.run(enq, h, np.int32(0))
    close = q.close(cancel_pending_enqueues=True)  # ops are built here: the graph is per thread

    def pending():
        env.run(enq, h, np.int32(1), step=StepState(1, deadline=time.monotonic() + 5))

    def closer():
        time.sleep(0.2)
        env.run(close, h)

    err, _ = _threads(pending, closer)
    assert isinstance(err, CancelledError)
    with pytest.raises(CancelledError, match="is closed"):
        env.run(enq, h, np.int32(2))
    assert int(env.run1(q.dequeue(), h)) == 0  # what was in it still comes out
    with pytest.raises(OutOfRangeError, match=r"requested 1, current size 0"):
        env.run(q.dequeue(), h)


def test_random_shuffle_queue_is_reproducible_with_seeds(graph):
    q = rg.RandomShuffleQueue(100, 0, rg.int32, shapes=[[]], seed=42)
    enq = q.enqueue_many(rg.placeholder(rg.int32, [None]))
    dq = q.dequeue_many(30)

    def drain():
        env = Env()
        h = env.run1(q.queue_ref)
        env.run(enq, h, np.arange(30, dtype=np.int32))
        return env.run1(dq, h, np.int32(30)).tolist()

    a, b = drain(), drain()
    assert a == b and sorted(a) == list(range(30)) and a != list(range(30))


def test_random_shuffle_queue_min_after_dequeue(env, graph):
    q = rg.RandomShuffleQueue(10, 2, rg.int32, shapes=[[]], seed=1)
    h = env.run1(q.queue_ref)
    env.run(q.enqueue_many(rg.placeholder(rg.int32, [None])), h, np.arange(3, dtype=np.int32))
    env.run1(q.dequeue(), h)
    with pytest.raises(DeadlineExceededError):
        env.run(q.dequeue(), h, step=StepState(1, deadline=time.monotonic() + 0.15))
    env.run(q.close(), h)
    assert env.run1(q.dequeue_up_to(10), h, np.int32(10)).shape == (2,)


def test_priority_queue_kernels(env, graph):
    q = rg.PriorityQueue(10, [rg.string], shapes=[[]])
    h = env.run1(q.queue_ref)
    enq = q.enqueue_many((rg.placeholder(rg.int64, [None]), rg.placeholder(rg.string, [None])))
    env.run(enq, h, np.array([3, 1, 2], np.int64), np.array([b"c", b"a", b"b"], dtype=object))
    prio, names = env.run(q.dequeue_many(3)[0].op, h, np.int32(3))
    assert prio.tolist() == [1, 2, 3] and names.tolist() == [b"a", b"b", b"c"]
    assert prio.dtype == np.int64 and names.dtype == object


def test_session_producer_consumer(graph):
    from rill.exec import Session

    q = rg.FIFOQueue(3, [rg.int32, rg.string], shapes=[[], []])
    i = rg.placeholder(rg.int32, [], name="i")
    s = rg.placeholder(rg.string, [], name="s")
    enq = q.enqueue((i, s))
    close = q.close()
    batch = q.dequeue_up_to(4)
    with Session(graph=graph) as sess:

        def producer():
            for k in range(10):
                sess.run(enq, {i: k, s: str(k).encode()})
            sess.run(close)

        t = threading.Thread(target=producer)
        t.start()
        got = []
        while True:
            try:
                ints, strs = sess.run(batch)
            except OutOfRangeError:
                break
            assert 1 <= len(ints) <= 4
            assert strs.tolist() == [str(k).encode() for k in ints]
            got.extend(ints.tolist())
        t.join(30)
    assert got == list(range(10))


def test_dequeue_timeout_ms_bounds_the_wait_and_names_the_queue():
    from rill.exec import Session
    from rill.graph.errors import DeadlineExceededError as _Deadline

    g = rg.Graph()
    with g.as_default():
        q = rg.FIFOQueue(2, rg.float32, shapes=[[]], name="barrier")
        take = q.dequeue(timeout_ms=150)
        put = q.enqueue(1.0)
    with Session(graph=g) as sess:
        t0 = time.monotonic()
        with pytest.raises(_Deadline, match="'barrier'.*timeout_ms=150"):
            sess.run(take)
        assert time.monotonic() - t0 < 5
        sess.run(put)  # the session is still usable, and a satisfied dequeue does not time out
        assert sess.run(take) == 1.0
