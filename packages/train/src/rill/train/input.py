"""Queue-based input pipelines of TensorFlow-1's `tf.train`: producers (`input_producer`,
`string_input_producer`, `range_input_producer`, `slice_input_producer`) and batchers
(`batch`, `shuffle_batch`, `batch_join`, `shuffle_batch_join`). Each adds a QueueRunner to the
graph's `queue_runners` collection; `start_queue_runners` starts them.

`num_epochs` counts epochs in a local variable: after the last epoch the producer's enqueue
fails with OutOfRangeError (a dequeue from a closed, empty queue), its QueueRunner closes the
queue, and consumers get OutOfRangeError once what is queued is used up.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.control_flow import cond
from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.nest import flatten, pack_sequence_as
from rill.graph.ops import math_ops
from rill.graph.ops.array_ops import identity
from rill.graph.ops.data_flow_ops import FIFOQueue, RandomShuffleQueue
from rill.graph.ops.gather_ops import gather
from rill.graph.ops.logic_ops import less_equal
from rill.graph.ops.math_ops import range as range_op
from rill.graph.ops.random_ops import random_shuffle
from rill.graph.ops.state_ops import Variable
from rill.graph.shapes import TensorShape
from rill.train import summary
from rill.train.queue_runner import QueueRunner, add_queue_runner
from rill.train.variable_scope import GraphKeys

__all__ = [
    "limit_epochs",
    "input_producer",
    "string_input_producer",
    "range_input_producer",
    "slice_input_producer",
    "batch",
    "shuffle_batch",
    "batch_join",
    "shuffle_batch_join",
]


def limit_epochs(tensor, num_epochs=None, name=None) -> Tensor:
    """`tensor`, `num_epochs` times; the next evaluation raises OutOfRangeError."""
    if num_epochs is None:
        return convert_to_tensor(tensor)
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0, got {num_epochs}")
    g = get_default_graph()
    with g.name_scope(name or "limit_epochs"):
        tensor = convert_to_tensor(tensor)
        epochs = Variable(np.int64(0), trainable=False, name="epochs",
                          collections=[GraphKeys.LOCAL_VARIABLES])  # fmt: skip
        count = epochs.assign_add(np.int64(1))
        # After the last epoch: a dequeue from a queue closed while empty, which is
        # OutOfRangeError, the error every queue consumer takes as the end of the input.
        done = FIFOQueue(1, [tensor.dtype], shapes=[tensor.shape], name="end_of_epochs")

        def exhausted():
            with g.control_dependencies([done.close()]):
                return done.dequeue()

        return cond(less_equal(count, np.int64(num_epochs)), lambda: identity(tensor), exhausted)


def _fraction_full_summary(queue, capacity: int) -> None:
    """TensorFlow's queue-fill summary, in the current name scope."""
    frac = math_ops.multiply(math_ops.cast(queue.size(), dtypes.float32), constant(1.0 / capacity))
    summary.scalar(f"fraction_of_{capacity}_full", frac)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle: bool = True,
                   seed=None, capacity: int = 32, shared_name=None, summary_name=None, name=None,
                   cancel_op=None):  # fmt: skip
    """A FIFOQueue fed with the rows of `input_tensor` (shuffled each epoch if `shuffle`) by a
    QueueRunner (`tf.train.input_producer`)."""
    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        input_tensor = convert_to_tensor(input_tensor, name="input_tensor")
        shape = TensorShape(element_shape) if element_shape is not None else input_tensor.shape[1:]
        if not shape.is_fully_defined():
            raise ValueError(
                f"input_producer needs a fully known element shape, got {shape}; pass element_shape"
            )
        if shuffle:
            input_tensor = random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = FIFOQueue(capacity, [input_tensor.dtype], shapes=[shape], shared_name=shared_name)
        enq = q.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fraction_full_summary(q, capacity)
        return q


def string_input_producer(string_tensor, num_epochs=None, shuffle: bool = True, seed=None,
                          capacity: int = 32, shared_name=None, name=None, cancel_op=None):  # fmt: skip
    """A queue of the strings in `string_tensor` (file names, typically), for readers
    (`tf.train.string_input_producer`)."""
    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        strings = convert_to_tensor(string_tensor, dtypes.string)
        if strings.shape.rank != 1:
            raise ValueError(f"string_tensor must be a vector, got shape {strings.shape}")
        if strings.shape[0] == 0:
            raise ValueError("string_input_producer needs a non-empty string_tensor")
        return input_producer(strings, [], num_epochs, shuffle, seed, capacity, shared_name,
                              None, "input_producer", cancel_op)  # fmt: skip


def range_input_producer(limit: int, num_epochs=None, shuffle: bool = True, seed=None,
                         capacity: int = 32, shared_name=None, name=None):  # fmt: skip
    """A queue of the integers 0 .. limit-1 (`tf.train.range_input_producer`)."""
    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        r = range_op(limit, dtype=dtypes.int32)
        return input_producer(r, [], num_epochs, shuffle, seed, capacity, shared_name,
                              None, "input_producer")  # fmt: skip


