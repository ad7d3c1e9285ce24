"""Module-level scopes on the default graph: `rg.device`, `rg.name_scope`, ... (TensorFlow's
`tf.device`, `tf.name_scope`, `tf.control_dependencies`, `tf.colocate_with`).

Each opens the same-named scope of the graph that is the default when it is entered.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     with rg.name_scope("layer"), rg.device("/cpu:0"):
...         c = rg.constant(1.0, name="c")
...     c.name, c.device
('layer/c:0', '/device:CPU:0')
"""

from __future__ import annotations

import contextlib

from rill.graph.graph import get_default_graph

__all__ = ["device", "name_scope", "control_dependencies", "colocate_with"]


@contextlib.contextmanager
def device(device_name_or_function):
    """Ops created inside are placed on `device_name_or_function` (a device string, a
    DeviceSpec, a function op -> device string, or None to clear outer scopes)."""
    with get_default_graph().device(device_name_or_function):
        yield


@contextlib.contextmanager
def name_scope(name: str | None, default_name: str | None = None, values=None):
    """Ops created inside are named `<scope>/<op>`; yields the scope string ("a/b/").

    `name` None takes `default_name` (TensorFlow-1's `name_scope(name, default_name, values)`);
    a name ending in "/" re-enters that exact scope. `values` is accepted for TF1 programs and
    does not change the graph: rill has one default graph per thread.
    """
    del values
    with get_default_graph().name_scope(name if name is not None else default_name) as scope:
        yield scope


@contextlib.contextmanager
def control_dependencies(control_inputs):
    """Ops created inside run after every op (or tensor's op) in `control_inputs`; None
    clears the outer control dependencies."""
    with get_default_graph().control_dependencies(control_inputs):
        yield


@contextlib.contextmanager
def colocate_with(op, ignore_existing: bool = False):
    """Ops created inside are placed on the device of `op` (a tensor, an op or a variable)."""
    with get_default_graph().colocate_with(op, ignore_existing):
        yield
