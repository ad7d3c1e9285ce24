"""ONNX export of the array family: constants, placeholders and variables, identities, shapes,
reshapes, concat and split, slices, pack/unpack, transpose, tile, pads, fills, broadcasts and
reverses.

ONNX takes index arguments (shapes, axes, pads, repeats) as int64 tensors; rill's are int32 or
int64 tensors, written as int64 initializers when they are known at export time and cast
otherwise. Attributes ONNX needs at export time (Transpose's perm, Concat's axis, ...) must be
constants in the rill graph.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from rill.graph.onnx.exporter import INT64_MAX, INT64_MIN, onnx_dtype
from rill.graph.onnx.registry import register_onnx_export


def _i64(ctx, values) -> str:
    return ctx.initializer(np.asarray(values, dtype=np.int64).reshape(-1))


def _alias(ctx, op, i=0, out=0):
    ctx.bind(op.outputs[out], *ctx.value_any(op._inputs[i]))


@register_onnx_export("Const")
def const(ctx, op):
    ctx.bind(op.outputs[0], ctx.initializer(op.attrs["value"], op.name))


@register_onnx_export("Identity", "StopGradient", "PlaceholderWithDefault", "EnsureShape")
def identity(ctx, op):
    _alias(ctx, op)


@register_onnx_export("IdentityN")
def identity_n(ctx, op):
    for i, t in enumerate(op.outputs):
        if t.dtype.name != "resource":  # a variable handle (a loop's captured variable) is no
            _alias(ctx, op, i, i)  # value: its reads are frozen


@register_onnx_export("Placeholder")
def placeholder(ctx, op):
    ctx.unsupported("the placeholder is not fed: list it (or a tensor after it) in inputs")


@register_onnx_export("ReadVariableOp")
def read_variable(ctx, op):
    ctx.bind(op.outputs[0], ctx.initializer(ctx.model.frozen(op), op.name))


# -- shapes ------------------------------------------------------------------------------------


def _cast_index(ctx, op, name):
    want = op.attrs["out_type"]
    if want.name == "int64":
        ctx.bind(op.outputs[0], name)
        return
    ctx.node("Cast", [name], op.outputs[0], to=onnx_dtype(want))


@register_onnx_export("Shape")
def shape(ctx, op):
    _cast_index(ctx, op, ctx.node("Shape", [ctx.value(op._inputs[0])]))


@register_onnx_export("ShapeN")
def shape_n(ctx, op):
    want = op.attrs["out_type"]
    for x, t in zip(op._inputs, op.outputs):
        s = ctx.node("Shape", [ctx.value(x)])
        if want.name == "int64":
            ctx.bind(t, s)
        else:
            ctx.node("Cast", [s], t, to=onnx_dtype(want))


@register_onnx_export("InvertPermutation")
def invert_permutation(ctx, op):
    """y[x[i]] = i: a scatter of 0..n-1 to the positions x names."""
    x = op._inputs[0]
    xs = ctx.value(x)
    n = ctx.node("Size", [xs])
    ids = ctx.node("Range", [ctx.initializer(np.array(0, np.int64)), n,
                             ctx.initializer(np.array(1, np.int64))])  # fmt: skip
    if x.dtype.name != "int64":
        ids = ctx.node("Cast", [ids], to=onnx_dtype(x.dtype))
    ctx.node("ScatterElements", [xs, xs, ids], op.outputs[0], axis=0)


@register_onnx_export("Size")
def size(ctx, op):
    _cast_index(ctx, op, ctx.node("Size", [ctx.value_any(op._inputs[0])[0]]))


@register_onnx_export("Rank")
def rank(ctx, op):
    n = ctx.node("Size", [ctx.node("Shape", [ctx.value_any(op._inputs[0])[0]])])
    ctx.node("Cast", [n], op.outputs[0], to=TensorProto.INT32)


@register_onnx_export("Reshape")
def reshape(ctx, op):
    x, shape_t = op._inputs
    target = ctx.const(shape_t)
    attrs = {}
    if target is None or 0 in target.reshape(-1).tolist():
        # TensorFlow's 0 is an empty dimension; ONNX's means "copy" unless allowzero is set.
        if ctx.opset >= 14:
            attrs["allowzero"] = 1
        elif target is not None:
            ctx.unsupported("a 0 in the new shape needs opset 14 (Reshape's allowzero)")
    ctx.node("Reshape", [ctx.value(x), ctx.int64(shape_t)], op.outputs[0], **attrs)


@register_onnx_export("ExpandDims")
def expand_dims(ctx, op):
    x, dim = op._inputs
    axes = ctx.const(dim)
    axes_name = _i64(ctx, axes) if axes is not None else ctx.node(
        "Reshape", [ctx.int64(dim), _i64(ctx, [-1])])  # fmt: skip
    ctx.node("Unsqueeze", [ctx.value(x), axes_name], op.outputs[0])


@register_onnx_export("Squeeze")
def squeeze(ctx, op):
    dims = list(op.attrs["squeeze_dims"])
    ins = [ctx.value(op._inputs[0])] + ([_i64(ctx, dims)] if dims else [])
    ctx.node("Squeeze", ins, op.outputs[0])


@register_onnx_export("ConcatV2")
def concat(ctx, op):
    values, axis_t = op._inputs[:-1], op._inputs[-1]
    axis = int(ctx.require_const(axis_t, "axis"))
    layouts = {ctx.value_any(t)[1] for t in values}
    layout = next(iter(layouts)) if len(layouts) == 1 else None
    if layout is not None and all(t.shape.rank == len(layout) for t in values):
        onnx_axis = layout.index(axis % len(layout))
        names = [ctx.value_any(t)[0] for t in values]
        ctx.node("Concat", names, op.outputs[0], layout=layout, axis=onnx_axis)
        return
    ctx.node("Concat", [ctx.value(t) for t in values], op.outputs[0], axis=axis)


def _split(ctx, x_name, axis, outputs, sizes=None):
    if sizes is not None:
        return ctx.node("Split", [x_name, _i64(ctx, sizes)], outputs, axis=axis)
    # Opset 18 names the number of outputs; before, Split divides evenly among its outputs.
    n = len(outputs) if not isinstance(outputs, int) else outputs
    return ctx.node("Split", [x_name], outputs, axis=axis,
                    num_outputs=n if ctx.opset >= 18 else None)  # fmt: skip


@register_onnx_export("Split")
def split(ctx, op):
    axis = int(ctx.require_const(op._inputs[0], "split_dim"))
    _split(ctx, ctx.value(op._inputs[1]), axis, op.outputs)


@register_onnx_export("SplitV")
def split_v(ctx, op):
    x, sizes_t, dim_t = op._inputs
    axis = int(ctx.require_const(dim_t, "split_dim"))
    sizes = [int(s) for s in ctx.require_const(sizes_t, "size_splits").reshape(-1)]
    if -1 in sizes:
        dims = x.shape.dims
        total = None if dims is None else dims[axis]
        if total is None:
            ctx.unsupported("a -1 in size_splits needs the split axis's size known")
        sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
    _split(ctx, ctx.value(x), axis, op.outputs, sizes)


@register_onnx_export("Slice")
def slice_(ctx, op):
    x, begin_t, size_t = op._inputs
    begin, size = ctx.const(begin_t), ctx.const(size_t)
    if begin is not None and size is not None:
        begin, size = begin.astype(np.int64), size.astype(np.int64)
        end = np.where(size == -1, INT64_MAX, begin + size)
        ins = [_i64(ctx, begin), _i64(ctx, end)]
    else:
        b, s = ctx.int64(begin_t), ctx.int64(size_t)
        open_end = ctx.node("Equal", [s, ctx.initializer(np.array(-1, np.int64))])
        big = ctx.initializer(np.array(INT64_MAX, np.int64))
        ins = [b, ctx.node("Where", [open_end, big, ctx.node("Add", [b, s])])]
    ctx.node("Slice", [ctx.value(x), *ins], op.outputs[0])


@register_onnx_export("StridedSlice")
def strided_slice(ctx, op):
    """A Slice with steps, then a Squeeze for shrunk axes and an Unsqueeze for new ones."""
    x, b_t, e_t, s_t = op._inputs
    masks = {k: int(op.attrs[f"{k}_mask"]) for k in ("begin", "end", "ellipsis", "new_axis",
                                                      "shrink_axis")}  # fmt: skip
    begin, end, strides = ctx.const(b_t), ctx.const(e_t), ctx.const(s_t)
    if begin is not None and end is not None and strides is not None:
        n = len(begin)
    else:
        n = b_t.shape.dims[0] if b_t.shape.rank == 1 else None
        if n is None:
            ctx.unsupported("begin, end and strides must have a known length")
    rank = x.shape.rank
    # The spec's entries that slice an input axis: (entry, input axis, shrinks); the output
    # positions of new axes.
    picks, new = [], []
    in_axis = out_pos = 0
    for i in range(n):
        bit = 1 << i
        if masks["ellipsis"] & bit:
            if rank is None:
                ctx.unsupported("an ellipsis needs the input's rank known")
            later = sum(1 for j in range(i + 1, n) if not masks["new_axis"] & (1 << j))
            covered = rank - in_axis - later
            in_axis += covered
            out_pos += covered
            continue
        if masks["new_axis"] & bit:
            new.append(out_pos)
            out_pos += 1
            continue
        shrinks = bool(masks["shrink_axis"] & bit)
        picks.append((i, in_axis, shrinks))
        in_axis += 1
        out_pos += 0 if shrinks else 1
    shrink = [a for _, a, s in picks if s]
    if begin is not None and end is not None and strides is not None:
        sliced = _static_slice(ctx, picks, masks, begin, end, strides)
    else:
        sliced = _dynamic_slice(ctx, picks, masks, b_t, e_t, s_t)
    name = ctx.value(x)
    if sliced is not None:
        name = ctx.node("Slice", [name, *sliced])
    if shrink:
        name = ctx.node("Squeeze", [name, _i64(ctx, shrink)])
    if new:
        name = ctx.node("Unsqueeze", [name, _i64(ctx, new)])
    ctx.node("Identity", [name], op.outputs[0])


def _static_slice(ctx, picks, masks, begin, end, strides):
    """Slice's starts, ends, axes and steps for a constant spec (None where nothing is cut)."""
    starts, ends, axes, steps = [], [], [], []
    for i, axis, shrinks in picks:
        bit = 1 << i
        b, e, s = int(begin[i]), int(end[i]), int(strides[i])
        if s == 0:
            ctx.unsupported("a stride of 0")
        if shrinks:
            starts.append(b), ends.append(b + 1 if b != -1 else INT64_MAX)
            axes.append(axis), steps.append(1)
            continue
        if masks["begin"] & bit:
            b = 0 if s > 0 else INT64_MAX
        if masks["end"] & bit:
            e = INT64_MAX if s > 0 else INT64_MIN
        if not (b == 0 and e == INT64_MAX and s == 1):
            starts.append(b), ends.append(e), axes.append(axis), steps.append(s)
    if not starts:
        return None
    return [_i64(ctx, starts), _i64(ctx, ends), _i64(ctx, axes), _i64(ctx, steps)]


def _dynamic_slice(ctx, picks, masks, b_t, e_t, s_t):
    """Slice's inputs for a spec known at run time (tf's x[:n], x[i], x[::k] with tensors):
    the entries' values gathered, the masks' defaults put in with Where. A stride of 0 is
    refused by onnxruntime's Slice, as by TensorFlow."""
    if not picks:
        return None
    at = _i64(ctx, [i for i, _, _ in picks])
    b, e, s = (ctx.node("Gather", [ctx.int64(t), at], axis=0) for t in (b_t, e_t, s_t))

    def const(v):
        return ctx.initializer(np.asarray(v, np.int64))

    def flags(bits):
        return ctx.initializer(np.array([bool(bits & (1 << i)) for i, _, _ in picks]))

    def pick(mask_bits, when, otherwise):
        if not any(mask_bits & (1 << i) for i, _, _ in picks):
            return otherwise
        return ctx.node("Where", [flags(mask_bits), when, otherwise])

    ahead = ctx.node("Greater", [s, const(0)])
    shrink_bits = masks["shrink_axis"]
    starts = pick(masks["begin"] & ~shrink_bits,
                  ctx.node("Where", [ahead, const(0), const(INT64_MAX)]), b)  # fmt: skip
    ends = pick(masks["end"] & ~shrink_bits,
                ctx.node("Where", [ahead, const(INT64_MAX), const(INT64_MIN)]), e)  # fmt: skip
    if shrink_bits:
        # A shrunk entry takes the one element at its begin (-1: the last).
        last = ctx.node("Equal", [b, const(-1)])
        one_on = ctx.node("Where", [last, const(INT64_MAX), ctx.node("Add", [b, const(1)])])
        ends = pick(shrink_bits, one_on, ends)
        s = pick(shrink_bits, const(1), s)
    return [starts, ends, _i64(ctx, [a for _, a, _ in picks]), s]


