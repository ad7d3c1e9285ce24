"""ONNX import rules: onnxruntime's quantized contrib ops in the com.microsoft domain, as
onnxruntime's quantization tool writes them in QOperator format (QLinearAdd, QLinearMul,
QLinearGlobalAveragePool, QGemm, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
QLinearAveragePool, QLinearSoftmax), and MatMulNBits, the block-quantized weights of
onnxruntime's weight-only (int4) quantizer for LLMs.

Each is dequantize → the float op → quantize, all in float32 as onnxruntime computes:
dequantizing is (x - zero_point) · scale, quantizing saturate(round(y / scale) + zero_point)
with round half to even, saturated to the zero point's type (import_quant's helpers). QGemm
multiplies in int32, as QLinearMatMul does, and requantizes the int32 sums. Scales and zero
points are per tensor, except QGemm's b_scale and b_zero_point, which may be per column.

onnxruntime's integer kernels sometimes fold the scales into one ratio, or sum a pool's integers
before scaling, so a value that lies within a float32 rounding of a half step can land one
quantization step away from onnxruntime's. QLinearAdd follows the arithmetic of onnxruntime's
x86-64 (AVX2) kernel instead, ratios and fused multiply-adds, so its bits are that kernel's.

The onnx package declares no com.microsoft ops, and the import registry checks a rule's op and
attributes against onnx's schemas, so this module first registers with onnx a schema for each op
(inputs, their optionality, attributes) from onnxruntime's contrib op documentation.
"""

from __future__ import annotations

import numpy as np
import onnx.defs
from onnx import helper

from rill.graph import dtypes
from rill.graph.onnx import import_conv as _conv
from rill.graph.onnx import import_quant as _q
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op
from rill.graph.tensor_util import constant_value

_MS = "com.microsoft"
_F32, _F64, _I32 = dtypes.float32, dtypes.float64, dtypes.int32

# -- schemas ---------------------------------------------------------------------------------------

_S = onnx.defs.OpSchema
_ONE, _OPT, _VAR = (_S.FormalParameterOption.Single, _S.FormalParameterOption.Optional,
                    _S.FormalParameterOption.Variadic)  # fmt: skip
_INT8S = ["tensor(int8)", "tensor(uint8)"]
_TYPES = {"T": _INT8S, "TF": ["tensor(float)"], "TB": ["tensor(int32)"],
          "TY": ["tensor(float)", *_INT8S], "TV": [*_INT8S, "tensor(float)"],
          "TU": ["tensor(uint8)"], "TZ": ["tensor(uint8)", "tensor(float)"]}  # fmt: skip


def _schema(name: str, inputs, outputs, attrs=()) -> None:
    """Registers com.microsoft::name with onnx: inputs as (name, type, optional), attrs as
    (name, default AttributeProto or an AttrType for a required one)."""
    if onnx.defs.has(name, _MS):
        return
    ins = []
    for iname, t, opt in inputs:
        if opt == "variadic":
            ins.append(_S.FormalParameter(iname, t, param_option=_VAR, is_homogeneous=False))
        else:
            ins.append(_S.FormalParameter(iname, t, param_option=_OPT if opt else _ONE))
    outs = [_S.FormalParameter(o, t) for o, t in outputs]
    used = {p.type_str for p in ins + outs}
    tcs = [(k, v, "") for k, v in _TYPES.items() if k in used]
    attributes = [_S.Attribute(a, d) if isinstance(d, onnx.AttributeProto) else
                  _S.Attribute(a, d, required=False) for a, d in attrs]  # fmt: skip
    doc = f"onnxruntime's contrib op {name}"
    schema = _S(name, _MS, 1, doc, inputs=ins, outputs=outs, type_constraints=tcs,
                attributes=attributes)  # fmt: skip
    onnx.defs.register_schema(schema)


def _unary(x: str) -> list:
    return [(x, "T", 0), (f"{x}_scale", "TF", 0), (f"{x}_zero_point", "T", 1),
            ("Y_scale", "TF", 0), ("Y_zero_point", "T", 1)]  # fmt: skip


def _binary() -> list:
    return [("A", "T", 0), ("A_scale", "TF", 0), ("A_zero_point", "T", 1), ("B", "T", 0),
            ("B_scale", "TF", 0), ("B_zero_point", "T", 1), ("C_scale", "TF", 0),
            ("C_zero_point", "T", 1)]  # fmt: skip


