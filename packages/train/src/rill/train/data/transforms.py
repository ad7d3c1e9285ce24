"""Transformations of tf.data.Dataset: map, filter, flat_map, interleave, batch, padded_batch,
unbatch, shuffle, repeat, take, skip, shard, prefetch, cache, concatenate.

Each is a Dataset over its input(s); the element order is TensorFlow's for every one of them
(shuffle's permutations are rill's own: seeded runs repeat exactly, but not TensorFlow's
sequence).
"""

from __future__ import annotations

import os

import numpy as np

from rill.graph import dtypes, nest
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph import Tensor, get_default_graph
from rill.graph.ops.random_ops import get_seed
from rill.graph.shapes import TensorShape, as_shape, unknown_shape
from rill.train.data import structure
from rill.train.data.dataset import Dataset, _int_arg, _scalar_arg, _tensors
from rill.train.data.function import trace
from rill.train.data.runtime import collect_captures
from rill.train.data.structure import TensorSpec

AUTOTUNE = -1


def _where(ds: Dataset, k: int) -> str:
    return f"{ds.describe()}, element {k}"


class _Map(Dataset):
    _op_name = "MapDataset"

    def __init__(self, input_ds: Dataset, fn, num_parallel_calls):
        self._fn = trace(fn, input_ds.element_spec, "Dataset.map()")
        if not self._fn.flat_outputs:
            raise ValueError("Dataset.map(): the function must return at least one tensor")
        if num_parallel_calls is not None:
            self._op_name = "ParallelMapDataset"
        super().__init__(structure.spec_of(self._fn.result), [input_ds], self._fn.captured)

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            yield tuple(env.run(self._fn, element, _where(self, k)))


class _Filter(Dataset):
    _op_name = "FilterDataset"

    def __init__(self, input_ds: Dataset, predicate):
        self._fn = trace(predicate, input_ds.element_spec, "Dataset.filter()")
        out = self._fn.flat_outputs
        if len(out) != 1 or out[0].dtype is not dtypes.bool_ or out[0].shape.rank not in (0, None):
            got = ", ".join(f"{t.dtype.name}{t.shape}" for t in out)
            raise ValueError(
                f"Dataset.filter(): the predicate must return a scalar bool tensor, got ({got})"
            )
        super().__init__(input_ds.element_spec, [input_ds], self._fn.captured)

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            (keep,) = env.run(self._fn, element, _where(self, k))
            if np.ndim(keep) != 0:
                raise InvalidArgumentError(
                    f"{_where(self, k)}: the predicate returned shape {list(np.shape(keep))}, "
                    "expected a scalar"
                )
            if bool(keep):
                yield element


def _dataset_fn(dataset_fn, input_ds: Dataset, what: str):
    """Traces a function returning a Dataset; its outputs are that dataset's captures."""

    def outputs(result):
        if not isinstance(result, Dataset):
            raise TypeError(f"{what}: the function must return a Dataset, got {type(result)}")
        g = get_default_graph()
        return [g.capture(t) for t in collect_captures(result)]

    fn = trace(dataset_fn, input_ds.element_spec, what, outputs=outputs)
    return fn, collect_captures(fn.result)


def _inner_elements(env, fn, inner_captures, element, where):
    values = env.run(fn, element, where)
    inner_env = env.child({id(t): v for t, v in zip(inner_captures, values)})
    return fn.result._elements(inner_env)


class _FlatMap(Dataset):
    _op_name = "FlatMapDataset"

    def __init__(self, input_ds: Dataset, fn):
        self._fn, self._inner = _dataset_fn(fn, input_ds, "Dataset.flat_map()")
        super().__init__(self._fn.result.element_spec, [input_ds], self._fn.captured)

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            yield from _inner_elements(env, self._fn, self._inner, element, _where(self, k))


