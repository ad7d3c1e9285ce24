"""Kernels for rill.graph.ops.data_flow_ops: queues in the device's ResourceMgr.

Queue operations may wait (for room or for elements), so they are registered blocking: the
executor runs them on threads of their own. They wait in short slices and check the step's
cancellation and deadline between slices (rill.exec.resources.QueueBase).
"""

from __future__ import annotations

import time

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.resources import (
    FIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
    ResourceHandle,
    handle_array,
    handle_of,
)
from rill.graph.errors import DeadlineExceededError, InvalidArgumentError


def _creator(device, container: str, name: str, make):
    handle = handle_array(ResourceHandle(device.name, container, name, "Queue"))
    want = make().signature()

    def compute(ctx):
        q = ctx.resources.lookup_or_create(container, name, make)
        if not isinstance(q, QueueBase) or q.signature() != want:
            raise InvalidArgumentError(
                f"shared queue {name!r} already exists as {_describe(q)}, but this op asks for "
                f"{want}"
            )
        return handle

    return compute


def _describe(r) -> str:
    return repr(r.signature()) if isinstance(r, QueueBase) else type(r).__name__


@register_kernel("FIFOQueueV2", context=True)
def fifo_queue(component_types, shapes, capacity, container, shared_name, node, device):
    name = shared_name or node.name
    return _creator(
        device, container, name, lambda: FIFOQueue(name, component_types, shapes, capacity)
    )


@register_kernel("RandomShuffleQueueV2", context=True)
def random_shuffle_queue(
    component_types, shapes, capacity, min_after_dequeue, seed, seed2, container, shared_name,
    node, device,
):  # fmt: skip
    name = shared_name or node.name
    return _creator(
        device,
        container,
        name,
        lambda: RandomShuffleQueue(
            name, component_types, shapes, capacity, min_after_dequeue, seed, seed2
        ),
    )


@register_kernel("PriorityQueueV2", context=True)
def priority_queue(component_types, shapes, capacity, container, shared_name, node, device):
    name = shared_name or node.name
    return _creator(
        device, container, name, lambda: PriorityQueue(name, component_types, shapes, capacity)
    )


def lookup_queue(ctx, value) -> QueueBase:
    h = handle_of(value)
    return ctx.resources.lookup(h.container, h.name, QueueBase)


def _check_types(q: QueueBase, types) -> None:
    if tuple(types) != q.component_types:
        raise InvalidArgumentError(
            f"queue {q.name!r} holds components of types "
            f"{[t.name for t in q.component_types]}, the op expects {[t.name for t in types]}"
        )


class _OpDeadline:
    """The kernel's context with the op's own `timeout_ms` added to the step's deadline.

    TensorFlow accepts timeout_ms and ignores it ("not supported yet"); rill honors it, so that a
    wait on a queue (a synchronous-replica barrier, say) can be bounded per op: past it the op
    fails with DeadlineExceededError naming the queue and the timeout.
    """

    __slots__ = ("_ctx", "_deadline", "_what")

    def __init__(self, ctx, timeout_ms: int, what: str):
        self._ctx = ctx
        self._deadline = time.monotonic() + timeout_ms / 1000.0
        self._what = what

    def check_cancelled(self) -> None:
        self._ctx.check_cancelled()
        if time.monotonic() > self._deadline:
            raise DeadlineExceededError(self._what)


def _bounded(ctx, timeout_ms: int, q: QueueBase, action: str):
    if timeout_ms is None or timeout_ms <= 0:
        return ctx
    return _OpDeadline(
        ctx,
        timeout_ms,
        f"{action} on queue {q.name!r} waited longer than its timeout_ms={timeout_ms}",
    )


@register_kernel("QueueEnqueueV2", context=True, blocking=True)
def queue_enqueue(Tcomponents, timeout_ms):
    def compute(ctx, h, *components):
        q = lookup_queue(ctx, h)
        q.enqueue(components, _bounded(ctx, timeout_ms, q, "an enqueue"))

    return compute


@register_kernel("QueueEnqueueManyV2", context=True, blocking=True)
def queue_enqueue_many(Tcomponents, timeout_ms):
    def compute(ctx, h, *components):
        q = lookup_queue(ctx, h)
        q.enqueue_many(components, _bounded(ctx, timeout_ms, q, "an enqueue"))

    return compute


@register_kernel("QueueDequeueV2", context=True, blocking=True)
def queue_dequeue(component_types, timeout_ms):
    def compute(ctx, h):
        q = lookup_queue(ctx, h)
        _check_types(q, component_types)
        element = q.dequeue(_bounded(ctx, timeout_ms, q, "a dequeue"))
        return element[0] if len(element) == 1 else list(element)

    return compute


def _batch(q: QueueBase, elements: list[tuple]) -> list:
    out = []
    for j, (t, s) in enumerate(zip(q.component_types, q.shapes)):
        if elements:
            out.append(np.stack([e[j] for e in elements]))
        else:
            out.append(np.empty((0, *s.dims), dtype=t.np))
    return out


def _dequeue_many_kernel(allow_small: bool):
    def factory(component_types, timeout_ms):
        def compute(ctx, h, n):
            q = lookup_queue(ctx, h)
            _check_types(q, component_types)
            if np.ndim(n) != 0:
                raise InvalidArgumentError(f"n must be a scalar, got shape {np.shape(n)}")
            bounded = _bounded(ctx, timeout_ms, q, "a dequeue")
            out = _batch(q, q.dequeue_many(int(n), bounded, allow_small=allow_small))
            return out[0] if len(out) == 1 else out

        return compute

    return factory


register_kernel("QueueDequeueManyV2", context=True, blocking=True)(_dequeue_many_kernel(False))
register_kernel("QueueDequeueUpToV2", context=True, blocking=True)(_dequeue_many_kernel(True))


@register_kernel("QueueCloseV2", context=True)
def queue_close(cancel_pending_enqueues):
    def compute(ctx, h):
        lookup_queue(ctx, h).close(cancel_pending_enqueues)

    return compute


@register_kernel("QueueSizeV2", context=True)
def queue_size():
    def compute(ctx, h):
        return np.array(lookup_queue(ctx, h).size(), dtype=np.int32)

    return compute
