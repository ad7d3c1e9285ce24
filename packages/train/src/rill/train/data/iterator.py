"""Iterators of tf.data (TensorFlow 1.15, graph mode).

- `make_one_shot_iterator(ds)`: a OneShotIterator op; it starts on its dataset the first time
  it runs, so the dataset may capture only constants (feed nothing).
- `make_initializable_iterator(ds)`: an IteratorV2 resource and a MakeIterator op, its
  `initializer`; run it again (with other feeds) to start over.
- `Iterator.from_structure(types, shapes)`: a reinitializable iterator; `make_initializer(ds)`
  gives the op that starts it on any dataset of that structure.

`get_next()` returns the element's structure of tensors with the dataset's static shapes; at
the end of the data `sess.run` raises OutOfRangeError.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> from rill.train.data.dataset import Dataset
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None])
...     it = Dataset.from_tensor_slices(x).make_initializable_iterator()
...     nxt = it.get_next()
...     with Session() as sess:
...         _ = sess.run(it.initializer, {x: [1.0, 2.0]})
...         float(sess.run(nxt)), float(sess.run(nxt))
(1.0, 2.0)
"""

from __future__ import annotations

from rill.graph import nest
from rill.graph.graph import Tensor, get_default_graph
from rill.graph.ops import dataset_ops
from rill.graph.tensor_util import constant_value
from rill.train.data import structure
from rill.train.data.dataset import Dataset
from rill.train.data.runtime import Pipeline, collect_captures

__all__ = [
    "Iterator",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]


def _flat_types_shapes(spec):
    flat = structure.flat_specs(spec)
    return [s.dtype for s in flat], [s.shape for s in flat]


def _variant(dataset: Dataset) -> Tensor:
    """The `_Dataset` op for `dataset`, in the graph it was built in."""
    captures = collect_captures(dataset)
    g = dataset._graph
    name = dataset_ops.register_pipeline(Pipeline(dataset, captures), g)
    types, shapes = _flat_types_shapes(dataset.element_spec)
    with g.as_default():
        return dataset_ops.dataset_from_pipeline(name, captures, types, shapes,
                                                 name=dataset._op_name)  # fmt: skip


def _check_graph(dataset: Dataset, who: str) -> None:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"{who} takes a tf.data.Dataset, got {type(dataset).__name__}")
    if dataset._graph is not get_default_graph():
        raise ValueError(
            f"{who}: the dataset was built in another graph than the default graph; build the "
            "dataset and its iterator in the same graph"
        )


