"""TF1's RNN cells (`tf.nn.rnn_cell`): one step of a recurrent network, as a layer.

A cell maps `(inputs [batch, depth], state)` to `(output, new_state)`. It creates its variables
on the first call and reuses them on every later one, so `rnn.dynamic_rnn` (which calls it once,
inside a while loop) and `rnn.static_rnn` (once per time step) share one set of weights.

Names follow TensorFlow 1. A cell is a `tf.layers` layer: its variables live in a sub-scope named
after its class (`basic_rnn_cell`, `basic_lstm_cell`, `lstm_cell`, `gru_cell`) of the variable
scope current at its first call, e.g. `rnn/basic_lstm_cell/kernel` and `rnn/basic_lstm_cell/bias`
under `dynamic_rnn`; GRUCell has `gates/kernel`, `gates/bias`, `candidate/kernel`,
`candidate/bias`; `MultiRNNCell` puts cell i under `multi_rnn_cell/cell_<i>/`.

Each gated cell does one MatMul per step over `concat([inputs, h])` with a kernel holding every
gate side by side (TensorFlow's layout, so checkpoints are interchangeable), then splits the
result: for a 512-unit LSTM that is one [batch, in+512] x [in+512, 2048] product a step.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     cell = BasicLSTMCell(4)
...     x = rg.placeholder(rg.float32, [2, 3])
...     h, state = cell(x, cell.zero_state(2, rg.float32))
...     [v.name for v in cell.variables], h.shape, type(state).__name__
(['basic_lstm_cell/kernel:0', 'basic_lstm_cell/bias:0'], TensorShape([2, 4]), 'LSTMStateTuple')
"""

from __future__ import annotations

import collections
import numbers

import numpy as np

from rill.graph import dtypes, nest
from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.ops import array_ops, math_ops
from rill.graph.ops.matmul_ops import matmul
from rill.graph.ops.nn_ops import bias_add, relu
from rill.graph.ops.reshape_ops import concat, expand_dims, split
from rill.graph.ops.slice_ops import slice as slice_op
from rill.graph.ops.state_ops import trainable_variables
from rill.graph.shapes import TensorShape, as_shape
from rill.graph.tensor_util import constant_value
from rill.train import init_ops
from rill.train._fused_lstm import fusable as _fusable
from rill.train._fused_lstm import fused_step as _fused_step
from rill.train._fused_lstm import set_fused_lstm
from rill.train.clip_ops import clip_by_value
from rill.train.layers.base import Layer
from rill.train.variable_scope import get_variable_scope, variable_scope

__all__ = [
    "RNNCell",
    "LayerRNNCell",
    "BasicRNNCell",
    "GRUCell",
    "LSTMStateTuple",
    "BasicLSTMCell",
    "LSTMCell",
    "MultiRNNCell",
    "DropoutWrapper",
    "ResidualWrapper",
    "DeviceWrapper",
    "assert_like_rnncell",
    "set_fused_lstm",
]

_WEIGHTS_NAME = "kernel"
_BIAS_NAME = "bias"

_ACTIVATIONS = {
    "tanh": math_ops.tanh,
    "sigmoid": math_ops.sigmoid,
    "relu": relu,
    "linear": lambda x: x,
}


def _activation(activation):
    """`activation` as a callable: a callable, a name ("tanh", "relu", ...), or None (tanh)."""
    if activation is None:
        return math_ops.tanh
    if isinstance(activation, str):
        try:
            return _ACTIVATIONS[activation]
        except KeyError:
            raise ValueError(
                f"unknown activation {activation!r}; pass a callable or one of "
                f"{sorted(_ACTIVATIONS)}"
            ) from None
    if not callable(activation):
        raise TypeError(f"activation must be callable, got {activation!r}")
    return activation


def assert_like_rnncell(cell_name: str, cell) -> None:
    """Raises TypeError unless `cell` has output_size, state_size, zero_state and is callable
    (what dynamic_rnn and static_rnn use)."""
    missing = [
        what
        for what, ok in (
            ("'output_size' property is missing", hasattr(cell, "output_size")),
            ("'state_size' property is missing", hasattr(cell, "state_size")),
            (
                "either 'zero_state' or 'get_initial_state' method is required",
                hasattr(cell, "zero_state") or hasattr(cell, "get_initial_state"),
            ),
            ("is not callable", callable(cell)),
        )
        if not ok
    ]
    if missing:
        raise TypeError(f"The argument {cell_name!r} ({cell!r}) is not an RNNCell: "
                        + ", ".join(missing) + ".")  # fmt: skip


