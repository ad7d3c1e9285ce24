"""ONNX import rules: activations, softmax, normalization and dropout.

Activations TensorFlow has with the same parameters map to one op; the parameterized ONNX forms
(Elu's alpha, Selu's alpha and gamma, HardSigmoid, Gelu, ...) are built from elementwise ops.
Normalizations compute over ONNX's channel axis 1 (NCHW) without transposes.
"""

from __future__ import annotations

import math

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op

# ONNX's Selu defaults, float32 renderings of TensorFlow's constants (which the Selu op uses).
_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _c(x, v):
    return const(v, x.dtype)


def _select(c, a, b):
    return op("SelectV2", [c, a, b])


@register_onnx_import("Relu")
def relu(n, x):
    return op("Relu", [x])


@register_onnx_import("LeakyRelu")
def leaky_relu(n, x, *, alpha=0.01):
    return op("LeakyRelu", [x], {"alpha": float(alpha)})


@register_onnx_import("Elu")
def elu(n, x, *, alpha=1.0):
    e = op("Elu", [x])
    if alpha == 1.0:
        return e
    return _select(op("Greater", [x, _c(x, 0)]), x, op("Mul", [_c(x, alpha), e]))


@register_onnx_import("Selu")
def selu(n, x, *, alpha=_SELU_ALPHA, gamma=_SELU_GAMMA):
    if np.float32(alpha) == np.float32(_SELU_ALPHA) and np.float32(gamma) == np.float32(
        _SELU_GAMMA
    ):
        return op("Selu", [x])
    neg = op("Mul", [_c(x, alpha), op("Elu", [x])])
    return op("Mul", [_c(x, gamma), _select(op("Greater", [x, _c(x, 0)]), x, neg)])


@register_onnx_import("Celu")
def celu(n, x, *, alpha=1.0):
    """max(0, x) + min(0, alpha · (exp(x / alpha) − 1))."""
    neg = op("Mul", [_c(x, alpha), op("Elu", [op("RealDiv", [x, _c(x, alpha)])])])
    return _select(op("Greater", [x, _c(x, 0)]), x, neg)


@register_onnx_import("ThresholdedRelu")
def thresholded_relu(n, x, *, alpha=1.0):
    return _select(op("Greater", [x, _c(x, alpha)]), x, op("ZerosLike", [x]))


@register_onnx_import("HardSigmoid")
def hard_sigmoid(n, x, *, alpha=0.2, beta=0.5):
    y = op("AddV2", [op("Mul", [_c(x, alpha), x]), _c(x, beta)])
    return op("Maximum", [op("Minimum", [y, _c(x, 1)]), _c(x, 0)])


@register_onnx_import("HardSwish")
def hard_swish(n, x):
    return op("Mul", [x, hard_sigmoid(n, x, alpha=1.0 / 6.0, beta=0.5)])


@register_onnx_import("Softplus")
def softplus(n, x):
    return op("Softplus", [x])


@register_onnx_import("Softsign")
def softsign(n, x):
    return op("Softsign", [x])


@register_onnx_import("Mish")
def mish(n, x):
    return op("Mul", [x, op("Tanh", [op("Softplus", [x])])])


@register_onnx_import("Swish")
def swish(n, x, *, alpha=1.0):
    s = x if alpha == 1.0 else op("Mul", [_c(x, alpha), x])
    return op("Mul", [x, op("Sigmoid", [s])])


@register_onnx_import("Shrink")
def shrink(n, x, *, bias=0.0, lambd=0.5):
    lo = op("Less", [x, _c(x, -lambd)])
    hi = op("Greater", [x, _c(x, lambd)])
    zero = op("ZerosLike", [x])
    return _select(lo, op("AddV2", [x, _c(x, bias)]),
                   _select(hi, op("Sub", [x, _c(x, bias)]), zero))  # fmt: skip


@register_onnx_import("Gelu")
def gelu(n, x, *, approximate="none"):
    half = op("Mul", [_c(x, 0.5), x])
    if approximate == "tanh":
        cube = op("Mul", [_c(x, 0.044715), op("Mul", [x, op("Square", [x])])])
        inner = op("Mul", [_c(x, math.sqrt(2.0 / math.pi)), op("AddV2", [x, cube])])
        return op("Mul", [half, op("AddV2", [_c(x, 1), op("Tanh", [inner])])])
    if approximate != "none":
        raise OnnxImportError(f"Gelu approximate={approximate!r} is not 'none' or 'tanh'")
    e = op("Erf", [op("Mul", [x, _c(x, 1.0 / math.sqrt(2.0))])])
    return op("Mul", [half, op("AddV2", [_c(x, 1), e])])


@register_onnx_import("PRelu")
def prelu(n, x, slope):
    return _select(op("Less", [x, _c(x, 0)]), op("Mul", [slope, x]), x)


def _axis(x, axis: int) -> int:
    r = x.shape.rank
    if r is None:
        if axis < 0:
            raise OnnxImportError("a negative axis needs an input of known rank")
        return axis
    if not -r <= axis < r:
        raise OnnxImportError(f"axis {axis} is out of range for rank {r}")
    return axis % r


def _last_axis_op(tf_op: str, x, axis: int):
    """A last-axis op (Softmax, LogSoftmax) applied along `axis` by moving it last and back."""
    a = _axis(x, axis)
    r = x.shape.rank
    if r is None or a == r - 1:
        return op(tf_op, [x])
    perm = [i for i in range(r) if i != a] + [a]
    inv = list(np.argsort(perm))
    y = op(tf_op, [op("Transpose", [x, const(perm, dtypes.int32)])])
    return op("Transpose", [y, const(inv, dtypes.int32)])


@register_onnx_import("Softmax")
def softmax(n, x, *, axis=-1):
    return _last_axis_op("Softmax", x, axis)


@register_onnx_import("LogSoftmax")
def log_softmax(n, x, *, axis=-1):
    return _last_axis_op("LogSoftmax", x, axis)


@register_onnx_import("Hardmax")
def hardmax(n, x, *, axis=-1):
    a = _axis(x, axis)
    idx = op("ArgMax", [x, const(a, dtypes.int32)], {"output_type": dtypes.int64})
    depth = op("StridedSlice", [op("Shape", [x]), const([a], dtypes.int32),
                                const([a + 1], dtypes.int32), const([1], dtypes.int32)],
               {"shrink_axis_mask": 1})  # fmt: skip
    return op("OneHot", [idx, depth, _c(x, 1), _c(x, 0)], {"axis": a})


def _channel_shape(x, c):
    """c (a [C] vector) reshaped to broadcast along axis 1 of x."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("normalization needs an input of known rank")
    return op("Reshape", [c, const([-1] + [1] * (r - 2), dtypes.int64)])


def _moments(x, axes):
    ax = const(axes, dtypes.int64)
    mean = op("Mean", [x, ax], {"keep_dims": True})
    var = op("Mean", [op("SquaredDifference", [x, mean]), ax], {"keep_dims": True})
    return mean, var


@register_onnx_import("BatchNormalization")
def batch_normalization(n, x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9,
                        training_mode=0):  # fmt: skip
    """Inference uses the running statistics; training_mode=1 the batch's and updates them."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("BatchNormalization needs an input of known rank")
    if training_mode:
        bmean, bvar = _moments(x, [0] + list(range(2, r)))
        y = _normalize(x, bmean, bvar, _channel_shape(x, scale), _channel_shape(x, b), epsilon)
        m = _c(mean, momentum)
        one_m = _c(mean, 1.0 - momentum)
        flat_mean = op("Reshape", [bmean, const([-1], dtypes.int64)])
        flat_var = op("Reshape", [bvar, const([-1], dtypes.int64)])
        run_mean = op("AddV2", [op("Mul", [mean, m]), op("Mul", [flat_mean, one_m])])
        run_var = op("AddV2", [op("Mul", [var, m]), op("Mul", [flat_var, one_m])])
        return [y, run_mean, run_var]
    if n.num_outputs > 1 and any(n.output_used(i) for i in (1, 2)):
        raise OnnxImportError("BatchNormalization in inference mode has only output Y")
    if (
        r == 4
        and x.dtype in (dtypes.float32, dtypes.float16, dtypes.bfloat16)
        and all(t.dtype == dtypes.float32 for t in (scale, b, mean, var))
    ):
        outs = op("FusedBatchNormV3", [x, scale, b, mean, var],
                  {"epsilon": float(epsilon), "data_format": "NCHW", "is_training": False})  # fmt: skip
        return outs[0]
    return _normalize(x, _channel_shape(x, mean), _channel_shape(x, var),
                      _channel_shape(x, scale), _channel_shape(x, b), epsilon)  # fmt: skip


def _normalize(x, mean, var, scale, bias, epsilon):
    inv = op("Rsqrt", [op("AddV2", [var, _c(var, epsilon)])])
    y = op("Mul", [op("Sub", [x, mean]), op("Mul", [inv, scale])])
    return op("AddV2", [y, bias])


@register_onnx_import("InstanceNormalization")
def instance_normalization(n, x, scale, b, *, epsilon=1e-5):
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("InstanceNormalization needs an input of known rank")
    mean, var = _moments(x, list(range(2, r)))
    return _normalize(x, mean, var, _channel_shape(x, scale), _channel_shape(x, b), epsilon)


@register_onnx_import("LayerNormalization")
def layer_normalization(n, x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Over axes [axis, rank); statistics in float32 (stash_type=1) for half-precision inputs."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("LayerNormalization needs an input of known rank")
    a = _axis(x, axis)
    xs = x
    if stash_type == 1 and x.dtype in (dtypes.float16, dtypes.bfloat16):
        xs = op("Cast", [x], {"DstT": dtypes.float32})
    mean, var = _moments(xs, list(range(a, r)))
    inv = op("Rsqrt", [op("AddV2", [var, _c(var, epsilon)])])
    y = op("Mul", [op("Sub", [xs, mean]), inv])
    if xs is not x:
        y = op("Cast", [y], {"DstT": x.dtype})
    y = op("Mul", [y, scale])
    if b is not None:
        y = op("AddV2", [y, b])
    return [y, mean, inv]


@register_onnx_import("MeanVarianceNormalization")
def mean_variance_normalization(n, x, *, axes=(0, 2, 3)):
    mean, var = _moments(x, list(axes))
    return op("RealDiv", [op("Sub", [x, mean]),
                          op("AddV2", [op("Sqrt", [var]), _c(x, 1e-9)])])  # fmt: skip


@register_onnx_import("LpNormalization")
def lp_normalization(n, x, *, axis=-1, p=2):
    ax = const([_axis(x, axis)], dtypes.int64)
    if p == 1:
        norm = op("Sum", [op("Abs", [x]), ax], {"keep_dims": True})
    elif p == 2:
        norm = op("Sqrt", [op("Sum", [op("Square", [x]), ax], {"keep_dims": True})])
    else:
        raise OnnxImportError(f"LpNormalization p={p} is not 1 or 2")
    zero = op("Equal", [norm, _c(x, 0)])
    return _select(zero, op("ZerosLike", [x]), op("RealDiv", [x, norm]))


# The largest input whose seeded dropout draw import makes a constant (elements).
_SEEDED_DRAW_LIMIT = 1 << 22


@register_onnx_import("Dropout")
def dropout(n, x, ratio=None, training_mode=None, *, seed=None):
    """Inference (no training_mode, or false) is the identity with an all-true mask.

    In training mode with a `seed` and a static input shape, the uniform draw is the one onnx's
    reference implementation makes for that seed (numpy's RandomState(seed), drawn afresh for
    every run), held as a constant; so the same seed gives the same mask on every run, as there.
    Without a seed (or with a dynamic shape) the draw is rill's RandomUniform, new each run.
    """
    training = n.static(training_mode) if training_mode is not None else np.array(False)
    y = op("Identity", [x])
    if training is not None and not bool(training):
        mask = op("Fill", [op("Shape", [x]), const(True, dtypes.bool_)])
        return [y, mask]
    r = ratio if ratio is not None else _c(x, 0.5)
    r = op("Cast", [r], {"DstT": dtypes.float32}) if r.dtype != dtypes.float32 else r
    shape = x.shape.as_list() if x.shape.is_fully_defined() else None
    if seed is not None and shape is not None and int(np.prod(shape)) <= _SEEDED_DRAW_LIMIT:
        draw = np.random.RandomState(int(seed)).uniform(0.0, 1.0, shape)
        u, r_cmp = const(draw, dtypes.float64), op("Cast", [r], {"DstT": dtypes.float64})
    else:
        attrs = {"dtype": dtypes.float32, "seed": int(seed or 0), "seed2": 0}
        u, r_cmp = op("RandomUniform", [op("Shape", [x])], attrs), r
    train = training_mode if training is None else const(True, dtypes.bool_)
    keep = op("LogicalOr", [op("LogicalNot", [train]), op("GreaterEqual", [u, r_cmp])])
    one = const(1.0, dtypes.float32)
    scale = _select(train, op("RealDiv", [one, op("Sub", [one, r])]), one)
    scaled = op("Mul", [x, op("Cast", [scale], {"DstT": x.dtype})])
    return [_select(keep, scaled, op("ZerosLike", [x])), keep]


_MAX_LRN_UNROLL = 1024


@register_onnx_import("LRN")
def lrn(n, x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    """x / (bias + alpha/size · Σ x² over `size` neighbouring channels)^beta, channels on axis 1."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("LRN needs an input of known rank")
    if size < 1:
        raise OnnxImportError(f"LRN size {size} must be at least 1")
    sq = op("Square", [x])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    # Channels further than C-1 from every output channel only ever add zero padding: clip the
    # window to them, so that the unrolled sum is bounded by the input and not by `size`.
    ch = x.shape[1] if r > 1 else None
    if ch is not None:
        lo, hi = min(lo, max(ch - 1, 0)), min(hi, max(ch - 1, 0))
    elif size > _MAX_LRN_UNROLL:
        raise OnnxImportError(
            f"LRN size {size} over {_MAX_LRN_UNROLL} needs an input whose channel count is known"
        )
    pads = np.zeros((r, 2), np.int64)
    pads[1] = (lo, hi)
    padded = op("Pad", [sq, const(pads, dtypes.int64)])
    c = op("Shape", [x], {"out_type": dtypes.int64})
    total = None
    for k in range(lo + hi + 1):
        begin = np.zeros(r, np.int64)
        begin[1] = k
        sl = op("Slice", [padded, const(begin, dtypes.int64), c])
        total = sl if total is None else op("AddV2", [total, sl])
    denom = op("AddV2", [_c(x, bias), op("Mul", [_c(x, alpha / size), total])])
    return op("RealDiv", [x, op("Pow", [denom, _c(x, beta)])])
