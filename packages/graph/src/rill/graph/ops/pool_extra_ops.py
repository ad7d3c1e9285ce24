"""More max pooling: MaxPoolV2 (window and strides as tensors) and MaxPoolGradV2,
MaxPoolWithArgmax and MaxPoolGradWithArgmax, MaxPoolGradGrad(V2) (the gradient of
MaxPoolGrad). Windows and padding follow pool_ops' MaxPool.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [2, 6, 6, 3])
...     y, arg = max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
>>> y.shape, arg.dtype
(TensorShape([2, 3, 3, 3]), rill.int64)
"""

from __future__ import annotations

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.conv_ops import _dims4, _shape4, spatial_pair, windowed_output_size
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = ["max_pool_v2", "max_pool_with_argmax"]

_T = "{float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, uint32, uint64}"
_FMT = 'data_format: {"NHWC", "NCHW"} = "NHWC"'
_PAD = 'padding: {"SAME", "VALID"}'


def pooled_shape(x: TensorShape, ksize, strides, padding: str, fmt: str) -> TensorShape:
    n, h, w, c = _dims4(x, fmt)
    kh, kw = spatial_pair(ksize, "ksize", fmt)
    sh, sw = spatial_pair(strides, "strides", fmt)
    oh = windowed_output_size(h, kh, sh, 1, padding, (0, 0))[0]
    ow = windowed_output_size(w, kw, sw, 1, padding, (0, 0))[0]
    return _shape4(n, oh, ow, c, fmt)


def _v2_shape(op):
    ksize, strides = constant_value(op._inputs[-2]), constant_value(op._inputs[-1])
    if ksize is None or strides is None:
        return [TensorShape([None] * 4)]
    return [pooled_shape(op._inputs[0].shape, list(ksize), list(strides), op.attrs["padding"],
                         op.attrs["data_format"])]  # fmt: skip


def _same_as_input(op):
    return [op._inputs[0].shape.with_rank(4)]


def _argmax_shape(op):
    a = op.attrs
    s = pooled_shape(op._inputs[0].shape, a["ksize"], a["strides"], a["padding"], "NHWC")
    return [s, s]


def _grad_grad_shape(op):
    a = op.attrs
    if "ksize" in a:
        return [pooled_shape(op._inputs[0].shape, a["ksize"], a["strides"], a["padding"],
                             a["data_format"])]  # fmt: skip
    return _v2_shape(op)


defop(
    "MaxPoolV2",
    inputs=["input: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs=["T: {float16, bfloat16, float32, float64, int32, int64, uint8, int16, int8, "
           "uint16} = float32", _PAD, 'data_format: {"NHWC", "NCHW", "NCHW_VECT_C"} = "NHWC"'],
    shape=_v2_shape,
    doc="MaxPool with ksize and strides given as tensors.",
)  # fmt: skip
defop(
    "MaxPoolGradV2",
    inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs=[_PAD, _FMT, f"T: {_T} = float32"],
    shape=_same_as_input,
    doc="MaxPoolGrad with ksize and strides given as tensors.",
)
defop(
    "MaxPoolGradGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", _PAD, _FMT, f"T: {_T}"],
    shape=_grad_grad_shape,
    doc="The gradient of MaxPoolGrad: each window takes grad at the window's maximum.",
)
defop(
    "MaxPoolGradGradV2",
    inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs=[_PAD, _FMT, f"T: {_T}"],
    shape=_grad_grad_shape,
    doc="MaxPoolGradGrad with ksize and strides given as tensors.",
)
defop(
    "MaxPoolWithArgmax",
    inputs=["input: T"],
    outputs=["output: T", "argmax: Targmax"],
    attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", "Targmax: {int32, int64} = int64",
           _PAD, "include_batch_in_index: bool = false", f"T: {_T}"],
    shape=_argmax_shape,
    doc="MaxPool (NHWC) and the flat index of each maximum: (y·width + x)·channels + c, plus "
    "b·height·width·channels with include_batch_in_index.",
)  # fmt: skip
defop(
    "MaxPoolGradWithArgmax",
    inputs=["input: T", "grad: T", "argmax: Targmax"],
    outputs=["output: T"],
    attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", _PAD,
           "include_batch_in_index: bool = false", "Targmax: {int32, int64}", f"T: {_T}"],
    shape=_same_as_input,
    doc="MaxPoolWithArgmax's gradient: grad added at the recorded argmax positions.",
)  # fmt: skip


def max_pool_v2(input, ksize, strides, padding, data_format="NHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"padding": padding, "data_format": data_format}
    return get_default_graph().create_op("MaxPoolV2", [input, ksize, strides], attrs,
                                         name=name or "MaxPoolV2").outputs[0]  # fmt: skip


def max_pool_with_argmax(input, ksize, strides, padding, include_batch_in_index=False,  # noqa: A002
                         output_dtype="int64", name=None):  # fmt: skip
    from rill.graph import dtypes

    attrs = {"ksize": tuple(ksize), "strides": tuple(strides), "padding": padding,
             "include_batch_in_index": include_batch_in_index,
             "Targmax": dtypes.as_dtype(output_dtype)}  # fmt: skip
    op = get_default_graph().create_op("MaxPoolWithArgmax", [input], attrs,
                                       name=name or "MaxPoolWithArgmax")  # fmt: skip
    return op.outputs[0], op.outputs[1]
