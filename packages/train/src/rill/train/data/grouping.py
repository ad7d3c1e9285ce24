"""Grouping transformations of tf.data.experimental: group_by_window and
bucket_by_sequence_length (which TensorFlow builds on group_by_window, as rill does).

`group_by_window(key_func, reduce_func, window_size)` puts each element in the window of its
key (an int64 from `key_func`); a window that reaches its size goes through `reduce_func(key,
window_dataset)`, a function returning a dataset (typically `window.batch(n)`), whose elements
are produced; at the end of the input the unfinished windows follow in ascending key order,
as TensorFlow's (a std::map of groups) do.
"""

from __future__ import annotations

import numpy as np

import rill.graph as rg
from rill.graph import dtypes, nest
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph import get_default_graph
from rill.graph.shapes import TensorShape, scalar
from rill.train.data.dataset import Dataset
from rill.train.data.function import trace
from rill.train.data.runtime import collect_captures
from rill.train.data.structure import TensorSpec

__all__ = ["bucket_by_sequence_length", "group_by_window"]

_KEY = TensorSpec(scalar(), dtypes.int64)


class _Window(Dataset):
    """The elements of one window, given to group_by_window's reduce function."""

    _op_name = "WindowDataset"

    def _elements(self, env):
        yield from env.values[("window", self._id)]


def _check_int64_scalar(fn, what: str) -> None:
    out = fn.flat_outputs
    if len(out) != 1 or out[0].dtype is not dtypes.int64 or out[0].shape.rank not in (0, None):
        got = ", ".join(f"{t.dtype.name}{t.shape}" for t in out)
        raise ValueError(f"{what} must return a scalar int64 tensor, got ({got})")


class _GroupByWindow(Dataset):
    _op_name = "GroupByWindowDataset"

    def __init__(self, input_ds: Dataset, key_func, reduce_func, window_size, window_size_func):
        if (window_size is None) == (window_size_func is None):
            raise ValueError("group_by_window() takes exactly one of window_size and "
                             "window_size_func")  # fmt: skip
        spec = input_ds.element_spec
        self._key = trace(key_func, spec, "group_by_window() key_func")
        _check_int64_scalar(self._key, "group_by_window() key_func")
        self._size_fn = None
        self._size = None
        if window_size_func is not None:
            self._size_fn = trace(window_size_func, _KEY, "group_by_window() window_size_func")
            _check_int64_scalar(self._size_fn, "group_by_window() window_size_func")
        else:
            self._size = int(window_size)
            if self._size <= 0:
                raise ValueError(
                    f"group_by_window(): window_size must be positive, got {window_size}"
                )
        windows = []

        def window_arg():
            windows.append(_Window(spec))
            return (windows[-1],)

        def outputs(result):
            if not isinstance(result, Dataset):
                raise TypeError(
                    f"group_by_window(): reduce_func must return a Dataset, got {type(result)}"
                )
            g = get_default_graph()
            return [g.capture(t) for t in collect_captures(result)]

        self._reduce = trace(reduce_func, _KEY, "group_by_window() reduce_func", outputs=outputs,
                             extra_args=window_arg)  # fmt: skip
        self._window = windows[0]
        self._inner = collect_captures(self._reduce.result)
        captured = self._key.captured + self._reduce.captured
        if self._size_fn is not None:
            captured += self._size_fn.captured
        super().__init__(self._reduce.result.element_spec, [input_ds], captured)

    def _window_size(self, env, key, where: str) -> int:
        if self._size_fn is None:
            return self._size
        (size,) = env.run(self._size_fn, (key,), where)
        if int(size) <= 0:
            raise InvalidArgumentError(f"{where}: window_size_func returned {int(size)} for key "
                                       f"{int(key)}; it must be positive")  # fmt: skip
        return int(size)

    def _reduced(self, env, key, elements: list, where: str):
        values = env.run(self._reduce, (key,), where)
        inner = {id(t): v for t, v in zip(self._inner, values)}
        inner[("window", self._window._id)] = elements
        return self._reduce.result._elements(env.child(inner))

    def _elements(self, env):
        groups: dict[int, list] = {}
        for k, element in enumerate(self._inputs[0]._elements(env)):
            where = f"{self.describe()}, element {k}"
            (key,) = env.run(self._key, element, where)
            key = np.asarray(key, np.int64)
            group = groups.setdefault(int(key), [])
            group.append(element)
            if len(group) >= self._window_size(env, key, where):
                del groups[int(key)]
                yield from self._reduced(env, key, group, where)
        for key in sorted(groups):
            yield from self._reduced(env, np.asarray(key, np.int64), groups[key],
                                     f"{self.describe()}, last window of key {key}")  # fmt: skip


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    """Groups elements by `key_func` into windows reduced by `reduce_func`, for `apply`."""
    return lambda ds: _GroupByWindow(ds, key_func, reduce_func, window_size, window_size_func)


def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes,
                              padded_shapes=None, padding_values=None,
                              pad_to_bucket_boundary=False, no_padding=False,
                              drop_remainder=False):  # fmt: skip
    """Batches elements of similar length together: bucket i holds the lengths in
    [bucket_boundaries[i-1], bucket_boundaries[i]) and is batched (padded) by
    bucket_batch_sizes[i], for `apply`."""
    boundaries = [int(b) for b in bucket_boundaries]
    sizes = [int(s) for s in bucket_batch_sizes]
    if len(sizes) != len(boundaries) + 1:
        raise ValueError(
            f"bucket_by_sequence_length(): len(bucket_batch_sizes) must equal "
            f"len(bucket_boundaries) + 1, got {len(sizes)} and {len(boundaries)}"
        )
    if boundaries != sorted(boundaries):
        raise ValueError(f"bucket_by_sequence_length(): bucket_boundaries must be sorted, got "
                         f"{boundaries}")  # fmt: skip
    if pad_to_bucket_boundary:
        raise ValueError(
            "bucket_by_sequence_length(pad_to_bucket_boundary=True) is not supported by rill "
            "(it needs run-time padded shapes); pad to the batch's longest instead"
        )

    def bucket_id(*element):
        length = rg.cast(element_length_func(*element), dtypes.int64)
        above = rg.greater_equal(length, np.asarray(boundaries, np.int64))
        return rg.reduce_sum(rg.cast(above, dtypes.int64))

    def window_size(key):
        return rg.gather(np.asarray(sizes, np.int64), key)

    def batch(key, window):
        size = rg.gather(np.asarray(sizes, np.int64), key)
        if no_padding:
            return window.batch(size, drop_remainder)
        shapes = padded_shapes
        if shapes is None:
            shapes = nest.map_structure(
                lambda s: TensorShape([None] * s.shape.rank) if s.shape.rank is not None
                else TensorShape(None), window.element_spec)  # fmt: skip
        return window.padded_batch(size, shapes, padding_values, drop_remainder)

    return lambda ds: _GroupByWindow(ds, bucket_id, batch, None, window_size)
