"""`tf.data.Dataset` of TensorFlow 1.15 (graph mode): the base class and the sources.

A Dataset is a Python description of an input pipeline: sources (`from_tensor_slices`,
`range`, files, a generator) and transformations (`map`, `batch`, `shuffle`, ...; in
rill.train.data.transforms). Building one adds nothing to the graph but the tensors it
captures; an iterator (rill.train.data.iterator) adds the `_Dataset` op and TensorFlow's
iterator ops, and its elements are produced by the pipeline at run time.

>>> import numpy as np
>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     ds = Dataset.from_tensor_slices(np.arange(5)).map(lambda x: x * 2).batch(2)
...     nxt = ds.make_one_shot_iterator().get_next()
...     with Session() as sess:
...         [sess.run(nxt).tolist() for _ in range(3)]
[[0, 2], [4, 6], [8]]
"""

from __future__ import annotations

import itertools

import numpy as np

from rill.graph import dtypes, nest
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.shapes import TensorShape, scalar, unknown_shape
from rill.train.data import structure
from rill.train.data.structure import TensorSpec

__all__ = ["Dataset"]

_ids = itertools.count()


class Dataset:
    """A sequence of elements, each a nested structure (tuples, dicts) of tensors.

    Subclasses set the element structure, the datasets they read (`_inputs`) and the graph
    tensors they capture (`_captured`), and produce flattened elements in `_elements(env)`.
    """

    _op_name = "Dataset"

    def __init__(self, element_spec, inputs=(), captured=()):
        self._element_spec = element_spec
        self._inputs = list(inputs)
        self._captured = list(captured)
        self._graph = get_default_graph()
        self._id = next(_ids)

    # -- element structure ----------------------------------------------------------------------

    @property
    def element_spec(self):
        """The TensorSpec structure of an element."""
        return self._element_spec

    @property
    def output_types(self):
        """The element's dtypes, in its structure."""
        return structure.types_of(self._element_spec)

    @property
    def output_shapes(self):
        """The element's static shapes, in its structure."""
        return structure.shapes_of(self._element_spec)

    @property
    def output_classes(self):
        """The element's classes (Tensor for every component), in its structure."""
        return nest.map_structure(lambda _: Tensor, self._element_spec)

    def _flat_specs(self) -> list[TensorSpec]:
        return structure.flat_specs(self._element_spec)

    def describe(self) -> str:
        """The dataset's TensorFlow op name and element structure, for errors."""
        return f"{self._op_name} of {structure.describe_structure(self._element_spec)}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def __iter__(self):
        raise TypeError(
            "a Dataset is not iterable in graph mode: make an iterator "
            "(dataset.make_one_shot_iterator() or make_initializable_iterator()) and run its "
            "get_next() in a session"
        )

    def _elements(self, env):
        """A generator of flattened elements (tuples of arrays) for one pass."""
        raise NotImplementedError

    # -- sources ----------------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors) -> Dataset:
        """One element per row of `tensors` (a tensor, or a tuple/dict nest of them, all with
        the same first dimension)."""
        return _TensorSlices(tensors)

    @staticmethod
    def from_tensors(tensors) -> Dataset:
        """One element: `tensors`."""
        return _Tensors(tensors)

    @staticmethod
    def range(*args, output_type=dtypes.int64) -> Dataset:
        """`range(stop)`, `range(start, stop)` or `range(start, stop, step)` as int64 scalars."""
        return _Range(args, output_type)

    @staticmethod
    def zip(datasets) -> Dataset:
        """Elements of `datasets` (a tuple/dict nest of datasets) side by side, as long as the
        shortest."""
        return _Zip(datasets)

    @staticmethod
    def from_generator(generator, output_types, output_shapes=None, args=None) -> Dataset:
        """Elements yielded by `generator()` (called again for each pass), converted to
        `output_types` and checked against `output_shapes`."""
        return _Generator(generator, output_types, output_shapes, args)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None) -> Dataset:
        """The files matching `file_pattern` (a glob or several), shuffled unless shuffle=False."""
        from rill.train.data.readers import list_files

        return list_files(file_pattern, shuffle, seed)

    # -- transformations (rill.train.data.transforms) ------------------------------------------

    def map(self, map_func, num_parallel_calls=None) -> Dataset:
        """`map_func` applied to each element, traced once into a graph function."""
        from rill.train.data.transforms import _Map

        return _Map(self, map_func, num_parallel_calls)

    def filter(self, predicate) -> Dataset:
        """The elements for which `predicate` (a scalar bool function) is true."""
        from rill.train.data.transforms import _Filter

        return _Filter(self, predicate)

    def flat_map(self, map_func) -> Dataset:
        """The elements of the datasets `map_func` returns for each element, one after another."""
        from rill.train.data.transforms import _FlatMap

        return _FlatMap(self, map_func)

    def interleave(self, map_func, cycle_length=-1, block_length=1,
                   num_parallel_calls=None) -> Dataset:  # fmt: skip
        """The datasets `map_func` returns, `cycle_length` at a time, `block_length` elements
        from each in turn (TensorFlow's deterministic order)."""
        from rill.train.data.transforms import _Interleave

        return _Interleave(self, map_func, cycle_length, block_length)

    def batch(self, batch_size, drop_remainder: bool = False) -> Dataset:
        """Consecutive elements stacked `batch_size` at a time."""
        from rill.train.data.batching import _Batch

        return _Batch(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder: bool = False) -> Dataset:  # fmt: skip
        """Like batch, each component padded to `padded_shapes` (-1/None: the batch's longest)."""
        from rill.train.data.batching import _PaddedBatch

        return _PaddedBatch(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> Dataset:
        """Each element split along its first dimension into elements."""
        from rill.train.data.batching import _Unbatch

        return _Unbatch(self)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None) -> Dataset:
        """Elements drawn at random from a buffer of `buffer_size`."""
        from rill.train.data.transforms import _Shuffle

        return _Shuffle(self, buffer_size, seed, reshuffle_each_iteration)

    def repeat(self, count=None) -> Dataset:
        """The dataset `count` times (None or -1: forever)."""
        from rill.train.data.transforms import _Repeat

        return _Repeat(self, count)

    def take(self, count) -> Dataset:
        """The first `count` elements (-1: all)."""
        from rill.train.data.transforms import _Take

        return _Take(self, count)

    def skip(self, count) -> Dataset:
        """All but the first `count` elements (-1: none)."""
        from rill.train.data.transforms import _Skip

        return _Skip(self, count)

    def shard(self, num_shards, index) -> Dataset:
        """Every `num_shards`-th element, starting at `index`."""
        from rill.train.data.transforms import _Shard

        return _Shard(self, num_shards, index)

    def prefetch(self, buffer_size) -> Dataset:
        """The same elements (rill produces each when asked; prefetching is accepted)."""
        from rill.train.data.transforms import _Prefetch

        return _Prefetch(self, buffer_size)

    def cache(self, filename: str = "") -> Dataset:
        """The same elements, kept in memory after the first full pass."""
        from rill.train.data.transforms import _Cache

        return _Cache(self, filename)

    def concatenate(self, dataset) -> Dataset:
        """This dataset's elements, then `dataset`'s."""
        from rill.train.data.transforms import _Concatenate

        return _Concatenate(self, dataset)

    def enumerate(self, start=0) -> Dataset:
        """(index, element) pairs, the index an int64 counting from `start`."""
        return Dataset.zip((Dataset.range(start, np.iinfo(np.int64).max), self))

    def apply(self, transformation_func) -> Dataset:
        """`transformation_func(self)`, which must return a Dataset."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"Dataset.apply(): the transformation must return a Dataset, got {type(out)}"
            )
        return out

    def with_options(self, options) -> Dataset:
        """The same dataset (rill's pipelines have no options to set)."""
        return self

    # -- iterators (rill.train.data.iterator) -------------------------------------------------

    def make_one_shot_iterator(self):
        """An iterator that needs no initialization (the dataset may capture only constants)."""
        from rill.train.data.iterator import make_one_shot_iterator

        return make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name=None):
        """An iterator started (and restarted, with new feeds) by running its `initializer`."""
        from rill.train.data.iterator import make_initializable_iterator

        return make_initializable_iterator(self, shared_name)


