"""Neural-network builders composed of other ops (TensorFlow's nn_impl / nn_ops Python layer):
xw_plus_b, l2_normalize, weighted_cross_entropy_with_logits, conv2d_transpose,
separable_conv2d, depthwise_conv2d, atrous_conv2d, conv1d and the 1-D pools.

None of these declares an op: each builds the primitive ops TensorFlow's function builds, so
gradients, kernels and converters already exist for every op they make.
"""

from __future__ import annotations

import numpy as np

from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.ops import math_ops
from rill.graph.ops.conv_ops import (
    conv2d,
    conv2d_backprop_input,
    depthwise_conv2d_native,
)
from rill.graph.ops.matmul_ops import matmul
from rill.graph.ops.nn_ops import bias_add, relu
from rill.graph.ops.pool_ops import avg_pool, max_pool
from rill.graph.ops.reduction_ops import reduce_sum
from rill.graph.ops.reshape_ops import expand_dims, squeeze
from rill.graph.shapes import TensorShape

__all__ = [
    "xw_plus_b",
    "l2_normalize",
    "weighted_cross_entropy_with_logits",
    "conv2d_transpose",
    "separable_conv2d",
    "depthwise_conv2d",
    "atrous_conv2d",
    "conv1d",
    "max_pool1d",
    "avg_pool1d",
    "batch_normalization",
    "relu_layer",
    "crelu",
    "swish",
    "zero_fraction",
    "log_poisson_loss",
]


def xw_plus_b(x, weights, biases, name: str | None = None) -> Tensor:
    """matmul(x, weights) + biases, as one named scope (`tf.nn.xw_plus_b`).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     y = xw_plus_b(rg.ones([2, 3]), rg.ones([3, 4]), rg.zeros([4]))
    ...     y
    <Tensor 'xw_plus_b:0' f32[2,4]>
    """
    g = get_default_graph()
    with g.name_scope(name or "xw_plus_b") as scope:
        x = convert_to_tensor(x, name="x")
        weights = convert_to_tensor(weights, name="weights")
        biases = convert_to_tensor(biases, name="biases")
        return bias_add(matmul(x, weights), biases, name=scope)


def l2_normalize(x, axis=None, epsilon: float = 1e-12, name=None, dim=None) -> Tensor:
    """x / sqrt(max(sum(x², axis), epsilon)) (`tf.nn.l2_normalize`; `dim` is TF1's name for
    `axis`).

    >>> import rill.graph as rg
    >>> from rill.exec import Session
    >>> with rg.Graph().as_default():
    ...     Session().run(l2_normalize(rg.constant([3.0, 4.0]), 0))
    array([0.6, 0.8], dtype=float32)
    """
    if axis is None:
        axis = dim
    g = get_default_graph()
    with g.name_scope(name or "l2_normalize") as scope:
        x = convert_to_tensor(x, name="x")
        square_sum = reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv = math_ops.rsqrt(math_ops.maximum(square_sum, constant(epsilon, dtype=x.dtype)))
        return math_ops.multiply(x, inv, name=scope)


def weighted_cross_entropy_with_logits(
    targets=None, logits=None, pos_weight=None, name=None, labels=None
) -> Tensor:
    """The logistic loss with positives weighted by `pos_weight`, per element
    (`tf.nn.weighted_cross_entropy_with_logits`; TF1 names the labels `targets`):
    (1 - z)·x + (1 + (q - 1)·z)·(log(1 + exp(-|x|)) + max(-x, 0)), stable for any x.
    """
    if targets is None:
        targets = labels
    if targets is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs targets, logits and pos_weight")
    g = get_default_graph()
    with g.name_scope(name or "logistic_loss") as scope:
        logits = convert_to_tensor(logits, name="logits")
        targets = convert_to_tensor(targets, dtype=logits.dtype, name="targets")
        if not targets.shape.is_compatible_with(logits.shape):
            raise ValueError(
                f"logits and targets must have the same shape ({logits.shape} vs {targets.shape})"
            )
        q = convert_to_tensor(pos_weight, dtype=logits.dtype, name="pos_weight")
        one = constant(1.0, dtype=logits.dtype)
        log_weight = math_ops.add(one, math_ops.multiply(math_ops.subtract(q, one), targets))
        softplus_neg_abs = math_ops.log1p(math_ops.exp(math_ops.negative(math_ops.abs(logits))))
        tail = math_ops.add(softplus_neg_abs, relu(math_ops.negative(logits)))
        return math_ops.add(
            math_ops.multiply(math_ops.subtract(one, targets), logits),
            math_ops.multiply(log_weight, tail),
            name=scope,
        )


