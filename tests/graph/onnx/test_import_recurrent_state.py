"""import_onnx of CausalConvWithState and LinearAttention, beyond onnx's node cases: other shapes,
with and without the optional inputs, run-time shapes, empty sequences, float64, prefill then
decode against one pass. float32 is checked against onnx's ReferenceEvaluator; float64 against
numpy recurrences written from the spec (the reference computes float64 inputs at float32
precision). Bad input is refused naming the node."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator
from onnx_run import run_rill

from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(27)
ELEM = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.float16: TP.FLOAT16, np.int32: TP.INT32}


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def one_node_model(node, feeds: dict, known_shapes: bool = True, state: str = ""):
    """A model of `node` whose graph inputs are the feeds (shapes unknown unless known_shapes);
    its outputs have the first feed's type, the state output (the second) `state`'s if fed."""
    elem = ELEM[next(iter(feeds.values())).dtype.type]
    ins = [vi(k, ELEM[v.dtype.type], list(v.shape) if known_shapes else [None] * v.ndim)
           for k, v in feeds.items()]  # fmt: skip
    outs = [vi(node.output[0], elem),
            vi(node.output[1], ELEM[feeds[state].dtype.type] if state in feeds else elem)]  # fmt: skip
    g = oh.make_graph([node], "t", ins, outs)
    ops = [oh.make_opsetid("", 27)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def node_inputs(names: list[str], feeds: dict) -> list[str]:
    """The node's input list: each name if it is fed, else "" (trailing blanks dropped)."""
    ins = [n if n in feeds else "" for n in names]
    while ins and not ins[-1]:
        ins.pop()
    return ins


# -- CausalConvWithState ---------------------------------------------------------------------------


def conv_feeds(b, c, length, k, dtype=np.float32, bias=False, past=False):
    feeds = {"x": RNG.standard_normal((b, c, length)).astype(dtype),
             "w": RNG.standard_normal((c, 1, k)).astype(dtype)}  # fmt: skip
    if bias:
        feeds["bias"] = RNG.standard_normal(c).astype(dtype)
    if past:
        feeds["past"] = RNG.standard_normal((b, c, k - 1)).astype(dtype)
    return feeds


def conv_model(feeds, known_shapes=True, **attrs):
    ins = node_inputs(["x", "w", "bias", "past"], feeds)
    node = oh.make_node("CausalConvWithState", ins, ["y", "state"], name="conv", **attrs)
    return one_node_model(node, feeds, known_shapes, "past")


def numpy_causal_conv(x, w, bias=None, past=None, activation="none"):
    """The spec's definition: output step t sees padded steps t .. t + k − 1."""
    b, c, length = x.shape
    k = w.shape[2]
    if past is None:
        past = np.zeros((b, c, k - 1), x.dtype)
    p = np.concatenate([past, x], axis=2)
    y = np.zeros_like(x)
    for j in range(k):
        y += w[None, :, 0, j, None] * p[:, :, j : j + length]
    if bias is not None:
        y += bias[None, :, None]
    if activation in ("silu", "swish"):
        y = y / (1 + np.exp(-y))
    return y, p[:, :, length:]


