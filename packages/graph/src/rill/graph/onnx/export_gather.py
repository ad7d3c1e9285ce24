"""ONNX export of the gather family: GatherV2 / ResourceGather, GatherNd, OneHot, Where,
ScatterNd, the segment reductions (Segment* and UnsortedSegment* as ScatterND reductions),
Unique / UniqueWithCounts, ReverseSequence, HistogramFixedWidth, Bincount, DynamicPartition
and DynamicStitch."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from rill.graph import dtypes
from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export


def _i64(ctx, values) -> str:
    return ctx.initializer(np.asarray(values, dtype=np.int64).reshape(-1))


def _gather(ctx, op, params_name, params, indices, axis, batch_dims):
    rank = params.shape.rank
    if batch_dims == 0:
        ctx.node("Gather", [params_name, ctx.value(indices)], op.outputs[0], axis=axis)
        return
    if batch_dims < 0 and indices.shape.rank is not None:
        batch_dims += indices.shape.rank
    if axis < 0 and rank is not None:
        axis += rank
    q = indices.shape.rank
    if axis != batch_dims and (rank is None or q is None):
        ctx.unsupported("batch_dims with axis > batch_dims needs the ranks known")
    if axis != batch_dims:
        # Move the gathered axis next to the batch axes, gather, and move the gathered block
        # back behind params[batch_dims:axis].
        b = batch_dims
        perm = list(range(b)) + [axis] + list(range(b, axis)) + list(range(axis + 1, rank))
        params_name = ctx.node("Transpose", [params_name], perm=perm)
    idx = ctx.node("Unsqueeze", [ctx.int64(indices), _i64(ctx, [-1])])
    if axis == batch_dims:
        # params[b..., indices[b..., i...], rest...] is GatherND over one trailing index column.
        ctx.node("GatherND", [params_name, idx], op.outputs[0], batch_dims=batch_dims)
        return
    out = ctx.node("GatherND", [params_name, idx], batch_dims=b)
    n = rank - 1 + q - b
    back = list(range(b)) + list(range(q, q + axis - b)) + list(range(b, q)) + list(
        range(q + axis - b, n))  # fmt: skip
    ctx.node("Transpose", [out], op.outputs[0], perm=back)


@register_onnx_export("GatherV2")
def gather_v2(ctx, op):
    params, indices, axis_t = op._inputs
    axis = int(ctx.require_const(axis_t, "axis"))
    _gather(ctx, op, ctx.value(params), params, indices, axis, int(op.attrs["batch_dims"]))


@register_onnx_export("ResourceGather")
def resource_gather(ctx, op):
    """A gather from a variable: the frozen value is an initializer."""
    table = ctx.model.frozen(op)
    name = ctx.initializer(table, f"{op._inputs[0].op.name}/frozen")
    _gather(ctx, op, name, op._inputs[0], op._inputs[1], 0, int(op.attrs["batch_dims"]))


@register_onnx_export("GatherNd")
def gather_nd(ctx, op):
    params, indices = op._inputs
    ctx.node("GatherND", [ctx.value(params), ctx.int64(indices)], op.outputs[0])


@register_onnx_export("OneHot")
def one_hot(ctx, op):
    """TensorFlow gives a row of off_value for any index outside [0, depth); ONNX counts
    negative indices from the end, so they are moved out of range first."""
    indices, depth, on, off = op._inputs
    idx = ctx.int64(indices)
    d = ctx.int64(depth)
    negative = ctx.node("Less", [idx, ctx.initializer(np.array(0, np.int64))])
    idx = ctx.node("Where", [negative, d, idx])
    on_v, off_v = ctx.const(on), ctx.const(off)
    if on_v is not None and off_v is not None:
        values = ctx.initializer(np.array([off_v, on_v], dtype=on.dtype.np))
    else:
        flat = _i64(ctx, [1])
        values = ctx.node("Concat", [ctx.node("Reshape", [ctx.value(off), flat]),
                                     ctx.node("Reshape", [ctx.value(on), flat])], axis=0)  # fmt: skip
    ctx.node("OneHot", [idx, d, values], op.outputs[0], axis=int(op.attrs["axis"]))


@register_onnx_export("Where")
def where(ctx, op):
    """Coordinates of the true (non-zero) elements, one row each: NonZero, transposed."""
    nz = ctx.node("NonZero", [ctx.value(op._inputs[0])])
    ctx.node("Transpose", [nz], op.outputs[0], perm=[1, 0])


def _zeros(ctx, shape_name, dtype):
    value = numpy_helper.from_array(np.zeros(1, dtype=dtype.np))
    return ctx.node("ConstantOfShape", [shape_name], value=value)


# ScatterND's reductions and the opsets that first have them.
_REDUCTION_SINCE = {"add": 16, "mul": 16, "max": 18, "min": 18}


def _need_scatter(ctx, reduction="add", why="repeated indices are summed"):
    since = _REDUCTION_SINCE[reduction]
    if ctx.opset < since:
        ctx.unsupported(f"{why}, which ONNX ScatterND does from opset {since} "
                        f"(reduction='{reduction}'); the export asked for opset {ctx.opset}")  # fmt: skip


def _need_scatter_add(ctx):
    _need_scatter(ctx)


@register_onnx_export("ScatterNd")
def scatter_nd(ctx, op):
    _need_scatter_add(ctx)
    indices, updates, shape = op._inputs
    zeros = _zeros(ctx, ctx.int64(shape), updates.dtype)
    ctx.node("ScatterND", [zeros, ctx.int64(indices), ctx.value(updates)], op.outputs[0],
             reduction="add")  # fmt: skip


def _fill(ctx, shape_name, value, dtype):
    value = numpy_helper.from_array(np.array([value], dtype=dtype.np))
    return ctx.node("ConstantOfShape", [shape_name], value=value)


def _scatter_rows(ctx, data, ids, n, reduction, init, drop_negative):
    """[n, data.shape[k:]...] rows starting at `init`, each reduced with the data slices whose
    id (ids of rank k) names it; n is an int64 [1] value. With drop_negative, negative ids go
    to an extra last row, which is sliced off."""
    k = ids.shape.rank
    if k is None:
        ctx.unsupported("segment_ids needs a known rank")
    data_name = ctx.value(data)
    rest = ctx.node("Shape", [data_name], start=k)
    ids64 = ctx.int64(ids)
    rows = n
    if drop_negative:
        rows = ctx.node("Add", [n, _i64(ctx, [1])])
        negative = ctx.node("Less", [ids64, ctx.initializer(np.array(0, np.int64))])
        ids64 = ctx.node("Where", [negative, ctx.node("Squeeze", [n]), ids64])
    start = _fill(ctx, ctx.node("Concat", [rows, rest], axis=0), init, data.dtype)
    idx = ctx.node("Unsqueeze", [ids64, _i64(ctx, [-1])])
    out = ctx.node("ScatterND", [start, idx, data_name], reduction=reduction)
    if drop_negative:
        out = ctx.node("Slice", [out, _i64(ctx, [0]), n, _i64(ctx, [0])])
    return out


# rill op -> (ScatterND reduction, the identity an empty segment keeps)
_SEGMENT = {"Sum": ("add", lambda t: 0), "Prod": ("mul", lambda t: 1),
            "Max": ("max", lambda t: t.min), "Min": ("min", lambda t: t.max)}  # fmt: skip


@register_onnx_export("UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMax",
                      "UnsortedSegmentMin")  # fmt: skip
def unsorted_segment(ctx, op):
    """Rows scattered into num_segments + 1 rows starting at the reduction's identity (an empty
    segment keeps it: 0, 1, the dtype's lowest or highest finite value, as TensorFlow); negative
    ids, which TensorFlow drops, go to the extra last row, which is then sliced off. ScatterND
    reduces with add and mul from opset 16, with max and min from 18."""
    data, ids, num = op._inputs
    reduction, identity = _SEGMENT[op.type[len("UnsortedSegment") :]]
    _need_scatter(ctx, reduction, f"segments are reduced with {reduction}")
    _no_complex(ctx, data)
    n = ctx.node("Reshape", [ctx.int64(num), _i64(ctx, [1])])
    out = _scatter_rows(ctx, data, ids, n, reduction, identity(data.dtype), drop_negative=True)
    ctx.node("Identity", [out], op.outputs[0])


def _no_complex(ctx, t):
    if t.dtype.is_complex:
        ctx.unsupported("ONNX runtimes have no complex tensors")


@register_onnx_export("SegmentSum", "SegmentProd", "SegmentMax", "SegmentMin", "SegmentMean")
def segment(ctx, op):
    """Sorted segment ids: max(segment_ids) + 1 rows (0 for no ids), scattered as the unsorted
    ops are. An empty segment gives 0 (a product 1, as TensorFlow), so Max and Min, which
    start at the dtype's lowest or highest value, zero the rows no id names; Mean divides
    the sum by max(count, 1) (integer division truncates, as TensorFlow's)."""
    data, ids = op._inputs
    kind = op.type[len("Segment") :]
    reduction, identity = _SEGMENT.get(kind, _SEGMENT["Sum"])
    _need_scatter(ctx, reduction, f"segments are reduced with {reduction}")
    _no_complex(ctx, data)
    rank = data.shape.rank
    if rank is None:
        ctx.unsupported("data needs a known rank")
    ids64 = ctx.int64(ids)
    ends = ctx.node("Concat", [_i64(ctx, [0]), ctx.node("Add", [ids64, _i64(ctx, [1])])],
                    axis=0)  # fmt: skip
    if ctx.opset >= 18:
        n = ctx.node("ReduceMax", [ends, _i64(ctx, [0])], keepdims=1)
    else:
        n = ctx.node("ReduceMax", [ends], axes=[0], keepdims=1)
    out = _scatter_rows(ctx, data, ids, n, reduction, identity(data.dtype), drop_negative=False)
    if kind in ("Sum", "Prod"):
        ctx.node("Identity", [out], op.outputs[0])
        return
    ones = ctx.node("Expand", [_i64(ctx, [1]), ctx.node("Shape", [ids64])])
    counts = ctx.node("ScatterND", [_fill(ctx, n, 0, dtypes.int64),
                                    ctx.node("Unsqueeze", [ids64, _i64(ctx, [-1])]), ones],
                      reduction="add")  # fmt: skip
    if rank > 1:
        counts = ctx.node("Unsqueeze", [counts, _i64(ctx, list(range(1, rank)))])
    if kind == "Mean":
        denom = ctx.node("Max", [counts, ctx.initializer(np.array(1, np.int64))])
        denom = ctx.node("Cast", [denom], to=onnx_dtype(data.dtype))
        ctx.node("Div", [out, denom], op.outputs[0])
        return
    empty = ctx.node("Equal", [counts, ctx.initializer(np.array(0, np.int64))])
    zero = ctx.initializer(np.zeros((), data.dtype.np))
    ctx.node("Where", [empty, zero, out], op.outputs[0])


# onnxruntime's Unique takes float32, int64, int8 and strings: the other integer types (and
# bool) go through int64 and the narrower floats through float32, both exact and one-to-one.
_UNIQUE_AS = {"int16": TensorProto.INT64, "int32": TensorProto.INT64,
              "uint8": TensorProto.INT64, "uint16": TensorProto.INT64,
              "uint32": TensorProto.INT64, "uint64": TensorProto.INT64, "bool": TensorProto.INT64,
              "float16": TensorProto.FLOAT, "bfloat16": TensorProto.FLOAT}  # fmt: skip


@register_onnx_export("Unique", "UniqueWithCounts")
def unique(ctx, op):
    """ONNX Unique with sorted=0 keeps first-occurrence order, as TensorFlow's does. Types
    onnxruntime's Unique lacks are cast to one it has and back (uint64 through int64 wraps,
    which keeps equality)."""
    x = op._inputs[0]
    wide = _UNIQUE_AS.get(x.dtype.name)
    name = ctx.value(x)
    if wide is not None:
        name = ctx.node("Cast", [name], to=wide)
    y, _, inverse, counts = ctx.node("Unique", [name], 4, sorted=0)
    if wide is None:
        ctx.bind(op.outputs[0], y)
    else:
        ctx.node("Cast", [y], op.outputs[0], to=onnx_dtype(x.dtype))
    want = op.attrs["out_idx"]
    for t, v in zip(op.outputs[1:], (inverse, counts)):
        if want.name == "int64":
            ctx.bind(t, v)
        else:
            ctx.node("Cast", [v], t, to=onnx_dtype(want))


@register_onnx_export("ReverseSequence")
def reverse_sequence(ctx, op):
    x, lengths = op._inputs
    batch, seq = int(op.attrs["batch_dim"]), int(op.attrs["seq_dim"])
    rank = x.shape.rank
    if rank is not None:
        batch, seq = batch % rank, seq % rank
    if {batch, seq} != {0, 1}:
        ctx.unsupported("ONNX ReverseSequence needs the batch and sequence axes to be 0 and 1")
    ctx.node("ReverseSequence", [ctx.value(x), ctx.int64(lengths)], op.outputs[0],
             batch_axis=batch, time_axis=seq)  # fmt: skip


@register_onnx_export("HistogramFixedWidth")
def histogram_fixed_width(ctx, op):
    """The counts of floor((x - lo) / (hi - lo) · nbins), clipped to [0, nbins - 1], over every
    element, as the kernel computes them (in float64): a OneHot of the bins summed over the
    elements (memory: elements × nbins)."""
    values, value_range, nbins = op._inputs
    f64 = TensorProto.DOUBLE
    v = ctx.node("Reshape", [ctx.node("Cast", [ctx.value(values)], to=f64), _i64(ctx, [-1])])
    r = ctx.node("Cast", [ctx.value(value_range)], to=f64)
    lo = ctx.node("Gather", [r, _i64(ctx, [0])], axis=0)
    hi = ctx.node("Gather", [r, _i64(ctx, [1])], axis=0)
    n = ctx.node("Reshape", [ctx.int64(nbins), _i64(ctx, [1])])
    scaled = ctx.node("Mul", [ctx.node("Div", [ctx.node("Sub", [v, lo]), ctx.node("Sub", [hi, lo])]),
                              ctx.node("Cast", [n], to=f64)])  # fmt: skip
    top = ctx.node("Cast", [ctx.node("Sub", [n, _i64(ctx, [1])])], to=f64)
    zero = ctx.initializer(np.zeros(1, np.float64))
    bins = ctx.node("Cast", [ctx.node("Min", [ctx.node("Max", [ctx.node("Floor", [scaled]), zero]), top])],
                    to=TensorProto.INT64)  # fmt: skip
    depth = ctx.node("Reshape", [n, ctx.initializer(np.zeros(0, np.int64))])  # a scalar
    hot = ctx.node("OneHot", [bins, depth, _i64(ctx, [0, 1])], axis=-1)
    counts = ctx.node("ReduceSum", [hot, _i64(ctx, [0])], keepdims=0)
    ctx.node("Cast", [counts], op.outputs[0], to=onnx_dtype(op.outputs[0].dtype))


@register_onnx_export("Bincount")
def bincount(ctx, op):
    """Counts (or sums of weights) of the values in [0, size): a OneHot of the values (larger
    ones give rows of zeros) summed over the elements, weighted where the weights are not the
    empty tensor (known while exporting). A negative value, which the kernel refuses, counts
    in bin size + value here (ONNX's OneHot wraps it)."""
    arr, size, weights = op._inputs
    w = ctx.const(weights)
    if w is None and (weights.shape.dims is None or weights.shape.num_elements() is None):
        ctx.unsupported("the weights must be known to be empty or not while exporting")
    empty = (w is not None and w.size == 0) or weights.shape.num_elements() == 0
    flat = ctx.node("Reshape", [ctx.int64(arr), _i64(ctx, [-1])])
    depth = ctx.node("Reshape", [ctx.int64(size), ctx.initializer(np.zeros(0, np.int64))])
    out_type = onnx_dtype(op.outputs[0].dtype)
    if empty:
        hot = ctx.node("OneHot", [flat, depth, _i64(ctx, [0, 1])], axis=-1)
        ctx.node("Cast", [ctx.node("ReduceSum", [hot, _i64(ctx, [0])], keepdims=0)],
                 op.outputs[0], to=out_type)  # fmt: skip
        return
    floating = op.outputs[0].dtype.is_floating
    wide = TensorProto.DOUBLE if floating else TensorProto.INT64
    # (onnxruntime's OneHot makes no doubles: float32 ones, cast)
    on_off = ctx.initializer(np.array([0, 1], np.float32 if floating else np.int64))
    hot = ctx.node("OneHot", [flat, depth, on_off], axis=-1)
    if floating:
        hot = ctx.node("Cast", [hot], to=wide)
    wv = ctx.node("Cast", [ctx.node("Reshape", [ctx.value(weights), _i64(ctx, [-1, 1])])], to=wide)
    summed = ctx.node("ReduceSum", [ctx.node("Mul", [hot, wv]), _i64(ctx, [0])], keepdims=0)
    ctx.node("Cast", [summed], op.outputs[0], to=out_type)


def _rows(ctx, name: str, lead: int) -> str:
    """`name` with its first `lead` axes flattened into one (a tensor of any rank)."""
    rest = ctx.node("Slice", [ctx.node("Shape", [name]), _i64(ctx, [lead]), _i64(ctx, [1 << 62])])
    return ctx.node("Reshape", [name, ctx.node("Concat", [_i64(ctx, [-1]), rest], axis=0)])


@register_onnx_export("DynamicPartition")
def dynamic_partition(ctx, op):
    """Output i: the slices of data whose partition is i, in order (a Compress each); the
    partitions tensor's axes are flattened with data's leading axes."""
    data, partitions = op._inputs
    lead = partitions.shape.rank
    if lead is None:
        ctx.unsupported("DynamicPartition needs the partitions' rank known")
    flat = _rows(ctx, ctx.value(data), lead)
    parts = ctx.node("Reshape", [ctx.int64(partitions), _i64(ctx, [-1])])
    for i, out in enumerate(op.outputs):
        mask = ctx.node("Equal", [parts, ctx.initializer(np.array(i, np.int64))])
        ctx.node("Compress", [flat, mask], out, axis=0)


@register_onnx_export("DynamicStitch")
def dynamic_stitch(ctx, op):
    """merged[indices[m][i]] = data[m][i]: every list's indices and slices flattened and
    concatenated in order, then one ScatterND into zeros of max index + 1 rows, whose repeated
    indices write in order (the later one wins, as TensorFlow's; onnxruntime applies ScatterND's
    updates in order)."""
    n = op.attrs["N"]
    indices, data = op._inputs[:n], op._inputs[n:]
    idx, rows = [], []
    for ix, dx in zip(indices, data):
        if ix.shape.rank is None:
            ctx.unsupported("DynamicStitch needs every indices' rank known")
        idx.append(ctx.node("Reshape", [ctx.int64(ix), _i64(ctx, [-1])]))
        rows.append(_rows(ctx, ctx.value(dx), ix.shape.rank))
    every = ctx.node("Concat", idx, axis=0) if n > 1 else idx[0]
    values = ctx.node("Concat", rows, axis=0) if n > 1 else rows[0]
    top = ctx.node("ReduceMax", [ctx.node("Concat", [every, _i64(ctx, [-1])], axis=0)],
                   keepdims=1)  # fmt: skip
    count = ctx.node("Add", [top, _i64(ctx, [1])])
    rest = ctx.node("Slice", [ctx.node("Shape", [values]), _i64(ctx, [1]), _i64(ctx, [1 << 62])])
    zero = ctx.initializer(np.zeros(1, op.outputs[0].dtype.np))
    base = ctx.node("Expand", [zero, ctx.node("Concat", [count, rest], axis=0)])
    where = ctx.node("Unsqueeze", [every, _i64(ctx, [1])])
    ctx.node("ScatterND", [base, where, values], op.outputs[0])
