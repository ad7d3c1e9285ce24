"""ONNX import rules: ops that carry a recurrent state across calls (CausalConvWithState,
LinearAttention), the decode-time building blocks of Mamba and Gated DeltaNet.

Both are composed from TensorFlow's ops:

- CausalConvWithState prepends the carried state (zeros without one) to the input along time,
  runs one DepthwiseConv2dNative over a unit height (NCHW, VALID), and hands back the last k − 1
  steps of the prepended sequence as the next state.
- LinearAttention is one while loop over time that carries the state S [B, H_kv, d_k, d_v] and
  writes each step's output to a TensorArray, so only the outputs (never T copies of the state)
  are kept. The four update rules are the spec's recurrences step by step; query head h reads KV
  head h // (H_q / H_kv). Half-precision inputs run the loop in float32 (as the op's ONNX
  function body does) and round once at the end.
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.control_flow import cond, while_loop
from rill.graph.onnx.import_norm_more import _cast, _concat, _dims
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op
from rill.graph.ops.tensor_array_ops import TensorArray

_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
_I32, _I64 = dtypes.int32, dtypes.int64


def _rank(t, want: int, what: str) -> None:
    if t.shape.rank != want:
        raise OnnxImportError(f"{what} should be {want}-D, got shape {t.shape}")


def _float_input(t, what: str) -> None:
    if t.dtype not in _FLOATS:
        raise OnnxImportError(f"{what} should be a floating-point tensor, got {t.dtype.name}")


def _check_dims(t, want: list, what: str) -> None:
    """Refuses t when a statically known dimension differs from a known entry of `want`."""
    got = t.shape.as_list()
    if any(g is not None and w is not None and g != w for g, w in zip(got, want)):
        shown = ", ".join("?" if w is None else str(w) for w in want)
        raise OnnxImportError(f"{what} should have shape [{shown}], got {t.shape}")


# -- CausalConvWithState ---------------------------------------------------------------------------


@register_onnx_import("CausalConvWithState")
def causal_conv_with_state(n, x, weight, bias=None, past_state=None, *, activation="none"):
    """y[b, c, t] = act(Σ_j w[c, 0, j] · p[b, c, t + j] + bias[c]) with p = past ‖ x along time;
    present_state = the last k − 1 steps of p (its first k − 1 are past_state, or zeros)."""
    if activation not in ("none", "silu", "swish"):
        raise OnnxImportError(
            f"CausalConvWithState activation {activation!r} is not 'none', 'silu' or 'swish'"
        )
    _rank(x, 3, "CausalConvWithState's input [batch, channels, length]")
    _rank(weight, 3, "CausalConvWithState's weight [channels, 1, k]")
    _float_input(x, "CausalConvWithState's input")
    for name, t in (("weight", weight), ("bias", bias), ("past_state", past_state)):
        if t is not None and t.dtype != x.dtype:
            raise OnnxImportError(
                f"CausalConvWithState's {name} is {t.dtype.name}, its input {x.dtype.name}"
            )
    batch, channels, _ = x.shape.as_list()
    k = weight.shape[2]
    if k == 0:
        raise OnnxImportError("CausalConvWithState's weight has kernel size 0; it needs k >= 1")
    _check_dims(weight, [channels, 1, None], "CausalConvWithState's weight")
    if channels is None:
        channels = weight.shape[0]
    if bias is not None:
        _rank(bias, 1, "CausalConvWithState's bias [channels]")
        _check_dims(bias, [channels], "CausalConvWithState's bias")
    state_len = None if k is None else k - 1
    if past_state is None:
        zeros_shape = _concat([_dims(x, 0, 2), op("Sub", [_dims(weight, 2), const([1], _I64)])])
        past_state = op("Fill", [zeros_shape, const(0, x.dtype)])
    else:
        _rank(past_state, 3, "CausalConvWithState's past_state [batch, channels, k - 1]")
        _check_dims(past_state, [batch, channels, state_len], "CausalConvWithState's past_state")
    padded = op("ConcatV2", [[past_state, x], const(2, _I32)])
    # [C, 1, k] → DepthwiseConv2dNative's [height 1, width k, C, multiplier 1].
    filt = op("ExpandDims", [op("Transpose", [weight, const([1, 2, 0], _I32)]), const(3, _I32)])
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID", "data_format": "NCHW"}
    length = x.shape[2]
    if not length:
        # An empty input (or one that may be) is shorter than the window: one zero step past the
        # end gives the conv a window, and the extra output step is cut off again.
        attrs.update(padding="EXPLICIT", explicit_paddings=[0, 0, 0, 0, 0, 0, 0, 1])
    y = op("DepthwiseConv2dNative", [op("ExpandDims", [padded, const(2, _I32)]), filt], attrs)
    y = op("Squeeze", [y], {"squeeze_dims": [2]})
    if not length:
        y = op("Slice", [y, const([0, 0, 0], _I64), _concat([const([-1, -1], _I64),
                                                              _dims(x, 2, 3)])])  # fmt: skip
    if bias is not None:
        y = op("BiasAdd", [y, bias], {"data_format": "NCHW"})
    if activation != "none":
        y = op("Mul", [y, op("Sigmoid", [y])])
    begin = _concat([const([0, 0], _I64), _dims(x, 2, 3)])
    present = op("Slice", [padded, begin, const([-1, -1, -1], _I64)])
    present.set_shape([batch, channels, state_len])
    return [y, present]


# -- LinearAttention -------------------------------------------------------------------------------

_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads_time_major(t, heads: int):
    """[B, T, heads · d] → [T, B, heads, d] (heads −1: [B, T, e] → [T, B, e, 1])."""
    last = [heads, -1] if heads > 0 else [-1, 1]
    split = op("Reshape", [t, _concat([_dims(t, 0, 2), const(last, _I64)])])
    return op("Transpose", [split, const([1, 0, 2, 3], _I32)])


def _gate(t, widths: dict, what: str):
    """A decay or beta [B, T, e], e one of `widths` (width → its meaning; None keys unknown)."""
    _rank(t, 3, f"LinearAttention's {what}")
    e = t.shape[2]
    known = [w for w in widths if w is not None]
    if e is not None and len(known) == len(widths) and e not in widths:
        allowed = " or ".join(f"{w} ({m})" for w, m in widths.items())
        raise OnnxImportError(f"LinearAttention's {what} last dimension should be {allowed}, "
                              f"got {e}")  # fmt: skip


def _time_loop(s0, elems: dict, step, out_shape: list, out_dims):
    """Runs `step(state, elem_t) -> (state, out_t)` over the rows of every tensor in `elems`
    (all [T, ...]); returns (outputs stacked to [T, ...], the final state). Each out_t has the
    static shape `out_shape` (a list, None for unknown) and the run-time shape `out_dims`."""
    n = op("Shape", [elems["q"]], {"out_type": _I32})
    n = op("StridedSlice", [n, const([0], _I32), const([1], _I32), const([1], _I32)],
           {"shrink_axis_mask": 1})  # fmt: skip
    arrays = {k: TensorArray(t.dtype, size=n, element_shape=t.shape[1:]).unstack(t)
              for k, t in elems.items()}  # fmt: skip
    outs = TensorArray(s0.dtype, size=n, element_shape=out_shape)

    def body(i, s, outs):
        s, y = step(s, {k: a.read(i) for k, a in arrays.items()})
        s.set_shape(s0.shape)
        y.set_shape(out_shape)
        return [i + 1, s, outs.write(i, y)]

    _, s, outs = while_loop(lambda i, s, o: op("Less", [i, n]), body, [const(0, _I32), s0, outs],
                            name="time")  # fmt: skip
    if None not in out_shape:
        return outs.stack(), s
    # Stacking no elements needs their full shape, known here only from the run-time sizes.
    empty_shape = _concat([const([0], _I64), out_dims])
    ys = cond(op("Equal", [n, const(0, _I32)]),
              lambda: op("Fill", [empty_shape, const(0, s0.dtype)]), outs.stack)  # fmt: skip
    return ys, s


@register_onnx_import("LinearAttention")
def linear_attention(n, query, key, value, past_state=None, decay=None, beta=None, *,
                     q_num_heads, kv_num_heads, update_rule="gated_delta", scale=0.0,
                     chunk_size=64):  # fmt: skip
    """Per KV head, state S [d_k, d_v] (past_state, or zeros) updated at every step t:

        linear:       S = S + k ⊗ v
        gated:        S = exp(g) · S + k ⊗ v
        delta:        S = S + β · k ⊗ (v − Sᵀk)
        gated_delta:  S' = exp(g) · S;  S = S' + β · k ⊗ (v − S'ᵀk)

    and o_t = scale · qᵀ S. g is per key dimension (width H_kv · d_k) or per head (width H_kv)
    and scales the rows of S; β is per head (H_kv) or shared (1). chunk_size is a tuning hint
    for chunked kernels and changes nothing here.
    """
    if update_rule not in _RULES:
        raise OnnxImportError(
            f"LinearAttention update_rule {update_rule!r} is not one of {', '.join(_RULES)}"
        )
    hq, hkv = int(q_num_heads), int(kv_num_heads)
    if hq < 1 or hkv < 1 or hq % hkv:
        raise OnnxImportError(
            f"LinearAttention q_num_heads ({hq}) should be a positive multiple of kv_num_heads "
            f"({hkv})"
        )
    gated, delta = "gated" in update_rule, "delta" in update_rule
    if gated and decay is None:
        raise OnnxImportError(f"LinearAttention update_rule {update_rule!r} needs the decay input")
    if delta and beta is None:
        raise OnnxImportError(f"LinearAttention update_rule {update_rule!r} needs the beta input")
    # As onnx's reference does: an input the rule never reads is a model error, not ignored.
    for name, t, used in (("decay", decay, gated), ("beta", beta, delta)):
        if t is not None and not used:
            raise OnnxImportError(
                f"LinearAttention update_rule {update_rule!r} takes no {name} input; remove it "
                "or pick a rule that uses it"
            )
    for name, t in (("query", query), ("key", key), ("value", value)):
        _rank(t, 3, f"LinearAttention's {name} [batch, time, heads · size]")
        _float_input(t, f"LinearAttention's {name}")
        if t.dtype != query.dtype:
            raise OnnxImportError(f"LinearAttention's {name} is {t.dtype.name}, its query "
                                  f"{query.dtype.name}")  # fmt: skip
    sizes = {}
    for name, t, heads in (("query", query, hq), ("key", key, hkv), ("value", value, hkv)):
        width = t.shape[2]
        if width is not None and width % heads:
            raise OnnxImportError(
                f"LinearAttention's {name} width {width} is not a multiple of its {heads} heads"
            )
        sizes[name] = None if width is None else width // heads
    dk, dv = sizes["query"], sizes["value"]
    if dk is not None and sizes["key"] is not None and dk != sizes["key"]:
        raise OnnxImportError(
            f"LinearAttention's query heads have size {dk} and its key heads size {sizes['key']}; "
            "they should agree (d_k)"
        )
    dk = dk if dk is not None else sizes["key"]
    batch, steps = query.shape[0], query.shape[1]
    for name, t in (("key", key), ("value", value)):
        _check_dims(t, [batch, steps, None], f"LinearAttention's {name} (beside the query)")

    # Half inputs compute in float32 (as the op's function body does), float64 in float64.
    cd = dtypes.float64 if query.dtype == dtypes.float64 else dtypes.float32
    if scale:
        q_scale = const(float(scale), cd)
    elif dk is not None:
        q_scale = const(dk**-0.5, cd)
    else:
        width = op("Reshape", [_dims(query, 2, 3), const([], _I64)])
        q_scale = op("Rsqrt", [_cast(op("FloorDiv", [width, const(hq, _I64)]), cd)])
    elems = {
        "q": op("Mul", [_heads_time_major(_cast(query, cd), hq), q_scale]),
        "k": _heads_time_major(_cast(key, cd), hkv),
        "v": _heads_time_major(_cast(value, cd), hkv),
    }
    if gated:
        dk_wide = None if dk is None else hkv * dk
        _gate(decay, {hkv: "per head", dk_wide: "per key dimension"}, "decay")
        elems["decay"] = op("Exp", [_heads_time_major(_cast(decay, cd), hkv)])
    if delta:
        _gate(beta, {hkv: "per head", 1: "shared"}, "beta")
        elems["beta"] = _heads_time_major(_cast(beta, cd), -1)
    state_shape = [batch, hkv, dk, dv]

    def per_head(t, heads: int):
        return op("FloorDiv", [_dims(t, 2, 3), const([heads], _I64)])

    if past_state is None:
        s_shape = _concat([_dims(query, 0, 1), const([hkv], _I64), per_head(key, hkv),
                           per_head(value, hkv)])  # fmt: skip
        s0 = op("Fill", [s_shape, const(0, cd)])
        # present_state's type S is free without a past_state: the model's declared one, if any.
        state_dtype = n.output_dtype(1) if n.output_dtype(1) in _FLOATS else query.dtype
    else:
        _rank(past_state, 4, "LinearAttention's past_state [batch, kv heads, d_k, d_v]")
        _float_input(past_state, "LinearAttention's past_state")
        _check_dims(past_state, state_shape, "LinearAttention's past_state")
        s0 = _cast(past_state, cd)
        state_dtype = past_state.dtype
    s0.set_shape(state_shape)
    group = hq // hkv

    def step(s, e):
        if gated:
            s = op("Mul", [s, op("ExpandDims", [e["decay"], const(-1, _I32)])])
        k_col = op("ExpandDims", [e["k"], const(-1, _I32)])  # [B, H_kv, d_k, 1]
        write = e["v"]
        if delta:
            # Sᵀk as a row: [B, H_kv, 1, d_k] · [B, H_kv, d_k, d_v].
            recalled = op("BatchMatMulV2", [op("ExpandDims", [e["k"], const(-2, _I32)]), s])
            recalled = op("Squeeze", [recalled], {"squeeze_dims": [-2]})
            write = op("Mul", [e["beta"], op("Sub", [write, recalled])])
        s = op("AddV2", [s, op("Mul", [k_col, op("ExpandDims", [write, const(-2, _I32)])])])
        # The query heads of one KV head read its state together: [B, H_kv, group, d_k] · S.
        q = op("Reshape", [e["q"], _concat([_dims(e["q"], 0, 1), const([hkv, group, -1], _I64)])])
        y = op("BatchMatMulV2", [q, s])
        return s, op("Reshape", [y, _concat([_dims(y, 0, 1), const([hq, -1], _I64)])])

    out_dims = _concat([_dims(query, 0, 1), const([hq], _I64), per_head(value, hkv)])
    ys, s = _time_loop(s0, elems, step, [batch, hq, dv], out_dims)
    y = op("Transpose", [ys, const([1, 0, 2, 3], _I32)])
    y = op("Reshape", [y, _concat([_dims(query, 0, 2), const([-1], _I64)])])
    y.set_shape([batch, steps, None if dv is None else hq * dv])
    s.set_shape(state_shape)
    return [_cast(y, query.dtype), _cast(s, state_dtype)]
