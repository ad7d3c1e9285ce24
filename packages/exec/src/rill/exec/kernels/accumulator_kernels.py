"""Kernels for rill.graph.ops.accumulator_ops: accumulators in the device's ResourceMgr.

The TF1 reference form's handle is a 2-element string vector (container, name), as in
TensorFlow; the resource form's is a ResourceHandle. TakeGradient may wait for other replicas,
so it is registered blocking (a thread of its own) and waits in slices that check the step's
cancellation and deadline.
"""

from __future__ import annotations

import numpy as np

from rill.exec.accumulators import (
    AccumulatorBase,
    ConditionalAccumulator,
    SparseConditionalAccumulator,
)
from rill.exec.kernel_registry import register_kernel
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.graph.errors import InvalidArgumentError


def _creator(kind, resource: bool):
    def factory(dtype, shape, container, shared_name, reduction_type, node, device):
        name = shared_name or node.name
        if resource:
            handle = handle_array(ResourceHandle(device.name, container, name, "Accumulator"))
        else:
            handle = np.array([container, name], dtype=object)
        want = kind(name, dtype, shape, reduction_type).signature()

        def compute(ctx):
            acc = ctx.resources.lookup_or_create(
                container, name, lambda: kind(name, dtype, shape, reduction_type)
            )
            got = acc.signature() if hasattr(acc, "signature") else type(acc).__name__
            if got != want:
                raise InvalidArgumentError(
                    f"shared accumulator {name!r} already exists as {got}, but this op asks "
                    f"for {want}"
                )
            return handle

        return compute

    return factory


register_kernel("ConditionalAccumulator", context=True)(_creator(ConditionalAccumulator, False))
register_kernel("ResourceConditionalAccumulator", context=True)(
    _creator(ConditionalAccumulator, True)
)
register_kernel("SparseConditionalAccumulator", context=True)(
    _creator(SparseConditionalAccumulator, False)
)


def _lookup(ctx, handle, cls):
    if isinstance(handle, np.ndarray) and handle.dtype == object and handle.shape == (2,):
        container, name = (x.decode() if isinstance(x, bytes) else str(x) for x in handle)
    else:
        h = handle_of(handle)
        container, name = h.container, h.name
    return ctx.resources.lookup(container, name, cls)


def _scalar(value, what: str) -> int:
    if np.ndim(value) != 0:
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {np.shape(value)}")
    return int(value)


for _prefix in ("", "Resource"):

    @register_kernel(f"{_prefix}AccumulatorApplyGradient", context=True)
    def _apply(dtype):
        def compute(ctx, handle, local_step, grad):
            acc = _lookup(ctx, handle, ConditionalAccumulator)
            acc.apply(_scalar(local_step, "local_step"), grad)

        return compute

    @register_kernel(f"{_prefix}AccumulatorTakeGradient", context=True, blocking=True)
    def _take(dtype):
        def compute(ctx, handle, num_required):
            acc = _lookup(ctx, handle, ConditionalAccumulator)
            return acc.take(_scalar(num_required, "num_required"), ctx)

        return compute

    @register_kernel(f"{_prefix}AccumulatorSetGlobalStep", context=True)
    def _set_step():
        def compute(ctx, handle, new_global_step):
            acc = _lookup(ctx, handle, AccumulatorBase)
            acc.set_global_step(_scalar(new_global_step, "new_global_step"))

        return compute

    @register_kernel(f"{_prefix}AccumulatorNumAccumulated", context=True)
    def _num():
        def compute(ctx, handle):
            acc = _lookup(ctx, handle, AccumulatorBase)
            return np.array(acc.num_accumulated(), np.int32)

        return compute


@register_kernel("_AccumulatorNumDropped", context=True)
def _num_dropped():
    def compute(ctx, handle):
        acc = _lookup(ctx, handle, AccumulatorBase)
        return np.array(acc.num_dropped, np.int64)

    return compute


@register_kernel("SparseAccumulatorApplyGradient", context=True)
def _sparse_apply(dtype, has_known_shape):
    def compute(ctx, handle, local_step, indices, values, shape):
        acc = _lookup(ctx, handle, SparseConditionalAccumulator)
        if np.ndim(indices) != 1:
            raise InvalidArgumentError(
                f"gradient_indices must be a vector, got shape {np.shape(indices)}"
            )
        acc.apply(
            _scalar(local_step, "local_step"), indices, values, shape if has_known_shape else None
        )

    return compute


@register_kernel("SparseAccumulatorTakeGradient", context=True, blocking=True)
def _sparse_take(dtype):
    def compute(ctx, handle, num_required):
        acc = _lookup(ctx, handle, SparseConditionalAccumulator)
        return list(acc.take(_scalar(num_required, "num_required"), ctx))

    return compute
