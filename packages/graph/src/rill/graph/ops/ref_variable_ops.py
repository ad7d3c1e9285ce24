"""TensorFlow-1 reference variables and the ops that take a variable by reference.

A `VariableV2` op's output is a *reference* to the variable's buffer (`Ref(dtype)` in its
declaration): an op whose input is declared `Ref(T)` (Assign, ScatterAdd, ApplyAdam, RefSwitch,
...) receives the variable itself and may update it, and an op whose input is a plain `T`
receives the variable's value at the time it runs. Most ops that update a variable return the
same reference, so `Identity(Assign(w, v))` reads the assigned value. This is the variable model
of graphs written by TensorFlow 1 (`tf.compat.v1.Variable(..., use_resource=False)`), which rill
runs unchanged: rill.exec turns each ref edge into a handle to the variable in the resource
manager, and each read of a ref by a non-ref input into an explicit read at that point.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     w = variable_v2([2], rg.float32, name="w")
...     init = assign(w, rg.constant([1.0, 2.0]), name="w/Assign")
...     up = assign_add(w, rg.constant([1.0, 1.0]))
>>> w.op.type, init.op.type, up.op.type, up.shape
('VariableV2', 'Assign', 'AssignAdd', TensorShape([2]))

The non-resource optimizer ops (`ApplyAdam`, `SparseApplyAdagrad`, ...) are declared here from
their resource twins in training_ops: the same inputs, with each `resource` input a `Ref(T)`,
and one output, the updated `var`.
"""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop, get_op_def
from rill.graph.ops import training_ops  # noqa: F401 - the resource twins, declared first
from rill.graph.ops.control_flow_ops import _merge_shape, _switch_shape
from rill.graph.shapes import TensorShape, unknown_shape

__all__ = [
    "variable_v2",
    "assign",
    "assign_add",
    "assign_sub",
    "is_variable_initialized",
    "count_up_to",
    "scatter_op",
    "ref_identity",
    "REF_CONTROL_FLOW",
]

# The ref twin of each control-flow primitive: the executor runs the twin as the primitive,
# passing the variable reference through.
REF_CONTROL_FLOW = {
    "RefSwitch": "Switch",
    "RefMerge": "Merge",
    "RefEnter": "Enter",
    "RefExit": "Exit",
    "RefNextIteration": "NextIteration",
    "RefIdentity": "Identity",
}


# -- shape functions ------------------------------------------------------------------------------


def _variable_shape(op):
    return [op.attrs["shape"]]


def _assign_shape(op):
    ref, value = op._inputs[0].shape, op._inputs[1].shape
    if op.attrs.get("validate_shape", True):
        if not ref.is_compatible_with(value):
            raise ValueError(
                f"cannot assign a value of shape {value} to a variable of shape {ref} "
                "(validate_shape=True)"
            )
        return [ref.merge_with(value)]
    return [value]


def _update_shape(op):
    ref, value = op._inputs[0].shape, op._inputs[1].shape
    if not ref.is_compatible_with(value):
        raise ValueError(f"the update has shape {value}, but the variable has shape {ref}")
    return [ref.merge_with(value)]


def _scalar_output(op):
    return [TensorShape([])]


def _count_up_to_shape(op):
    s = op._inputs[0].shape
    if s.rank not in (None, 0):
        raise ValueError(f"CountUpTo needs a scalar variable, got shape {s}")
    return [TensorShape([])]


def _scatter_shape(op):
    ref, indices, updates = (t.shape for t in op._inputs)
    if ref.rank == 0:
        raise ValueError("cannot scatter into a scalar variable")
    if updates.rank not in (None, 0) and indices.rank is not None and ref.rank is not None:
        want = indices.concatenate(ref[1:])
        if not updates.is_compatible_with(want):
            raise ValueError(
                f"updates has shape {updates}; it must be a scalar or indices.shape + "
                f"ref.shape[1:] = {want}"
            )
    return [ref]


def _scatter_nd_shape(op):
    ref, indices, updates = (t.shape for t in op._inputs)
    if indices.rank == 0:
        raise ValueError("indices must have rank >= 1")
    if (
        indices.rank is not None
        and ref.rank is not None
        and updates.rank is not None
        and indices[-1] is not None
    ):
        k = indices[-1]
        if k > ref.rank:
            raise ValueError(f"indices.shape[-1] = {k} exceeds the rank of ref ({ref.rank})")
        want = indices[:-1].concatenate(ref[k:])
        if not updates.is_compatible_with(want):
            raise ValueError(
                f"updates has shape {updates}; it must be indices.shape[:-1] + "
                f"ref.shape[indices.shape[-1]:] = {want}"
            )
    return [ref]