@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("b,c,length,k", [(1, 3, 9, 3), (3, 5, 4, 2), (2, 2, 3, 6), (2, 4, 1, 4)])
def test_causal_conv_matches_reference(b, c, length, k, past, bias, activation):
    feeds = conv_feeds(b, c, length, k, bias=bias, past=past)
    m = conv_model(feeds, activation=activation)
    want = ReferenceEvaluator(m).run(None, feeds)
    got = run_rill(m, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("known_shapes", [True, False])
@pytest.mark.parametrize("bias,past", [(False, False), (True, True)])
def test_causal_conv_float64(known_shapes, bias, past):
    feeds = conv_feeds(2, 3, 7, 4, np.float64, bias=bias, past=past)
    got = run_rill(conv_model(feeds, known_shapes, activation="silu"), feeds)
    want = numpy_causal_conv(feeds["x"], feeds["w"], feeds.get("bias"), feeds.get("past"), "silu")
    for g, w in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("known_shapes", [True, False])
@pytest.mark.parametrize("past", [False, True])
def test_causal_conv_empty_input_hands_back_the_state(known_shapes, past):
    feeds = conv_feeds(2, 3, 0, 4, past=past)
    y, state = run_rill(conv_model(feeds, known_shapes), feeds)
    assert y.shape == (2, 3, 0)
    np.testing.assert_array_equal(state, feeds["past"] if past else np.zeros((2, 3, 3)))


def test_causal_conv_kernel_one_has_an_empty_state():
    feeds = conv_feeds(2, 3, 5, 1, bias=True, past=True)
    y, state = run_rill(conv_model(feeds), feeds)
    assert state.shape == (2, 3, 0)
    np.testing.assert_allclose(y, feeds["x"] * feeds["w"][None, :, 0] + feeds["bias"][:, None],
                               rtol=1e-6)  # fmt: skip


def test_causal_conv_prefill_then_decode_equals_one_pass():
    whole = conv_feeds(2, 3, 8, 4, bias=True)
    y_all, s_all = run_rill(conv_model(whole), whole)
    first = {**whole, "x": whole["x"][:, :, :5]}
    y1, s1 = run_rill(conv_model(first), first)
    ys = [y1]
    for t in range(5, 8):
        step = {**whole, "x": whole["x"][:, :, t : t + 1], "past": s1}
        y_t, s1 = run_rill(conv_model(step), step)
        ys.append(y_t)
    np.testing.assert_allclose(np.concatenate(ys, axis=2), y_all, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(s1, s_all)


def test_causal_conv_float16_keeps_its_dtype():
    feeds = conv_feeds(1, 2, 6, 3, np.float16, past=True)
    y, state = run_rill(conv_model(feeds), feeds)
    assert y.dtype == state.dtype == np.float16
    want = numpy_causal_conv(*(feeds[k].astype(np.float64) for k in ("x", "w")),
                             past=feeds["past"].astype(np.float64))  # fmt: skip
    np.testing.assert_allclose(y, want[0], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "feeds,attrs,message",
    [
        (conv_feeds(1, 2, 4, 3), {"activation": "SiLU"}, "activation 'SiLU' is not"),
        (conv_feeds(1, 2, 4, 3), {"activation": "relu"}, "activation 'relu' is not"),
        ({**conv_feeds(1, 2, 4, 3), "w": np.ones((3, 1, 3), np.float32)}, {},
         r"weight should have shape \[2, 1, \?\]"),
        ({**conv_feeds(1, 2, 4, 3), "w": np.ones((2, 2, 3), np.float32)}, {},
         r"weight should have shape \[2, 1, \?\]"),
        ({**conv_feeds(1, 2, 4, 3), "w": np.ones((2, 3), np.float32)}, {}, "weight .* 3-D"),
        ({"x": np.ones((2, 4), np.float32), "w": np.ones((2, 1, 3), np.float32)}, {},
         "input .* should be 3-D"),
        (conv_feeds(1, 2, 4, 3, past=True) | {"past": np.ones((1, 2, 3), np.float32)}, {},
         r"past_state should have shape \[1, 2, 2\]"),
        (conv_feeds(1, 2, 4, 3) | {"bias": np.ones(3, np.float32)}, {},
         r"bias should have shape \[2\]"),
        (conv_feeds(1, 2, 4, 3) | {"bias": np.ones(2, np.float64)}, {}, "bias is float64"),
        (conv_feeds(1, 2, 4, 3) | {"w": np.ones((2, 1, 0), np.float32)}, {}, "kernel size 0"),
    ],
)  # fmt: skip
def test_causal_conv_refuses_bad_input_naming_the_node(feeds, attrs, message):
    where = r"node 'conv' \(CausalConvWithState, opset 27\)"
    with pytest.raises(OnnxImportError, match=where) as e:
        import_onnx(conv_model(feeds, **attrs))
    assert re.search(message, str(e.value)), str(e.value)


# -- LinearAttention -------------------------------------------------------------------------------


def attention_feeds(b, t, hq, hkv, dk, dv, rule, dtype=np.float32, decay=0, beta=0, past=False):
    """decay / beta: the width of those inputs (0: none)."""
    feeds = {
        "q": RNG.standard_normal((b, t, hq * dk)),
        "k": RNG.standard_normal((b, t, hkv * dk)) / np.sqrt(dk),
        "v": RNG.standard_normal((b, t, hkv * dv)),
    }
    if past:
        feeds["past"] = RNG.standard_normal((b, hkv, dk, dv))
    if decay:
        feeds["decay"] = -RNG.random((b, t, decay))
    if beta:
        feeds["beta"] = RNG.random((b, t, beta))
    return {k: v.astype(dtype) for k, v in feeds.items()}


def attention_model(feeds, hq, hkv, rule, known_shapes=True, **attrs):
    ins = node_inputs(["q", "k", "v", "past", "decay", "beta"], feeds)
    node = oh.make_node("LinearAttention", ins, ["y", "state"], name="attn", q_num_heads=hq,
                        kv_num_heads=hkv, update_rule=rule, **attrs)  # fmt: skip
    return one_node_model(node, feeds, known_shapes, "past")


def numpy_linear_attention(feeds, hq, hkv, rule, scale=0.0):
    """The spec's recurrences, one step at a time, in float64."""
    f = {k: v.astype(np.float64) for k, v in feeds.items()}
    b, t, _ = f["q"].shape
    dk = f["q"].shape[2] // hq
    dv = f["v"].shape[2] // hkv
    q = f["q"].reshape(b, t, hq, dk)
    k = f["k"].reshape(b, t, hkv, dk)
    v = f["v"].reshape(b, t, hkv, dv)
    s = f["past"].copy() if "past" in f else np.zeros((b, hkv, dk, dv))
    g = f["decay"].reshape(b, t, hkv, -1) if "decay" in f else None
    beta = f["beta"].reshape(b, t, -1) if "beta" in f else None
    scale = scale or 1 / np.sqrt(dk)
    y = np.zeros((b, t, hq, dv))
    for i in range(b):
        for h in range(hkv):
            for step in range(t):
                st = s[i, h]
                if rule in ("gated", "gated_delta"):
                    st = np.exp(g[i, step, h])[:, None] * st
                kt, vt = k[i, step, h], v[i, step, h]
                if rule in ("delta", "gated_delta"):
                    bt = beta[i, step, h if beta.shape[2] > 1 else 0]
                    st = st + bt * np.outer(kt, vt - st.T @ kt)
                else:
                    st = st + np.outer(kt, vt)
                s[i, h] = st
                for hh in range(h * (hq // hkv), (h + 1) * (hq // hkv)):
                    y[i, step, hh] = scale * q[i, step, hh] @ st
    return y.reshape(b, t, hq * dv), s


CASES = [
    # (b, t, hq, hkv, dk, dv, rule, decay width, beta width)
    (2, 5, 2, 2, 4, 3, "linear", 0, 0),
    (1, 3, 3, 1, 2, 5, "gated", 2, 0),  # per key dimension, multi-query
    (2, 4, 4, 2, 3, 3, "gated", 2, 0),  # per head, grouped
    (2, 6, 2, 2, 4, 2, "delta", 0, 2),
    (1, 4, 6, 3, 2, 4, "delta", 0, 1),
    (2, 5, 4, 2, 3, 2, "gated_delta", 6, 2),
    (1, 7, 2, 1, 5, 3, "gated_delta", 1, 1),
]


@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("b,t,hq,hkv,dk,dv,rule,dw,bw", CASES)
def test_linear_attention_matches_reference(b, t, hq, hkv, dk, dv, rule, dw, bw, past):
    feeds = attention_feeds(b, t, hq, hkv, dk, dv, rule, decay=dw, beta=bw, past=past)
    m = attention_model(feeds, hq, hkv, rule)
    want = ReferenceEvaluator(m).run(None, feeds)
    got = run_rill(m, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("known_shapes", [True, False])
@pytest.mark.parametrize("b,t,hq,hkv,dk,dv,rule,dw,bw", CASES)
def test_linear_attention_float64(b, t, hq, hkv, dk, dv, rule, dw, bw, known_shapes):
    feeds = attention_feeds(b, t, hq, hkv, dk, dv, rule, np.float64, dw, bw, past=True)
    got = run_rill(attention_model(feeds, hq, hkv, rule, known_shapes, scale=0.625), feeds)
    want = numpy_linear_attention(feeds, hq, hkv, rule, scale=0.625)
    for g, w in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_linear_attention_default_scale_with_runtime_shapes():
    feeds = attention_feeds(2, 3, 4, 2, 9, 2, "gated_delta", decay=2, beta=2)
    got = run_rill(attention_model(feeds, 4, 2, "gated_delta", known_shapes=False), feeds)
    want = numpy_linear_attention(feeds, 4, 2, "gated_delta")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("known_shapes", [True, False])
def test_linear_attention_empty_sequence_hands_back_the_state(known_shapes):
    feeds = attention_feeds(2, 0, 2, 2, 3, 4, "delta", beta=2, past=True)
    y, state = run_rill(attention_model(feeds, 2, 2, "delta", known_shapes), feeds)
    assert y.shape == (2, 0, 8)
    np.testing.assert_array_equal(state, feeds["past"])


def test_linear_attention_prefill_then_decode_equals_one_pass():
    whole = attention_feeds(2, 6, 4, 2, 3, 2, "gated_delta", decay=6, beta=2)
    y_all, s_all = run_rill(attention_model(whole, 4, 2, "gated_delta"), whole)
    ys, state = [], None
    for begin, end in ((0, 4), (4, 5), (5, 6)):
        part = {k: v[:, begin:end] for k, v in whole.items()}
        if state is not None:
            part["past"] = state
        y, state = run_rill(attention_model(part, 4, 2, "gated_delta"), part)
        ys.append(y)
    np.testing.assert_allclose(np.concatenate(ys, axis=1), y_all, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, s_all, rtol=1e-5, atol=1e-6)


def test_linear_attention_float16_computes_in_float32_and_keeps_its_dtype():
    feeds = attention_feeds(1, 4, 2, 2, 4, 4, "gated_delta", np.float16, decay=2, beta=2)
    m = attention_model(feeds, 2, 2, "gated_delta")
    y, state = run_rill(m, feeds)
    assert y.dtype == state.dtype == np.float16
    want = numpy_linear_attention(feeds, 2, 2, "gated_delta")
    np.testing.assert_allclose(y, want[0], rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(state, want[1], rtol=2e-3, atol=2e-3)


def test_linear_attention_float32_state_beside_float16_inputs():
    feeds = attention_feeds(1, 3, 2, 2, 2, 2, "linear", np.float16)
    feeds["past"] = RNG.standard_normal((1, 2, 2, 2)).astype(np.float32)
    _, state = run_rill(attention_model(feeds, 2, 2, "linear"), feeds)
    assert state.dtype == np.float32
    np.testing.assert_allclose(state, numpy_linear_attention(feeds, 2, 2, "linear")[1],
                               rtol=1e-3, atol=1e-3)  # fmt: skip


def bad(rule="gated_delta", hq=2, hkv=2, **over):
    feeds = attention_feeds(1, 3, 2, 2, 4, 4, rule, decay=8, beta=2)
    feeds.update(over)
    return feeds, hq, hkv, rule


@pytest.mark.parametrize(
    "case,attrs,message",
    [
        (bad(rule="softmax"), {}, "update_rule 'softmax' is not one of"),
        (bad(hq=3), {}, r"q_num_heads \(3\) should be a positive multiple of kv_num_heads \(2\)"),
        (bad(hkv=0), {}, "should be a positive multiple"),
        (bad(rule="gated"), {}, "'gated' takes no beta input"),
        (bad(rule="linear"), {}, "'linear' takes no decay input"),
        (({k: v for k, v in bad()[0].items() if k != "decay"}, 2, 2, "gated_delta"), {},
         "'gated_delta' needs the decay input"),
        (({k: v for k, v in bad()[0].items() if k != "beta"}, 2, 2, "delta"), {},
         "'delta' needs the beta input"),
        (bad(decay=np.ones((1, 3, 5), np.float32)), {},
         r"decay last dimension should be 2 \(per head\) or 8 \(per key dimension\), got 5"),
        (bad(beta=np.ones((1, 3, 3), np.float32)), {}, "beta last dimension should be 2"),
        (bad(k=np.ones((1, 3, 6), np.float32)), {}, r"query heads have size 4 and its key heads "
         "size 3"),
        (bad(v=np.ones((1, 3, 5), np.float32)), {}, "value width 5 is not a multiple of its 2"),
        (bad(k=np.ones((1, 4, 8), np.float32)), {}, r"key \(beside the query\) should have shape"),
        (bad(q=np.ones((3, 8), np.float32)), {}, "query .* should be 3-D"),
        (bad(past=np.ones((1, 2, 4, 3), np.float32)), {},
         r"past_state should have shape \[1, 2, 4, 4\]"),
        (bad(v=np.ones((1, 3, 8), np.float64)), {}, "value is float64, its query float32"),
        (bad(q=np.ones((1, 3, 8), np.int32), k=np.ones((1, 3, 8), np.int32),
             v=np.ones((1, 3, 8), np.int32)), {}, "floating-point"),
    ],
)  # fmt: skip
def test_linear_attention_refuses_bad_input_naming_the_node(case, attrs, message):
    feeds, hq, hkv, rule = case
    with pytest.raises(OnnxImportError, match=r"node 'attn' \(LinearAttention, opset 27\)") as e:
        import_onnx(attention_model(feeds, hq, hkv, rule, **attrs))
    assert re.search(message, str(e.value)), str(e.value)
