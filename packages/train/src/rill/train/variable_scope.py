"""TF1 variable scopes: `get_variable` and `variable_scope`, with TensorFlow-1's sharing rules.

A graph has one variable store: a table from full variable names (`"dense/kernel"`) to the
resource variables that `get_variable` created. The current variable scope supplies the name
prefix and defaults (initializer, regularizer, dtype, custom getter, reuse). Asking for an
existing name is an error unless the scope reuses; asking for a missing one while reusing is an
error too, unless reuse is AUTO_REUSE.

Variable names depend only on variable scopes, never on name scopes: `get_variable` builds the
variable and its initializer at the root name scope, under the variable's full name.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     with variable_scope("layer1"):
...         w = get_variable("w", [2, 3])
...     with variable_scope("layer1", reuse=True):
...         w2 = get_variable("w")
...     (w.name, w2 is w)
('layer1/w:0', True)
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import threading
import weakref
from collections.abc import Callable

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Graph, Tensor, get_default_graph
from rill.graph.ops import math_ops
from rill.graph.ops.array_ops import constant
from rill.graph.ops.state_ops import Variable
from rill.graph.shapes import as_shape, unknown_shape
from rill.train import init_ops

__all__ = [
    "AUTO_REUSE",
    "GraphKeys",
    "VariableScope",
    "add_to_collection",
    "get_collection",
    "get_local_variable",
    "get_regularization_loss",
    "get_regularization_losses",
    "get_variable",
    "get_variable_scope",
    "no_regularizer",
    "variable_scope",
]


class GraphKeys:
    """The standard names of graph collections (TensorFlow-1's `tf.GraphKeys`)."""

    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"
    VARIABLES = GLOBAL_VARIABLES


class _ReuseMode(enum.Enum):
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE
"""Reuse a variable when it exists, create it otherwise."""

# The defaults a variable scope passes down (VariableScope attributes `_<name>`).
_SCOPE_SETTINGS = (
    "initializer", "regularizer", "caching_device", "partitioner", "custom_getter", "dtype",
    "use_resource", "constraint",
)  # fmt: skip
# The order of the store getter's arguments after `name` (custom getters may pass them by
# position), and the ones a single (unpartitioned) variable uses.
_GETTER_ARGS = (
    "shape", "dtype", "initializer", "regularizer", "reuse", "trainable", "collections",
    "caching_device", "partitioner", "validate_shape", "use_resource", "constraint",
)  # fmt: skip
_SINGLE_ARGS = (
    "shape", "dtype", "initializer", "regularizer", "reuse", "trainable", "collections",
    "validate_shape", "constraint", "caching_device",
)  # fmt: skip


def get_collection(key: str, scope: str | None = None) -> list:
    """The items of the default graph's collection `key` (with names matching `scope`)."""
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name: str, value) -> None:
    get_default_graph().add_to_collection(name, value)


# -- per-graph state -----------------------------------------------------------------------------


