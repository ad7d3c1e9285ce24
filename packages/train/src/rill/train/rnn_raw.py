"""`raw_rnn` (TensorFlow-1's `tf.nn.raw_rnn`): an RNN whose inputs, stopping and emitted
values are chosen step by step by a user `loop_fn`, built as one while_loop.

    (finished, next_input, initial_state, emit_structure, loop_state) = loop_fn(
        time=0, cell_output=None, cell_state=None, loop_state=None)
    while not all(finished):
        (output, cell_state) = cell(next_input, state)
        (next_finished, next_input, next_state, emit, loop_state) = loop_fn(
            time=time + 1, cell_output=output, cell_state=cell_state, loop_state=loop_state)
        state = where(finished, state, next_state)     # finished entries keep their state
        emit = where(finished, zeros_like(emit_structure), emit)
        emit_ta = emit_ta.write(time, emit)
        finished = finished | next_finished
"""

from __future__ import annotations

from rill.graph import dtypes, nest
from rill.graph.control_flow import while_loop
from rill.graph.graph import constant, convert_to_tensor
from rill.graph.ops import array_ops, reduction_ops
from rill.graph.ops.logic_ops import logical_not, logical_or, select
from rill.graph.ops.tensor_array_ops import TensorArray
from rill.graph.shapes import TensorShape
from rill.train.rnn_cell import assert_like_rnncell, concat_shape
from rill.train.variable_scope import variable_scope

__all__ = ["raw_rnn"]


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory: bool = False, scope=None):
    """Runs `cell` under the control of `loop_fn` (see the module docstring).

    Returns:
        (emit_ta, final_state, final_loop_state): emit_ta a TensorArray (or a structure of
        them, as emit_structure) with one entry per step, each [batch, ...].

    Raises:
        TypeError: loop_fn is not callable or cell is not an RNNCell.
    """
    assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    parallel_iterations = parallel_iterations or 32
    with variable_scope(scope or "rnn"):
        time = constant(0, dtype=dtypes.int32, name="time")
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time=time, cell_output=None, cell_state=None, loop_state=None
        )
        finished = convert_to_tensor(finished, dtypes.bool_)
        if finished.shape.rank != 1:
            raise ValueError(f"loop_fn's finished must be a vector [batch], got {finished.shape}")
        state = initial_state
        flat_input = [convert_to_tensor(x) for x in nest.flatten(next_input)]
        batch = flat_input[0].shape[0]
        if batch is None:
            batch = array_ops.shape(flat_input[0])[0]
        if emit_structure is not None:
            flat_emit = [convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            emit_sizes = [e.shape[1:] for e in flat_emit]
            emit_dtypes = [e.dtype for e in flat_emit]
            emit_like = emit_structure
        else:
            emit_like = cell.output_size
            emit_sizes = [TensorShape([s]) if isinstance(s, int) else TensorShape(s)
                          for s in nest.flatten(cell.output_size)]  # fmt: skip
            emit_dtypes = [nest.flatten(state)[0].dtype] * len(emit_sizes)
        zero_emit = [array_ops.zeros(concat_shape(batch, s.as_list()), dtype=t)
                     for s, t in zip(emit_sizes, emit_dtypes)]  # fmt: skip
        emit_ta = tuple(
            TensorArray(
                t, size=0, dynamic_size=True, element_shape=TensorShape([None]).concatenate(s)
            )
            for s, t in zip(emit_sizes, emit_dtypes)
        )
        loop_state = init_loop_state if init_loop_state is not None else constant(0, name="none")

        def body(time, elements_finished, current_input, emit_ta, state, loop_state):
            output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state)
            nest.assert_same_structure(cell.output_size, output)
            next_time = time + 1
            (next_finished, next_input, next_state, emit, next_loop_state) = loop_fn(
                time=next_time, cell_output=output, cell_state=cell_state,
                loop_state=loop_state if init_loop_state is not None else None,
            )  # fmt: skip
            nest.assert_same_structure(state, next_state)
            nest.assert_same_structure(current_input, next_input)
            emit = output if emit is None else emit
            next_finished = convert_to_tensor(next_finished, dtypes.bool_)

            def copy_when_finished(new, old):
                if new.shape.is_compatible_with(old.shape):
                    new.set_shape(old.shape)
                return select(elements_finished, old, new)

            flat_emit = [copy_when_finished(e, z) for e, z in
                         zip(nest.flatten(emit), zero_emit)]  # fmt: skip
            flat_state = [copy_when_finished(n, o) for n, o in
                          zip(nest.flatten(next_state), nest.flatten(state))]  # fmt: skip
            emit_ta = tuple(ta.write(time, e) for ta, e in zip(emit_ta, flat_emit))
            done = logical_or(elements_finished, next_finished)
            if next_loop_state is None:
                next_loop_state = loop_state
            return (next_time, done, next_input, emit_ta,
                    nest.pack_sequence_as(state, flat_state), next_loop_state)  # fmt: skip

        def not_all_finished(time, elements_finished, *_):
            return logical_not(reduction_ops.reduce_all(elements_finished))

        _, _, _, emit_ta, final_state, final_loop_state = while_loop(
            not_all_finished,
            body,
            (time, finished, next_input, emit_ta, state, loop_state),
            parallel_iterations=parallel_iterations,
            swap_memory=swap_memory,
        )
        emit_out = nest.pack_sequence_as(emit_like, list(emit_ta))
        return emit_out, final_state, (final_loop_state if init_loop_state is not None else None)