# -- shapes of zero states ---------------------------------------------------------------------


def _dims_of(size) -> list | None:
    """A cell size (int, TensorShape, list) as a list of dims (None entries when unknown)."""
    if isinstance(size, Tensor):
        return None
    s = as_shape(size) if not isinstance(size, numbers.Integral) else TensorShape([int(size)])
    return None if s.rank is None else list(s.dims)


def concat_shape(prefix, suffix, static: bool = False):
    """`prefix + suffix` as a shape: a TensorShape when `static`, else an int32 vector Tensor
    (or a list of ints when both are known while building).

    `prefix` is a batch size: an int, a scalar or vector Tensor, or a shape; `suffix` a cell size.
    """
    if isinstance(prefix, Tensor):
        p_static = constant_value(prefix)
        p_static = None if p_static is None else np.asarray(p_static).reshape(-1).tolist()
        if prefix.shape.rank not in (None, 0, 1):
            raise ValueError(
                f"a batch size tensor must be a scalar or a vector, got {prefix} of shape "
                f"{prefix.shape}"
            )
        p_tensor = expand_dims(prefix, 0) if prefix.shape.rank == 0 else prefix
    else:
        p_static = _dims_of(prefix)
        p_tensor = None
    s_static = _dims_of(suffix)
    if static:
        if p_static is None and isinstance(prefix, Tensor):
            rank = prefix.shape.rank
            if rank == 0:
                p_static = [None]
            elif rank == 1 and prefix.shape[0] is not None:
                p_static = [None] * prefix.shape[0]
            else:
                return TensorShape(None)
        if p_static is None or s_static is None:
            return TensorShape(None)
        return TensorShape(list(p_static) + list(s_static))
    if s_static is None or any(d is None for d in s_static):
        raise ValueError(f"a cell size must be fully known to build a state, got {suffix!r}")
    if p_tensor is None:
        if p_static is None or any(d is None for d in p_static):
            raise ValueError(f"the batch size {prefix!r} is not known")
        return list(p_static) + list(s_static)
    if p_tensor.dtype is not dtypes.int32:
        p_tensor = math_ops.cast(p_tensor, dtypes.int32)
    return concat([p_tensor, constant(np.array(s_static, np.int32))], 0)


def _zero_state_tensors(state_size, batch_size, dtype):
    def zeros_for(size):
        z = array_ops.zeros(concat_shape(batch_size, size), dtype=dtype)
        z.set_shape(concat_shape(batch_size, size, static=True))
        return z

    return nest.map_structure(zeros_for, state_size)


# -- the cell protocol -------------------------------------------------------------------------


