"""Kernels for rill.graph.ops.array_ops: constants, identity, shapes, filling and broadcasting,
and the small helpers the other array-family kernel modules (reshape_kernels, slice_kernels,
gather_kernels) share.

Small integer arguments (shapes, axes, permutations) are read on the host with `host_ints`;
TensorFlow keeps them in host memory too.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

_BOTH = ("CPU", "GPU")


def host_ints(a) -> list[int]:
    """The elements of a small integer array as Python ints (works for numpy and cupy)."""
    if type(a) is np.ndarray:
        return [int(v) for v in a.reshape(-1).tolist()]
    return [int(v) for v in np.asarray(a.tolist() if hasattr(a, "tolist") else a).reshape(-1)]


def fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def zeros(xp, shape, dtype):
    """Zeros of `dtype`; empty byte strings for string (object) tensors."""
    if np.dtype(dtype) == object:
        return np.full(shape, b"", dtype=object)
    return xp.zeros(shape, dtype=dtype)


def outputs(values):
    """A kernel's return value for a list output: the array itself when there is only one."""
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def check_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise InvalidArgumentError(
            f"{what} {axis} is out of range [{-rank}, {rank}) for a tensor of rank {rank}"
        )
    return axis % rank


def vector_arg(a, name: str) -> list[int]:
    if a.ndim != 1:
        raise InvalidArgumentError(f"{name} must be a vector, got shape {fmt_shape(a.shape)}")
    return host_ints(a)


def scalar_arg(a, name: str) -> int:
    if a.size != 1 or a.ndim > 1:
        raise InvalidArgumentError(f"{name} must be a scalar, got shape {fmt_shape(a.shape)}")
    return host_ints(a)[0]


@register_kernel("Const", devices=_BOTH)
def const(value, device):
    v = device.from_host(value)

    def compute():
        return v

    return compute


@register_kernel("Identity", devices=_BOTH)
def identity():
    def compute(x):
        return x

    return compute


@register_kernel("StopGradient", devices=_BOTH)
def stop_gradient():
    def compute(x):
        return x

    return compute


@register_kernel("PlaceholderWithDefault", devices=_BOTH)
def placeholder_with_default():
    # A fed value replaces the op's output before it runs; unfed, it passes `input` through.
    def compute(x):
        return x

    return compute


@register_kernel("IdentityN", devices=_BOTH)
def identity_n():
    def compute(*xs):
        return outputs(xs)

    return compute


@register_kernel("NoOp", devices=_BOTH)
def no_op():
    def compute():
        return None

    return compute


# -- shape, size, rank ---------------------------------------------------------------------------


def _shape_vector(xp, dims, dtype):
    if dtype == np.int32 and any(d > np.iinfo(np.int32).max for d in dims):
        raise InvalidArgumentError(f"shape {fmt_shape(dims)} does not fit in int32; use int64")
    return xp.asarray(list(dims), dtype=dtype)


@register_kernel("Shape", devices=_BOTH)
def shape(out_type, xp):
    dt = out_type.np

    def compute(x):
        return _shape_vector(xp, x.shape, dt)

    return compute


@register_kernel("ShapeN", devices=_BOTH)
def shape_n(out_type, xp):
    dt = out_type.np

    def compute(*xs):
        return outputs(_shape_vector(xp, x.shape, dt) for x in xs)

    return compute


@register_kernel("Size", devices=_BOTH)
def size(out_type, xp):
    dt = out_type.np

    def compute(x):
        if dt == np.int32 and x.size > np.iinfo(np.int32).max:
            raise InvalidArgumentError(f"size {x.size} does not fit in int32; use int64")
        return xp.asarray(x.size, dtype=dt)

    return compute


@register_kernel("Rank", devices=_BOTH)
def rank(xp):
    def compute(x):
        return xp.asarray(x.ndim, dtype=np.int32)

    return compute


# -- permutations, filling and broadcasting ----------------------------------------------------


