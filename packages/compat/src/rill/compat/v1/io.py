"""`tf.io` of TensorFlow 1.x: what rill has (queues, GraphDef writing, the tf.gfile
functions as tf.io.gfile)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.compat.v1 import gfile
from rill.graph.graph_io import write_graph
from rill.graph.ops.data_flow_ops import FIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
