"""ONNX import rules: more normalizations, pooling and losses (GroupNormalization,
RMSNormalization, RotaryEmbedding, SwiGLU, LpPool, MaxUnpool, NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss, Attention).

Each is composed from TensorFlow's ops. Normalizations compute their first stage (the
statistics and the normalized values) in the dtype `stash_type` names, as the ONNX function
bodies do, and scale in the input's dtype. The losses pick each sample's class with a
label == class mask (never a gather), so labels equal to ignore_index, or outside [0, C),
select nothing and never index out of range.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_conv import _native_pool, _pool_params, _window_stack
from rill.graph.onnx.import_nn import _axis, _channel_shape, _last_axis_op
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype

_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _c(x, v):
    return const(v, x.dtype)


def _cast(x, dt):
    return x if x.dtype == dt else op("Cast", [x], {"DstT": dt})


def _known_rank(x, what: str, least: int = 1) -> int:
    r = x.shape.rank
    if r is None or r < least:
        raise OnnxImportError(f"{what} needs an input of known rank >= {least}, got {x.shape}")
    return r


def _shape(x):
    """x's shape as an int64 tensor: a constant when it is static."""
    if x.shape.is_fully_defined():
        return const(x.shape.as_list(), dtypes.int64)
    return op("Shape", [x], {"out_type": dtypes.int64})


def _dims(x, begin: int, end: int | None = None):
    """x's dimensions [begin, end) as an int64 vector."""
    dims = x.shape.as_list()[begin:end]
    if x.shape.rank is not None and None not in dims:
        return const(dims, dtypes.int64)
    end = x.shape.rank if end is None else end
    return op("StridedSlice", [op("Shape", [x], {"out_type": dtypes.int64}),
                               const([begin], dtypes.int64), const([end], dtypes.int64),
                               const([1], dtypes.int64)])  # fmt: skip


def _concat(parts):
    return op("ConcatV2", [parts, const(0, dtypes.int32)])


def _stash_dtype(stash_type: int, x, what: str) -> dtypes.DType:
    dt = rill_dtype(int(stash_type), f"{what} stash_type: ")
    if dt not in _FLOATS:
        raise OnnxImportError(f"{what} stash_type {dt.name} is not a floating-point type")
    if x.dtype not in _FLOATS:
        raise OnnxImportError(f"{what} normalizes floating-point inputs, not {x.dtype.name}")
    return dt


# -- normalizations --------------------------------------------------------------------------------


