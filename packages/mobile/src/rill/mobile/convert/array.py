"""TFLite rules for the array family: reshaping, joining, slicing, gathering, identities.

Shape-like operands (new shapes, paddings, permutations, axes, slice bounds) must be constant
after freezing; they become int32 constant tensors. Identity-like ops emit nothing: their output
is bound to their input's tensor.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.convert.registry import op_error, register_tflite


def _identity(ctx, op) -> None:
    ctx.alias(op.outputs[0], ctx.input(op.inputs[0]))


for _name in ("Identity", "StopGradient"):
    register_tflite(_name)(_identity)


@register_tflite("IdentityN")
def _identity_n(ctx, op) -> None:
    for t, out in zip(op.inputs, op.outputs):
        ctx.alias(out, ctx.input(t))


def _int32(ctx, op, t, what: str) -> np.ndarray:
    value = np.asarray(ctx.require_const(op, t, what))
    if value.dtype.kind not in "iu":
        raise op_error(op, f"its {what} ({t.name}) must be integers, not {value.dtype}")
    return value.astype(np.int32)


@register_tflite("Reshape")
def _reshape(ctx, op) -> None:
    x, shape = op.inputs
    out = ctx.output(op.outputs[0], op)
    if ctx.const_value(shape) is None:
        # A computed shape (a dynamic batch: Shape, StridedSlice, Pack), as TF's converter
        # writes it: the shape is RESHAPE's second input, no new_shape option.
        ctx.emit("RESHAPE", [ctx.input(x), ctx.input(shape)], [out], {}, op)
        return
    new_shape = _int32(ctx, op, shape, "shape").reshape(-1)
    ins = [ctx.input(x), ctx.int32_const(new_shape, shape.op.name)]
    ctx.emit("RESHAPE", ins, [out], {"new_shape": new_shape.tolist()}, op)


@register_tflite("Squeeze")
def _squeeze(ctx, op) -> None:
    x = op.inputs[0]
    dims = list(op.attrs.get("squeeze_dims") or ())
    if not dims:
        # An empty list squeezes every size-1 dim at run time, which would also squeeze a batch
        # of 1; name the dims the graph knows to be 1 instead.
        known = x.shape.as_list() if x.shape.rank is not None else None
        if known is None:
            raise op_error(op, "squeezing every size-1 dim of an input of unknown rank")
        dims = [i for i, d in enumerate(known) if d == 1]
    out = ctx.output(op.outputs[0], op)
    ctx.emit("SQUEEZE", [ctx.input(x)], [out], {"squeeze_dims": [int(d) for d in dims]}, op)


@register_tflite("ExpandDims")
def _expand_dims(ctx, op) -> None:
    x, axis = op.inputs
    a = _int32(ctx, op, axis, "axis").reshape(-1)[:1]
    ins = [ctx.input(x), ctx.int32_const(a, axis.op.name)]
    ctx.emit("EXPAND_DIMS", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("ConcatV2")
def _concat(ctx, op) -> None:
    *values, axis_t = op.inputs
    axis = int(_int32(ctx, op, axis_t, "axis").reshape(-1)[0])
    rank = op.outputs[0].shape.rank
    if axis < 0 and rank is not None:
        axis += rank
    ins = [ctx.input(v) for v in values]
    options = {"axis": axis, "fused_activation_function": 0}
    ctx.emit("CONCATENATION", ins, [ctx.output(op.outputs[0], op)], options, op)


@register_tflite("Pad")
def _pad(ctx, op) -> None:
    x, paddings = op.inputs
    ins = [ctx.input(x), ctx.int32_const(_int32(ctx, op, paddings, "paddings"), paddings.op.name)]
    ctx.emit("PAD", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("Transpose")
def _transpose(ctx, op) -> None:
    x, perm = op.inputs
    ins = [ctx.input(x), ctx.int32_const(_int32(ctx, op, perm, "permutation"), perm.op.name)]
    ctx.emit("TRANSPOSE", ins, [ctx.output(op.outputs[0], op)], {}, op)


@register_tflite("StridedSlice")
def _strided_slice(ctx, op) -> None:
    x, begin, end, strides = op.inputs
    ins = [ctx.input(x)] + [
        ctx.int32_const(_int32(ctx, op, t, what), t.op.name)
        for t, what in ((begin, "begin"), (end, "end"), (strides, "strides"))
    ]
    options = {
        k: int(op.attrs.get(k, 0))
        for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    }
    ctx.emit("STRIDED_SLICE", ins, [ctx.output(op.outputs[0], op)], options, op)


@register_tflite("GatherV2")
def _gather(ctx, op) -> None:
    params, indices, axis_t = op.inputs
    axis = int(_int32(ctx, op, axis_t, "axis").reshape(-1)[0])
    batch_dims = int(op.attrs.get("batch_dims", 0))
    ins = [ctx.input(params), ctx.input(indices)]
    options = {"axis": axis, "batch_dims": batch_dims}
    ctx.emit("GATHER", ins, [ctx.output(op.outputs[0], op)], options, op)