# -- sources ---------------------------------------------------------------------------------------


def _slice_spec(t: Tensor) -> TensorSpec:
    shape = t.shape[1:] if t.shape.rank is not None else unknown_shape()
    return TensorSpec(shape, t.dtype)


class _TensorSlices(Dataset):
    _op_name = "TensorSliceDataset"

    def __init__(self, tensors):
        elems = structure.normalize(tensors)
        flat = nest.flatten(elems)
        if not flat:
            raise ValueError("Dataset.from_tensor_slices() needs at least one tensor")
        first = None
        for t in flat:
            if t.shape.rank == 0:
                raise ValueError(
                    f"Dataset.from_tensor_slices(): {t.name} is a scalar; every component is "
                    "sliced along its first dimension, so each must be at least a vector"
                )
            d = t.shape[0] if t.shape.rank is not None else None
            if d is not None:
                if first is not None and d != first[1]:
                    raise ValueError(
                        f"Dataset.from_tensor_slices(): all components must have the same size "
                        f"in their first dimension, but {first[0]} has {first[1]} and {t.name} "
                        f"has {d}"
                    )
                first = (t.name, d)
        super().__init__(nest.map_structure(_slice_spec, elems), captured=flat)

    def _elements(self, env):
        values = [env.value(t) for t in self._captured]
        n = len(values[0])
        for t, v in zip(self._captured, values):
            if len(v) != n:
                raise InvalidArgumentError(
                    f"{self.describe()}: all components must have the same size in their first "
                    f"dimension, but {self._captured[0].name} has {n} and {t.name} has {len(v)}"
                )
        for i in range(n):
            yield tuple(v[i, ...] for v in values)


