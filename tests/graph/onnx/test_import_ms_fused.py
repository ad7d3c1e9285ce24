"""import_onnx of the fused com.microsoft ops onnxruntime's optimizers write (models saved with
SessionOptions.optimized_model_filepath, or by onnxruntime.transformers.optimizer, as Hugging
Face Optimum's optimized exports are): each op against onnxruntime's own kernel, then whole
models that onnxruntime optimized and saved."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_rill

from rill.graph.onnx.import_util import OnnxImportError

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(11)
MS = "com.microsoft"


def vi(name, shape=None, elem=TP.FLOAT):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=()):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", 17), oh.make_opsetid(MS, 1)]
    return oh.make_model(g, opset_imports=ops, ir_version=8)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def check(m, feeds, rtol=1e-5, atol=1e-6):
    got, want = run_rill(m, feeds), run_ort(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", ["Gelu", "BiasGelu", "FastGelu", "FastGelu+bias", "QuickGelu"])
def test_gelu_family(case):
    x, b = f32(2, 3, 8, scale=2), f32(8)
    inputs, feeds = [vi("x", [2, 3, 8])], {"x": x}
    if case == "Gelu":
        node = oh.make_node("Gelu", ["x"], ["y"], domain=MS)
    elif case == "BiasGelu":
        node = oh.make_node("BiasGelu", ["x", "b"], ["y"], domain=MS)
    elif case == "FastGelu":
        node = oh.make_node("FastGelu", ["x"], ["y"], domain=MS)
    elif case == "FastGelu+bias":
        node = oh.make_node("FastGelu", ["x", "b"], ["y"], domain=MS)
    else:
        node = oh.make_node("QuickGelu", ["x"], ["y"], domain=MS, alpha=1.5)
    if "b" in node.input:
        inputs.append(vi("b", [8]))
        feeds["b"] = b
    check(model([node], inputs, [vi("y")]), feeds)


@pytest.mark.parametrize("simplified", [False, True])
def test_skip_layer_normalization(simplified):
    x, skip, gamma, beta, bias = f32(2, 4, 16), f32(2, 4, 16), f32(16), f32(16), f32(16)
    inits = [nh.from_array(gamma, "gamma"), nh.from_array(bias, "bias")]
    if simplified:
        node = oh.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"],
                            ["y", "", "", "sum"], domain=MS, epsilon=1e-6)  # fmt: skip
    else:
        inits.append(nh.from_array(beta, "beta"))
        node = oh.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                            ["y", "", "", "sum"], domain=MS, epsilon=1e-5)  # fmt: skip
    m = model([node], [vi("x", [2, 4, 16]), vi("skip", [2, 4, 16])], [vi("y"), vi("sum")], inits)
    check(m, {"x": x, "skip": skip}, rtol=1e-4, atol=1e-5)


def test_simplified_layer_normalization_and_its_inverse_rms():
    x, scale = f32(3, 5, 12), f32(12)
    node = oh.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y", "inv"], axis=-1,
                        epsilon=1e-6)  # fmt: skip
    m = model([node], [vi("x", [3, 5, 12])], [vi("y"), vi("inv")], [nh.from_array(scale, "scale")])
    check(m, {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["2d_transB", "3d_transA", "3d_times_2d"])
def test_fused_matmul(case):
    if case == "2d_transB":
        a, b, attrs = f32(4, 6), f32(5, 6), {"transB": 1, "alpha": 0.125}
    elif case == "3d_transA":
        a, b, attrs = f32(2, 6, 4), f32(2, 6, 3), {"transA": 1, "alpha": 2.0}
    else:
        a, b, attrs = f32(2, 3, 6), f32(6, 5), {"alpha": 0.5}
    node = oh.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)
    m = model([node], [vi("a", list(a.shape)), vi("b", list(b.shape))], [vi("y")])
    check(m, {"a": a, "b": b})


def test_fused_matmul_batch_transposes_are_refused_naming_the_node():
    node = oh.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transBatchA=1, name="fmm")
    m = model([node], [vi("a", [2, 3, 4]), vi("b", [2, 4, 5])], [vi("y")])
    with pytest.raises(OnnxImportError, match=r"fmm.*transBatchA"):
        run_rill(m, {"a": f32(2, 3, 4), "b": f32(2, 4, 5)})


@pytest.mark.parametrize(
    "act", [("Sigmoid", {}), ("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2})]
)
def test_fused_gemm(act):
    name, extra = act
    a, b, c = f32(4, 6), f32(5, 6), f32(5)
    attrs = {"transB": 1, "alpha": 0.5, "beta": 2.0, **extra}
    if name:
        attrs["activation"] = name
    node = oh.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=MS, **attrs)
    m = model([node], [vi("a", [4, 6])], [vi("y")], [nh.from_array(b, "b"), nh.from_array(c, "c")])
    check(m, {"a": a})


@pytest.mark.parametrize("act", ["", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip",
                                 "HardSigmoid", "Relu6"])  # fmt: skip
def test_fused_conv(act):
    x, w, b, z = f32(1, 3, 9, 9), f32(4, 3, 3, 3, scale=0.3), f32(4), f32(1, 4, 5, 5)
    params = {"LeakyRelu": [0.1], "Clip": [-0.5, 0.75], "HardSigmoid": [0.3, 0.4],
              "Relu6": [0.0, 6.0]}.get(act)  # fmt: skip
    if act == "Relu6":  # Clip to [0, 6], as onnxruntime fuses MobileNet's ReLU6
        act = "Clip"
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2], "kernel_shape": [3, 3]}
    if act:
        attrs["activation"] = act
    if params:
        attrs["activation_params"] = params
    node = oh.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], domain=MS, **attrs)
    m = model([node], [vi("x", [1, 3, 9, 9]), vi("z", [1, 4, 5, 5])], [vi("y")],
              [nh.from_array(w, "w"), nh.from_array(b, "b")])  # fmt: skip
    check(m, {"x": x, "z": z})
    if params == [0.0, 6.0]:
        from rill.graph.onnx import import_onnx

        g, _, _ = import_onnx(m)
        assert "Relu6" in {o.type for o in g.get_operations()}


def _block():
    """A small CNN + transformer block: Conv/BatchNorm/Relu, a Gemm head, MatMul · scale, an
    Add + LayerNormalization residual, erf-Gelu: what onnxruntime's extended optimizations fuse."""
    c1 = nh.from_array(f32(8, 3, 3, 3, scale=0.3), "c1")
    bn = [nh.from_array(v, k) for k, v in (("s", f32(8) + 1), ("o", f32(8)),
                                          ("mu", f32(8)), ("var", np.abs(f32(8)) + 0.5))]  # fmt: skip
    wq = nh.from_array(f32(16, 16, scale=0.3), "wq")
    gamma, beta = nh.from_array(f32(16) + 1, "gamma"), nh.from_array(f32(16), "beta")
    scale = nh.from_array(np.array(0.25, np.float32), "scale")
    half, one, rt2 = (nh.from_array(np.array(v, np.float32), k)
                      for k, v in (("half", 0.5), ("one", 1.0), ("rt2", 2**0.5)))  # fmt: skip
    nodes = [
        oh.make_node("Conv", ["img", "c1"], ["c"], pads=[1, 1, 1, 1]),
        oh.make_node("BatchNormalization", ["c", "s", "o", "mu", "var"], ["bn"]),
        oh.make_node("Relu", ["bn"], ["r"]),
        oh.make_node("MatMul", ["seq", "wq"], ["q"]),
        oh.make_node("MatMul", ["q", "seq_t"], ["att"]),
        oh.make_node("Mul", ["att", "scale"], ["att_s"]),
        oh.make_node("Transpose", ["seq"], ["seq_t"], perm=[0, 2, 1]),
        oh.make_node("Softmax", ["att_s"], ["p"], axis=-1),
        oh.make_node("MatMul", ["p", "seq"], ["ctx"]),
        oh.make_node("Add", ["ctx", "seq"], ["res"]),
        oh.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1),
        oh.make_node("Div", ["ln", "rt2"], ["d"]),
        oh.make_node("Erf", ["d"], ["e"]),
        oh.make_node("Add", ["e", "one"], ["e1"]),
        oh.make_node("Mul", ["ln", "e1"], ["g0"]),
        oh.make_node("Mul", ["g0", "half"], ["gelu"]),
    ]
    inits = [c1, *bn, wq, gamma, beta, scale, half, one, rt2]
    return model(nodes, [vi("img", [1, 3, 8, 8]), vi("seq", [2, 5, 16])],
                 [vi("r"), vi("gelu")], inits)  # fmt: skip


