"""TFLite rules for element-wise math, comparisons, selection, reductions and shape ops that map
one-to-one onto a builtin operator (float path; the int8 quantizer leaves them in float unless
it knows them).

Axis-like operands (reduction axes, ArgMax's dimension, Tile's multiples, Slice's bounds,
ReverseV2's axes) must be constant after freezing, as for the array family.
"""

from __future__ import annotations

import numpy as np
from tflite.BuiltinOperator import BuiltinOperator

from rill.mobile.convert.ir import OPCODES, OPTIONS_TABLE, TENSOR_TYPES, TensorIR
from rill.mobile.convert.registry import op_error, register_tflite

_UNARY = {
    "Neg": ("NEG", "NegOptions"),
    "Abs": ("ABS", "AbsOptions"),
    "Exp": ("EXP", "ExpOptions"),
    "Log": ("LOG", None),
    "Sqrt": ("SQRT", None),
    "Rsqrt": ("RSQRT", None),
    "Square": ("SQUARE", "SquareOptions"),
    "Floor": ("FLOOR", None),
    "Elu": ("ELU", None),
    "Round": ("ROUND", None),
    "LogSoftmax": ("LOG_SOFTMAX", "LogSoftmaxOptions"),
    "LogicalNot": ("LOGICAL_NOT", "LogicalNotOptions"),
}
_BINARY = {
    "RealDiv": ("DIV", "DivOptions"),
    "Maximum": ("MAXIMUM", "MaximumMinimumOptions"),
    "Minimum": ("MINIMUM", "MaximumMinimumOptions"),
    "Pow": ("POW", "PowOptions"),
    "SquaredDifference": ("SQUARED_DIFFERENCE", "SquaredDifferenceOptions"),
    "FloorDiv": ("FLOOR_DIV", "FloorDivOptions"),
    "FloorMod": ("FLOOR_MOD", "FloorModOptions"),
    "Less": ("LESS", "LessOptions"),
    "LessEqual": ("LESS_EQUAL", "LessEqualOptions"),
    "Greater": ("GREATER", "GreaterOptions"),
    "GreaterEqual": ("GREATER_EQUAL", "GreaterEqualOptions"),
    "Equal": ("EQUAL", "EqualOptions"),
    "NotEqual": ("NOT_EQUAL", "NotEqualOptions"),
    "LogicalAnd": ("LOGICAL_AND", "LogicalAndOptions"),
    "LogicalOr": ("LOGICAL_OR", "LogicalOrOptions"),
}
_REDUCE = {"Sum": "SUM", "Max": "REDUCE_MAX", "Min": "REDUCE_MIN", "Prod": "REDUCE_PROD"}
_OTHER_OPTIONS = {
    "SELECT": "SelectOptions",
    "SELECT_V2": "SelectV2Options",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "PACK": "PackOptions",
    "UNPACK": "UnpackOptions",
    "TILE": "TileOptions",
    "SLICE": "SliceOptions",
    "CAST": "CastOptions",
    "REVERSE_V2": "ReverseV2Options",
    "SHAPE": "ShapeOptions",
}
for _code, _table in [*_UNARY.values(), *_BINARY.values(), *_OTHER_OPTIONS.items()]:
    OPTIONS_TABLE.setdefault(_code, _table)
    OPCODES.setdefault(_code, getattr(BuiltinOperator, _code))


def _unary(code: str):
    def rule(ctx, op) -> None:
        ctx.emit(code, [ctx.input(op.inputs[0])], [ctx.output(op.outputs[0], op)], {}, op)

    return rule


def _binary(code: str):
    def rule(ctx, op) -> None:
        a, b = op.inputs
        ins = [ctx.input(a), ctx.input(b)]
        if code == "DIV":
            act, t, fused = ctx.fuse_activation(op.outputs[0])
            ctx.emit(code, ins, [ctx.output(t, op)], {"fused_activation_function": act}, op, fused)
            return
        ctx.emit(code, ins, [ctx.output(op.outputs[0], op)], {}, op)

    return rule


for _name, (_code, _) in _UNARY.items():
    register_tflite(_name)(_unary(_code))
for _name, (_code, _) in _BINARY.items():
    register_tflite(_name)(_binary(_code))


def _select(code: str):
    def rule(ctx, op) -> None:
        ins = [ctx.input(t) for t in op.inputs]
        ctx.emit(code, ins, [ctx.output(op.outputs[0], op)], {}, op)

    return rule


register_tflite("Select")(_select("SELECT"))
register_tflite("SelectV2")(_select("SELECT_V2"))


def _ints(ctx, op, t, what: str) -> np.ndarray:
    value = np.asarray(ctx.require_const(op, t, what))
    if value.dtype.kind not in "iu":
        raise op_error(op, f"its {what} ({t.name}) must be integers, not {value.dtype}")
    return value.astype(np.int32)