class RNNCell(Layer):
    """Base of the RNN cells: `(output, new_state) = cell(inputs, state)`.

    Subclasses define `state_size` and `output_size` (an int, a TensorShape, or a nested
    structure of them) and `call(inputs, state)`. A subclass that creates its variables in
    `call` with `get_variable` gets them in a sub-scope named after its class, under the scope
    current at its first call (or `scope` when given); later calls reuse them.
    """

    def __init__(self, trainable: bool = True, name: str | None = None, dtype=None, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, **kwargs)
        self._rnncell_scope = None

    @property
    def state_size(self):
        """The size(s) of the state: an int, a TensorShape, or a tuple of them."""
        raise NotImplementedError(f"{type(self).__name__} must define state_size")

    @property
    def output_size(self):
        """The size of the output: an int or a TensorShape."""
        raise NotImplementedError(f"{type(self).__name__} must define output_size")

    def __call__(self, inputs, state, scope=None):
        """Runs the cell on `inputs` and `state`, creating its variables on the first call."""
        if scope is not None:
            with variable_scope(scope, custom_getter=self._rnn_get_variable) as vs:
                return Layer.__call__(self, inputs, state, scope=vs)
        if self._rnncell_scope is None:
            self._rnncell_scope = variable_scope(
                get_variable_scope(), custom_getter=self._rnn_get_variable
            )
        with self._rnncell_scope:
            return Layer.__call__(self, inputs, state)

    def _rnn_get_variable(self, getter, *args, **kwargs):
        # Variables made by `get_variable` inside `call` count as the cell's weights.
        v = getter(*args, **kwargs)
        trainable = any(v is t for t in trainable_variables())
        weights = self._trainable_weights if trainable else self._non_trainable_weights
        if all(v is not w for w in weights):
            weights.append(v)
        return v

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """The zero state for `inputs` (its first dimension and dtype) or batch_size/dtype."""
        if inputs is not None:
            inputs = convert_to_tensor(inputs, name="inputs")
            if batch_size is None:
                batch_size = inputs.shape[0] if inputs.shape.rank else None
                if batch_size is None:
                    batch_size = array_ops.shape(inputs)[0]
            dtype = dtype or inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError(
                f"get_initial_state needs inputs, or batch_size and dtype (got batch_size="
                f"{batch_size!r}, dtype={dtype!r})"
            )
        return self.zero_state(batch_size, dtype)

    def zero_state(self, batch_size, dtype):
        """Zeros of shape [batch_size, s] for every size s in state_size, in its structure.

        Built under the name scope `<ClassName>ZeroState`.
        """
        with get_default_graph().name_scope(type(self).__name__ + "ZeroState"):
            return _zero_state_tensors(self.state_size, batch_size, dtypes.as_dtype(dtype))


class LayerRNNCell(RNNCell):
    """A cell that creates its variables in `build(inputs_shape)` with `add_weight`."""

    def __call__(self, inputs, state, scope=None):
        return Layer.__call__(self, inputs, state, scope=scope)


def _input_depth(cell: RNNCell, inputs_shape: TensorShape) -> int:
    depth = inputs_shape[-1] if inputs_shape.rank else None
    if depth is None:
        raise ValueError(
            f"{type(cell).__name__} {cell.name!r}: expected inputs.shape[-1] to be known, saw "
            f"shape: {inputs_shape}"
        )
    dtype = dtypes.as_dtype(cell.dtype)
    if not (dtype.is_floating or dtype.is_complex):
        raise ValueError(f"RNN cell only supports floating point inputs, but saw dtype: {dtype}")
    return int(depth)


def _positive_units(num_units, who: str) -> int:
    if not isinstance(num_units, numbers.Integral) or num_units <= 0:
        raise ValueError(f"{who}: num_units must be a positive integer, got {num_units!r}")
    return int(num_units)


# -- the cells ---------------------------------------------------------------------------------


class BasicRNNCell(LayerRNNCell):
    """h' = activation([x, h] · kernel + bias); the output is h'.

    Variables: `kernel` [depth + num_units, num_units] (the scope's initializer, else glorot
    uniform) and `bias` [num_units] (zeros).
    """

    def __init__(self, num_units: int, activation=None, reuse=None, name: str | None = None,
                 dtype=None, **kwargs):  # fmt: skip
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = _positive_units(num_units, "BasicRNNCell")
        self._activation = _activation(activation)

    @property
    def state_size(self) -> int:
        return self._num_units

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: TensorShape) -> None:
        depth = _input_depth(self, inputs_shape)
        self._kernel = self.add_weight(_WEIGHTS_NAME, [depth + self._num_units, self._num_units])
        self._bias = self.add_weight(
            _BIAS_NAME, [self._num_units], initializer=init_ops.zeros_initializer()
        )
        self.built = True

    def call(self, inputs, state):
        gate_inputs = bias_add(matmul(concat([inputs, state], 1), self._kernel), self._bias)
        output = self._activation(gate_inputs)
        return output, output