def slice_input_producer(tensor_list, num_epochs=None, shuffle: bool = True, seed=None,
                         capacity: int = 32, shared_name=None, name=None) -> list:  # fmt: skip
    """One row of each tensor in `tensor_list` (the same row of each), drawn through an index
    queue (`tf.train.slice_input_producer`)."""
    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        tensors = [convert_to_tensor(t) for t in tensor_list]
        if not tensors:
            raise ValueError("slice_input_producer needs at least one tensor")
        n = tensors[0].shape[0]
        for t in tensors[1:]:
            if n is not None and t.shape[0] is not None and t.shape[0] != n:
                raise ValueError(
                    f"slice_input_producer: all tensors need the same first dimension, got "
                    f"{[x.shape for x in tensors]}"
                )
        if n is None:
            raise ValueError("slice_input_producer needs tensors with a known first dimension")
        q = range_input_producer(n, num_epochs, shuffle, seed, capacity, shared_name)
        index = q.dequeue()
        return [gather(t, index) for t in tensors]


def _flat(tensors) -> list[Tensor]:
    return [convert_to_tensor(t) for t in flatten(tensors)]


def _shapes(flat, shapes, enqueue_many: bool) -> list[TensorShape]:
    if shapes is not None:
        out = [TensorShape(s) for s in shapes]
    else:
        out = [t.shape[1:] if enqueue_many else t.shape for t in flat]
    for t, s in zip(flat, out):
        if not s.is_fully_defined():
            raise ValueError(
                f"All shapes must be fully defined to batch: {t.name} has shape {s}; pass shapes="
            )
    return out


def _batch(queue_fn, default_name, tensors_list, batch_size, num_threads, capacity, enqueue_many,
           shapes, allow_smaller_final_batch, name):  # fmt: skip
    g = get_default_graph()
    with g.name_scope(name or default_name):
        flats = [_flat(t) for t in tensors_list]
        types = [t.dtype for t in flats[0]]
        for f in flats[1:]:
            if [t.dtype for t in f] != types:
                raise ValueError("batch_join: every tensor list needs the same dtypes")
        shp = _shapes(flats[0], shapes, enqueue_many)
        q = queue_fn(types, shp)
        enqueue = q.enqueue_many if enqueue_many else q.enqueue
        ops = [enqueue(f) for f in flats for _ in range(num_threads)]
        add_queue_runner(QueueRunner(q, ops))
        _fraction_full_summary(q, capacity)
        out = (
            q.dequeue_up_to(batch_size) if allow_smaller_final_batch else q.dequeue_many(batch_size)
        )
        out = out if isinstance(out, list) else [out]
        return pack_sequence_as(tensors_list[0], out)


def batch(tensors, batch_size: int, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name=None, name=None):  # fmt: skip
    """Batches of `batch_size` of `tensors` (a list or dict of tensors, one example each, or
    many with enqueue_many), from a FIFOQueue fed by `num_threads` threads (`tf.train.batch`).
    """
    if dynamic_pad:
        raise NotImplementedError("batch(dynamic_pad=True) is not supported by rill")
    return _batch(
        lambda types, shp: FIFOQueue(capacity, types, shapes=shp, shared_name=shared_name),
        "batch", [tensors], batch_size, num_threads, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name,
    )  # fmt: skip


def shuffle_batch(tensors, batch_size: int, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed=None, enqueue_many: bool = False, shapes=None,
                  allow_smaller_final_batch: bool = False, shared_name=None, name=None):  # fmt: skip
    """Batches drawn at random from a RandomShuffleQueue holding at least `min_after_dequeue`
    examples (`tf.train.shuffle_batch`)."""
    return _batch(
        lambda types, shp: RandomShuffleQueue(capacity, min_after_dequeue, types, shapes=shp,
                                              seed=seed, shared_name=shared_name),  # fmt: skip
        "shuffle_batch", [tensors], batch_size, num_threads, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name,
    )  # fmt: skip


def batch_join(tensors_list, batch_size: int, capacity: int = 32, enqueue_many: bool = False,
               shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
               shared_name=None, name=None):  # fmt: skip
    """Batches from several lists of tensors (one enqueue thread per list) into one FIFOQueue
    (`tf.train.batch_join`)."""
    if dynamic_pad:
        raise NotImplementedError("batch_join(dynamic_pad=True) is not supported by rill")
    return _batch(
        lambda types, shp: FIFOQueue(capacity, types, shapes=shp, shared_name=shared_name),
        "batch_join", list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name,
    )  # fmt: skip


def shuffle_batch_join(tensors_list, batch_size: int, capacity: int, min_after_dequeue: int,
                       seed=None, enqueue_many: bool = False, shapes=None,
                       allow_smaller_final_batch: bool = False, shared_name=None, name=None):  # fmt: skip
    """shuffle_batch over several lists of tensors (`tf.train.shuffle_batch_join`)."""
    return _batch(
        lambda types, shp: RandomShuffleQueue(capacity, min_after_dequeue, types, shapes=shp,
                                              seed=seed, shared_name=shared_name),  # fmt: skip
        "shuffle_batch_join", list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name,
    )  # fmt: skip
