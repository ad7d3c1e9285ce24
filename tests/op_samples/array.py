"""Gradient samples for the array op family (array_ops, reshape_ops, slice_ops, gather_ops, and
grad_ops' UnsortedSegmentSum and MirrorPadGrad). Integer arguments (shapes, axes, indices) are
fixed values inside `build`."""

import numpy as np

import rill.graph as rg
from op_samples import NO_SAMPLE, rand, sample
from rill.graph.ops import extra_ops, grad_ops


def _distinct(*shape) -> np.ndarray:
    """Values at least 0.1 apart, so finite differences never reorder them (top_k)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(7)
    return (rng.permutation(n) * 0.1 + rng.uniform(0, 0.01, n)).reshape(shape)


# -- identities ---------------------------------------------------------------------------------

sample("Identity", [rand(2, 3)], lambda x: rg.identity(x))
sample("IdentityN", [rand(2), rand(3, 1)], lambda a, b: rg.identity_n([a, b]))
sample("PlaceholderWithDefault", [rand(2, 3)], lambda x: rg.placeholder_with_default(x, [2, 3]))
sample(
    "PlaceholderWithDefault",
    [rand(2, 3)],
    lambda x: rg.placeholder_with_default(x, [None, 3]),
    name="partial_shape",
)

# -- reshaping, joining, splitting --------------------------------------------------------------

sample("Reshape", [rand(2, 3, 4)], lambda x: rg.reshape(x, [4, -1]))
sample("Reshape", [rand(6)], lambda x: rg.reshape(x, [1, 2, 3]), name="to_higher_rank")
sample("ExpandDims", [rand(2, 3)], lambda x: rg.expand_dims(x, 1))
sample("ExpandDims", [rand(2, 3)], lambda x: rg.expand_dims(x, -1), name="negative_axis")
sample("Squeeze", [rand(1, 3, 1, 2)], lambda x: rg.squeeze(x))
sample("Squeeze", [rand(1, 3, 1, 2)], lambda x: rg.squeeze(x, [2]), name="one_axis")
sample("ConcatV2", [rand(2, 3), rand(2, 1), rand(2, 2)], lambda a, b, c: rg.concat([a, b, c], 1))
sample("ConcatV2", [rand(1, 3), rand(2, 3)], lambda a, b: rg.concat([a, b], -2), name="axis_neg")
sample("ConcatV2", [rand(2, 2, 2), rand(2, 2, 2)], lambda a, b: rg.concat([a, b], 2), name="last")
sample("Split", [rand(4, 6)], lambda x: rg.split(x, 3, axis=1))
sample("Split", [rand(4, 6)], lambda x: rg.split(x, 2, axis=0)[1], name="one_output_used")
sample("SplitV", [rand(5, 2)], lambda x: rg.split(x, [1, -1, 2], axis=0))
sample("SplitV", [rand(2, 5)], lambda x: rg.split(x, [3, 2], axis=-1)[0], name="one_used")
sample("Pack", [rand(2, 3), rand(2, 3)], lambda a, b: rg.stack([a, b], axis=1))
sample("Pack", [rand(2), rand(2), rand(2)], lambda a, b, c: rg.stack([a, b, c], -1), name="last")
sample("Unpack", [rand(3, 2, 4)], lambda x: rg.unstack(x, axis=1))
sample("Unpack", [rand(3, 2)], lambda x: rg.unstack(x)[2], name="one_output_used")
sample("Transpose", [rand(2, 3, 4)], lambda x: rg.transpose(x, [2, 0, 1]))
sample("Transpose", [rand(2, 3)], lambda x: rg.transpose(x), name="reverse")

# -- filling and broadcasting -------------------------------------------------------------------

sample("Fill", [rand()], lambda v: rg.fill([2, 3], v))
sample("BroadcastTo", [rand(3, 1)], lambda x: rg.broadcast_to(x, [2, 3, 4]))
sample("BroadcastTo", [rand(2, 3)], lambda x: rg.broadcast_to(x, [2, 3]), name="same_shape")
sample("BroadcastTo", [rand(1, 1)], lambda x: rg.broadcast_to(x, [3, 1]), name="keeps_ones")

# -- slicing, padding, tiling, reversing --------------------------------------------------------

sample("Slice", [rand(4, 5)], lambda x: rg.slice(x, [1, 2], [2, -1]))
sample("Slice", [rand(3, 2, 4)], lambda x: rg.slice(x, [0, 1, 1], [3, 1, 2]), name="rank3")
sample("StridedSlice", [rand(3, 4, 5)], lambda x: x[1:, ..., None, ::-2])
sample("StridedSlice", [rand(3, 4, 5)], lambda x: x[0, :, 3], name="shrink")
sample("StridedSlice", [rand(5, 4)], lambda x: x[::2, 1:3], name="strided")
sample(
    "StridedSliceGrad",
    [rand(2, 4, 1, 3)],
    lambda dy: rg.strided_slice_grad(
        [3, 4, 5],
        [1, 0, 0, 0],
        [0, 0, 0, 0],
        [1, 1, 1, -2],
        dy,
        begin_mask=8,
        end_mask=9,
        ellipsis_mask=2,
        new_axis_mask=4,
    ),  # fmt: skip
)
sample("Tile", [rand(2, 3)], lambda x: rg.tile(x, [2, 1]))
sample("Tile", [rand(2, 1, 2)], lambda x: rg.tile(x, [2, 3, 1]), name="rank3")
sample("Pad", [rand(2, 3)], lambda x: rg.pad(x, [[1, 0], [2, 1]]))
sample("PadV2", [rand(2, 3)], lambda x: rg.pad(x, [[0, 1], [1, 1]], constant_values=1.5))
sample("MirrorPad", [rand(3, 4)], lambda x: rg.pad(x, [[1, 1], [2, 0]], "REFLECT"))
sample(
    "MirrorPad", [rand(3, 4)], lambda x: rg.pad(x, [[2, 1], [0, 3]], "SYMMETRIC"), name="symmetric"
)
sample("MirrorPadGrad", [rand(5, 4)], lambda g: grad_ops.mirror_pad_grad(g, [[1, 1], [0, 1]],
                                                                          "REFLECT"))  # fmt: skip
sample(
    "MirrorPadGrad",
    [rand(6, 4)],
    lambda g: grad_ops.mirror_pad_grad(g, [[2, 1], [1, 0]], "SYMMETRIC"),
    name="symmetric",
)
sample("ReverseV2", [rand(2, 3, 4)], lambda x: rg.reverse(x, [0, 2]))
sample("ReverseV2", [rand(2, 3)], lambda x: rg.reverse(x, [-1]), name="negative_axis")

# -- gathers, scatters, partitions --------------------------------------------------------------

sample("GatherV2", [rand(5, 3)], lambda p: rg.gather(p, [[0, 2], [4, 0]]))
sample("GatherV2", [rand(2, 4, 3)], lambda p: rg.gather(p, [3, 1, 3], axis=1), name="axis1")
sample("GatherV2", [rand(2, 4)], lambda p: rg.gather(p, [[1], [3]], axis=-1), name="axis_neg")
sample(
    "GatherV2",
    [rand(2, 4, 3)],
    lambda p: rg.gather(p, [[0, 3], [1, 1]], axis=1, batch_dims=1),
    name="batch_dims",
)
sample(
    "GatherV2",
    [rand(2, 3, 4)],
    lambda p: rg.gather(p, [[0, 3, 3], [1, 1, 2]], axis=2, batch_dims=1),
    name="batch_dims_axis2",
)
sample("GatherNd", [rand(3, 4)], lambda p: rg.gather_nd(p, [[0, 1], [2, 3], [0, 1]]))
sample("GatherNd", [rand(3, 4)], lambda p: rg.gather_nd(p, [[1], [0], [1]]), name="rows")
sample("GatherNd", [rand(2, 3, 4)], lambda p: rg.gather_nd(p, [[[1, 2]], [[0, 0]]]), name="deep")
sample("ScatterNd", [rand(3)], lambda u: rg.scatter_nd([[0], [2], [0]], u, [4]))
sample("ScatterNd", [rand(2, 3)], lambda u: rg.scatter_nd([[1], [3]], u, [4, 3]), name="rows")
sample(
    "DynamicPartition",
    [rand(5, 2)],
    lambda d: rg.dynamic_partition(d, [0, 2, 1, 0, 2], 3),
)
sample(
    "DynamicPartition",
    [rand(2, 3)],
    lambda d: rg.dynamic_partition(d, [[0, 1, 0], [1, 1, 0]], 2)[1],
    name="matrix_one_used",
)
sample(
    "DynamicStitch",
    [rand(2, 2), rand(2, 2)],
    lambda a, b: rg.dynamic_stitch([[0, 2], [1, 3]], [a, b]),
)
sample(
    "DynamicStitch",
    [rand(3), rand(1, 2)],
    lambda a, b: rg.dynamic_stitch([[4, 0, 2], [[1, 3]]], [a, b]),
    name="ragged",
)
sample("TopKV2", [_distinct(3, 5)], lambda x: rg.top_k(x, 2).values)
sample("TopKV2", [_distinct(6)], lambda x: rg.top_k(x, 6).values, name="all")
sample("TopKV2", [_distinct(2, 2, 3)], lambda x: rg.top_k(x, 1, sorted=False), name="rank3")
sample(
    "UnsortedSegmentSum",
    [rand(5, 2)],
    lambda d: grad_ops.unsorted_segment_sum(d, [0, 2, -1, 0, 1], 4),
)
sample(
    "UnsortedSegmentSum",
    [rand(2, 3)],
    lambda d: grad_ops.unsorted_segment_sum(d, [[1, 0, 1], [2, 2, -1]], 3),
    name="matrix_ids",
)

_VARIABLE_HANDLE = (
    "its only differentiable input is a variable's resource handle, which finite differences "
    "cannot perturb; tests/autodiff/test_array_grad.py checks its gradient numerically instead"
)
NO_SAMPLE["ResourceGather"] = _VARIABLE_HANDLE
NO_SAMPLE["ReadVariableOp"] = _VARIABLE_HANDLE

# EnsureShape (rill.graph.ops.extra_ops): the identity after a run-time shape check.
sample(
    "EnsureShape",
    [rand(2, 3)],
    lambda x: extra_ops.ensure_shape(rg.placeholder_with_default(x, [None, None]), [2, None]),
)
