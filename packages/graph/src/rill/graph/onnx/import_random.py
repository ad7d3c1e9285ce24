"""ONNX import rules: random generators (RandomNormal, RandomUniform and their Like forms,
Bernoulli, Multinomial) and other remaining ops (BitCast, GlobalLpPool, MaxRoiPool, DeformConv).

The generators are TensorFlow's stateful random ops. ONNX's float `seed` becomes the op-level
seed (its float32 bits), so as in TensorFlow a seeded node gives the same values in every fresh
session of the graph (and new ones on each run of one session); without a seed the values are
fresh entropy unless the graph has a graph-level seed. The values are not those of any other
ONNX runtime: ONNX leaves the generator unspecified.

BitCast, MaxRoiPool and DeformConv import as rill's own ops of rill.graph.ops.onnx_misc_ops;
GlobalLpPool is composed from elementwise ops and a sum.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype
from rill.graph.ops.onnx_misc_ops import bit_width
from rill.graph.ops.random_ops import get_seed

_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _c(x, v):
    return const(v, x.dtype)


def _seed_attrs(seed: float | None) -> dict:
    """TensorFlow's (seed, seed2) for an ONNX seed: the float32 bits of it as op-level seed."""
    op_seed = None if seed is None else int(np.float32(seed).view(np.uint32))
    s1, s2 = get_seed(op_seed)
    return {"seed": s1 or 0, "seed2": s2 or 0}


def _float_dtype(dtype: int | None, like, what: str) -> dtypes.DType:
    """The output dtype of a generator: `dtype` when given, else `like`'s (or float32)."""
    if dtype is not None:
        dt = rill_dtype(int(dtype), f"{what} dtype: ")
    else:
        dt = like.dtype if like is not None else dtypes.float32
    if dt not in _FLOATS:
        given = "" if dtype is not None else " (the input's; give the dtype attribute)"
        raise OnnxImportError(
            f"{what} generates float16, bfloat16, float32 or float64 values, not {dt.name}{given}"
        )
    return dt


def _shape_of(x):
    """x's shape as an int64 vector: a constant when it is static."""
    if x.shape.is_fully_defined():
        return const(x.shape.as_list(), dtypes.int64)
    return op("Shape", [x], {"out_type": dtypes.int64})


def _static_shape(shape, what: str):
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise OnnxImportError(f"{what} shape {dims} has a negative dimension")
    return const(np.asarray(dims, np.int64))


def _normal(shape, dt, mean, scale, seed):
    z = op("RandomStandardNormal", [shape], {"dtype": dt, **_seed_attrs(seed)})
    if scale != 1.0:
        z = op("Mul", [z, _c(z, scale)])
    return z if mean == 0.0 else op("AddV2", [z, _c(z, mean)])


def _uniform(shape, dt, low, high, seed):
    u = op("RandomUniform", [shape], {"dtype": dt, **_seed_attrs(seed)})
    if high - low != 1.0:
        u = op("Mul", [u, _c(u, high - low)])
    return u if low == 0.0 else op("AddV2", [u, _c(u, low)])


@register_onnx_import("RandomNormal")
def random_normal(n, *, shape, dtype=TensorProto.FLOAT, mean=0.0, scale=1.0, seed=None):
    dt = _float_dtype(dtype, None, "RandomNormal")
    return _normal(_static_shape(shape, "RandomNormal"), dt, mean, scale, seed)


@register_onnx_import("RandomNormalLike")
def random_normal_like(n, x, *, dtype=None, mean=0.0, scale=1.0, seed=None):
    dt = _float_dtype(dtype, x, "RandomNormalLike")
    return _normal(_shape_of(x), dt, mean, scale, seed)


@register_onnx_import("RandomUniform")
def random_uniform(n, *, shape, dtype=TensorProto.FLOAT, low=0.0, high=1.0, seed=None):
    dt = _float_dtype(dtype, None, "RandomUniform")
    return _uniform(_static_shape(shape, "RandomUniform"), dt, low, high, seed)


@register_onnx_import("RandomUniformLike")
def random_uniform_like(n, x, *, dtype=None, low=0.0, high=1.0, seed=None):
    dt = _float_dtype(dtype, x, "RandomUniformLike")
    return _uniform(_shape_of(x), dt, low, high, seed)


@register_onnx_import("Bernoulli")
def bernoulli(n, p, *, dtype=None, seed=None):
    """1 where a uniform draw in [0, 1) is below p (so with probability p), else 0.

    This follows the operator's text; its ONNX function body (Greater(draw, p)) gives 1 with
    probability 1 − p.
    """
    if p.dtype not in _FLOATS:
        raise OnnxImportError(f"Bernoulli takes floating-point probabilities, not {p.dtype.name}")
    out = p.dtype if dtype is None else rill_dtype(int(dtype), "Bernoulli dtype: ")
    u = op("RandomUniform", [_shape_of(p)], {"dtype": p.dtype, **_seed_attrs(seed)})
    hit = op("Less", [u, p])
    return hit if out == dtypes.bool_ else op("Cast", [hit], {"DstT": out})


@register_onnx_import("Multinomial")
def multinomial(n, logits, *, dtype=TensorProto.INT32, sample_size=1, seed=None):
    """sample_size class indices per row of logits [batch, classes] (unnormalized log
    probabilities), as TensorFlow's Multinomial draws them."""
    out = rill_dtype(int(dtype), "Multinomial dtype: ")
    if out not in (dtypes.int32, dtypes.int64):
        raise OnnxImportError(f"Multinomial gives int32 or int64 samples, not {out.name}")
    if logits.dtype not in _FLOATS:
        raise OnnxImportError(f"Multinomial takes floating-point logits, not {logits.dtype.name}")
    if logits.shape.rank not in (None, 2):
        raise OnnxImportError(
            f"Multinomial takes a 2-D input [batch_size, class_size], got shape {logits.shape}"
        )
    if sample_size < 0:
        raise OnnxImportError(f"Multinomial sample_size {sample_size} is negative")
    attrs = {"output_dtype": out, **_seed_attrs(seed)}
    return op("Multinomial", [logits, const(int(sample_size), dtypes.int32)], attrs)


