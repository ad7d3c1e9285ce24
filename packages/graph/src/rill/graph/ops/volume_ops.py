"""3-D convolution and pooling (video and volumetric models): Conv3D with
Conv3DBackpropInputV2 / Conv3DBackpropFilterV2, MaxPool3D with MaxPool3DGrad, AvgPool3D with
AvgPool3DGrad; NDHWC (or NCDHW), SAME or VALID padding, dilations for Conv3D.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 8, 9, 10, 3])
...     y = conv3d(x, rg.placeholder(rg.float32, [3, 3, 3, 3, 4]), [1, 2, 2, 2, 1], "SAME")
...     p = max_pool3d(y, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")
>>> y.shape, p.shape
(TensorShape([None, 4, 5, 5, 4]), TensorShape([None, 2, 2, 2, 4]))
"""

from __future__ import annotations

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = ["conv3d", "max_pool3d", "avg_pool3d", "window_out_size"]

_FMT = 'data_format: {"NDHWC", "NCDHW"} = "NDHWC"'
_PAD = 'padding: {"SAME", "VALID"}'
_FLOAT = "{float16, bfloat16, float32, float64}"


def window_out_size(size, k: int, stride: int, dilation: int, padding: str):
    """(output size, padding before) of one spatial dimension (None for an unknown size)."""
    if size is None:
        return None, None
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return max(-(-(size - eff + 1) // stride), 0), 0
    out = -(-size // stride)
    return out, max((out - 1) * stride + eff - size, 0) // 2


def _spatial(values, fmt):
    v = list(values)
    if len(v) != 5:
        raise ValueError(f"expected 5 values, got {v}")
    return v[1:4] if fmt == "NDHWC" else v[2:5]


def _split(s: TensorShape, fmt):
    s = s.with_rank(5)
    if fmt == "NDHWC":
        return s[0], list(s.dims[1:4]), s[4]
    return s[0], list(s.dims[2:5]), s[1]


def _join(n, spatial, c, fmt):
    return TensorShape([n, *spatial, c] if fmt == "NDHWC" else [n, c, *spatial])


def _conv_shape(op):
    a = op.attrs
    n, sp, c = _split(op._inputs[0].shape, a["data_format"])
    f = op._inputs[1].shape.with_rank(5)
    if c is not None and f[3] is not None and c != f[3]:
        raise ValueError(f"input depth {c} does not match the filter's in_channels {f[3]}")
    strides = _spatial(a["strides"], a["data_format"])
    dil = _spatial(a["dilations"], a["data_format"])
    out = [window_out_size(d, k, s, r, a["padding"])[0] if k is not None else None
           for d, k, s, r in zip(sp, f.dims[:3], strides, dil)]  # fmt: skip
    return [_join(n, out, f[4], a["data_format"])]


def _pool_shape(op):
    a = op.attrs
    n, sp, c = _split(op._inputs[0].shape, a["data_format"])
    k = _spatial(a["ksize"], a["data_format"])
    s = _spatial(a["strides"], a["data_format"])
    out = [window_out_size(d, kk, ss, 1, a["padding"])[0] for d, kk, ss in zip(sp, k, s)]
    return [_join(n, out, c, a["data_format"])]


def _sizes_shape(op):
    v = constant_value(op._inputs[0])
    return [unknown_shape() if v is None else TensorShape([int(d) for d in v])]


defop("Conv3D", inputs=["input: T", "filter: T"], outputs=["output: T"],
      attrs=[f"T: {_FLOAT}", "strides: list(int) >= 5", _PAD, _FMT,
             "dilations: list(int) = [1, 1, 1, 1, 1]"],
      shape=_conv_shape, doc="3-D convolution (cross-correlation) of input with filter "
      "[depth, height, width, in_channels, out_channels].")  # fmt: skip
defop("Conv3DBackpropInputV2", inputs=["input_sizes: Tshape", "filter: T", "out_backprop: T"],
      outputs=["output: T"],
      attrs=[f"T: {_FLOAT}", "strides: list(int) >= 5", _PAD, _FMT,
             "dilations: list(int) = [1, 1, 1, 1, 1]", "Tshape: {int32, int64} = int32"],
      shape=_sizes_shape, doc="Conv3D's gradient with respect to its input.")  # fmt: skip
defop("Conv3DBackpropFilterV2", inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
      outputs=["output: T"],
      attrs=[f"T: {_FLOAT}", "strides: list(int) >= 5", _PAD, _FMT,
             "dilations: list(int) = [1, 1, 1, 1, 1]"],
      shape=lambda op: [unknown_shape() if constant_value(op._inputs[1]) is None else
                        TensorShape([int(d) for d in constant_value(op._inputs[1])])],
      doc="Conv3D's gradient with respect to its filter.")  # fmt: skip
defop("MaxPool3D", inputs=["input: T"], outputs=["output: T"],
      attrs=["ksize: list(int) >= 5", "strides: list(int) >= 5", _PAD, _FMT,
             "T: {float16, bfloat16, float32}"],
      shape=_pool_shape, doc="The maximum of each 3-D window.")  # fmt: skip
defop("AvgPool3D", inputs=["input: T"], outputs=["output: T"],
      attrs=["ksize: list(int) >= 5", "strides: list(int) >= 5", _PAD, _FMT, f"T: {_FLOAT}"],
      shape=_pool_shape,
      doc="The mean of each 3-D window (SAME padding averages the positions inside the input).")  # fmt: skip
defop("MaxPool3DGrad", inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
      outputs=["output: T"],
      attrs=["ksize: list(int) >= 5", "strides: list(int) >= 5", _PAD, _FMT,
             "T: {float16, bfloat16, float32} = float32",
             "TInput: {float16, bfloat16, float32} = float32"],
      shape=lambda op: [op._inputs[0].shape], doc="MaxPool3D's gradient.")  # fmt: skip
defop("AvgPool3DGrad", inputs=["orig_input_shape: int32", "grad: T"], outputs=["output: T"],
      attrs=["ksize: list(int) >= 5", "strides: list(int) >= 5", _PAD, _FMT, f"T: {_FLOAT}"],
      shape=_sizes_shape, doc="AvgPool3D's gradient.")  # fmt: skip


def _op(op_type, inputs, attrs, name) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def conv3d(input, filter, strides, padding, data_format="NDHWC",  # noqa: A002
           dilations=(1, 1, 1, 1, 1), name=None) -> Tensor:  # fmt: skip
    attrs = {"strides": tuple(strides), "padding": padding, "data_format": data_format,
             "dilations": tuple(dilations)}  # fmt: skip
    return _op("Conv3D", [input, filter], attrs, name)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"ksize": tuple(ksize), "strides": tuple(strides), "padding": padding,
             "data_format": data_format}  # fmt: skip
    return _op("MaxPool3D", [input], attrs, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"ksize": tuple(ksize), "strides": tuple(strides), "padding": padding,
             "data_format": data_format}  # fmt: skip
    return _op("AvgPool3D", [input], attrs, name)
