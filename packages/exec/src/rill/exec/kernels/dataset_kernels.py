"""Kernels for rill.graph.ops.dataset_ops: iterators as resources of the device's ResourceMgr.

The datasets themselves are Python pipeline objects that the graph holds (rill.train's
`tf.data`); these kernels only rely on their protocol:

- a pipeline (found through the op's graph) has `bind(capture_values)`, which returns a dataset;
- a dataset has `output_types` (DTypes, flattened), `output_shapes` (TensorShapes) and
  `make_iterator()`, which returns a Python iterator of flattened elements (tuples of arrays),
  and `describe()` naming it for errors.

An IteratorResource outlives steps like any resource: each session has its own, so two sessions
on one graph iterate independently. GetNext serializes on the resource's lock (a Python
iterator is not reentrant); it is a blocking kernel because a pipeline may do real work (read
files, run a map function) for one element.
"""

from __future__ import annotations

import json
import threading

import numpy as np

from rill.exec import variant
from rill.exec.kernel_registry import register_kernel
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.graph import dtypes
from rill.graph.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
    UnimplementedError,
)
from rill.graph.ops.dataset_ops import lookup_pipeline
from rill.graph.shapes import as_shape


class IteratorResource:
    """One iterator's state: the dataset it runs over and the Python iterator's position."""

    def __init__(self, name: str, output_types, output_shapes):
        self.name = name
        self.output_types = tuple(output_types)
        self.output_shapes = tuple(as_shape(s) for s in output_shapes)
        self._lock = threading.Lock()
        self._dataset = None
        self._elements = None

    def _check_dataset(self, dataset) -> None:
        types = tuple(dataset.output_types)
        if types != self.output_types:
            raise InvalidArgumentError(
                f"iterator {self.name!r} yields components of types "
                f"{[t.name for t in self.output_types]}, but the dataset {dataset.describe()} "
                f"yields {[t.name for t in types]}"
            )
        for mine, theirs in zip(self.output_shapes, dataset.output_shapes, strict=True):
            if not mine.is_compatible_with(theirs):
                raise InvalidArgumentError(
                    f"iterator {self.name!r} yields components of shapes "
                    f"{list(self.output_shapes)}, but the dataset {dataset.describe()} yields "
                    f"{list(dataset.output_shapes)}"
                )

    def start(self, dataset) -> None:
        """Restarts the iterator at the beginning of `dataset` (MakeIterator)."""
        self._check_dataset(dataset)
        with self._lock:
            self._close_elements()
            self._dataset = dataset
            self._elements = dataset.make_iterator()

    def start_once(self, make_dataset) -> None:
        """Starts on `make_dataset()` unless already started (OneShotIterator)."""
        with self._lock:
            if self._dataset is not None:
                return
            dataset = make_dataset()
            self._check_dataset(dataset)
            self._dataset = dataset
            self._elements = dataset.make_iterator()

    def get_next(self) -> tuple:
        with self._lock:
            if self._elements is None:
                raise FailedPreconditionError(
                    f"GetNext() failed because the iterator {self.name!r} has not been "
                    "initialized. Ensure that you have run the initializer operation for this "
                    "iterator before getting the next element."
                )
            try:
                element = next(self._elements)
            except StopIteration:
                # The Python iterator is done for good; later calls raise again. An error
                # while producing an element also ends it (the generator is finished), so the
                # calls after an error are OutOfRangeError too.
                self._elements = iter(())
                raise OutOfRangeError("End of sequence") from None
        return self._checked(element)

    def _checked(self, element: tuple) -> tuple:
        out = []
        for k, (value, dtype, shape) in enumerate(
            zip(element, self.output_types, self.output_shapes, strict=True)
        ):
            if isinstance(value, np.ndarray) and value.dtype != object:
                got = dtypes.as_dtype(value.dtype)
                if got is not dtype:
                    raise InvalidArgumentError(
                        f"iterator {self.name!r}: component {k} of an element of "
                        f"{self._dataset.describe()} has dtype {got.name}, expected {dtype.name}"
                    )
                if not shape.is_compatible_with(as_shape(value.shape)):
                    raise InvalidArgumentError(
                        f"iterator {self.name!r}: component {k} of an element of "
                        f"{self._dataset.describe()} has shape {list(value.shape)}, expected "
                        f"{shape}"
                    )
            out.append(value)
        return tuple(out)

    def _close_elements(self) -> None:
        close = getattr(self._elements, "close", None)
        if close is not None:
            close()
        self._elements = None

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Releases the pipeline's state (called when the resource is deleted)."""
        with self._lock:
            self._close_elements()
            self._dataset = None


