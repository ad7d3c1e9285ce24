"""Resource variables: the VarHandleOp family of ops and the TF1 `Variable` built on them.

A variable is a resource that lives on a device and outlives steps. The graph holds only a
handle to it (`VarHandleOp`, a scalar of dtype `resource`); reads and updates are ops that take
the handle. A `Variable` bundles the handle, its initializer and a cached read:

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     v = rg.Variable([1.0, 2.0], name="v")
>>> print(g)
%v/initial_value: f32[2] = Const(value=[1.0, 2.0])
%v: resource[] = VarHandleOp(shared_name="v", dtype=f32, shape=[2])
%v/IsInitialized/VarIsInitializedOp: bool[] = VarIsInitializedOp(%v)
%v/Assign: () = AssignVariableOp(%v, %v/initial_value, _class=["loc:@v"])
%v/Read/ReadVariableOp: f32[2] = ReadVariableOp(%v)
"""

from __future__ import annotations

import contextlib

from rill.graph import dtypes
from rill.graph.errors import GraphTypeError
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, as_shape, scalar, unknown_shape

__all__ = [
    "Variable",
    "assign",
    "assign_add",
    "assign_sub",
    "global_variables",
    "global_variables_initializer",
    "is_variable_initialized",
    "local_variables",
    "local_variables_initializer",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "trainable_variables",
    "variables_initializer",
]

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
LOCAL_VARIABLES = "local_variables"

# Passing through these ops leaves a resource handle unchanged, so shape functions may look
# through them to the op that created the handle.
_FORWARDING_OPS = frozenset({"Identity", "Switch", "Enter", "RefIdentity", "Snapshot"})

_SCATTER_ADD_TYPES = (
    "{float32, float64, int32, uint8, int16, int8, complex64, int64, bfloat16, uint16, "
    "complex128, float16, uint32, uint64}"
)


# -- shape functions ----------------------------------------------------------------------------


def resource_producer(handle: Tensor) -> Operation | None:
    """The op that created `handle`, looking through Identity (and the loop plumbing of a
    handle carried through a while loop, as while_v2 carries captured variables); None if it
    cannot be known."""
    seen = 0
    t = handle
    while seen < 64:
        if t.op.type in _FORWARDING_OPS or t.op.type == "Exit":
            t = t.op._inputs[0]
        elif t.op.type == "Merge":  # a loop's: the handle entering it (the back edge is the same)
            entry = [i for i in t.op._inputs if i.op.type != "NextIteration"]
            if len(entry) != 1:
                return None
            t = entry[0]
        else:
            break
        seen += 1
    return t.op


def variable_shape_and_dtype(handle: Tensor) -> tuple[TensorShape, dtypes.DType | None]:
    """The declared shape and dtype of the variable behind `handle` (unknown when not visible)."""
    op = resource_producer(handle)
    if op is not None and op.type == "VarHandleOp":
        return op.attrs["shape"], op.attrs["dtype"]
    return unknown_shape(), None


def _check_handle(op, what: str = "resource"):
    h = op._inputs[0].shape
    if h.rank not in (None, 0):
        raise ValueError(f"{what} must be a scalar resource handle, got shape {h}")
    shape, dtype = variable_shape_and_dtype(op._inputs[0])
    if dtype is not None and dtype is not op.attrs["dtype"]:
        raise ValueError(
            f"the variable {op._inputs[0].name} holds {dtype.name} but the op says "
            f"dtype={op.attrs['dtype'].name}"
        )
    return shape


def _read_shape(op):
    return _check_handle(op)


def _assign_shape(op):
    var_shape = _check_handle(op)
    value = op._inputs[1].shape
    if not var_shape.is_compatible_with(value):
        raise ValueError(
            f"value of shape {value} cannot be assigned to a variable of shape {var_shape}"
        )
    return []


def _gather_shape(op):
    params = _check_handle(op)
    indices = op._inputs[1].shape
    b = op.attrs["batch_dims"]
    if b < 0:
        raise ValueError(f"batch_dims must be >= 0, got {b}")
    if params.rank is not None and params.rank < b + 1:
        raise ValueError(
            f"the variable has shape {params}, but batch_dims={b} needs rank at least {b + 1}"
        )
    if indices.rank is not None and indices.rank < b:
        raise ValueError(f"indices have shape {indices}, but batch_dims={b} needs rank >= {b}")
    if params.rank is None or indices.rank is None:
        return unknown_shape()
    try:
        batch = params[:b].merge_with(indices[:b])
    except ValueError:
        raise ValueError(
            f"the first {b} (batch) dimensions of the variable {params} and of indices "
            f"{indices} differ"
        ) from None
    return batch.concatenate(indices[b:]).concatenate(params[b + 1 :])


