"""ONNX import rules: BitShift, cumulative products, sequence reversal, Compress, Det,
CenterCropPad, and the deprecated Upsample and Scatter (the trigonometric and bitwise ops, one to
one onto TensorFlow's, are in import_math's tables).

BitShift differs from TensorFlow's shifts where the count is negative or at least the bit width
(TensorFlow clamps the count; ONNX gives what the sign fill alone gives), Compress is a gather of
the condition's true positions, and CenterCropPad a slice then a pad per axis. The version converter brings Upsample below opset 10 and Scatter
below opset 11 to Resize and ScatterElements; the later deprecated versions survive it (an
opset-10 Upsample, an opset-11 Scatter) and reach the rules here, which build those two ops.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_array import scatter_elements
from rill.graph.onnx.import_linalg import _dim, _shape_tensor
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_resize import resize
from rill.graph.onnx.import_util import OnnxImportError, const, op
from rill.graph.onnx.import_util import as_i64 as _as_i64
from rill.graph.onnx.import_util import i64 as _i64
from rill.graph.onnx.import_util import scalar as _scalar


@register_onnx_import("BitShift")
def bit_shift(n, x, y, *, direction):
    """x << y or x >> y (arithmetic for signed types). A count below 0 or at least the bit width
    gives the sign fill alone (-1 for a right shift of a negative x, else 0), where TensorFlow's
    shifts clamp the count to [0, bits - 1]."""
    if direction not in ("LEFT", "RIGHT"):
        raise OnnxImportError(f"BitShift direction must be 'LEFT' or 'RIGHT', not {direction!r}")
    dt = x.dtype
    if not dt.is_integer or dt.np.itemsize not in (1, 2, 4, 8):
        raise OnnxImportError(f"BitShift takes 8- to 64-bit integers, not {dt.name}")
    bits = dt.np.itemsize * 8
    outside = op("GreaterEqual", [y, const(bits, y.dtype)])
    if not y.dtype.is_unsigned:
        outside = op("LogicalOr", [outside, op("Less", [y, const(0, y.dtype)])])
    if direction == "RIGHT" and not dt.is_unsigned:
        # A shift by bits - 1 is the sign fill alone.
        count = op("SelectV2", [outside, const(bits - 1, y.dtype), y])
        return op("RightShift", [x, count])
    shifted = op("LeftShift" if direction == "LEFT" else "RightShift", [x, y])
    return op("SelectV2", [outside, op("ZerosLike", [shifted]), shifted])


@register_onnx_import("CumProd")
def cum_prod(n, x, axis, *, exclusive=0, reverse=0):
    return op("Cumprod", [x, _scalar(axis)], {"exclusive": bool(exclusive),
                                              "reverse": bool(reverse)})  # fmt: skip


@register_onnx_import("ReverseSequence")
def reverse_sequence(n, x, sequence_lens, *, batch_axis=1, time_axis=0):
    if {batch_axis, time_axis} != {0, 1}:
        raise OnnxImportError(
            f"ReverseSequence takes batch_axis and time_axis 0 and 1 (one each), got batch_axis "
            f"{batch_axis} and time_axis {time_axis}"
        )
    r = x.shape.rank
    if r is not None and r < 2:
        raise OnnxImportError(f"ReverseSequence takes an input of rank >= 2, got rank {r}")
    lens = sequence_lens.shape
    if lens.rank is not None and lens.rank != 1:
        raise OnnxImportError(
            f"ReverseSequence sequence_lens must be a vector [batch_size], got shape {lens}"
        )
    batch = x.shape[batch_axis] if r is not None else None
    if lens.rank == 1 and lens[0] is not None and batch is not None and lens[0] != batch:
        raise OnnxImportError(
            f"ReverseSequence sequence_lens has {lens[0]} entries, but the input {x.shape} has "
            f"{batch} along batch_axis {batch_axis}"
        )
    return op("ReverseSequence", [x, sequence_lens], {"seq_dim": time_axis,
                                                      "batch_dim": batch_axis})  # fmt: skip


@register_onnx_import("Compress")
def compress(n, x, condition, *, axis=None):
    """The slices of x along `axis` (of x flattened, with no axis) where condition is true; a
    condition shorter than the axis leaves the rest out."""
    if condition.shape.rank is not None and condition.shape.rank != 1:
        raise OnnxImportError(f"Compress condition must be a vector, got shape {condition.shape}")
    if axis is None:
        x, axis = op("Reshape", [x, _i64([-1])]), 0
    else:
        r = x.shape.rank
        if r is None:
            raise OnnxImportError("Compress with an axis needs an input of known rank")
        if not -r <= axis < r:
            raise OnnxImportError(f"Compress axis {axis} is out of range for rank {r}")
        axis %= r
    size = x.shape[axis] if x.shape.rank is not None else None
    k = condition.shape[0] if condition.shape.rank == 1 else None
    if size is not None and k is not None and k > size:
        raise OnnxImportError(
            f"Compress condition has {k} entries, more than the {size} of the input along axis "
            f"{axis}; it may have as many or fewer"
        )
    if condition.dtype != dtypes.bool_:
        condition = op("NotEqual", [condition, op("ZerosLike", [condition])])
    picks = op("Reshape", [op("Where", [condition]), _i64([-1])])
    return op("GatherV2", [x, picks, const(axis, dtypes.int32)])


@register_onnx_import("Det")
def det(n, x):
    """MatrixDeterminant; bfloat16 (which it lacks) computes in float32."""
    if x.dtype == dtypes.bfloat16:
        d = op("MatrixDeterminant", [op("Cast", [x], {"DstT": dtypes.float32})])
        return op("Cast", [d], {"DstT": dtypes.bfloat16})
    return op("MatrixDeterminant", [x])


@register_onnx_import("CenterCropPad")
def center_crop_pad(n, x, shape, *, axes=None):
    """Per axis: a centred window of the target size when the input is larger (its start
    rounded down), zeros on both sides when smaller (the odd one after)."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("CenterCropPad needs an input of known rank")
    axes = list(range(r)) if axes is None else list(axes)
    for a in axes:
        if not -r <= a < r:
            raise OnnxImportError(f"CenterCropPad axis {a} is out of range for rank {r}")
    axes = [a % r for a in axes]
    if len(set(axes)) != len(axes):
        raise OnnxImportError(f"CenterCropPad axes {axes} repeat an axis")
    if shape.shape.rank is not None and shape.shape != [len(axes)]:
        raise OnnxImportError(
            f"CenterCropPad shape must hold one size per axis ({len(axes)}), got shape "
            f"{shape.shape}"
        )
    target = n.static(shape)
    if target is not None:
        target = np.asarray(target).reshape(-1)
        if (target < 0).any():
            raise OnnxImportError(f"CenterCropPad shape {target.tolist()} has a negative size")
    else:
        target = _as_i64(shape)
    y = x
    for i, a in enumerate(axes):
        have = _dim(y, a)
        want = int(target[i]) if isinstance(target, np.ndarray) else op(
            "GatherV2", [target, _i64(i), const(0, dtypes.int32)])  # fmt: skip
        y = _crop_pad_axis(y, a, r, have, want)
    return y


