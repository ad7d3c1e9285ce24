"""`make_template` (TensorFlow 1.x): wraps a function so that every call shares the variables
its first call created, as the same layers applied to several inputs.

>>> import rill.graph as rg
>>> from rill.train import get_variable
>>> with rg.Graph().as_default():
...     scale = make_template("scale", lambda x: x * get_variable("w", [], initializer=None))
...     a, b = scale(rg.constant(1.0)), scale(rg.constant(2.0))
...     [v.op.name for v in scale.trainable_variables]
['scale/w']
"""

from __future__ import annotations

import functools

from rill.graph.graph import get_default_graph
from rill.graph.ops.state_ops import GLOBAL_VARIABLES, TRAINABLE_VARIABLES
from rill.train.variable_scope import variable_scope

__all__ = ["Template", "make_template"]


class Template:
    """A function whose variables are created on the first call and reused on later ones."""

    def __init__(self, name: str, func, create_scope_now: bool = False, unique_name=None,
                 custom_getter=None):  # fmt: skip
        if not name:
            raise ValueError("make_template needs a name for its variable scope")
        self._name = name
        self._func = func
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._scope = None
        self._created = False
        if create_scope_now:
            with self._open_scope():
                pass

    def _open_scope(self):
        if self._scope is None:
            return _Capture(self, variable_scope(
                self._unique_name, default_name=self._name, custom_getter=self._custom_getter
            ))  # fmt: skip
        return variable_scope(self._scope, reuse=True if self._created else None)

    def __call__(self, *args, **kwargs):
        with self._open_scope():
            if not self._created:
                out = self._func(*args, **kwargs)
                self._created = True
                return out
            before = set(map(id, get_default_graph().get_collection(TRAINABLE_VARIABLES)))
            out = self._func(*args, **kwargs)
            after = get_default_graph().get_collection(TRAINABLE_VARIABLES)
            new = [v.op.name for v in after if id(v) not in before]
            if new:
                raise ValueError(
                    f"Trainable variable created when calling a template after the first time, "
                    f"perhaps you used tf.Variable when you meant tf.get_variable: {new}"
                )
            return out

    @property
    def name(self) -> str:
        return self._name

    @property
    def func(self):
        return self._func

    @property
    def variable_scope(self):
        return self._scope

    @property
    def variable_scope_name(self) -> str | None:
        return None if self._scope is None else self._scope.name

    def _variables(self, key: str) -> list:
        if self._scope is None:
            return []
        return get_default_graph().get_collection(key, scope=self._scope.name + "/")

    @property
    def trainable_variables(self) -> list:
        return self._variables(TRAINABLE_VARIABLES)

    @property
    def global_variables(self) -> list:
        return self._variables(GLOBAL_VARIABLES)

    variables = global_variables


class _Capture:
    """Enters a new variable scope and remembers it as the template's."""

    def __init__(self, template: Template, ctx):
        self._template = template
        self._ctx = ctx

    def __enter__(self):
        scope = self._ctx.__enter__()
        self._template._scope = scope
        return scope

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def make_template(name_, func_, create_scope_now_: bool = False, unique_name_=None,
                  custom_getter_=None, **kwargs) -> Template:  # fmt: skip
    """A Template over func_ (with kwargs bound) whose variables live in a scope named after
    name_ (made unique) and are shared by every call."""
    func = functools.partial(func_, **kwargs) if kwargs else func_
    return Template(name_, func, create_scope_now_, unique_name_, custom_getter_)