_AT = _S.AttrType
_schema("QLinearAdd", _binary(), [("C", "T")])
_schema("QLinearMul", _binary(), [("C", "T")])
_schema("QLinearSigmoid", _unary("X"), [("Y", "T")])
_schema("QLinearLeakyRelu", _unary("X"), [("Y", "T")],
        [("alpha", helper.make_attribute("alpha", 0.01))])  # fmt: skip
_schema("QLinearGlobalAveragePool", _unary("X"), [("Y", "T")],
        [("channels_last", helper.make_attribute("channels_last", 0))])  # fmt: skip
_schema("QLinearAveragePool", _unary("X"), [("Y", "T")],
        [("auto_pad", helper.make_attribute("auto_pad", "NOTSET")),
         ("ceil_mode", helper.make_attribute("ceil_mode", 0)),
         ("channels_last", helper.make_attribute("channels_last", 0)),
         ("count_include_pad", helper.make_attribute("count_include_pad", 0)),
         ("kernel_shape", _AT.INTS), ("pads", _AT.INTS), ("strides", _AT.INTS)])  # fmt: skip
_schema("MatMulNBits", [("A", "TF", 0), ("B", "TU", 0), ("scales", "TF", 0),
                       ("zero_points", "TZ", 1), ("g_idx", "TB", 1), ("bias", "TF", 1)],
        [("Y", "TF")],
        [("K", _AT.INT), ("N", _AT.INT), ("bits", helper.make_attribute("bits", 4)),
         ("block_size", _AT.INT), ("accuracy_level", helper.make_attribute("accuracy_level", 0)),
         ("weight_prepacked", helper.make_attribute("weight_prepacked", 0))])  # fmt: skip
_schema("QLinearSoftmax", _unary("X"), [("Y", "T")],
        [("axis", _AT.INT), ("opset", _AT.INT)])  # fmt: skip
_schema("QLinearConcat", [("Y_scale", "TF", 0), ("Y_zero_point", "T", 0),
                          ("inputs", "TV", "variadic")], [("Y", "T")],
        [("axis", _AT.INT)])  # fmt: skip
_schema("QGemm", [("A", "T", 0), ("a_scale", "TF", 0), ("a_zero_point", "T", 0), ("B", "T", 0),
                  ("b_scale", "TF", 0), ("b_zero_point", "T", 0), ("C", "TB", 1),
                  ("y_scale", "TF", 1), ("y_zero_point", "T", 1)], [("Y", "TY")],
        [("alpha", helper.make_attribute("alpha", 1.0)),
         ("transA", helper.make_attribute("transA", 0)),
         ("transB", helper.make_attribute("transB", 0))])  # fmt: skip


# -- helpers -------------------------------------------------------------------------------------


def _check(x, zp, what: str, node: str) -> None:
    _q._check_int8(x, what, node)
    _q._same_type(x, zp, what, node)


def _dequantize(x, scale, zp, what: str, node: str):
    """(x - zp) · scale in float32, per tensor."""
    _check(x, zp, what, node)
    d = _q._centered(x, None if zp is None else _q._scalar(zp, f"{what} zero point", node))
    return op("Mul", [_q._cast(d, _F32), _q._cast(_q._scalar(scale, f"{what} scale", node), _F32)])


def _quantize(y, scale, zp, dt: dtypes.DType, node: str):
    """saturate(round(y / scale) + zp) as dt (zp's type when given), per tensor, in float32."""
    if zp is not None:
        _q._check_int8(zp, "output zero point", node)
        dt = zp.dtype
        zp = _q._scalar(zp, "output zero point", node)
    return _q._quantize(y, _q._scalar(scale, "output scale", node), zp, dt, _F32)


def _unary_rule(x, x_scale, x_zp, y_scale, y_zp, node: str, fn):
    """quantize(fn(dequantize(x)))."""
    y = fn(_dequantize(x, x_scale, x_zp, "X", node))
    return _quantize(y, y_scale, y_zp, x.dtype, node)


def _channels_first(x, channels_last: int, node: str):
    """x moved to NC... when channels_last; and the permutation back (None when it stays)."""
    r = _conv._rank(x, node)
    if not channels_last:
        return x, None
    fwd = [0, r - 1, *range(1, r - 1)]
    back = [0, *range(2, r), 1]
    return op("Transpose", [x, const(fwd, _I32)]), back


