"""ONNX export rules: bitwise ops and shifts, cumulative products, Expm1, the TensorScatter
reductions, string joins, and the internal ops of ONNX's BitCast, Unique, Col2Im and DFT that the
importer builds.

Each rule writes exactly what the rill op computes, and refuses (naming the ONNX op and the
opset it needs) where the target opset lacks the ONNX op or the op lacks the element type:
BitwiseAnd/Or/Xor/Not and Col2Im need opset 18, StringConcat 20, CumProd and BitCast 26, DFT 17,
ScatterND's add 16 and its max and min 18. StringSplitV2 has no rule: its sparse outputs (indices,
values, dense shape) with a separator that may be a runtime tensor do not map onto StringSplit's
padded ones with a delimiter attribute.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from rill.graph import dtypes
from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export
from rill.graph.ops.onnx_signal_ops import dft_axis


def _type_name(dtype) -> str:
    """The name ONNX's schemas give a rill dtype: "float" for float32, "float8e4m3fn", ..."""
    return TensorProto.DataType.Name(onnx_dtype(dtype)).lower()


def _need(ctx, onnx_type: str, since: int, *dtypes, what: str = "") -> None:
    """Refuses unless the target opset has `onnx_type` (from opset `since`) taking `dtypes`."""
    if ctx.opset < since:
        ctx.unsupported(f"ONNX has {onnx_type}{what} from opset {since}; the export asked for "
                        f"opset {ctx.opset}")  # fmt: skip
    schema = onnx.defs.get_schema(onnx_type, ctx.opset)
    allowed = set().union(*(c.allowed_type_strs for c in schema.type_constraints))
    for dt in dtypes:
        try:
            name = f"tensor({_type_name(dt)})"
        except ValueError:
            name = None
        if name not in allowed:
            ctx.unsupported(f"ONNX's {onnx_type} (opset {schema.since_version}) does not take "
                            f"{dt.name}")  # fmt: skip


# -- bitwise ops -------------------------------------------------------------------------------

_BITWISE = {"BitwiseAnd": "BitwiseAnd", "BitwiseOr": "BitwiseOr", "BitwiseXor": "BitwiseXor"}


def _bitwise_rule(onnx_type):
    def rule(ctx, op):
        _need(ctx, onnx_type, 18, op.attrs["T"])
        ctx.elementwise(op, onnx_type)

    return rule


for _rill, _onnx in _BITWISE.items():
    register_onnx_export(_rill)(_bitwise_rule(_onnx))


@register_onnx_export("Invert")
def invert(ctx, op):
    _need(ctx, "BitwiseNot", 18, op.attrs["T"])
    ctx.unary(op, "BitwiseNot")


@register_onnx_export("LeftShift", "RightShift")
def shift(ctx, op):
    """BitShift by the count clamped to [0, bits - 1], as TensorFlow's shifts clamp it (ONNX's
    BitShift gives the sign fill alone for a count outside). Signed types before opset 28, whose
    BitShift takes unsigned ones only: a left shift is the unsigned one on the bits (Cast between
    integers of one width keeps them); an arithmetic right shift of a negative x is
    ~(~x >> count), with ~v = -1 - v (never overflows)."""
    t = op.attrs["T"]
    bits = t.np.itemsize * 8
    (x, y), layout = ctx.broadcast_values(op._inputs)
    lo, hi = (ctx.initializer(np.array(v, t.np)) for v in (0, bits - 1))
    count = ctx.node("Clip", [y, lo, hi])
    direction = "LEFT" if op.type == "LeftShift" else "RIGHT"
    if t.is_unsigned or ctx.opset >= 28:
        ctx.node("BitShift", [x, count], op.outputs[0], layout=layout, direction=direction)
        return
    u = onnx_dtype(dtypes.as_dtype(np.dtype(f"uint{bits}")))
    count = ctx.node("Cast", [count], to=u)
    if direction == "LEFT":
        shifted = ctx.node("BitShift", [ctx.node("Cast", [x], to=u), count], direction="LEFT")
        ctx.node("Cast", [shifted], op.outputs[0], layout=layout, to=onnx_dtype(t))
        return
    minus_one = ctx.initializer(np.array(-1, t.np))
    negative = ctx.node("Less", [x, ctx.initializer(np.array(0, t.np))])
    flipped = ctx.node("Where", [negative, ctx.node("Sub", [minus_one, x]), x])
    shifted = ctx.node("BitShift", [ctx.node("Cast", [flipped], to=u), count], direction="RIGHT")
    r = ctx.node("Cast", [shifted], to=onnx_dtype(t))
    ctx.node("Where", [negative, ctx.node("Sub", [minus_one, r]), r], op.outputs[0],
             layout=layout)  # fmt: skip


# -- math --------------------------------------------------------------------------------------


@register_onnx_export("Cumprod")
def cumprod(ctx, op):
    x, axis = op._inputs
    _need(ctx, "CumProd", 26, op.attrs["T"])
    ctx.node("CumProd", [ctx.value(x), ctx.value(axis)], op.outputs[0],
             exclusive=int(op.attrs["exclusive"]), reverse=int(op.attrs["reverse"]))  # fmt: skip


