"""TensorFlow's `tf.nn` namespace over rill.graph's builders.

Only re-exports: every function lives in the ops module that owns it. Builders that need
rill.train (dropout, RNNs, moments, sigmoid cross-entropy) are added by `rill.compat.v1.nn`.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     rg.nn.relu(rg.constant([-1.0, 2.0])).op.type
'Relu'
"""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.conv_ops import (
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)
from rill.graph.ops.gather_ops import top_k
from rill.graph.ops.math_ops import sigmoid, tanh
from rill.graph.ops.nn_impl import (
    atrous_conv2d,
    avg_pool1d,
    batch_normalization,
    conv1d,
    conv2d_transpose,
    crelu,
    depthwise_conv2d,
    l2_normalize,
    log_poisson_loss,
    max_pool1d,
    relu_layer,
    separable_conv2d,
    swish,
    weighted_cross_entropy_with_logits,
    xw_plus_b,
    zero_fraction,
)
from rill.graph.ops.nn_ops import (
    bias_add,
    elu,
    fused_batch_norm,
    in_top_k,
    l2_loss,
    leaky_relu,
    local_response_normalization,
    log_softmax,
    relu,
    relu6,
    selu,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    softplus,
    softsign,
    sparse_softmax_cross_entropy_with_logits,
)
from rill.graph.ops.pool_ops import avg_pool, max_pool

lrn = local_response_normalization  # TensorFlow's short name
avg_pool2d = avg_pool
max_pool2d = max_pool
silu = swish
depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter
