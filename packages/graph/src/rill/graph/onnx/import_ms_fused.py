"""ONNX import rules: the fused contrib ops onnxruntime's optimizers write.

A model saved by onnxruntime with `SessionOptions.optimized_model_filepath` (basic or extended
graph optimizations), or by `onnxruntime.transformers.optimizer` (which Hugging Face Optimum runs
for its "optimized" exports), holds onnxruntime's fusions as com.microsoft ops: FusedConv,
FusedGemm and FusedMatMul (a product with its activation or scale), Gelu, FastGelu, BiasGelu and
QuickGelu, SkipLayerNormalization and SkipSimplifiedLayerNormalization (the residual add and the
normalization after it), and the ONNX-domain SimplifiedLayerNormalization (RMS normalization, as
in LLaMA and T5). Each is imported as the ops it fused, with the formulas of onnxruntime's
contrib op documentation.

Not imported (refused, naming the op): the attention fusions (Attention, MultiHeadAttention,
GroupQueryAttention, EmbedLayerNormalization), the com.microsoft.nchwc layout ops that the "all"
optimization level writes (onnxruntime documents such files as tied to the machine that wrote
them), and FusedMatMul's batch transposes.

The onnx package declares none of these ops, and the import registry checks a rule against
onnx's schemas, so this module first registers a schema for each (inputs and their optionality,
attributes with onnxruntime's defaults), except com.microsoft::Gelu, whose name ai.onnx has.
"""

from __future__ import annotations

import math

import onnx.defs
from onnx import helper

from rill.graph import dtypes
from rill.graph.onnx import import_conv as _conv
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op

_MS = "com.microsoft"
_S = onnx.defs.OpSchema
_ONE, _OPT = _S.FormalParameterOption.Single, _S.FormalParameterOption.Optional
_FLOATS = ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)"]
_AT = _S.AttrType


def _schema(name: str, inputs, outputs, attrs=(), domain: str = _MS) -> None:
    """Registers domain::name with onnx: inputs and outputs as (name, optional), every one of
    type T (a float type); attrs as (name, default) or (name, AttrType) for one without."""
    if onnx.defs.has(name, domain):
        return
    ins = [_S.FormalParameter(i, "T", param_option=_OPT if opt else _ONE) for i, opt in inputs]
    outs = [_S.FormalParameter(o, "T", param_option=_OPT if opt else _ONE) for o, opt in outputs]
    attributes = [
        _S.Attribute(a, d, required=False)
        if isinstance(d, _AT)
        else _S.Attribute(a, helper.make_attribute(a, d))
        for a, d in attrs
    ]
    onnx.defs.register_schema(
        _S(
            name,
            domain,
            1,
            f"onnxruntime's contrib op {name}",
            inputs=ins,
            outputs=outs,
            type_constraints=[("T", _FLOATS, "")],
            attributes=attributes,
        )  # fmt: skip
    )


_ACT = [("activation", _AT.STRING), ("activation_alpha", 0.01), ("activation_beta", 0.0),
        ("activation_gamma", 0.0)]  # fmt: skip
# No schema for com.microsoft::Gelu: onnx.reference requires op names unique across domains,
# and ai.onnx has a Gelu (its rule is registered schemaless).
_schema("FastGelu", [("X", 0), ("bias", 1)], [("Y", 0)])
_schema("BiasGelu", [("A", 0), ("B", 0)], [("C", 0)])
_schema("QuickGelu", [("X", 0)], [("Y", 0)], [("alpha", 1.702)])
_SKIP_OUT = [("output", 0), ("mean", 1), ("inv_std_var", 1), ("input_skip_bias_sum", 1)]
_schema("SkipLayerNormalization",
        [("input", 0), ("skip", 0), ("gamma", 0), ("beta", 1), ("bias", 1)], _SKIP_OUT,
        [("epsilon", 1e-12)])  # fmt: skip
_schema("SkipSimplifiedLayerNormalization",
        [("input", 0), ("skip", 0), ("gamma", 0), ("bias", 1)], _SKIP_OUT,
        [("epsilon", 1e-12)])  # fmt: skip
_schema("SimplifiedLayerNormalization", [("X", 0), ("scale", 0)],
        [("Y", 0), ("inv_std_var", 1)], [("axis", -1), ("epsilon", 1e-5), ("stash_type", 1)],
        domain="")  # fmt: skip
_schema("FusedMatMul", [("A", 0), ("B", 0)], [("Y", 0)],
        [("alpha", 1.0), ("transA", 0), ("transB", 0), ("transBatchA", 0),
         ("transBatchB", 0)])  # fmt: skip