def _apply_shape(op):
    """Every Ref input is a variable of one shape; the dense update (`grad`/`delta`) has that
    shape, a sparse one has [len(indices)] + shape[1:]; hyperparameters are scalars."""
    var = unknown_shape()
    grad = indices = None
    for arg, x in zip(op.op_def.inputs, op._inputs):
        if arg.is_ref:
            try:
                var = var.merge_with(x.shape)
            except ValueError:
                raise ValueError(
                    f"{arg.name} ({x.name}) has shape {x.shape}, but the variables before it have "
                    f"shape {var}; every variable an apply op updates has the same shape"
                ) from None
        elif arg.name in ("grad", "delta"):
            grad = (arg.name, x.shape)
        elif arg.name == "indices":
            indices = x.shape
        elif x.shape.rank not in (None, 0):
            raise ValueError(f"{arg.name} must be a scalar, got shape {x.shape}")
    name, g = grad
    if indices is None:
        if not g.is_compatible_with(var):
            raise ValueError(f"{name} has shape {g}, but the variable has shape {var}")
        return [var]
    if indices.rank not in (None, 1):
        raise ValueError(f"indices must be a vector, got shape {indices}")
    if var.rank is not None and g.rank is not None:
        want = TensorShape([indices[0] if indices.rank == 1 else None]).concatenate(var[1:])
        if not g.is_compatible_with(want):
            raise ValueError(
                f"{name} has shape {g}; a sparse update must have shape [len(indices)] + "
                f"var.shape[1:] = {want}"
            )
    return [var]


# -- declarations ---------------------------------------------------------------------------------

_VAR_ATTRS = ["shape: shape", "dtype: type", "container: string = ''", "shared_name: string = ''"]
defop(
    "VariableV2",
    outputs=["ref: Ref(dtype)"],
    attrs=_VAR_ATTRS,
    shape=_variable_shape,
    stateful=True,
    doc="A mutable tensor that lives across steps; its output refers to the variable itself.",
)
defop(
    "Variable",
    outputs=["ref: Ref(dtype)"],
    attrs=_VAR_ATTRS,
    shape=_variable_shape,
    stateful=True,
    doc="VariableV2's older name (TensorFlow's graphs before 1.0).",
)
defop(
    "TemporaryVariable",
    outputs=["ref: Ref(dtype)"],
    attrs=["shape: shape", "dtype: type", "var_name: string = ''"],
    shape=_variable_shape,
    stateful=True,
    doc="A variable that lives for one step, until DestroyTemporaryVariable returns its value.",
)
defop(
    "DestroyTemporaryVariable",
    inputs=["ref: Ref(T)"],
    outputs=["value: T"],
    attrs=["T: type", "var_name: string"],
    shape=shape_fns.unchanged,
    doc="Returns a temporary variable's value and deletes the variable.",
)
defop(
    "Assign",
    inputs=["ref: Ref(T)", "value: T"],
    outputs=["output_ref: Ref(T)"],
    attrs=["T: type", "validate_shape: bool = true", "use_locking: bool = true"],
    shape=_assign_shape,
    allows_uninitialized_input=True,
    doc="ref = value; returns ref. validate_shape=False lets the variable change shape.",
)
for _name, _sign in (("AssignAdd", "+="), ("AssignSub", "-=")):
    defop(
        _name,
        inputs=["ref: Ref(T)", "value: T"],
        outputs=["output_ref: Ref(T)"],
        attrs=["T: numbertypes", "use_locking: bool = false"],
        shape=_update_shape,
        doc=f"ref {_sign} value (same shapes); returns ref.",
    )
defop(
    "IsVariableInitialized",
    inputs=["ref: Ref(dtype)"],
    outputs=["is_initialized: bool"],
    attrs=["dtype: type"],
    shape=_scalar_output,
    allows_uninitialized_input=True,
    doc="Whether the variable has been assigned a value.",
)
defop(
    "CountUpTo",
    inputs=["ref: Ref(T)"],
    outputs=["output: T"],
    attrs=["limit: int", "T: {int32, int64}"],
    shape=_count_up_to_shape,
    doc="Increments a scalar variable and returns its old value; OutOfRange once it reaches limit.",
)