@register_onnx_export("Expm1")
def expm1(ctx, op):
    """exp(x) - 1 in x's dtype: loses expm1's precision for |x| far below 1."""
    x = op._inputs[0]
    if x.dtype.is_complex:
        ctx.unsupported("ONNX runtimes have no complex tensors")
    name, layout = ctx.value_any(x)
    ctx.node("Sub", [ctx.node("Exp", [name]), ctx.scalar_like(1, x)], op.outputs[0],
             layout=layout)  # fmt: skip


# -- TensorScatter reductions ------------------------------------------------------------------

_SCATTER = {"TensorScatterAdd": ("add", 16), "TensorScatterSub": ("add", 16),
            "TensorScatterMax": ("max", 18), "TensorScatterMin": ("min", 18)}  # fmt: skip


@register_onnx_export(*_SCATTER)
def tensor_scatter(ctx, op):
    """ScatterND with a reduction, which combines repeated indices as TensorFlow does;
    TensorScatterSub adds the negated updates (x - u is x + (-u) in IEEE arithmetic, and for
    unsigned integers 0 - u wraps as the subtraction does)."""
    reduction, since = _SCATTER[op.type]
    _need(ctx, "ScatterND", since, op.attrs["T"], what=f" with reduction='{reduction}'")
    tensor, indices, updates = op._inputs
    upd = ctx.value(updates)
    if op.type == "TensorScatterSub":
        if updates.dtype.is_unsigned:
            upd = ctx.node("Sub", [ctx.scalar_like(0, updates), upd])
        else:
            upd = ctx.node("Neg", [upd])
    ctx.node("ScatterND", [ctx.value(tensor), ctx.int64(indices), upd], op.outputs[0],
             reduction=reduction)  # fmt: skip


# -- strings -----------------------------------------------------------------------------------


@register_onnx_export("StringJoin")
def string_join(ctx, op):
    """A chain of StringConcat (which broadcasts as StringJoin does), the separator between
    each two inputs."""
    inputs = list(op._inputs)
    if not inputs:
        ctx.unsupported("a join of no inputs has no ONNX equivalent")
    if len(inputs) == 1:
        ctx.bind(op.outputs[0], *ctx.value_any(inputs[0]))
        return
    _need(ctx, "StringConcat", 20)
    sep = op.attrs["separator"]
    sep = sep if isinstance(sep, bytes) else str(sep).encode("utf-8")
    sep_name = ctx.initializer(np.array(sep, dtype=object)) if sep else None
    names = [ctx.value(t) for t in inputs]
    acc = names[0]
    for k, name in enumerate(names[1:], 1):
        if sep_name is not None:
            acc = ctx.node("StringConcat", [acc, sep_name])
        out = op.outputs[0] if k == len(names) - 1 else None
        acc = ctx.node("StringConcat", [acc, name], out)


# -- the importer's own ops --------------------------------------------------------------------


@register_onnx_export("_OnnxBitCast")
def bit_cast(ctx, op):
    src, dst = op.attrs["T"], op.attrs["out_type"]
    _need(ctx, "BitCast", 26, src, dst)
    ctx.unary(op, "BitCast", to=onnx_dtype(dst))


@register_onnx_export("_OnnxUnique")
def unique(ctx, op):
    _need(ctx, "Unique", 11, op.attrs["T"])
    axis = op.attrs["axis"]
    ctx.node("Unique", [ctx.value(op._inputs[0])], list(op.outputs),
             axis=int(axis[0]) if axis else None, sorted=int(op.attrs["sorted"]))  # fmt: skip


@register_onnx_export("_OnnxCol2Im")
def col2im(ctx, op):
    _need(ctx, "Col2Im", 18, op.attrs["T"])
    x, image_shape, block_shape = op._inputs
    attrs = {k: list(op.attrs[k]) or None for k in ("dilations", "pads", "strides")}
    ctx.node("Col2Im", [ctx.value(x), ctx.int64(image_shape), ctx.int64(block_shape)],
             op.outputs[0], **attrs)  # fmt: skip


@register_onnx_export("_OnnxDFT")
def dft(ctx, op):
    """DFT: the axis is an attribute at opsets 17 to 19 (it must be known at export time),
    an input from opset 20."""
    _need(ctx, "DFT", 17, op.attrs["T"])
    x, axis, *lengths = op._inputs
    attrs = {"inverse": int(op.attrs["inverse"]), "onesided": int(op.attrs["onesided"])}
    ins = [ctx.value(x), ctx.int64(lengths[0]) if lengths else ""]
    if ctx.opset >= 20:
        ins.append(ctx.int64(axis))
    else:
        a = int(ctx.require_const(axis, "axis (an attribute of DFT before opset 20)"))
        rank = x.shape.rank
        attrs["axis"] = dft_axis(a, rank) if rank is not None else a
    while ins[-1] == "":
        ins.pop()
    ctx.node("DFT", ins, op.outputs[0], **attrs)