def _crop_pad_axis(y, a: int, r: int, have, want):
    """y cropped or padded along axis a from `have` to `want` (ints or int64 scalars)."""
    if isinstance(have, int) and isinstance(want, int):
        if have > want:
            begin, size = [0] * r, [-1] * r
            begin[a], size[a] = (have - want) // 2, want
            return op("Slice", [y, _i64(begin), _i64(size)])
        if have < want:
            pads = np.zeros((r, 2), np.int64)
            pads[a] = ((want - have) // 2, want - have - (want - have) // 2)
            return op("Pad", [y, _i64(pads)])
        return y
    have = _i64(have) if isinstance(have, int) else have
    want = _i64(want) if isinstance(want, int) else want
    zero, two = _i64(0), _i64(2)
    diff = op("Sub", [have, want])
    begin = op("FloorDiv", [op("Maximum", [diff, zero]), two])
    size = op("Minimum", [have, want])
    y = op("Slice", [y, _shape_tensor([begin if d == a else 0 for d in range(r)]),
                     _shape_tensor([size if d == a else -1 for d in range(r)])])  # fmt: skip
    total = op("Maximum", [op("Neg", [diff]), zero])
    before = op("FloorDiv", [total, two])
    after = op("Sub", [total, before])
    flat = [p for d in range(r) for p in ((before, after) if d == a else (0, 0))]
    return op("Pad", [y, op("Reshape", [_shape_tensor(flat), _i64([r, 2])])])


@register_onnx_import("Upsample")
def upsample(n, x, factors=None, *, mode="nearest", scales=None):
    """Resize by `factors` (the opset-9/10 input; opset 7's `scales` attribute) as opset-10
    Resize samples: at x_out / scale, rounding down for nearest."""
    if factors is None:
        if scales is None:
            raise OnnxImportError("Upsample needs scales (an input, or opset 7's attribute)")
        factors = const(np.asarray(scales, np.float32))
    if mode not in ("nearest", "linear"):
        raise OnnxImportError(f"Upsample mode must be 'nearest' or 'linear', not {mode!r}")
    return resize(n, x, None, factors, None, mode=mode,
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")  # fmt: skip


@register_onnx_import("Scatter")
def scatter(n, data, indices, updates, *, axis=0):
    """ScatterElements without a reduction (Scatter is its deprecated name)."""
    return scatter_elements(n, data, indices, updates, axis=axis)