@register_onnx_import("GroupNormalization")
def group_normalization(n, x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
    """Statistics per sample over each group of C/num_groups channels (and all spatial dims).

    Opset 21 scales and shifts per channel (scale, bias of shape [C]); opset 18 per group
    (shape [num_groups]), each group's value applied to all its channels.
    """
    r = _known_rank(x, "GroupNormalization", 2)
    g = int(num_groups)
    if g < 1:
        raise OnnxImportError(f"GroupNormalization num_groups {g} must be at least 1")
    ch = x.shape[1]
    if ch is not None and ch % g:
        raise OnnxImportError(
            f"GroupNormalization's input has {ch} channels, which num_groups {g} does not divide"
        )
    per_group = n.opset < 21
    want = g if per_group else ch
    for name, t in (("scale", scale), ("bias", bias)):
        size = t.shape.num_elements() if t.shape.is_fully_defined() else None
        if want is not None and size is not None and size != want:
            per = f"num_groups ({g})" if per_group else f"the channel count ({ch})"
            raise OnnxImportError(
                f"GroupNormalization at opset {n.opset} takes a {name} of {per} values, got "
                f"shape {t.shape}"
            )
    sd = x.dtype if per_group else _stash_dtype(stash_type, x, "GroupNormalization")
    xs = _cast(x, sd)
    grouped = op("Reshape", [xs, _concat([_dims(x, 0, 1), const([g, -1], dtypes.int64)])])
    ax = const([2], dtypes.int64)
    mean = op("Mean", [grouped, ax], {"keep_dims": True})
    var = op("Mean", [op("SquaredDifference", [grouped, mean]), ax], {"keep_dims": True})
    inv = op("Rsqrt", [op("AddV2", [var, _c(var, epsilon)])])
    y = op("Mul", [op("Sub", [grouped, mean]), inv])
    if per_group:
        s = op("Reshape", [scale, const([g, 1], dtypes.int64)])
        b = op("Reshape", [bias, const([g, 1], dtypes.int64)])
        return op("Reshape", [op("AddV2", [op("Mul", [y, s]), b]), _shape(x)])
    y = _cast(op("Reshape", [y, _shape(x)]), x.dtype)
    y = op("Mul", [y, _channel_shape(x, scale)]) if r > 2 else op("Mul", [y, scale])
    return op("AddV2", [y, _channel_shape(x, bias) if r > 2 else bias])


@register_onnx_import("RMSNormalization")
def rms_normalization(n, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    """x / sqrt(mean(x²) + epsilon) over axes [axis, rank), times scale."""
    r = _known_rank(x, "RMSNormalization")
    a = _axis(x, axis)
    xs = _cast(x, _stash_dtype(stash_type, x, "RMSNormalization"))
    ms = op("Mean", [op("Square", [xs]), const(list(range(a, r)), dtypes.int64)],
            {"keep_dims": True})  # fmt: skip
    rms = op("Sqrt", [op("AddV2", [ms, _c(ms, epsilon)])])
    y = _cast(op("RealDiv", [xs, rms]), x.dtype)
    return op("Mul", [y, scale])


@register_onnx_import("RotaryEmbedding")
def rotary_embedding(n, x, cos_cache, sin_cache, position_ids=None, *, interleaved=0,
                     num_heads=0, rotary_embedding_dim=0):  # fmt: skip
    """Rotates the first rotary_embedding_dim (all, when 0) features of each head.

    A 4-D input is [batch, heads, seq, head_size] and is rotated in place, the caches broadcast
    over the heads; a 3-D [batch, seq, hidden] input is viewed as [batch, seq, heads, head_size].
    With position_ids the caches are [max_position + 1, dim/2] tables indexed by position;
    without, they are [batch, seq, dim/2] already.
    """
    r = _known_rank(x, "RotaryEmbedding", 3)
    if r > 4:
        raise OnnxImportError(f"RotaryEmbedding takes a 3-D or 4-D input, got {x.shape}")
    xh = x
    if r == 3:
        if num_heads <= 0:
            raise OnnxImportError("RotaryEmbedding of a 3-D input needs the num_heads attribute")
        hidden = x.shape[2]
        if hidden is not None and hidden % num_heads:
            raise OnnxImportError(
                f"RotaryEmbedding: hidden size {hidden} is not a multiple of num_heads {num_heads}"
            )
        xh = op("Reshape", [x, _concat([_dims(x, 0, 2), const([num_heads, -1], dtypes.int64)])])
    if position_ids is not None:
        pos = _cast(position_ids, dtypes.int64)
        cos_cache = op("GatherV2", [cos_cache, pos, const(0, dtypes.int32)])
        sin_cache = op("GatherV2", [sin_cache, pos, const(0, dtypes.int32)])
    # [batch, seq, dim/2] → beside the heads axis of xh (1 for 4-D inputs, 2 for 3-D ones).
    heads_axis = const(1 if r == 4 else 2, dtypes.int32)
    cos = _cast(op("ExpandDims", [cos_cache, heads_axis]), x.dtype)
    sin = _cast(op("ExpandDims", [sin_cache, heads_axis]), x.dtype)
    half = cos_cache.shape[-1] if cos_cache.shape.rank else None
    head = xh.shape[-1]
    rot = int(rotary_embedding_dim)
    if rot and half is not None and 2 * half != rot:
        raise OnnxImportError(
            f"RotaryEmbedding: the caches' last dimension ({half}) is not rotary_embedding_dim/2 "
            f"({rot}/2)"
        )
    if not rot and half is not None and head is not None and 2 * half != head:
        raise OnnxImportError(
            f"RotaryEmbedding: the caches' last dimension ({half}) is not head_size/2 ({head}/2)"
        )
    partial = rot and (head is None or rot < head)
    x_rot = _last_slice(xh, 0, rot, 1) if partial else xh
    if interleaved:
        x1, x2 = _last_slice(x_rot, 0, None, 2), _last_slice(x_rot, 1, None, 2)
    else:
        x1, x2 = op("Split", [const(-1, dtypes.int32), x_rot], {"num_split": 2})
    real = op("Sub", [op("Mul", [cos, x1]), op("Mul", [sin, x2])])
    imag = op("AddV2", [op("Mul", [sin, x1]), op("Mul", [cos, x2])])
    if interleaved:
        y = op("Reshape", [op("Pack", [[real, imag]], {"axis": -1}), _shape(x_rot)])
    else:
        y = op("ConcatV2", [[real, imag], const(-1, dtypes.int32)])
    if partial:
        y = op("ConcatV2", [[y, _last_slice(xh, rot, None, 1)], const(-1, dtypes.int32)])
    return op("Reshape", [y, _shape(x)]) if r == 3 else y


def _last_slice(x, begin: int, end: int | None, stride: int):
    """x[..., begin:end:stride] for an x of known rank."""
    r = x.shape.rank
    lead = (1 << (r - 1)) - 1
    return op("StridedSlice", [x, const([0] * (r - 1) + [begin], dtypes.int64),
                               const([0] * (r - 1) + [end or 0], dtypes.int64),
                               const([1] * (r - 1) + [stride], dtypes.int64)],
              {"begin_mask": lead, "end_mask": lead | (0 if end else 1 << (r - 1))})  # fmt: skip


@register_onnx_import("SwiGLU")
def swiglu(n, a, b, *, alpha=1.0):
    """Swish_alpha(a) · b = a · sigmoid(alpha · a) · b."""
    gate = a if alpha == 1.0 else op("Mul", [_c(a, alpha), a])
    return op("Mul", [op("Mul", [a, op("Sigmoid", [gate])]), b])


# -- pooling ---------------------------------------------------------------------------------------


@register_onnx_import("LpPool")
def lp_pool(n, x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, p=2,
            pads=None, strides=None):  # fmt: skip
    """(Σ |x|^p over each window)^(1/p); padding holds zeros, which add nothing.

    The window sums are AvgPools over the zero-padded input times the window size where
    TensorFlow's pools fit (1-D and 2-D, no dilation); otherwise sums of strided slices.
    """
    nd, geo = _pool_params(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode,
                           "LpPool")  # fmt: skip
    if x.dtype not in _FLOATS:
        raise OnnxImportError(f"LpPool pools floating-point inputs, not {x.dtype.name}")
    p = float(p)
    if p <= 0:
        raise OnnxImportError(f"LpPool p={p:g} must be positive")
    ax = op("Abs", [x])
    powered = ax if p == 1 else op("Square", [x]) if p == 2 else op("Pow", [ax, _c(x, p)])
    if nd <= 2 and all(d == 1 for d in geo.dilations) and not ceil_mode and geo.begin is not None:
        pairs = np.zeros((nd + 2, 2), np.int64)
        pairs[2:] = list(zip(geo.begin, geo.end))
        padded = op("Pad", [powered, const(pairs, dtypes.int64)]) if pairs.any() else powered
        avg = _native_pool("AvgPool", padded, geo, "VALID")
        total = op("Mul", [avg, _c(x, float(np.prod(geo.kernel)))])
    else:
        geo.static("LpPool")
        stack, _ = _window_stack(powered, geo, 0)
        total = op("Sum", [stack, const(0, dtypes.int32)])
    if p == 1:
        return total
    if p == 2:
        return op("Sqrt", [total])
    return op("Pow", [total, _c(x, 1.0 / p)])


@register_onnx_import("MaxUnpool")
def max_unpool(n, x, indices, output_shape=None, *, kernel_shape, pads=None, strides=None):
    """Zeros with each x scattered to its flat index (MaxPool's Indices output).

    The indices address the default output, whose spatial size is
    (in - 1) · stride + kernel − pads. An output_shape pads that at the end of each axis (or
    crops it), as onnx's reference and node cases do: the indices never address output_shape.
    """
    r = _known_rank(x, "MaxUnpool", 3)
    nd = r - 2
    kernel = [int(k) for k in kernel_shape]
    if len(kernel) != nd:
        raise OnnxImportError(f"MaxUnpool kernel_shape {kernel} does not match the input {x.shape}")
    st = [int(s) for s in strides] if strides else [1] * nd
    pd = [int(q) for q in pads] if pads else [0] * (2 * nd)
    extra = [k - b - e for k, b, e in zip(kernel, pd[:nd], pd[nd:])]
    spatial = op("AddV2", [op("Mul", [op("Sub", [_dims(x, 2), const(1, dtypes.int64)]),
                                      const(st, dtypes.int64)]),
                           const(extra, dtypes.int64)])  # fmt: skip
    shape = _concat([_dims(x, 0, 2), spatial])
    total = op("Prod", [shape, const(0, dtypes.int32)], {"keep_dims": True})
    zeros = op("Fill", [total, _c(x, 0)])
    flat_i = op("Reshape", [_cast(indices, dtypes.int64), const([-1, 1], dtypes.int64)])
    flat_x = op("Reshape", [x, const([-1], dtypes.int64)])
    # Overlapping windows may name one index twice, always with the same (maximal) value.
    y = op("Reshape", [op("TensorScatterUpdate", [zeros, flat_i, flat_x]), shape])
    if output_shape is not None:
        want = _cast(output_shape, dtypes.int64)
        grow = op("Maximum", [op("Sub", [want, shape]), const(0, dtypes.int64)])
        pairs = op("Pack", [[op("ZerosLike", [grow]), grow]], {"axis": 1})
        y = op("Slice", [op("Pad", [y, pairs]), const([0] * r, dtypes.int64), want])
    if y.shape.rank is None:
        y.set_shape([None] * r)
    return y


# -- losses ----------------------------------------------------------------------------------------


def _picked_loss(x, labels, weight, ignore_index, reduction: str, what: str):
    """-x[n, label, d...] · weight[label], reduced; x holds log-probabilities [N, C, d...]."""
    if reduction not in ("none", "sum", "mean"):
        raise OnnxImportError(f"{what} reduction {reduction!r} is not 'none', 'sum' or 'mean'")
    r = _known_rank(x, what, 2)
    if labels.shape.rank is not None and labels.shape.rank != r - 1:
        raise OnnxImportError(
            f"{what}: the labels' shape {labels.shape} should be the input's {x.shape} without "
            "its class axis 1"
        )
    lab = _cast(labels, dtypes.int64)
    ch = x.shape[1]
    if ch is not None:
        classes = const(np.arange(ch, dtype=np.int64).reshape([1, ch] + [1] * (r - 2)))
    else:
        depth = op("Reshape", [_dims(x, 1, 2), const([], dtypes.int64)])
        iota = op("Range", [const(0, dtypes.int64), depth, const(1, dtypes.int64)])
        classes = op("Reshape", [iota, const([1, -1] + [1] * (r - 2), dtypes.int64)])
    lab_c = op("ExpandDims", [lab, const(1, dtypes.int32)])
    hit = op("Equal", [lab_c, classes])
    valid = None
    if ignore_index is not None:
        valid = op("NotEqual", [lab, const(int(ignore_index), dtypes.int64)])
        hit = op("LogicalAnd", [hit, op("ExpandDims", [valid, const(1, dtypes.int32)])])
    zero = op("ZerosLike", [x])
    one_c = const(1, dtypes.int32)
    picked = op("Sum", [op("SelectV2", [hit, x, zero]), one_c])
    w = None
    if weight is not None:
        wb = op("Reshape", [weight, const([1, -1] + [1] * (r - 2), dtypes.int64)])
        w = op("Sum", [op("SelectV2", [hit, op("Mul", [wb, op("OnesLike", [x])]), zero]),
                       one_c])  # fmt: skip
        picked = op("Mul", [picked, w])
    loss = op("Neg", [picked])
    if reduction == "none":
        return loss
    all_axes = const(list(range(r - 1)), dtypes.int32)
    total = op("Sum", [loss, all_axes])
    if reduction == "sum":
        return total
    if w is None and valid is None:
        return op("Mean", [loss, all_axes])
    if w is None:
        w = _cast(valid, x.dtype)
    return op("RealDiv", [total, op("Sum", [w, all_axes])])


@register_onnx_import("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(n, x, target, weight=None, *, ignore_index=None,
                                 reduction="mean"):  # fmt: skip
    return _picked_loss(x, target, weight, ignore_index, reduction, "NegativeLogLikelihoodLoss")


@register_onnx_import("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(n, scores, labels, weights=None, *, ignore_index=None,
                               reduction="mean"):  # fmt: skip
    """The NLL loss of LogSoftmax(scores) over the class axis 1; log_prob is that LogSoftmax."""
    _known_rank(scores, "SoftmaxCrossEntropyLoss", 2)
    log_prob = _last_axis_op("LogSoftmax", scores, 1)
    loss = _picked_loss(log_prob, labels, weights, ignore_index, reduction,
                        "SoftmaxCrossEntropyLoss")  # fmt: skip
    return [loss, log_prob]


# -- attention -------------------------------------------------------------------------------------


def _heads_first(t, heads, what: str):
    """A 3-D [batch, seq, heads · size] input as [batch, heads, seq, size]; 4-D as it is."""
    r = _known_rank(t, "Attention", 3)
    if r == 4:
        return t
    if r != 3:
        raise OnnxImportError(f"Attention's {what} is 3-D or 4-D, got {t.shape}")
    if not heads:
        raise OnnxImportError(f"Attention of 3-D inputs needs the {what} head count attribute")
    hidden = t.shape[2]
    if hidden is not None and hidden % heads:
        raise OnnxImportError(
            f"Attention's {what} size {hidden} is not a multiple of {heads} heads"
        )
    size = -1 if hidden is None else hidden // heads
    split = op("Reshape", [t, _concat([_dims(t, 0, 2), const([heads, size], dtypes.int64)])])
    return op("Transpose", [split, const([0, 2, 1, 3], dtypes.int32)])


def _repeat_heads(t, times: int):
    """[B, H, T, D] → [B, H · times, T, D], each head repeated `times` times in place."""
    if times == 1:
        return t
    tiled = op("Tile", [op("ExpandDims", [t, const(2, dtypes.int32)]),
                        const([1, 1, times, 1, 1], dtypes.int64)])  # fmt: skip
    shape = _concat([_dims(t, 0, 1), const([-1], dtypes.int64), _dims(t, 2)])
    return op("Reshape", [tiled, shape])


def _scalar_dim(t, axis: int):
    return op("Reshape", [_dims(t, axis, axis + 1), const([], dtypes.int64)])


@register_onnx_import("Attention")
def attention(n, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
              *, is_causal=0, kv_num_heads=0, q_num_heads=0, qk_matmul_output_mode=0,
              scale=None, softcap=0.0, softmax_precision=None, left_window_size=-1,
              right_window_size=-1):  # fmt: skip
    """softmax(Q·√scale · (K·√scale)ᵀ, softcapped, plus the masks) · V, per head.

    The structural masks (causal, nonpad_kv_seqlen padding, the left/right windows) are boolean
    [B or 1, 1, Sq, T] grids over query index i and key index j, aligned at the offset of the
    query block (the past length, or nonpad_kv_seqlen − Sq per batch); a boolean attn_mask
    joins them, a float one is added. A row that no key may attend gives zeros, not NaN.
    """
    if not 0 <= qk_matmul_output_mode <= 3:
        raise OnnxImportError(f"Attention qk_matmul_output_mode {qk_matmul_output_mode} is not 0-3")
    three_d = q.shape.rank == 3
    qh = _heads_first(q, q_num_heads, "query")
    kh = _heads_first(k, kv_num_heads, "key")
    vh = _heads_first(v, kv_num_heads, "value")
    if (past_key is None) != (past_value is None):
        raise OnnxImportError("Attention takes past_key and past_value together, or neither")
    if past_key is not None:
        kh = op("ConcatV2", [[past_key, kh], const(2, dtypes.int32)])
        vh = op("ConcatV2", [[past_value, vh], const(2, dtypes.int32)])
    hq, hkv = qh.shape[1], kh.shape[1]
    if hq is None or hkv is None:
        raise OnnxImportError("Attention needs the query and key head counts statically known")
    if hq % hkv:
        raise OnnxImportError(f"Attention: {hq} query heads are not a multiple of {hkv} kv heads")
    if scale is None:
        d = qh.shape[-1]
        if d is None:
            raise OnnxImportError("Attention without a scale needs the head size statically known")
        scale = 1.0 / np.sqrt(d)
    root = _c(qh, np.sqrt(scale))
    kr = _repeat_heads(kh, hq // hkv)
    vr = _repeat_heads(vh, hq // hkv)
    scores = op("BatchMatMulV2", [op("Mul", [qh, root]), op("Mul", [kr, root])], {"adj_y": True})
    qk_out = [scores]
    if softcap:
        cap = _c(scores, softcap)
        scores = op("Mul", [cap, op("Tanh", [op("RealDiv", [scores, cap])])])
    qk_out.append(scores)
    allowed, bias = _attention_masks(scores, attn_mask, past_key, nonpad_kv_seqlen, is_causal,
                                     left_window_size, right_window_size)  # fmt: skip
    neg_inf = _c(scores, -np.inf)
    if allowed is not None:
        scores = op("SelectV2", [allowed, scores, neg_inf])
    if bias is not None:
        scores = op("AddV2", [scores, bias])
    qk_out.append(scores)
    sd = scores.dtype
    if softmax_precision is not None:
        sd = _stash_dtype(softmax_precision, scores, "Attention softmax_precision")
    logits = _cast(scores, sd)
    probs = op("Softmax", [logits])
    row_max = op("Max", [logits, const(-1, dtypes.int32)], {"keep_dims": True})
    dead = op("Equal", [row_max, const(-np.inf, sd)])
    probs = _cast(op("SelectV2", [dead, op("ZerosLike", [probs]), probs]), q.dtype)
    qk_out.append(probs)
    y = op("BatchMatMulV2", [probs, vr])
    if three_d:
        y = op("Transpose", [y, const([0, 2, 1, 3], dtypes.int32)])
        y = op("Reshape", [y, _concat([_dims(y, 0, 2), const([-1], dtypes.int64)])])
    return [y, kh, vh, qk_out[qk_matmul_output_mode]]


def _attention_masks(scores, attn_mask, past_key, nonpad, is_causal, left, right):
    """(allowed: bool grid or None, bias: float mask or None) over scores' [B, H, Sq, T]."""
    sq, total = _scalar_dim(scores, 2), _scalar_dim(scores, 3)
    i64 = dtypes.int64
    qi = op("Reshape", [op("Range", [const(0, i64), sq, const(1, i64)]), const([-1, 1], i64)])
    kj = op("Range", [const(0, i64), total, const(1, i64)])
    allowed = None

    def both(m):
        return m if allowed is None else op("LogicalAnd", [allowed, m])

    if nonpad is not None:
        valid = op("Reshape", [_cast(nonpad, i64), const([-1, 1, 1, 1], i64)])
    if past_key is not None:
        pos = op("AddV2", [qi, _scalar_dim(past_key, 2)])
    elif nonpad is not None:
        pos = op("AddV2", [qi, op("Sub", [valid, sq])])
    else:
        pos = qi
    if is_causal:
        allowed = both(op("LessEqual", [kj, pos]))
    if nonpad is not None:
        allowed = both(op("Less", [kj, valid]))
    if left is not None and left >= 0:
        allowed = both(op("GreaterEqual", [kj, op("Sub", [pos, const(int(left), i64)])]))
    if right is not None and right >= 0:
        allowed = both(op("LessEqual", [kj, op("AddV2", [pos, const(int(right), i64)])]))
    bias = None
    if attn_mask is not None:
        m = _pad_last_to(attn_mask, total)
        if m.dtype == dtypes.bool_:
            allowed = both(m)
        else:
            bias = _cast(m, scores.dtype)
    return allowed, bias


def _pad_last_to(m, total):
    """m's last axis padded to `total` (False, or −inf for a float mask); ONNX allows shorter."""
    r = _known_rank(m, "Attention attn_mask")
    short = op("Maximum", [op("Sub", [total, _scalar_dim(m, r - 1)]), const(0, dtypes.int64)])
    zeros = op("Fill", [const([r - 1], dtypes.int64), const(0, dtypes.int64)])
    pairs = op("Pack", [[op("ConcatV2", [[zeros, const([0], dtypes.int64)], const(0, dtypes.int32)]),
                         op("ConcatV2", [[zeros, op("Reshape", [short, const([1], dtypes.int64)])],
                                         const(0, dtypes.int32)])]], {"axis": 1})  # fmt: skip
    fill = const(False, dtypes.bool_) if m.dtype == dtypes.bool_ else _c(m, -np.inf)
    return op("PadV2", [m, pairs, fill])