def interleave(inputs, open_one, cycle_length: int, block_length: int):
    """TensorFlow's interleave order: a cycle of up to `cycle_length` open iterators, visited
    in turn for `block_length` elements each; an exhausted one is replaced, in its slot, by the
    next input's (`open_one(input)`)."""
    inputs = iter(inputs)
    current = [None] * cycle_length
    index = block = num_open = 0
    end_of_input = False
    while not end_of_input or num_open > 0:
        if current[index] is not None:
            if block < block_length:
                try:
                    element = next(current[index])
                except StopIteration:
                    current[index] = None
                    num_open -= 1
                    index, block = (index + 1) % cycle_length, 0
                    continue
                block += 1
                yield element
            else:
                index, block = (index + 1) % cycle_length, 0
        elif not end_of_input:
            try:
                item = next(inputs)
            except StopIteration:
                end_of_input = True
                continue
            current[index] = iter(open_one(item))
            num_open += 1
        else:
            index, block = (index + 1) % cycle_length, 0


class _Interleave(Dataset):
    _op_name = "InterleaveDataset"

    def __init__(self, input_ds: Dataset, fn, cycle_length, block_length):
        self._fn, self._inner = _dataset_fn(fn, input_ds, "Dataset.interleave()")
        self._cycle = _scalar_arg(cycle_length, "interleave cycle_length")
        self._block = _scalar_arg(block_length, "interleave block_length")
        super().__init__(self._fn.result.element_spec, [input_ds],
                         self._fn.captured + _tensors(self._cycle, self._block))  # fmt: skip

    def _elements(self, env):
        cycle, block = _int_arg(env, self._cycle), _int_arg(env, self._block)
        if cycle == AUTOTUNE:
            cycle = os.cpu_count() or 1  # TensorFlow's default: the machine's parallelism
        if cycle <= 0 or block <= 0:
            raise InvalidArgumentError(
                f"{self.describe()}: cycle_length ({cycle}) and block_length ({block}) must be "
                "positive"
            )
        numbered = enumerate(self._inputs[0]._elements(env))

        def open_one(item):
            k, element = item
            return _inner_elements(env, self._fn, self._inner, element, _where(self, k))

        yield from interleave(numbered, open_one, cycle, block)


# -- batching ------------------------------------------------------------------------------------


def _batched_spec(spec: TensorSpec, batch, drop_remainder) -> TensorSpec:
    dim = batch if drop_remainder and isinstance(batch, int) else None
    return TensorSpec(TensorShape([dim]).concatenate(spec.shape), spec.dtype)


def _groups(ds: Dataset, env, batch: int, drop_remainder: bool):
    if batch <= 0:
        raise InvalidArgumentError(f"{ds.describe()}: batch_size must be positive, got {batch}")
    group = []
    for element in ds._inputs[0]._elements(env):
        group.append(element)
        if len(group) == batch:
            yield group
            group = []
    if group and not drop_remainder:
        yield group


