"""FusedBatchNorm and FusedBatchNormV2 and their gradients: the older forms of FusedBatchNormV3
(nn_ops), with five outputs (no reserve_space_3), as TensorFlow-1 graphs carry them.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 4, 4, 3])
...     c = rg.placeholder(rg.float32, [3])
...     op = rg.get_default_graph().create_op("FusedBatchNorm", [x, c, c, c, c])
>>> len(op.outputs), op.outputs[0].shape
(5, TensorShape([None, 4, 4, 3]))
"""

from __future__ import annotations

from rill.graph.op_def import defop
from rill.graph.ops.nn_ops import _fused_batch_norm_grad_shape, _fused_batch_norm_shape

_FMT = 'data_format: {"NHWC", "NCHW"} = "NHWC"'
_EPS = "epsilon: float = 0.0001"


def _five(shape_fn):
    return lambda op: shape_fn(op)[:5]


_OUT = ["y: T", "batch_mean: {u}", "batch_variance: {u}", "reserve_space_1: {u}",
        "reserve_space_2: {u}"]  # fmt: skip
_GRAD_OUT = ["x_backprop: T", "scale_backprop: {u}", "offset_backprop: {u}",
             "reserve_space_3: {u}", "reserve_space_4: {u}"]  # fmt: skip

defop(
    "FusedBatchNorm",
    inputs=["x: T", "scale: T", "offset: T", "mean: T", "variance: T"],
    outputs=[o.format(u="T") for o in _OUT],
    attrs=[
        "T: {float32}",
        _EPS,
        "exponential_avg_factor: float = 1.0",
        _FMT,
        "is_training: bool = true",
    ],  # fmt: skip
    shape=_five(_fused_batch_norm_shape),
    doc="FusedBatchNormV3 for float32 only, without reserve_space_3.",
)
defop(
    "FusedBatchNormV2",
    inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
    outputs=[o.format(u="U") for o in _OUT],
    attrs=[
        "T: {float16, bfloat16, float32}",
        "U: {float32}",
        _EPS,
        "exponential_avg_factor: float = 1.0",
        _FMT,
        "is_training: bool = true",
    ],  # fmt: skip
    shape=_five(_fused_batch_norm_shape),
    doc="FusedBatchNormV3 without reserve_space_3.",
)
defop(
    "FusedBatchNormGrad",
    inputs=["y_backprop: T", "x: T", "scale: T", "reserve_space_1: T", "reserve_space_2: T"],
    outputs=[o.format(u="T") for o in _GRAD_OUT],
    attrs=["T: {float32}", _EPS, _FMT, "is_training: bool = true"],
    shape=_fused_batch_norm_grad_shape,
    doc="The gradients of FusedBatchNorm.",
)
defop(
    "FusedBatchNormGradV2",
    inputs=[
        "y_backprop: T",
        "x: T",
        "scale: float32",
        "reserve_space_1: U",
        "reserve_space_2: U",
    ],  # fmt: skip
    outputs=[o.format(u="U") for o in _GRAD_OUT],
    attrs=[
        "T: {float16, bfloat16, float32}",
        "U: {float32}",
        _EPS,
        _FMT,
        "is_training: bool = true",
    ],  # fmt: skip
    shape=_fused_batch_norm_grad_shape,
    doc="The gradients of FusedBatchNormV2.",
)
