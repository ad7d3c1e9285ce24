"""ONNX import rules for the ai.onnx.preview domain (FlexAttention) and ai.onnx.preview.training
(Adagrad, Momentum, Adam: one optimizer step as a pure function of the tensors, their gradients
and their optimizer states, for any number of tensors at once).

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


# -- ai.onnx.preview.training: one optimizer step as a pure function -----------------------------


def _groups(what: str, inputs, k: int):
    """The variadic inputs of an optimizer op split into its k lists (X, G, then the states)."""
    if not inputs or len(inputs) % k:
        raise OnnxImportError(
            f"{what} takes R, T and {k} tensors per optimized tensor "
            f"({', '.join(['X', 'G', 'V', 'H'][:k]) if k > 2 else 'X, G'}), got {len(inputs)}"
        )
    m = len(inputs) // k
    return [list(inputs[i * m : (i + 1) * m]) for i in range(k)]


def _c(x, v: float):
    return const(v, x.dtype)


def _in(x, t):
    """t (R or T) as a scalar of x's type."""
    return t if t.dtype == x.dtype else op("Cast", [t], {"DstT": x.dtype})


def _regularized(x, g, norm: float):
    return g if norm == 0 else op("AddV2", [op("Mul", [_c(x, norm), x]), g])


@register_onnx_import("Adagrad", domain="ai.onnx.preview.training")
def adagrad(n, r, t, *inputs, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    """X_new = X - r·G'/(√H_new + ε), H_new = H + G'², r = R/(1 + T·decay), G' = G + norm·X."""
    xs, gs, hs = _groups("Adagrad", inputs, 3)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        rate = op("RealDiv", [_in(x, r), op("AddV2", [_c(x, 1.0),
                                                      op("Mul", [_in(x, t), _c(x, decay_factor)])])])  # fmt: skip
        gr = _regularized(x, g, norm_coefficient)
        hn = op("AddV2", [h, op("Mul", [gr, gr])])
        step = op(
            "RealDiv", [op("Mul", [rate, gr]), op("AddV2", [op("Sqrt", [hn]), _c(x, epsilon)])]
        )
        new_x.append(op("Sub", [x, step]))
        new_h.append(hn)
    return new_x + new_h


@register_onnx_import("Momentum", domain="ai.onnx.preview.training")
def momentum(n, r, t, *inputs, alpha, beta, mode, norm_coefficient):
    """V_new = α·V + β'·G' (β' = 1 at T = 0), X_new = X - R·V_new, or with Nesterov's momentum
    X - R·(G' + α·V_new); G' = G + norm·X."""
    if mode not in ("standard", "nesterov"):
        raise OnnxImportError(f"unknown Momentum mode {mode!r} (ONNX has standard, nesterov)")
    xs, gs, vs = _groups("Momentum", inputs, 3)
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        first = op("LessEqual", [t, const(0, t.dtype)])
        b = op("SelectV2", [first, _c(x, 1.0), _c(x, beta)])
        gr = _regularized(x, g, norm_coefficient)
        vn = op("AddV2", [op("Mul", [_c(x, alpha), v]), op("Mul", [b, gr])])
        direction = vn if mode == "standard" else op("AddV2", [gr, op("Mul", [_c(x, alpha), vn])])
        new_x.append(op("Sub", [x, op("Mul", [_in(x, r), direction])]))
        new_v.append(vn)
    return new_x + new_v


@register_onnx_import("Adam", domain="ai.onnx.preview.training")
def adam(n, r, t, *inputs, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):  # fmt: skip
    """V_new = α·V + (1-α)·G', H_new = β·H + (1-β)·G'², X_new = (1 - post)·(X - R'·V_new /
    (√H_new + ε)), R' = R·√(1-β^T)/(1-α^T) from T = 1 on (R at T = 0); G' = G + norm·X."""
    xs, gs, vs, hs = _groups("Adam", inputs, 4)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        gr = _regularized(x, g, norm_coefficient)
        vn = op("AddV2", [op("Mul", [_c(x, alpha), v]), op("Mul", [_c(x, 1.0 - alpha), gr])])
        hn = op("AddV2", [op("Mul", [_c(x, beta), h]),
                          op("Mul", [_c(x, 1.0 - beta), op("Mul", [gr, gr])])])  # fmt: skip
        tf_ = _in(x, t)
        rx = _in(x, r)
        adjusted = op("RealDiv", [
            op("Mul", [rx, op("Sqrt", [op("Sub", [_c(x, 1.0), op("Pow", [_c(x, beta), tf_])])])]),
            op("Sub", [_c(x, 1.0), op("Pow", [_c(x, alpha), tf_])])])  # fmt: skip
        rate = op("SelectV2", [op("Greater", [t, const(0, t.dtype)]), adjusted, rx])
        step = op(
            "RealDiv", [op("Mul", [rate, vn]), op("AddV2", [op("Sqrt", [hn]), _c(x, epsilon)])]
        )
        xn = op("Sub", [x, step])
        if norm_coefficient_post:
            xn = op("Mul", [_c(x, 1.0 - norm_coefficient_post), xn])
        new_x.append(xn)
        new_v.append(vn)
        new_h.append(hn)
    return new_x + new_v + new_h
