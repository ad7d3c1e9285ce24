"""GPU kernels for variables' gathers and scatters and for every optimizer's fused update.

The updates are the CPU kernels' formulas (rill.exec.kernels.training_kernels), which are written
with numpy ufuncs and so run on cupy arrays through cupy's `__array_ufunc__`. Hyperparameters
(learning rate, decay rates, ...) and sparse indices are host memory, as small values the update
reads on the host; gradients and the variables' values stay on the device. Variables on a GPU
are copy-on-write: an update installs new device arrays (cupy's memory pool makes that cheap),
so a reader never sees half of one. Sparse updates walk duplicated indices in passes, as the CPU
kernels do, so a row named twice is updated twice, in order.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import optimizer_steps as steps
from rill.exec.kernels import training_kernels as tk
from rill.exec.kernels.gpu.generic import scatter_add
from rill.exec.kernels.state_kernels import _check_dtype, lookup_var
from rill.exec.memory_types import declare_host_memory
from rill.exec.resources import update_vars
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.op_def import get_op_def
from rill.graph.shapes import TensorShape

_FLOAT = (dtypes.float16, dtypes.float32, dtypes.float64)
_FLOAT_COMPLEX = {"T": _FLOAT + (dtypes.complex64, dtypes.complex128)}
_REAL = {"T": _FLOAT}


def _sc(d, name):
    return tk._scalar(d[name], name)


def _ftrl(d, a, shrinkage: bool):
    return tk._ftrl_hyper(d["lr"], d["l1"], d["l2"], d["l2_shrinkage"] if shrinkage else None,
                          d["lr_power"], a["multiply_linear_by_lr"])  # fmt: skip


def _momentum(d, a):
    return (_sc(d, "lr"), _sc(d, "momentum"), a["use_nesterov"])


def _adam(d, a):
    names = ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon")
    return (*(_sc(d, n) for n in names), a["use_nesterov"])


def _rms(d, a):
    return tk._rms_hyper(d["lr"], d["rho"], d["momentum"], d["epsilon"])


# op -> (update step, gradient input, hyperparameters(named inputs, attrs), constraints)
_UPDATES = {
    "GradientDescent": (steps.gradient_descent, "delta", lambda d, a: (_sc(d, "alpha"),), _FLOAT_COMPLEX),
    "Momentum": (steps.momentum, "grad", _momentum, _FLOAT_COMPLEX),
    "KerasMomentum": (steps.keras_momentum, "grad", _momentum, _FLOAT_COMPLEX),
    "Adagrad": (steps.adagrad, "grad", lambda d, a: (_sc(d, "lr"), a["update_slots"]), _FLOAT_COMPLEX),
    "AdagradV2": (steps.adagrad_v2, "grad",
                  lambda d, a: (_sc(d, "lr"), _sc(d, "epsilon"), a["update_slots"]), _FLOAT_COMPLEX),
    "Adadelta": (steps.adadelta, "grad",
                 lambda d, a: (_sc(d, "lr"), _sc(d, "rho"), _sc(d, "epsilon")), _FLOAT_COMPLEX),
    "RMSProp": (steps.rms_prop, "grad", _rms, _FLOAT_COMPLEX),
    "CenteredRMSProp": (steps.centered_rms_prop, "grad", _rms, _FLOAT_COMPLEX),
    "Adam": (steps.adam, "grad", _adam, _FLOAT_COMPLEX),
    "Ftrl": (steps.ftrl, "grad", lambda d, a: _ftrl(d, a, False), _REAL),
    "FtrlV2": (steps.ftrl, "grad", lambda d, a: _ftrl(d, a, True), _REAL),
}  # fmt: skip


def _names(op_type):
    od = get_op_def(op_type)
    ins = [a.name for a in od.inputs]
    states = [a.name for a in od.inputs if a.type is dtypes.resource]
    return od, ins, states


# Scalars that stay in device memory, as in TensorFlow's GPU kernels: Adam's beta powers are
# variables updated every step, and reading them on the host would synchronize the step (and keep
# it from running as a CUDA graph); the update's formula computes with them on the device.
_DEVICE_SCALARS = {"Adam": ("beta1_power", "beta2_power")}


def _dense_factory(op_type, step, grad_name, hyper, device_scalars=()):
    od, ins, states = _names(op_type)
    scalars = [n for n in ins if n not in states and n != grad_name and n not in device_scalars]
    declare_host_memory(op_type, inputs=scalars)
    attr_names = [a.name for a in od.attrs]

    def factory(T, node):
        attrs = {k: node.attrs[k] for k in attr_names if k in node.attrs}

        def compute(ctx, *args):
            d = dict(zip(ins, args))
            hp = hyper(d, attrs)
            vs = tk._vars(ctx, T, [d[n] for n in states], states)
            grad = d[grad_name]

            def update(*olds):
                tk._check_slots(olds, states, vs[0])
                if grad.shape != olds[0].shape:
                    raise InvalidArgumentError(
                        f"var and {grad_name} do not have the same shape: "
                        f"{TensorShape(olds[0].shape)} vs {TensorShape(grad.shape)} "
                        f"(variable {vs[0].name!r})"
                    )
                return list(step(grad, *olds, *hp))

            update_vars(vs, update)

        return compute

    return factory


def _sparse_factory(op_type, step, hyper):
    od, ins, states = _names(op_type)
    scalars = [n for n in ins if n not in states and n != "grad"]  # indices and hyperparameters
    declare_host_memory(op_type, inputs=scalars)
    attr_names = [a.name for a in od.attrs]

    def factory(T, node, xp):
        attrs = {k: node.attrs[k] for k in attr_names if k in node.attrs}

        def compute(ctx, *args):
            d = dict(zip(ins, args))
            hp = hyper(d, attrs)
            vs = tk._vars(ctx, T, [d[n] for n in states], states)
            grad, indices = d["grad"], np.asarray(d["indices"])

            def update(*olds):
                var = olds[0]
                if var.ndim == 0:
                    raise InvalidArgumentError(
                        f"var must be at least 1 dimensional (variable {vs[0].name!r} is a scalar)"
                    )
                tk._check_slots(olds, states, vs[0])
                if indices.ndim != 1:
                    raise InvalidArgumentError(
                        f"indices must be one-dimensional, got shape {TensorShape(indices.shape)}"
                    )
                if grad.ndim == 0 or grad.shape[0] != indices.shape[0]:
                    raise InvalidArgumentError(
                        "grad must be the same size as indices in the first dimension: grad has "
                        f"shape {TensorShape(grad.shape)}, indices {TensorShape(indices.shape)}"
                    )
                if grad.shape[1:] != var.shape[1:]:
                    raise InvalidArgumentError(
                        "var and grad must match in every dimension after the first: var has "
                        f"shape {TensorShape(var.shape)}, grad {TensorShape(grad.shape)}"
                    )
                n = indices.shape[0]
                if n == 0:
                    return olds
                rows = var.shape[0]
                if indices.min() < 0 or indices.max() >= rows:
                    i = int(np.argmax((indices < 0) | (indices >= rows)))
                    raise InvalidArgumentError(
                        f"Index {int(indices[i])} at offset {i} in indices is out of range: "
                        f"variable {vs[0].name!r} has {rows} rows"
                    )
                news = [x.copy() for x in olds]
                for pos in tk._passes(indices):
                    if pos is None:
                        idx, g = xp.asarray(indices), grad
                    else:
                        idx, g = xp.asarray(indices[pos]), grad[xp.asarray(pos)]
                    before = [x[idx] for x in news]
                    after = step(g, *before, *hp)
                    for k, (b, a) in enumerate(zip(before, after)):
                        if a is not b:
                            news[k][idx] = a
                return news

            update_vars(vs, update)

        return compute

    return factory


for _name, (_step, _grad, _hyper, _cons) in _UPDATES.items():
    _op = f"ResourceApply{_name}"
    register_kernel(_op, devices="GPU", context=True, constraints=_cons)(
        _dense_factory(_op, _step, _grad, _hyper, _DEVICE_SCALARS.get(_name, ()))
    )
    _sop = f"ResourceSparseApply{_name}"
    if _name in ("GradientDescent", "Adam"):
        continue  # TensorFlow has no such fused sparse ops
    register_kernel(_sop, devices="GPU", context=True,
                    constraints=_cons if _name[:4] != "Ftrl" else
                    {"T": (dtypes.float32, dtypes.float64)})(_sparse_factory(_sop, _step, _hyper))  # fmt: skip


# -- gathers and scatters on variables ---------------------------------------------------------


def _check_indices_device(xp, indices, limit: int, var) -> None:
    """One host round trip: whether any index is out of range (then the CPU check's message)."""
    if indices.size and bool(((indices < 0) | (indices >= limit)).any()):
        from rill.exec.kernels.state_kernels import _check_indices

        _check_indices(xp.asnumpy(indices), limit, var)


@register_kernel("ResourceGather", devices="GPU", context=True, constraints={"batch_dims": (0,)})
def resource_gather(batch_dims, validate_indices, dtype, xp):
    def compute(ctx, h, indices):
        var = lookup_var(ctx, h)
        _check_dtype(var, dtype, "gathering from")
        params = var.read()
        if params.ndim < 1:
            raise InvalidArgumentError(
                f"variable {var.name!r} has shape {TensorShape(params.shape)}; a gather needs "
                "rank at least 1"
            )
        _check_indices_device(xp, indices, params.shape[0], var)
        return xp.take(params, indices, axis=0)

    return compute


def _scatter_factory(mode: str):
    def factory(dtype, xp):
        def compute(ctx, h, indices, updates):
            var = lookup_var(ctx, h)
            _check_dtype(var, dtype, "scattering into")

            def apply(old):
                if old.ndim == 0:
                    raise InvalidArgumentError(f"cannot scatter into scalar variable {var.name!r}")
                _check_indices_device(xp, indices, old.shape[0], var)
                want = (*indices.shape, *old.shape[1:])
                if updates.ndim != 0 and updates.shape != want:
                    raise InvalidArgumentError(
                        f"updates must be a scalar or have shape indices.shape + "
                        f"variable.shape[1:] = {TensorShape(want)}, got "
                        f"{TensorShape(updates.shape)}"
                    )
                new = old.copy()
                if mode == "update":
                    new[indices] = updates  # duplicates: one of them wins
                else:
                    u = xp.broadcast_to(updates, want) if updates.ndim == 0 else updates
                    scatter_add(xp, new, indices, -u if mode == "sub" else u)
                return new

            var.update(apply)

        return compute

    return factory


for _mode in ("add", "sub", "update"):
    register_kernel(f"ResourceScatter{_mode.capitalize()}", devices="GPU", context=True,
                    constraints={"dtype": _FLOAT + (dtypes.int32, dtypes.int64)})(
        _scatter_factory(_mode))  # fmt: skip
