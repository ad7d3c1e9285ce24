"""Resources: state that lives on a device and outlives steps (variables, queues, ...).

The graph refers to a resource by a *handle*, a `ResourceHandle` value produced by an op such as
VarHandleOp or FIFOQueueV2; kernels that take a handle find the resource in the device's
`ResourceMgr` (`ctx.resources`). Concurrent steps share one ResourceMgr per device, so every
resource here is thread-safe.

>>> from rill.graph.dtypes import float32
>>> mgr = ResourceMgr()
>>> v = mgr.lookup_or_create("", "w", lambda: Var(float32, TensorShape([2])))
>>> v.assign(np.array([1.0, 2.0], np.float32))
>>> mgr.lookup("", "w").read()
array([1., 2.], dtype=float32)
"""

from __future__ import annotations

import heapq
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rill.graph.dtypes import DType, float32, int64
from rill.graph.errors import (
    AlreadyExistsError,
    CancelledError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
)
from rill.graph.shapes import TensorShape, unknown_shape

__all__ = [
    "DEFAULT_CONTAINER",
    "FIFOQueue",
    "PriorityQueue",
    "QueueBase",
    "RandomShuffleQueue",
    "ResourceHandle",
    "ResourceMgr",
    "Var",
    "handle_array",
    "handle_of",
    "update_vars",
]

DEFAULT_CONTAINER = "localhost"


@dataclass(frozen=True)
class ResourceHandle:
    """The value of a `resource` tensor: where a resource lives and what it holds.

    `kind` names the resource class ("Var", "FIFOQueue", ...) so a kernel given the wrong kind of
    handle can say so. Handles are small immutable values; equal handles name the same resource.
    """

    device: str
    container: str
    name: str
    kind: str
    dtype: DType | None = None
    shape: TensorShape | None = None

    def __repr__(self) -> str:
        extra = f" {self.dtype.name}{self.shape}" if self.dtype is not None else ""
        return f"<ResourceHandle {self.kind} {self.container}/{self.name}{extra} on {self.device}>"


def handle_of(value) -> ResourceHandle:
    """The ResourceHandle in a kernel input (a handle, or a 0-d object array holding one)."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise InvalidArgumentError(
                f"expected a scalar resource handle, got shape {value.shape}"
            )
        value = value[()]
    if not isinstance(value, ResourceHandle):
        raise InvalidArgumentError(f"expected a resource handle, got {type(value).__name__}")
    return value


def handle_array(handle: ResourceHandle) -> np.ndarray:
    """A handle as a kernel output: a 0-d object array (the value of a scalar resource tensor)."""
    out = np.empty((), dtype=object)
    out[()] = handle
    return out


class ResourceMgr:
    """The resources of one device, by (container, name). Thread-safe; outlives steps.

    The executor builds one per device; tests build their own. Containers are created on demand;
    the empty container name means DEFAULT_CONTAINER, as in TensorFlow.
    """

    def __init__(self, default_container: str = DEFAULT_CONTAINER):
        self.default_container = default_container
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, object]] = {}
        self.generation = 0  # counts creations and deletions (a captured step's check)

    def _container(self, container: str) -> str:
        return container or self.default_container

    def create(self, container: str, name: str, resource) -> None:
        """Adds `resource`; AlreadyExistsError when the name is taken."""
        c = self._container(container)
        with self._lock:
            items = self._containers.setdefault(c, {})
            if name in items:
                raise AlreadyExistsError(f"resource {c}/{name} already exists")
            items[name] = resource
            self.generation += 1

    def lookup(self, container: str, name: str, cls: type | None = None):
        """The resource (container, name); NotFoundError when absent, InvalidArgumentError when it
        is not an instance of `cls`."""
        c = self._container(container)
        with self._lock:
            r = self._containers.get(c, {}).get(name)
        if r is None:
            raise NotFoundError(f"resource {c}/{name} does not exist")
        if cls is not None and not isinstance(r, cls):
            raise InvalidArgumentError(
                f"resource {c}/{name} is a {type(r).__name__}, expected a {cls.__name__}"
            )
        return r

    def get(self, container: str, name: str):
        """The resource, or None when absent."""
        with self._lock:
            return self._containers.get(self._container(container), {}).get(name)

    def lookup_or_create(self, container: str, name: str, factory: Callable[[], object]):
        """The resource (container, name), creating it with `factory()` when absent. Atomic: of
        concurrent callers exactly one factory result is kept and all of them get it."""
        c = self._container(container)
        with self._lock:
            items = self._containers.setdefault(c, {})
            r = items.get(name)
            if r is None:
                r = items[name] = factory()
                self.generation += 1
            return r

    def delete(self, container: str, name: str) -> None:
        """Removes the resource; NotFoundError when absent. Steps holding it keep their
        reference; a queue being deleted is closed so that no waiter hangs on it."""
        c = self._container(container)
        with self._lock:
            r = self._containers.get(c, {}).pop(name, None)
            self.generation += 1
        if r is None:
            raise NotFoundError(f"resource {c}/{name} does not exist")
        _release(r)

    def cleanup(self, container: str) -> None:
        """Removes a whole container (no error when it does not exist)."""
        with self._lock:
            items = self._containers.pop(self._container(container), {})
            self.generation += 1
        for r in items.values():
            _release(r)

    def clear(self) -> None:
        with self._lock:
            containers, self._containers = self._containers, {}
            self.generation += 1
        for items in containers.values():
            for r in items.values():
                _release(r)

    def names(self, container: str | None = None) -> list[tuple[str, str]]:
        """The (container, name) pairs held, optionally of one container."""
        with self._lock:
            return sorted(
                (c, n)
                for c, items in self._containers.items()
                if container is None or c == self._container(container)
                for n in items
            )

    def __len__(self) -> int:
        with self._lock:
            return sum(len(items) for items in self._containers.values())

    def all(self) -> list:
        """Every resource held (a snapshot)."""
        with self._lock:
            return [r for items in self._containers.values() for r in items.values()]


def _release(resource) -> None:
    close = getattr(resource, "close", None)
    if close is not None:
        close(cancel_pending_enqueues=True)


def _frozen(value):
    """A read-only view of a numpy array (no copy); other array types pass through.

    Values are copy-on-write: updates install new arrays and nothing writes into an installed
    one, so a reference handed to a reader stays valid. The read-only flag makes an accidental
    in-place write by a consumer fail loudly instead of corrupting the variable.
    """
    if isinstance(value, np.ndarray):
        if value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        return value
    return value


def _same_dtype(value, dtype: DType) -> bool:
    got = value.dtype
    if dtype.np.kind == "O":
        return got.kind in "OSU"
    return got == dtype.np


class Var:
    """A variable: a dtype, a declared (possibly partial) shape, and a value or none yet.

    Thread-safety: a value that has been handed out is never mutated, so a reference a reader
    holds never changes; updates install new arrays. The one exception is `update_vars(...,
    in_place=True)`, which may write into the current value when nothing but the variable
    refers to it (so no reader can see the write). Reads, assignments and updates serialize on
    the variable's lock, so a read-modify-write (AssignAdd, scatter) never loses a concurrent
    update and a read never sees half of an in-place one.
    """

    __slots__ = ("dtype", "shape", "name", "_value", "_lock")

    def __init__(self, dtype: DType = float32, shape: TensorShape | None = None, name: str = ""):
        self.dtype = dtype
        self.shape = shape if shape is not None else unknown_shape()
        self.name = name
        self._value = None
        self._lock = threading.Lock()

    @property
    def is_initialized(self) -> bool:
        return self._value is not None

    def _uninitialized(self) -> FailedPreconditionError:
        return FailedPreconditionError(
            f"variable {self.name!r} is not initialized: it was read before any value was "
            "assigned to it; run the initializer (e.g. global_variables_initializer()) first"
        )

    def read(self):
        with self._lock:
            v = self._value
        if v is None:
            raise self._uninitialized()
        return v

    def check_value(self, value, validate_shape: bool) -> None:
        if not _same_dtype(value, self.dtype):
            raise InvalidArgumentError(
                f"cannot assign a {value.dtype} value to variable {self.name!r} of dtype "
                f"{self.dtype.name}"
            )
        if validate_shape and not self.shape.is_compatible_with(TensorShape(value.shape)):
            raise InvalidArgumentError(
                f"cannot assign a value of shape {TensorShape(value.shape)} to variable "
                f"{self.name!r} of shape {self.shape} (validate_shape=True)"
            )

    def assign(self, value, validate_shape: bool = False) -> None:
        """Installs `value` (checked first; on error the variable is unchanged)."""
        self.check_value(value, validate_shape)
        # The value may be a caller's array (a feed): keep a private copy, as TensorFlow copies
        # feeds, so later writes to the caller's array cannot reach the variable.
        if isinstance(value, np.ndarray) and (value.flags.writeable or value.base is not None):
            value = value.copy()
        with self._lock:
            self._value = _frozen(value)

    def update(self, fn: Callable):
        """Installs fn(current value) under the variable's lock; returns the new value.

        `fn` must return a new array (never write into its argument) and may raise, leaving the
        variable unchanged.
        """
        with self._lock:
            old = self._value
            if old is None:
                raise self._uninitialized()
            new = fn(old)
            if not _same_dtype(new, self.dtype):
                raise InvalidArgumentError(
                    f"update of variable {self.name!r} produced {new.dtype}, expected "
                    f"{self.dtype.name}"
                )
            self._value = _frozen(new)
            return self._value

    def __repr__(self) -> str:
        state = "initialized" if self._value is not None else "uninitialized"
        return f"<Var {self.name!r} {self.dtype.name}{self.shape} {state}>"


def _unshared_base(var: Var) -> np.ndarray | None:
    """The writable array behind var's value when nothing but the variable refers to it, else
    None. Call with the variable's lock held.

    An installed value is a read-only view (see _frozen) of an array that owns its memory.
    Every reader holds a reference to that view, or to a view or buffer derived from it, and
    each of those keeps the base array alive; so when the view is referenced only by the
    variable and the base only by the view, no reader can ever observe a write into the base.
    """
    value = var._value
    if type(value) is not np.ndarray:
        return None
    base = value.base
    if type(base) is not np.ndarray:
        return None
    # References: var._value, `value` here and getrefcount's argument; for the base, the view's
    # base pointer, `base` here and the argument. test_resources checks these minimums hold.
    if sys.getrefcount(value) > 3 or sys.getrefcount(base) > 3:
        return None
    if (
        base.base is not None
        or not base.flags.writeable
        or base.shape != value.shape
        or base.strides != value.strides
        or base.dtype != value.dtype
        or base.__array_interface__["data"][0] != value.__array_interface__["data"][0]
    ):
        return None
    return base


def update_vars(variables, fn: Callable, in_place: bool = False) -> None:
    """Installs fn(*current values) into several variables as one atomic update.

    `fn` returns one array per variable (a new array, or the current one to leave that variable
    as it is) and may raise, leaving every variable unchanged. The locks are taken in one global
    order (by id), so concurrent multi-variable updates (an optimizer's fused apply ops, which
    update a variable and its slots together) never deadlock; a variable named twice is locked
    once.

    With in_place=True, a variable whose value nothing else refers to is passed to `fn` as a
    writable array (the others as their read-only values, named twice counts as shared); `fn`
    may write its result into a writable argument and return that argument. `fn` must do every
    check that can fail before it writes anything, since a write cannot be undone.
    """
    ordered = sorted(set(variables), key=id)
    for v in ordered:
        v._lock.acquire()
    try:
        for v in variables:
            if v._value is None:
                raise v._uninitialized()
        if in_place:
            once = len(ordered) == len(variables)
            olds = [
                (_unshared_base(v) if once or variables.count(v) == 1 else None) for v in variables
            ]
            olds = [v._value if b is None else b for v, b in zip(variables, olds)]
        else:
            olds = [v._value for v in variables]
        news = fn(*olds)
        for v, old, new in zip(variables, olds, news):
            if new is not old and not _same_dtype(new, v.dtype):
                raise InvalidArgumentError(
                    f"update of variable {v.name!r} produced {new.dtype}, expected {v.dtype.name}"
                )
        for v, old, new in zip(variables, olds, news):
            if new is not old:
                v._value = _frozen(new)
    finally:
        for v in ordered:
            v._lock.release()


# -- queues -------------------------------------------------------------------------------------

# Waiting operations sleep at most this long between checks for step cancellation or deadline.
WAIT_SLICE_S = 0.05


class QueueBase:
    """A bounded queue of elements (tuples of arrays), shared by concurrent steps.

    Semantics follow TensorFlow's queues:

    - Enqueue attempts are served in arrival order, and so are dequeue attempts: an attempt
      waits behind earlier ones of its kind. A batch attempt (EnqueueMany / DequeueMany) moves
      elements one at a time as room or elements appear, so a batch larger than the capacity
      still completes when the other side keeps up.
    - close(): later enqueues fail with CancelledError; enqueues already waiting still complete,
      unless cancel_pending_enqueues, which fails them with CancelledError. Elements left in a
      closed queue can still be dequeued; a dequeue that cannot be satisfied any more fails with
      OutOfRangeError (elements it had taken go back), while DequeueUpTo returns what is left.
    - Waiting happens in slices of WAIT_SLICE_S seconds with `ctx.check_cancelled()` between
      them, so a cancelled step or one past its deadline stops waiting.

    Subclasses choose the storage order through _size/_push/_pop/_restore/_available.
    """

    kind = "Queue"

    def __init__(self, name: str, component_types, shapes, capacity: int = -1):
        self.name = name
        self.component_types = tuple(component_types)
        shapes = [TensorShape(s) if not isinstance(s, TensorShape) else s for s in shapes or ()]
        self.shapes = tuple(shapes) if shapes else None
        if self.shapes is not None and len(self.shapes) != len(self.component_types):
            raise InvalidArgumentError(
                f"queue {name!r}: {len(self.shapes)} shapes for "
                f"{len(self.component_types)} component types"
            )
        self.capacity = capacity if capacity >= 0 else 2**62
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._cancel_enqueues = False
        self._enqueuers: deque = deque()
        self._dequeuers: deque = deque()

    # -- storage (called with the lock held) ----------------------------------------------------

    def _size(self) -> int:
        raise NotImplementedError

    def _push(self, element: tuple) -> None:
        raise NotImplementedError

    def _pop(self) -> tuple:
        raise NotImplementedError

    def _restore(self, elements: list[tuple]) -> None:
        """Puts back elements taken by a dequeue that failed, as if never taken."""
        for e in elements:
            self._push(e)

    def _available(self) -> int:
        return self._size()

    # -- validation -----------------------------------------------------------------------------

    def signature(self) -> tuple:
        """What a second creation of this shared queue must agree with."""
        return (type(self).__name__, self.component_types, self.shapes, self.capacity)

    def check_components(self, components, many: bool) -> int:
        """Validates enqueue inputs; returns the number of elements they hold."""
        want = self.component_types
        if len(components) != len(want):
            raise InvalidArgumentError(
                f"queue {self.name!r} has {len(want)} components, got {len(components)} values"
            )
        n = 1
        for i, (c, t) in enumerate(zip(components, want)):
            if not _same_dtype(c, t):
                raise InvalidArgumentError(
                    f"queue {self.name!r}: component {i} must be {t.name}, got {c.dtype}"
                )
            shape = c.shape
            if many:
                if c.ndim == 0:
                    raise InvalidArgumentError(
                        f"queue {self.name!r}: EnqueueMany component {i} must have rank >= 1 "
                        f"(dimension 0 indexes the elements), got a scalar"
                    )
                if i == 0:
                    n = shape[0]
                elif shape[0] != n:
                    raise InvalidArgumentError(
                        f"queue {self.name!r}: EnqueueMany components must have the same size "
                        f"in dimension 0; component 0 has {n}, component {i} has {shape[0]}"
                    )
                shape = shape[1:]
            if self.shapes is not None and tuple(shape) != self.shapes[i].dims:
                raise InvalidArgumentError(
                    f"queue {self.name!r}: component {i} must have shape {self.shapes[i]}, "
                    f"got {TensorShape(shape)}" + (" per element" if many else "")
                )
        return n

    # -- operations -----------------------------------------------------------------------------

    def _wait(self, ctx) -> None:
        self._cond.wait(WAIT_SLICE_S)
        if ctx is not None:
            ctx.check_cancelled()

    def enqueue(self, components: tuple, ctx=None) -> None:
        self.check_components(components, many=False)
        self._enqueue_elements([tuple(components)], ctx)

    def enqueue_many(self, components: tuple, ctx=None) -> None:
        n = self.check_components(components, many=True)
        self._enqueue_elements([tuple(c[i, ...] for c in components) for i in range(n)], ctx)

    def _enqueue_elements(self, elements: list[tuple], ctx) -> None:
        with self._cond:
            if self._closed:
                raise CancelledError(f"queue {self.name!r} is closed")
            token = object()
            self._enqueuers.append(token)
            try:
                done = 0
                while True:
                    if self._cancel_enqueues:
                        raise CancelledError(
                            f"queue {self.name!r} was closed with cancel_pending_enqueues "
                            f"while this enqueue waited ({done} of {len(elements)} elements in)"
                        )
                    if self._enqueuers[0] is token:
                        start = done
                        while done < len(elements) and self._size() < self.capacity:
                            self._push(elements[done])
                            done += 1
                        if done > start:
                            self._cond.notify_all()
                        if done == len(elements):
                            return
                    self._wait(ctx)
            finally:
                self._enqueuers.remove(token)
                self._cond.notify_all()

    def dequeue(self, ctx=None) -> tuple:
        return self._dequeue_elements(1, ctx, allow_small=False)[0]

    def dequeue_many(self, n: int, ctx=None, allow_small: bool = False) -> list[tuple]:
        """n elements (fewer only with allow_small, once the queue is closed)."""
        if n < 0:
            raise InvalidArgumentError(f"cannot dequeue {n} < 0 elements from {self.name!r}")
        if self.shapes is None:
            raise InvalidArgumentError(
                f"queue {self.name!r}: DequeueMany and DequeueUpTo need the queue's component "
                "shapes, but it was created without shapes"
            )
        if n == 0:
            return []
        return self._dequeue_elements(n, ctx, allow_small)

    def _dequeue_elements(self, n: int, ctx, allow_small: bool) -> list[tuple]:
        taken: list[tuple] = []
        with self._cond:
            token = object()
            self._dequeuers.append(token)
            ok = False
            try:
                while True:
                    if self._dequeuers[0] is token:
                        start = len(taken)
                        while len(taken) < n and self._available() > 0:
                            taken.append(self._pop())
                        if len(taken) > start:
                            self._cond.notify_all()
                        if len(taken) == n:
                            ok = True
                            return taken
                        # Closed: only enqueues already waiting can still add elements.
                        if self._closed and not self._enqueuers:
                            if allow_small and taken:
                                ok = True
                                return taken
                            raise OutOfRangeError(
                                f"{self.kind} {self.name!r} is closed and has insufficient "
                                f"elements (requested {n}, current size "
                                f"{len(taken) + self._size()})"
                            )
                    self._wait(ctx)
            finally:
                if not ok and taken:
                    self._restore(taken)
                self._dequeuers.remove(token)
                self._cond.notify_all()

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self._cond:
            self._closed = True
            if cancel_pending_enqueues:
                self._cancel_enqueues = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        with self._cond:
            return self._size()

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name!r} size={self._size()} closed={self._closed}>"


class FIFOQueue(QueueBase):
    kind = "FIFOQueue"

    def __init__(self, name, component_types, shapes=None, capacity: int = -1):
        super().__init__(name, component_types, shapes, capacity)
        self._items: deque = deque()

    def _size(self) -> int:
        return len(self._items)

    def _push(self, element) -> None:
        self._items.append(element)

    def _pop(self):
        return self._items.popleft()

    def _restore(self, elements) -> None:
        self._items.extendleft(reversed(elements))


class RandomShuffleQueue(QueueBase):
    """Dequeues a uniformly random element, and only while more than min_after_dequeue elements
    remain, until the queue is closed. seed = seed2 = 0 means a nondeterministic seed."""

    kind = "RandomShuffleQueue"

    def __init__(
        self, name, component_types, shapes=None, capacity=-1, min_after_dequeue=0, seed=0, seed2=0
    ):
        super().__init__(name, component_types, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        self._rng = np.random.default_rng(None if seed == 0 and seed2 == 0 else [seed, seed2])
        self._items: list = []

    def signature(self) -> tuple:
        return (*super().signature(), self.min_after_dequeue)

    def _size(self) -> int:
        return len(self._items)

    def _available(self) -> int:
        return len(self._items) - (0 if self._closed else self.min_after_dequeue)

    def _push(self, element) -> None:
        self._items.append(element)

    def _pop(self):
        i = int(self._rng.integers(len(self._items)))
        items = self._items
        items[i], items[-1] = items[-1], items[i]
        return items.pop()


class PriorityQueue(QueueBase):
    """Elements are (int64 scalar priority, *components); the lowest priority leaves first, and
    equal priorities leave in the order they arrived."""

    kind = "PriorityQueue"

    def __init__(self, name, component_types, shapes, capacity: int = -1):
        shapes = list(shapes or ())
        if len(shapes) != len(component_types):
            raise InvalidArgumentError(
                f"PriorityQueue {name!r} needs one shape per component: {len(component_types)} "
                f"types, {len(shapes)} shapes"
            )
        super().__init__(name, (int64, *component_types), [(), *shapes], capacity)
        self._heap: list = []
        self._seq = 0  # arrival order among equal priorities
        self._front = 0  # decreasing: restored elements go before everything of their priority

    def _size(self) -> int:
        return len(self._heap)

    def _push(self, element) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (int(element[0]), self._seq, element))

    def _restore(self, elements) -> None:
        for e in reversed(elements):
            self._front -= 1
            heapq.heappush(self._heap, (int(e[0]), self._front, e))

    def _pop(self):
        return heapq.heappop(self._heap)[2]
