"""rill's own ops for ONNX operators with no TensorFlow counterpart (names start with "_"; the
ONNX importer builds them, users do not): _OnnxBitCast, _OnnxMaxRoiPool and _OnnxDeformConv.
Each computes what the ONNX operator of the same name specifies; the attrs are ONNX's, already
checked by the importer.
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["bit_width"]

_FLOAT = "{float16, bfloat16, float32, float64}"

# Types narrower than the byte numpy stores each of their values in.
_NARROW_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}


def bit_width(dt: dtypes.DType) -> int | None:
    """How many bits one value of `dt` holds (bool: 8); None for types without a fixed width
    (string, variant, resource)."""
    if dt.name in _NARROW_BITS:
        return _NARROW_BITS[dt.name]
    return dt.size * 8 if dt.size else None


def _bitcast_shape(op):
    src, dst = op.attrs["T"], op.attrs["out_type"]
    if bit_width(src) is None or bit_width(src) != bit_width(dst):
        raise ValueError(
            f"BitCast reinterprets bits between types of one width: {src.name} is "
            f"{bit_width(src)} bits wide, {dst.name} {bit_width(dst)}"
        )
    return op._inputs[0].shape


defop(
    "_OnnxBitCast",
    inputs=["input: T"],
    outputs=["output: out_type"],
    attrs=["T: type", "out_type: type"],
    shape=_bitcast_shape,
    doc="ONNX's BitCast: input's bits read as out_type, a type of the same bit width (bool is "
    "8 bits wide; a nonzero byte reads as true). The shape is unchanged.",
)


def _max_roi_pool_shape(op):
    x, rois = op._inputs[0].shape, op._inputs[1].shape
    if x.rank not in (None, 4):
        raise ValueError(f"X must be 4-D [N, C, H, W], got {x}")
    if rois.rank not in (None, 2) or (rois.rank == 2 and rois[1] not in (None, 5)):
        raise ValueError(f"rois must have shape [num_rois, 5], got {rois}")
    n = rois[0] if rois.rank == 2 else None
    c = x[1] if x.rank == 4 else None
    return TensorShape([n, c, op.attrs["pooled_height"], op.attrs["pooled_width"]])


defop(
    "_OnnxMaxRoiPool",
    inputs=["x: T", "rois: T"],
    outputs=["y: T"],
    attrs=[
        f"T: {_FLOAT}",
        "pooled_height: int >= 1 = 1",
        "pooled_width: int >= 1 = 1",
        "spatial_scale: float = 1.0",
    ],
    shape=_max_roi_pool_shape,
    doc="ONNX's MaxRoiPool: each roi [batch, x1, y1, x2, y2], its corners times spatial_scale "
    "rounded (halves away from zero) to whole pixels, both inclusive, is split into "
    "pooled_height × pooled_width bins (floor of each bin's start, ceiling of its end); each "
    "output is the maximum of image `batch` over its bin, 0 for a bin outside the image.",
)


def _deform_conv_shape(op):
    x, w, offset = (t.shape for t in op._inputs[:3])
    r = len(op.attrs["strides"])
    for name, s in (("X", x), ("W", w), ("offset", offset)):
        if s.rank not in (None, r + 2):
            raise ValueError(f"{name} must be {r + 2}-D for {r} spatial axes, got {s}")
    group = op.attrs["group"]
    c, cg = (x[1] if x.rank is not None else None), (w[1] if w.rank is not None else None)
    if c is not None and cg is not None and c != cg * group:
        raise ValueError(f"W {w} must be [oC, C / group, ...] for X {x} and group {group}")
    n = x[0] if x.rank is not None else offset[0] if offset.rank is not None else None
    oc = w[0] if w.rank is not None else None
    spatial = list(offset)[2:] if offset.rank is not None else [None] * r
    return TensorShape([n, oc, *spatial])


defop(
    "_OnnxDeformConv",
    inputs=["x: T", "w: T", "offset: T", "mask: T"],
    outputs=["y: T"],
    attrs=[
        f"T: {_FLOAT}",
        "strides: list(int)",
        "pads: list(int)",
        "dilations: list(int)",
        "group: int >= 1 = 1",
        "offset_group: int >= 1 = 1",
    ],
    shape=_deform_conv_shape,
    doc="ONNX's DeformConv without bias: a grouped convolution of x [N, C, d1..dr] by w "
    "[oC, C/group, k1..kr] that reads each kernel tap at its regular position (strides, pads "
    "of 2r values, begins then ends, dilations) plus offset[n, (g·K + k)·r + axis, o...] "
    "(K = k1·...·kr taps, g the tap's offset group of C/offset_group channels), N-linearly "
    "interpolated with zeros outside x, times mask[n, g·K + k, o...] (a scalar mask "
    "broadcasts).",
)
