"""`tf.data.experimental` (TensorFlow 1.15): AUTOTUNE, the cardinality constants, and the
transformations that are compositions of rill's datasets (each returns a function to pass to
`Dataset.apply`, as TensorFlow's do)."""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.train.data.dataset import Dataset
from rill.train.data.grouping import bucket_by_sequence_length, group_by_window
from rill.train.data.iterator import get_output_classes, get_output_shapes, get_output_types
from rill.train.data.readers import CsvDataset
from rill.train.data.transforms import AUTOTUNE, _ChooseFrom, _RandomChoices, _TakeWhile

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Counter",
    "CsvDataset",
    "bucket_by_sequence_length",
    "group_by_window",
    "choose_from_datasets",
    "enumerate_dataset",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "get_structure",
    "map_and_batch",
    "parallel_interleave",
    "sample_from_datasets",
    "shuffle_and_repeat",
    "take_while",
    "unbatch",
]

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def Counter(start=0, step=1, dtype=dtypes.int64) -> Dataset:  # noqa: N802 - TensorFlow's name
    """start, start + step, ... without end."""
    return Dataset.range(start, np.iinfo(np.int64).max if step > 0 else np.iinfo(np.int64).min,
                         step, output_type=dtype)  # fmt: skip


def unbatch():
    """`Dataset.unbatch` as a transformation for `apply`."""
    return lambda ds: ds.unbatch()


def enumerate_dataset(start=0):
    """`Dataset.enumerate(start)` as a transformation for `apply`."""
    return lambda ds: ds.enumerate(start)


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False,
                  num_parallel_calls=None):  # fmt: skip
    """`map(map_func)` then `batch(batch_size, drop_remainder)`, for `apply`."""
    return lambda ds: ds.map(map_func, num_parallel_calls).batch(batch_size, drop_remainder)


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """`shuffle(buffer_size, seed)` then `repeat(count)` (a new order each epoch), for `apply`."""
    return lambda ds: ds.shuffle(buffer_size, seed).repeat(count)


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                        buffer_output_elements=None, prefetch_input_elements=None):  # fmt: skip
    """`interleave(map_func, cycle_length, block_length)` for `apply`: rill produces the
    deterministic order (what sloppy=False asks for, and a valid order for sloppy=True)."""
    return lambda ds: ds.interleave(map_func, cycle_length, block_length)


def take_while(predicate):
    """The elements up to the first for which `predicate` is false, for `apply`."""
    return lambda ds: _TakeWhile(ds, predicate)


def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=False) -> Dataset:
    """Element k from `datasets[choice_k]`, where `choice_dataset` yields int64 indices; an
    exhausted dataset's choices are skipped (TensorFlow 1.15), or end it with
    stop_on_empty_dataset=True."""
    return _ChooseFrom(list(datasets), choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False):
    """Each element from one of `datasets`, picked at random with `weights` (default: equal);
    an exhausted dataset is skipped and the result ends when all are (TensorFlow 1.15).
    A seed repeats the same picks; they are not TensorFlow's."""
    datasets = list(datasets)
    if weights is None:
        weights = [1.0] * len(datasets)
    if len(weights) != len(datasets):
        raise ValueError(
            f"sample_from_datasets(): {len(weights)} weights for {len(datasets)} datasets"
        )
    return _ChooseFrom(datasets, _RandomChoices(weights, seed), stop_on_empty_dataset)


def get_structure(dataset_or_iterator):
    """The element's TensorSpec structure."""
    return dataset_or_iterator.element_spec
