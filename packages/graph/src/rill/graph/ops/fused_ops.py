"""Fused ops that the step planner's remapper substitutes for chains of ops (names start with "_"
and users do not build them): TensorFlow's _FusedConv2D, _FusedDepthwiseConv2dNative and
_FusedMatMul, and rill's _FusedMaxPoolGrad, _FusedTanhGelu, _FusedLayerNorm and
_FusedSqueezeExcite. Each computes exactly what the chain it replaces computes, in one kernel that
skips the intermediate tensors.

fused_ops is "BiasAdd" (with args[0]) then at most one activation: TensorFlow's Relu, Relu6, Elu
and LeakyRelu, and rill's names for the chains ONNX models spell out — "Sigmoid", "Swish"
(x · sigmoid(x)), "HardSigmoid" (max(min(x / 6 + 1/2, 1), 0), PyTorch's and ONNX HardSwish's
constants) and "HardSwish" (x · HardSigmoid(x)). _FusedConv2D also takes TensorFlow's
[BiasAdd, Add] and [BiasAdd, Add, Relu] with two args (the bias, then a side input of the
output's shape added to it: a residual connection; rill's CPU kernel for NCHW data), and rill's
CPU NCHW forms with a leading "Mul" — [Mul, BiasAdd(, activation)] and [Mul, BiasAdd, Add(, Relu)]
— whose first arg s ([batch, channels, 1, 1], a squeeze-excite gate) multiplies the input before
the convolution."""

from __future__ import annotations

from rill.graph import shape_fns
from rill.graph.op_def import defop
from rill.graph.ops.conv_ops import _conv2d_shape, _depthwise_shape
from rill.graph.ops.matmul_ops import _matmul_shape
from rill.graph.ops.pool_ops import _POOL_WINDOW, _max_pool_grad_shape
from rill.graph.shapes import TensorShape

__all__: list[str] = []

# The chain after the product: "BiasAdd" first, then at most one activation.
_FUSION_ATTRS = [
    "fused_ops: list(string) = []",
    "epsilon: float = 0.0001",
    "leakyrelu_alpha: float = 0.2",
]

defop(
    "_FusedConv2D",
    inputs=["input: T", "filter: T", "args: TArgs", "host_args: num_host_args * float32"],
    outputs=["output: T"],
    attrs=[
        "T: {float16, float32, float64, int8}",
        "TArgs: list(type) >= 1",
        "num_args: int >= 0",
        "num_host_args: int >= 0 = 0",
        "strides: list(int)",
        "padding: {'SAME', 'VALID', 'EXPLICIT'}",
        "explicit_paddings: list(int) = []",
        "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'",
        "filter_format: {'HWIO', 'OIHW', 'OIHW_VECT_I'} = 'HWIO'",
        "dilations: list(int) = [1, 1, 1, 1]",
        "use_cudnn_on_gpu: bool = true",
        *_FUSION_ATTRS,
    ],
    shape=_conv2d_shape,
    doc="Conv2D followed by the ops in fused_ops (BiasAdd with args[0], then an activation).",
)

defop(
    "_FusedDepthwiseConv2dNative",
    inputs=["input: T", "filter: T", "args: num_args * T"],
    outputs=["output: T"],
    attrs=[
        "T: {float16, bfloat16, float32, float64}",
        "num_args: int >= 0",
        "strides: list(int)",
        "padding: {'SAME', 'VALID', 'EXPLICIT'}",
        "explicit_paddings: list(int) = []",
        "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
        "dilations: list(int) = [1, 1, 1, 1]",
        *_FUSION_ATTRS,
    ],
    shape=_depthwise_shape,
    doc="DepthwiseConv2dNative followed by the ops in fused_ops (BiasAdd with args[0], then an "
    "activation).",
)

defop(
    "_FusedMatMul",
    inputs=["a: T", "b: T", "args: num_args * T"],
    outputs=["product: T"],
    attrs=[
        "transpose_a: bool = false",
        "transpose_b: bool = false",
        "T: {bfloat16, float16, float32}",
        "num_args: int >= 0",
        *_FUSION_ATTRS,
    ],
    shape=_matmul_shape,
    doc="MatMul followed by the ops in fused_ops (BiasAdd with args[0], then an activation).",
)

defop(
    "_FusedMaxPoolGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs=[
        *_POOL_WINDOW,
        "padding: {'SAME', 'VALID', 'EXPLICIT'}",
        "explicit_paddings: list(int) = []",
        "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
        "T: {float16, bfloat16, float32, float64}",
    ],
    shape=_max_pool_grad_shape,
    doc="ReluGrad(MaxPoolGrad(orig_input, orig_output, grad), orig_input): the max-pool gradient "
    "of a pool whose input is a Relu's output, through that Relu.",
)

defop(
    "_FusedTanhGelu",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=["T: {float32, float64}", "coefficients: list(float)"],
    shape=shape_fns.unchanged,
    doc="The tanh approximation of GELU as imported models spell it out, with coefficients "
    "[a, b, c, d]: d · (x · (c + tanh(b · (x + a · (x · (x · x)))))), each operation rounded to "
    "T in that order (PyTorch's: a = 0.044715, b = sqrt(2/pi), c = 1, d = 0.5).",
)

defop(
    "_FusedLayerNorm",
    inputs=["x: T", "scale: T", "offset: T"],
    outputs=["y: T"],
    attrs=["T: {float32, float64}", "epsilon: float"],
    shape=shape_fns.unchanged,
    doc="Layer normalization over x's last axis as the ONNX importer spells it out: m = Mean(x), "
    "v = Mean((x - m)²), ((x - m) · Rsqrt(v + epsilon)) · scale + offset, each operation "
    "rounded to T as the unfused kernels round it; scale and offset are vectors as long as the "
    "last axis.",
)


def _squeeze_excite_shape(op):
    n = op._inputs[0].shape.with_rank(4).dims[0]
    r = op._inputs[1].shape.with_rank(4).dims[3]
    _, _, r2, o = op._inputs[3].shape.with_rank(4).dims
    if r is not None and r2 is not None and r != r2:
        raise ValueError(f"the second filter takes {r2} channels; the first gives {r}")
    return TensorShape([n, o, 1, 1])


defop(
    "_FusedSqueezeExcite",
    inputs=["x: T", "w1: T", "b1: T", "w2: T", "b2: T"],
    outputs=["gate: T"],
    attrs=["T: {float32, float64}", "activations: list(string)"],
    shape=_squeeze_excite_shape,
    doc="The squeeze of a squeeze-excite block on NCHW data as imported models spell it out: "
    "Mean(x, [2, 3], keep_dims=True), then two 1×1 NCHW convolutions (filters w1 [1, 1, c, r] "
    'and w2 [1, 1, r, o], HWIO), each + its bias and then activations[i] ("" for none, or '
    "one of _FusedConv2D's compiled activations: Relu, Relu6, HardSigmoid, HardSwish, Sigmoid, "
    "Swish): the gate [n, o, 1, 1], as the Mean and the two _FusedConv2D kernels compute it.",
)
