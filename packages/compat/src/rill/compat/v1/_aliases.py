"""TF1 argument handling for builders whose rill names differ: `tf.Assert`, `tf.Print`
(TensorFlow 1.x passes None for "the default")."""

from __future__ import annotations

from rill.graph.ops.logging_ops import assert_op, print_op

__all__ = ["Assert", "Print"]


def Assert(condition, data, summarize=None, name=None):
    """`tf.Assert`: fails the step when `condition` is false, showing `data`."""
    return assert_op(condition, data, summarize=3 if summarize is None else summarize, name=name)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):
    """`tf.Print`: `input_` unchanged, printing `message` and `data` each time it runs."""
    return print_op(
        input_, data, message=message or "", first_n=-1 if first_n is None else first_n,
        summarize=3 if summarize is None else summarize, name=name,
    )  # fmt: skip
