"""Kernels for rill.graph.ops.grad_ops: UnsortedSegmentSum and MirrorPadGrad."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.array_kernels import fmt_shape, host_ints, scalar_arg, zeros
from rill.exec.kernels.scatter_rows import add_rows_at
from rill.graph.errors import InvalidArgumentError

_BOTH = ("CPU", "GPU")


# Repeated ids are summed in order (add_rows_at: np.add.at's result); CPU only.
@register_kernel("UnsortedSegmentSum", expensive=True)
def unsorted_segment_sum(xp):
    def compute(data, segment_ids, num_segments):
        n = scalar_arg(num_segments, "num_segments")
        if n < 0:
            raise InvalidArgumentError(f"num_segments must be >= 0, got {n}")
        r = segment_ids.ndim
        if data.shape[:r] != segment_ids.shape:
            raise InvalidArgumentError(
                f"segment_ids of shape {fmt_shape(segment_ids.shape)} must be a prefix of data's "
                f"shape {fmt_shape(data.shape)}"
            )
        rest = data.shape[r:]
        ids = segment_ids.reshape(-1).astype(np.int64)
        too_big = np.flatnonzero(ids >= n)
        if too_big.size:
            i = int(too_big[0])
            where = ",".join(str(int(k)) for k in np.unravel_index(i, segment_ids.shape))
            raise InvalidArgumentError(
                f"segment_ids[{where}] = {int(ids[i])} is out of range [0, {n})"
            )
        out = zeros(xp, (n,) + rest, data.dtype)
        rows = data.reshape((ids.size,) + rest)
        keep = ids >= 0  # as in TensorFlow, slices with a negative id are dropped
        if keep.all():
            add_rows_at(out, ids, rows)
        else:
            add_rows_at(out, ids[keep], rows[keep])
        return out

    return compute


@register_kernel("MirrorPadGrad", devices=_BOTH)
def mirror_pad_grad(mode, xp):
    # REFLECT leaves the edge element out of the mirror, so the mirror starts one further in.
    offset = 1 if mode == "REFLECT" else 0

    def compute(grad, paddings):
        if paddings.ndim != 2 or paddings.shape[1] != 2 or paddings.shape[0] != grad.ndim:
            raise InvalidArgumentError(
                f"paddings must have shape [{grad.ndim}, 2] for an input of shape "
                f"{fmt_shape(grad.shape)}, got {fmt_shape(paddings.shape)}"
            )
        pads = np.asarray(host_ints(paddings), dtype=np.int64).reshape(-1, 2).tolist()
        out = grad
        for axis, ((lo, hi), d) in enumerate(zip(pads, grad.shape)):
            n = d - lo - hi
            if lo < 0 or hi < 0 or n < 0 or lo > n - offset or hi > n - offset:
                raise InvalidArgumentError(
                    f"{mode} paddings [{lo}, {hi}] of dim {axis} do not fit: the gradient has "
                    f"size {d} there, so the input had size {n}, which allows paddings of at "
                    f"most {max(n - offset, 0)}"
                )
            if lo == 0 and hi == 0:
                continue
            g = xp.moveaxis(out, axis, 0)
            core = g[lo : lo + n].copy()
            # Position j of the left border copied input element lo - j - (1 - offset); position
            # k of the right border copied n - 1 - offset - k. Reversed, each is a slice.
            core[offset : offset + lo] += g[:lo][::-1]
            core[n - offset - hi : n - offset] += g[lo + n :][::-1]
            out = xp.moveaxis(core, 0, axis)
        return out if out is not grad else grad.copy()

    return compute