class _Batch(Dataset):
    _op_name = "BatchDatasetV2"

    def __init__(self, input_ds: Dataset, batch_size, drop_remainder):
        self._batch = _scalar_arg(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        spec = nest.map_structure(lambda s: _batched_spec(s, self._batch, self._drop),
                                  input_ds.element_spec)  # fmt: skip
        super().__init__(spec, [input_ds], _tensors(self._batch))

    def _elements(self, env):
        for group in _groups(self, env, _int_arg(env, self._batch), self._drop):
            out = []
            for c in range(len(group[0])):
                parts = [np.asarray(e[c]) for e in group]
                first = parts[0].shape
                for i, p in enumerate(parts):
                    if p.shape != first:
                        raise InvalidArgumentError(
                            f"{self.describe()}: Cannot batch tensors with different shapes in "
                            f"component {c}. First element had shape {list(first)} and element "
                            f"{i} had shape {list(p.shape)}."
                        )
                out.append(np.stack(parts))
            yield tuple(out)


def _padding_value(value, spec: TensorSpec) -> np.ndarray:
    if value is None:
        return structure.to_array(b"" if spec.dtype is dtypes.string else 0, spec.dtype)
    if isinstance(value, Tensor):
        from rill.graph.tensor_util import constant_value

        v = constant_value(value)
        if v is None:
            raise ValueError(
                f"padded_batch(): padding value {value.name} must be a constant, not computed"
            )
        value = v
    arr = structure.to_array(value, spec.dtype)
    if arr.shape != ():
        raise ValueError(f"padded_batch(): a padding value must be a scalar, got {value!r}")
    return arr


class _PaddedBatch(Dataset):
    _op_name = "PaddedBatchDatasetV2"

    def __init__(self, input_ds: Dataset, batch_size, padded_shapes, padding_values,
                 drop_remainder):  # fmt: skip
        spec = input_ds.element_spec
        if padded_shapes is None:
            padded_shapes = nest.map_structure(
                lambda s: TensorShape([None] * s.shape.rank) if s.shape.rank is not None
                else unknown_shape(), spec)  # fmt: skip
        flat_spec = structure.flat_specs(spec)
        flat_shapes = _flatten_shapes(spec, padded_shapes)
        if padding_values is None:
            flat_pad = [None] * len(flat_spec)
        else:
            flat_pad = nest.flatten(padding_values)
            if len(flat_pad) != len(flat_spec):
                raise ValueError("padded_batch(): padding_values must have the element's structure")
        self._pads = [_padding_value(v, s) for v, s in zip(flat_pad, flat_spec)]
        self._shapes = flat_shapes
        self._batch = _scalar_arg(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        padded_spec = nest.pack_sequence_as(
            spec, [TensorSpec(p, s.dtype) for p, s in zip(flat_shapes, flat_spec)]
        )
        out = nest.map_structure(lambda s: _batched_spec(s, self._batch, self._drop),
                                 padded_spec)  # fmt: skip
        super().__init__(out, [input_ds], _tensors(self._batch))

    def _elements(self, env):
        for group in _groups(self, env, _int_arg(env, self._batch), self._drop):
            out = []
            for c, (shape, pad) in enumerate(zip(self._shapes, self._pads)):
                parts = [np.asarray(e[c]) for e in group]
                rank = parts[0].ndim
                if any(p.ndim != rank for p in parts):
                    raise InvalidArgumentError(
                        f"{self.describe()}: component {c} has elements of different ranks"
                    )
                target = []
                for d in range(rank):
                    longest = max(p.shape[d] for p in parts)
                    want = shape[d] if shape.rank is not None else None
                    if want is not None and want < longest:
                        raise InvalidArgumentError(
                            f"{self.describe()}: Attempted to pad to a smaller size than the "
                            f"input element: component {c} has dimension {d} of {longest}, "
                            f"the padded shape is {shape}"
                        )
                    target.append(longest if want is None else want)
                batch = np.full([len(parts)] + target, pad, dtype=pad.dtype)
                for i, p in enumerate(parts):
                    batch[(i,) + tuple(slice(0, n) for n in p.shape)] = p
                out.append(batch)
            yield tuple(out)


def _flatten_shapes(spec, padded_shapes) -> list[TensorShape]:
    """padded_shapes (nested like the element; each leaf a shape) flattened as `spec`."""
    if isinstance(spec, dict):
        return [s for k in sorted(spec) for s in _flatten_shapes(spec[k], padded_shapes[k])]
    if isinstance(spec, tuple):
        if not isinstance(padded_shapes, (tuple, list)) or len(padded_shapes) != len(spec):
            raise ValueError("padded_batch(): padded_shapes must have the element's structure")
        return [s for a, b in zip(spec, padded_shapes) for s in _flatten_shapes(a, b)]
    if isinstance(padded_shapes, Tensor):
        from rill.graph.tensor_util import constant_value_as_shape

        shape = constant_value_as_shape(padded_shapes)
    else:
        dims = padded_shapes.dims if isinstance(padded_shapes, TensorShape) else padded_shapes
        if dims is not None:
            dims = [None if d is None or d == -1 else int(d) for d in dims]
        shape = as_shape(dims) if dims is not None else unknown_shape()
    if shape.rank is not None and spec.shape.rank is not None and shape.rank != spec.shape.rank:
        raise ValueError(
            f"padded_batch(): padded shape {shape} has rank {shape.rank}, but the component "
            f"has shape {spec.shape}"
        )
    return [shape]


class _Unbatch(Dataset):
    _op_name = "UnbatchDataset"

    def __init__(self, input_ds: Dataset):
        def row(s: TensorSpec) -> TensorSpec:
            if s.shape.rank == 0:
                raise ValueError("Dataset.unbatch(): every component must be at least a vector")
            return TensorSpec(s.shape[1:] if s.shape.rank is not None else unknown_shape(),
                              s.dtype)  # fmt: skip

        super().__init__(nest.map_structure(row, input_ds.element_spec), [input_ds])

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            n = len(element[0])
            if any(len(c) != n for c in element):
                raise InvalidArgumentError(
                    f"{_where(self, k)}: unbatch needs components of one first dimension, got "
                    f"{[len(c) for c in element]}"
                )
            for i in range(n):
                yield tuple(c[i, ...] for c in element)


# -- order and count -----------------------------------------------------------------------------


class _Shuffle(Dataset):
    _op_name = "ShuffleDataset"

    def __init__(self, input_ds: Dataset, buffer_size, seed, reshuffle_each_iteration):
        self._buffer = _scalar_arg(buffer_size, "buffer_size")
        self._seeds = get_seed(seed)
        self._reshuffle = True if reshuffle_each_iteration is None else bool(
            reshuffle_each_iteration)  # fmt: skip
        if self._seeds == (None, None) and not self._reshuffle:
            # The same order every pass: fix the random seeds now, as TensorFlow does.
            self._seeds = tuple(int(x) for x in np.random.SeedSequence().generate_state(2))
        super().__init__(input_ds.element_spec, [input_ds], _tensors(self._buffer))

    def _rng(self, env) -> np.random.Generator:
        def fresh():
            if self._seeds == (None, None):
                return np.random.default_rng()
            return np.random.default_rng([int(s) for s in self._seeds])

        if not self._reshuffle:
            return fresh()
        key = (self._id, "rng")
        rng = env.state.store.get(key)
        if rng is None:
            rng = env.state.store[key] = fresh()
        return rng

    def _elements(self, env):
        size = _int_arg(env, self._buffer)
        if size <= 0:
            raise InvalidArgumentError(
                f"{self.describe()}: buffer_size must be greater than zero, got {size}"
            )
        rng = self._rng(env)
        source = self._inputs[0]._elements(env)
        buffer = []
        for element in source:
            buffer.append(element)
            if len(buffer) == size:
                break
        while buffer:
            i = int(rng.integers(len(buffer)))
            element = buffer[i]
            nxt = next(source, None)
            if nxt is None:
                buffer[i] = buffer[-1]
                buffer.pop()
            else:
                buffer[i] = nxt
            yield element


class _Repeat(Dataset):
    _op_name = "RepeatDataset"

    def __init__(self, input_ds: Dataset, count):
        self._count = -1 if count is None else _scalar_arg(count, "count")
        super().__init__(input_ds.element_spec, [input_ds], _tensors(self._count))

    def _elements(self, env):
        count = _int_arg(env, self._count)
        epoch = 0
        while count < 0 or epoch < count:
            produced = False
            for element in self._inputs[0]._elements(env):
                produced = True
                yield element
            if not produced:
                return  # an empty dataset repeated forever is still empty (as in TensorFlow)
            epoch += 1


class _Take(Dataset):
    _op_name = "TakeDataset"

    def __init__(self, input_ds: Dataset, count):
        self._count = _scalar_arg(count, "count")
        super().__init__(input_ds.element_spec, [input_ds], _tensors(self._count))

    def _elements(self, env):
        count = _int_arg(env, self._count)
        if count == 0:
            return
        for k, element in enumerate(self._inputs[0]._elements(env)):
            yield element
            if k + 1 == count:
                return


class _Skip(Dataset):
    _op_name = "SkipDataset"

    def __init__(self, input_ds: Dataset, count):
        self._count = _scalar_arg(count, "count")
        super().__init__(input_ds.element_spec, [input_ds], _tensors(self._count))

    def _elements(self, env):
        count = _int_arg(env, self._count)
        for k, element in enumerate(self._inputs[0]._elements(env)):
            if count < 0 or k < count:
                continue
            yield element


class _Shard(Dataset):
    _op_name = "ShardDataset"

    def __init__(self, input_ds: Dataset, num_shards, index):
        self._n = _scalar_arg(num_shards, "num_shards")
        self._i = _scalar_arg(index, "index")
        for v in (self._n, self._i):
            if isinstance(v, int) and v < 0:
                raise ValueError(f"Dataset.shard(): num_shards and index must be >= 0, got {v}")
        if isinstance(self._n, int) and isinstance(self._i, int) and self._i >= self._n:
            raise ValueError(f"Dataset.shard(): index {self._i} must be < num_shards {self._n}")
        super().__init__(input_ds.element_spec, [input_ds], _tensors(self._n, self._i))

    def _elements(self, env):
        n, i = _int_arg(env, self._n), _int_arg(env, self._i)
        if n <= 0 or not 0 <= i < n:
            raise InvalidArgumentError(f"{self.describe()}: bad num_shards {n} / index {i}")
        for k, element in enumerate(self._inputs[0]._elements(env)):
            if k % n == i:
                yield element


class _Prefetch(Dataset):
    _op_name = "PrefetchDataset"

    def __init__(self, input_ds: Dataset, buffer_size):
        self._buffer = _scalar_arg(buffer_size, "buffer_size")
        super().__init__(input_ds.element_spec, [input_ds])

    def _elements(self, env):
        return self._inputs[0]._elements(env)


class _Cache(Dataset):
    _op_name = "CacheDataset"

    def __init__(self, input_ds: Dataset, filename):
        if isinstance(filename, Tensor) or filename:
            raise ValueError(
                "Dataset.cache(): rill caches in memory only (filename=''); a cache file is not "
                "supported"
            )
        super().__init__(input_ds.element_spec, [input_ds])

    def _elements(self, env):
        key = (self._id, env.serial, "cache")
        cached = env.state.store.get(key)
        if cached is not None:
            yield from cached
            return
        seen = []
        for element in self._inputs[0]._elements(env):
            seen.append(element)
            yield element
        # Only a complete pass is kept; a partial one (take() after cache()) starts over.
        env.state.store[key] = seen


class _Concatenate(Dataset):
    _op_name = "ConcatenateDataset"

    def __init__(self, first: Dataset, second: Dataset):
        if not isinstance(second, Dataset):
            raise TypeError(f"Dataset.concatenate() takes a Dataset, got {type(second)}")
        a, b = first.element_spec, second.element_spec
        try:
            nest.assert_same_structure(a, b)
        except (ValueError, TypeError) as e:
            raise TypeError(f"Dataset.concatenate(): the element structures differ: {e}") from None
        fa, fb = structure.flat_specs(a), structure.flat_specs(b)
        if [s.dtype for s in fa] != [s.dtype for s in fb]:
            raise TypeError(
                f"Dataset.concatenate(): the element types differ: {first.describe()} and "
                f"{second.describe()}"
            )
        merged = [TensorSpec(_most_specific_common(x.shape, y.shape), x.dtype)
                  for x, y in zip(fa, fb)]  # fmt: skip
        super().__init__(nest.pack_sequence_as(a, merged), [first, second])

    def _elements(self, env):
        yield from self._inputs[0]._elements(env)
        yield from self._inputs[1]._elements(env)


def _most_specific_common(a: TensorShape, b: TensorShape) -> TensorShape:
    if a.rank is None or b.rank is None or a.rank != b.rank:
        return unknown_shape()
    return TensorShape([x if x == y else None for x, y in zip(a.dims, b.dims)])
