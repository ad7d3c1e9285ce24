"""TF1 argument handling for builders whose rill names or defaults differ: `tf.Assert`,
`tf.Print` (TensorFlow 1.x passes None for "the default") and `tf.while_loop` (TF1's argument
order, and a one-variable loop returning the tensor itself)."""

from __future__ import annotations

from rill.graph import nest
from rill.graph.control_flow import while_loop as _while_loop
from rill.graph.ops.logging_ops import assert_op, print_op, print_v2, string_format

__all__ = ["Assert", "Print", "bincount", "print_", "while_loop"]


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


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=None, name=None):
    """`tf.bincount` of TensorFlow 1.x: counts (or sums `weights`) per value of the int32 `arr`;
    max(arr) + 1 bins, at least minlength and at most maxlength (larger values dropped)."""
    import rill.graph as rg
    from rill.graph.ops.set_search_ops import bincount as _bincount

    with rg.get_default_graph().name_scope(name or "bincount"):
        arr = rg.cast(rg.convert_to_tensor(arr), rg.int32)
        size = rg.cond(
            rg.size(arr) > 0, lambda: rg.reduce_max(arr) + 1, lambda: rg.constant(0), name="size"
        )
        if minlength is not None:
            size = rg.maximum(size, minlength)
        if maxlength is not None:
            size = rg.minimum(size, maxlength)
        out_dtype = rg.as_dtype(dtype) if dtype is not None else None
        if weights is None:
            weights = rg.ones_like(arr, dtype=out_dtype or rg.int32)
        else:
            weights = rg.convert_to_tensor(weights)
            if out_dtype is not None:
                weights = rg.cast(weights, out_dtype)
        return _bincount(arr, size, weights)


def print_(*inputs, output_stream=None, summarize=3, sep=" ", end="\n", name=None):
    """`tf.print`: an op that prints the inputs (tensors formatted as TensorFlow prints them,
    other values as str) to stderr, stdout or a stream given as sys.stderr/sys.stdout."""
    import sys

    streams = {id(sys.stdout): "stdout", id(sys.stderr): "stderr"}
    if output_stream is None:
        stream = "stderr"
    elif isinstance(output_stream, str):
        stream = output_stream
    elif id(output_stream) in streams:
        stream = streams[id(output_stream)]
    else:
        raise ValueError(f"tf.print: output_stream {output_stream!r} is not sys.stdout/stderr")
    import rill.graph as rg

    parts, tensors = [], []
    for x in inputs:
        if isinstance(x, (rg.Tensor, rg.Variable)):
            parts.append("{}")
            tensors.append(rg.convert_to_tensor(x))
        else:
            parts.append(str(x))
    text = string_format(sep.join(parts), tensors, summarize=summarize)
    return print_v2(text, output_stream=stream, end=end, name=name)
