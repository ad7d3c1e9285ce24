"""Queues: FIFOQueueV2, RandomShuffleQueueV2, PriorityQueueV2 and the ops that use them.

A queue is a resource shared by steps: one step enqueues while another dequeues, and a dequeue
waits for elements (paper §3.2, queues for input pipelines and synchronization). The classes
follow TF1's `tf.queue` API:

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     q = FIFOQueue(10, [rg.float32, rg.int32], shapes=[[2], []])
...     q.dequeue_many(4)
[<Tensor 'fifo_queue_DequeueMany:0' f32[4,2]>, <Tensor 'fifo_queue_DequeueMany:1' i32[4]>]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rill.graph import dtypes
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.random_ops import get_seed
from rill.graph.ops.state_ops import resource_producer
from rill.graph.shapes import TensorShape, as_shape, scalar, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = ["FIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue"]

_QUEUE_OPS = ("FIFOQueueV2", "RandomShuffleQueueV2", "PriorityQueueV2")


# -- shape functions ----------------------------------------------------------------------------


def queue_signature(handle: Tensor):
    """(component dtypes, component shapes or None) of the queue behind `handle`, or None when
    the handle's producer is not visible. A PriorityQueue's priority comes first."""
    op = resource_producer(handle)
    if op is None or op.type not in _QUEUE_OPS:
        return None
    types = list(op.attrs["component_types"])
    shapes = [as_shape(s) for s in op.attrs["shapes"]] or None
    if op.type == "PriorityQueueV2":
        types = [dtypes.int64, *types]
        shapes = [scalar(), *shapes] if shapes is not None else None
    return types, shapes


def _queue_shape(op):
    types, shapes = op.attrs["component_types"], op.attrs["shapes"]
    if op.type == "PriorityQueueV2":
        if len(shapes) != len(types):
            raise ValueError(
                f"a PriorityQueue needs one shape per component type: got {len(types)} types "
                f"and {len(shapes)} shapes"
            )
    elif shapes and len(shapes) != len(types):
        raise ValueError(
            f"shapes has {len(shapes)} entries but component_types has {len(types)}; give one "
            "shape per component or none"
        )
    for i, s in enumerate(shapes):
        if not as_shape(s).is_fully_defined():
            raise ValueError(f"the shape of component {i}, {as_shape(s)}, is not fully defined")
    return scalar()


def _check_handle(op):
    h = op._inputs[0].shape
    if h.rank not in (None, 0):
        raise ValueError(f"handle must be a scalar resource, got shape {h}")


def _enqueue_shape(op):
    _check_handle(op)
    sig = queue_signature(op._inputs[0])
    if sig is None:
        return []
    types, shapes = sig
    got = list(op.attrs["Tcomponents"])
    if got != types:
        raise ValueError(
            f"the queue holds components of types {[t.name for t in types]}, got "
            f"{[t.name for t in got]}"
        )
    many = op.type == "QueueEnqueueManyV2"
    comps = op._inputs[1:]
    batch = TensorShape([None]) if many else TensorShape([])
    for i, t in enumerate(comps):
        if many:
            t.shape.with_rank_at_least(1)
            try:
                batch = batch.merge_with(t.shape[:1])
            except ValueError:
                raise ValueError(
                    f"all components must have the same first (batch) dimension; component "
                    f"{i} has shape {t.shape}, earlier ones {batch}"
                ) from None
        if shapes is None:
            continue
        want = batch.concatenate(shapes[i]) if many else shapes[i]
        if not t.shape.is_compatible_with(want):
            raise ValueError(f"component {i} must have shape {want}, got {t.shape}")
    return []


def _dequeue_shapes(op, leading: TensorShape | None):
    _check_handle(op)
    n = len(op.outputs)
    sig = queue_signature(op._inputs[0])
    if sig is None:
        return [unknown_shape()] * n
    types, shapes = sig
    got = list(op.attrs["component_types"])
    if got != types:
        raise ValueError(
            f"the queue holds components of types {[t.name for t in types]}, but "
            f"component_types is {[t.name for t in got]}"
        )
    if shapes is None:
        return [unknown_shape()] * n
    if leading is None:
        return shapes
    return [leading.concatenate(s) for s in shapes]


def _dequeue_many_n(op) -> TensorShape:
    ns = op._inputs[1].shape
    if ns.rank not in (None, 0):
        raise ValueError(f"n must be a scalar, got shape {ns}")
    v = constant_value(op._inputs[1])
    if v is not None and int(v) < 0:
        raise ValueError(f"n must be >= 0, got {int(v)}")
    return TensorShape([None if v is None else int(v)])


defop(
    "FIFOQueueV2",
    outputs=["handle: resource"],
    attrs=[
        "component_types: list(type) >= 1",
        "shapes: list(shape) >= 0 = []",
        "capacity: int = -1",
        "container: string = ''",
        "shared_name: string = ''",
    ],
    shape=_queue_shape,
    stateful=True,
    doc="A queue that produces elements in first-in first-out order.",
)

defop(
    "RandomShuffleQueueV2",
    outputs=["handle: resource"],
    attrs=[
        "component_types: list(type) >= 1",
        "shapes: list(shape) >= 0 = []",
        "capacity: int = -1",
        "min_after_dequeue: int = 0",
        "seed: int = 0",
        "seed2: int = 0",
        "container: string = ''",
        "shared_name: string = ''",
    ],
    shape=_queue_shape,
    stateful=True,
    doc="A queue that dequeues a random element, keeping min_after_dequeue until closed.",
)

defop(
    "PriorityQueueV2",
    outputs=["handle: resource"],
    attrs=[
        "component_types: list(type) >= 0 = []",
        "shapes: list(shape) >= 0",
        "capacity: int = -1",
        "container: string = ''",
        "shared_name: string = ''",
    ],
    shape=_queue_shape,
    stateful=True,
    doc="A queue whose elements (int64 priority, *components) leave in ascending priority.",
)

for _name, _doc in (
    ("QueueEnqueueV2", "Enqueues one element; waits while the queue is full."),
    ("QueueEnqueueManyV2", "Enqueues the slices of its components along dimension 0."),
):
    defop(
        _name,
        inputs=["handle: resource", "components: Tcomponents"],
        attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
        shape=_enqueue_shape,
        stateful=True,
        doc=_doc,
    )

defop(
    "QueueDequeueV2",
    inputs=["handle: resource"],
    outputs=["components: component_types"],
    attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
    shape=lambda op: _dequeue_shapes(op, None),
    stateful=True,
    doc="Dequeues one element; waits while the queue is empty.",
)

defop(
    "QueueDequeueManyV2",
    inputs=["handle: resource", "n: int32"],
    outputs=["components: component_types"],
    attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
    shape=lambda op: _dequeue_shapes(op, _dequeue_many_n(op)),
    stateful=True,
    doc="Dequeues n elements stacked along a new dimension 0.",
)


def _dequeue_up_to_shapes(op):
    _dequeue_many_n(op)
    return _dequeue_shapes(op, TensorShape([None]))


defop(
    "QueueDequeueUpToV2",
    inputs=["handle: resource", "n: int32"],
    outputs=["components: component_types"],
    attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
    shape=_dequeue_up_to_shapes,
    stateful=True,
    doc="Like QueueDequeueManyV2, but once the queue is closed returns what is left (<= n).",
)

defop(
    "QueueCloseV2",
    inputs=["handle: resource"],
    attrs=["cancel_pending_enqueues: bool = false"],
    shape=lambda op: (_check_handle(op), [])[1],
    stateful=True,
    doc="Closes the queue: later enqueues fail; what is in it can still be dequeued.",
)

defop(
    "QueueSizeV2",
    inputs=["handle: resource"],
    outputs=["size: int32"],
    shape=lambda op: (_check_handle(op), scalar())[1],
    stateful=True,
    doc="The number of elements in the queue.",
)


# -- queue classes ------------------------------------------------------------------------------


def _as_type_list(types) -> list[dtypes.DType]:
    if isinstance(types, (dtypes.DType, str)) or not isinstance(types, Sequence):
        types = [types]
    return [dtypes.as_dtype(t) for t in types]


def _as_shape_list(shapes, n: int) -> list[TensorShape] | None:
    if shapes is None:
        return None
    shapes = list(shapes)
    # A single shape may be given for a one-component queue: [2, 3] rather than [[2, 3]].
    if n == 1 and shapes and all(isinstance(d, int) or d is None for d in shapes):
        shapes = [shapes]
    if len(shapes) != n:
        raise ValueError(f"expected {n} shapes, one per component, got {len(shapes)}")
    out = [as_shape(s) for s in shapes]
    for i, s in enumerate(out):
        if not s.is_fully_defined():
            raise ValueError(f"the shape of component {i}, {s}, is not fully defined")
    return out


class QueueBase:
    """A queue in the graph: its handle (`queue_ref`), component dtypes, shapes and names.

    Values are given and returned as one tensor (one component), a list of tensors, or a dict
    when the queue was built with `names`.
    """

    def __init__(self, dtypes_, shapes, names, queue_ref: Tensor):
        self._dtypes = list(dtypes_)
        self._shapes = list(shapes) if shapes is not None else [unknown_shape()] * len(dtypes_)
        if names is not None:
            names = list(names) if not isinstance(names, str) else [names]
            if len(names) != len(self._dtypes):
                raise ValueError(
                    f"names has {len(names)} entries for {len(self._dtypes)} components"
                )
        self._names = names
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @property
    def queue_ref(self) -> Tensor:
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._queue_ref.op.name

    @property
    def dtypes(self) -> list[dtypes.DType]:
        return list(self._dtypes)

    @property
    def shapes(self) -> list[TensorShape]:
        return list(self._shapes)

    @property
    def names(self):
        return None if self._names is None else list(self._names)

    def _flatten(self, vals) -> list:
        if self._names is not None:
            if not isinstance(vals, Mapping):
                raise TypeError(f"queue {self.name} has names; enqueue a dict, got {vals!r}")
            if set(vals) != set(self._names):
                raise ValueError(
                    f"queue {self.name} expects keys {sorted(self._names)}, got {sorted(vals)}"
                )
            return [vals[k] for k in self._names]
        # As in TensorFlow, a list or tuple is one value per component, even for one component.
        vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(
                f"queue {self.name} has {len(self._dtypes)} components, got {len(vals)} values"
            )
        return vals

    def _enqueue(self, op_type: str, vals, name: str):
        g = get_default_graph()
        with g.name_scope(name) as scope:
            comps = [
                convert_to_tensor(v, dtype=t, name=f"component_{i}")
                for i, (v, t) in enumerate(zip(self._flatten(vals), self._dtypes))
            ]
            return g.create_op(op_type, [self._queue_ref, comps], name=scope)

    def enqueue(self, vals, name: str | None = None) -> Operation:
        """Adds one element; the op waits while the queue is full."""
        return self._enqueue("QueueEnqueueV2", vals, name or f"{self._name}_enqueue")

    def enqueue_many(self, vals, name: str | None = None) -> Operation:
        """Adds the slices of `vals` along dimension 0 as separate elements."""
        return self._enqueue("QueueEnqueueManyV2", vals, name or f"{self._name}_EnqueueMany")

    def _result(self, outputs):
        if self._names is not None:
            return dict(zip(self._names, outputs))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def _dequeue(self, op_type: str, n, name: str, timeout_ms: int | None = None):
        g = get_default_graph()
        inputs = [self._queue_ref] if n is None else [self._queue_ref, n]
        attrs = {"component_types": self._dtypes}
        if timeout_ms is not None:
            attrs["timeout_ms"] = int(timeout_ms)
        op = g.create_op(op_type, inputs, attrs, name=name)
        return self._result(op.outputs)

    def dequeue(self, name: str | None = None, timeout_ms: int | None = None):
        """Removes one element; the op waits while the queue is empty — at most `timeout_ms`
        milliseconds when given (rill honors the attr; TensorFlow ignores it), then fails with
        DeadlineExceededError."""
        return self._dequeue("QueueDequeueV2", None, name or f"{self._name}_Dequeue", timeout_ms)

    def dequeue_many(self, n, name: str | None = None, timeout_ms: int | None = None):
        """Removes n elements and stacks each component along a new dimension 0."""
        return self._dequeue(
            "QueueDequeueManyV2", n, name or f"{self._name}_DequeueMany", timeout_ms
        )

    def dequeue_up_to(self, n, name: str | None = None):
        """Like dequeue_many, but once the queue is closed returns the remaining elements."""
        return self._dequeue("QueueDequeueUpToV2", n, name or f"{self._name}_DequeueUpTo")

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Operation:
        """Closes the queue; with cancel_pending_enqueues, waiting enqueues fail too."""
        attrs = {"cancel_pending_enqueues": True} if cancel_pending_enqueues else {}
        return get_default_graph().create_op(
            "QueueCloseV2", [self._queue_ref], attrs, name=name or f"{self._name}_Close"
        )

    def size(self, name: str | None = None) -> Tensor:
        return (
            get_default_graph()
            .create_op("QueueSizeV2", [self._queue_ref], name=name or f"{self._name}_Size")
            .outputs[0]
        )


def _queue_attrs(types, shapes, capacity, shared_name) -> dict:
    attrs = {"component_types": types, "capacity": int(capacity)}
    if shapes is not None:
        attrs["shapes"] = shapes
    if shared_name:
        attrs["shared_name"] = shared_name
    return attrs


class FIFOQueue(QueueBase):
    """A first-in first-out queue of at most `capacity` elements.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     q = FIFOQueue(3, rg.float32, shapes=[[]])
    ...     (q.queue_ref.op.type, q.enqueue(1.0).name, q.dequeue().shape)
    ('FIFOQueueV2', 'fifo_queue_enqueue', TensorShape([]))
    """

    def __init__(
        self,
        capacity: int,
        dtypes,
        shapes=None,
        names=None,
        shared_name: str | None = None,
        name: str = "fifo_queue",
    ):
        types = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, len(types))
        ref = (
            get_default_graph()
            .create_op("FIFOQueueV2", [], _queue_attrs(types, shapes, capacity, shared_name), name)
            .outputs[0]
        )
        super().__init__(types, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues elements in random order, holding back `min_after_dequeue`
    elements (for a good mix) until it is closed."""

    def __init__(
        self,
        capacity: int,
        min_after_dequeue: int,
        dtypes,
        shapes=None,
        names=None,
        seed: int | None = None,
        shared_name: str | None = None,
        name: str = "random_shuffle_queue",
    ):
        g = get_default_graph()
        types = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, len(types))
        attrs = _queue_attrs(types, shapes, capacity, shared_name)
        attrs["min_after_dequeue"] = int(min_after_dequeue)
        seed1, seed2 = get_seed(seed)
        attrs["seed"], attrs["seed2"] = seed1 or 0, seed2 or 0
        ref = g.create_op("RandomShuffleQueueV2", [], attrs, name).outputs[0]
        super().__init__(types, shapes, names, ref)


class PriorityQueue(QueueBase):
    """A queue whose elements are (int64 priority, *components), dequeued lowest priority first.

    Enqueue and dequeue values start with the priority (a scalar, or a vector for the many
    forms); `types` and `shapes` describe the other components.
    """

    def __init__(
        self,
        capacity: int,
        types,
        shapes=None,
        names=None,
        shared_name: str | None = None,
        name: str = "priority_queue",
    ):
        types = _as_type_list(types) if types else []
        if shapes is None:
            raise ValueError("a PriorityQueue needs the shape of every component")
        shapes = _as_shape_list(shapes, len(types)) if types else []
        if names is not None:
            raise ValueError("a PriorityQueue does not support names")
        attrs = {"component_types": types, "shapes": shapes, "capacity": int(capacity)}
        if shared_name:
            attrs["shared_name"] = shared_name
        ref = get_default_graph().create_op("PriorityQueueV2", [], attrs, name).outputs[0]
        super().__init__([dtypes.int64, *types], [scalar(), *shapes], None, ref)