class _GraphState:
    """The variable store of one graph plus, per thread, the scope stack's current scope and the
    count of each variable scope opened (used to make default scope names unique)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.vars: dict[str, Variable] = {}
        self.partitioned: dict = {}  # name -> PartitionedVariable
        self._local = threading.local()

    @property
    def scope(self) -> VariableScope:
        loc = self._local
        if not hasattr(loc, "scope"):
            loc.scope = VariableScope(False)
            loc.counts = {}
        return loc.scope

    @scope.setter
    def scope(self, value: VariableScope) -> None:
        self.scope  # noqa: B018 - make sure the thread's slots exist
        self._local.scope = value

    @property
    def counts(self) -> dict[str, int]:
        self.scope  # noqa: B018
        return self._local.counts

    @counts.setter
    def counts(self, value: dict[str, int]) -> None:
        self.scope  # noqa: B018
        self._local.counts = value

    def open_scope(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def close_subscopes(self, name: str) -> None:
        prefix = name + "/"
        for k in self.counts:
            if k.startswith(prefix):
                self.counts[k] = 0


_STATES: weakref.WeakKeyDictionary[Graph, _GraphState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(graph: Graph | None = None) -> _GraphState:
    g = graph or get_default_graph()
    with _STATES_LOCK:
        st = _STATES.get(g)
        if st is None:
            st = _STATES[g] = _GraphState()
        return st


def get_variable_scope() -> VariableScope:
    """The current variable scope of the default graph (the root scope has name "")."""
    return _state().scope


# -- VariableScope ---------------------------------------------------------------------------------


class VariableScope:
    """A variable scope's name and the defaults it gives `get_variable`.

    Normally made by `variable_scope`, never directly.
    """

    def __init__(
        self,
        reuse,
        name: str = "",
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        name_scope: str = "",
        dtype=dtypes.float32,
        use_resource=None,
        constraint=None,
    ):
        self._name = name
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self) -> None:
        """From now on, get_variable in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self._initializer = initializer

    def set_regularizer(self, regularizer) -> None:
        self._regularizer = regularizer

    def set_dtype(self, dtype) -> None:
        self._dtype = dtypes.as_dtype(dtype)

    def set_custom_getter(self, custom_getter) -> None:
        self._custom_getter = custom_getter

    def set_caching_device(self, caching_device) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner) -> None:
        self._partitioner = partitioner

    def set_use_resource(self, use_resource) -> None:
        self._use_resource = use_resource

    def _copy(self, reuse, name: str, name_scope: str) -> VariableScope:
        settings = {k: getattr(self, "_" + k) for k in _SCOPE_SETTINGS}
        return VariableScope(reuse, name=name, name_scope=name_scope, **settings)

    def get_collection(self, name: str) -> list:
        prefix = self._name + "/" if self._name else ""
        return get_default_graph().get_collection(name, prefix)

    def global_variables(self) -> list:
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def trainable_variables(self) -> list:
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def local_variables(self) -> list:
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(
        self,
        name: str,
        shape=None,
        dtype=None,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        partitioner=None,
        validate_shape: bool = True,
        use_resource=None,
        custom_getter=None,
        constraint=None,
        **kwargs,
    ) -> Variable:
        """`get_variable` under this scope's name, with its defaults filled in."""
        kw = dict(
            shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
            reuse=reuse, trainable=trainable, collections=collections,
            caching_device=caching_device, partitioner=partitioner,
            validate_shape=validate_shape, use_resource=use_resource,
            custom_getter=custom_getter, constraint=constraint, **kwargs,
        )  # fmt: skip
        for key in ("regularizer", "caching_device", "partitioner", "custom_getter", "reuse"):
            if kw[key] is None:
                kw[key] = getattr(self, "_" + key)
        full_name = f"{self._name}/{name}" if self._name else name
        g = get_default_graph()
        # Variable names depend only on the variable scope: build at the root name scope.
        with g.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = _value_dtype(initializer)
                if init_dtype is not dtypes.as_dtype(dtype):
                    raise ValueError(
                        f"Initializer type '{init_dtype.name}' and explicit dtype "
                        f"'{dtypes.as_dtype(dtype).name}' don't match (variable {full_name})."
                    )
            for key in ("initializer", "constraint", "dtype"):
                if kw[key] is None:
                    kw[key] = getattr(self, "_" + key)
            return _store_get(_state(g), full_name, **kw)

    def __repr__(self) -> str:
        return f"<VariableScope {self._name!r} reuse={self._reuse}>"


def _value_dtype(value) -> dtypes.DType:
    """The dtype a constant initial value converts to (TensorFlow's Python-value defaults)."""
    if isinstance(value, (Tensor, Variable)):
        return value.dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return dtypes.as_dtype(np.asarray(value).dtype)
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        return dtypes.float32
    if arr.dtype.kind in "iu":
        big = arr.size and (arr.max() >= 2**31 or arr.min() < -(2**31))
        return dtypes.int64 if big else dtypes.int32
    if arr.dtype.kind == "c":
        return dtypes.complex64
    return dtypes.as_dtype(arr.dtype) if arr.dtype.kind == "b" else dtypes.string


# -- the variable store --------------------------------------------------------------------------


def _defined_at(v: Variable) -> str:
    src = getattr(v.op, "source", None)
    if not src or src[0] == "<unknown>":
        return ""
    return f" Originally defined at {src[0]}:{src[1]} (in {src[2]})."


def _default_initializer(name: str, dtype: dtypes.DType):
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer()
    if dtype.is_integer or dtype.is_bool or dtype is dtypes.string:
        return init_ops.zeros_initializer()
    raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")


def _takes_no_arguments(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in params
    )