@register_kernel("InvertPermutation", devices=_BOTH)
def invert_permutation(xp):
    def compute(x):
        if x.ndim != 1:
            raise InvalidArgumentError(f"x must be a vector, got shape {fmt_shape(x.shape)}")
        n = x.shape[0]
        if n == 0:
            return x.copy()
        bad = (x < 0) | (x >= n)
        if bool(bad.any()):
            v = int(x[int(xp.argmax(bad))])
            raise InvalidArgumentError(f"{v} is not between 0 and {n}")
        counts = xp.bincount(x.astype(np.int64), minlength=n)
        if bool((counts > 1).any()):
            raise InvalidArgumentError(f"{int(xp.argmax(counts > 1))} is duplicated in the input")
        y = xp.empty_like(x)
        y[x] = xp.arange(n, dtype=x.dtype)
        return y

    return compute


@register_kernel("Fill", devices=_BOTH)
def fill(xp):
    def compute(dims, value):
        d = vector_arg(dims, "dims")
        for i, s in enumerate(d):
            if s < 0:
                raise InvalidArgumentError(f"dims[{i}] = {s} must be >= 0")
        if value.size != 1 or value.ndim > 1:
            raise InvalidArgumentError(f"value must be a scalar, got shape {value.shape}")
        if value.dtype == object:
            return np.full(d, value.reshape(())[()], dtype=object)
        return xp.full(d, value.reshape(()), dtype=value.dtype)

    return compute


# Variant values (lists, optionals) have their own ZerosLike in list_kernels.
@register_kernel(
    "ZerosLike",
    devices=_BOTH,
    constraints={"T": [t for t in dtypes.ALL_TYPES if t is not dtypes.variant]},
)
def zeros_like(xp):
    def compute(x):
        return zeros(xp, x.shape, x.dtype)

    return compute


@register_kernel("OnesLike", devices=_BOTH)
def ones_like(xp):
    def compute(x):
        return xp.ones_like(x)

    return compute


@register_kernel("BroadcastTo", devices=_BOTH)
def broadcast_to(xp):
    def compute(x, shape):
        target = vector_arg(shape, "shape")
        if any(d < 0 for d in target):
            raise InvalidArgumentError(f"shape {target} has a negative dimension")
        if x.ndim > len(target):
            raise InvalidArgumentError(
                f"cannot broadcast shape {fmt_shape(x.shape)} to the lower-rank shape "
                f"{fmt_shape(target)}"
            )
        lead = len(target) - x.ndim
        for d, t in zip(x.shape, target[lead:]):
            if d != t and d != 1:
                raise InvalidArgumentError(
                    f"cannot broadcast shape {fmt_shape(x.shape)} to shape {fmt_shape(target)}"
                )
        # Materialized, as TensorFlow does: consumers may expect a writable, dense array.
        return xp.broadcast_to(x, tuple(target)).copy()

    return compute


@register_kernel("BroadcastGradientArgs", devices=_BOTH)
def broadcast_gradient_args(T, xp):
    dt = T.np

    def compute(s0, s1):
        a, b = vector_arg(s0, "s0"), vector_arg(s1, "s1")
        if a == b:
            return xp.zeros([0], dt), xp.zeros([0], dt)
        n = max(len(a), len(b))
        a = [1] * (n - len(a)) + a
        b = [1] * (n - len(b)) + b
        for x, y in zip(a, b):
            if x != y and x != 1 and y != 1:
                raise InvalidArgumentError(
                    f"incompatible shapes for broadcasting: {fmt_shape(s0.tolist())} vs. "
                    f"{fmt_shape(s1.tolist())}"
                )
        r0 = [i for i in range(n) if a[i] == 1]
        r1 = [i for i in range(n) if b[i] == 1]
        return xp.asarray(r0, dtype=dt), xp.asarray(r1, dtype=dt)

    return compute


@register_kernel("BroadcastArgs")
def broadcast_args(T):
    def compute(s0, s1):
        a, b = vector_arg(s0, "s0"), vector_arg(s1, "s1")
        try:
            out = np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise InvalidArgumentError(
                f"incompatible shapes for broadcasting: {fmt_shape(s0.tolist())} vs. "
                f"{fmt_shape(s1.tolist())}"
            ) from None
        return np.asarray(out, dtype=T.np)

    return compute
