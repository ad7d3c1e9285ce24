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
from rill.graph.shapes import TensorShape, unknown_shape
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


def _check_predicate(fn, what: str) -> None:
    out = fn.flat_outputs
    if len(out) != 1 or out[0].dtype is not dtypes.bool_ or out[0].shape.rank not in (0, None):
        got = ", ".join(f"{t.dtype.name}{t.shape}" for t in out)
        raise ValueError(f"{what}: the predicate must return a scalar bool tensor, got ({got})")


class _Filter(Dataset):
    _op_name = "FilterDataset"

    def __init__(self, input_ds: Dataset, predicate):
        self._fn = trace(predicate, input_ds.element_spec, "Dataset.filter()")
        _check_predicate(self._fn, "Dataset.filter()")
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


class _TakeWhile(Dataset):
    _op_name = "TakeWhileDataset"

    def __init__(self, input_ds: Dataset, predicate):
        self._fn = trace(predicate, input_ds.element_spec, "take_while()")
        _check_predicate(self._fn, "take_while()")
        super().__init__(input_ds.element_spec, [input_ds], self._fn.captured)

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            (keep,) = env.run(self._fn, element, _where(self, k))
            if not bool(keep):
                return
            yield element


class _ChooseFrom(Dataset):
    _op_name = "DirectedInterleaveDataset"

    def __init__(self, datasets: list, choices: Dataset, stop_on_empty: bool):
        if not datasets or not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("choose_from_datasets() takes a non-empty list of Datasets")
        cs = choices.element_spec
        if not isinstance(cs, TensorSpec) or cs.dtype is not dtypes.int64 or cs.shape.rank != 0:
            raise TypeError(
                f"choose_from_datasets(): choice_dataset must yield int64 scalars, got "
                f"{choices.describe()}"
            )
        first = datasets[0]
        for d in datasets[1:]:
            if [s.dtype for s in d._flat_specs()] != [s.dtype for s in first._flat_specs()]:
                raise TypeError(
                    f"choose_from_datasets(): the datasets' element types differ: "
                    f"{first.describe()} and {d.describe()}"
                )
        self._stop = bool(stop_on_empty)
        super().__init__(first.element_spec, [choices] + datasets)

    def _elements(self, env):
        iters = [d._elements(env) for d in self._inputs[1:]]
        done = [False] * len(iters)
        for (choice,) in self._inputs[0]._elements(env):
            i = int(choice)
            if not 0 <= i < len(iters):
                raise InvalidArgumentError(
                    f"{self.describe()}: selector index {i} is out of range [0, {len(iters)})"
                )
            if done[i]:
                continue
            element = next(iters[i], None)
            if element is None:
                done[i] = True
                if self._stop or all(done):
                    return
                continue
            yield element


class _RandomChoices(Dataset):
    """Endless int64 indices drawn with `weights` (sample_from_datasets' selector)."""

    _op_name = "RandomChoiceDataset"

    def __init__(self, weights, seed):
        w = np.asarray(weights, np.float64)
        if w.ndim != 1 or not len(w) or (w < 0).any() or not w.sum() > 0:
            raise ValueError(
                f"sample_from_datasets(): weights must be non-negative with a positive sum, "
                f"got {weights!r}"
            )
        self._p = w / w.sum()
        self._seeds = get_seed(seed)
        super().__init__(TensorSpec(TensorShape([]), dtypes.int64))

    def _elements(self, env):
        key = (self._id, "rng")
        rng = env.state.store.get(key)
        if rng is None:
            seeds = None if self._seeds == (None, None) else [int(s) for s in self._seeds]
            rng = env.state.store[key] = np.random.default_rng(seeds)
        n = len(self._p)
        while True:
            yield (np.asarray(rng.choice(n, p=self._p), np.int64),)
