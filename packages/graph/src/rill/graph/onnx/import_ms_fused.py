"""ONNX import rules: the fused contrib ops onnxruntime's optimizers write.

A model saved by onnxruntime with `SessionOptions.optimized_model_filepath` (basic or extended
graph optimizations), or by `onnxruntime.transformers.optimizer` (which Hugging Face Optimum runs
for its "optimized" exports), holds onnxruntime's fusions as com.microsoft ops: FusedConv,
FusedGemm and FusedMatMul (a product with its activation or scale), Gelu, FastGelu, BiasGelu and
QuickGelu, SkipLayerNormalization and SkipSimplifiedLayerNormalization (the residual add and the
normalization after it), the ONNX-domain SimplifiedLayerNormalization (RMS normalization, as in
LLaMA and T5), BERT's EmbedLayerNormalization and Attention (packed Q/K/V product, padding
mask as lengths or a 0/1 mask, causal masking, past and present keys and values, an additive
attention bias), and MultiHeadAttention with separate query, key and value (cross attention,
Q/K/V biases, key padding mask, attention bias, past and present keys and values). Each is imported as the ops it fused, with the formulas of onnxruntime's
contrib op documentation (masked scores get mask_filter_value, -10000, as there).

Not imported (refused, naming the op): GroupQueryAttention, MultiHeadAttention's packed QKV
and shared-buffer cache forms, Attention's rotary and shared-buffer modes and its [2·batch]
start/end mask, the com.microsoft.nchwc layout ops that the "all" optimization level writes (onnxruntime
documents such files as tied to the machine that wrote them), and FusedMatMul's batch
transposes.

The onnx package declares none of these ops, and the import registry checks a rule against
onnx's schemas, so this module first registers a schema for each (inputs and their optionality,
attributes with onnxruntime's defaults), except com.microsoft::Gelu and ::Attention, whose
names ai.onnx has: onnx.reference refuses to load when two domains declare one name, so those
two rules are registered without a schema.
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


def _schema(name: str, inputs, outputs, attrs=(), domain: str = _MS, types=None) -> None:
    """Registers domain::name with onnx: inputs and outputs as (name, optional), of type T (a
    float type) unless `types` maps them to T1 (an integer type); attrs as (name, default) or
    (name, AttrType) for one without."""
    if onnx.defs.has(name, domain):
        return
    types = types or {}
    ins = [_S.FormalParameter(i, types.get(i, "T"), param_option=_OPT if opt else _ONE)
           for i, opt in inputs]  # fmt: skip
    outs = [_S.FormalParameter(o, types.get(o, "T"), param_option=_OPT if opt else _ONE)
            for o, opt in outputs]  # fmt: skip
    constraints = [("T", _FLOATS, "")]
    if "T1" in types.values():
        constraints.append(("T1", ["tensor(int32)", "tensor(int64)"], ""))
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
            type_constraints=constraints,
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
        if (lo, hi) == (0.0, 6.0):  # MobileNet's ReLU6: one op, fused into the convolution
            return op("Relu6", [y])
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


# -- BERT's fusions: EmbedLayerNormalization and Attention ----------------------------------------

_schema("EmbedLayerNormalization",
        [("input_ids", 0), ("segment_ids", 1), ("word_embedding", 0), ("position_embedding", 0),
         ("segment_embedding", 1), ("gamma", 0), ("beta", 1), ("mask", 1), ("position_ids", 1)],
        [("output", 0), ("mask_index", 1), ("embedding_sum", 1)],
        [("epsilon", 1e-12), ("mask_index_type", 1)], types={"input_ids": "T1",
         "segment_ids": "T1", "mask": "T1", "position_ids": "T1", "mask_index": "T1"})  # fmt: skip
# No schema for com.microsoft::Attention: ai.onnx has an Attention (opset 23), and onnx.reference
# requires op names unique across domains (the rule is registered schemaless).

_I64 = dtypes.int64


def _shape_part(t, lo: int, hi: int):
    """Shape(t)[lo:hi] as int64."""
    shp = op("Shape", [t], {"out_type": _I64})
    return op("StridedSlice", [shp, const([lo], _I64), const([hi], _I64), const([1], _I64)])


def _ids(t):
    return _cast(t, _I64)


@register_onnx_import("EmbedLayerNormalization", _MS)
def embed_layer_normalization(n, input_ids, segment_ids, word_embedding, position_embedding,
                              segment_embedding=None, gamma=None, beta=None, mask=None,
                              position_ids=None, *, epsilon=1e-12, mask_index_type=1):  # fmt: skip
    """LayerNorm(word[ids] + position[positions] + segment[segment ids]) · gamma + beta; the
    mask's row sums (each sequence's length) as mask_index; the sum before normalizing."""
    if gamma is None:
        raise OnnxImportError("EmbedLayerNormalization needs gamma")
    emb = op("GatherV2", [word_embedding, _ids(input_ids), const(0, dtypes.int32)])
    if position_ids is None:
        seq = op("StridedSlice", [op("Shape", [input_ids], {"out_type": _I64}), const([1], _I64),
                                  const([2], _I64), const([1], _I64)], {"shrink_axis_mask": 1})  # fmt: skip
        position_ids = op("ExpandDims", [op("Range", [const(0, _I64), seq, const(1, _I64)]),
                                         const(0, dtypes.int32)])  # fmt: skip
    pos = op("GatherV2", [position_embedding, _ids(position_ids), const(0, dtypes.int32)])
    emb = op("AddV2", [emb, pos])
    if segment_ids is not None and segment_embedding is not None:
        seg = op("GatherV2", [segment_embedding, _ids(segment_ids), const(0, dtypes.int32)])
        emb = op("AddV2", [emb, seg])
    y, _, _ = _layer_norm(emb, [2], epsilon, False)
    y = op("Mul", [y, gamma])
    if beta is not None:
        y = op("AddV2", [y, beta])
    if mask is not None:
        lengths = op("Sum", [_cast(op("NotEqual", [mask, const(0, mask.dtype)]), dtypes.int32),
                             const([1], dtypes.int32)])  # fmt: skip
    else:
        ones = op("OnesLike", [_cast(input_ids, dtypes.int32)])
        lengths = op("Sum", [ones, const([1], dtypes.int32)])
    return [y, _cast(lengths, input_ids.dtype), emb]


def _heads(t, num_heads: int, head_size: int):
    """[batch, seq, heads · size] → [batch, heads, seq, size]."""
    shape = op("ConcatV2", [[_shape_part(t, 0, 2), const([num_heads, head_size], _I64)],
                            const(0, dtypes.int32)])  # fmt: skip
    return op("Transpose", [op("Reshape", [t, shape]), const([0, 2, 1, 3], dtypes.int32)])


def _additive_mask(mask, x, total, past_len, filter_value: float, dt):
    """mask_index as an additive [batch, 1, 1 or seq, total] mask (0 where attended,
    filter_value where not)."""
    r = mask.shape.rank
    fv = const(filter_value, dt)
    if r == 1:
        b = x.shape[0] if x.shape.rank else None
        m0 = mask.shape[0]
        if b is not None and m0 is not None and m0 == 2 * b:
            raise OnnxImportError("Attention's mask_index of end and start positions ([2·batch]) "
                                  "is not supported")  # fmt: skip
        j = op("Range", [const(0, _I64), total, const(1, _I64)])
        ends = op("Reshape", [_ids(mask), const([-1, 1], _I64)])
        keep = op("Less", [op("ExpandDims", [j, const(0, dtypes.int32)]), ends])  # [batch, T]
        add = op("SelectV2", [keep, const(0.0, dt), fv])
        add = op("ExpandDims", [add, const(1, dtypes.int32)])
        return op("ExpandDims", [add, const(1, dtypes.int32)])  # [batch, 1, 1, T]
    if r in (2, 3):
        keep = _cast(mask, dt)
        add = op("Mul", [op("Sub", [const(1.0, dt), keep]), fv])
        add = op("ExpandDims", [add, const(1, dtypes.int32)])  # [batch, 1, (seq,) T]
        if r == 2:
            add = op("ExpandDims", [add, const(1, dtypes.int32)])
        return add
    raise OnnxImportError(f"Attention's mask_index of rank {r} is not supported (1-3 are)")


@register_onnx_import("Attention", _MS, schemaless=True)
def attention(n, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
              past_sequence_length=None, *, num_heads, qkv_hidden_sizes=None, unidirectional=0,
              mask_filter_value=-10000.0, scale=None, do_rotary=0, rotary_embedding_dim=0,
              past_present_share_buffer=0):  # fmt: skip
    """onnxruntime's multi-head self-attention: Q, K, V = input · weights + bias (one packed
    product), softmax(scale · Q Kᵀ + mask + attention_bias) V per head, heads concatenated;
    `present` stacks K and V (after the past's) as [2, batch, heads, total, head_size]."""
    if do_rotary or past_present_share_buffer:
        raise OnnxImportError("Attention with do_rotary or past_present_share_buffer is not "
                              "supported")  # fmt: skip
    if x.shape.rank != 3:
        raise OnnxImportError(f"Attention takes a 3-D input [batch, seq, hidden], got {x.shape}")
    w = weights.shape.as_list() if weights.shape.rank == 2 else None
    if w is None or w[1] is None:
        raise OnnxImportError("Attention needs weights of known shape [input_hidden, 3·hidden]")
    sizes = list(qkv_hidden_sizes) if qkv_hidden_sizes else [w[1] // 3] * 3
    if len(sizes) != 3 or sum(sizes) != w[1] or sizes[0] != sizes[1]:
        raise OnnxImportError(f"Attention's qkv_hidden_sizes {sizes} do not split the weights' "
                              f"{w[1]} columns into Q, K (equal) and V")  # fmt: skip
    h = int(num_heads)
    if any(s % h for s in sizes):
        raise OnnxImportError(f"Attention: hidden sizes {sizes} are not multiples of "
                              f"num_heads {h}")  # fmt: skip
    hd, hdv = sizes[0] // h, sizes[2] // h
    from rill.graph.onnx.import_linalg import matmul

    qkv = matmul(n, x, weights)
    if bias is not None:
        qkv = op("AddV2", [qkv, bias])
    q, k, v = op("SplitV", [qkv, const(sizes, _I64), const(-1, dtypes.int32)], {"num_split": 3})
    q, k, v = _heads(q, h, hd), _heads(k, h, hd), _heads(v, h, hdv)
    if past is not None:
        pk, pv = op("Unpack", [past], {"num": 2, "axis": 0})
        k = op("ConcatV2", [[pk, k], const(2, dtypes.int32)])
        v = op("ConcatV2", [[pv, v], const(2, dtypes.int32)])
    present = op("Pack", [[k, v]], {"axis": 0}) if hd == hdv else None  # (V's heads differ)
    ctx = _attend(x, q, k, v, hd, scale, mask_index, attention_bias, unidirectional,
                  mask_filter_value)  # fmt: skip
    return [_merge_heads(ctx, x, sizes[2]), present]


def _merge_heads(ctx, x, width: int):
    """[batch, heads, seq, size] → [batch, seq, heads · size] (x gives batch and seq)."""
    ctx = op("Transpose", [ctx, const([0, 2, 1, 3], dtypes.int32)])
    shape = op("ConcatV2", [[_shape_part(x, 0, 2), const([width], _I64)],
                            const(0, dtypes.int32)])  # fmt: skip
    return op("Reshape", [ctx, shape])


def _attend(x, q, k, v, head_size: int, scale, mask, attention_bias, unidirectional,
            mask_filter_value):  # fmt: skip
    """softmax(scale · Q Kᵀ + mask + causal mask + attention_bias) V for [batch, heads, seq,
    size] Q, K, V (K and V with the past's positions first); masked scores get
    mask_filter_value, as onnxruntime adds it."""
    dt = x.dtype
    s = float(scale) if scale else 1.0 / math.sqrt(head_size)
    scores = op("Mul", [op("BatchMatMulV2", [q, k], {"adj_y": True}), const(s, dt)])
    total = op("StridedSlice", [op("Shape", [k], {"out_type": _I64}), const([2], _I64),
                                const([3], _I64), const([1], _I64)], {"shrink_axis_mask": 1})  # fmt: skip
    seq = op("StridedSlice", [op("Shape", [q], {"out_type": _I64}), const([2], _I64),
                              const([3], _I64), const([1], _I64)], {"shrink_axis_mask": 1})  # fmt: skip
    past_len = op("Sub", [total, seq])
    if mask is not None:
        scores = op("AddV2", [scores, _additive_mask(mask, x, total, past_len,
                                                     float(mask_filter_value), dt)])  # fmt: skip
    if unidirectional:
        i = op("AddV2", [op("Range", [const(0, _I64), seq, const(1, _I64)]), past_len])
        j = op("Range", [const(0, _I64), total, const(1, _I64)])
        future = op("Greater", [op("ExpandDims", [j, const(0, dtypes.int32)]),
                                op("ExpandDims", [i, const(1, dtypes.int32)])])  # fmt: skip
        scores = op("AddV2", [scores, op("SelectV2", [future, const(float(mask_filter_value), dt),
                                                      const(0.0, dt)])])  # fmt: skip
    if attention_bias is not None:
        scores = op("AddV2", [scores, attention_bias])
    return op("BatchMatMulV2", [op("Softmax", [scores]), v])  # [batch, heads, seq, size]


_schema("MultiHeadAttention",
        [("query", 0), ("key", 1), ("value", 1), ("bias", 1), ("key_padding_mask", 1),
         ("attention_bias", 1), ("past_key", 1), ("past_value", 1),
         ("past_sequence_length", 1), ("cache_indirection", 1)],
        [("output", 0), ("present_key", 1), ("present_value", 1), ("qk", 1)],
        [("num_heads", _AT.INT), ("mask_filter_value", -10000.0), ("scale", _AT.FLOAT),
         ("unidirectional", 0)],
        types={"key_padding_mask": "T1", "past_sequence_length": "T1",
               "cache_indirection": "T1"})  # fmt: skip


@register_onnx_import("MultiHeadAttention", _MS)
def multi_head_attention(n, query, key=None, value=None, bias=None, key_padding_mask=None,
                         attention_bias=None, past_key=None, past_value=None,
                         past_sequence_length=None, cache_indirection=None, *, num_heads,
                         mask_filter_value=-10000.0, scale=None, unidirectional=0):  # fmt: skip
    """onnxruntime's MultiHeadAttention with separate [batch, seq, hidden] query, key and value
    (projected already; `bias` adds [Q | K | V] biases), an optional key padding mask
    ([batch] lengths or a [batch, total] 0/1 mask), attention bias, and past keys and values
    ([batch, heads, past, size], returned with the new ones appended as present_key/value).
    Packed QKV, keys and values already split into heads, and cache indirection are refused."""
    if key is None or value is None:
        raise OnnxImportError("MultiHeadAttention with packed QKV (no key/value inputs) is not "
                              "supported")  # fmt: skip
    if cache_indirection is not None or past_sequence_length is not None:
        raise OnnxImportError("MultiHeadAttention's shared-buffer cache inputs are not supported")
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        if t.shape.rank != 3:
            raise OnnxImportError(f"MultiHeadAttention takes a 3-D {what} [batch, seq, hidden] "
                                  f"here, got {t.shape}")  # fmt: skip
    h = int(num_heads)
    dq, dv = query.shape.as_list()[2], value.shape.as_list()[2]
    if dq is None or dv is None or dq % h or dv % h:
        raise OnnxImportError(f"MultiHeadAttention: hidden sizes {dq} and {dv} must be known "
                              f"multiples of num_heads {h}")  # fmt: skip
    q, k, v = query, key, value
    if bias is not None:
        bq, bk, bv = op("SplitV", [bias, const([dq, dq, dv], _I64), const(0, dtypes.int32)],
                        {"num_split": 3})  # fmt: skip
        q, k, v = op("AddV2", [q, bq]), op("AddV2", [k, bk]), op("AddV2", [v, bv])
    hd, hdv = dq // h, dv // h
    q, k, v = _heads(q, h, hd), _heads(k, h, hd), _heads(v, h, hdv)
    if past_key is not None:
        k = op("ConcatV2", [[past_key, k], const(2, dtypes.int32)])
    if past_value is not None:
        v = op("ConcatV2", [[past_value, v], const(2, dtypes.int32)])
    ctx = _attend(query, q, k, v, hd, scale, key_padding_mask, attention_bias, unidirectional,
                  mask_filter_value)  # fmt: skip
    return [_merge_heads(ctx, query, dv), k, v, None]
