"""Convolution ops: Conv2D and DepthwiseConv2dNative with the gradient ops their gradient
functions call, and the window arithmetic they share with pooling (pool_ops) and the kernels.

Padding follows TensorFlow: SAME gives `ceil(in / stride)` outputs and splits an odd total
padding with the extra row/column at the bottom/right; VALID pads nothing; EXPLICIT takes
`explicit_paddings`, a (before, after) pair per dimension in data-format order.

>>> windowed_output_size(28, 5, 1, 1, "SAME")
(28, 2, 2)
>>> windowed_output_size(28, 5, 2, 1, "VALID")
(12, 0, 0)
"""

from __future__ import annotations

from collections.abc import Sequence

from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value_as_shape

__all__ = [
    "conv2d",
    "conv2d_backprop_input",
    "conv2d_backprop_filter",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter",
]

# -- window arithmetic (shared with rill.exec's kernels) ------------------------------------------


def spatial_axes(data_format: str) -> tuple[int, int]:
    """The (height, width) axes of a 4-D tensor in `data_format`."""
    return (2, 3) if data_format.startswith("NCHW") else (1, 2)


def channel_axis(data_format: str) -> int:
    return 1 if data_format.startswith("NC") else -1


def spatial_pair(values: Sequence[int], name: str, data_format: str) -> tuple[int, int]:
    """The height and width entries of a 4-value attr (strides, dilations, ksize)."""
    values = list(values)
    if len(values) != 4:
        raise ValueError(
            f"{name} must have 4 values, one per dimension of {data_format}, got {values}"
        )
    h, w = spatial_axes(data_format)
    return values[h], values[w]


def check_batch_and_depth(values: Sequence[int], name: str, data_format: str) -> None:
    """Strides, dilations and pooling windows must be 1 in the batch and depth dimensions."""
    c = 1 if data_format.startswith("NC") else 3
    if values[0] != 1 or values[c] != 1:
        raise ValueError(
            f"{name} = {list(values)}: rill supports {name} only in the spatial dimensions; "
            f"the batch and depth entries must be 1"
        )


