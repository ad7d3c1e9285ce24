"""ONNX export of the nn family: activations, BiasAdd, convolutions and pooling (2-D and 3-D),
batch norm, softmaxes and their cross-entropies, L2Loss, LRN and TopK.

Convolutions, pools, batch norm and LRN run in ONNX's NCHW. An NHWC op asks for its input in
layout (0, 3, 1, 2) and leaves its output there (see exporter: the Transpose is written once,
where a consumer first needs the other layout); an NCHW op needs no transpose at all. Filters
are reordered at export time when they are constants or frozen variables.
"""

from __future__ import annotations

import math

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.export_math import reduce_static
from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export

NCHW = (0, 3, 1, 2)
NCDHW = (0, 4, 1, 2, 3)

_ACTIVATIONS = {
    "Relu": "Relu",
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "Elu": "Elu",  # alpha 1, as TensorFlow's
    "Selu": "Selu",  # ONNX's default alpha and gamma are TensorFlow's constants in float32
    "Softplus": "Softplus",
    "Softsign": "Softsign",
}

for _rill, _onnx in _ACTIVATIONS.items():
    register_onnx_export(_rill)(lambda ctx, op, _t=_onnx: ctx.unary(op, _t))


@register_onnx_export("Relu6")
def relu6(ctx, op):
    x = op._inputs[0]
    name, layout = ctx.value_any(x)
    ins = [name, ctx.scalar_like(0, x), ctx.scalar_like(6, x)]
    ctx.node("Clip", ins, op.outputs[0], layout=layout)


@register_onnx_export("LeakyRelu")
def leaky_relu(ctx, op):
    ctx.unary(op, "LeakyRelu", alpha=float(op.attrs["alpha"]))


@register_onnx_export("BiasAdd")
def bias_add(ctx, op):
    """value + bias along the channel axis, wherever the value's layout put that axis."""
    value, bias = op._inputs
    rank = value.shape.rank
    name, layout = ctx.value_any(value)
    nchw = op.attrs["data_format"].startswith("NC")
    if rank is None and (nchw or layout is not None):
        ctx.unsupported("an NCHW bias add needs the rank of its value known")
    channel = 1 if nchw else (rank - 1 if rank is not None else -1)
    pos = channel if layout is None else layout.index(channel)
    trailing = 0 if rank is None else rank - 1 - pos
    b = ctx.const(bias)
    if b is not None:
        b_name = ctx.initializer(b.reshape(b.shape + (1,) * trailing))
    elif trailing:
        shape = ctx.initializer(np.array([-1] + [1] * trailing, np.int64))
        b_name = ctx.node("Reshape", [ctx.value(bias), shape])
    else:
        b_name = ctx.value(bias)
    ctx.node("Add", [name, b_name], op.outputs[0], layout=layout)


# -- convolution and pooling -------------------------------------------------------------------


def _format(op):
    """(spatial axes, channel axis, input layout for ONNX) of an op's data_format."""
    if op.attrs.get("data_format", "NHWC").startswith("NC"):
        return (2, 3), 1, None
    return (1, 2), 3, NCHW


def _format3(op):
    """_format for the 3-D ops' NDHWC / NCDHW."""
    if op.attrs.get("data_format", "NDHWC") == "NCDHW":
        return (2, 3, 4), 1, None
    return (1, 2, 3), 4, NCDHW


def _pads(ctx, op, x, kernel, strides, dilations, spatial=None):
    """ONNX pads (or auto_pad) for TensorFlow's SAME, VALID or EXPLICIT padding."""
    if spatial is None:
        spatial, _, _ = _format(op)
    padding = op.attrs["padding"]
    if padding == "VALID":
        return {"pads": [0] * (2 * len(spatial))}
    if padding == "EXPLICIT":
        ex = list(op.attrs["explicit_paddings"])
        before = [ex[2 * a] for a in spatial]
        after = [ex[2 * a + 1] for a in spatial]
        return {"pads": before + after}
    dims = x.shape.dims
    sizes = None if dims is None else [dims[a] for a in spatial]
    if sizes is None or None in sizes or None in kernel:
        return {"auto_pad": "SAME_UPPER"}  # TensorFlow's SAME puts the odd pixel at the end
    before, after = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return {"pads": before + after}


