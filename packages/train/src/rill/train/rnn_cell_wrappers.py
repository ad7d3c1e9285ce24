"""The cell combinators of `tf.nn.rnn_cell`: MultiRNNCell (stacked cells) and DropoutWrapper.

Both are re-exported by rill.train.rnn_cell.

>>> import rill.graph as rg
>>> from rill.train.rnn_cell import BasicLSTMCell, GRUCell
>>> with rg.Graph().as_default():
...     cell = MultiRNNCell([GRUCell(3), BasicLSTMCell(4)])
...     out, state = cell(rg.placeholder(rg.float32, [2, 5]), cell.zero_state(2, rg.float32))
...     [v.op.name for v in cell.variables][-1], out.shape
('multi_rnn_cell/cell_1/basic_lstm_cell/bias', TensorShape([2, 4]))
"""

from __future__ import annotations

import hashlib
import numbers
import warnings

import numpy as np

from rill.graph import nest
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.ops.reshape_ops import concat
from rill.graph.ops.slice_ops import slice as slice_op
from rill.graph.tensor_util import constant_value
from rill.train.layers.core import nn_dropout
from rill.train.rnn_cell import LSTMStateTuple, RNNCell, assert_like_rnncell
from rill.train.variable_scope import variable_scope

__all__ = ["MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper"]


class MultiRNNCell(RNNCell):
    """Cells stacked: cell i's output is cell i+1's input; the state is the tuple of their
    states (or their concatenation along dimension 1 when state_is_tuple=False).

    Cell i runs in variable scope `cell_<i>` of the stack's own scope (`multi_rnn_cell`).
    """

    def __init__(self, cells, state_is_tuple: bool = True):
        super().__init__()
        cells = list(cells)
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_nested(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        if len({id(c) for c in cells}) < len(cells):
            warnings.warn(
                "At least two cells provided to MultiRNNCell are the same object and will share "
                "weights.",
                stacklevel=2,
            )
        self._cells = cells
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_nested(c.state_size) for c in cells):
            raise ValueError(
                "Some cells return tuples of states, but the flag state_is_tuple is not set. "
                f"State sizes are: {[c.state_size for c in cells]}"
            )

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    @property
    def trainable_weights(self):
        if not self.trainable:
            return []
        return [w for c in self._cells for w in getattr(c, "trainable_weights", [])]

    @property
    def non_trainable_weights(self):
        weights = [w for c in self._cells for w in getattr(c, "non_trainable_weights", [])]
        if not self.trainable:
            trainable = [w for c in self._cells for w in getattr(c, "trainable_weights", [])]
            return trainable + weights
        return weights

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    def zero_state(self, batch_size, dtype):
        if not self._state_is_tuple:
            return super().zero_state(batch_size, dtype)
        with get_default_graph().name_scope(type(self).__name__ + "ZeroState"):
            return tuple(c.zero_state(batch_size, dtype) for c in self._cells)

    def call(self, inputs, state):
        cur_inp = inputs
        pos = 0
        new_states = []
        for i, cell in enumerate(self._cells):
            with variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not nest.is_nested(state):
                        raise ValueError(
                            f"Expected state to be a tuple of length {len(self.state_size)}, "
                            f"but received: {state}"
                        )
                    cur_state = state[i]
                else:
                    cur_state = slice_op(state, [0, pos], [-1, cell.state_size])
                    pos += cell.state_size
                cur_inp, new_state = cell(cur_inp, cur_state)
                new_states.append(new_state)
        if self._state_is_tuple:
            return cur_inp, tuple(new_states)
        return cur_inp, concat(new_states, 1)


def _default_state_filter(substate):
    # An LSTM's memory c is kept whole; only its output h is dropped out.
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return True