def _scatter_shape(op):
    var_shape = _check_handle(op)
    indices, updates = op._inputs[1].shape, op._inputs[2].shape
    if updates.rank == 0:
        return []
    want = indices.concatenate(var_shape[1:]) if var_shape.rank is not None else unknown_shape()
    if var_shape.rank == 0:
        raise ValueError("cannot scatter into a scalar variable")
    if not updates.is_compatible_with(want):
        raise ValueError(
            f"updates must be a scalar or have shape indices.shape + variable.shape[1:] = "
            f"{want}, got {updates}"
        )
    return []


def _handle_only(op):
    h = op._inputs[0].shape
    if h.rank not in (None, 0):
        raise ValueError(f"resource must be a scalar resource handle, got shape {h}")
    return [scalar()] * len(op.outputs)


# -- declarations -------------------------------------------------------------------------------

defop(
    "VarHandleOp",
    outputs=["resource: resource"],
    attrs=[
        "container: string = ''",
        "shared_name: string = ''",
        "debug_name: string = ''",
        "dtype: type",
        "shape: shape",
        "allowed_devices: list(string) = []",
    ],
    shape=lambda op: scalar(),
    stateful=True,
    doc="A handle to the variable (container, shared_name) of the given dtype and shape.",
)

defop(
    "ReadVariableOp",
    inputs=["resource: resource"],
    outputs=["value: dtype"],
    attrs=["dtype: type"],
    shape=_read_shape,
    stateful=True,
    doc="The current value of the variable; later updates never change a value once read.",
)

defop(
    "AssignVariableOp",
    inputs=["resource: resource", "value: dtype"],
    attrs=["dtype: type", "validate_shape: bool = false"],
    shape=_assign_shape,
    stateful=True,
    doc="Sets the variable to value (creating it on first assignment).",
)

for _name, _sign in (("AssignAddVariableOp", "+"), ("AssignSubVariableOp", "-")):
    defop(
        _name,
        inputs=["resource: resource", "value: dtype"],
        attrs=["dtype: type"],
        shape=_assign_shape,
        stateful=True,
        doc=f"variable {_sign}= value, atomically with respect to other updates.",
    )

defop(
    "VarIsInitializedOp",
    inputs=["resource: resource"],
    outputs=["is_initialized: bool"],
    shape=_handle_only,
    stateful=True,
    doc="Whether the variable has been assigned a value.",
)

defop(
    "ResourceGather",
    inputs=["resource: resource", "indices: Tindices"],
    outputs=["output: dtype"],
    attrs=[
        "batch_dims: int = 0",
        "validate_indices: bool = true",
        "dtype: type",
        "Tindices: {int32, int64}",
    ],
    shape=_gather_shape,
    stateful=True,
    doc="Rows of the variable selected by indices (after batch_dims leading batch dimensions).",
)

for _name, _types, _what in (
    ("ResourceScatterAdd", _SCATTER_ADD_TYPES, "variable[indices] += updates"),
    ("ResourceScatterSub", _SCATTER_ADD_TYPES, "variable[indices] -= updates"),
    ("ResourceScatterUpdate", "type", "variable[indices] = updates"),
    ("ResourceScatterMul", _SCATTER_ADD_TYPES, "variable[indices] *= updates"),
    ("ResourceScatterDiv", _SCATTER_ADD_TYPES, "variable[indices] /= updates"),
    ("ResourceScatterMin", _SCATTER_ADD_TYPES, "variable[indices] min= updates"),
    ("ResourceScatterMax", _SCATTER_ADD_TYPES, "variable[indices] max= updates"),
):
    defop(
        _name,
        inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
        attrs=[f"dtype: {_types}", "Tindices: {int32, int64}"],
        shape=_scatter_shape,
        stateful=True,
        doc=f"{_what}; duplicate indices apply one after another (add and sub accumulate).",
    )

defop(
    "DestroyResourceOp",
    inputs=["resource: resource"],
    attrs=["ignore_lookup_error: bool = true"],
    shape=_handle_only,
    stateful=True,
    doc="Deletes the resource behind the handle.",
)


