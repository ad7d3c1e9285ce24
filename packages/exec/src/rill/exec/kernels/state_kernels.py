"""Kernels for rill.graph.ops.state_ops: resource variables in the device's ResourceMgr.

Variable values are copy-on-write (see rill.exec.resources.Var): reads return the installed
array without copying; assignments and updates install new arrays under the variable's lock.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.scatter_rows import add_rows_at, scatter_at
from rill.exec.resources import ResourceHandle, Var, handle_array, handle_of, update_vars
from rill.graph.dtypes import NUMBER_TYPES
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape

_GENERIC = ("CPU", "GPU")


def lookup_var(ctx, value) -> Var:
    """The Var behind a handle; FailedPreconditionError when it was never assigned."""
    h = handle_of(value)
    r = ctx.resources.get(h.container, h.name)
    if r is None:
        raise Var(h.dtype, h.shape, h.name)._uninitialized()
    if not isinstance(r, Var):
        raise InvalidArgumentError(f"resource {h.name!r} is a {type(r).__name__}, not a variable")
    return r


def _check_dtype(var: Var, dtype, what: str) -> None:
    if var.dtype is not dtype:
        raise InvalidArgumentError(
            f"{what} variable {var.name!r} with the wrong dtype: the op says {dtype.name}, the "
            f"variable holds {var.dtype.name}"
        )


@register_kernel("VarHandleOp", devices=_GENERIC)
def var_handle_op(container, shared_name, dtype, shape, node, device):
    # An empty shared_name names the variable after the op, as TensorFlow's resource ops do.
    handle = handle_array(
        ResourceHandle(device.name, container, shared_name or node.name, "Var", dtype, shape)
    )

    def compute():
        return handle

    return compute


@register_kernel("ReadVariableOp", devices=_GENERIC)
def read_variable_op(dtype, device):
    # The hottest state kernel: it reads the device's resources directly (a read needs no step
    # context), so a step does not build an OpKernelContext per variable read.
    resources = device.resources

    def compute(h):
        hd = handle_of(h)
        var = resources.get(hd.container, hd.name)
        if type(var) is not Var:
            var = _as_var(var, hd)
        if var.dtype is not dtype:
            _check_dtype(var, dtype, "reading")
        return var.read()

    return compute


def _as_var(r, h) -> Var:
    if r is None:
        raise Var(h.dtype, h.shape, h.name)._uninitialized()
    if not isinstance(r, Var):
        raise InvalidArgumentError(f"resource {h.name!r} is a {type(r).__name__}, not a variable")
    return r


@register_kernel("AssignVariableOp", devices=_GENERIC, context=True)
def assign_variable_op(dtype, validate_shape):
    def compute(ctx, h, value):
        handle = handle_of(h)
        var = ctx.resources.lookup_or_create(
            handle.container,
            handle.name,
            lambda: Var(dtype, handle.shape, handle.name),
        )
        if not isinstance(var, Var):
            raise InvalidArgumentError(
                f"resource {handle.name!r} is a {type(var).__name__}, not a variable"
            )
        _check_dtype(var, dtype, "assigning to")
        var.assign(value, validate_shape)

    return compute


def _update_kernel(ufunc_name: str, what: str):
    def factory(dtype, xp):
        ufunc = getattr(xp, ufunc_name)

        def compute(ctx, h, value):
            var = lookup_var(ctx, h)
            _check_dtype(var, dtype, what)
            if value.dtype != var.dtype.np:
                raise InvalidArgumentError(
                    f"{what} variable {var.name!r}: value has dtype {value.dtype}, expected "
                    f"{var.dtype.name}"
                )

            def apply(old):
                if old.shape != value.shape:
                    raise InvalidArgumentError(
                        f"cannot update variable {var.name!r} of shape {TensorShape(old.shape)} "
                        f"with a value of shape {TensorShape(value.shape)}; the shapes must be "
                        "equal"
                    )
                return ufunc(old, value, out=xp.empty_like(old))

            var.update(apply)

        return compute

    return factory


register_kernel(
    "AssignAddVariableOp", devices=_GENERIC, context=True, constraints={"dtype": NUMBER_TYPES}
)(_update_kernel("add", "adding to"))
register_kernel(
    "AssignSubVariableOp", devices=_GENERIC, context=True, constraints={"dtype": NUMBER_TYPES}
)(_update_kernel("subtract", "subtracting from"))


@register_kernel("VarIsInitializedOp", devices=_GENERIC, context=True)
def var_is_initialized_op(xp):
    def compute(ctx, h):
        handle = handle_of(h)
        r = ctx.resources.get(handle.container, handle.name)
        return xp.asarray(isinstance(r, Var) and r.is_initialized)

    return compute


@register_kernel("DisableCopyOnRead", devices=_GENERIC)
def disable_copy_on_read():
    def compute(h):
        handle_of(h)  # a handle, as TensorFlow checks; nothing else to do

    return compute


@register_kernel("DestroyResourceOp", devices=_GENERIC, context=True)
def destroy_resource_op(ignore_lookup_error):
    def compute(ctx, h):
        handle = handle_of(h)
        if ignore_lookup_error and ctx.resources.get(handle.container, handle.name) is None:
            return
        ctx.resources.delete(handle.container, handle.name)

    return compute


def _check_indices(indices: np.ndarray, limit: int, var: Var) -> None:
    if indices.size == 0:
        return
    bad = (indices < 0) | (indices >= limit)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgumentError(
            f"indices[{','.join(map(str, pos))}] = {int(indices[pos])} is not in [0, {limit}) "
            f"(variable {var.name!r})"
        )


@register_kernel("ResourceGather", context=True)
def resource_gather(batch_dims, validate_indices, dtype):
    # CPU always validates indices, whatever validate_indices says (as TensorFlow's CPU kernel).
    b = batch_dims

    def compute(ctx, h, indices):
        var = lookup_var(ctx, h)
        _check_dtype(var, dtype, "gathering from")
        params = var.read()
        if params.ndim < b + 1:
            raise InvalidArgumentError(
                f"variable {var.name!r} has shape {TensorShape(params.shape)}; batch_dims={b} "
                f"needs rank at least {b + 1}"
            )
        if indices.ndim < b or indices.shape[:b] != params.shape[:b]:
            raise InvalidArgumentError(
                f"indices of shape {TensorShape(indices.shape)} must start with the variable's "
                f"batch dimensions {TensorShape(params.shape[:b])} (batch_dims={b})"
            )
        _check_indices(indices, params.shape[b], var)
        if b == 0:
            return np.asarray(np.take(params, indices, axis=0))
        batch = params.shape[:b]
        nb = int(np.prod(batch, dtype=np.int64))
        p = params.reshape((nb, *params.shape[b:]))
        i = indices.reshape((nb, *indices.shape[b:]))
        out = np.empty((nb, *i.shape[1:], *p.shape[2:]), dtype=params.dtype)
        for k in range(nb):
            out[k] = np.take(p[k], i[k], axis=0)
        return out.reshape((*batch, *indices.shape[b:], *params.shape[b + 1 :]))

    return compute


def _scatter_kernel(mode: str):
    ufunc = {"add": np.add, "sub": np.subtract}.get(mode)

    def factory(dtype):
        def compute(ctx, h, indices, updates):
            var = lookup_var(ctx, h)
            _check_dtype(var, dtype, "scattering into")

            def apply(old):
                if old.ndim == 0:
                    raise InvalidArgumentError(f"cannot scatter into scalar variable {var.name!r}")
                _check_indices(indices, old.shape[0], var)
                want = (*indices.shape, *old.shape[1:])
                if updates.ndim != 0 and updates.shape != want:
                    raise InvalidArgumentError(
                        f"updates must be a scalar or have shape indices.shape + "
                        f"variable.shape[1:] = {TensorShape(want)}, got "
                        f"{TensorShape(updates.shape)}"
                    )
                # In place when nothing but the variable refers to its value (see update_vars),
                # so a scatter costs O(rows touched); otherwise copy on write.
                new = old if old.flags.writeable else old.copy()
                if mode in ("mul", "div", "min", "max"):
                    scatter_at(mode, new, indices, np.broadcast_to(updates, want))
                elif mode == "update":
                    new[indices] = updates  # duplicates: the last update wins
                elif indices.ndim == 1:
                    add_rows_at(new, indices, updates, subtract=mode == "sub")  # duplicates add
                else:
                    ufunc.at(new, indices, updates)  # duplicates accumulate
                return [new]

            update_vars([var], apply, in_place=True)

        return compute

    return factory


register_kernel("ResourceScatterAdd", context=True)(_scatter_kernel("add"))
register_kernel("ResourceScatterSub", context=True)(_scatter_kernel("sub"))
register_kernel("ResourceScatterUpdate", context=True)(_scatter_kernel("update"))
for _mode in ("mul", "div", "min", "max"):
    register_kernel(f"ResourceScatter{_mode.capitalize()}", context=True)(_scatter_kernel(_mode))