def _pipeline(node, ref):
    # `node` is the Operation (or, for a node the plan made, a PlanNode with its op).
    op = node if hasattr(node, "graph") else getattr(node, "op", None)
    graph = getattr(op, "graph", None)
    p = lookup_pipeline(graph, ref.name)
    if p is None:
        raise UnimplementedError(
            f"{node.name}: the dataset pipeline {ref.name!r} is not held by this graph. rill's "
            "tf.data pipelines are Python objects kept by the graph that built them; a graph "
            "imported from a GraphDef or run by another process has none"
        )
    return p


@register_kernel("_Dataset")
def dataset(pipeline, Tcaptures, output_types, output_shapes, node):
    p = _pipeline(node, pipeline)

    def compute(*captures):
        return p.bind(tuple(variant.unwrap(c) for c in captures))

    return compute


def _iterator_handle(device, container, name):
    return handle_array(ResourceHandle(device.name, container, name, "Iterator"))


@register_kernel("IteratorV2", context=True)
def iterator_v2(shared_name, container, output_types, output_shapes, node, device):
    name = shared_name or node.name
    handle = _iterator_handle(device, container, name)

    def compute(ctx):
        ctx.resources.lookup_or_create(
            container, name, lambda: IteratorResource(name, output_types, output_shapes)
        )
        return handle

    return compute


@register_kernel("OneShotIterator", context=True, blocking=True)
def one_shot_iterator(dataset_factory, output_types, output_shapes, container, shared_name,
                      node, device):  # fmt: skip
    name = shared_name or node.name
    handle = _iterator_handle(device, container, name)
    p = _pipeline(node, dataset_factory)

    def compute(ctx):
        it = ctx.resources.lookup_or_create(
            container, name, lambda: IteratorResource(name, output_types, output_shapes)
        )
        it.start_once(lambda: p.bind(()))
        return handle

    return compute


def _lookup(ctx, value) -> IteratorResource:
    h = handle_of(value)
    return ctx.resources.lookup(h.container, h.name, IteratorResource)


@register_kernel("MakeIterator", context=True, blocking=True)
def make_iterator():
    def compute(ctx, dataset, handle):
        _lookup(ctx, handle).start(variant.unwrap(dataset))

    return compute


@register_kernel("IteratorGetNext", context=True, blocking=True)
def iterator_get_next(output_types, output_shapes):
    single = len(output_types) == 1  # a one-output kernel returns the value itself

    def compute(ctx, handle):
        element = _lookup(ctx, handle).get_next()
        return element[0] if single else element

    return compute


# A string handle names an iterator resource: "rill-iterator:" + JSON of its device, container
# and name (TensorFlow writes a ResourceHandleProto). It is only parsed, never evaluated.
_HANDLE_PREFIX = b"rill-iterator:"


@register_kernel("IteratorToStringHandle", context=True)
def iterator_to_string_handle():
    def compute(ctx, handle):
        h = handle_of(handle)
        _lookup(ctx, handle)  # it must exist
        text = json.dumps({"device": h.device, "container": h.container, "name": h.name})
        out = np.empty((), dtype=object)
        out[()] = _HANDLE_PREFIX + text.encode()
        return out

    return compute


def _parse_string_handle(value) -> tuple[str, str, str]:
    v = variant.unwrap(value)
    if isinstance(v, np.ndarray):
        v = v.item() if v.shape == () else None
    if isinstance(v, str):
        v = v.encode()
    bad = InvalidArgumentError(
        f"string_handle must be a scalar string made by an iterator's string_handle(), got "
        f"{value!r:.100}"
    )
    if not isinstance(v, bytes) or not v.startswith(_HANDLE_PREFIX):
        raise bad
    try:
        d = json.loads(v[len(_HANDLE_PREFIX) :].decode())
        return str(d["device"]), str(d["container"]), str(d["name"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise bad from None


@register_kernel("IteratorFromStringHandleV2", context=True)
def iterator_from_string_handle(output_types, output_shapes):
    def compute(ctx, string_handle):
        device, container, name = _parse_string_handle(string_handle)
        it = ctx.resources.lookup(container, name, IteratorResource)
        if output_types and tuple(output_types) != it.output_types:
            raise InvalidArgumentError(
                f"the iterator {name!r} yields components of types "
                f"{[t.name for t in it.output_types]}, but this handle's get_next expects "
                f"{[t.name for t in output_types]}"
            )
        return handle_array(ResourceHandle(device, container, name, "Iterator"))

    return compute
