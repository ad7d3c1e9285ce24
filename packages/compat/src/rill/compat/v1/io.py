"""`tf.io` of TensorFlow 1.x: what rill has (queues, GraphDef writing, the tf.gfile
functions as tf.io.gfile)."""

# ruff: noqa: F401, E402 - a namespace of re-exports

from rill.compat.v1 import gfile

# issue 18: TFRecord files, tf.Example parsing, raw and CSV decoding
from rill.compat.v1._ops18 import (
    FixedLenFeature,
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    VarLenFeature,
    parse_example,
    parse_single_example,
    tf_record_iterator,
)
from rill.graph.graph_io import write_graph
from rill.graph.ops.data_flow_ops import FIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
from rill.graph.ops.string_ops import decode_csv, decode_raw