# -- elementwise -----------------------------------------------------------------------------------


def _f32(p, what: str, node: str):
    """A per-tensor scale or zero point as a float32 scalar."""
    return _q._cast(_q._scalar(p, what, node), _F32)


def _binary_type(a, a_zero_point, b, b_zero_point, c_zero_point, node: str) -> dtypes.DType:
    """The output type of a QLinear binary op (the output zero point's, else A's), after
    checking A, B and the zero points."""
    if a.dtype != b.dtype:
        raise OnnxImportError(f"{node}'s A is {a.dtype.name} but B {b.dtype.name}; they must agree")
    _check(a, a_zero_point, "A", node)
    _check(b, b_zero_point, "B", node)
    if c_zero_point is None:
        return a.dtype
    _q._check_int8(c_zero_point, "output zero point", node)
    return c_zero_point.dtype


def _fma32(x, k, t):
    """float32(x · k + t) rounded once, as an FMA instruction computes it: x an integer of at
    most 8 bits (as any type) and k a float32 make a product float64 holds exactly, so the float64 sum
    rounds to the same float32 wherever it is exact (the operands' exponents within 21 of
    each other)."""
    prod = op("Mul", [_q._cast(x, _F64), _q._cast(k, _F64)])
    return _q._cast(op("AddV2", [prod, _q._cast(t, _F64)]), _F32)


def _constant_along_last(x, other) -> bool:
    """Whether x is one value along each innermost span of the broadcast (its last dimension
    1, or x of one element, while the other operand's last dimension is longer)."""
    if _q._one_element(x):
        return True
    xs, os_ = x.shape, other.shape
    if xs.rank is None or os_.rank is None or not xs.rank or not os_.rank:
        return False
    last, other_last = xs.dims[-1], os_.dims[-1]
    return last == 1 and other_last is not None and other_last > 1


@register_onnx_import("QLinearAdd", _MS)
def qlinear_add(n, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):  # fmt: skip
    """C = quantize(dequantize(A) + dequantize(B)), in the arithmetic of onnxruntime's
    x86-64 kernel (MLAS's AVX2 QLinearAdd), so that the result is its bits, not one step
    away where a value lies near half a step: with the ratios ra = sa / sc, rb = sb / sc and
    the fixed part f = zc - fma(za, ra, rb·zb) in float32, C = round(fma(A, ra, fma(B, rb, f))),
    or, where B (or A) is one value along the innermost span, round(fma(A, ra, f + B·rb)).
    Saturated to the type; round half to even."""
    node = "QLinearAdd"
    dt = _binary_type(a, a_zero_point, b, b_zero_point, c_zero_point, node)

    def f32(p, what):
        return _f32(p, what, node)

    def zero(p, what):
        return const(0.0, _F32) if p is None else f32(p, what)

    sc = f32(c_scale, "C scale")
    ra = op("RealDiv", [f32(a_scale, "A scale"), sc])
    rb = op("RealDiv", [f32(b_scale, "B scale"), sc])
    za, zb = zero(a_zero_point, "A zero point"), zero(b_zero_point, "B zero point")
    zc = zero(c_zero_point, "output zero point")
    # (The kernel's compiler contracts ra·za + rb·zb into one fused multiply-add.)
    fixed = op("Sub", [zc, _fma32(za, ra, op("Mul", [rb, zb]))])
    if _constant_along_last(b, a):
        t = op("AddV2", [fixed, op("Mul", [_q._cast(b, _F32), rb])])
        y = _fma32(a, ra, t)
    elif _constant_along_last(a, b):
        t = op("AddV2", [fixed, op("Mul", [_q._cast(a, _F32), ra])])
        y = _fma32(b, rb, t)
    else:
        y = _fma32(a, ra, _fma32(b, rb, fixed))
    return _q._saturate(op("Round", [y]), None, dt)


