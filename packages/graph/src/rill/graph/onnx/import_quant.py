"""ONNX import rules: quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger).

Everything is composed from TensorFlow's ops, with the arithmetic kept exact where ONNX asks:

- Quantizing divides in the scale's type (or `precision`), rounds half to even (Round), then
  adds the zero point and saturates in float64, where every integer of every quantized type is
  exact. Float8 and float4 targets take the division's value through ONNX's Cast rules.
- Integer products ((x - x_zp)·(w - w_zp)) accumulate in int32 (MatMul, BatchMatMulV2 and
  Conv2D on int32, which never take the float-only Winograd path); ONNX lets the accumulator
  wrap in 32 bits, and numpy's int32 arithmetic does.
- QLinearConv and QLinearMatMul requantize the int32 sums in float32 with the multiplier
  (x_scale·w_scale)/y_scale, as onnxruntime does, then round half to even and saturate.

Scales and zero points come per tensor (one element), per axis (1-D, the length of x's `axis`)
or blocked (x's rank, `ceil(D/block_size)` along `axis`); each is laid out to broadcast over x
once at import, with its shape checked against x's where both are known.
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.onnx import import_conv as _conv
from rill.graph.onnx.import_linalg import matmul as _onnx_matmul
from rill.graph.onnx.import_math import cast_to
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype

_F32, _F64, _I32, _I64 = dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64

# QuantizeLinear's output types (T3) that rill has, and DequantizeLinear's inputs (T1).
_QUANT_INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int4, dtypes.uint4,
               dtypes.int2, dtypes.uint2)  # fmt: skip
_QUANT_FLOATS = (dtypes.float8_e4m3fn, dtypes.float8_e4m3fnuz, dtypes.float8_e5m2,
                 dtypes.float8_e5m2fnuz, dtypes.float4_e2m1fn)  # fmt: skip
_DEQUANT_OUT = (dtypes.float32, dtypes.float16, dtypes.bfloat16)
_INT8S = (dtypes.int8, dtypes.uint8)


def _cast(x, dt: dtypes.DType):
    return x if x.dtype is dt else op("Cast", [x], {"DstT": dt})


def _names(dts) -> str:
    return ", ".join(d.name for d in dts)


# -- granularity: how a scale / zero point lines up with x ----------------------------------------


def _one_element(t) -> bool:
    s = t.shape
    return s.rank == 0 or (s.rank == 1 and s[0] == 1)


def _axis(axis: int, rank: int | None, what: str) -> int:
    if rank is None:
        raise OnnxImportError(f"{what} needs the rank of its input known for per-axis scales")
    if not -rank <= axis < rank:
        raise OnnxImportError(f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


class _Layout:
    """Per tensor (`axis` None), per axis or blocked (`block` > 0): how each scale or zero point
    of a QuantizeLinear / DequantizeLinear node becomes a tensor that broadcasts over x."""

    def __init__(self, x, scale, zero_point, axis: int, block_size: int, what: str):
        self.x, self.axis, self.block = x, None, int(block_size)
        sr = scale.shape.rank
        if sr is None:
            raise OnnxImportError(f"{what} needs the rank of its scale known")
        if zero_point is not None:
            zs, ss = zero_point.shape, scale.shape
            same = not (zs.is_fully_defined() and ss.is_fully_defined()) or zs == ss
            if not same and not (_one_element(zero_point) and _one_element(scale)):
                raise OnnxImportError(
                    f"the zero point's shape {zs} differs from the scale's {ss}; they must be "
                    "the same (both one element for per-tensor quantization)"
                )
        if self.block < 0:
            raise OnnxImportError(f"block_size must be positive, got {self.block}")
        if self.block:
            self.axis = _axis(axis, x.shape.rank, what)
            self._check_blocked(scale)
        elif sr == 1 and not _one_element(scale):
            self.axis = _axis(axis, x.shape.rank, what)
            d, s = x.shape[self.axis], scale.shape[0]
            if d is not None and s is not None and d != s:
                raise OnnxImportError(
                    f"a per-axis scale needs the length of the input's axis {self.axis} ({d}), "
                    f"got {s} values (input {x.shape}, axis={axis})"
                )
        elif sr > 1:
            raise OnnxImportError(
                f"a scale of shape {scale.shape} is blocked quantization, which needs the "
                "block_size attribute (a per-axis scale is 1-D, a per-tensor one a scalar)"
            )

    def _check_blocked(self, scale) -> None:
        xs, ss = self.x.shape, scale.shape
        if ss.rank != xs.rank:
            raise OnnxImportError(
                f"a blocked scale has the input's rank {xs.rank}, got shape {ss} "
                f"(block_size={self.block})"
            )
        for i, (d, s) in enumerate(zip(xs.as_list(), ss.as_list())):
            if d is None or s is None:
                continue
            want = -(-d // self.block) if i == self.axis else d
            if s != want:
                raise OnnxImportError(
                    f"a blocked scale for input {xs} with block_size={self.block} along axis "
                    f"{self.axis} has shape dimension {i} = {want}, got {s} (scale {ss})"
                )

    def spread(self, p):
        """p (a scale or zero point) laid out to broadcast over x."""
        if self.block:
            return op("GatherV2", [p, self._block_index(), const(self.axis, _I32)])
        if self.axis is None:
            return op("Reshape", [p, const([], _I32)])
        trailing = self.x.shape.rank - self.axis - 1
        return op("Reshape", [p, const([-1] + [1] * trailing, _I32)])

    def _block_index(self):
        """[D]: the block of each index along the axis (i // block_size)."""
        d = self.x.shape[self.axis]
        if d is not None:
            return const([i // self.block for i in range(d)], _I32)
        shp = op("Shape", [self.x], {"out_type": _I32})
        size = op("StridedSlice", [shp, const([self.axis], _I32), const([self.axis + 1], _I32),
                                   const([1], _I32)], {"shrink_axis_mask": 1})  # fmt: skip
        idx = op("Range", [const(0, _I32), size, const(1, _I32)])
        return op("FloorDiv", [idx, const(self.block, _I32)])


# -- QuantizeLinear / DequantizeLinear ------------------------------------------------------------


def _saturate(q, zero_point, dt: dtypes.DType):
    """Integer-valued q plus the zero point, saturated to dt's range, as dt (in float64, where
    both are exact)."""
    y = _cast(q, _F64)
    if zero_point is not None:
        y = op("AddV2", [y, _cast(zero_point, _F64)])
    y = op("Maximum", [op("Minimum", [y, const(dt.max, _F64)]), const(dt.min, _F64)])
    if dt.is_narrow:
        y = _cast(y, _I32)  # 4- and 2-bit integers are cast from an integer already in range
    return _cast(y, dt)


def _quantize(x, scale, zero_point, dt: dtypes.DType, calc: dtypes.DType, saturate: int = 1):
    """ONNX's saturate(x / scale + zero_point), the division in `calc`; scale and zero point
    already broadcast over x."""
    q = op("RealDiv", [_cast(x, calc), _cast(scale, calc)])
    if dt.is_integer:
        return _saturate(op("Round", [q]), zero_point, dt)
    if zero_point is not None:
        q = op("AddV2", [q, _cast(zero_point, calc)])
    return cast_to(q, dt, saturate)


def _division_type(scale, precision: int) -> dtypes.DType:
    dt = rill_dtype(precision, "precision: ") if precision else scale.dtype
    if dt is dtypes.float8_e8m0fnu:
        return _F32  # powers of two: float32 holds every one and divides by it exactly
    if dt.is_integer:
        return _F64  # an int32 scale: a float64 quotient, exact to round half to even
    return dt


@register_onnx_import("QuantizeLinear")
def quantize_linear(n, x, y_scale, y_zero_point=None, *, axis=1, block_size=0, output_dtype=0,
                    saturate=1, precision=0):  # fmt: skip
    """y = saturate(round(x / y_scale) + y_zero_point), rounding half to even."""
    if y_zero_point is not None:
        dt = y_zero_point.dtype
        if output_dtype and rill_dtype(output_dtype, "output_dtype: ") != dt:
            raise OnnxImportError(
                f"output_dtype {rill_dtype(output_dtype).name} differs from the zero point's "
                f"type {dt.name}; they must agree"
            )
    else:
        dt = rill_dtype(output_dtype, "output_dtype: ") if output_dtype else dtypes.uint8
    if dt not in _QUANT_INTS + _QUANT_FLOATS:
        raise OnnxImportError(
            f"QuantizeLinear quantizes to {_names(_QUANT_INTS + _QUANT_FLOATS)}; the zero point "
            f"or output_dtype asks for {dt.name}"
        )
    layout = _Layout(x, y_scale, y_zero_point, axis, block_size, "QuantizeLinear")
    zp = None if y_zero_point is None else layout.spread(y_zero_point)
    calc = _division_type(y_scale, precision)
    return _quantize(x, layout.spread(y_scale), zp, dt, calc, saturate)


@register_onnx_import("DequantizeLinear")
def dequantize_linear(n, x, x_scale, x_zero_point=None, *, axis=1, block_size=0,
                      output_dtype=0):  # fmt: skip
    """y = (x - x_zero_point) · x_scale, the product in the output type."""
    if x_zero_point is not None and x_zero_point.dtype != x.dtype:
        raise OnnxImportError(
            f"the zero point is {x_zero_point.dtype.name} but x is {x.dtype.name}; they must "
            "have the same type"
        )
    dt = rill_dtype(output_dtype, "output_dtype: ") if output_dtype else x_scale.dtype
    if dt not in _DEQUANT_OUT:
        raise OnnxImportError(
            f"DequantizeLinear produces {_names(_DEQUANT_OUT)}; got {dt.name} (from "
            f"{'output_dtype' if output_dtype else 'the scale'})"
        )
    layout = _Layout(x, x_scale, x_zero_point, axis, block_size, "DequantizeLinear")
    if x.dtype.is_integer:
        # int64 holds an int32 difference; int32 every narrower one.
        wide = _I64 if x.dtype.size >= 4 else _I32
    else:
        wide = _F64  # float8 / float4 values: their differences are exact in float64
    d = _cast(x, wide)
    if x_zero_point is not None:
        d = op("Sub", [d, _cast(layout.spread(x_zero_point), wide)])
    return op("Mul", [_cast(d, dt), _cast(layout.spread(x_scale), dt)])


@register_onnx_import("DynamicQuantizeLinear")
def dynamic_quantize_linear(n, x):
    """uint8 with y_scale = (max(0, max x) - min(0, min x)) / 255 and y_zero_point =
    round(saturate(-min(0, min x) / y_scale)), both rounding half to even.

    An input of zeros (or an empty one) has a range of 0, where ONNX's formula divides 0 by 0:
    here y_scale is 1 and the zero point and every y 0 (which dequantize back to x), as
    onnxruntime gives."""
    if x.dtype is not _F32:
        raise OnnxImportError(f"DynamicQuantizeLinear takes float32, got {x.dtype.name}")
    every = op("Range", [const(0, _I32), op("Rank", [x]), const(1, _I32)])
    zero = const(0.0, _F32)
    lo = op("Minimum", [op("Min", [x, every]), zero])
    hi = op("Maximum", [op("Max", [x, every]), zero])
    scale = op("RealDiv", [op("Sub", [hi, lo]), const(255.0, _F32)])
    scale = op("SelectV2", [op("Equal", [scale, zero]), const(1.0, _F32), scale])
    zp_f = op("Sub", [zero, op("RealDiv", [lo, scale])])
    zp_f = op("Maximum", [op("Minimum", [zp_f, const(255.0, _F32)]), zero])
    zp = _cast(op("Round", [zp_f]), dtypes.uint8)
    return [_quantize(x, scale, zp, dtypes.uint8, _F32), scale, zp]


# -- integer products -----------------------------------------------------------------------------


def _check_int8(t, what: str, node: str) -> None:
    if t.dtype not in _INT8S:
        raise OnnxImportError(f"{node}'s {what} must be int8 or uint8, got {t.dtype.name}")


def _same_type(t, zp, what: str, node: str) -> None:
    if zp is not None and zp.dtype != t.dtype:
        raise OnnxImportError(
            f"{node}'s {what} zero point is {zp.dtype.name} but {what} is {t.dtype.name}; "
            "they must have the same type"
        )


def _rows(p, t, what: str, node: str):
    """A per-row parameter of a matmul operand t ([..., M, K]): one element → a scalar, a 1-D
    [M] → [M, 1]; an N-D one ([..., M, 1]) broadcasts as it is."""
    if _one_element(p):
        return op("Reshape", [p, const([], _I32)])
    if p.shape.rank == 1:
        m = t.shape[-2] if t.shape.rank is not None and t.shape.rank >= 2 else None
        if m is not None and p.shape[0] is not None and p.shape[0] != m:
            raise OnnxImportError(
                f"{node}'s {what} has {p.shape[0]} values; per-row quantization of {t.shape} "
                f"needs {m}"
            )
        return op("Reshape", [p, const([-1, 1], _I32)])
    return p


def _cols(p, t, what: str, node: str):
    """A per-column parameter of a matmul operand t ([..., K, N]): one element → a scalar, a 1-D
    [N] or an N-D [..., 1, N] broadcasts as it is."""
    if _one_element(p):
        return op("Reshape", [p, const([], _I32)])
    if p.shape.rank == 1:
        k = t.shape[-1] if t.shape.rank else None
        if k is not None and p.shape[0] is not None and p.shape[0] != k:
            raise OnnxImportError(
                f"{node}'s {what} has {p.shape[0]} values; per-column quantization of "
                f"{t.shape} needs {k}"
            )
    return p


def _centered(t, zp):
    """t - zp in int32."""
    t32 = _cast(t, _I32)
    return t32 if zp is None else op("Sub", [t32, _cast(zp, _I32)])


def _int_matmul(n, a, b, a_zp, b_zp, node: str):
    """int32 (a - a_zp) · (b - b_zp), numpy's matmul; zero points per tensor, row or column."""
    _check_int8(a, "A", node)
    _check_int8(b, "B", node)
    _same_type(a, a_zp, "A", node)
    _same_type(b, b_zp, "B", node)
    a_zp = None if a_zp is None else _rows(a_zp, a, "A zero point", node)
    b_zp = None if b_zp is None else _cols(b_zp, b, "B zero point", node)
    return _onnx_matmul(n, _centered(a, a_zp), _centered(b, b_zp))


def _requantize(acc, multiplier, y_zero_point, dt: dtypes.DType):
    """saturate(round(acc · multiplier) + y_zero_point), in float32 as onnxruntime computes."""
    q = op("Round", [op("Mul", [_cast(acc, _F32), multiplier])])
    return _saturate(q, y_zero_point, dt)


def _multiplier(a_scale, b_scale, y_scale):
    """(a_scale · b_scale) / y_scale in float32."""
    ab = op("Mul", [_cast(a_scale, _F32), _cast(b_scale, _F32)])
    return op("RealDiv", [ab, _cast(y_scale, _F32)])


def _scalar(p, what: str, node: str):
    if p.shape.rank is None or not _one_element(p):
        raise OnnxImportError(f"{node}'s {what} must be a scalar (per tensor), got shape {p.shape}")
    return op("Reshape", [p, const([], _I32)])


@register_onnx_import("MatMulInteger")
def matmul_integer(n, a, b, a_zero_point=None, b_zero_point=None):
    """int32 (A - a_zero_point) · (B - b_zero_point)."""
    return _int_matmul(n, a, b, a_zero_point, b_zero_point, "MatMulInteger")


@register_onnx_import("QLinearMatMul")
def qlinear_matmul(n, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """saturate(round((a - a_zp)·(b - b_zp) · a_scale·b_scale / y_scale) + y_zp); the product
    in int32, scales and zero points per tensor, row of a or column of b."""
    node = "QLinearMatMul"
    _check_int8(y_zero_point, "y zero point", node)
    acc = _int_matmul(n, a, b, a_zero_point, b_zero_point, node)
    mult = _multiplier(_rows(a_scale, a, "a_scale", node), _cols(b_scale, b, "b_scale", node),
                       _scalar(y_scale, "y_scale", node))  # fmt: skip
    yz = _scalar(y_zero_point, "y zero point", node)
    return _requantize(acc, mult, yz, y_zero_point.dtype)


# -- integer convolutions -------------------------------------------------------------------------


def _int_conv(x, w, group, auto_pad, dilations, kernel_shape, pads, strides, what: str):
    """ONNX Conv of int32 x and w (int8 or uint8 values less their zero points) as an int32
    Conv2D (grouped), NCHW, 1-D as 2-D over a unit height. A depthwise one (group = input
    channels) is a float64 DepthwiseConv2dNative cast back to int32: exact (each product is at
    most 2^16, so every partial sum of a window is an integer far below 2^53), where Conv2D's
    grouped int32 loop took a call per channel."""
    nd = _conv._rank(x, what) - 2
    if nd not in (1, 2):
        raise OnnxImportError(f"rill has 1-D and 2-D convolutions; this {what} is {nd}-D")
    c, kc = x.shape[1], w.shape[1]
    if c is not None and kc is not None and c != kc * int(group):
        raise OnnxImportError(
            f"{what}'s input has {c} channels; the filter's {kc} per group × group={group} "
            f"gives {kc * int(group)}"
        )
    if kernel_shape is None:
        ks = w.shape.as_list()[2:]
        if len(ks) != nd or any(k is None for k in ks):
            raise OnnxImportError(f"{what} needs kernel_shape or a filter of known shape")
        kernel_shape = ks
    kernel = [int(k) for k in kernel_shape]
    strides = _conv._ints(strides, nd, 1)
    dilations = _conv._ints(dilations, nd, 1)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        spatial = _conv._static_spatial(x, f"{what} with {auto_pad}")
        geo = _conv._Geometry(spatial, kernel, strides, dilations, None, auto_pad, 0)
        pads, auto_pad = geo.begin + geo.end, "NOTSET"
    elif auto_pad not in ("NOTSET", "VALID", ""):
        raise OnnxImportError(f"unknown auto_pad {auto_pad!r}")
    p = [0] * (2 * nd) if auto_pad == "VALID" else _conv._ints(pads, 2 * nd, 0)
    if nd == 1:
        x, w = _conv._expand_1d(x), _conv._expand_1d(w)
        strides, dilations, p = [1, *strides], [1, *dilations], [0, p[0], 0, p[1]]
    attrs = {"strides": [1, 1, *strides], "dilations": [1, 1, *dilations], "data_format": "NCHW",
             "padding": "EXPLICIT" if any(p) else "VALID"}  # fmt: skip
    if any(p):
        attrs["explicit_paddings"] = [0, 0, 0, 0, p[0], p[2], p[1], p[3]]
    c_in = c if c is not None else (None if kc is None else kc * int(group))
    if int(group) > 1 and c_in == int(group):
        filt, _ = _conv._filter_hwio(op("Cast", [w], {"DstT": dtypes.float64}), int(group), c_in)
        x64 = op("Cast", [x], {"DstT": dtypes.float64})
        y = op("DepthwiseConv2dNative", [x64, filt], attrs)
        return op("Cast", [y], {"DstT": dtypes.int32}), nd
    # OIHW → HWIO: TensorFlow's grouped filter [kh, kw, C/group, M], groups of M contiguous.
    filt = op("Transpose", [w, const([2, 3, 1, 0], _I32)])
    if int(group) == 1:
        # float64 (BLAS, or Winograd's tiles) then rounded: every exact sum is an integer below
        # 2^40 and float64's error on it far below 1/2, so the rounding gives it exactly; the
        # int32 Conv2D has no BLAS to run on.
        f64 = [op("Cast", [t], {"DstT": dtypes.float64}) for t in (x, filt)]
        y = op("Round", [op("Conv2D", f64, attrs)])
        return op("Cast", [y], {"DstT": dtypes.int32}), nd
    return op("Conv2D", [x, filt], attrs), nd


def _per_channel(p, w, what: str, node: str, trailing: int):
    """A per-output-channel parameter ([M], or one element) shaped [M, 1 × trailing]."""
    if p.shape.rank is None:
        raise OnnxImportError(f"{node} needs the rank of its {what} known")
    if _one_element(p):
        return op("Reshape", [p, const([], _I32)])
    if p.shape.rank != 1:
        raise OnnxImportError(f"{node}'s {what} must be a scalar or 1-D, got shape {p.shape}")
    m = w.shape[0] if w.shape.rank else None
    if m is not None and p.shape[0] is not None and p.shape[0] != m:
        raise OnnxImportError(
            f"{node}'s {what} has {p.shape[0]} values; per-channel quantization of a filter "
            f"with {m} output channels needs {m}"
        )
    return op("Reshape", [p, const([-1] + [1] * trailing, _I32)])


def _conv_integer(x, w, x_zp, w_zp, conv_attrs, node: str):
    """int32 (x - x_zp) ⋆ (w - w_zp) (per-tensor x_zp, per-tensor or per-channel w_zp); the
    convolution's spatial rank."""
    _check_int8(x, "x", node)
    _check_int8(w, "w", node)
    _same_type(x, x_zp, "x", node)
    _same_type(w, w_zp, "w", node)
    if w.shape.rank is None:
        raise OnnxImportError(f"{node} needs the rank of its filter known")
    xc = _centered(x, None if x_zp is None else _scalar(x_zp, "x zero point", node))
    wz = None if w_zp is None else _per_channel(w_zp, w, "w zero point", node, w.shape.rank - 1)
    return _int_conv(xc, _centered(w, wz), *conv_attrs, what=node)


@register_onnx_import("ConvInteger")
def conv_integer(n, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET",
                 dilations=None, group=1, kernel_shape=None, pads=None, strides=None):  # fmt: skip
    """int32 (x - x_zero_point) ⋆ (w - w_zero_point)."""
    attrs = (group, auto_pad, dilations, kernel_shape, pads, strides)
    y, nd = _conv_integer(x, w, x_zero_point, w_zero_point, attrs, "ConvInteger")
    return _conv._squeeze_1d(y) if nd == 1 else y


@register_onnx_import("QLinearConv")
def qlinear_conv(n, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
                 B=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                 pads=None, strides=None):  # fmt: skip
    """saturate(round(((x - x_zp) ⋆ (w - w_zp) + B) · x_scale·w_scale / y_scale) + y_zp): the
    convolution and bias in int32, w's scale and zero point per tensor or output channel."""
    node = "QLinearConv"
    _check_int8(y_zero_point, "y zero point", node)
    attrs = (group, auto_pad, dilations, kernel_shape, pads, strides)
    acc, nd = _conv_integer(x, w, x_zero_point, w_zero_point, attrs, node)
    if B is not None:
        if B.dtype is not _I32:
            raise OnnxImportError(f"{node}'s bias must be int32, got {B.dtype.name}")
        acc = op("BiasAdd", [acc, B], {"data_format": "NCHW"})
    ws = _per_channel(w_scale, w, "w_scale", node, 2)  # over the 2-D output's [M, H, W]
    mult = _multiplier(_scalar(x_scale, "x_scale", node), ws, _scalar(y_scale, "y_scale", node))
    yz = _scalar(y_zero_point, "y zero point", node)
    y = _requantize(acc, mult, yz, y_zero_point.dtype)
    return _conv._squeeze_1d(y) if nd == 1 else y