def _reduce(code: str):
    def rule(ctx, op) -> None:
        x, axes = op.inputs
        axis = np.atleast_1d(_ints(ctx, op, axes, "reduction axes"))
        rank = x.shape.rank
        if rank is not None:
            axis = np.where(axis < 0, axis + rank, axis).astype(np.int32)
        ins = [ctx.input(x), ctx.int32_const(axis, axes.op.name)]
        options = {"keep_dims": bool(op.attrs.get("keep_dims"))}
        ctx.emit(code, ins, [ctx.output(op.outputs[0], op)], options, op)

    return rule


for _name, _code in _REDUCE.items():
    register_tflite(_name)(_reduce(_code))


def _argminmax(code: str):
    def rule(ctx, op) -> None:
        x, dim = op.inputs
        axis = np.atleast_1d(_ints(ctx, op, dim, "dimension"))
        out_type = np.dtype(op.attrs.get("output_type").np)
        ins = [ctx.input(x), ctx.int32_const(axis, dim.op.name)]
        options = {"output_type": TENSOR_TYPES[out_type]}
        ctx.emit(code, ins, [ctx.output(op.outputs[0], op)], options, op)

    return rule


register_tflite("ArgMax")(_argminmax("ARG_MAX"))
register_tflite("ArgMin")(_argminmax("ARG_MIN"))


@register_tflite("Pack")
def _pack(ctx, op) -> None:
    # Constant operands take the declared element shape (a frozen scalar can come as [1]).
    shapes = [t.shape.as_list() if t.shape.rank is not None else None for t in op.inputs]
    known = next((s for s in shapes if s is not None and None not in s), None)
    ins = []
    for t in op.inputs:
        value = ctx.const_value(t)
        if value is not None and known is not None and np.size(value) == int(np.prod(known)):
            ins.append(ctx.const(np.reshape(value, known), t.op.name))
        else:
            ins.append(ctx.input(t))
    options = {"values_count": len(ins), "axis": int(op.attrs.get("axis", 0))}
    ctx.emit("PACK", ins, [ctx.output(op.outputs[0], op)], options, op)


@register_tflite("Unpack")
def _unpack(ctx, op) -> None:
    outs = [ctx.output(t, op) for t in op.outputs]
    options = {"num": len(outs), "axis": int(op.attrs.get("axis", 0))}
    ctx.emit("UNPACK", [ctx.input(op.inputs[0])], outs, options, op)


