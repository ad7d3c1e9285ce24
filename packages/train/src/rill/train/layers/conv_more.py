"""More convolution and pooling layers of TF1's `tf.layers`: `conv2d_transpose`,
`separable_conv2d`, `conv1d`, `max_pooling1d`, `average_pooling1d`.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 7, 7, 16])
...     conv2d_transpose(x, 8, 3, strides=2, padding="same").shape
TensorShape([None, 14, 14, 8])
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, constant
from rill.graph.ops import nn_impl
from rill.graph.ops.array_ops import shape as shape_op
from rill.graph.ops.nn_ops import bias_add
from rill.graph.ops.reshape_ops import stack
from rill.graph.ops.slice_ops import strided_slice
from rill.graph.shapes import TensorShape
from rill.train import init_ops
from rill.train.layers.base import (
    Layer,
    check_rank,
    normalize_data_format,
    normalize_padding,
    normalize_tuple,
)
from rill.train.layers.conv import Conv2D

__all__ = [
    "Conv2DTranspose",
    "SeparableConv2D",
    "Conv1D",
    "MaxPooling1D",
    "AveragePooling1D",
    "conv2d_transpose",
    "separable_conv2d",
    "conv1d",
    "max_pooling1d",
    "average_pooling1d",
]


def _channels(layer, input_shape: TensorShape, rank: int, axis: int) -> int:
    if input_shape.rank is not None and input_shape.rank != rank:
        raise ValueError(
            f"Input 0 of layer {layer.name} is incompatible with the layer: expected ndim={rank}, "
            f"found ndim={input_shape.rank}. Full shape received: {input_shape}"
        )
    channels = input_shape[axis] if input_shape.rank is not None else None
    if channels is None:
        raise ValueError(
            f"{layer.name}: the channel dimension of the inputs should be defined, got "
            f"{input_shape}"
        )
    return channels


def _deconv_length(size, stride: int, kernel: int, padding: str):
    if size is None:
        return None
    return size * stride if padding == "same" else size * stride + max(kernel - stride, 0)


class Conv2DTranspose(Conv2D):
    """outputs = activation(conv2d_transpose(inputs, kernel) + bias); the kernel is
    [kh, kw, filters, in_channels] (`tf.layers.Conv2DTranspose`)."""

    def build(self, input_shape: TensorShape) -> None:
        if self.data_format != "channels_last":
            raise ValueError("Conv2DTranspose: rill supports channels_last only")
        channels = _channels(self, input_shape, 4, -1)
        self.kernel = self.add_weight(
            "kernel",
            [*self.kernel_size, self.filters, channels],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def call(self, inputs: Tensor) -> Tensor:
        check_rank(self, inputs, ndim=4)
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        dims = inputs.shape.as_list()
        oh = _deconv_length(dims[1], sh, kh, self.padding)
        ow = _deconv_length(dims[2], sw, kw, self.padding)
        if None in (dims[0], oh, ow):
            s = shape_op(inputs)

            def dim(i):
                return strided_slice(s, [i], [i + 1], shrink_axis_mask=1)

            def length(i, stride, k):
                n = dim(i) * stride
                return n if self.padding == "same" else n + max(k - stride, 0)

            out_shape = stack(
                [dim(0), length(1, sh, kh) if oh is None else constant(np.int32(oh)),
                 length(2, sw, kw) if ow is None else constant(np.int32(ow)),
                 constant(np.int32(self.filters))]
            )  # fmt: skip
        else:
            out_shape = [dims[0], oh, ow, self.filters]
        outputs = nn_impl.conv2d_transpose(
            inputs, self.kernel, out_shape, [1, sh, sw, 1], self.padding.upper(),
            name="conv2d_transpose",
        )  # fmt: skip
        outputs.set_shape(TensorShape([dims[0], oh, ow, self.filters]))
        if self.use_bias:
            outputs = bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class SeparableConv2D(Conv2D):
    """A depthwise convolution (`depth_multiplier` filters per channel) then a 1x1 convolution
    to `filters` channels, plus bias and activation (`tf.layers.SeparableConv2D`)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 data_format="channels_last", dilation_rate=(1, 1), depth_multiplier: int = 1,
                 activation=None, use_bias=True, depthwise_initializer=None,
                 pointwise_initializer=None, bias_initializer=None, depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None,
                 trainable=True, name=None, **kwargs):  # fmt: skip
        super().__init__(
            filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
            dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
            bias_initializer=bias_initializer, bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer, bias_constraint=bias_constraint,
            trainable=trainable, name=name, **kwargs,
        )  # fmt: skip
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = depthwise_initializer
        self.pointwise_initializer = pointwise_initializer
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.depthwise_constraint = depthwise_constraint
        self.pointwise_constraint = pointwise_constraint

    def build(self, input_shape: TensorShape) -> None:
        if self.data_format != "channels_last":
            raise ValueError("SeparableConv2D: rill supports channels_last only")
        channels = _channels(self, input_shape, 4, -1)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", [*self.kernel_size, channels, self.depth_multiplier],
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )  # fmt: skip
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", [1, 1, channels * self.depth_multiplier, self.filters],
            initializer=self.pointwise_initializer, regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
        )  # fmt: skip
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def call(self, inputs: Tensor) -> Tensor:
        check_rank(self, inputs, ndim=4)
        outputs = nn_impl.separable_conv2d(
            inputs, self.depthwise_kernel, self.pointwise_kernel, [1, *self.strides, 1],
            self.padding.upper(), rate=list(self.dilation_rate),
        )  # fmt: skip
        if self.use_bias:
            outputs = bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class Conv1D(Layer):
    """outputs = activation(conv1d(inputs, kernel) + bias) over [batch, width, channels];
    kernel [k, in_channels, filters] (`tf.layers.Conv1D`)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", dilation_rate=1, activation=None, use_bias=True,
                 kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable=True, name=None, **kwargs):  # fmt: skip
        super().__init__(
            trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs
        )
        if int(filters) <= 0:
            raise ValueError(f"Conv1D: filters must be a positive integer, got {filters!r}")
        self.filters = int(filters)
        (self.kernel_size,) = normalize_tuple(kernel_size, 1, "kernel_size")
        (self.strides,) = normalize_tuple(strides, 1, "strides")
        (self.dilation_rate,) = normalize_tuple(dilation_rate, 1, "dilation_rate")
        self.padding = normalize_padding(padding)
        self.data_format = normalize_data_format(data_format)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer or init_ops.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint

    def build(self, input_shape: TensorShape) -> None:
        if not dtypes.as_dtype(self.dtype).is_floating:
            raise TypeError(f"Unable to build `Conv1D` layer with non-floating dtype {self.dtype}")
        axis = 1 if self.data_format == "channels_first" else -1
        channels = _channels(self, input_shape, 3, axis)
        self.kernel = self.add_weight(
            "kernel", [self.kernel_size, channels, self.filters],
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )  # fmt: skip
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def call(self, inputs: Tensor) -> Tensor:
        check_rank(self, inputs, ndim=3)
        fmt = "NCW" if self.data_format == "channels_first" else "NWC"
        outputs = nn_impl.conv1d(
            inputs, self.kernel, self.strides, self.padding.upper(), data_format=fmt,
            dilations=self.dilation_rate,
        )  # fmt: skip
        if self.use_bias:
            outputs = bias_add(outputs, self.bias, data_format="NCHW" if fmt == "NCW" else None)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class _Pooling1D(Layer):
    _pool = None

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last",
                 name=None, **kwargs):  # fmt: skip
        super().__init__(name=name, **kwargs)
        (self.pool_size,) = normalize_tuple(pool_size, 1, "pool_size")
        (self.strides,) = normalize_tuple(strides, 1, "strides")
        self.padding = normalize_padding(padding)
        self.data_format = normalize_data_format(data_format)

    def call(self, inputs: Tensor) -> Tensor:
        check_rank(self, inputs, ndim=3)
        fmt = "NCW" if self.data_format == "channels_first" else "NWC"
        return type(self)._pool(inputs, self.pool_size, self.strides, self.padding.upper(), fmt)


class MaxPooling1D(_Pooling1D):
    """The maximum over each window of a [batch, width, channels] tensor."""

    _pool = staticmethod(nn_impl.max_pool1d)


class AveragePooling1D(_Pooling1D):
    """The mean over each window of a [batch, width, channels] tensor."""

    _pool = staticmethod(nn_impl.avg_pool1d)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None) -> Tensor:  # fmt: skip
    """`tf.layers.conv2d_transpose`: a transposed ("deconvolution") 2-D layer."""
    layer = Conv2DTranspose(
        filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
        activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
        bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
        bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
        kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
        trainable=trainable, name=name, _scope=name, _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def separable_conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", dilation_rate=(1, 1), depth_multiplier=1,
                     activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=None,
                     depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                     pointwise_constraint=None, bias_constraint=None, trainable=True, name=None,
                     reuse=None) -> Tensor:  # fmt: skip
    """`tf.layers.separable_conv2d`: depthwise then pointwise convolution."""
    layer = SeparableConv2D(
        filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
        dilation_rate=dilation_rate, depth_multiplier=depth_multiplier, activation=activation,
        use_bias=use_bias, depthwise_initializer=depthwise_initializer,
        pointwise_initializer=pointwise_initializer, bias_initializer=bias_initializer,
        depthwise_regularizer=depthwise_regularizer, pointwise_regularizer=pointwise_regularizer,
        bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
        depthwise_constraint=depthwise_constraint, pointwise_constraint=pointwise_constraint,
        bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name,
        _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def conv1d(inputs, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
           dilation_rate=1, activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
           trainable=True, name=None, reuse=None) -> Tensor:  # fmt: skip
    """`tf.layers.conv1d`: a 1-D convolution layer over [batch, width, channels]."""
    layer = Conv1D(
        filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
        dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
        kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
        kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
        bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name,
        _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None) -> Tensor:  # fmt: skip
    """`tf.layers.max_pooling1d`."""
    return MaxPooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None) -> Tensor:  # fmt: skip
    """`tf.layers.average_pooling1d`."""
    return AveragePooling1D(pool_size, strides, padding, data_format, name=name)(inputs)