class GRUCell(LayerRNNCell):
    """The gated recurrent unit (Cho et al. 2014), TensorFlow's formulation:

        r, u = split(sigmoid([x, h] · gates/kernel + gates/bias), 2)
        c = activation([x, r * h] · candidate/kernel + candidate/bias)
        h' = u * h + (1 - u) * c

    Variables: `gates/kernel` [depth + n, 2n], `gates/bias` [2n] (ones unless bias_initializer),
    `candidate/kernel` [depth + n, n], `candidate/bias` [n] (zeros unless bias_initializer).
    """

    def __init__(self, num_units: int, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name: str | None = None, dtype=None,
                 **kwargs):  # fmt: skip
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = _positive_units(num_units, "GRUCell")
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self) -> int:
        return self._num_units

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: TensorShape) -> None:
        depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._gate_kernel = self.add_weight(
            f"gates/{_WEIGHTS_NAME}", [depth + n, 2 * n], initializer=self._kernel_initializer
        )
        self._gate_bias = self.add_weight(
            f"gates/{_BIAS_NAME}",
            [2 * n],
            initializer=self._bias_initializer or init_ops.constant_initializer(1.0),
        )
        self._candidate_kernel = self.add_weight(
            f"candidate/{_WEIGHTS_NAME}", [depth + n, n], initializer=self._kernel_initializer
        )
        self._candidate_bias = self.add_weight(
            f"candidate/{_BIAS_NAME}",
            [n],
            initializer=self._bias_initializer or init_ops.zeros_initializer(),
        )
        self.built = True

    def call(self, inputs, state):
        gates = bias_add(matmul(concat([inputs, state], 1), self._gate_kernel), self._gate_bias)
        r, u = split(math_ops.sigmoid(gates), 2, axis=1)
        candidate = matmul(concat([inputs, r * state], 1), self._candidate_kernel)
        c = self._activation(bias_add(candidate, self._candidate_bias))
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM's state: the cell state `c` and the hidden state (the output) `h`."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype is not h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


def _check_state_is_tuple(state_is_tuple: bool, who: str) -> None:
    if not state_is_tuple:
        import warnings

        warnings.warn(
            f"{who}: state_is_tuple=False is deprecated (TensorFlow 1 too warns); the state is "
            "then [c, h] concatenated along dimension 1",
            stacklevel=3,
        )