def _saved_by_ort(m, level, tmp_path):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    path = tmp_path / "optimized.onnx"
    so.optimized_model_filepath = str(path)
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    import onnx

    return onnx.load(str(path))


def test_a_model_onnxruntime_optimized_and_saved_imports_and_matches(tmp_path):
    m = _block()
    saved = _saved_by_ort(m, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, tmp_path)
    fused = {n.op_type for n in saved.graph.node if n.domain == MS}
    assert {"FusedConv", "FusedMatMul", "Gelu"} <= fused, fused  # what the test is about
    feeds = {"img": f32(1, 3, 8, 8), "seq": f32(2, 5, 16)}
    got, want = run_rill(saved, feeds), run_rill(m, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_a_model_saved_at_level_all_is_refused_with_the_remedy(tmp_path):
    saved = _saved_by_ort(_block(), ort.GraphOptimizationLevel.ORT_ENABLE_ALL, tmp_path)
    if not any(n.domain == "com.microsoft.nchwc" for n in saved.graph.node):
        pytest.skip("onnxruntime wrote no blocked-layout ops on this machine")
    with pytest.raises(OnnxImportError, match=r"com.microsoft.nchwc::.*ORT_ENABLE_EXTENDED"):
        run_rill(saved, {"img": f32(1, 3, 8, 8), "seq": f32(2, 5, 16)})


def test_onnx_reference_still_loads_after_rill_registers_the_contrib_schemas():
    """onnx.reference refuses to load when two domains declare an op of one name; rill's
    com.microsoft::Gelu rule therefore has no schema (ai.onnx has a Gelu)."""
    import subprocess
    import sys

    code = ("import rill.graph.onnx.importer, onnx.reference, onnx.defs; "
            "assert not onnx.defs.has('Gelu', 'com.microsoft'); "
            "assert not onnx.defs.has('Attention', 'com.microsoft'); print('ok')")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _attention_model(mask=None, past=False, unidirectional=0, qkv=None, bias_input=False):
    b, s, d, heads = 2, 5, 8, 2
    sizes = qkv or [d, d, d]
    w = nh.from_array(f32(d, sum(sizes), scale=0.4), "w")
    bias = nh.from_array(f32(sum(sizes), scale=0.1), "bias")
    inputs, names = [vi("x", [b, s, d])], ["x", "w", "bias"]
    names.append("mask" if mask is not None else "")
    if mask is not None:
        inputs.append(vi("mask", list(mask.shape), TP.INT32))
    outputs = [vi("y")]
    if past:
        hd = sizes[0] // heads
        names.append("past")
        inputs.append(vi("past", [2, b, heads, 3, hd]))
        outputs.append(vi("present"))
    if bias_input:
        names += [""] * (5 - len(names)) + ["ab"]
        inputs.append(vi("ab", [1, heads, s, s]))
    attrs = {"num_heads": heads, "unidirectional": unidirectional}
    if qkv:
        attrs["qkv_hidden_sizes"] = qkv
    node = oh.make_node("Attention", names, [o.name for o in outputs], domain=MS, **attrs)
    return model([node], inputs, outputs, [w, bias])


@pytest.mark.parametrize("case", ["raw_mask", "lengths", "no_mask", "past_causal", "qkv_sizes",
                                  "attention_bias"])  # fmt: skip
def test_attention(case):
    x = f32(2, 5, 8)
    feeds = {"x": x}
    if case == "raw_mask":
        mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
        m = _attention_model(mask=mask)
        feeds["mask"] = mask
    elif case == "lengths":
        mask = np.array([5, 3], np.int32)
        m = _attention_model(mask=mask)
        feeds["mask"] = mask
    elif case == "no_mask":
        m = _attention_model()
    elif case == "past_causal":
        m = _attention_model(past=True, unidirectional=1)
        feeds["past"] = f32(2, 2, 2, 3, 4)
    elif case == "qkv_sizes":
        m = _attention_model(qkv=[8, 8, 4])
    else:
        m = _attention_model(bias_input=True)
        feeds["ab"] = f32(1, 2, 5, 5)
    check(m, feeds, rtol=1e-4, atol=1e-5)


def test_embed_layer_normalization():
    ids, seg = RNG.integers(0, 20, (2, 6)).astype(np.int32), RNG.integers(0, 2, (2, 6))
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], np.int32)
    inits = [nh.from_array(v, k) for k, v in (("word", f32(20, 8)), ("pos", f32(10, 8)),
                                              ("segw", f32(2, 8)), ("gamma", f32(8) + 1),
                                              ("beta", f32(8)))]  # fmt: skip
    node = oh.make_node("EmbedLayerNormalization", ["ids", "seg", "word", "pos", "segw", "gamma",
                                                    "beta", "mask"],
                        ["y", "mask_index", "emb"], domain=MS, epsilon=1e-5)  # fmt: skip
    m = model([node], [vi("ids", [2, 6], TP.INT32), vi("seg", [2, 6], TP.INT32),
                       vi("mask", [2, 6], TP.INT32)], [vi("y"), vi("mask_index", None, TP.INT32),
                                                      vi("emb")], inits)  # fmt: skip
    check(m, {"ids": ids, "seg": seg.astype(np.int32), "mask": mask}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["cross", "bias", "mask_2d", "attention_bias", "past_causal"])
