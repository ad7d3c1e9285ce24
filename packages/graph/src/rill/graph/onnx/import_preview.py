"""ONNX import rules for the ai.onnx.preview domain: FlexAttention.

FlexAttention is scaled dot-product attention over [batch, heads, sequence, head size] inputs
with two optional modifier subgraphs, score_mod on the scores before the softmax and prob_mod
on the probabilities after it (PyTorch's flex_attention). It is built as the op's function
body computes it, so that half-precision inputs round where it rounds: Q and K each scaled by
√scale and multiplied in their own type, the scores cast to the softmax precision (float32 for
every input type but double, unless the attribute says otherwise), the modifiers and the
softmax in that precision, V cast to it for the second product, the result cast back. Grouped
query attention shares each K/V head with a contiguous group of query heads.
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype


def _dim(x, axis: int):
    """x's size along `axis` as a 1-element int32 vector (static where known)."""
    d = x.shape[axis] if x.shape.rank is not None else None
    if d is not None:
        return const([d], dtypes.int32)
    shp = op("Shape", [x], {"out_type": dtypes.int32})
    return op("StridedSlice", [shp, const([axis], dtypes.int32), const([axis + 1], dtypes.int32),
                               const([1], dtypes.int32)])  # fmt: skip


def _grouped(t, group, q_heads):
    """K or V [B, Hkv, S, E] with each head repeated for its `group` query heads, [B, Hq, S, E]."""
    if isinstance(group, int) and group == 1:
        return t
    b, hkv, s, e = (_dim(t, a) for a in range(4))
    reps = const([group], dtypes.int32) if isinstance(group, int) else group
    shape5 = op("ConcatV2", [[b, hkv, reps, s, e], const(0, dtypes.int32)])
    wide = op("BroadcastTo", [op("ExpandDims", [t, const(2, dtypes.int32)]), shape5])
    return op("Reshape", [wide, op("ConcatV2", [[b, q_heads, s, e], const(0, dtypes.int32)])])


def _modifier(n, graph, x, what: str):
    outs = n.import_subgraph(graph, [x])
    if len(outs) != 1:
        raise OnnxImportError(f"FlexAttention's {what} has {len(outs)} outputs; it must have 1")
    y = outs[0]
    if y.dtype != x.dtype:
        raise OnnxImportError(
            f"FlexAttention's {what} turns {x.dtype.name} scores into {y.dtype.name}; it must "
            "keep their type"
        )
    return y


@register_onnx_import("FlexAttention", domain="ai.onnx.preview")
def flex_attention(n, q, k, v, *, scale=None, softmax_precision=None, score_mod=None,
                   prob_mod=None):  # fmt: skip
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.shape.rank is not None and t.shape.rank != 4:
            raise OnnxImportError(f"FlexAttention's {name} must be rank 4, got shape {t.shape}")
    t1 = q.dtype
    if softmax_precision is not None:
        sp = rill_dtype(int(softmax_precision), "FlexAttention softmax_precision: ")
    elif t1 in (dtypes.float16, dtypes.bfloat16, dtypes.float32):
        sp = dtypes.float32
    elif t1 == dtypes.float64:
        sp = dtypes.float64
    else:
        raise OnnxImportError(
            f"FlexAttention of {t1.name} inputs needs softmax_precision (float or double)"
        )
    hq = q.shape[1] if q.shape.rank is not None else None
    hkv = k.shape[1] if k.shape.rank is not None else None
    if hq is not None and hkv is not None:
        if hkv == 0 or hq % hkv:
            raise OnnxImportError(
                f"FlexAttention: {hq} query heads are not a multiple of {hkv} key/value heads"
            )
        group = hq // hkv
    else:
        group = op("FloorDiv", [_dim(q, 1), _dim(k, 1)])
    q_heads = _dim(q, 1)
    kg, vg = _grouped(k, group, q_heads), _grouped(v, group, q_heads)
    f32 = dtypes.float32
    if scale is None:
        e = op("Cast", [_dim(q, 3)], {"DstT": f32})
        scale_t = op("RealDiv", [const(1.0, f32), op("Sqrt", [e])])
    else:
        scale_t = const([float(scale)], f32)
    root = op("Cast", [op("Sqrt", [scale_t])], {"DstT": t1})
    scores = op("BatchMatMulV2", [op("Mul", [q, root]), op("Mul", [kg, root])], {"adj_y": True})
    scores = op("Cast", [scores], {"DstT": sp})
    if score_mod is not None:
        scores = _modifier(n, score_mod, scores, "score_mod")
    probs = op("Softmax", [scores])
    if prob_mod is not None:
        probs = _modifier(n, prob_mod, probs, "prob_mod")
    y = op("BatchMatMulV2", [probs, op("Cast", [vg], {"DstT": sp})])
    return op("Cast", [y], {"DstT": t1})
