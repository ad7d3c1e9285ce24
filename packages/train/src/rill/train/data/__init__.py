"""`tf.data` of TensorFlow 1.15 in graph mode: input pipelines read through iterator ops.

    ds = Dataset.from_tensor_slices((images, labels)).shuffle(1000, seed=1).batch(32).repeat()
    it = ds.make_initializable_iterator()
    x, y = it.get_next()          # tensors of the element's structure
    sess.run(it.initializer)      # then sess.run(train) until OutOfRangeError

The pipeline is a Python object kept by the graph (rill.train.data.runtime); the graph gets
TensorFlow's iterator ops (IteratorV2, MakeIterator, IteratorGetNext, OneShotIterator) and one
`_Dataset` op reading the tensors the pipeline captures. Functions given to `map`, `filter`,
`flat_map` and `interleave` are traced once into a graph of rill ops and run per element.
"""

from rill.train.data import experimental
from rill.train.data.dataset import Dataset
from rill.train.data.experimental import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from rill.train.data.iterator import (
    Iterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
from rill.train.data.readers import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset
from rill.train.data.structure import TensorSpec

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "FixedLengthRecordDataset",
    "Iterator",
    "TFRecordDataset",
    "TensorSpec",
    "TextLineDataset",
    "experimental",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]