def _accepts(fn, arg: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return arg in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _store_get(st: _GraphState, name: str, custom_getter=None, **kw) -> Variable:
    if custom_getter is not None and not callable(custom_getter):
        raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter!r}")
    kw["dtype"] = dtypes.as_dtype(kw.get("dtype") or dtypes.float32)
    if kw.get("trainable") is None:
        kw["trainable"] = True

    def true_getter(name, *args, **kwargs):
        kwargs.update(zip(_GETTER_ARGS, args))
        shape = kwargs.get("shape")
        if kwargs.get("partitioner") is not None and not (
            shape is not None and as_shape(shape).rank == 0
        ):
            return _get_partitioned_variable(st, name, kwargs)
        return _get_single_variable(st, name, **{k: kwargs.get(k) for k in _SINGLE_ARGS})

    if custom_getter is None:
        return true_getter(name, **kw)
    if not _accepts(custom_getter, "constraint"):
        kw.pop("constraint", None)
    return custom_getter(getter=true_getter, name=name, **kw)


def _get_partitioned_variable(st: _GraphState, name: str, kwargs: dict):
    """The PartitionedVariable `name` (see rill.train.partitioned_variables): its shards are
    single variables `name/part_<i>` made here with the other arguments unchanged."""
    from rill.train.partitioned_variables import create_partitioned_variable

    dtype = dtypes.as_dtype(kwargs.get("dtype") or dtypes.float32)
    initializer = kwargs.get("initializer")
    if initializer is None:
        initializer = _default_initializer(name, dtype)
    if inspect.isclass(initializer):
        initializer = initializer()
    single = {k: kwargs.get(k) for k in _SINGLE_ARGS if k not in ("shape", "initializer")}

    def get_single(shard_name, shape, init):
        return _get_single_variable(st, shard_name, shape=shape, initializer=init, **single)

    with st.lock:
        found = st.partitioned.get(name)
        if found is None and name in st.vars:
            raise ValueError(
                f"Variable {name} already exists as an unpartitioned variable; it cannot be "
                "fetched with a partitioner"
            )
        pv = create_partitioned_variable(
            get_single, name, kwargs.get("shape"), dtype, initializer,
            kwargs["partitioner"], kwargs.get("reuse"), found,
        )  # fmt: skip
        st.partitioned[name] = pv
    return pv


def _get_single_variable(
    st: _GraphState, name: str, shape, dtype, initializer, regularizer, reuse, trainable,
    collections, validate_shape, constraint, caching_device=None,
) -> Variable:  # fmt: skip
    if trainable is None:
        trainable = True
    if validate_shape is None:
        validate_shape = True
    from_value = initializer is not None and not callable(initializer)
    if shape is not None and from_value:
        raise ValueError(
            f"Variable {name}: if the initializer is a constant, do not specify a shape."
        )
    shape = as_shape(shape) if shape is not None else unknown_shape()
    dtype = dtypes.as_dtype(dtype or dtypes.float32)
    with st.lock:
        found = st.vars.get(name)
        if found is not None:
            if not reuse:
                raise ValueError(
                    f"Variable {name} already exists, disallowed. Did you mean to set "
                    f"reuse=True or reuse=AUTO_REUSE in VarScope?{_defined_at(found)}"
                )
            if not shape.is_compatible_with(found.shape):
                raise ValueError(
                    f"Trying to share variable {name}, but specified shape {shape} and found "
                    f"shape {found.shape}."
                )
            if dtype is not found.dtype:
                raise ValueError(
                    f"Trying to share variable {name}, but specified dtype {dtype.name} and "
                    f"found dtype {found.dtype.name}."
                )
            return found
        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with get_variable(). "
                "Did you mean to set reuse=AUTO_REUSE in VarScope?"
            )
        if initializer is None:
            initializer = _default_initializer(name, dtype)
        if from_value:
            init_val = initializer
            var_dtype = None
            var_shape = None
        else:
            if inspect.isclass(initializer):
                initializer = initializer()
            if shape.is_fully_defined():
                dims = shape.as_list()
                if _accepts(initializer, "partition_info"):

                    def init_val():
                        return initializer(dims, dtype=dtype, partition_info=None)
                else:

                    def init_val():
                        return initializer(dims, dtype=dtype)

                var_dtype = dtype
                var_shape = shape
            elif _takes_no_arguments(initializer):
                init_val = initializer
                var_dtype = None
                var_shape = shape if shape.rank is not None else None
            else:
                raise ValueError(
                    f"Shape of a new variable ({name}) must be fully defined, but instead was "
                    f"{shape}."
                )
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        v = Variable(
            initial_value=init_val,
            trainable=trainable,
            collections=list(collections),
            validate_shape=validate_shape,
            name=name,
            dtype=var_dtype,
            shape=var_shape,
            constraint=constraint,
            caching_device=caching_device,
        )
        st.vars[name] = v
    if regularizer:
        g = v.graph
        with g.colocate_with(v), g.name_scope(name + "/Regularizer/"):
            loss = regularizer(v)
        if loss is not None:
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v