@register_onnx_import("QLinearMul", _MS)
def qlinear_mul(n, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):  # fmt: skip
    """C = quantize(dequantize(A) · dequantize(B)), in the arithmetic of onnxruntime's x86-64
    kernel (MLAS's SSE2 QLinearMul), so that the result is its bits: the integer product
    (A - za)·(B - zb), exact in float32, times the float32 ratio (sa·sb)/sc, plus zc, rounded
    half to even and saturated."""
    node = "QLinearMul"
    dt = _binary_type(a, a_zero_point, b, b_zero_point, c_zero_point, node)

    def f32(p, what):
        return _f32(p, what, node)

    ratio = op("RealDiv", [op("Mul", [f32(a_scale, "A scale"), f32(b_scale, "B scale")]),
                           f32(c_scale, "C scale")])  # fmt: skip
    da = _q._centered(a, None if a_zero_point is None else _q._scalar(a_zero_point, "A zero point",
                                                                      node))  # fmt: skip
    db = _q._centered(b, None if b_zero_point is None else _q._scalar(b_zero_point, "B zero point",
                                                                      node))  # fmt: skip
    prod = _q._cast(op("Mul", [_q._cast(da, _I32), _q._cast(db, _I32)]), _F32)  # |prod| < 2^16
    y = op("Mul", [prod, ratio])
    if c_zero_point is not None:
        y = op("AddV2", [y, f32(c_zero_point, "C zero point")])
    return _q._saturate(op("Round", [y]), None, dt)


@register_onnx_import("QLinearSigmoid", _MS)
def qlinear_sigmoid(n, x, x_scale, x_zero_point, y_scale, y_zero_point=None):
    """Y = quantize(sigmoid(dequantize(X)))."""
    return _unary_rule(x, x_scale, x_zero_point, y_scale, y_zero_point, "QLinearSigmoid",
                       lambda f: op("Sigmoid", [f]))  # fmt: skip


@register_onnx_import("QLinearLeakyRelu", _MS)
def qlinear_leaky_relu(n, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *, alpha=0.01):
    """Y = quantize(leaky_relu(dequantize(X), alpha))."""
    return _unary_rule(x, x_scale, x_zero_point, y_scale, y_zero_point, "QLinearLeakyRelu",
                       lambda f: op("LeakyRelu", [f], {"alpha": float(alpha)}))  # fmt: skip


@register_onnx_import("QLinearConcat", _MS)
def qlinear_concat(n, y_scale, y_zero_point, *inputs, axis):
    """Y = quantize(concat(dequantize(x_i), axis)); inputs come as (x, scale, zero point)."""
    node = "QLinearConcat"
    if not inputs or len(inputs) % 3:
        raise OnnxImportError(
            f"{node} takes Y_scale, Y_zero_point, then (x, scale, zero point) triples; got "
            f"{len(inputs)} inputs after the first two"
        )
    parts = [_dequantize(inputs[i], inputs[i + 1], inputs[i + 2], f"input {i // 3}", node)
             for i in range(0, len(inputs), 3)]  # fmt: skip
    y = op("ConcatV2", [parts, const(int(axis), dtypes.int64)])
    return _quantize(y, y_scale, y_zero_point, inputs[0].dtype, node)


# -- pools -----------------------------------------------------------------------------------------


@register_onnx_import("QLinearGlobalAveragePool", _MS)
def qlinear_global_average_pool(n, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                                channels_last=0):  # fmt: skip
    """Y = quantize(mean of dequantize(X) over its spatial axes), kept as size-1 axes: computed
    as onnxruntime does, the int32 sum S of (x - x_zp) over the N spatial values requantized
    with one float32 multiplier, saturate(round(S · (x_scale / (N · y_scale))) + y_zp), which
    matches onnxruntime bit for bit where the float mean would not."""
    node = "QLinearGlobalAveragePool"
    r = _conv._rank(x, node)
    axes = list(range(1, r - 1)) if channels_last else list(range(2, r))
    _check(x, x_zero_point, "X", node)
    xz = None if x_zero_point is None else _q._scalar(x_zero_point, "X zero point", node)
    total = op("Sum", [_q._centered(x, xz), const(axes, _I32)], {"keep_dims": True})
    dims = [x.shape[a] for a in axes]
    if all(d is not None for d in dims):
        count = const(float(np.prod(dims)), _F32)
    else:
        shape = op("Shape", [x], {"out_type": _I32})
        count = op("Prod", [op("GatherV2", [shape, const(axes, _I32), const(0, _I32)]),
                            const(0, _I32)])  # fmt: skip
        count = _q._cast(count, _F32)
    ys = _q._cast(_q._scalar(y_scale, "output scale", node), _F32)
    xs = _q._cast(_q._scalar(x_scale, "X scale", node), _F32)
    mult = op("RealDiv", [xs, op("Mul", [count, ys])])
    if y_zero_point is None:
        return _q._requantize(total, mult, None, x.dtype)
    _q._check_int8(y_zero_point, "output zero point", node)
    yz = _q._scalar(y_zero_point, "output zero point", node)
    return _q._requantize(total, mult, yz, y_zero_point.dtype)