class _Tensors(Dataset):
    _op_name = "TensorDataset"

    def __init__(self, tensors):
        elems = structure.normalize(tensors)
        flat = nest.flatten(elems)
        if not flat:
            raise ValueError("Dataset.from_tensors() needs at least one tensor")
        super().__init__(structure.spec_of(elems), captured=flat)

    def _elements(self, env):
        yield tuple(np.asarray(env.value(t)) for t in self._captured)


def _int_arg(env, value) -> int:
    return int(env.value(value)) if isinstance(value, Tensor) else int(value)


def _scalar_arg(value, what: str, dtype=dtypes.int64):
    """A Python int, or a scalar tensor (captured, read at run time)."""
    if isinstance(value, Tensor):
        if value.shape.rank not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got {value.name} of shape {value.shape}")
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (np.ndarray, float)) and np.ndim(value) == 0:
        return int(value)
    return _scalar_arg(convert_to_tensor(value, dtype), what)


def _tensors(*values) -> list[Tensor]:
    return [v for v in values if isinstance(v, Tensor)]


class _Range(Dataset):
    _op_name = "RangeDataset"

    def __init__(self, args, output_type):
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Dataset.range() takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
        self._args = [_scalar_arg(a, "Dataset.range() argument") for a in (start, stop, step)]
        if not isinstance(self._args[2], Tensor) and self._args[2] == 0:
            raise ValueError("Dataset.range(): step must not be 0")
        self._dtype = dtypes.as_dtype(output_type)
        super().__init__(TensorSpec(scalar(), self._dtype), captured=_tensors(*self._args))

    def _elements(self, env):
        start, stop, step = (_int_arg(env, a) for a in self._args)
        if step == 0:
            raise InvalidArgumentError(f"{self.describe()}: step must not be 0")
        np_type = self._dtype.np
        for i in range(start, stop, step):
            yield (np.asarray(i, np_type),)


class _Zip(Dataset):
    _op_name = "ZipDataset"

    def __init__(self, datasets):
        flat = nest.flatten(datasets)
        if not flat or not all(isinstance(d, Dataset) for d in flat):
            raise TypeError(f"Dataset.zip() takes a tuple or dict of Datasets, got {datasets!r}")
        spec = nest.pack_sequence_as(datasets, [d.element_spec for d in flat])
        super().__init__(spec, inputs=flat)

    def _elements(self, env):
        iters = [d._elements(env) for d in self._inputs]
        for parts in zip(*iters):
            yield tuple(c for p in parts for c in p)


class _Generator(Dataset):
    _op_name = "GeneratorDataset"

    def __init__(self, generator, output_types, output_shapes, args):
        if not callable(generator):
            raise TypeError(
                f"Dataset.from_generator(): generator must be callable, got {generator!r}"
            )
        self._generator = generator
        self._args = [convert_to_tensor(a) for a in (args or ())]
        super().__init__(structure.structure_from(output_types, output_shapes),
                         captured=self._args)  # fmt: skip

    def _elements(self, env):
        args = [env.value(a) for a in self._args]
        specs = self._flat_specs()
        for k, element in enumerate(self._generator(*args)):
            where = f"{self.describe()}: element {k} the generator yielded"
            flat = structure.flatten_up_to(self._element_spec, element, where, InvalidArgumentError)
            out = []
            for value, spec in zip(flat, specs):
                try:
                    arr = structure.to_array(value, spec.dtype)
                except (TypeError, ValueError) as e:
                    raise InvalidArgumentError(
                        f"{where} could not be converted to the expected type {spec.dtype.name}: "
                        f"{value!r:.80} ({e})"
                    ) from None
                if not spec.shape.is_compatible_with(TensorShape(arr.shape)):
                    raise InvalidArgumentError(
                        f"{where} has shape {list(arr.shape)} where an element of shape "
                        f"{spec.shape} was expected"
                    )
                out.append(arr)
            yield tuple(out)