class Iterator:
    """A tf.data iterator: a resource tensor, its element structure, and (for an initializable
    one) its initializer."""

    def __init__(self, iterator_resource: Tensor, initializer, element_spec):
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._element_spec = element_spec

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        """An iterator for elements of this structure, not bound to a dataset: start it with
        `make_initializer(dataset)`."""
        spec = structure.structure_from(output_types, output_shapes)
        types, shapes = _flat_types_shapes(spec)
        handle = dataset_ops.iterator_v2(types, shapes, shared_name=shared_name or "")
        return Iterator(handle, None, spec)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None, output_classes=None):
        """A feedable iterator: it reads whichever iterator `string_handle` (a scalar string
        tensor, fed with what `other.string_handle()` gave) names, each step."""
        spec = structure.structure_from(output_types, output_shapes)
        types, shapes = _flat_types_shapes(spec)
        handle = dataset_ops.iterator_from_string_handle(string_handle, types, shapes)
        return Iterator(handle, None, spec)

    @property
    def initializer(self):
        """The op that starts this iterator on its dataset."""
        if self._initializer is None:
            raise ValueError(
                "Iterator does not have an initializer: it was made with from_structure; use "
                "make_initializer(dataset)"
            )
        return self._initializer

    def make_initializer(self, dataset: Dataset, name=None):
        """The op that (re)starts this iterator on `dataset` (same types, compatible shapes)."""
        _check_graph(dataset, "Iterator.make_initializer()")
        mine, theirs = self._element_spec, dataset.element_spec
        try:
            nest.assert_same_structure(mine, theirs)
        except (ValueError, TypeError) as e:
            raise TypeError(
                f"Expected output structure {structure.describe_structure(mine)}, got "
                f"{dataset.describe()}: {e}"
            ) from None
        for a, b in zip(structure.flat_specs(mine), structure.flat_specs(theirs)):
            if a.dtype is not b.dtype:
                raise TypeError(
                    f"Expected output types {self.output_types} but got dataset with output "
                    f"types {dataset.output_types}"
                )
            if not a.shape.is_compatible_with(b.shape):
                raise TypeError(
                    f"Expected output shapes compatible with {self.output_shapes} but got "
                    f"dataset with output shapes {dataset.output_shapes}"
                )
        g = get_default_graph()
        with g.name_scope(name or "make_initializer"):
            return dataset_ops.make_iterator(_variant(dataset), self._iterator_resource)

    def get_next(self, name=None):
        """The next element, as the dataset's structure of tensors."""
        types, shapes = _flat_types_shapes(self._element_spec)
        flat = dataset_ops.iterator_get_next(self._iterator_resource, types, shapes,
                                             name=name or "IteratorGetNext")  # fmt: skip
        return nest.pack_sequence_as(self._element_spec, flat)

    def string_handle(self, name=None):
        """A scalar string tensor naming this iterator (for `from_string_handle`)."""
        return dataset_ops.iterator_to_string_handle(self._iterator_resource,
                                                     name=name or "IteratorToStringHandle")  # fmt: skip

    @property
    def element_spec(self):
        return self._element_spec

    @property
    def output_types(self):
        return structure.types_of(self._element_spec)

    @property
    def output_shapes(self):
        return structure.shapes_of(self._element_spec)

    @property
    def output_classes(self):
        return nest.map_structure(lambda _: Tensor, self._element_spec)


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """An iterator over `dataset` that needs no initialization (`tf.data.make_one_shot_iterator`).

    Raises:
        ValueError: the dataset uses a tensor whose value is not a constant (a placeholder, a
            variable); use make_initializable_iterator for it.
    """
    _check_graph(dataset, "make_one_shot_iterator()")
    captures = collect_captures(dataset)
    values = []
    for t in captures:
        v = constant_value(t)
        if v is None:
            raise ValueError(
                f"make_one_shot_iterator(): the dataset {dataset.describe()} uses {t.name} "
                f"({t.op.type}), which is not a constant; a one-shot iterator cannot be fed or "
                "read state. Use make_initializable_iterator() and run its initializer (with "
                "the feeds it needs)"
            )
        values.append(v)
    name = dataset_ops.register_pipeline(Pipeline(dataset, captures, fixed=values))
    types, shapes = _flat_types_shapes(dataset.element_spec)
    handle = dataset_ops.one_shot_iterator(name, types, shapes)
    return Iterator(handle, None, dataset.element_spec)


def make_initializable_iterator(dataset: Dataset, shared_name=None) -> Iterator:
    """An iterator over `dataset` started by running its `initializer`
    (`tf.data.make_initializable_iterator`)."""
    _check_graph(dataset, "make_initializable_iterator()")
    g = get_default_graph()
    types, shapes = _flat_types_shapes(dataset.element_spec)
    with g.name_scope("Iterator"):
        handle = dataset_ops.iterator_v2(types, shapes, shared_name=shared_name or "",
                                         name="Iterator")  # fmt: skip
        init = dataset_ops.make_iterator(_variant(dataset), handle)
    return Iterator(handle, init, dataset.element_spec)


def _of(x, attr: str):
    if isinstance(x, (Dataset, Iterator)):
        return getattr(x, attr)
    raise TypeError(f"expected a tf.data Dataset or Iterator, got {type(x).__name__}")


def get_output_types(dataset_or_iterator):
    """The element dtypes of a Dataset or Iterator (`tf.compat.v1.data.get_output_types`)."""
    return _of(dataset_or_iterator, "output_types")


def get_output_shapes(dataset_or_iterator):
    """The element shapes of a Dataset or Iterator (`tf.compat.v1.data.get_output_shapes`)."""
    return _of(dataset_or_iterator, "output_shapes")


def get_output_classes(dataset_or_iterator):
    """The element classes of a Dataset or Iterator (`tf.compat.v1.data.get_output_classes`)."""
    return _of(dataset_or_iterator, "output_classes")