@register_onnx_import("QLinearAveragePool", _MS)
def qlinear_average_pool(n, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                         kernel_shape, auto_pad="NOTSET", ceil_mode=0, channels_last=0,
                         count_include_pad=0, pads=None, strides=None):  # fmt: skip
    """Y = quantize(AveragePool(dequantize(X))), ONNX AveragePool's attributes."""
    node = "QLinearAveragePool"

    def pool(f):
        f, back = _channels_first(f, channels_last, node)
        y = _conv.average_pool(n, f, kernel_shape=kernel_shape, auto_pad=auto_pad,
                               ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                               pads=pads, strides=strides)  # fmt: skip
        return y if back is None else op("Transpose", [y, const(back, _I32)])

    return _unary_rule(x, x_scale, x_zero_point, y_scale, y_zero_point, node, pool)


# -- QGemm -----------------------------------------------------------------------------------------


def _matrix(t, trans: int, what: str, node: str):
    if t.shape.rank is not None and t.shape.rank != 2:
        raise OnnxImportError(f"{node}'s {what} must be 2-D, got shape {t.shape}")
    return op("Transpose", [t, const([1, 0], _I32)]) if trans else t


@register_onnx_import("QGemm", _MS)
def qgemm(n, a, a_scale, a_zero_point, b, b_scale, b_zero_point, C=None, y_scale=None,
          y_zero_point=None, *, alpha=1.0, transA=0, transB=0):  # fmt: skip
    """acc = (A' - a_zp)·(B' - b_zp) + C in int32 (C is the bias quantized with scale
    a_scale·b_scale and zero point 0); Y = acc · alpha·a_scale·b_scale, float when y_scale is
    absent, else requantized: saturate(round(acc · alpha·a_scale·b_scale / y_scale) + y_zp).
    a's scale and zero point are per tensor, b's per tensor or per column of B'."""
    node = "QGemm"
    a2 = _matrix(a, transA, "A", node)
    b2 = _matrix(b, transB, "B", node)
    a_zp = _q._scalar(a_zero_point, "A zero point", node)
    acc = _q._int_matmul(n, a2, b2, a_zp, b_zero_point, node)
    if C is not None:
        if C.dtype is not _I32:
            raise OnnxImportError(f"{node}'s C (bias) must be int32, got {C.dtype.name}")
        acc = op("AddV2", [acc, C])
    a_s = _q._scalar(a_scale, "a_scale", node)
    b_s = _q._cols(b_scale, b2, "b_scale", node)
    scale = op("Mul", [op("Mul", [_q._cast(a_s, _F32), _q._cast(b_s, _F32)]),
                       const(float(alpha), _F32)])  # fmt: skip
    if y_scale is None:
        if y_zero_point is not None:
            raise OnnxImportError(f"{node} has y_zero_point but no y_scale; give both or neither")
        return op("Mul", [_q._cast(acc, _F32), scale])
    mult = op("RealDiv", [scale, _q._cast(_q._scalar(y_scale, "y_scale", node), _F32)])
    if y_zero_point is None:
        return _q._requantize(acc, mult, None, dtypes.uint8)
    _q._check_int8(y_zero_point, "y zero point", node)
    yz = _q._scalar(y_zero_point, "y zero point", node)
    return _q._requantize(acc, mult, yz, y_zero_point.dtype)


# -- QLinearSoftmax --------------------------------------------------------------------------------

_FLT_MAX = float(np.finfo(np.float32).max)


def _softmax_table(x_scale: float, reduce_len: int, signed: bool) -> np.ndarray:
    """onnxruntime's 256-entry table of exp over the input's steps (its QLinearSoftmax kernel):
    entry i is exp((i - 255 + shift) · x_scale) in float64 stored as float32, the shift keeping
    a row's sum below FLT_MAX; an int8 input indexes it from -128."""
    shift = max(0.0, np.log(_FLT_MAX / reduce_len) - 5.0) / np.float64(x_scale)
    values = np.exp((np.arange(256, dtype=np.float64) - 255.0 + shift) * np.float64(x_scale))
    table = values.astype(np.float32)
    if signed:
        table = table[(np.arange(256) + 128) % 256]  # entry (i - 128) mod 256 holds value i
    return table


