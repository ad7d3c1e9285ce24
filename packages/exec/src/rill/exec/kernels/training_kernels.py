"""CPU kernels for rill.graph.ops.training_ops: the fused optimizer updates.

Each update is a pure function `step(grad, *states, *hyperparameters) -> new states` of numpy
arrays, written with TensorFlow's formulas and few temporaries (results go into fresh buffers
with `out=`; a step never writes into its arguments). The dense kernels apply it to whole
variables, chunk by chunk, the sparse ones to the gathered rows `indices`; either way the
variable and its slots are updated together, under their locks, by
`rill.exec.resources.update_vars`, so a reader never sees half an update and a failing update
changes nothing. Variables are copy-on-write, except that a dense update writes in place into a
state array that nothing but its variable refers to (no reader holds it, so none can tell).
Every kernel locks, whatever `use_locking` says: the lock is cheap and a lost update is not.

Sparse updates follow TensorFlow's CPU kernels, which walk the indices in order: a row named
twice is updated twice, the second time from the state the first left. Without duplicates that
is one vectorized pass; with them, one pass per occurrence (the k-th pass updates the k-th
occurrence of every duplicated row), which is the same sequence of updates per row.

Hyperparameters must be scalars; shapes must agree; indices must lie in [0, rows) — otherwise
InvalidArgumentError, with TensorFlow's wording, and the variables keep their values.
"""

from __future__ import annotations

import functools

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import jit
from rill.exec.kernels import optimizer_steps as steps
from rill.exec.kernels.intra_op import parallel_for, scratch
from rill.exec.kernels.state_kernels import lookup_var
from rill.exec.resources import Var, update_vars
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape

_FLOAT = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
_FLOAT_COMPLEX = {"T": _FLOAT + (dtypes.complex64, dtypes.complex128)}
_REAL = {"T": _FLOAT}
# TensorFlow's sparse FTRL kernels exist for float32 and float64 only.
_SPARSE_FTRL = {"T": (dtypes.float32, dtypes.float64)}


# -- running an update --------------------------------------------------------------------------


def _vars(ctx, t, handles, names) -> list[Var]:
    out = []
    for h, name in zip(handles, names):
        v = lookup_var(ctx, h)
        if v.dtype is not t:
            raise InvalidArgumentError(
                f"{name} is variable {v.name!r} of dtype {v.dtype.name}, but the op has T={t.name}"
            )
        out.append(v)
    return out


def _scalar(x: np.ndarray, name: str):
    if x.ndim != 0:
        raise InvalidArgumentError(f"{name} is not a scalar: {TensorShape(x.shape)}")
    return x[()]


def _check_slots(olds, names, var: Var) -> None:
    shape = olds[0].shape
    for old, name in zip(olds[1:], names[1:]):
        if old.shape != shape:
            raise InvalidArgumentError(
                f"var and {name} do not have the same shape: {TensorShape(shape)} vs "
                f"{TensorShape(old.shape)} (variable {var.name!r})"
            )


def _dense(ctx, t, handles, names, grad_name, grad, step, hyper) -> None:
    vs = _vars(ctx, t, handles, names)

    def update(*olds):
        _check_slots(olds, names, vs[0])
        if grad.shape != olds[0].shape:
            raise InvalidArgumentError(
                f"var and {grad_name} do not have the same shape: {TensorShape(olds[0].shape)} "
                f"vs {TensorShape(grad.shape)} (variable {vs[0].name!r})"
            )
        return _apply_dense(step, grad, olds, hyper)

    update_vars(vs, update, in_place=True)


# Dense updates of large variables work through chunks of this many elements, so that the
# update's temporaries stay in cache and each state array is read and written once.
_CHUNK = 1 << 16


