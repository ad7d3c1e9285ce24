"""`tf.graph_util` of TensorFlow 1.x (rill.graph.graph_util)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.graph_util import (
    convert_variables_to_constants,
    extract_sub_graph,
    remove_training_nodes,
)