@register_onnx_export("Pack")
def pack(ctx, op):
    axis = int(op.attrs["axis"])
    parts = [ctx.node("Unsqueeze", [ctx.value(t), _i64(ctx, [axis])]) for t in op._inputs]
    if len(parts) == 1:
        ctx.node("Identity", parts, op.outputs[0])
        return
    ctx.node("Concat", parts, op.outputs[0], axis=axis)


@register_onnx_export("Unpack")
def unpack(ctx, op):
    axis = int(op.attrs["axis"])
    x = ctx.value(op._inputs[0])
    parts = [x] if len(op.outputs) == 1 else _split(ctx, x, axis, len(op.outputs))
    for p, t in zip(parts, op.outputs):
        ctx.node("Squeeze", [p, _i64(ctx, [axis])], t)


@register_onnx_export("BroadcastArgs")
def broadcast_args(ctx, op):
    """The shape two shapes broadcast to (tf.broadcast_dynamic_shape): the shorter one padded
    with leading 1s, then each dimension the one that is not 1."""
    lengths = [t.shape.dims[0] if t.shape.rank == 1 else None for t in op._inputs]
    if None in lengths:
        ctx.unsupported("the two shapes' lengths must be known")
    rank = max(lengths)
    one = ctx.initializer(np.array(1, np.int64))
    shapes = []
    for t, n in zip(op._inputs, lengths):
        v = ctx.int64(t)
        if n < rank:
            v = ctx.node("Concat", [ctx.initializer(np.ones(rank - n, np.int64)), v], axis=0)
        shapes.append(v)
    a, b = shapes
    either = ctx.node("Where", [ctx.node("Equal", [a, one]), b, a])
    ctx.node("Cast", [either], op.outputs[0], to=onnx_dtype(op.outputs[0].dtype))