def explicit_pads(
    padding: str, explicit_paddings: Sequence[int], data_format: str
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((top, bottom), (left, right)) for EXPLICIT padding; None for SAME/VALID.

    Raises ValueError for a malformed `explicit_paddings`.
    """
    pads = list(explicit_paddings)
    if padding != "EXPLICIT":
        if pads:
            raise ValueError(
                f"explicit_paddings must be empty unless padding is EXPLICIT (padding is "
                f"{padding}, explicit_paddings is {pads})"
            )
        return None
    if len(pads) != 8:
        raise ValueError(
            f"explicit_paddings must have 8 values, a (before, after) pair per dimension of "
            f"{data_format}, got {len(pads)}: {pads}"
        )
    if any(p < 0 for p in pads):
        raise ValueError(f"explicit_paddings must be non-negative, got {pads}")
    c = 1 if data_format.startswith("NC") else 3
    if pads[0] or pads[1] or pads[2 * c] or pads[2 * c + 1]:
        raise ValueError(
            f"explicit_paddings {pads} pads the batch or depth dimension; only the spatial "
            f"dimensions may be padded"
        )
    h, w = spatial_axes(data_format)
    return (pads[2 * h], pads[2 * h + 1]), (pads[2 * w], pads[2 * w + 1])


def windowed_output_size(
    size: int | None,
    ksize: int | None,
    stride: int,
    dilation: int,
    padding: str,
    pads: tuple[int, int] = (0, 0),
    strict: bool = True,
) -> tuple[int | None, int | None, int | None]:
    """(output size, padding before, padding after) of one spatial dimension.

    `strict` is the rule of shape inference: a VALID/EXPLICIT window larger than the padded
    input is an error. Without it (the kernels' rule) only a negative size is, where the size is
    `(in + pads - effective_k + stride) / stride` truncated toward zero, as TensorFlow computes it.
    """
    if stride < 1 or dilation < 1:
        raise ValueError(f"strides and dilations must be >= 1, got {stride} and {dilation}")
    if size is None or ksize is None:
        if padding == "SAME" and size is not None:
            return -(-size // stride), None, None
        return None, None, None
    eff = (ksize - 1) * dilation + 1
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2, total - total // 2
    before, after = pads if padding == "EXPLICIT" else (0, 0)
    span = size + before + after
    if strict and span < eff:
        raise ValueError(
            f"negative output size: the window ({eff} with dilation {dilation}) is larger than "
            f"the padded input ({span}) with {padding} padding"
        )
    num = span - eff + stride
    out = num // stride if num >= 0 else -((-num) // stride)
    if out < 0:
        raise ValueError(
            f"computed output size would be negative: {out} (input {size}, padding "
            f"{before}+{after}, effective window {eff}, stride {stride})"
        )
    return out, before, after


def _dims4(shape: TensorShape, data_format: str):
    """(batch, height, width, channels) of a rank-4 shape in `data_format`."""
    s = shape.with_rank(4)
    if data_format.startswith("NCHW"):
        return s[0], s[2], s[3], s[1]
    return s[0], s[1], s[2], s[3]


def _shape4(n, h, w, c, data_format: str) -> TensorShape:
    if data_format.startswith("NCHW"):
        return TensorShape([n, c, h, w])
    return TensorShape([n, h, w, c])


def _merge_dim(a, b, what: str):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ValueError(f"{what}: dimensions must be equal, but are {a} and {b}")


def _conv_spatial(op, h, w, kh, kw):
    a = op.attrs
    fmt = a["data_format"]
    sh, sw = spatial_pair(a["strides"], "strides", fmt)
    dh, dw = spatial_pair(a.get("dilations", (1, 1, 1, 1)), "dilations", fmt)
    pads = explicit_pads(a["padding"], a.get("explicit_paddings", ()), fmt) or ((0, 0), (0, 0))
    oh = windowed_output_size(h, kh, sh, dh, a["padding"], pads[0])[0]
    ow = windowed_output_size(w, kw, sw, dw, a["padding"], pads[1])[0]
    return oh, ow


def _conv2d_shape(op):
    fmt = op.attrs["data_format"]
    n, h, w, c = _dims4(op._inputs[0].shape, fmt)
    kh, kw, kc, o = op._inputs[1].shape.with_rank(4).dims
    if c is not None and kc is not None:
        if kc == 0 or c % kc:
            raise ValueError(
                f"the input depth ({c}) is not a multiple of the filter's input depth ({kc})"
            )
        groups = c // kc
        if o is not None and o % groups:
            raise ValueError(
                f"the output depth ({o}) is not a multiple of the number of groups ({groups})"
            )
    oh, ow = _conv_spatial(op, h, w, kh, kw)
    return _shape4(n, oh, ow, o, fmt)


def _depthwise_shape(op):
    fmt = op.attrs["data_format"]
    n, h, w, c = _dims4(op._inputs[0].shape, fmt)
    kh, kw, kc, m = op._inputs[1].shape.with_rank(4).dims
    c = _merge_dim(c, kc, "input depth vs the filter's input depth (dimension 2)")
    oh, ow = _conv_spatial(op, h, w, kh, kw)
    return _shape4(n, oh, ow, None if c is None or m is None else c * m, fmt)


def _sizes_shape(sizes: Tensor, what: str) -> TensorShape:
    """The rank-4 shape held by the 1-D int32 tensor `sizes`."""
    sizes.shape.with_rank(1)
    s = constant_value_as_shape(sizes)
    if s.rank is None:
        return unknown_shape(4)
    if s.rank != 4:
        raise ValueError(f"{what} must have 4 values, got {s.rank}")
    return s


def _backprop_input_shape(op):
    fmt = op.attrs["data_format"]
    sizes = op._inputs[0]
    sizes.shape.with_rank(1)
    n_sizes = sizes.shape[0]
    if n_sizes == 2:
        # Only the spatial size is given: batch comes from out_backprop, depth from the filter.
        hw = constant_value_as_shape(sizes)
        n = _dims4(op._inputs[2].shape, fmt)[0]
        c = op._inputs[1].shape.with_rank(4)[2]
        return _shape4(n, hw[0], hw[1], c, fmt)
    if n_sizes not in (None, 4):
        raise ValueError(f"input_sizes must have 4 values (or 2 spatial ones), got {n_sizes}")
    return _sizes_shape(sizes, "input_sizes")


def _backprop_filter_shape(op):
    return _sizes_shape(op._inputs[1], "filter_sizes")


_CONV_T = "{float16, bfloat16, float32, float64, int32}"
_FLOAT_T = "{float16, bfloat16, float32, float64}"
_CONV_ATTRS = [
    "strides: list(int)",
    "use_cudnn_on_gpu: bool = true",
    "padding: {'SAME', 'VALID', 'EXPLICIT'}",
    "explicit_paddings: list(int) = []",
    "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
    "dilations: list(int) = [1, 1, 1, 1]",
]
_DEPTHWISE_ATTRS = [a for a in _CONV_ATTRS if not a.startswith("use_cudnn")]

defop(
    "Conv2D",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs=[f"T: {_CONV_T}", *_CONV_ATTRS],
    shape=_conv2d_shape,
    doc="2-D cross-correlation of a 4-D input with a [height, width, in, out] filter.",
)
defop(
    "Conv2DBackpropInput",
    inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
    outputs=["output: T"],
    attrs=[f"T: {_CONV_T}", *_CONV_ATTRS],
    shape=_backprop_input_shape,
    doc="The gradient of Conv2D with respect to its input.",
)
defop(
    "Conv2DBackpropFilter",
    inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
    outputs=["output: T"],
    attrs=[f"T: {_FLOAT_T}", *_CONV_ATTRS],
    shape=_backprop_filter_shape,
    doc="The gradient of Conv2D with respect to its filter.",
)
defop(
    "DepthwiseConv2dNative",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs=[f"T: {_FLOAT_T}", *_DEPTHWISE_ATTRS],
    shape=_depthwise_shape,
    doc="Per-channel 2-D convolution with a [height, width, in, multiplier] filter.",
)
defop(
    "DepthwiseConv2dNativeBackpropInput",
    inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
    outputs=["output: T"],
    attrs=[f"T: {_FLOAT_T}", *_DEPTHWISE_ATTRS],
    shape=_backprop_input_shape,
    doc="The gradient of DepthwiseConv2dNative with respect to its input.",
)
defop(
    "DepthwiseConv2dNativeBackpropFilter",
    inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
    outputs=["output: T"],
    attrs=[f"T: {_FLOAT_T}", *_DEPTHWISE_ATTRS],
    shape=_backprop_filter_shape,
    doc="The gradient of DepthwiseConv2dNative with respect to its filter.",
)


# -- builders -------------------------------------------------------------------------------------


def _expand(value, name: str, data_format: str) -> list[int]:
    """TensorFlow's stride/ksize convenience: an int or 1, 2 or 4 values → 4 values."""
    if value is None:
        return [1, 1, 1, 1]
    vals = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    if len(vals) == 4:
        return vals
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise ValueError(f"{name} must be an int or have 1, 2 or 4 values, got {value!r}")
    if data_format.startswith("NC"):
        return [1, 1, *vals]
    return [1, *vals, 1]


def _padding_attrs(padding) -> dict:
    """A padding string, or explicit [[before, after]] * 4 pairs → the op's padding attrs."""
    if isinstance(padding, str):
        return {"padding": padding.upper(), "explicit_paddings": []}
    pairs = [list(p) for p in padding]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"explicit padding must be 4 [before, after] pairs, one per dimension, got {padding!r}"
        )
    return {"padding": "EXPLICIT", "explicit_paddings": [int(v) for p in pairs for v in p]}


def _window_attrs(strides, padding, data_format: str, dilations) -> dict:
    """The strides, dilations, data_format and padding attrs every convolution builder sets."""
    return {
        "strides": _expand(strides, "strides", data_format),
        "dilations": _expand(dilations, "dilations", data_format),
        "data_format": data_format,
        **_padding_attrs(padding),
    }


def conv2d(
    input,
    filters=None,
    strides=None,
    padding=None,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
    filter=None,
    use_cudnn_on_gpu: bool = True,
) -> Tensor:
    """2-D convolution (cross-correlation) of `input` with `filters`.

    Args:
        input: a 4-D tensor in `data_format` (NHWC or NCHW).
        filters: [filter_height, filter_width, in_channels, out_channels]; `filter` is the TF1
            spelling of the same argument.
        strides: an int or 1, 2 or 4 ints: the window's step per dimension.
        padding: "SAME", "VALID", or explicit [[before, after]] pairs, one per dimension.
        dilations: an int or 1, 2 or 4 ints (default 1).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [None, 28, 28, 1])
    ...     w = rg.placeholder(rg.float32, [5, 5, 1, 32])
    ...     conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
    <Tensor 'Conv2D:0' f32[?,28,28,32]>
    """
    filters = filters if filters is not None else filter
    if filters is None or padding is None:
        raise ValueError("conv2d needs filters and padding")
    attrs = _window_attrs(strides, padding, data_format, dilations)
    attrs["use_cudnn_on_gpu"] = use_cudnn_on_gpu
    return get_default_graph().create_op("Conv2D", [input, filters], attrs, name=name).outputs[0]


def _sizes(value, name: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, TensorShape):
        value = value.as_list()
    return convert_to_tensor(value, "int32", name=name)


def conv2d_backprop_input(
    input_sizes,
    filter,
    out_backprop,
    strides,
    padding,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
) -> Tensor:
    """The gradient of conv2d with respect to its input, of shape `input_sizes`."""
    attrs = _window_attrs(strides, padding, data_format, dilations)
    attrs["use_cudnn_on_gpu"] = use_cudnn_on_gpu
    g = get_default_graph()
    with g.name_scope(name or "Conv2DBackpropInput") as scope:
        sizes = _sizes(input_sizes, "input_sizes")
        inputs = [sizes, filter, out_backprop]
        return g.create_op("Conv2DBackpropInput", inputs, attrs, name=scope).outputs[0]


def conv2d_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
) -> Tensor:
    """The gradient of conv2d with respect to its filter, of shape `filter_sizes`."""
    attrs = _window_attrs(strides, padding, data_format, dilations)
    attrs["use_cudnn_on_gpu"] = use_cudnn_on_gpu
    g = get_default_graph()
    with g.name_scope(name or "Conv2DBackpropFilter") as scope:
        sizes = _sizes(filter_sizes, "filter_sizes")
        inputs = [input, sizes, out_backprop]
        return g.create_op("Conv2DBackpropFilter", inputs, attrs, name=scope).outputs[0]