def conv2d_transpose(
    value=None,
    filter=None,
    output_shape=None,
    strides=None,
    padding: str = "SAME",
    data_format: str = "NHWC",
    name: str | None = None,
    input=None,
    filters=None,
    dilations=None,
) -> Tensor:
    """The transpose (gradient) of conv2d (`tf.nn.conv2d_transpose`): `filter` is
    [height, width, output_channels, in_channels] and `output_shape` the result's 4-D shape.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [2, 4, 4, 8])
    ...     conv2d_transpose(x, rg.ones([3, 3, 3, 8]), [2, 8, 8, 3], [1, 2, 2, 1]).shape
    TensorShape([2, 8, 8, 3])
    """
    value = value if value is not None else input
    filter = filter if filter is not None else filters
    if value is None or filter is None or output_shape is None or strides is None:
        raise ValueError("conv2d_transpose needs value, filter, output_shape and strides")
    g = get_default_graph()
    with g.name_scope(name or "conv2d_transpose") as scope:
        value = convert_to_tensor(value, name="value")
        filter = convert_to_tensor(filter, name="filter")
        channel = 3 if data_format == "NHWC" else 1
        in_depth = value.shape.dims[channel] if value.shape.rank == 4 else None
        f_in = filter.shape.dims[3] if filter.shape.rank == 4 else None
        if in_depth is not None and f_in is not None and in_depth != f_in:
            raise ValueError(
                f"input channels ({in_depth}) do not match the filter's in_channels ({f_in})"
            )
        static = None
        if not isinstance(output_shape, Tensor):
            static = [int(d) for d in np.asarray(output_shape).reshape(-1)]
            if len(static) != 4:
                raise ValueError(f"output_shape must have 4 elements, got {static}")
        out = conv2d_backprop_input(
            output_shape if static is None else constant(np.array(static, np.int32)),
            filter,
            value,
            strides,
            padding,
            data_format=data_format,
            dilations=dilations,
            name=scope,
        )
        if static is not None:
            out.set_shape(TensorShape(static))
        return out


def depthwise_conv2d(
    input,
    filter,
    strides,
    padding,
    rate=None,
    name=None,
    data_format=None,
    dilations=None,
) -> Tensor:
    """Depthwise 2-D convolution with an optional dilation `rate` (`tf.nn.depthwise_conv2d`)."""
    dilations = dilations if dilations is not None else rate
    return depthwise_conv2d_native(
        input, filter, strides, padding, data_format or "NHWC", dilations, name=name
    )


def separable_conv2d(
    input,
    depthwise_filter,
    pointwise_filter,
    strides,
    padding,
    rate=None,
    name=None,
    data_format=None,
    dilations=None,
) -> Tensor:
    """A depthwise convolution followed by a 1x1 (pointwise) convolution
    (`tf.nn.separable_conv2d`).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [None, 8, 8, 3])
    ...     separable_conv2d(x, rg.ones([3, 3, 3, 2]), rg.ones([1, 1, 6, 5]), [1, 1, 1, 1],
    ...                      "SAME").shape
    TensorShape([None, 8, 8, 5])
    """
    data_format = data_format or "NHWC"
    g = get_default_graph()
    with g.name_scope(name or "separable_conv2d") as scope:
        depthwise = depthwise_conv2d_native(
            input,
            depthwise_filter,
            strides,
            padding,
            data_format,
            dilations if dilations is not None else rate,
            name="depthwise",
        )
        return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], "VALID", data_format, name=scope)


def atrous_conv2d(value, filters, rate: int, padding: str, name=None) -> Tensor:
    """Dilated ("atrous") 2-D convolution with stride 1 (`tf.nn.atrous_conv2d`)."""
    if int(rate) < 1:
        raise ValueError(f"rate must be >= 1, got {rate}")
    return conv2d(value, filters, 1, padding, dilations=int(rate), name=name or "atrous_conv2d")


def conv1d(
    value=None,
    filters=None,
    stride=None,
    padding=None,
    use_cudnn_on_gpu=None,
    data_format=None,
    name=None,
    input=None,
    dilations=None,
) -> Tensor:
    """1-D convolution over [batch, width, channels] ("NWC") or [batch, channels, width]
    ("NCW") with filters [width, in_channels, out_channels] (`tf.nn.conv1d`), computed as
    conv2d over an inserted height of 1.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     conv1d(rg.placeholder(rg.float32, [None, 10, 3]), rg.ones([3, 3, 4]), 1, "SAME").shape
    TensorShape([None, 10, 4])
    """
    value = value if value is not None else input
    data_format = data_format or "NWC"
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"data_format must be NWC or NCW, got {data_format!r}")
    g = get_default_graph()
    with g.name_scope(name or "conv1d") as scope:
        spatial = 1 if data_format == "NWC" else 2
        x = expand_dims(value, spatial)
        w = expand_dims(filters, 0)
        d = 1 if dilations is None else dilations
        fmt = "NHWC" if data_format == "NWC" else "NCHW"
        y = conv2d(x, w, [1, stride], padding, fmt, dilations=[1, d])
        return squeeze(y, [spatial], name=scope)