defop(
    "DisableCopyOnRead",
    inputs=["resource: resource"],
    shape=_handle_only,
    stateful=True,
    doc="TensorFlow's hint that the variable's reads need not copy (TF 2.13+ SavedModels' "
    "restore functions hold it); rill's reads never copy what a later write changes, so it "
    "does nothing.",
)


# -- raw builders (TensorFlow's generated wrappers) ---------------------------------------------


def _op(op_type: str, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def var_handle_op(dtype, shape, container="", shared_name="", name: str = "VarHandleOp"):
    attrs = {"dtype": dtypes.as_dtype(dtype), "shape": as_shape(shape)}
    attrs.update(container=container, shared_name=shared_name)
    return _op("VarHandleOp", [], attrs, name).outputs[0]


def read_variable_op(resource, dtype, name: str = "ReadVariableOp") -> Tensor:
    return _op("ReadVariableOp", [resource], {"dtype": dtypes.as_dtype(dtype)}, name).outputs[0]


def assign_variable_op(resource, value, validate_shape: bool = False, name=None) -> Operation:
    attrs = {"validate_shape": validate_shape} if validate_shape else {}
    return _op("AssignVariableOp", [resource, value], attrs, name)


def assign_add_variable_op(resource, value, name=None) -> Operation:
    return _op("AssignAddVariableOp", [resource, value], None, name)


def assign_sub_variable_op(resource, value, name=None) -> Operation:
    return _op("AssignSubVariableOp", [resource, value], None, name)


def var_is_initialized_op(resource, name=None) -> Tensor:
    return _op("VarIsInitializedOp", [resource], None, name).outputs[0]


def resource_gather(
    resource, indices, dtype, batch_dims: int = 0, validate_indices: bool = True, name=None
) -> Tensor:
    attrs = {"dtype": dtypes.as_dtype(dtype), "batch_dims": batch_dims}
    if not validate_indices:
        attrs["validate_indices"] = False
    return _op("ResourceGather", [resource, indices], attrs, name).outputs[0]


def resource_scatter_add(resource, indices, updates, name=None) -> Operation:
    return _op("ResourceScatterAdd", [resource, indices, updates], None, name)


def resource_scatter_sub(resource, indices, updates, name=None) -> Operation:
    return _op("ResourceScatterSub", [resource, indices, updates], None, name)


def resource_scatter_update(resource, indices, updates, name=None) -> Operation:
    return _op("ResourceScatterUpdate", [resource, indices, updates], None, name)


def destroy_resource_op(resource, ignore_lookup_error: bool = True, name=None) -> Operation:
    attrs = {} if ignore_lookup_error else {"ignore_lookup_error": False}
    return _op("DestroyResourceOp", [resource], attrs, name)


# -- the Variable class -------------------------------------------------------------------------


@contextlib.contextmanager
def _init_scope(graph):
    """Variables are created outside any control-dependency or control-flow context, as TF's
    init_scope does: an initializer must not wait on, or run once per iteration of, user ops."""
    saved = graph._control_flow_context
    graph._control_flow_context = None
    try:
        with graph.control_dependencies(None):
            yield
    finally:
        graph._control_flow_context = saved


class Variable:
    """A TF1 resource variable: a handle, an initializer and reads that see the latest value.

    Args:
        initial_value: a value, a Tensor, or a callable returning one (called once, under the
            scope `<name>/Initializer`).
        trainable: also add the variable to the "trainable_variables" collection.
        collections: graph collections to add it to (default ["variables"]).
        validate_shape: when False the variable's shape is unknown and may change on assign.
        name: the name of the VarHandleOp and the scope of the ops built with it.
        dtype: convert the initial value to this dtype.
        shape: the variable's shape (must be compatible with the initial value's).

    Each conversion to a tensor (`v + 1`, passing `v` to an op) creates a fresh ReadVariableOp in
    the current scope, so a read placed under `control_dependencies([v.assign(...)])` or inside a
    loop sees the value at that point, as in TensorFlow. Fetching `v` fetches the cached read
    `<name>/Read/ReadVariableOp`.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     w = rg.Variable(lambda: [[1.0, 2.0]], name="w")
    ...     (w.name, w.shape, w.initializer.name, (w @ [[1.0], [1.0]]).shape)
    ('w:0', TensorShape([1, 2]), 'w/Assign', TensorShape([1, 1]))
    """

    # Make numpy defer to our reflected operators, as Tensor does.
    __array_priority__ = 100
    __array_ufunc__ = None

    def __init__(
        self,
        initial_value=None,
        trainable: bool = True,
        collections=None,
        validate_shape: bool = True,
        name: str | None = None,
        dtype=None,
        shape=None,
        use_resource=None,
        caching_device=None,
        constraint=None,
    ):
        if initial_value is None:
            raise ValueError("Variable needs an initial_value")
        if constraint is not None and not callable(constraint):
            raise ValueError(f"constraint must be callable, got {constraint!r}")
        g = get_default_graph()
        if collections is None:
            collections = [GLOBAL_VARIABLES]
        if isinstance(collections, (set, tuple, list)):
            collections = list(collections)
        else:
            raise ValueError(f"collections must be a list, tuple or set, got {collections!r}")
        if trainable and TRAINABLE_VARIABLES not in collections:
            collections.append(TRAINABLE_VARIABLES)
        dtype = dtypes.as_dtype(dtype) if dtype is not None else None
        self._trainable = trainable
        self._constraint = constraint
        self._validate_shape = validate_shape
        with _init_scope(g), g.name_scope(name or "Variable") as scope:
            handle_name = scope[:-1]
            if callable(initial_value):
                with g.name_scope("Initializer"), g.device(None):
                    init = convert_to_tensor(initial_value(), dtype=dtype, name="initial_value")
            else:
                init = convert_to_tensor(initial_value, dtype=dtype, name="initial_value")
            if init.dtype in (dtypes.resource, dtypes.variant):
                raise TypeError(f"a variable cannot hold {init.dtype.name} values")
            if shape is not None:
                shape = as_shape(shape)
                if not init.shape.is_compatible_with(shape):
                    raise ValueError(
                        f"Variable {handle_name!r}: the initial value has shape {init.shape}, "
                        f"incompatible with shape={shape}"
                    )
            else:
                shape = init.shape
            if not validate_shape:
                shape = unknown_shape()
            self._dtype = init.dtype
            self._shape = shape
            self._initial_value = init
            self._handle = var_handle_op(init.dtype, shape, shared_name=handle_name, name=scope)
            with g.name_scope("IsInitialized"):
                self._is_initialized_op = var_is_initialized_op(self._handle)
            with g.name_scope("Assign") as assign_scope, g.colocate_with(self._handle.op):
                self._initializer_op = assign_variable_op(self._handle, init, name=assign_scope)
            with g.name_scope("Read"), self._handle_device(g):
                self._graph_element = read_variable_op(self._handle, init.dtype)
                # TF's caching_device: conversions to a tensor use this one read (the value as
                # of the step's start), e.g. so an RNN reads its weights outside its loop.
                self._cached_value = None
                if caching_device is not None:
                    from rill.graph.ops.array_ops import identity

                    with g.colocate_with(None, ignore_existing=True), g.device(caching_device):
                        self._cached_value = identity(self._graph_element)
        g.add_to_collections(collections, self)

    @classmethod
    def _from_existing(
        cls, handle: Tensor, initializer: Operation, snapshot: Tensor, initial_value=None,
        trainable: bool = True,
    ) -> Variable:  # fmt: skip
        """A Variable over ops already in a graph (an imported meta graph's VarHandleOp, its
        initializer and its cached read), as TensorFlow's Variable.from_proto; builds no op."""
        if handle.op.type != "VarHandleOp":
            raise ValueError(
                f"{handle.name} is not a resource variable's handle ({handle.op.type})"
            )
        v = cls.__new__(cls)
        v._trainable = trainable
        v._constraint = None
        v._validate_shape = True
        v._dtype = handle.op.get_attr("dtype")
        v._shape = as_shape(handle.op.get_attr("shape"))
        v._initial_value = initial_value
        v._handle = handle
        v._is_initialized_op = None
        v._initializer_op = initializer
        v._graph_element = snapshot
        v._cached_value = None
        return v

    def _handle_device(self, g):
        dev = self._handle.op.device
        return g.device(dev) if dev else contextlib.nullcontext()

    # -- properties -------------------------------------------------------------------------

    @property
    def handle(self) -> Tensor:
        return self._handle

    @property
    def op(self) -> Operation:
        return self._handle.op

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def device(self) -> str:
        return self._handle.op.device

    @property
    def graph(self):
        return self._handle.graph

    @property
    def initializer(self) -> Operation:
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def constraint(self):
        return self._constraint

    def __repr__(self) -> str:
        return f"<rill.Variable {self.name!r} shape={self._shape} dtype={self._dtype.name}>"

    # -- reads --------------------------------------------------------------------------------

    def value(self) -> Tensor:
        """A new read of the variable in the current scope (`ReadVariableOp`), or the cached
        read when the variable has a caching device."""
        if self._cached_value is not None:
            return self._cached_value
        return self._read_variable_op()

    def _read_variable_op(self) -> Tensor:
        with self.graph.colocate_with(None, ignore_existing=True), self._handle_device(self.graph):
            return read_variable_op(self._handle, self._dtype)

    def read_value(self) -> Tensor:
        """A new read under the scope `Read`, returned through an Identity as TensorFlow does."""
        from rill.graph.ops.array_ops import identity

        with self.graph.name_scope("Read"):
            value = self._read_variable_op()
        return identity(value)

    def sparse_read(self, indices, name: str | None = None) -> Tensor:
        """The rows `indices` of the variable (`ResourceGather`)."""
        with self.graph.name_scope(name or "Gather") as scope:
            return resource_gather(self._handle, indices, self._dtype, name=scope)

    def eval(self, session=None):
        return self._graph_element.eval(session=session)

    def initialized_value(self) -> Tensor:
        """The value if the variable is initialized, else its initial value (built with cond)."""
        try:
            from rill.graph.control_flow import cond
        except ImportError as e:  # the control-flow builders are a separate module
            raise NotImplementedError("initialized_value needs rill.graph.control_flow.cond") from e
        g = self.graph
        with _init_scope(g):
            return cond(self.is_initialized(), self.read_value, lambda: self._initial_value)

    def is_initialized(self, name: str | None = None) -> Tensor:
        return var_is_initialized_op(self._handle, name=name)

    def load(self, value, session=None) -> None:
        """Assigns `value` by running the initializer with its initial value fed."""
        from rill.graph.graph import get_default_session

        session = session or get_default_session()
        if session is None:
            raise ValueError("no session: pass session= or use `with sess.as_default():`")
        session.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

    # -- updates ------------------------------------------------------------------------------

    def _read_after(self, op: Operation, read_value: bool):
        if not read_value:
            return op
        with self.graph.control_dependencies([op]):
            return self._read_variable_op()

    def _as_update_value(self, value) -> Tensor:
        return convert_to_tensor(value, dtype=self._dtype)

    def assign(self, value, use_locking=None, name=None, read_value: bool = True):
        """Sets the variable to `value`; returns the new value (a read after the assignment)
        when read_value, else the AssignVariableOp."""
        value = self._as_update_value(value)
        if not self._shape.is_compatible_with(value.shape):
            raise ValueError(
                f"cannot assign a value of shape {value.shape} to variable {self.name} of shape "
                f"{self._shape}"
            )
        validate = self._validate_shape and self._shape.is_fully_defined()
        op = assign_variable_op(self._handle, value, validate_shape=validate, name=name)
        return self._read_after(op, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value: bool = True):
        op = assign_add_variable_op(self._handle, self._as_update_value(delta), name=name)
        return self._read_after(op, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value: bool = True):
        op = assign_sub_variable_op(self._handle, self._as_update_value(delta), name=name)
        return self._read_after(op, read_value)

    def _scatter(self, fn, indices, updates, name):
        if updates is None:  # an IndexedSlices-like object
            indices, updates = indices.indices, indices.values
        op = fn(self._handle, indices, self._as_update_value(updates), name=name)
        return self._read_after(op, True)

    def scatter_add(self, indices, updates=None, use_locking=False, name=None):
        """variable[indices] += updates; `indices` may be an IndexedSlices (updates=None)."""
        return self._scatter(resource_scatter_add, indices, updates, name)

    def scatter_sub(self, indices, updates=None, use_locking=False, name=None):
        return self._scatter(resource_scatter_sub, indices, updates, name)

    def scatter_update(self, indices, updates=None, use_locking=False, name=None):
        return self._scatter(resource_scatter_update, indices, updates, name)

    def _scatter_op(self, op_type: str, indices, updates, name):
        """One of the ResourceScatter{Mul,Div,Min,Max} / ResourceScatterNd* ops, then a read."""
        if updates is None:  # an IndexedSlices-like object
            indices, updates = indices.indices, indices.values
        inputs = [self._handle, convert_to_tensor(indices), self._as_update_value(updates)]
        op = _op(op_type, inputs, None, name)
        return self._read_after(op, True)

    def scatter_mul(self, indices, updates=None, use_locking=False, name=None):
        """variable[indices] *= updates (duplicate indices multiply in turn)."""
        return self._scatter_op("ResourceScatterMul", indices, updates, name)

    def scatter_div(self, indices, updates=None, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterDiv", indices, updates, name)

    def scatter_min(self, indices, updates=None, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterMin", indices, updates, name)

    def scatter_max(self, indices, updates=None, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterMax", indices, updates, name)

    def scatter_nd_update(self, indices, updates, name=None):
        """variable[indices] = updates, indices' last dimension naming elements or slices."""
        return self._scatter_op("ResourceScatterNdUpdate", indices, updates, name)

    def scatter_nd_add(self, indices, updates, name=None):
        return self._scatter_op("ResourceScatterNdAdd", indices, updates, name)

    def scatter_nd_sub(self, indices, updates, name=None):
        return self._scatter_op("ResourceScatterNdSub", indices, updates, name)

    # -- conversion ---------------------------------------------------------------------------

    def _as_tensor(self, dtype=None) -> Tensor:
        if dtype is not None and dtypes.as_dtype(dtype) is not self._dtype:
            raise GraphTypeError(
                f"cannot convert variable {self.name} of dtype {self._dtype.name} to a "
                f"{dtypes.as_dtype(dtype).name} tensor"
            )
        return self.value()

    def _as_graph_element(self) -> Tensor:
        return self._graph_element

    def _as_colocation_op(self) -> Operation:
        return self._handle.op

    def __bool__(self):
        raise TypeError(f"the truth value of variable {self.name} is not known in a graph")

    def __iter__(self):
        raise TypeError(f"variable {self.name} is not iterable")


def _delegate(name: str):
    def method(self, *args):
        fn = getattr(Tensor, name, None)
        if fn is None:
            raise TypeError(f"tensors do not support {name} (yet)")
        return fn(self.value(), *args)

    method.__name__ = name
    return method


for _name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
):  # fmt: skip
    setattr(Variable, f"__{_name}__", _delegate(f"__{_name}__"))
    setattr(Variable, f"__r{_name}__", _delegate(f"__r{_name}__"))
for _name in ("neg", "abs", "invert", "lt", "le", "gt", "ge", "getitem"):
    setattr(Variable, f"__{_name}__", _delegate(f"__{_name}__"))


# -- collections and initializers ---------------------------------------------------------------


def global_variables(scope: str | None = None) -> list[Variable]:
    """The variables in the "variables" collection (optionally those whose name matches scope)."""
    return get_default_graph().get_collection(GLOBAL_VARIABLES, scope)


def trainable_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(LOCAL_VARIABLES, scope)


def variables_initializer(var_list, name: str = "init") -> Operation:
    """One op that runs the initializers of `var_list` (a NoOp when the list is empty).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     a, b = rg.Variable(1.0, name="a"), rg.Variable(2.0, name="b")
    ...     sorted(c.name for c in variables_initializer([a, b]).control_inputs)
    ['a/Assign', 'b/Assign']
    """
    from rill.graph.ops.array_ops import group, no_op

    var_list = list(var_list)
    if not var_list:
        return no_op(name=name)
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    return variables_initializer(global_variables(), name="init")


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables(), name="init")


def is_variable_initialized(variable: Variable) -> Tensor:
    return variable.is_initialized()


def assign(ref: Variable, value, validate_shape=None, use_locking=None, name=None):
    """tf.compat.v1.assign on a resource variable: the value after the assignment."""
    return ref.assign(value, name=name)


def assign_add(ref: Variable, value, use_locking=None, name=None):
    return ref.assign_add(value, use_locking=use_locking, name=name)


def assign_sub(ref: Variable, value, use_locking=None, name=None):
    return ref.assign_sub(value, use_locking=use_locking, name=name)


def scatter_add(ref: Variable, indices, updates, use_locking=False, name=None):
    return ref.scatter_add(indices, updates, name=name)


def scatter_sub(ref: Variable, indices, updates, use_locking=False, name=None):
    return ref.scatter_sub(indices, updates, name=name)


def scatter_update(ref: Variable, indices, updates, use_locking=False, name=None):
    return ref.scatter_update(indices, updates, name=name)
