"""`tf.data` of TensorFlow 1.x: Dataset, the file datasets, iterators and
`tf.compat.v1.data.get_output_*`, from rill.train.data."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.train.data import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    FixedLengthRecordDataset,
    Iterator,
    TextLineDataset,
    TFRecordDataset,
    experimental,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
