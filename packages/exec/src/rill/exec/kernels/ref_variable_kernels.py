"""Kernels for rill.graph.ops.ref_variable_ops: TensorFlow-1 reference variables.

At run time a reference is a resource handle (kind "Var") to a variable in the device's
ResourceMgr, the same Var that resource variables use, so the fused optimizer kernels and the
Saver work on either. `VariableV2` creates the (uninitialized) Var and returns the handle; ops
that take `Ref(T)` inputs update the Var under its lock and return the handle; an op that takes
the value gets it through a `_ReadRef` the planner inserts (rill.exec.plan.refs), which reads
the Var when the consumer could run. Values are copy-on-write (see rill.exec.resources.Var): a
value read before an update keeps its contents. Every update locks, whatever `use_locking` says.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import find_kernel, instantiate, register_kernel
from rill.exec.kernels.scatter_rows import scatter_at
from rill.exec.kernels.state_kernels import lookup_var
from rill.exec.resources import ResourceHandle, Var, handle_array, handle_of, update_vars
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, OutOfRangeError
from rill.graph.shapes import TensorShape

# TF1 reference variables run on the CPU: no test has run them on a GPU yet (a GPU op that
# uses one gets the value through an explicit copy).
_GENERIC = ("CPU",)


def _var_handle(node, device, container: str, name: str, dtype, shape) -> np.ndarray:
    return handle_array(ResourceHandle(device.name, container, name, "Var", dtype, shape))


def _variable_factory(shape, dtype, container, shared_name, node, device):
    # An empty shared_name names the variable after the op, as TensorFlow's VariableV2 does.
    name = shared_name or node.name
    handle = _var_handle(node, device, container, name, dtype, shape)
    resources = device.resources

    def compute():
        resources.lookup_or_create(container, name, lambda: Var(dtype, shape, name))
        return handle

    return compute


register_kernel("VariableV2", devices=_GENERIC)(_variable_factory)
register_kernel("Variable", devices=_GENERIC)(_variable_factory)


@register_kernel("TemporaryVariable", devices=_GENERIC, context=True)
def temporary_variable(shape, dtype, var_name, node, device):
    name = var_name or node.name

    def compute(ctx):
        container = f"_temporary/{ctx.step_id}"
        ctx.resources.lookup_or_create(container, name, lambda: Var(dtype, shape, name))
        return _var_handle(node, device, container, name, dtype, shape)

    return compute


@register_kernel("DestroyTemporaryVariable", devices=_GENERIC, context=True)
def destroy_temporary_variable(T, var_name):
    def compute(ctx, ref):
        h = handle_of(ref)
        value = lookup_var(ctx, ref).read()
        ctx.resources.delete(h.container, h.name)
        return value

    return compute


@register_kernel("_ReadRef", devices=_GENERIC)
def read_ref(T, device):
    resources = device.resources

    def compute(ref):
        if not (isinstance(ref, np.ndarray) and ref.dtype == object):
            return ref  # a fed value stands in for the variable
        h = handle_of(ref)
        var = resources.get(h.container, h.name)
        if not isinstance(var, Var):
            raise (
                Var(h.dtype, h.shape, h.name)._uninitialized()
                if var is None
                else (InvalidArgumentError(f"resource {h.name!r} is not a variable"))
            )
        return var.read()

    return compute


def _check_value(var: Var, value, what: str) -> None:
    if value.dtype != var.dtype.np:
        raise InvalidArgumentError(
            f"{what} variable {var.name!r}: value has dtype {value.dtype}, expected "
            f"{var.dtype.name}"
        )


@register_kernel("Assign", devices=_GENERIC, context=True)
def assign(T, validate_shape, use_locking):
    def compute(ctx, ref, value):
        h = handle_of(ref)
        var = ctx.resources.lookup_or_create(h.container, h.name, lambda: Var(T, h.shape, h.name))
        _check_value(var, value, "assigning to")
        if validate_shape and var.is_initialized:
            old = var.read()
            if old.shape != value.shape:
                raise InvalidArgumentError(
                    f"Assign requires shapes of both tensors to match: variable {var.name!r} has "
                    f"shape {TensorShape(old.shape)}, value has shape {TensorShape(value.shape)}"
                )
        var.assign(value, validate_shape)
        return ref

    return compute


def _update_factory(ufunc_name: str, what: str):
    def factory(T, use_locking, xp):
        ufunc = getattr(xp, ufunc_name)

        def compute(ctx, ref, value):
            var = lookup_var(ctx, ref)
            _check_value(var, value, what)

            def apply(old):
                if old.shape != value.shape:
                    raise InvalidArgumentError(
                        f"cannot update variable {var.name!r} of shape {TensorShape(old.shape)} "
                        f"with a value of shape {TensorShape(value.shape)}; the shapes must be "
                        "equal"
                    )
                return ufunc(old, value, out=xp.empty_like(old))

            var.update(apply)
            return ref

        return compute

    return factory


register_kernel("AssignAdd", devices=_GENERIC, context=True)(_update_factory("add", "adding to"))
register_kernel("AssignSub", devices=_GENERIC, context=True)(
    _update_factory("subtract", "subtracting from")
)


@register_kernel("IsVariableInitialized", devices=_GENERIC, context=True)
def is_variable_initialized(dtype, xp):
    def compute(ctx, ref):
        h = handle_of(ref)
        r = ctx.resources.get(h.container, h.name)
        return xp.asarray(isinstance(r, Var) and r.is_initialized)

    return compute


@register_kernel("CountUpTo", context=True)
def count_up_to(limit, T):
    def compute(ctx, ref):
        var = lookup_var(ctx, ref)
        before = []

        def apply(old):
            if old.ndim != 0:
                raise InvalidArgumentError(
                    f"CountUpTo needs a scalar variable, {var.name!r} has shape "
                    f"{TensorShape(old.shape)}"
                )
            if old >= limit:
                raise OutOfRangeError(f"Reached limit of {limit}")
            before.append(old)
            return np.asarray(old + 1, dtype=old.dtype)

        var.update(apply)
        return np.asarray(before[0]).copy()

    return compute


# -- scatter --------------------------------------------------------------------------------------


def _check_rows(indices, limit: int, var: Var) -> None:
    if indices.size == 0:
        return
    bad = (indices < 0) | (indices >= limit)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgumentError(
            f"indices[{','.join(map(str, pos))}] = {int(indices[pos])} is not in [0, {limit}) "
            f"(variable {var.name!r})"
        )


def _scatter_factory(mode: str):
    def factory(T, Tindices, use_locking):
        def compute(ctx, ref, indices, updates):
            var = lookup_var(ctx, ref)
            _check_value(var, updates, "scattering into")

            def apply(old):
                if old.ndim == 0:
                    raise InvalidArgumentError(f"cannot scatter into scalar variable {var.name!r}")
                _check_rows(indices, old.shape[0], var)
                want = (*indices.shape, *old.shape[1:])
                if updates.ndim != 0 and updates.shape != want:
                    raise InvalidArgumentError(
                        f"updates must be a scalar or have shape indices.shape + "
                        f"ref.shape[1:] = {TensorShape(want)}, got {TensorShape(updates.shape)}"
                    )
                # In place when nothing but the variable refers to its value (as the resource
                # scatters): a step costs O(rows touched), not a copy of the whole table.
                new = old if old.flags.writeable else old.copy()
                if mode == "update":
                    new[indices] = updates  # duplicates: the last update wins
                else:
                    scatter_at(mode, new, indices, np.broadcast_to(updates, want))
                return [new]

            update_vars([var], apply, in_place=True)
            return ref

        return compute

    return factory


for _op, _mode in (
    ("ScatterUpdate", "update"),
    ("ScatterAdd", "add"),
    ("ScatterSub", "sub"),
    ("ScatterMul", "mul"),
    ("ScatterDiv", "div"),
    ("ScatterMin", "min"),
    ("ScatterMax", "max"),
):
    register_kernel(_op, context=True)(_scatter_factory(_mode))


def _scatter_nd_factory(mode: str):
    def factory(T, Tindices, use_locking, bad_indices_policy):
        def compute(ctx, ref, indices, updates):
            var = lookup_var(ctx, ref)
            _check_value(var, updates, "scattering into")

            def apply(old):
                if indices.ndim == 0:
                    raise InvalidArgumentError("indices must have rank >= 1")
                k = indices.shape[-1]
                if k > old.ndim:
                    raise InvalidArgumentError(
                        f"indices.shape[-1] = {k} exceeds the rank of variable {var.name!r} "
                        f"({old.ndim})"
                    )
                want = (*indices.shape[:-1], *old.shape[k:])
                if updates.shape != want:
                    raise InvalidArgumentError(
                        f"updates must have shape indices.shape[:-1] + ref.shape[K:] = "
                        f"{TensorShape(want)}, got {TensorShape(updates.shape)}"
                    )
                idx = indices.reshape(-1, k)
                for d in range(k):
                    col = idx[:, d]
                    if col.size and ((col < 0) | (col >= old.shape[d])).any():
                        i = int(np.argmax((col < 0) | (col >= old.shape[d])))
                        raise InvalidArgumentError(
                            f"indices[{i}] = {idx[i].tolist()} does not index into shape "
                            f"{TensorShape(old.shape)} (variable {var.name!r})"
                        )
                new = old.copy()
                where = tuple(idx[:, d] for d in range(k))
                ups = updates.reshape(idx.shape[0], *old.shape[k:])
                if mode == "update":
                    new[where] = ups
                else:
                    (np.add if mode == "add" else np.subtract).at(new, where, ups)
                return new

            var.update(apply)
            return ref

        return compute

    return factory


register_kernel("ScatterNdUpdate", context=True)(_scatter_nd_factory("update"))
register_kernel("ScatterNdAdd", context=True)(_scatter_nd_factory("add"))
register_kernel("ScatterNdSub", context=True)(_scatter_nd_factory("sub"))


# -- the non-resource optimizer updates: the resource kernels on the same Var, returning var ----


def _apply_factory(resource_op: str):
    def factory(node, device):
        kdef = find_kernel(resource_op, "CPU", node.attrs)
        if kdef is None:
            raise InvalidArgumentError(
                f"no CPU kernel for {node.type} with T={node.attrs['T'].name}"
            )
        inner = instantiate(kdef, node, device, dict(node.attrs))

        def compute(ctx, *args):
            inner(ctx, *args)
            return args[0]

        return compute

    return factory


def _apply_ops():
    from rill.graph.op_def import has_op

    for name in (
        "ApplyGradientDescent",
        "ApplyMomentum",
        "ApplyAdagrad",
        "ApplyAdagradV2",
        "ApplyAdadelta",
        "ApplyRMSProp",
        "ApplyCenteredRMSProp",
        "ApplyAdam",
        "ApplyFtrl",
        "ApplyFtrlV2",
        "SparseApplyAdagrad",
        "SparseApplyAdagradV2",
        "SparseApplyMomentum",
        "SparseApplyAdadelta",
        "SparseApplyRMSProp",
        "SparseApplyCenteredRMSProp",
        "SparseApplyFtrl",
        "SparseApplyFtrlV2",
    ):
        assert has_op(name), name
        cons = {"T": (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)}
        register_kernel(name, context=True, constraints=cons)(_apply_factory("Resource" + name))


_apply_ops()


# -- the ref twins of the control-flow primitives -------------------------------------------------
# The planner (rill.exec.plan.refs) runs RefSwitch, RefMerge, RefEnter, RefExit,
# RefNextIteration and RefIdentity as Switch, Merge, ... themselves, which the executors
# implement; these registrations declare that every device type supports them (placement checks
# that) and give their value-level behaviour for runs outside an executor, like
# rill.exec.kernels.control_flow_kernels does for the primitives.


def _forward(T):
    def compute(x):
        return x

    return compute


for _op in ("RefEnter", "RefExit", "RefNextIteration", "RefIdentity"):
    register_kernel(_op, devices=_GENERIC)(_forward)


@register_kernel("RefSwitch", devices=_GENERIC)
def ref_switch(T):
    def compute(data, pred):
        return (None, data) if pred else (data, None)

    return compute


@register_kernel("RefMerge", devices=_GENERIC)
def ref_merge(T, N):
    def compute(*inputs):
        for i, v in enumerate(inputs):
            if v is not None:
                return v, np.int32(i)
        return None, np.int32(-1)

    return compute
