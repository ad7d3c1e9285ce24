"""`tf.python_io` of TensorFlow 1.x: TFRecord files."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.compat.v1._ops18 import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)