def depthwise_conv2d_native(
    input,
    filter,
    strides,
    padding,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
) -> Tensor:
    """Depthwise 2-D convolution: each input channel convolved with its own `multiplier` filters.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [None, 8, 8, 3])
    ...     depthwise_conv2d_native(x, rg.placeholder(rg.float32, [3, 3, 3, 2]), 1, "SAME")
    <Tensor 'DepthwiseConv2dNative:0' f32[?,8,8,6]>
    """
    attrs = _window_attrs(strides, padding, data_format, dilations)
    g = get_default_graph()
    return g.create_op("DepthwiseConv2dNative", [input, filter], attrs, name=name).outputs[0]


def depthwise_conv2d_native_backprop_input(
    input_sizes,
    filter,
    out_backprop,
    strides,
    padding,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
) -> Tensor:
    """The gradient of depthwise_conv2d_native with respect to its input."""
    attrs = _window_attrs(strides, padding, data_format, dilations)
    g = get_default_graph()
    with g.name_scope(name or "DepthwiseConv2dNativeBackpropInput") as scope:
        inputs = [_sizes(input_sizes, "input_sizes"), filter, out_backprop]
        op = g.create_op("DepthwiseConv2dNativeBackpropInput", inputs, attrs, name=scope)
        return op.outputs[0]


def depthwise_conv2d_native_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format: str = "NHWC",
    dilations=None,
    name: str | None = None,
) -> Tensor:
    """The gradient of depthwise_conv2d_native with respect to its filter."""
    attrs = _window_attrs(strides, padding, data_format, dilations)
    g = get_default_graph()
    with g.name_scope(name or "DepthwiseConv2dNativeBackpropFilter") as scope:
        inputs = [input, _sizes(filter_sizes, "filter_sizes"), out_backprop]
        op = g.create_op("DepthwiseConv2dNativeBackpropFilter", inputs, attrs, name=scope)
        return op.outputs[0]
