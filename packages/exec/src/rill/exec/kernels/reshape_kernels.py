"""Kernels for rill.graph.ops.reshape_ops: Reshape, ExpandDims, Squeeze, ConcatV2, ConcatOffset,
Split, SplitV, Pack, Unpack and Transpose. Reshape and the splits return views of their input.
"""

from __future__ import annotations

import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.array_kernels import (
    check_axis,
    fmt_shape,
    host_ints,
    outputs,
    scalar_arg,
    vector_arg,
)
from rill.graph.errors import InvalidArgumentError

_BOTH = ("CPU", "GPU")


# -- reshaping -------------------------------------------------------------------------------------


def reshape_target(in_shape: tuple, sizes: list[int]) -> tuple[int, ...]:
    """TensorFlow's Reshape size rule, including its -1 inference for empty tensors."""
    n_in = math.prod(int(d) for d in in_shape)
    unknown = -1
    known = 1
    for i, s in enumerate(sizes):
        if s == -1:
            if unknown != -1:
                raise InvalidArgumentError(
                    f"only one size may be -1, not both {unknown} and {i} (shape {sizes})"
                )
            unknown = i
        elif s < 0:
            raise InvalidArgumentError(f"size {i} must be non-negative, not {s} (shape {sizes})")
        else:
            known *= s
    out = list(sizes)
    if unknown != -1:
        if known > 0:
            if n_in % known:
                raise InvalidArgumentError(
                    f"input to reshape is a tensor with {n_in} values, but the requested shape "
                    f"{sizes} requires a multiple of {known}"
                )
            out[unknown] = n_in // known
        else:
            # With a zero in the target, -1 is the ratio of the non-zero sizes, as in TensorFlow.
            nz_in = int(np.prod([d for d in in_shape if d], dtype=np.int64))
            nz_out = int(np.prod([s for s in sizes if s > 0], dtype=np.int64))
            out[unknown] = nz_in // nz_out
    n_out = math.prod(out)
    if n_out != n_in:
        raise InvalidArgumentError(
            f"input to reshape is a tensor with {n_in} values, but the requested shape "
            f"{sizes} has {n_out}"
        )
    return tuple(out)


@register_kernel("Reshape", devices=_BOTH)
def reshape():
    def compute(x, sizes):
        if sizes.ndim != 1:
            raise InvalidArgumentError(f"shape must be 1-D, not {fmt_shape(sizes.shape)}")
        return x.reshape(reshape_target(x.shape, host_ints(sizes)))

    return compute


@register_kernel("ExpandDims", devices=_BOTH)
def expand_dims(xp):
    def compute(x, dim):
        if dim.size != 1:
            raise InvalidArgumentError(
                f"'dim' must hold a single value, got shape {fmt_shape(dim.shape)}"
            )
        d = host_ints(dim)[0]
        r = x.ndim
        if not -r - 1 <= d <= r:
            raise InvalidArgumentError(
                f"cannot insert a dimension at {d} into a tensor of rank {r} "
                f"(valid: [{-r - 1}, {r}])"
            )
        return xp.expand_dims(x, d + r + 1 if d < 0 else d)

    return compute


@register_kernel("Squeeze", devices=_BOTH)
def squeeze(squeeze_dims, xp):
    def compute(x):
        r = x.ndim
        if squeeze_dims:
            axes = set()
            for d in squeeze_dims:
                a = check_axis(d, r, "squeeze dim")
                if x.shape[a] != 1:
                    raise InvalidArgumentError(
                        f"cannot squeeze dim {a} of shape {fmt_shape(x.shape)}: its size is "
                        f"{x.shape[a]}, not 1"
                    )
                axes.add(a)
        else:
            axes = {i for i, d in enumerate(x.shape) if d == 1}
        return xp.squeeze(x, axis=tuple(sorted(axes))) if axes else x

    return compute


# -- joining and splitting -----------------------------------------------------------------------


@register_kernel("ConcatV2", devices=_BOTH)
def concat_v2(xp):
    def compute(*args):
        values, axis = args[:-1], scalar_arg(args[-1], "axis")
        first = values[0]
        r = first.ndim
        if r == 0:
            raise InvalidArgumentError("cannot concatenate scalars (use stack instead)")
        a = check_axis(axis, r)
        for k, v in enumerate(values[1:], 1):
            if v.ndim != r:
                raise InvalidArgumentError(
                    f"ranks of all inputs must match: values[0] has shape "
                    f"{fmt_shape(first.shape)}, values[{k}] has shape {fmt_shape(v.shape)}"
                )
            for i in range(r):
                if i != a and v.shape[i] != first.shape[i]:
                    raise InvalidArgumentError(
                        f"dimension {i} must be equal in all inputs: values[0] has shape "
                        f"{fmt_shape(first.shape)}, values[{k}] has shape {fmt_shape(v.shape)}"
                    )
        return xp.concatenate(values, axis=a)

    return compute