def _conv(ctx, op, depthwise: bool):
    x, f = op._inputs
    spatial, channel, in_layout = _format(op)
    strides = [op.attrs["strides"][a] for a in spatial]
    dilations = [op.attrs["dilations"][a] for a in spatial]
    fshape = f.shape.dims
    w = ctx.const(f)
    if w is not None:
        fshape = w.shape
    if (fshape is None or None in fshape) and not depthwise:
        # ONNX reads the kernel size from the weight; SAME needs auto_pad then.
        weight = ctx.node("Transpose", [ctx.value(f)], perm=[3, 2, 0, 1])
        pads = _pads(ctx, op, x, [None, None], strides, dilations)
        ctx.node("Conv", [ctx.value(x, in_layout), weight], op.outputs[0], layout=in_layout,
                 strides=strides, dilations=dilations, **pads)  # fmt: skip
        return
    if fshape is None or None in fshape:
        ctx.unsupported("a depthwise filter's shape must be known")
    kh, kw, cin, cout = fshape
    group = 1
    if depthwise:
        group = cin
        if w is not None:
            weight = ctx.initializer(
                np.ascontiguousarray(w.reshape(kh, kw, cin * cout).transpose(2, 0, 1)[:, None])
            )
        else:
            flat = ctx.node("Reshape", [ctx.value(f), ctx.initializer(
                np.array([kh, kw, 1, cin * cout], np.int64))])  # fmt: skip
            weight = ctx.node("Transpose", [flat], perm=[3, 2, 0, 1])
    else:
        c = x.shape.dims[channel] if x.shape.dims is not None else None
        if c is not None and c != cin:
            if c % cin:
                ctx.unsupported(f"{c} input channels do not split into groups of {cin}")
            group = c // cin
        if w is not None:
            weight = ctx.initializer(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
        else:
            weight = ctx.node("Transpose", [ctx.value(f)], perm=[3, 2, 0, 1])
    pads = _pads(ctx, op, x, [kh, kw], strides, dilations)
    ctx.node("Conv", [ctx.value(x, in_layout), weight], op.outputs[0], layout=in_layout,
             kernel_shape=[kh, kw], strides=strides, dilations=dilations,
             group=group if group != 1 else None, **pads)  # fmt: skip


register_onnx_export("Conv2D")(lambda ctx, op: _conv(ctx, op, depthwise=False))
register_onnx_export("DepthwiseConv2dNative")(lambda ctx, op: _conv(ctx, op, depthwise=True))


def _conv_transpose(ctx, op, depthwise: bool):
    """Conv2DBackpropInput (tf.nn.conv2d_transpose) as ConvTranspose: pads and
    output_padding reproduce TensorFlow's output size from the forward padding rule."""
    sizes_t, f, dy = op._inputs
    spatial, channel, in_layout = _format(op)
    sizes = ctx.const(sizes_t)
    if sizes is not None:
        sizes = [int(v) for v in sizes.reshape(-1)]
    else:
        # input_sizes made at run time (tf.stack([tf.shape(x)[0], h, w, c]): a batch known
        # only then): ConvTranspose needs the spatial sizes and the channels, which the op's
        # static output shape holds when only the batch is unknown.
        dims = op.outputs[0].shape.dims
        if dims is None or any(dims[a] is None for a in (*spatial, channel)):
            ctx.unsupported(
                f"its input_sizes ({sizes_t.name}) must be known at export time, or at least "
                "its output's spatial sizes and channels"
            )
        sizes = [-1 if d is None else int(d) for d in dims]
    out_hw = [sizes[a] for a in spatial] if len(sizes) == 4 else sizes
    strides = [op.attrs["strides"][a] for a in spatial]
    dilations = [op.attrs["dilations"][a] for a in spatial]
    w = ctx.const(f)
    fshape = w.shape if w is not None else f.shape.dims
    if fshape is None or None in fshape:
        ctx.unsupported("the filter's shape must be known")
    kh, kw, cin, cout = fshape
    group = cin if depthwise else 1
    if not depthwise and len(sizes) == 4 and sizes[channel] != cin:
        group = sizes[channel] // cin
    if w is not None:
        if depthwise:
            w = w.reshape(kh, kw, cin * cout).transpose(2, 0, 1)[:, None]
        else:
            w = w.transpose(3, 2, 0, 1)
        weight = ctx.initializer(np.ascontiguousarray(w))
    elif depthwise:
        flat = ctx.node("Reshape", [ctx.value(f), ctx.initializer(
            np.array([kh, kw, 1, cin * cout], np.int64))])  # fmt: skip
        weight = ctx.node("Transpose", [flat], perm=[3, 2, 0, 1])
    else:
        weight = ctx.node("Transpose", [ctx.value(f)], perm=[3, 2, 0, 1])
    dims = dy.shape.dims
    padding = op.attrs["padding"]
    ex = list(op.attrs["explicit_paddings"])
    before, after, extra = [], [], []
    for i, (out, k, s, d) in enumerate(zip(out_hw, (kh, kw), strides, dilations)):
        span = (k - 1) * d + 1
        if padding == "VALID":
            pb = pa = 0
        elif padding == "EXPLICIT":
            pb, pa = ex[2 * spatial[i]], ex[2 * spatial[i] + 1]
        else:
            total = max((math.ceil(out / s) - 1) * s + span - out, 0)
            pb, pa = total // 2, total - total // 2
        n = None if dims is None else dims[spatial[i]]
        if n is None:
            n = (out + pb + pa - span) // s + 1
        before.append(pb)
        after.append(pa)
        extra.append(out - ((n - 1) * s + span - pb - pa))
    ctx.node("ConvTranspose", [ctx.value(dy, in_layout), weight], op.outputs[0],
             layout=in_layout, kernel_shape=[kh, kw], strides=strides, dilations=dilations,
             pads=before + after, output_padding=extra if any(extra) else None,
             group=group if group != 1 else None)  # fmt: skip


register_onnx_export("Conv2DBackpropInput")(lambda ctx, op: _conv_transpose(ctx, op, False))
register_onnx_export("DepthwiseConv2dNativeBackpropInput")(
    lambda ctx, op: _conv_transpose(ctx, op, True)
)


@register_onnx_export("InTopKV2")
def in_top_k(ctx, op):
    """targets[i] is in the top k of predictions[i] when fewer than k predictions are larger
    (ties count as in); out-of-range targets and non-finite predictions give False."""
    pred, targets, k = op._inputs
    p = ctx.value(pred)
    t = ctx.int64(targets)
    classes = ctx.node("Gather", [ctx.node("Shape", [p]), ctx.initializer(np.array(1, np.int64))])
    zero = ctx.initializer(np.array(0, np.int64))
    valid = ctx.node("And", [ctx.node("GreaterOrEqual", [t, zero]),
                             ctx.node("Less", [t, classes])])  # fmt: skip
    safe = ctx.node("Where", [valid, t, zero])
    one = ctx.initializer(np.array([1], np.int64))
    mine = ctx.node("GatherElements", [p, ctx.node("Unsqueeze", [safe, one])], axis=1)
    larger = ctx.node("Cast", [ctx.node("Greater", [p, mine])], to=onnx_dtype(dtypes.int64))
    rank = ctx.node("ReduceSum", [larger, one], keepdims=0)
    finite = ctx.node("Not", [ctx.node("Or", [ctx.node("IsNaN", [mine]),
                                              ctx.node("IsInf", [mine])])])  # fmt: skip
    ok = ctx.node("And", [ctx.node("Less", [rank, ctx.int64(k)]),
                          ctx.node("Squeeze", [finite, one])])  # fmt: skip
    ctx.node("And", [ok, valid], op.outputs[0])


def _pool(ctx, op, onnx_type, fmt=_format, ksize=None, strides=None, **extra):
    """A 2-D pool (fmt _format) or a 3-D one (_format3) as the ONNX pool `onnx_type`; the
    window and strides the op's attrs, or `ksize` and `strides` (MaxPoolV2's inputs)."""
    x = op._inputs[0]
    spatial, channel, in_layout = fmt(op)
    ksize = list(op.attrs["ksize"] if ksize is None else ksize)
    strides = list(op.attrs["strides"] if strides is None else strides)
    if ksize[0] != 1 or ksize[channel] != 1 or strides[0] != 1 or strides[channel] != 1:
        ctx.unsupported("pooling across the batch or channel axis has no ONNX equivalent")
    kernel = [ksize[a] for a in spatial]
    stride = [strides[a] for a in spatial]
    pads = _pads(ctx, op, x, kernel, stride, [1] * len(spatial), spatial)
    ctx.node(onnx_type, [ctx.value(x, in_layout)], op.outputs[0], layout=in_layout,
             kernel_shape=kernel, strides=stride, **pads, **extra)  # fmt: skip


@register_onnx_export("Conv3D")
def conv3d(ctx, op):
    """Conv3D (NDHWC or NCDHW, SAME or VALID) as a 3-D Conv; its filter [kd, kh, kw, C, M] as
    ONNX's [M, C, kd, kh, kw]."""
    x, f = op._inputs
    spatial, _, in_layout = _format3(op)
    strides = [op.attrs["strides"][a] for a in spatial]
    dilations = [op.attrs["dilations"][a] for a in spatial]
    w = ctx.const(f)
    fshape = w.shape if w is not None else f.shape.dims
    if fshape is None or None in fshape:
        ctx.unsupported("a 3-D filter's shape must be known")
    perm = [4, 3, 0, 1, 2]
    if w is not None:
        weight = ctx.initializer(np.ascontiguousarray(w.transpose(perm)))
    else:
        weight = ctx.node("Transpose", [ctx.value(f)], perm=perm)
    pads = _pads(ctx, op, x, list(fshape[:3]), strides, dilations, spatial)
    ctx.node("Conv", [ctx.value(x, in_layout), weight], op.outputs[0], layout=in_layout,
             kernel_shape=list(fshape[:3]), strides=strides, dilations=dilations,
             **pads)  # fmt: skip


register_onnx_export("MaxPool3D")(lambda ctx, op: _pool(ctx, op, "MaxPool", _format3))
# TensorFlow averages over the window's voxels inside the input only.
register_onnx_export("AvgPool3D")(lambda ctx, op: _pool(ctx, op, "AveragePool", _format3,
                                                        count_include_pad=0))  # fmt: skip


@register_onnx_export("MaxPool")
def max_pool(ctx, op):
    _pool(ctx, op, "MaxPool")


@register_onnx_export("MaxPoolV2")
def max_pool_v2(ctx, op):
    """MaxPool with its window and strides as inputs (tf.nn.max_pool given tensors)."""
    ksize = [int(v) for v in ctx.require_const(op._inputs[1], "ksize").reshape(-1)]
    strides = [int(v) for v in ctx.require_const(op._inputs[2], "strides").reshape(-1)]
    _pool(ctx, op, "MaxPool", ksize=ksize, strides=strides)


@register_onnx_export("AvgPool")
def avg_pool(ctx, op):
    # TensorFlow averages over the window's pixels inside the input only.
    _pool(ctx, op, "AveragePool", count_include_pad=0)


@register_onnx_export("FusedBatchNormV3")
def fused_batch_norm(ctx, op):
    x, scale, offset, mean, var = op._inputs
    _, _, in_layout = _format(op)
    if op.attrs["is_training"]:
        _batch_norm_training(ctx, op, in_layout)
        return
    ins = [ctx.value(x, in_layout)] + [ctx.value(t) for t in (scale, offset, mean, var)]
    ctx.node("BatchNormalization", ins, op.outputs[0], layout=in_layout,
             epsilon=float(op.attrs["epsilon"]))  # fmt: skip
    # At inference the batch statistics outputs are the moving statistics passed in.
    ctx.bind(op.outputs[1], ctx.value(mean))
    ctx.bind(op.outputs[2], ctx.value(var))


def _batch_norm_training(ctx, op, in_layout):
    """Normalization with the batch's statistics (biased variance); the statistics outputs are
    the batch mean and the unbiased variance, blended into the moving ones by
    exponential_avg_factor, as TensorFlow's kernel gives them."""
    x, scale, offset, mean, var = op._inputs
    if x.shape.rank != 4:
        ctx.unsupported("training-mode batch norm needs a 4-D input of known rank")
    u = scale.dtype
    xs = ctx.value(x, in_layout)
    if x.dtype is not u:
        xs = ctx.node("Cast", [xs], to=onnx_dtype(u))
    axes = [0, 2, 3]
    bm = reduce_static(ctx, "ReduceMean", xs, axes, keepdims=1)
    centered = ctx.node("Sub", [xs, bm])
    bv = reduce_static(ctx, "ReduceMean", ctx.node("Mul", [centered, centered]), axes, keepdims=1)
    eps = ctx.initializer(np.array(op.attrs["epsilon"], u.np))
    inv = ctx.node("Reciprocal", [ctx.node("Sqrt", [ctx.node("Add", [bv, eps])])])
    column = ctx.initializer(np.array([-1, 1, 1], np.int64))
    sc = ctx.node("Reshape", [ctx.value(scale), column])
    off = ctx.node("Reshape", [ctx.value(offset), column])
    y = ctx.node("Add", [ctx.node("Mul", [centered, ctx.node("Mul", [inv, sc])]), off])
    if x.dtype is not u:
        y = ctx.node("Cast", [y], to=onnx_dtype(x.dtype))
    ctx.node("Identity", [y], op.outputs[0], layout=in_layout)
    flat = ctx.initializer(np.array([-1], np.int64))
    bm, bv = ctx.node("Reshape", [bm, flat]), ctx.node("Reshape", [bv, flat])
    # count / (count - 1), count = elements per channel (at least 1 in the divisor).
    size = ctx.node("Cast", [ctx.node("Size", [xs])], to=onnx_dtype(u))
    depth = ctx.node("Cast", [ctx.node("Size", [bm])], to=onnx_dtype(u))
    count = ctx.node("Div", [size, depth])
    one = ctx.initializer(np.array(1, u.np))
    bessel = ctx.node("Div", [count, ctx.node("Max", [ctx.node("Sub", [count, one]), one])])
    unbiased = ctx.node("Mul", [bv, bessel])
    factor = float(op.attrs["exponential_avg_factor"])
    if factor == 1.0:
        run_m, run_v = bm, unbiased
    else:
        keep = ctx.initializer(np.array(1 - factor, u.np))
        new = ctx.initializer(np.array(factor, u.np))

        def blend(old, cur):
            return ctx.node("Add", [ctx.node("Mul", [keep, old]), ctx.node("Mul", [new, cur])])

        run_m, run_v = blend(ctx.value(mean), bm), blend(ctx.value(var), unbiased)
    for t, v in zip(op.outputs[1:5], (run_m, run_v, bm, bv)):
        ctx.bind(t, v)


@register_onnx_export("LRN")
def lrn(ctx, op):
    """TensorFlow's LRN over the last axis of a 4-D tensor is ONNX's over channels in NCHW;
    ONNX divides alpha by the window size, TensorFlow does not."""
    x = op._inputs[0]
    if x.shape.rank != 4:
        ctx.unsupported("LRN needs a 4-D input of known rank")
    size = 2 * int(op.attrs["depth_radius"]) + 1
    ctx.node("LRN", [ctx.value(x, NCHW)], op.outputs[0], layout=NCHW, size=size,
             alpha=float(op.attrs["alpha"]) * size, beta=float(op.attrs["beta"]),
             bias=float(op.attrs["bias"]))  # fmt: skip


# -- softmax -----------------------------------------------------------------------------------


def _last_axis(ctx, x):
    name, layout = ctx.value_any(x)
    axis = -1 if layout is None else layout.index(len(layout) - 1)
    return name, layout, axis


@register_onnx_export("Softmax", "LogSoftmax")
def softmax(ctx, op):
    name, layout, axis = _last_axis(ctx, op._inputs[0])
    ctx.node(op.type, [name], op.outputs[0], layout=layout, axis=axis)


@register_onnx_export("SoftmaxCrossEntropyWithLogits")
def softmax_cross_entropy(ctx, op):
    """loss = -Σ labels·log_softmax(features), backprop = softmax(features) - labels."""
    features, labels = op._inputs
    log_sm = ctx.node("LogSoftmax", [ctx.value(features)], axis=-1)
    lab = ctx.value(labels)
    minus_one = ctx.initializer(np.array([-1], np.int64))
    total = ctx.node("ReduceSum", [ctx.node("Mul", [lab, log_sm]), minus_one], keepdims=0)
    ctx.node("Neg", [total], op.outputs[0])
    ctx.node("Sub", [ctx.node("Exp", [log_sm]), lab], op.outputs[1])


@register_onnx_export("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy(ctx, op):
    """loss = -log_softmax(features)[label]; backprop = softmax(features) - one_hot(label)."""
    features, labels = op._inputs
    log_sm = ctx.node("LogSoftmax", [ctx.value(features)], axis=-1)
    one = ctx.initializer(np.array([1], np.int64))
    idx = ctx.node("Unsqueeze", [ctx.int64(labels), one])
    picked = ctx.node("GatherElements", [log_sm, idx], axis=1)
    ctx.node("Neg", [ctx.node("Squeeze", [picked, one])], op.outputs[0])
    classes = features.shape.dims[1] if features.shape.rank == 2 else None
    if classes is None:
        shape = ctx.node("Shape", [ctx.value(features)])
        depth = ctx.node("Gather", [shape, ctx.initializer(np.array(1, np.int64))], axis=0)
        zero, step = ctx.initializer(np.array(0, np.int64)), ctx.initializer(np.array(1, np.int64))
        ids = ctx.node("Range", [zero, depth, step])
    else:
        ids = ctx.initializer(np.arange(classes, dtype=np.int64))
    hot = ctx.node("Cast", [ctx.node("Equal", [idx, ids])], to=onnx_dtype(features.dtype))
    ctx.node("Sub", [ctx.node("Exp", [log_sm]), hot], op.outputs[1])


@register_onnx_export("L2Loss")
def l2_loss(ctx, op):
    x = op._inputs[0]
    sq = ctx.node("ReduceSumSquare", [ctx.value_any(x)[0]], keepdims=0)
    ctx.node("Mul", [sq, ctx.scalar_like(0.5, x)], op.outputs[0])


@register_onnx_export("TopKV2")
def top_k(ctx, op):
    x, k = op._inputs
    kk = ctx.node("Reshape", [ctx.int64(k), ctx.initializer(np.array([1], np.int64))])
    values, idx = ctx.node("TopK", [ctx.value(x), kk], [op.outputs[0], None], axis=-1,
                           largest=1, sorted=1)  # fmt: skip
    want = op.attrs["index_type"]
    if want.name == "int64":
        ctx.bind(op.outputs[1], idx)
    else:
        ctx.node("Cast", [idx], op.outputs[1], to=onnx_dtype(want))