@register_onnx_import("QLinearSoftmax", _MS)
def qlinear_softmax(n, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *, axis=None,
                    opset=13):  # fmt: skip
    """Softmax of quantized x as onnxruntime's kernel computes it, so that its bits are the
    kernel's: each row's values shifted so that its largest is 255 (127), exp read from a table
    of the input scale's steps, summed in float32 in order, and each output
    round(e · floor(1 / y_scale) / sum) + y_zero_point, saturated. The input zero point cancels
    out. Below opset 13 (the `opset` attribute, the original Softmax's) the row is everything
    from `axis` on; from 13 the one axis; `axis` is -1 when absent, at any opset, as in
    onnxruntime (its kernel's opset-dependent default never applies: the schema gives -1)."""
    node = "QLinearSoftmax"
    _check(x, x_zero_point, "X", node)
    if y_zero_point is not None:
        _q._check_int8(y_zero_point, "output zero point", node)
        if y_zero_point.dtype != x.dtype:
            raise OnnxImportError(f"{node}'s Y_zero_point must be {x.dtype.name} like X")
    rank = x.shape.rank
    if not rank:
        raise OnnxImportError(f"{node} needs an input of known rank >= 1, got shape {x.shape}")
    if axis is None:  # onnxruntime's schema default, whatever the opset
        axis = -1
    if not -rank <= axis < rank:
        raise OnnxImportError(f"{node}: axis {axis} is out of range for a rank-{rank} input")
    axis %= rank
    signed = x.dtype == dtypes.int8
    shape = x.shape
    # The rows as the last axis of xr.
    back = None
    if opset < 13:
        if not shape.is_fully_defined():
            raise OnnxImportError(f"{node} below opset 13 needs the input's shape known")
        d = int(np.prod(shape.dims[axis:], dtype=np.int64))
        xr = op("Reshape", [x, const([-1, d], _I32)])
    else:
        d = shape.dims[axis]
        xr = x
        if axis != rank - 1:
            perm = list(range(rank))
            perm[axis], perm[-1] = rank - 1, axis
            xr = op("Transpose", [x, const(perm, _I32)])
            back = perm
    _q._scalar(x_scale, "X scale", node)  # checks it is one value
    sv = constant_value(x_scale)
    if sv is None or d is None:
        raise OnnxImportError(
            f"{node} needs a constant X scale and the softmax axis's length known (its "
            "table of exp is built from them)"
        )
    table = const(_softmax_table(float(np.float32(np.ravel(sv)[0])), int(d), signed), _F32)
    xi = _q._cast(xr, _I32)
    top = op("Max", [xi, const(-1, _I32)], {"keep_dims": True})
    at = op("Sub", [xi, top])
    at = op("AddV2", [at, const(127 if signed else 255, _I32)])
    if signed:
        at = op("FloorMod", [at, const(256, _I32)])
    e = op("GatherV2", [table, at, const(0, _I32)])
    total = op("Cumsum", [e, const(-1, _I32)])  # float32 in order, as the kernel adds
    total = op(
        "StridedSlice",
        [total, const([0, -1], _I32), const([0, 0], _I32), const([1, 1], _I32)],
        {
            "begin_mask": 0,
            "end_mask": 2,
            "ellipsis_mask": 1,
            "new_axis_mask": 0,
            "shrink_axis_mask": 0,
        },
    )  # fmt: skip  (total[..., -1:])
    inv = op("Floor", [op("RealDiv", [const(1.0, _F32), _f32(y_scale, "Y scale", node)])])
    q = op("Round", [op("RealDiv", [op("Mul", [e, inv]), total])])
    q = _q._cast(q, dtypes.int64)
    if y_zero_point is not None:
        q = op("AddV2", [q, _q._cast(_q._scalar(y_zero_point, "Y zero point", node),
                                    dtypes.int64)])  # fmt: skip
    y = _q._saturate(q, None, x.dtype)
    if opset < 13:
        return op("Reshape", [y, op("Shape", [x], {"out_type": _I32})])
    if back is not None:
        y = op("Transpose", [y, const(back, _I32)])
    return y


# -- MatMulNBits -----------------------------------------------------------------------------------