def get_variable(
    name: str,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer: Callable | None = None,
    trainable: bool | None = None,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape: bool = True,
    use_resource=None,
    custom_getter: Callable | None = None,
    constraint: Callable | None = None,
    **kwargs,
) -> Variable:
    """The variable `<scope>/<name>`: created, or reused when the scope reuses.

    Args:
        name: the name within the current variable scope.
        shape: the variable's shape (must be fully defined unless the initializer is a value).
        dtype: the dtype (default: the scope's, float32).
        initializer: an initializer (`init(shape, dtype, partition_info)`), a class of one, or a
            value/Tensor (then `shape` must be None). Default: the scope's, else
            glorot_uniform_initializer for floats and zeros for integers, bools and strings.
        regularizer: `fn(variable) -> Tensor or None`; the result is added to the
            "regularization_losses" collection (built under `<name>/Regularizer/`).
        trainable: add to "trainable_variables" (default True).
        collections: the collections to add the variable to (default ["variables"]).
        custom_getter: `fn(getter, name, *args, **kwargs)` called instead of the store.

    Raises:
        ValueError: the variable exists and the scope does not reuse; it does not exist and the
            scope reuses (reuse=True); a shared variable's shape or dtype differs; the shape is
            not fully defined for a new variable.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     with variable_scope("foo", initializer=init_ops.ones_initializer()):
    ...         v = get_variable("v", [1], dtype=rg.float64)
    ...     v.name, v.dtype, v.initial_value.op.type
    ('foo/v:0', rill.float64, 'Const')
    """
    return get_variable_scope().get_variable(
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        trainable=trainable,
        collections=collections,
        caching_device=caching_device,
        partitioner=partitioner,
        validate_shape=validate_shape,
        use_resource=use_resource,
        custom_getter=custom_getter,
        constraint=constraint,
        **kwargs,
    )


