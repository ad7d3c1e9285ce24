"""TF1 layers (`tf.layers`): functional builders and the layer classes behind them.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 28, 28, 1])
...     h = max_pooling2d(conv2d(x, 8, 3, padding="same", activation=rg.relu), 2, 2)
...     logits = dense(flatten(h), 10)
>>> logits
<Tensor 'dense/BiasAdd:0' f32[?,10]>
"""

from rill.train.layers.base import Layer
from rill.train.layers.conv import (
    AveragePooling2D,
    Conv2D,
    MaxPooling2D,
    average_pooling2d,
    conv2d,
    max_pooling2d,
)
from rill.train.layers.conv3d import (
    AveragePooling3D,
    Conv3D,
    MaxPooling3D,
    average_pooling3d,
    conv3d,
    max_pooling3d,
)
from rill.train.layers.conv_more import (
    AveragePooling1D,
    Conv1D,
    Conv2DTranspose,
    MaxPooling1D,
    SeparableConv2D,
    average_pooling1d,
    conv1d,
    conv2d_transpose,
    max_pooling1d,
    separable_conv2d,
)
from rill.train.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from rill.train.layers.normalization import BatchNormalization, batch_normalization

__all__ = [
    "AveragePooling3D",
    "Conv3D",
    "MaxPooling3D",
    "average_pooling3d",
    "conv3d",
    "max_pooling3d",
    "AveragePooling1D",
    "Conv1D",
    "Conv2DTranspose",
    "MaxPooling1D",
    "SeparableConv2D",
    "average_pooling1d",
    "conv1d",
    "conv2d_transpose",
    "max_pooling1d",
    "separable_conv2d",
    "AveragePooling2D",
    "BatchNormalization",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPooling2D",
    "average_pooling2d",
    "batch_normalization",
    "conv2d",
    "dense",
    "dropout",
    "flatten",
    "max_pooling2d",
]