_SCATTER = (
    ("ScatterUpdate", "type", "true", "ref[indices] = updates (the last of duplicates wins)."),
    ("ScatterAdd", "numbertypes", "false", "ref[indices] += updates (duplicates accumulate)."),
    ("ScatterSub", "numbertypes", "false", "ref[indices] -= updates (duplicates accumulate)."),
    ("ScatterMul", "numbertypes", "false", "ref[indices] *= updates (duplicates multiply)."),
    ("ScatterDiv", "numbertypes", "false", "ref[indices] /= updates (duplicates divide)."),
    ("ScatterMin", "{bfloat16, float16, float32, float64, int32, int64}", "false",
     "ref[indices] = min(ref[indices], updates)."),
    ("ScatterMax", "{bfloat16, float16, float32, float64, int32, int64}", "false",
     "ref[indices] = max(ref[indices], updates)."),
)  # fmt: skip
for _name, _types, _lock, _doc in _SCATTER:
    defop(
        _name,
        inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
        outputs=["output_ref: Ref(T)"],
        attrs=[f"T: {_types}", "Tindices: {int32, int64}", f"use_locking: bool = {_lock}"],
        shape=_scatter_shape,
        doc=f"{_doc} Rows of a variable by index along axis 0; returns ref.",
    )

for _name, _types, _lock, _doc in (
    ("ScatterNdUpdate", "type", "true", "ref[indices] = updates"),
    ("ScatterNdAdd", "numbertypes", "false", "ref[indices] += updates"),
    ("ScatterNdSub", "numbertypes", "false", "ref[indices] -= updates"),
):
    defop(
        _name,
        inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
        outputs=["output_ref: Ref(T)"],
        attrs=[
            f"T: {_types}",
            "Tindices: {int32, int64}",
            f"use_locking: bool = {_lock}",
            "bad_indices_policy: string = ''",
        ],
        shape=_scatter_nd_shape,
        doc=f"{_doc}, where each row of indices is a (partial) index into ref; returns ref.",
    )

# The ref twins of the control-flow primitives (TensorFlow-1 conds and loops over variables).
defop(
    "RefSwitch",
    inputs=["data: Ref(T)", "pred: bool"],
    outputs=["output_false: Ref(T)", "output_true: Ref(T)"],
    attrs=["T: type"],
    shape=_switch_shape,
    allows_uninitialized_input=True,
    doc="Switch for a variable reference.",
)
defop(
    "RefMerge",
    inputs=["inputs: N * Ref(T)"],
    outputs=["output: Ref(T)", "value_index: int32"],
    attrs=["T: type", "N: int >= 1"],
    shape=_merge_shape,
    doc="Merge for variable references.",
)
defop(
    "RefEnter",
    inputs=["data: Ref(T)"],
    outputs=["output: Ref(T)"],
    attrs=[
        "T: type",
        "frame_name: string",
        "is_constant: bool = false",
        "parallel_iterations: int = 10",
    ],
    shape=shape_fns.unchanged,
    doc="Enter for a variable reference.",
)
for _name, _doc in (("RefExit", "Exit"), ("RefNextIteration", "NextIteration")):
    defop(
        _name,
        inputs=["data: Ref(T)"],
        outputs=["output: Ref(T)"],
        attrs=["T: type"],
        shape=shape_fns.unchanged,
        doc=f"{_doc} for a variable reference.",
    )
defop(
    "RefIdentity",
    inputs=["input: Ref(T)"],
    outputs=["output: Ref(T)"],
    attrs=["T: type"],
    shape=shape_fns.unchanged,
    allows_uninitialized_input=True,
    doc="Forwards a variable reference.",
)

defop(
    "_ReadRef",
    inputs=["ref: Ref(T)"],
    outputs=["value: T"],
    attrs=["T: type"],
    shape=shape_fns.unchanged,
    stateful=True,
    doc="rill's planner-made read of a variable reference by an op that takes its value.",
)

# The non-resource optimizer updates, one per ResourceApply*/ResourceSparseApply* op that
# TensorFlow also has as a ref op (TensorFlow has no ref twin of the Keras momentum ops).
for _res in (
    "ResourceApplyGradientDescent",
    "ResourceApplyMomentum",
    "ResourceApplyAdagrad",
    "ResourceApplyAdagradV2",
    "ResourceApplyAdadelta",
    "ResourceApplyRMSProp",
    "ResourceApplyCenteredRMSProp",
    "ResourceApplyAdam",
    "ResourceApplyFtrl",
    "ResourceApplyFtrlV2",
    "ResourceSparseApplyAdagrad",
    "ResourceSparseApplyAdagradV2",
    "ResourceSparseApplyMomentum",
    "ResourceSparseApplyAdadelta",
    "ResourceSparseApplyRMSProp",
    "ResourceSparseApplyCenteredRMSProp",
    "ResourceSparseApplyFtrl",
    "ResourceSparseApplyFtrlV2",
):
    _od = get_op_def(_res)
    _ins = []
    for _a in _od.inputs:
        if _a.type is dtypes.resource:
            _ins.append(f"{_a.name}: Ref(T)")
        else:
            _ins.append(f"{_a.name}: {_a.type_attr or _a.type.name}")
    _attrs = []
    for _a in _od.attrs:
        _spec = f"{_a.name}: {_a.type}"
        if _a.allowed is not None:
            _spec = f"{_a.name}: {{{', '.join(t.name for t in _a.allowed)}}}"
        if _a.has_default:
            _d = _a.default
            _spec += f" = {str(_d).lower() if isinstance(_d, bool) else _d}"
        _attrs.append(_spec)
    defop(
        _res[len("Resource") :],
        inputs=_ins,
        outputs=["out: Ref(T)"],
        attrs=_attrs,
        shape=_apply_shape,
        doc=f"{_od.doc} Updates the variables in place; returns var.",
    )


# -- builders -------------------------------------------------------------------------------------


def _op(op_type: str, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def variable_v2(shape, dtype, container: str = "", shared_name: str = "", name: str = "Variable"):
    """A TensorFlow-1 reference variable (VariableV2); returns its ref tensor."""
    attrs = {
        "shape": TensorShape(shape),
        "dtype": dtypes.as_dtype(dtype),
        "container": container,
        "shared_name": shared_name,
    }
    return _op("VariableV2", [], attrs, name=name).outputs[0]


def assign(ref: Tensor, value, validate_shape: bool = True, use_locking: bool = True, name=None):
    """ref = value (Assign); returns the ref, which reads as the assigned value."""
    value = convert_to_tensor(value, dtype=ref.dtype, name="value")
    attrs = {"validate_shape": validate_shape, "use_locking": use_locking}
    return _op("Assign", [ref, value], attrs, name=name).outputs[0]


def assign_add(ref: Tensor, value, use_locking: bool = False, name=None):
    """ref += value (AssignAdd); returns the ref."""
    value = convert_to_tensor(value, dtype=ref.dtype, name="value")
    return _op("AssignAdd", [ref, value], {"use_locking": use_locking}, name=name).outputs[0]


def assign_sub(ref: Tensor, value, use_locking: bool = False, name=None):
    """ref -= value (AssignSub); returns the ref."""
    value = convert_to_tensor(value, dtype=ref.dtype, name="value")
    return _op("AssignSub", [ref, value], {"use_locking": use_locking}, name=name).outputs[0]


def is_variable_initialized(ref: Tensor, name=None) -> Tensor:
    """Whether the ref variable holds a value (IsVariableInitialized)."""
    return _op("IsVariableInitialized", [ref], name=name).outputs[0]


def count_up_to(ref: Tensor, limit: int, name=None) -> Tensor:
    """The old value of an integer scalar variable, which is incremented (CountUpTo)."""
    return _op("CountUpTo", [ref], {"limit": int(limit)}, name=name).outputs[0]


def scatter_op(op_type: str, ref: Tensor, indices, updates, use_locking=None, name=None):
    """Any of the Scatter*/ScatterNd* ops on a ref variable; returns the ref."""
    indices = convert_to_tensor(indices, name="indices")
    updates = convert_to_tensor(updates, dtype=ref.dtype, name="updates")
    attrs = {} if use_locking is None else {"use_locking": bool(use_locking)}
    return _op(op_type, [ref, indices, updates], attrs, name=name).outputs[0]


def ref_identity(ref: Tensor, name=None) -> Tensor:
    """Forwards a variable reference (RefIdentity)."""
    return _op("RefIdentity", [ref], name=name).outputs[0]