_schema("FusedGemm", [("A", 0), ("B", 0), ("C", 1)], [("Y", 0)],
        [("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0), *_ACT])  # fmt: skip
_schema("FusedConv", [("X", 0), ("W", 0), ("B", 1), ("Z", 1)], [("Y", 0)],
        [("auto_pad", "NOTSET"), ("dilations", _AT.INTS), ("group", 1),
         ("kernel_shape", _AT.INTS), ("pads", _AT.INTS), ("strides", _AT.INTS),
         ("activation", _AT.STRING), ("activation_params", _AT.FLOATS)])  # fmt: skip


def _c(x, v):
    return const(v, x.dtype)


def _gelu_erf(x):
    """0.5 · x · (1 + erf(x / √2))."""
    e = op("Erf", [op("Mul", [x, _c(x, 1.0 / math.sqrt(2.0))])])
    return op("Mul", [op("Mul", [_c(x, 0.5), x]), op("AddV2", [_c(x, 1.0), e])])


@register_onnx_import("Gelu", _MS, schemaless=True)
def gelu(n, x):
    return _gelu_erf(x)


@register_onnx_import("BiasGelu", _MS)
def bias_gelu(n, a, b):
    """Gelu(A + B), B a bias along the last axis."""
    return _gelu_erf(op("AddV2", [a, b]))


@register_onnx_import("FastGelu", _MS)
def fast_gelu(n, x, bias=None):
    """The tanh approximation of Gelu, of X + bias when a bias is given:
    0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))."""
    if bias is not None:
        x = op("AddV2", [x, bias])
    cube = op("Mul", [_c(x, 0.044715), op("Mul", [x, op("Square", [x])])])
    inner = op("Mul", [_c(x, math.sqrt(2.0 / math.pi)), op("AddV2", [x, cube])])
    return op("Mul", [op("Mul", [_c(x, 0.5), x]), op("AddV2", [_c(x, 1.0), op("Tanh", [inner])])])


@register_onnx_import("QuickGelu", _MS)
def quick_gelu(n, x, *, alpha=1.702):
    """x · sigmoid(alpha · x)."""
    return op("Mul", [x, op("Sigmoid", [op("Mul", [x, _c(x, float(alpha))])])])


def _stats_dtype(x):
    return dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype


def _cast(x, dt):
    return x if x.dtype == dt else op("Cast", [x], {"DstT": dt})


def _last_axis(x, what: str) -> int:
    r = x.shape.rank
    if r is None:
        raise OnnxImportError(f"{what} needs an input of known rank")
    return r - 1


def _skip_sum(x, skip, bias):
    s = op("AddV2", [x, skip])
    return s if bias is None else op("AddV2", [s, bias])


def _layer_norm(x, axes, epsilon, rms: bool):
    """(normalized x in x's type, mean or None, 1/std) over `axes`, statistics in float32 for
    half-precision inputs."""
    xs = _cast(x, _stats_dtype(x))
    ax = const(axes, dtypes.int64)
    if rms:
        ms = op("Mean", [op("Square", [xs]), ax], {"keep_dims": True})
        inv = op("Rsqrt", [op("AddV2", [ms, _c(ms, float(epsilon))])])
        return _cast(op("Mul", [xs, inv]), x.dtype), None, inv
    mean = op("Mean", [xs, ax], {"keep_dims": True})
    centered = op("Sub", [xs, mean])
    var = op("Mean", [op("Square", [centered]), ax], {"keep_dims": True})
    inv = op("Rsqrt", [op("AddV2", [var, _c(var, float(epsilon))])])
    return _cast(op("Mul", [centered, inv]), x.dtype), mean, inv


@register_onnx_import("SkipLayerNormalization", _MS)
def skip_layer_normalization(n, x, skip, gamma, beta=None, bias=None, *, epsilon=1e-12):
    """LayerNorm(input + skip + bias) · gamma + beta over the last axis; outputs the result,
    the mean, 1/std and the sum that was normalized."""
    s = _skip_sum(x, skip, bias)
    y, mean, inv = _layer_norm(s, [_last_axis(x, "SkipLayerNormalization")], epsilon, False)
    y = op("Mul", [y, gamma])
    if beta is not None:
        y = op("AddV2", [y, beta])
    return [y, mean, inv, s]


@register_onnx_import("SkipSimplifiedLayerNormalization", _MS)
def skip_simplified_layer_normalization(n, x, skip, gamma, bias=None, *, epsilon=1e-12):
    """RMSNorm(input + skip + bias) · gamma over the last axis (T5, LLaMA); outputs the
    result, (no mean), 1/rms and the sum that was normalized."""
    s = _skip_sum(x, skip, bias)
    y, _, inv = _layer_norm(s, [_last_axis(x, "SkipSimplifiedLayerNormalization")], epsilon,
                            True)  # fmt: skip
    return [op("Mul", [y, gamma]), None, inv, s]


@register_onnx_import("SimplifiedLayerNormalization")
def simplified_layer_normalization(n, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    """x / √(mean(x²) + epsilon) over axes [axis, rank), times scale; and 1/rms."""
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("SimplifiedLayerNormalization needs an input of known rank")
    a = axis + r if axis < 0 else axis
    if not 0 <= a < r:
        raise OnnxImportError(f"SimplifiedLayerNormalization axis {axis} is out of range for "
                              f"rank {r}")  # fmt: skip
    y, _, inv = _layer_norm(x, list(range(a, r)), epsilon, True)
    return [op("Mul", [y, scale]), inv]


@register_onnx_import("FusedMatMul", _MS)
def fused_matmul(n, a, b, *, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    """alpha · op(A) @ op(B), op transposing the last two axes where asked."""
    if transBatchA or transBatchB:
        raise OnnxImportError("FusedMatMul with transBatchA or transBatchB is not supported")
    ra, rb = a.shape.rank, b.shape.rank
    if ra is None or rb is None or ra < 2 or rb < 2:
        from rill.graph.onnx.import_linalg import matmul

        if transA or transB:
            raise OnnxImportError("FusedMatMul with a transpose needs operands of known rank >= 2")
        y = matmul(n, a, b)
    elif ra == rb == 2:
        y = op("MatMul", [a, b], {"transpose_a": bool(transA), "transpose_b": bool(transB)})
    else:
        y = op("BatchMatMulV2", [a, b], {"adj_x": bool(transA), "adj_y": bool(transB)})
    return y if alpha == 1.0 else op("Mul", [y, _c(y, float(alpha))])


def _activate(y, name, params, what: str):
    """onnxruntime's fused activation `name` with its parameters."""
    if not name:
        return y
    p = list(params)
    if name == "Relu":
        return op("Relu", [y])
    if name == "Sigmoid":
        return op("Sigmoid", [y])
    if name == "Tanh":
        return op("Tanh", [y])
    if name == "LeakyRelu":
        return op("LeakyRelu", [y], {"alpha": float(p[0] if p else 0.01)})
    if name == "Clip":
        lo = p[0] if len(p) > 0 else -math.inf
        hi = p[1] if len(p) > 1 else math.inf
        return op("Minimum", [op("Maximum", [y, _c(y, float(lo))]), _c(y, float(hi))])
    if name == "HardSigmoid":
        alpha = p[0] if len(p) > 0 else 0.2
        beta = p[1] if len(p) > 1 else 0.5
        h = op("AddV2", [op("Mul", [y, _c(y, float(alpha))]), _c(y, float(beta))])
        return op("Maximum", [op("Minimum", [h, _c(y, 1.0)]), _c(y, 0.0)])
    raise OnnxImportError(f"{what}: fused activation {name!r} is not supported")


@register_onnx_import("FusedGemm", _MS)
def fused_gemm(n, a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0, activation="",
               activation_alpha=0.01, activation_beta=0.0, activation_gamma=0.0):  # fmt: skip
    """activation(alpha · op(A) · op(B) + beta · C)."""
    from rill.graph.onnx.import_linalg import gemm

    y = gemm(n, a, b, c, alpha=alpha, beta=beta, transA=transA, transB=transB)
    params = {"LeakyRelu": [activation_alpha], "HardSigmoid": [activation_alpha, activation_beta],
              "Clip": [activation_alpha, activation_beta]}.get(activation, [])  # fmt: skip
    return _activate(y, activation, params, "FusedGemm")


@register_onnx_import("FusedConv", _MS)
def fused_conv(n, x, w, b=None, z=None, *, auto_pad="NOTSET", dilations=None, group=1,
               kernel_shape=None, pads=None, strides=None, activation="",
               activation_params=()):  # fmt: skip
    """activation(Conv(X, W, B) + Z)."""
    y = _conv.conv(n, x, w, b, auto_pad=auto_pad, dilations=dilations, group=group,
                   kernel_shape=kernel_shape, pads=pads, strides=strides)  # fmt: skip
    if z is not None:
        y = op("AddV2", [y, z])
    return _activate(y, activation, activation_params or (), "FusedConv")