class BasicLSTMCell(LayerRNNCell):
    """The LSTM of Zaremba et al. 2014, without peepholes, clipping or projection:

        i, j, f, o = split([x, h] · kernel + bias, 4, axis=1)
        c' = c * sigmoid(f + forget_bias) + sigmoid(i) * activation(j)
        h' = activation(c') * sigmoid(o)

    The state is `LSTMStateTuple(c, h)` (or [c, h] concatenated when state_is_tuple=False); the
    output is h'. Variables: `kernel` [depth + n, 4n] and `bias` [4n] (zeros).
    """

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation=None, reuse=None, name: str | None = None, dtype=None,
                 **kwargs):  # fmt: skip
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_state_is_tuple(state_is_tuple, "BasicLSTMCell")
        self._num_units = _positive_units(num_units, "BasicLSTMCell")
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: TensorShape) -> None:
        depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._kernel = self.add_weight(_WEIGHTS_NAME, [depth + n, 4 * n])
        self._bias = self.add_weight(_BIAS_NAME, [4 * n], initializer=init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = split(state, 2, axis=1)
        if _fusable(self._activation, inputs):
            new_c, new_h = _fused_step(inputs, c, h, self._kernel, self._bias, self._forget_bias)
            if self._state_is_tuple:
                return new_h, LSTMStateTuple(new_c, new_h)
            return new_h, concat([new_c, new_h], 1)
        gates = bias_add(matmul(concat([inputs, h], 1), self._kernel), self._bias)
        i, j, f, o = split(gates, 4, axis=1)
        forget_bias = constant(self._forget_bias, dtype=f.dtype)
        sigmoid = math_ops.sigmoid
        new_c = math_ops.add(
            math_ops.multiply(c, sigmoid(math_ops.add(f, forget_bias))),
            math_ops.multiply(sigmoid(i), self._activation(j)),
        )
        new_h = math_ops.multiply(self._activation(new_c), sigmoid(o))
        if self._state_is_tuple:
            return new_h, LSTMStateTuple(new_c, new_h)
        return new_h, concat([new_c, new_h], 1)


class LSTMCell(LayerRNNCell):
    """The LSTM with optional peepholes (Gers & Schmidhuber 2000), cell clipping and a
    projection layer (Sak et al. 2014):

        i, j, f, o = split([x, m] · kernel + bias, 4, axis=1)
        c' = sigmoid(f + forget_bias [+ w_f_diag * c]) * c
             + sigmoid(i [+ w_i_diag * c]) * activation(j)          (clipped to ±cell_clip)
        m' = sigmoid(o [+ w_o_diag * c']) * activation(c')
        m' = m' · projection/kernel                                  (when num_proj)

    The state is `LSTMStateTuple(c', m')`; the output is m'. Variables: `kernel`
    [depth + (num_proj or n), 4n], `bias` [4n] (zeros), with peepholes `w_f_diag`, `w_i_diag`,
    `w_o_diag` [n], with num_proj `projection/kernel` [n, num_proj]. `initializer` initializes
    every variable but the bias (default: the scope's initializer, else glorot uniform).
    Sharded variables (num_unit_shards, num_proj_shards) are not supported.
    """

    def __init__(self, num_units: int, use_peepholes: bool = False, cell_clip=None,
                 initializer=None, num_proj=None, proj_clip=None, num_unit_shards=None,
                 num_proj_shards=None, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation=None, reuse=None, name: str | None = None, dtype=None,
                 **kwargs):  # fmt: skip
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_state_is_tuple(state_is_tuple, "LSTMCell")
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError(
                "LSTMCell: num_unit_shards and num_proj_shards (partitioned variables) are not "
                "supported by rill yet"
            )
        self._num_units = _positive_units(num_units, "LSTMCell")
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        h = self._num_proj or self._num_units
        if self._state_is_tuple:
            return LSTMStateTuple(self._num_units, h)
        return self._num_units + h

    @property
    def output_size(self) -> int:
        return self._num_proj or self._num_units

    def build(self, inputs_shape: TensorShape) -> None:
        depth = _input_depth(self, inputs_shape)
        n = self._num_units
        h = self._num_proj or n
        init = self._initializer
        self._kernel = self.add_weight(_WEIGHTS_NAME, [depth + h, 4 * n], initializer=init)
        self._bias = self.add_weight(_BIAS_NAME, [4 * n], initializer=init_ops.zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self.add_weight("w_f_diag", [n], initializer=init)
            self._w_i_diag = self.add_weight("w_i_diag", [n], initializer=init)
            self._w_o_diag = self.add_weight("w_o_diag", [n], initializer=init)
        if self._num_proj is not None:
            self._proj_kernel = self.add_weight(
                f"projection/{_WEIGHTS_NAME}", [n, self._num_proj], initializer=init
            )
        self.built = True

    def call(self, inputs, state):
        n = self._num_units
        num_proj = self._num_proj or n
        sigmoid = math_ops.sigmoid
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = slice_op(state, [0, 0], [-1, n])
            m_prev = slice_op(state, [0, n], [-1, num_proj])
        if inputs.shape.with_rank(2)[1] is None:
            raise ValueError("Could not infer input size from inputs.get_shape()[-1]")
        if (
            self._cell_clip is None
            and self._num_proj is None
            and _fusable(self._activation, inputs)
        ):
            peep = (self._w_i_diag, self._w_f_diag, self._w_o_diag) if self._use_peepholes else None
            if peep is not None:
                peep = tuple(convert_to_tensor(v) for v in peep)
            c, m = _fused_step(inputs, c_prev, m_prev, self._kernel, self._bias,
                               self._forget_bias, peep)  # fmt: skip
            return self._project(c, m)
        lstm_matrix = bias_add(matmul(concat([inputs, m_prev], 1), self._kernel), self._bias)
        i, j, f, o = split(lstm_matrix, 4, axis=1)
        if self._use_peepholes:
            c = sigmoid(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev + sigmoid(
                i + self._w_i_diag * c_prev
            ) * self._activation(j)
        else:
            c = sigmoid(f + self._forget_bias) * c_prev + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            c = clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * self._activation(c)
        else:
            m = sigmoid(o) * self._activation(c)
        return self._project(c, m)

    def _project(self, c, m):
        if self._num_proj is not None:
            m = matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else concat([c, m], 1)
        return m, new_state


# The combinators live in rnn_cell_wrappers (this module would be too long); they are part of the
# tf.nn.rnn_cell namespace, so they are re-exported here.
from rill.train.rnn_cell_wrappers import (  # noqa: E402
    DeviceWrapper,
    DropoutWrapper,
    MultiRNNCell,
    ResidualWrapper,
)
