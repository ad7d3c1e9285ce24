"""`tf.strings` of TensorFlow 1.x (rill.graph's string ops under their tf.strings names)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.logging_ops import string_format as format  # noqa: A001
from rill.graph.ops.string_ops import as_string, reduce_join, regex_replace, substr
from rill.graph.ops.string_ops import string_join as join
from rill.graph.ops.string_ops import string_length as length
from rill.graph.ops.string_ops import string_lower as lower
from rill.graph.ops.string_ops import string_to_hash_bucket_fast as to_hash_bucket_fast
from rill.graph.ops.string_ops import string_to_hash_bucket_strong as to_hash_bucket_strong
from rill.graph.ops.string_ops import string_to_number as to_number
from rill.graph.ops.string_ops import string_upper as upper