@register_onnx_export("Transpose")
def transpose(ctx, op):
    """Composed with the input's layout: one Transpose (or none) either way."""
    x, perm_t = op._inputs
    perm = [int(p) for p in ctx.require_const(perm_t, "perm").reshape(-1)]
    name, layout = ctx.value_any(x)
    rank = len(perm)
    perm = [p % rank for p in perm]
    if layout is not None:
        perm = [layout.index(p) for p in perm]
    if perm == list(range(rank)):
        ctx.bind(op.outputs[0], name)
        return
    ctx.node("Transpose", [name], op.outputs[0], perm=perm)


@register_onnx_export("Tile")
def tile(ctx, op):
    x, multiples = op._inputs
    ctx.node("Tile", [ctx.value(x), ctx.int64(multiples)], op.outputs[0])


# -- pads --------------------------------------------------------------------------------------


def _pads(ctx, paddings_t, layout):
    """TensorFlow's [rank, 2] paddings as ONNX's [begins..., ends...], in `layout`."""
    p = ctx.const(paddings_t)
    if p is not None:
        p = p.astype(np.int64).reshape(-1, 2)
        if layout is not None:
            p = p[list(layout)]
        return _i64(ctx, p.T.reshape(-1))
    if layout is not None:
        return None
    flat = ctx.node("Transpose", [ctx.int64(paddings_t)], perm=[1, 0])
    return ctx.node("Reshape", [flat, _i64(ctx, [-1])])


