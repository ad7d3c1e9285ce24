"""TF1 argument handling for builders whose rill names or defaults differ: `tf.Assert`,
`tf.Print` (TensorFlow 1.x passes None for "the default") and `tf.while_loop` (TF1's argument
order, and a one-variable loop returning the tensor itself)."""

from __future__ import annotations

from rill.graph import nest
from rill.graph.control_flow import while_loop as _while_loop
from rill.graph.ops.logging_ops import assert_op, print_op

__all__ = ["Assert", "Print", "while_loop"]


def Assert(condition, data, summarize=None, name=None):
    """`tf.Assert`: fails the step when `condition` is false, showing `data`."""
    return assert_op(condition, data, summarize=3 if summarize is None else summarize, name=name)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):
    """`tf.Print`: `input_` unchanged, printing `message` and `data` each time it runs."""
    return print_op(
        input_, data, message=message or "", first_n=-1 if first_n is None else first_n,
        summarize=3 if summarize is None else summarize, name=name,
    )  # fmt: skip


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):  # fmt: skip
    """`tf.while_loop` of TensorFlow 1.x: as rill.graph.while_loop, with TF1's argument order,
    and, unless return_same_structure, a loop over one variable (`[i]`) returns the tensor
    rather than a one-element list."""
    out = _while_loop(
        cond, body, loop_vars, shape_invariants=shape_invariants,
        parallel_iterations=parallel_iterations, back_prop=back_prop, swap_memory=swap_memory,
        maximum_iterations=maximum_iterations, name=name or "while", return_same_structure=True,
    )  # fmt: skip
    if not return_same_structure and isinstance(out, (list, tuple)):
        flat = nest.flatten(out)
        if len(flat) == 1:
            return out[0]
    return out