@register_kernel("ConcatOffset", devices=_BOTH)
def concat_offset(shape_type, xp):
    dt = shape_type.np

    def compute(concat_dim, *shapes):
        dims = [vector_arg(s, f"shape[{k}]") for k, s in enumerate(shapes)]
        r = len(dims[0])
        axis = scalar_arg(concat_dim, "concat_dim")
        if not -r <= axis < r:
            raise InvalidArgumentError(f"concat_dim {axis} is out of range [{-r}, {r})")
        axis %= r
        offsets, pos = [], 0
        for k, d in enumerate(dims):
            if len(d) != r or any(d[i] != dims[0][i] for i in range(r) if i != axis):
                raise InvalidArgumentError(
                    f"all dimensions except {axis} must match: shape[{k}] = {fmt_shape(d)} vs "
                    f"shape[0] = {fmt_shape(dims[0])}"
                )
            off = [0] * r
            off[axis] = pos
            pos += d[axis]
            offsets.append(xp.asarray(off, dtype=dt))
        return outputs(offsets)

    return compute


@register_kernel("Split", devices=_BOTH)
def split(num_split, xp):
    def compute(split_dim, value):
        r = value.ndim
        a = scalar_arg(split_dim, "split_dim")
        if not -r <= a < r:
            raise InvalidArgumentError(f"split_dim {a} is out of range [{-r}, {r})")
        a %= r
        if value.shape[a] % num_split:
            raise InvalidArgumentError(
                f"cannot split dimension {a} of shape {fmt_shape(value.shape)} evenly into "
                f"{num_split} pieces"
            )
        return outputs(xp.split(value, num_split, axis=a))

    return compute


@register_kernel("SplitV", devices=_BOTH)
def split_v(num_split, xp):
    def compute(value, size_splits, split_dim):
        r = value.ndim
        a = scalar_arg(split_dim, "split_dim")
        if not -r <= a < r:
            raise InvalidArgumentError(f"split_dim {a} is out of range [{-r}, {r})")
        a %= r
        sizes = vector_arg(size_splits, "size_splits")
        if len(sizes) != num_split:
            raise InvalidArgumentError(
                f"size_splits has {len(sizes)} entries but there are {num_split} outputs"
            )
        if sizes.count(-1) > 1:
            raise InvalidArgumentError(f"size_splits {sizes} has more than one -1")
        for i, s in enumerate(sizes):
            if s < -1:
                raise InvalidArgumentError(f"size_splits[{i}] = {s} must be >= 0")
        d = value.shape[a]
        if num_split == 1 and sizes[0] != d:
            # TensorFlow does not infer a lone -1 here.
            raise InvalidArgumentError(
                f"with one output, size_splits must be [{d}] (the size of dimension {a}), "
                f"got {sizes}"
            )
        known = sum(s for s in sizes if s != -1)
        if (-1 in sizes and known > d) or (-1 not in sizes and known != d):
            raise InvalidArgumentError(
                f"size_splits {sizes} must sum to dimension {a} of shape "
                f"{fmt_shape(value.shape)} ({d}), or stay below it when one size is -1"
            )
        sizes = [d - known if s == -1 else s for s in sizes]
        bounds = np.cumsum(sizes)[:-1].tolist()
        return outputs(xp.split(value, bounds, axis=a))

    return compute


@register_kernel("Pack", devices=_BOTH)
def pack(axis, xp):
    def compute(*values):
        first = values[0]
        for k, v in enumerate(values[1:], 1):
            if v.shape != first.shape:
                raise InvalidArgumentError(
                    f"shapes of all inputs must match: values[0].shape = "
                    f"{fmt_shape(first.shape)} != values[{k}].shape = {fmt_shape(v.shape)}"
                )
        return xp.stack(values, axis=check_axis(axis, first.ndim + 1))

    return compute


@register_kernel("Unpack", devices=_BOTH)
def unpack(num, axis, xp):
    def compute(value):
        a = check_axis(axis, value.ndim)
        if value.shape[a] != num:
            raise InvalidArgumentError(
                f"dimension {a} of shape {fmt_shape(value.shape)} must equal num={num}"
            )
        moved = xp.moveaxis(value, a, 0)
        return outputs(moved[i] for i in range(num))

    return compute


@register_kernel("Transpose", devices=_BOTH)
def transpose(xp):
    def compute(x, perm):
        p = vector_arg(perm, "perm")
        r = x.ndim
        if len(p) != r:
            raise InvalidArgumentError(f"perm has {len(p)} entries but the input has rank {r}")
        norm = [v + r if v < 0 else v for v in p]
        if sorted(norm) != list(range(r)):
            raise InvalidArgumentError(f"perm {p} is not a permutation of 0..{r - 1}")
        return xp.transpose(x, norm)

    return compute