def _pad(ctx, op, mode=None, value=None):
    x, paddings = op._inputs[0], op._inputs[1]
    name, layout = ctx.value_any(x)
    pads = _pads(ctx, paddings, layout)
    if pads is None:
        name, layout = ctx.value(x), None
        pads = _pads(ctx, paddings, None)
    ins = [name, pads] + ([ctx.value(value)] if value is not None else [])
    ctx.node("Pad", ins, op.outputs[0], layout=layout, mode=mode)


@register_onnx_export("Pad")
def pad(ctx, op):
    _pad(ctx, op)


@register_onnx_export("PadV2")
def pad_v2(ctx, op):
    _pad(ctx, op, value=op._inputs[2])


@register_onnx_export("MirrorPad")
def mirror_pad(ctx, op):
    """REFLECT is ONNX's reflect; SYMMETRIC (edge pixel repeated) is built from reversed
    slices concatenated around the input, one axis at a time."""
    if op.attrs["mode"] == "REFLECT":
        _pad(ctx, op, mode="reflect")
        return
    p = ctx.require_const(op._inputs[1], "paddings").astype(np.int64).reshape(-1, 2)
    name = ctx.value(op._inputs[0])
    for axis, (before, after) in enumerate(p.tolist()):
        parts = []
        if before:
            ins = [name, _i64(ctx, [before - 1]), _i64(ctx, [INT64_MIN]), _i64(ctx, [axis]),
                   _i64(ctx, [-1])]  # fmt: skip
            parts.append(ctx.node("Slice", ins))
        parts.append(name)
        if after:
            ins = [name, _i64(ctx, [-1]), _i64(ctx, [-after - 1]), _i64(ctx, [axis]),
                   _i64(ctx, [-1])]  # fmt: skip
            parts.append(ctx.node("Slice", ins))
        if len(parts) > 1:
            name = ctx.node("Concat", parts, axis=axis)
    ctx.node("Identity", [name], op.outputs[0])


# -- fills and broadcasts ----------------------------------------------------------------------


def _constant_of_shape(ctx, shape_name, value, out, layout=None):
    tensor = numpy_helper.from_array(np.asarray(value).reshape(1))
    ctx.node("ConstantOfShape", [shape_name], out, layout=layout, value=tensor)


@register_onnx_export("Fill")
def fill(ctx, op):
    dims, value = op._inputs
    v = ctx.const(value)
    if v is not None and v.dtype != object:
        _constant_of_shape(ctx, ctx.int64(dims), v, op.outputs[0])
        return
    ctx.node("Expand", [ctx.value(value), ctx.int64(dims)], op.outputs[0])


@register_onnx_export("ZerosLike", "OnesLike")
def zeros_like(ctx, op):
    x = op._inputs[0]
    if x.dtype.name == "string":
        ctx.unsupported("string tensors")
    name, layout = ctx.value_any(x)
    fill_value = np.array(0 if op.type == "ZerosLike" else 1, dtype=x.dtype.np)
    _constant_of_shape(ctx, ctx.node("Shape", [name]), fill_value, op.outputs[0], layout)


@register_onnx_export("BroadcastTo")
def broadcast_to(ctx, op):
    x, shape_t = op._inputs
    ctx.node("Expand", [ctx.value(x), ctx.int64(shape_t)], op.outputs[0])


@register_onnx_export("ReverseV2")
def reverse(ctx, op):
    x, axis_t = op._inputs
    axes = [int(a) for a in ctx.require_const(axis_t, "axis").reshape(-1)]
    if not axes:
        _alias(ctx, op)
        return
    k = len(axes)
    ins = [ctx.value(x), _i64(ctx, [-1] * k), _i64(ctx, [INT64_MIN] * k), _i64(ctx, axes),
           _i64(ctx, [-1] * k)]  # fmt: skip
    ctx.node("Slice", ins, op.outputs[0])