def _apply_dense(step, grad, olds, hyper) -> list:
    """step(grad, *olds, *hyper), written into the writable olds (the variables that nothing else
    refers to, see update_vars) and into new arrays for the others, chunk by chunk.

    Every update is elementwise, so chunks give exactly the results of one whole-array step.
    """
    n = grad.size
    contiguous = all(o.flags.c_contiguous for o in (grad, *olds))
    writeable = all(o.flags.writeable for o in olds)
    compiled = _compiled(step, grad.dtype, hyper) if contiguous and writeable else None
    if compiled is not None:
        g, states = grad.reshape(-1), [o.reshape(-1) for o in olds]
        parallel_for(
            n, lambda lo, hi: compiled(g, *states, *hyper, lo, hi), _CHUNK, pieces_per_thread=8
        )
        return list(olds)
    if n <= _CHUNK or not contiguous:
        news = step(grad, *olds, *hyper)
        return [_into(o, x) for o, x in zip(olds, news)]
    g = grad.reshape(-1)
    in_place = _IN_PLACE.get(step)
    if in_place is not None and writeable:
        states = [o.reshape(-1) for o in olds]

        def part(lo, hi):
            t = scratch("update", _CHUNK, grad.dtype)
            for a in range(lo * _CHUNK, min(n, hi * _CHUNK), _CHUNK):
                b = min(n, a + _CHUNK)
                in_place(g[a:b], *(x[a:b] for x in states), *hyper, t[: b - a])

        # Chunks are disjoint, so the intra-op threads share them.
        parallel_for(-(-n // _CHUNK), part, pieces_per_thread=4)
        return list(olds)
    # A variable something else still refers to (a value read earlier in the step) gets a new
    # array, written chunk by chunk; the chunks are disjoint, so the threads share them too.
    dst = [o if o.flags.writeable else np.empty_like(o) for o in olds]
    src = [o.reshape(-1) for o in olds]
    out = [d.reshape(-1) for d in dst]

    def chunks(lo, hi):
        for a in range(lo * _CHUNK, min(n, hi * _CHUNK), _CHUNK):
            b = min(n, a + _CHUNK)
            for o, x in zip(out, step(g[a:b], *(s[a:b] for s in src), *hyper)):
                o[a:b] = x

    parallel_for(-(-n // _CHUNK), chunks, pieces_per_thread=4)
    return dst


# The hottest updates, written straight into their state arrays when all of them may be written.
_IN_PLACE = {
    steps.momentum: steps.momentum_in_place,
    steps.gradient_descent: steps.gradient_descent_in_place,
}


def _compiled(step, dtype: np.dtype, hyper):
    """The compiled loop of an in-place update, when there is one for dtype (and the
    hyperparameters have that dtype, so that the arithmetic is the numpy path's)."""
    if dtype not in jit.FLOATS or any(
        isinstance(h, np.generic) and h.dtype != dtype for h in hyper
    ):
        return None
    loops = jit.loops()
    return None if loops is None else _compiled_steps(loops).get(step)


@functools.cache
def _compiled_steps(loops) -> dict:
    """update step -> its compiled loop, taking (grad, *states, *hyper, lo, hi)."""

    def adam(g, v, m, vv, beta1_power, beta2_power, lr, beta1, beta2, epsilon, nesterov, lo, hi):
        # The scalars as steps.adam computes them, by numpy; the loop does the elementwise part.
        alpha = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
        loops.adam(g, v, m, vv, alpha, beta1, 1 - beta1, 1 - beta2, epsilon, nesterov, lo, hi)

    return {
        steps.momentum: loops.momentum,
        steps.gradient_descent: loops.gradient_descent,
        steps.adagrad: loops.adagrad,
        steps.adagrad_v2: loops.adagrad_v2,
        steps.adam: adam,
    }


def _into(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """`new`, copied into `old` when that one may be written (saves the allocation's pages)."""
    if old.flags.writeable and new is not old:
        np.copyto(old, new)
        return old
    return new


def _passes(indices: np.ndarray):
    """Positions into `indices` for each pass: one pass (None: all of them) when the indices
    are distinct, else pass k holds the k-th occurrence of every index, in order."""
    n = indices.shape[0]
    if n < 2:
        return (None,)
    order = np.argsort(indices, kind="stable")
    s = indices[order]
    repeat = s[1:] == s[:-1]
    if not repeat.any():
        return (None,)
    starts = np.flatnonzero(np.concatenate(([True], ~repeat)))
    rank_sorted = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    rank = np.empty(n, np.intp)
    rank[order] = rank_sorted
    return [np.flatnonzero(rank == k) for k in range(int(rank_sorted.max()) + 1)]


def _sparse(ctx, t, handles, names, grad, indices, step, hyper) -> None:
    vs = _vars(ctx, t, handles, names)

    def update(*olds):
        var = olds[0]
        if var.ndim == 0:
            raise InvalidArgumentError(
                f"var must be at least 1 dimensional (variable {vs[0].name!r} is a scalar)"
            )
        _check_slots(olds, names, vs[0])
        if indices.ndim != 1:
            raise InvalidArgumentError(
                f"indices must be one-dimensional, got shape {TensorShape(indices.shape)}"
            )
        if grad.ndim == 0 or grad.shape[0] != indices.shape[0]:
            raise InvalidArgumentError(
                "grad must be the same size as indices in the first dimension: grad has shape "
                f"{TensorShape(grad.shape)}, indices {TensorShape(indices.shape)}"
            )
        if grad.shape[1:] != var.shape[1:]:
            raise InvalidArgumentError(
                "var and grad must match in every dimension after the first: var has shape "
                f"{TensorShape(var.shape)}, grad {TensorShape(grad.shape)}"
            )
        n = indices.shape[0]
        if n == 0:
            return olds
        rows = var.shape[0]
        if indices.min() < 0 or indices.max() >= rows:
            i = int(np.argmax((indices < 0) | (indices >= rows)))
            raise InvalidArgumentError(
                f"Index {int(indices[i])} at offset {i} in indices is out of range: variable "
                f"{vs[0].name!r} has {rows} rows"
            )
        news = list(olds)
        for pos in _passes(indices):
            idx, g = (indices, grad) if pos is None else (indices[pos], grad[pos])
            before = [x[idx] for x in news]
            after = step(g, *before, *hyper)
            for k, (b, a) in enumerate(zip(before, after)):
                if a is not b:
                    if news[k] is olds[k] and not olds[k].flags.writeable:
                        news[k] = olds[k].copy()  # a reader holds the value: copy on write
                    news[k][idx] = a
        return news

    # Every check above runs before the first write, so the rows can be written in place when
    # nothing but the variable refers to its value: a sparse step costs O(rows touched), not
    # O(rows of the variable).
    update_vars(vs, update, in_place=True)


# -- dense kernels ------------------------------------------------------------------------------

_GD = ("var",)
_ACCUM = ("var", "accum")
_ADADELTA = ("var", "accum", "accum_update")
_RMS = ("var", "ms", "mom")
_CENTERED = ("var", "mg", "ms", "mom")
_ADAM = ("var", "m", "v")
_FTRL = ("var", "accum", "linear")


@register_kernel("ResourceApplyGradientDescent", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_gradient_descent(T):
    def compute(ctx, var, alpha, delta):
        hyper = (_scalar(alpha, "alpha"),)
        _dense(ctx, T, (var,), _GD, "delta", delta, steps.gradient_descent, hyper)

    return compute


def _momentum_kernel(step):
    def factory(T, use_nesterov):
        def compute(ctx, var, accum, lr, grad, momentum):
            hyper = (_scalar(lr, "lr"), _scalar(momentum, "momentum"), use_nesterov)
            _dense(ctx, T, (var, accum), _ACCUM, "grad", grad, step, hyper)

        return compute

    return factory


register_kernel("ResourceApplyMomentum", context=True, constraints=_FLOAT_COMPLEX)(
    _momentum_kernel(steps.momentum)
)
register_kernel("ResourceApplyKerasMomentum", context=True, constraints=_FLOAT_COMPLEX)(
    _momentum_kernel(steps.keras_momentum)
)


@register_kernel("ResourceApplyAdagrad", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_adagrad(T, update_slots):
    def compute(ctx, var, accum, lr, grad):
        hyper = (_scalar(lr, "lr"), update_slots)
        _dense(ctx, T, (var, accum), _ACCUM, "grad", grad, steps.adagrad, hyper)

    return compute


@register_kernel("ResourceApplyAdagradV2", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_adagrad_v2(T, update_slots):
    def compute(ctx, var, accum, lr, epsilon, grad):
        hyper = (_scalar(lr, "lr"), _scalar(epsilon, "epsilon"), update_slots)
        _dense(ctx, T, (var, accum), _ACCUM, "grad", grad, steps.adagrad_v2, hyper)

    return compute


@register_kernel("ResourceApplyAdadelta", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_adadelta(T):
    def compute(ctx, var, accum, accum_update, lr, rho, epsilon, grad):
        hyper = (_scalar(lr, "lr"), _scalar(rho, "rho"), _scalar(epsilon, "epsilon"))
        _dense(ctx, T, (var, accum, accum_update), _ADADELTA, "grad", grad, steps.adadelta, hyper)

    return compute


def _rms_hyper(lr, rho, momentum, epsilon) -> tuple:
    return (
        _scalar(lr, "lr"),
        _scalar(rho, "rho"),
        _scalar(momentum, "momentum"),
        _scalar(epsilon, "epsilon"),
    )


@register_kernel("ResourceApplyRMSProp", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_rms_prop(T):
    def compute(ctx, var, ms, mom, lr, rho, momentum, epsilon, grad):
        hyper = _rms_hyper(lr, rho, momentum, epsilon)
        _dense(ctx, T, (var, ms, mom), _RMS, "grad", grad, steps.rms_prop, hyper)

    return compute


@register_kernel("ResourceApplyCenteredRMSProp", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_centered_rms_prop(T):
    def compute(ctx, var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
        hyper = _rms_hyper(lr, rho, momentum, epsilon)
        _dense(ctx, T, (var, mg, ms, mom), _CENTERED, "grad", grad, steps.centered_rms_prop, hyper)

    return compute


@register_kernel("ResourceApplyAdam", context=True, constraints=_FLOAT_COMPLEX)
def resource_apply_adam(T, use_nesterov):
    names = ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon")

    def compute(ctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        scalars = (beta1_power, beta2_power, lr, beta1, beta2, epsilon)
        hyper = (*(_scalar(x, n) for x, n in zip(scalars, names)), use_nesterov)
        _dense(ctx, T, (var, m, v), _ADAM, "grad", grad, steps.adam, hyper)

    return compute


def _ftrl_hyper(lr, l1, l2, l2_shrinkage, lr_power, multiply_linear_by_lr) -> tuple:
    lr = _scalar(lr, "lr")
    if not (lr > 0 or (multiply_linear_by_lr and lr >= 0)):
        raise InvalidArgumentError(
            f"lr is not a positive scalar (or zero if multiply_linear_by_lr is set): {lr}"
        )
    l1, l2 = _scalar(l1, "l1"), _scalar(l2, "l2")
    if l1 < 0:
        raise InvalidArgumentError(f"l1 regularization strength is not a non-negative scalar: {l1}")
    if l2 < 0:
        raise InvalidArgumentError(f"l2 regularization strength is not a non-negative scalar: {l2}")
    if l2_shrinkage is not None:
        l2_shrinkage = _scalar(l2_shrinkage, "l2_shrinkage")
        if l2_shrinkage < 0:
            raise InvalidArgumentError(
                f"l2 shrinkage regularization strength is not a non-negative scalar: {l2_shrinkage}"
            )
    lr_power = _scalar(lr_power, "lr_power")
    if lr_power > 0:
        raise InvalidArgumentError(f"lr_power is not a non-positive scalar: {lr_power}")
    return lr, l1, l2, l2_shrinkage, lr_power, multiply_linear_by_lr


@register_kernel("ResourceApplyFtrl", context=True, constraints=_REAL)
def resource_apply_ftrl(T, multiply_linear_by_lr):
    def compute(ctx, var, accum, linear, grad, lr, l1, l2, lr_power):
        hyper = _ftrl_hyper(lr, l1, l2, None, lr_power, multiply_linear_by_lr)
        _dense(ctx, T, (var, accum, linear), _FTRL, "grad", grad, steps.ftrl, hyper)

    return compute


@register_kernel("ResourceApplyFtrlV2", context=True, constraints=_REAL)
def resource_apply_ftrl_v2(T, multiply_linear_by_lr):
    def compute(ctx, var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power):
        hyper = _ftrl_hyper(lr, l1, l2, l2_shrinkage, lr_power, multiply_linear_by_lr)
        _dense(ctx, T, (var, accum, linear), _FTRL, "grad", grad, steps.ftrl, hyper)

    return compute


# -- sparse kernels -----------------------------------------------------------------------------


@register_kernel("ResourceSparseApplyAdagrad", context=True, constraints=_FLOAT_COMPLEX)
def resource_sparse_apply_adagrad(T, update_slots):
    def compute(ctx, var, accum, lr, grad, indices):
        hyper = (_scalar(lr, "lr"), update_slots)
        _sparse(ctx, T, (var, accum), _ACCUM, grad, indices, steps.adagrad, hyper)

    return compute


@register_kernel("ResourceSparseApplyAdagradV2", context=True, constraints=_FLOAT_COMPLEX)
def resource_sparse_apply_adagrad_v2(T, update_slots):
    def compute(ctx, var, accum, lr, epsilon, grad, indices):
        hyper = (_scalar(lr, "lr"), _scalar(epsilon, "epsilon"), update_slots)
        _sparse(ctx, T, (var, accum), _ACCUM, grad, indices, steps.adagrad_v2, hyper)

    return compute


def _sparse_momentum_kernel(step):
    def factory(T, use_nesterov):
        def compute(ctx, var, accum, lr, grad, indices, momentum):
            hyper = (_scalar(lr, "lr"), _scalar(momentum, "momentum"), use_nesterov)
            _sparse(ctx, T, (var, accum), _ACCUM, grad, indices, step, hyper)

        return compute

    return factory


register_kernel("ResourceSparseApplyMomentum", context=True, constraints=_FLOAT_COMPLEX)(
    _sparse_momentum_kernel(steps.momentum)
)
register_kernel("ResourceSparseApplyKerasMomentum", context=True, constraints=_FLOAT_COMPLEX)(
    _sparse_momentum_kernel(steps.keras_momentum)
)


@register_kernel("ResourceSparseApplyAdadelta", context=True, constraints=_FLOAT_COMPLEX)
def resource_sparse_apply_adadelta(T):
    def compute(ctx, var, accum, accum_update, lr, rho, epsilon, grad, indices):
        hyper = (_scalar(lr, "lr"), _scalar(rho, "rho"), _scalar(epsilon, "epsilon"))
        _sparse(ctx, T, (var, accum, accum_update), _ADADELTA, grad, indices, steps.adadelta, hyper)

    return compute


@register_kernel("ResourceSparseApplyRMSProp", context=True, constraints=_FLOAT_COMPLEX)
def resource_sparse_apply_rms_prop(T):
    def compute(ctx, var, ms, mom, lr, rho, momentum, epsilon, grad, indices):
        hyper = _rms_hyper(lr, rho, momentum, epsilon)
        _sparse(ctx, T, (var, ms, mom), _RMS, grad, indices, steps.rms_prop, hyper)

    return compute


@register_kernel("ResourceSparseApplyCenteredRMSProp", context=True, constraints=_FLOAT_COMPLEX)
def resource_sparse_apply_centered_rms_prop(T):
    def compute(ctx, var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices):
        hyper = _rms_hyper(lr, rho, momentum, epsilon)
        handles = (var, mg, ms, mom)
        _sparse(ctx, T, handles, _CENTERED, grad, indices, steps.centered_rms_prop, hyper)

    return compute


@register_kernel("ResourceSparseApplyFtrl", context=True, constraints=_SPARSE_FTRL)
def resource_sparse_apply_ftrl(T, multiply_linear_by_lr):
    def compute(ctx, var, accum, linear, grad, indices, lr, l1, l2, lr_power):
        hyper = _ftrl_hyper(lr, l1, l2, None, lr_power, multiply_linear_by_lr)
        _sparse(ctx, T, (var, accum, linear), _FTRL, grad, indices, steps.ftrl, hyper)

    return compute


@register_kernel("ResourceSparseApplyFtrlV2", context=True, constraints=_SPARSE_FTRL)
def resource_sparse_apply_ftrl_v2(T, multiply_linear_by_lr):
    def compute(ctx, var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power):
        hyper = _ftrl_hyper(lr, l1, l2, l2_shrinkage, lr_power, multiply_linear_by_lr)
        _sparse(ctx, T, (var, accum, linear), _FTRL, grad, indices, steps.ftrl, hyper)

    return compute
