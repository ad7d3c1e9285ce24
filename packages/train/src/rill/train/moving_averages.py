"""ExponentialMovingAverage: shadow copies of variables that trail them (TF1's tf.train class).

`apply(var_list)` makes, for each variable, a shadow variable "<var>/<name>" (colocated with it,
not trainable, initialized to the variable's initial value) and returns an op that moves every
shadow towards its variable: `shadow -= (1 - decay) * (shadow - var)`. With `num_updates`, the
decay used is `min(decay, (1 + num_updates) / (10 + num_updates))`, so early averages move
faster.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     v = rg.Variable(0.0, name="v")
...     ema = ExponentialMovingAverage(0.5)
...     update = ema.apply([v])
...     with Session() as sess:
...         sess.run(rg.global_variables_initializer())
...         _ = sess.run(v.assign(4.0))
...         _ = sess.run(update)
...         float(sess.run(ema.average(v)))
2.0
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.ops.array_ops import group
from rill.graph.ops.math_ops import cast, minimum
from rill.graph.ops.state_ops import GLOBAL_VARIABLES, Variable
from rill.train.slot_creator import create_slot

__all__ = ["MOVING_AVERAGE_VARIABLES", "ExponentialMovingAverage"]

MOVING_AVERAGE_VARIABLES = "moving_average_variables"


class ExponentialMovingAverage:
    """Maintains moving averages of variables with exponential decay.

    Args:
        decay: the decay (e.g. 0.999).
        num_updates: an optional count of updates (a Variable or tensor), which lowers the decay
            early on.
        zero_debias: not supported (TensorFlow uses it for tensors, not variables).
        name: the shadow variables' suffix and the name scope of the update ops.
    """

    def __init__(self, decay, num_updates=None, zero_debias: bool = False, name: str = ""):
        if zero_debias:
            raise NotImplementedError("ExponentialMovingAverage(zero_debias=True) is not supported")
        self._decay = decay
        self._num_updates = num_updates
        self._name = name or "ExponentialMovingAverage"
        self._averages: dict[str, Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list=None):
        """Makes shadow variables for `var_list` (default: the trainable variables) and returns
        the op that updates every shadow.

        Raises:
            TypeError: an entry that is not a float Variable.
            ValueError: a variable averaged twice by this object.
        """
        g = get_default_graph()
        if var_list is None:
            var_list = g.get_collection("trainable_variables")
        var_list = list(var_list)
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"ExponentialMovingAverage averages Variables, got {v!r}")
            if not v.dtype.is_floating:
                raise TypeError(
                    f"the variable {v.name} is {v.dtype.name}; only float variables are averaged"
                )
            if v.name in self._averages:
                raise ValueError(f"the moving average of {v.name} is already computed")
        for v in var_list:
            avg = create_slot(v, v.initialized_value(), self._name)
            self._averages[v.name] = avg
            if v not in g.get_collection(MOVING_AVERAGE_VARIABLES):
                g.add_to_collection(MOVING_AVERAGE_VARIABLES, v)
        with g.name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, dtypes.float32, name="decay")
            updates = []
            for v in var_list:
                avg = self._averages[v.name]
                with g.colocate_with(v), g.name_scope(v.op.name):
                    d = self._decay_tensor(decay, v.dtype)
                    delta = (avg.read_value() - v.read_value()) * (1 - d)
                    updates.append(avg.assign_sub(delta, read_value=False))
            return group(*updates, name=scope)

    def _decay_tensor(self, decay, dtype):
        if self._num_updates is not None:
            n = self._num_updates
            n = n.read_value() if isinstance(n, Variable) else convert_to_tensor(n)
            n = cast(n, dtypes.float32)
            decay = minimum(decay, (1.0 + n) / (10.0 + n))
        return decay if dtype is dtypes.float32 else cast(decay, dtype)

    def average(self, var: Variable) -> Variable | None:
        """The shadow variable of `var`, or None when `var` is not averaged."""
        return self._averages.get(var.name)

    def average_name(self, var: Variable) -> str:
        """The name the shadow of `var` has (or would have) in a checkpoint."""
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """A Saver var_list that restores each averaged variable from its shadow's checkpoint
        entry, and every other variable from its own."""
        g = get_default_graph()
        if moving_avg_variables is None:
            moving_avg_variables = g.get_collection(MOVING_AVERAGE_VARIABLES) or g.get_collection(
                "trainable_variables"
            )
        averaged = {v.name for v in moving_avg_variables}
        shadows = {a.name for a in self._averages.values()}
        out = {}
        for v in g.get_collection(GLOBAL_VARIABLES):
            if v.name in shadows:
                continue
            key = self.average_name(v) if v.name in averaged else v.op.name
            out[key] = v
        return out