# -- the remaining ops ----------------------------------------------------------------------------


@register_onnx_import("BitCast")
def bitcast(n, x, *, to):
    dt = rill_dtype(int(to), "BitCast to: ")
    if dt == x.dtype:
        return op("Identity", [x])
    src, dst = bit_width(x.dtype), bit_width(dt)
    if src is None or dst is None or src != dst:
        raise OnnxImportError(
            f"BitCast reinterprets bits between types of one width: the input is {x.dtype.name} "
            f"({src or 'no fixed'} bits), `to` is {dt.name} ({dst or 'no fixed'} bits)"
        )
    return op("_OnnxBitCast", [x], {"out_type": dt}, name="BitCast")


@register_onnx_import("GlobalLpPool")
def global_lp_pool(n, x, *, p=2):
    """(Σ |x|^p over all spatial axes)^(1/p), per sample and channel; kept as size-1 axes."""
    if x.dtype not in _FLOATS:
        raise OnnxImportError(f"GlobalLpPool pools floating-point inputs, not {x.dtype.name}")
    r = x.shape.rank
    if r is None or r < 2:
        raise OnnxImportError(
            f"GlobalLpPool needs an input [N, C, d1, ...] of known rank, got shape {x.shape}"
        )
    if p <= 0:
        raise OnnxImportError(f"GlobalLpPool p={p} must be positive")
    axes = const(list(range(2, r)), dtypes.int32)
    if p == 1:
        return op("Sum", [op("Abs", [x]), axes], {"keep_dims": True})
    if p == 2:
        return op("Sqrt", [op("Sum", [op("Square", [x]), axes], {"keep_dims": True})])
    total = op("Sum", [op("Pow", [op("Abs", [x]), _c(x, p)]), axes], {"keep_dims": True})
    return op("Pow", [total, _c(x, 1.0 / p)])


@register_onnx_import("MaxRoiPool")
def max_roi_pool(n, x, rois, *, pooled_shape, spatial_scale=1.0):
    if x.dtype not in _FLOATS:
        raise OnnxImportError(f"MaxRoiPool pools floating-point inputs, not {x.dtype.name}")
    if len(pooled_shape) != 2 or min(pooled_shape) < 1:
        raise OnnxImportError(
            f"MaxRoiPool pooled_shape must be two positive sizes (height, width), got "
            f"{list(pooled_shape)}"
        )
    attrs = {
        "pooled_height": int(pooled_shape[0]),
        "pooled_width": int(pooled_shape[1]),
        "spatial_scale": float(spatial_scale),
    }
    return op("_OnnxMaxRoiPool", [x, rois], attrs, name="MaxRoiPool")


def _spatial_rank(x, w, kernel_shape, where: str) -> int:
    for t in (x, w):
        if t.shape.rank is not None:
            if t.shape.rank < 3:
                raise OnnxImportError(
                    f"{where} takes X [N, C, d1, ...] and W [oC, C/group, k1, ...] with at least "
                    f"one spatial axis, got shapes {x.shape} and {w.shape}"
                )
            return t.shape.rank - 2
    if kernel_shape:
        return len(kernel_shape)
    raise OnnxImportError(f"{where} needs X or W of known rank, or kernel_shape")


def _ints(v, r: int, default: int, name: str, count: int = 1) -> list[int]:
    vals = [default] * (count * r) if v is None else [int(i) for i in v]
    if len(vals) != count * r:
        raise OnnxImportError(
            f"DeformConv {name} {vals} must have {count * r} values for {r} spatial axes"
        )
    return vals


@register_onnx_import("DeformConv")
def deform_conv(n, x, w, offset, b=None, mask=None, *, dilations=None, group=1,
                kernel_shape=None, offset_group=1, pads=None, strides=None):  # fmt: skip
    """A deformable convolution (rill's _OnnxDeformConv) plus the bias; a missing mask is 1."""
    if x.dtype not in _FLOATS:
        raise OnnxImportError(f"DeformConv convolves floating-point inputs, not {x.dtype.name}")
    r = _spatial_rank(x, w, kernel_shape, "DeformConv")
    strides = _ints(strides, r, 1, "strides")
    dilations = _ints(dilations, r, 1, "dilations")
    pads = _ints(pads, r, 0, "pads", count=2)
    if min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
        raise OnnxImportError(
            f"DeformConv strides {strides} and dilations {dilations} must be positive and pads "
            f"{pads} non-negative"
        )
    if group < 1 or offset_group < 1:
        raise OnnxImportError(
            f"DeformConv group {group} and offset_group {offset_group} must be at least 1"
        )
    if kernel_shape is not None:
        found = w.shape.as_list()[2:] if w.shape.rank is not None else None
        if len(kernel_shape) != r or (
            found is not None and any(f is not None and f != k for f, k in zip(found, kernel_shape))
        ):
            raise OnnxImportError(
                f"DeformConv kernel_shape {list(kernel_shape)} does not match W's shape {w.shape}"
            )
    if mask is None:
        mask = _c(x, 1)
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": int(group),
             "offset_group": int(offset_group)}  # fmt: skip
    y = op("_OnnxDeformConv", [x, w, offset, mask], attrs, name="DeformConv")
    if b is None:
        return y
    return op("AddV2", [y, op("Reshape", [b, const([-1] + [1] * r, dtypes.int64)])])