@register_tflite("Tile")
def _tile(ctx, op) -> None:
    x, m = op.inputs
    ins = [ctx.input(x), ctx.int32_const(_ints(ctx, op, m, "multiples"), m.op.name)]
    ctx.emit("TILE", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("Slice")
def _slice(ctx, op) -> None:
    x, begin, size = op.inputs
    ins = [ctx.input(x), ctx.int32_const(_ints(ctx, op, begin, "begin"), begin.op.name),
           ctx.int32_const(_ints(ctx, op, size, "size"), size.op.name)]  # fmt: skip
    ctx.emit("SLICE", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("ReverseV2")
def _reverse(ctx, op) -> None:
    x, axes = op.inputs
    ins = [ctx.input(x), ctx.int32_const(_ints(ctx, op, axes, "axes"), axes.op.name)]
    ctx.emit("REVERSE_V2", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("Cast")
def _cast(ctx, op) -> None:
    src = np.dtype(op.attrs["SrcT"].np)
    dst = np.dtype(op.attrs["DstT"].np)
    if src not in TENSOR_TYPES or dst not in TENSOR_TYPES:
        raise op_error(op, f"a cast from {src} to {dst}; TFLite types here are "
                           f"{sorted(str(d) for d in TENSOR_TYPES)}")  # fmt: skip
    options = {"in_data_type": TENSOR_TYPES[src], "out_data_type": TENSOR_TYPES[dst]}
    ctx.emit("CAST", [ctx.input(op.inputs[0])], [ctx.output(op.outputs[0], op)], options, op)


@register_tflite("Shape")
def _shape(ctx, op) -> None:
    out_type = np.dtype(op.attrs.get("out_type").np)
    options = {"out_type": TENSOR_TYPES[out_type]}
    ctx.emit("SHAPE", [ctx.input(op.inputs[0])], [ctx.output(op.outputs[0], op)], options, op)


# -- splitting, indexing, padding, filling ------------------------------------------------------

for _code, _table in {
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "GATHER_ND": "GatherNdOptions",
    "ONE_HOT": "OneHotOptions",
    "TOPK_V2": "TopKV2Options",
    "CUMSUM": "CumsumOptions",
    "MIRROR_PAD": "MirrorPadOptions",
    "PADV2": "PadV2Options",
    "BROADCAST_TO": "BroadcastToOptions",
    "ZEROS_LIKE": "ZerosLikeOptions",
    "FILL": "FillOptions",
    "RANGE": "RangeOptions",
}.items():
    OPTIONS_TABLE.setdefault(_code, _table)
    OPCODES.setdefault(_code, getattr(BuiltinOperator, _code))


def _outs(ctx, op):
    return [ctx.output(t, op) for t in op.outputs]


@register_tflite("Split")
def _split(ctx, op) -> None:
    axis_t, x = op.inputs
    axis = np.atleast_1d(_ints(ctx, op, axis_t, "split axis"))[:1].reshape(())
    ins = [ctx.int32_const(axis, axis_t.op.name), ctx.input(x)]
    ctx.emit("SPLIT", ins, _outs(ctx, op), {"num_splits": len(op.outputs)}, op)


@register_tflite("SplitV")
def _split_v(ctx, op) -> None:
    x, sizes, axis_t = op.inputs
    axis = np.atleast_1d(_ints(ctx, op, axis_t, "split axis"))[:1].reshape(())
    ins = [ctx.input(x), ctx.int32_const(_ints(ctx, op, sizes, "split sizes"), sizes.op.name),
           ctx.int32_const(axis, axis_t.op.name)]  # fmt: skip
    ctx.emit("SPLIT_V", ins, _outs(ctx, op), {"num_splits": len(op.outputs)}, op)


def _plain(code: str, options=None):
    def rule(ctx, op) -> None:
        opts = options(op) if callable(options) else {}
        ctx.emit(code, [ctx.input(t) for t in op.inputs], _outs(ctx, op), opts, op)

    return rule


register_tflite("GatherNd")(_plain("GATHER_ND"))
register_tflite("TopKV2")(_plain("TOPK_V2"))
register_tflite("BroadcastTo")(_plain("BROADCAST_TO"))
register_tflite("ZerosLike")(_plain("ZEROS_LIKE"))


@register_tflite("OnesLike")
def _ones_like(ctx, op) -> None:
    # TFLite has no ONES_LIKE builtin: FILL(SHAPE(x), 1), as TensorFlow's converter writes it.
    (x,) = op.inputs
    shape = ctx.model.add_tensor(
        TensorIR(
            ctx.model.unique_name(f"{op.name}/shape"), np.dtype(np.int32), (len(x.shape.as_list()),)
        )  # fmt: skip
    )
    ctx.emit("SHAPE", [ctx.input(x)], [shape], {"out_type": TENSOR_TYPES[np.dtype(np.int32)]}, op)
    one = ctx.const(np.ones((), np.dtype(x.dtype.np)), f"{op.name}/one")
    ctx.emit("FILL", [shape, one], _outs(ctx, op), {}, op)


register_tflite("Fill")(_plain("FILL"))
register_tflite("Range")(_plain("RANGE"))
register_tflite("PadV2")(_plain("PADV2"))
register_tflite("OneHot")(_plain("ONE_HOT", lambda op: {"axis": int(op.attrs.get("axis", -1))}))
register_tflite("Cumsum")(_plain("CUMSUM", lambda op: {
    "exclusive": bool(op.attrs.get("exclusive")), "reverse": bool(op.attrs.get("reverse"))}))  # fmt: skip


@register_tflite("MirrorPad")
def _mirror_pad(ctx, op) -> None:
    mode = op.attrs.get("mode", "REFLECT")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise op_error(op, f"mirror padding mode {mode!r}")
    ins = [ctx.input(t) for t in op.inputs]
    ctx.emit("MIRROR_PAD", ins, _outs(ctx, op), {"mode": 0 if mode == "REFLECT" else 1}, op)


OPTIONS_TABLE.setdefault("TRANSPOSE_CONV", "TransposeConvOptions")
OPCODES.setdefault("TRANSPOSE_CONV", BuiltinOperator.TRANSPOSE_CONV)


@register_tflite("Conv2DBackpropInput")
def _transpose_conv(ctx, op) -> None:
    """conv2d_transpose: the output shape and the filter must be constants; TensorFlow's filter
    [KH, KW, C_out, C_in] becomes TFLite's [C_out, KH, KW, C_in]."""
    sizes, filt, x = op.inputs
    if op.attrs.get("data_format", "NHWC") not in ("NHWC", b"NHWC"):
        raise op_error(op, "only NHWC transposed convolutions convert")
    dil = list(op.attrs.get("dilations") or [1, 1, 1, 1])
    if any(d != 1 for d in dil):
        raise op_error(op, f"dilations {dil} (TRANSPOSE_CONV has none)")
    strides = list(op.attrs["strides"])
    padding = op.attrs["padding"]
    padding = padding.decode() if isinstance(padding, bytes) else str(padding)
    if padding not in ("SAME", "VALID"):
        raise op_error(op, f"padding {padding!r}")
    w = np.asarray(ctx.require_const(op, filt, "filter"), np.float32).transpose(2, 0, 1, 3)
    ins = [ctx.int32_const(_ints(ctx, op, sizes, "output shape"), sizes.op.name),
           ctx.const(np.ascontiguousarray(w), filt.op.name), ctx.input(x)]  # fmt: skip
    options = {"padding": 0 if padding == "SAME" else 1, "stride_w": int(strides[2]),
               "stride_h": int(strides[1])}  # fmt: skip
    ctx.emit("TRANSPOSE_CONV", ins, _outs(ctx, op), options, op)