def test_multi_head_attention(case):
    b, s, t, d, heads = 2, 4, 6, 8, 2
    kv_len = s if case == "past_causal" else t
    q, k, v = f32(b, s, d), f32(b, kv_len, d), f32(b, kv_len, d)
    names, inputs, feeds = ["q", "k", "v"], [vi("q", [b, s, d]), vi("k", [b, kv_len, d]),
                                               vi("v", [b, kv_len, d])], {"q": q, "k": k, "v": v}  # fmt: skip
    inits, outputs, attrs = [], [vi("y")], {"num_heads": heads}
    if case == "bias":
        inits.append(nh.from_array(f32(3 * d, scale=0.1), "bias"))
        names.append("bias")
    if case == "mask_2d":
        names += ["", "mask"]
        inputs.append(vi("mask", [b, t], TP.INT32))
        feeds["mask"] = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], np.int32)
    if case == "attention_bias":
        names += ["", "", "ab"]
        inputs.append(vi("ab", [1, heads, s, t]))
        feeds["ab"] = f32(1, heads, s, t)
    if case == "past_causal":
        names += ["", "", "", "pk", "pv"]
        inputs += [vi("pk", [b, heads, 3, d // heads]), vi("pv", [b, heads, 3, d // heads])]
        feeds["pk"], feeds["pv"] = f32(b, heads, 3, d // heads), f32(b, heads, 3, d // heads)
        outputs += [vi("present_k"), vi("present_v")]
        attrs["unidirectional"] = 1
    node = oh.make_node("MultiHeadAttention", names, [o.name for o in outputs], domain=MS, **attrs)
    check(model([node], inputs, outputs, inits), feeds, rtol=1e-4, atol=1e-5)


def test_multi_head_attention_with_packed_qkv_is_refused_naming_the_node():
    node = oh.make_node("MultiHeadAttention", ["qkv"], ["y"], domain=MS, num_heads=2, name="mha")
    m = model([node], [vi("qkv", [2, 4, 2, 3, 4])], [vi("y")])
    with pytest.raises(OnnxImportError, match=r"mha.*packed QKV"):
        run_rill(m, {"qkv": f32(2, 4, 2, 3, 4)})


def test_attention_whose_hidden_sizes_do_not_split_the_weights_is_refused_naming_the_node():
    w = nh.from_array(f32(8, 24), "w")
    node = oh.make_node("Attention", ["x", "w"], ["y"], domain=MS, num_heads=2,
                        qkv_hidden_sizes=[8, 8, 4], name="att")  # fmt: skip
    m = model([node], [vi("x", [2, 5, 8])], [vi("y")], [w])
    with pytest.raises(OnnxImportError, match=r"att.*qkv_hidden_sizes \[8, 8, 4\] do not split"):
        run_rill(m, {"x": f32(2, 5, 8)})
