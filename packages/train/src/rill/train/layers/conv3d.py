"""Volumetric layers of TF1's `tf.layers`: `conv3d`, `max_pooling3d`, `average_pooling3d`, over
[batch, depth, height, width, channels] (or channels first).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 4, 8, 8, 2])
...     max_pooling3d(conv3d(x, 6, 3, padding="same"), 2, 2).shape
TensorShape([None, 2, 4, 4, 6])
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Tensor
from rill.graph.ops import volume_ops
from rill.graph.ops.nn_ops import bias_add
from rill.graph.ops.reshape_ops import reshape
from rill.graph.shapes import TensorShape
from rill.train import init_ops
from rill.train.layers.base import (
    Layer,
    check_rank,
    normalize_data_format,
    normalize_padding,
    normalize_tuple,
)
from rill.train.layers.conv_more import _channels

__all__ = [
    "Conv3D",
    "MaxPooling3D",
    "AveragePooling3D",
    "conv3d",
    "max_pooling3d",
    "average_pooling3d",
]


def _format(data_format: str) -> str:
    return "NCDHW" if data_format == "channels_first" else "NDHWC"


def _full(values: tuple, data_format: str) -> list[int]:
    """A 3-tuple over depth, height and width as the op's 5-element attr."""
    return [1, 1, *values] if data_format == "channels_first" else [1, *values, 1]


class Conv3D(Layer):
    """outputs = activation(conv3d(inputs, kernel) + bias); kernel [kd, kh, kw, in_channels,
    filters] (`tf.layers.Conv3D`)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                 data_format="channels_last", dilation_rate=(1, 1, 1), activation=None,
                 use_bias=True, kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
                 **kwargs):  # fmt: skip
        super().__init__(
            trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs
        )
        if int(filters) <= 0:
            raise ValueError(f"Conv3D: filters must be a positive integer, got {filters!r}")
        self.filters = int(filters)
        self.kernel_size = normalize_tuple(kernel_size, 3, "kernel_size")
        self.strides = normalize_tuple(strides, 3, "strides")
        self.dilation_rate = normalize_tuple(dilation_rate, 3, "dilation_rate")
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
            raise TypeError(f"Unable to build `Conv3D` layer with non-floating dtype {self.dtype}")
        axis = 1 if self.data_format == "channels_first" else -1
        channels = _channels(self, input_shape, 5, axis)
        self.kernel = self.add_weight(
            "kernel", [*self.kernel_size, channels, self.filters],
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
        check_rank(self, inputs, ndim=5)
        outputs = volume_ops.conv3d(
            inputs, self.kernel, _full(self.strides, self.data_format), self.padding.upper(),
            data_format=_format(self.data_format),
            dilations=_full(self.dilation_rate, self.data_format),
        )  # fmt: skip
        if self.use_bias:
            if self.data_format == "channels_first":
                outputs = outputs + reshape(self.bias, [1, self.filters, 1, 1, 1])
            else:
                outputs = bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class _Pooling3D(Layer):
    _pool = None

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last",
                 name=None, **kwargs):  # fmt: skip
        super().__init__(name=name, **kwargs)
        self.pool_size = normalize_tuple(pool_size, 3, "pool_size")
        self.strides = normalize_tuple(strides, 3, "strides")
        self.padding = normalize_padding(padding)
        self.data_format = normalize_data_format(data_format)

    def call(self, inputs: Tensor) -> Tensor:
        check_rank(self, inputs, ndim=5)
        return type(self)._pool(
            inputs, _full(self.pool_size, self.data_format), _full(self.strides, self.data_format),
            self.padding.upper(), data_format=_format(self.data_format),
        )  # fmt: skip


class MaxPooling3D(_Pooling3D):
    """The maximum over each window of a volume."""

    _pool = staticmethod(volume_ops.max_pool3d)


class AveragePooling3D(_Pooling3D):
    """The mean over each window of a volume (the voxels inside the input, under SAME)."""

    _pool = staticmethod(volume_ops.avg_pool3d)


def conv3d(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None) -> Tensor:  # fmt: skip
    """`tf.layers.conv3d`: a 3-D convolution layer."""
    layer = Conv3D(
        filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
        dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
        kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
        kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
        bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name,
        _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def max_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None) -> Tensor:  # fmt: skip
    """`tf.layers.max_pooling3d`."""
    return MaxPooling3D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None) -> Tensor:  # fmt: skip
    """`tf.layers.average_pooling3d`."""
    return AveragePooling3D(pool_size, strides, padding, data_format, name=name)(inputs)