def _unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` codes of each row of `packed` (uint8 [..., bytes]), `bits` bits each,
    packed low bits first within each byte (MatMulNBits' layout)."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(*packed.shape[:-1], -1)[..., :count]


@register_onnx_import("MatMulNBits", _MS)
def matmul_nbits(n, a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, bits=4,
                 block_size, accuracy_level=0, weight_prepacked=0):  # fmt: skip
    """A @ dequantize(B)ᵀ (+ bias): B's codes (N rows of K, in blocks of block_size along K,
    each block a blob of block_size·bits/8 bytes, low bits first) minus their block's zero
    point (packed like B, or float; 2^(bits-1) when absent), times its scale. The weights are
    constants: they are dequantized once, here, into a float K × N matrix (the products then
    run as float32 MatMuls, as onnxruntime's default accuracy level computes them, up to the
    order of the sums). The deprecated g_idx input is refused."""
    node = "MatMulNBits"
    del accuracy_level  # a hint for how A may be computed in; the float product is exact
    if weight_prepacked:
        raise OnnxImportError(f"{node}: prepacked weights (a runtime-specific layout) are not "
                              "supported")  # fmt: skip
    if bits not in (2, 4, 8):
        raise OnnxImportError(f"{node}: bits={bits} is not supported (2, 4 or 8)")
    if block_size < 16 or block_size & (block_size - 1):
        raise OnnxImportError(f"{node}: block_size {block_size} must be a power of 2, >= 16")
    k_blocks = -(-K // block_size)
    blob = block_size * bits // 8
    codes = constant_value(b)
    scale = constant_value(scales)
    if codes is None or scale is None:
        raise OnnxImportError(f"{node}: B and scales must be constants (the model's weights)")
    if codes.shape != (N, k_blocks, blob):
        raise OnnxImportError(
            f"{node}: B has shape {list(codes.shape)}; K={K}, N={N}, bits={bits} and "
            f"block_size={block_size} make it [{N}, {k_blocks}, {blob}]"
        )
    if scale.size != N * k_blocks:
        raise OnnxImportError(
            f"{node}: scales has {scale.size} values; N x blocks is {N * k_blocks}"
        )
    scale = scale.reshape(N, k_blocks).astype(np.float32)
    q = _unpack_bits(codes, bits, block_size).reshape(N, k_blocks * block_size)[:, :K]
    if zero_points is None:
        zp = np.full((N, k_blocks), 1 << (bits - 1), np.float32)
    else:
        zv = constant_value(zero_points)
        if zv is None:
            raise OnnxImportError(f"{node}: zero_points must be a constant")
        if zv.dtype == np.uint8:
            per_row = -(-k_blocks * bits // 8)
            if zv.size != N * per_row:
                raise OnnxImportError(
                    f"{node}: packed zero_points has {zv.size} bytes; N x "
                    f"ceil(blocks·bits/8) is {N * per_row}"
                )
            zp = _unpack_bits(zv.reshape(N, per_row), bits, k_blocks).astype(np.float32)
        else:
            if zv.size != N * k_blocks:
                raise OnnxImportError(
                    f"{node}: zero_points has {zv.size} values; N x blocks is {N * k_blocks}"
                )
            zp = zv.reshape(N, k_blocks).astype(np.float32)
    if g_idx is not None:
        raise OnnxImportError(f"{node}: the deprecated g_idx input is not supported (re-quantize "
                              "without act-order, or with onnxruntime's current quantizer)")  # fmt: skip
    block_of = np.arange(K) // block_size
    # (code - zero point) · scale in float32, as DequantizeLinear-style dequantization does.
    w = (q.astype(np.float32) - zp[:, block_of]) * scale[:, block_of]  # [N, K]
    weights = const(np.ascontiguousarray(w.T), _F32)  # [K, N]
    rank = a.shape.rank
    if rank is None or rank < 2:
        raise OnnxImportError(f"{node} needs an input of known rank >= 2, got shape {a.shape}")
    flat = op("Reshape", [a, const([-1, K], _I32)])
    y = op("MatMul", [flat, weights])
    if bias is not None:
        y = op("AddV2", [y, bias])
    lead = op("StridedSlice", [op("Shape", [a], {"out_type": _I32}), const([0], _I32),
                               const([-1], _I32), const([1], _I32)],
              {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
               "shrink_axis_mask": 0})  # fmt: skip
    shape = op("ConcatV2", [[lead, const([N], _I32)], const(0, _I32)])
    return op("Reshape", [y, shape])