def _children(s) -> list:
    return [s[k] for k in sorted(s)] if isinstance(s, dict) else list(s)


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and new state (each element kept with probability
    keep_prob and scaled by 1/keep_prob, as tf.nn.dropout).

    A keep probability that is the Python number 1 adds no ops. The new state is filtered by
    `dropout_state_filter_visitor(substate) -> bool` (default: every tensor but the `c` of an
    LSTMStateTuple). `seed` with a fixed salt per place gives each dropout its own op seed, as
    TensorFlow derives them. Variational (per-sequence) dropout is not supported.
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent: bool = False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):  # fmt: skip
        super().__init__()
        assert_like_rnncell("cell", cell)
        if variational_recurrent:
            raise NotImplementedError(
                "DropoutWrapper: variational_recurrent=True is not supported by rill yet"
            )
        self._cell = cell
        self._seed = seed
        self._filter = dropout_state_filter_visitor or _default_state_filter
        probs = {}
        with get_default_graph().name_scope("DropoutWrapperInit"):
            for what, p in (("input_keep_prob", input_keep_prob),
                            ("state_keep_prob", state_keep_prob),
                            ("output_keep_prob", output_keep_prob)):  # fmt: skip
                if isinstance(p, numbers.Real) and not isinstance(p, bool):
                    if not 0 < p <= 1:
                        raise ValueError(f"Parameter {what} must be between 0 and 1: {p}")
                    probs[what] = float(p)
                else:
                    t = convert_to_tensor(p)
                    v = constant_value(t)
                    if v is not None and not 0 < float(v) <= 1:
                        raise ValueError(f"Parameter {what} must be between 0 and 1: {float(v)}")
                    probs[what] = float(v) if v is not None else t
        self._input_keep_prob = probs["input_keep_prob"]
        self._state_keep_prob = probs["state_keep_prob"]
        self._output_keep_prob = probs["output_keep_prob"]

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    @property
    def trainable_weights(self):
        return list(getattr(self._cell, "trainable_weights", []))

    @property
    def non_trainable_weights(self):
        return list(getattr(self._cell, "non_trainable_weights", []))

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    def zero_state(self, batch_size, dtype):
        with get_default_graph().name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)

    def _gen_seed(self, salt_prefix: str, index: int):
        if self._seed is None:
            return None
        digest = hashlib.md5(f"{self._seed}{salt_prefix}_{index}".encode()).hexdigest()
        return int(digest[:8], 16) & 0x7FFFFFFF

    def _dropout(self, values, salt_prefix: str, keep_prob, filtered=None):
        flat = nest.flatten(values)
        keep = [True] * len(flat) if filtered is None else filtered
        out = []
        for i, (v, k) in enumerate(zip(flat, keep)):
            if not k:
                out.append(v)
                continue
            rate = 1.0 - keep_prob
            out.append(nn_dropout(v, rate=rate, seed=self._gen_seed(salt_prefix, i)))
        return nest.pack_sequence_as(values, out)

    @staticmethod
    def _should_dropout(p) -> bool:
        return not isinstance(p, float) or p < 1

    def _state_filter(self, state) -> list[bool]:
        """One flag per leaf of `state`: whether dropout applies to it.

        The visitor is called top down: on a substructure it answers a bool (False: none of
        its leaves; True: look inside, a leaf itself is then kept for dropout) or a structure
        of the substructure's type with one bool per child.
        """
        flags: list[bool] = []
        stack = [(state, None)]
        while stack:
            s, given = stack.pop()
            answer = self._filter(s) if given is None else given
            if isinstance(answer, (bool, np.bool_)):
                if not answer:
                    flags.extend([False] * len(nest.flatten(s)))
                elif nest.is_nested(s):
                    stack.extend((c, None) for c in reversed(_children(s)))
                else:
                    flags.append(True)
                continue
            if not nest.is_nested(s) or len(nest.flatten(answer)) != len(_children(s)):
                raise TypeError(
                    f"dropout_state_filter_visitor returned {answer!r} for {s!r}; expected a "
                    "bool, or one bool per element of the substructure"
                )
            for c, a in reversed(list(zip(_children(s), _children(answer)))):
                stack.append((c, None) if a else (c, False))
        return flags

    def __call__(self, inputs, state, scope=None):
        if self._should_dropout(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_keep_prob)
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._should_dropout(self._state_keep_prob):
            new_state = self._dropout(
                new_state, "state", self._state_keep_prob, self._state_filter(new_state)
            )
        if self._should_dropout(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_keep_prob)
        return output, new_state


class _Wrapper(RNNCell):
    """A cell that delegates its sizes, state and weights to `cell`."""

    def __init__(self, cell):
        super().__init__()
        assert_like_rnncell("cell", cell)
        self._cell = cell

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    @property
    def trainable_weights(self):
        return self._cell.trainable_weights

    @property
    def non_trainable_weights(self):
        return self._cell.non_trainable_weights

    @property
    def weights(self):
        return self._cell.weights

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)


class ResidualWrapper(_Wrapper):
    """Adds the cell's inputs to its outputs: output = residual_fn(inputs, cell_output), by
    default inputs + output element-wise (`tf.nn.rnn_cell.ResidualWrapper`)."""

    def __init__(self, cell, residual_fn=None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def __call__(self, inputs, state, scope=None):
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, output), new_state
        nest.assert_same_structure(inputs, output)
        return nest.map_structure(lambda i, o: i + o, inputs, output), new_state


class DeviceWrapper(_Wrapper):
    """Builds the cell's ops on `device` (`tf.nn.rnn_cell.DeviceWrapper`)."""

    def __init__(self, cell, device: str):
        super().__init__(cell)
        self._device = device

    def zero_state(self, batch_size, dtype):
        with get_default_graph().device(self._device):
            return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        with get_default_graph().device(self._device):
            return self._cell(inputs, state, scope=scope)