def get_local_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable: bool = False, collections=None, **kwargs) -> Variable:  # fmt: skip
    """As get_variable, but in the "local_variables" collection and not trainable."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(
        name, shape, dtype, initializer, regularizer, trainable, collections, **kwargs
    )


def no_regularizer(_) -> None:
    """A regularizer that adds nothing (to switch off a scope's default regularizer)."""
    return None


# -- variable_scope ----------------------------------------------------------------------------------


class variable_scope:
    """Opens a variable scope (and, by default, a name scope of the same name).

    Args:
        name_or_scope: a string (a sub-scope of the current one) or a VariableScope to re-enter
            (absolute). None needs default_name.
        default_name: used when name_or_scope is None, made unique ("dense", "dense_1", ...).
        initializer, regularizer, dtype, custom_getter, constraint, ...: defaults for
            get_variable in this scope and its sub-scopes.
        reuse: True (get existing variables only), AUTO_REUSE (get or create), or None/False
            (inherit: reuse is passed down to sub-scopes and cannot be switched off there).
        auxiliary_name_scope: when False no name scope is opened.

    Yields the VariableScope.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     with variable_scope("a") as a:
    ...         with variable_scope(None, default_name="b") as b:
    ...             x = rg.constant(1.0, name="x")
    ...     (a.name, b.name, b.original_name_scope, x.name)
    ('a', 'a/b', 'a/b/', 'a/b/x:0')
    """

    def __init__(
        self,
        name_or_scope,
        default_name: str | None = None,
        values=None,
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        reuse=None,
        dtype=None,
        use_resource=None,
        constraint=None,
        auxiliary_name_scope: bool = True,
    ):
        if default_name is None and name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is not None and not isinstance(name_or_scope, (str, VariableScope)):
            raise TypeError(
                "VariableScope: name_or_scope must be a string or VariableScope, got "
                f"{type(name_or_scope).__name__}"
            )
        if reuse is False:
            reuse = None  # sub-scopes cannot stop reusing: False means "inherit", like None
        if not (reuse is True or reuse is None or reuse is AUTO_REUSE):
            raise ValueError(
                f"The reuse parameter must be True, False, None or AUTO_REUSE, got {reuse!r}"
            )
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError(
                f"The auxiliary_name_scope must be True or False, got {auxiliary_name_scope!r}"
            )
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"The custom_getter must be callable, got {custom_getter!r}")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._settings = dict(
            initializer=initializer, regularizer=regularizer, caching_device=caching_device,
            partitioner=partitioner, custom_getter=custom_getter, dtype=dtype,
            use_resource=use_resource, constraint=constraint,
        )  # fmt: skip
        self._reuse = reuse
        self._auxiliary_name_scope = auxiliary_name_scope
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> VariableScope:
        g = get_default_graph()
        st = _state(g)
        stack = contextlib.ExitStack()
        try:
            scope = self._enter(g, st, stack)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return scope

    def __exit__(self, *exc) -> None:
        stack, self._stack = self._stack, None
        stack.close()

    def _name_scope_cm(self, g: Graph, name: str):
        if self._auxiliary_name_scope:
            return g.name_scope(name)
        current = g.get_name_scope()
        return g.name_scope(current + "/" if current else None)

    def _enter(self, g: Graph, st: _GraphState, stack: contextlib.ExitStack) -> VariableScope:
        old = st.scope
        nos = self._name_or_scope
        if nos is None:
            if self._reuse:
                raise ValueError("reuse=True cannot be used without a name_or_scope")
            ns = stack.enter_context(self._name_scope_cm(g, self._default_name))
            prefix = f"{old.name}/" if old.name else ""
            name = self._default_name
            if st.counts.get(prefix + name, 0):
                i = 1
                while st.counts.get(f"{prefix}{name}_{i}", 0):
                    i += 1
                name = f"{name}_{i}"
            return self._enter_pure(st, stack, old, name, ns)
        if isinstance(nos, str):
            ns = (
                stack.enter_context(self._name_scope_cm(g, nos))
                if nos or (not self._auxiliary_name_scope)
                else None
            )
            return self._enter_pure(st, stack, old, nos, ns)
        # Re-entering a VariableScope: its name is absolute and its settings come with it.
        last = nos.name.split("/")[-1]
        if last or not self._auxiliary_name_scope:
            stack.enter_context(self._name_scope_cm(g, last))
        reuse = self._reuse if self._reuse else nos.reuse
        scope = nos._copy(reuse, nos.name, nos.original_name_scope)
        self._apply_settings(scope, nos)
        st.open_scope(nos.name)
        saved_counts = dict(st.counts)

        def restore():
            st.counts = saved_counts
            st.scope = old

        stack.callback(restore)
        st.scope = scope
        return scope

    def _enter_pure(self, st, stack, old: VariableScope, name: str, name_scope) -> VariableScope:
        full = f"{old.name}/{name}" if old.name else name
        reuse = self._reuse or old.reuse  # reuse is inherited by sub-scopes
        scope = old._copy(reuse, full, name if name_scope is None else name_scope)
        self._apply_settings(scope, old)
        st.open_scope(full)

        def restore():
            st.close_subscopes(full)
            st.scope = old

        stack.callback(restore)
        st.scope = scope
        return scope

    def _apply_settings(self, scope: VariableScope, parent: VariableScope) -> None:
        for key, value in self._settings.items():
            if value is None:
                continue
            if key == "custom_getter":
                value = _compose_getters(value, parent.custom_getter)
            elif key == "dtype":
                value = dtypes.as_dtype(value)
            setattr(scope, "_" + key, value)


def _compose_getters(inner, outer):
    """A scope's custom getter wraps the enclosing scope's: the inner one sees a getter that
    calls the outer one, which calls the store."""
    if outer is None:
        return inner

    def composed(getter, *args, **kwargs):
        def through_outer(*a, **kw):
            return outer(getter, *a, **kw)

        return inner(through_outer, *args, **kwargs)

    return composed


# -- regularization losses ---------------------------------------------------------------------------


def get_regularization_losses(scope: str | None = None) -> list:
    """The tensors in the "regularization_losses" collection (names matching `scope`)."""
    return get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(
    scope: str | None = None, name: str = "total_regularization_loss"
) -> Tensor:
    """The sum of the regularization losses (a constant 0.0 when there are none).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     get_regularization_loss()
    <Tensor 'Const:0' f32[]>
    """
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return constant(0.0)