def _pool1d(pool, default_name, input, ksize, strides, padding, data_format, name):
    data_format = data_format or "NWC"
    g = get_default_graph()
    with g.name_scope(name or default_name) as scope:
        spatial = 1 if data_format == "NWC" else 2
        x = expand_dims(input, spatial)
        k = ksize if isinstance(ksize, int) else list(ksize)[-2 if data_format == "NWC" else -1]
        s = (
            strides
            if isinstance(strides, int)
            else list(strides)[-2 if data_format == "NWC" else -1]
        )
        fmt = "NHWC" if data_format == "NWC" else "NCHW"
        y = pool(x, [1, k], [1, s], padding, fmt)
        return squeeze(y, [spatial], name=scope)


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:
    """Max pooling over the width of [batch, width, channels] (`tf.nn.max_pool1d`)."""
    return _pool1d(max_pool, "MaxPool1d", input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:
    """Average pooling over the width of [batch, width, channels] (`tf.nn.avg_pool1d`)."""
    return _pool1d(avg_pool, "AvgPool1D", input, ksize, strides, padding, data_format, name)


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None) -> Tensor:
    """(x - mean) · scale / sqrt(variance + epsilon) + offset, broadcasting the statistics
    (`tf.nn.batch_normalization`; offset and scale may be None).

    >>> import rill.graph as rg
    >>> from rill.exec import Session
    >>> with rg.Graph().as_default():
    ...     y = batch_normalization(rg.constant([1.0, 3.0]), 2.0, 1.0, None, None, 0.0)
    ...     Session().run(y)
    array([-1.,  1.], dtype=float32)
    """
    g = get_default_graph()
    with g.name_scope(name or "batchnorm") as scope:
        x = convert_to_tensor(x, name="x")
        mean = convert_to_tensor(mean, dtype=x.dtype, name="mean")
        variance = convert_to_tensor(variance, dtype=x.dtype, name="variance")
        inv = math_ops.rsqrt(math_ops.add(variance, constant(variance_epsilon, dtype=x.dtype)))
        if scale is not None:
            inv = math_ops.multiply(inv, convert_to_tensor(scale, dtype=x.dtype))
        shift = math_ops.negative(math_ops.multiply(mean, inv))
        if offset is not None:
            shift = math_ops.add(shift, convert_to_tensor(offset, dtype=x.dtype))
        return math_ops.add(math_ops.multiply(x, inv), shift, name=scope)


def relu_layer(x, weights, biases, name=None) -> Tensor:
    """relu(matmul(x, weights) + biases) (`tf.nn.relu_layer`)."""
    g = get_default_graph()
    with g.name_scope(name or "relu_layer") as scope:
        return relu(bias_add(matmul(x, weights), biases), name=scope)


def crelu(features, name=None, axis: int = -1) -> Tensor:
    """Concatenated ReLU: concat([relu(x), relu(-x)], axis) (`tf.nn.crelu`)."""
    from rill.graph.ops.reshape_ops import concat

    g = get_default_graph()
    with g.name_scope(name or "CRelu") as scope:
        x = convert_to_tensor(features, name="features")
        return relu(concat([x, math_ops.negative(x)], axis), name=scope)


def swish(features, name=None) -> Tensor:
    """x · sigmoid(x) (`tf.nn.swish`, also called silu)."""
    g = get_default_graph()
    with g.name_scope(name or "swish") as scope:
        x = convert_to_tensor(features, name="features")
        return math_ops.multiply(x, math_ops.sigmoid(x), name=scope)


def zero_fraction(value, name=None) -> Tensor:
    """The fraction of zeros in `value`, as float32 (`tf.nn.zero_fraction`)."""
    from rill.graph import dtypes
    from rill.graph.ops.logic_ops import equal
    from rill.graph.ops.reduction_ops import reduce_mean

    g = get_default_graph()
    with g.name_scope(name or "zero_fraction") as scope:
        v = convert_to_tensor(value, name="value")
        zero = constant(0, dtype=v.dtype)
        return reduce_mean(math_ops.cast(equal(v, zero), dtypes.float32), name=scope)


def log_poisson_loss(targets, log_input, compute_full_loss: bool = False, name=None) -> Tensor:
    """exp(c) - z·c per element, plus Stirling's term z·log(z) - z + ½·log(2πz) for z > 1
    when compute_full_loss (`tf.nn.log_poisson_loss`)."""
    from rill.graph.ops.logic_ops import greater, select_v2

    g = get_default_graph()
    with g.name_scope(name or "log_poisson_loss") as scope:
        c = convert_to_tensor(log_input, name="log_input")
        z = convert_to_tensor(targets, dtype=c.dtype, name="targets")
        if not z.shape.is_compatible_with(c.shape):
            raise ValueError(f"log_input {c.shape} and targets {z.shape} must have the same shape")
        result = math_ops.subtract(math_ops.exp(c), math_ops.multiply(z, c))
        if not compute_full_loss:
            return math_ops.add(result, constant(0, dtype=c.dtype), name=scope)
        one = constant(1.0, dtype=c.dtype)
        safe_z = select_v2(greater(z, one), z, one)
        stirling = math_ops.add(
            math_ops.subtract(math_ops.multiply(z, math_ops.log(safe_z)), z),
            math_ops.multiply(
                constant(0.5, dtype=c.dtype),
                math_ops.log(math_ops.multiply(constant(2 * np.pi, dtype=c.dtype), safe_z)),
            ),  # fmt: skip
        )
        zeros = math_ops.multiply(z, constant(0.0, dtype=c.dtype))
        return math_ops.add(result, select_v2(greater(z, one), stirling, zeros), name=scope)
