"""The converter's float path: rill graphs → .tflite, run by LiteRT (and rill's interpreter when it
is there) against rill's own Session; the schema facts of the written file, read back with the
`tflite` package's generated readers; freezing; errors that name the op and the user's line."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import tflite
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType

import rill.graph as rg
from rill.exec import Session
from rill.exec.checkpoint_format import write_checkpoint
from rill.mobile.convert import ConverterError, TFLiteConverter, convert

RNG = np.random.default_rng(7)


def _rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def rill_interpreter():
    """rill.mobile.Interpreter, or None while it does not exist yet."""
    try:
        return importlib.import_module("rill.mobile").Interpreter
    except (ImportError, AttributeError):
        return None


def run_model(model: bytes, feeds, runtime="litert", ref=False):
    """Runs `model` on `feeds` (one array per input, in input order); the outputs."""
    if runtime == "litert":
        kind = OpResolverType.BUILTIN_REF if ref else OpResolverType.AUTO
        it = LiteRT(model_content=model, experimental_op_resolver_type=kind)
    else:
        cls = rill_interpreter()
        if cls is None:
            pytest.skip("rill.mobile.Interpreter is not there yet")
        it = cls(model_content=model)
    details = it.get_input_details()
    for d, v in zip(details, feeds):
        it.resize_tensor_input(d["index"], list(np.shape(v)))
    it.allocate_tensors()
    for d, v in zip(details, feeds):
        it.set_tensor(d["index"], np.asarray(v, dtype=d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def assert_close_relative(got, want, rtol=1e-5):
    """Within `rtol` of the reference's magnitude (elementwise relative fails near zero)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= rtol * scale, f"max |err| {err:.3g} > {rtol} × {scale:.3g}"


# -- reading a written model back with the tflite package ---------------------------------------


def read_model(buf: bytes) -> dict:
    """A plain summary of a .tflite file through `tflite`'s generated reader classes."""
    m = tflite.Model.GetRootAs(buf, 0)
    sg = m.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    codes = []
    for i in range(m.OperatorCodesLength()):
        c = m.OperatorCodes(i)
        codes.append((max(c.BuiltinCode(), c.DeprecatedBuiltinCode()), c.Version(), c))
    tensors = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        q = t.Quantization()
        quant = None
        if q is not None and q.ScaleLength():
            quant = (q.ScaleAsNumpy().copy(), q.ZeroPointAsNumpy().copy(), q.QuantizedDimension())
        buf_ = m.Buffers(t.Buffer())
        data = buf_.DataAsNumpy() if buf_.DataLength() else None
        tensors.append(
            {
                "name": t.Name().decode(),
                "shape": list(t.ShapeAsNumpy()) if t.ShapeLength() else [],
                "signature": list(t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else None,
                "type": types[t.Type()],
                "buffer": t.Buffer(),
                "quant": quant,
                "data": None if data is None else bytes(data),
            }
        )
    ops = []
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        code, version, _ = codes[o.OpcodeIndex()]
        options = {}
        table = o.BuiltinOptions()
        if table is not None:
            tag = o.BuiltinOptionsType()
            opt_name = {v: k for k, v in vars(tflite.BuiltinOptions).items()}[tag]
            cls = getattr(importlib.import_module(f"tflite.{opt_name}"), opt_name)
            obj = cls()
            obj.Init(table.Bytes, table.Pos)
            options = obj
        ops.append(
            {
                "code": names[code],
                "version": version,
                "inputs": list(o.InputsAsNumpy()),
                "outputs": list(o.OutputsAsNumpy()),
                "options": options,
            }
        )
    sig = m.SignatureDefs(0)
    return {
        "model": m,
        "codes": codes,
        "tensors": tensors,
        "ops": ops,
        "inputs": list(sg.InputsAsNumpy()),
        "outputs": list(sg.OutputsAsNumpy()),
        "subgraph_name": sg.Name().decode(),
        "signature": (
            sig.SignatureKey().decode(),
            [(sig.Inputs(i).Name().decode(), sig.Inputs(i).TensorIndex())
             for i in range(sig.InputsLength())],
            [(sig.Outputs(i).Name().decode(), sig.Outputs(i).TensorIndex())
             for i in range(sig.OutputsLength())],
        ),
        "metadata": {
            m.Metadata(i).Name().decode(): bytes(m.Buffers(m.Metadata(i).Buffer()).DataAsNumpy())
            for i in range(m.MetadataLength())
        },
    }  # fmt: skip


def tensor_array(info: dict, index: int) -> np.ndarray:
    t = info["tensors"][index]
    dtype = {"FLOAT32": np.float32, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64}[
        t["type"]
    ]
    return np.frombuffer(t["data"], dtype=dtype).reshape(t["shape"])


# -- one graph per conversion rule --------------------------------------------------------------


def _conv_graph(kind):
    x = rg.placeholder(rg.float32, [None, 9, 9, 3], name="x")
    feeds = [_rand(2, 9, 9, 3)]
    if kind == "conv_same_biasadd_relu":
        y = rg.relu(rg.bias_add(rg.conv2d(x, _rand(3, 3, 3, 4), [1, 1, 1, 1], "SAME"), _rand(4)))
    elif kind == "conv_valid_stride2_add_relu6":
        y = rg.relu6(rg.conv2d(x, _rand(3, 3, 3, 5), [1, 2, 2, 1], "VALID") + _rand(5))
    elif kind == "conv_dilated_nobias":
        y = rg.conv2d(x, _rand(3, 3, 3, 4), [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
    elif kind == "conv_stride_hw":
        y = rg.conv2d(x, _rand(2, 3, 3, 2), [1, 2, 1, 1], "SAME")
    elif kind == "depthwise_mult2_biasadd_relu":
        f = _rand(3, 3, 3, 2)
        y = rg.relu(rg.bias_add(rg.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME"), _rand(6)))
    elif kind == "depthwise_stride2_valid":
        y = rg.depthwise_conv2d_native(x, _rand(3, 3, 3, 1), [1, 2, 2, 1], "VALID")
    elif kind == "max_pool":
        y = rg.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    elif kind == "avg_pool_same":
        y = rg.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    elif kind == "pad_transpose":
        y = rg.transpose(rg.pad(x, [[0, 0], [1, 2], [0, 1], [0, 0]]), [0, 3, 1, 2])
    elif kind == "mean_keepdims":
        y = rg.reduce_mean(x, axis=[1, 2], keepdims=True)
    elif kind == "mean":
        y = rg.reduce_mean(x, axis=[-1])
    elif kind == "strided_slice":
        y = x[:, 1:8:2, ::-1, 1]
    elif kind == "concat":
        y = rg.concat([rg.relu(x), x * 2.0, rg.sigmoid(x[:, :, :, :1])], axis=-1)
    else:
        raise AssertionError(kind)
    return [x], [y], feeds


def _vector_graph(kind):
    x = rg.placeholder(rg.float32, [None, 6], name="x")
    feeds = [_rand(3, 6)]
    if kind == "dense_biasadd_relu":
        y = rg.relu(rg.bias_add(rg.matmul(x, _rand(6, 4)), _rand(4)))
    elif kind == "dense_transpose_b_add":
        y = rg.matmul(x, _rand(5, 6), transpose_b=True) + _rand(5)
    elif kind == "dense_chain_softmax":
        h = rg.relu(rg.matmul(x, _rand(6, 8)) + _rand(8))
        y = rg.softmax(rg.matmul(h, _rand(8, 3)) + _rand(3))
    elif kind == "add_relu":
        y = rg.relu(x + _rand(6))
    elif kind == "sub_relu6":
        y = rg.relu6(x - _rand(1, 6))
    elif kind == "mul_scalar":
        y = x * 0.25
    elif kind == "activations":
        y = rg.concat(
            [rg.tanh(x), rg.sigmoid(x), rg.leaky_relu(x, 0.1), rg.relu(x), rg.relu6(x * 4.0)], 1
        )
    elif kind == "reshape_squeeze_expand":
        r = rg.reshape(x, [-1, 2, 3, 1])
        y = rg.expand_dims(rg.squeeze(r, axis=[3]), 1)
    elif kind == "identity_stop_gradient":
        y = rg.identity(rg.stop_gradient(rg.tanh(x)), name="out")
    elif kind == "gather_axis1":
        y = rg.gather(x, np.array([5, 0, 2], np.int32), axis=1)
    elif kind == "batch_matmul":
        y = rg.matmul(rg.reshape(x, [-1, 2, 3]), rg.reshape(x, [-1, 3, 2]))
    elif kind == "matmul_two_inputs":
        y = rg.matmul(x, x, transpose_b=True)
    else:
        raise AssertionError(kind)
    return [x], [y], feeds


def _multi_input_graph(kind):
    if kind == "add_two_inputs":
        a = rg.placeholder(rg.float32, [None, 4], name="a")
        b = rg.placeholder(rg.float32, [None, 4], name="b")
        return [a, b], [rg.relu(a + b), a * b], [_rand(2, 4), _rand(2, 4)]
    if kind == "gather_embedding":
        ids = rg.placeholder(rg.int32, [None, 3], name="ids")
        table = _rand(10, 4)
        return [ids], [rg.gather(table, ids)], [RNG.integers(0, 10, (2, 3)).astype(np.int32)]
    raise AssertionError(kind)


CONV_CASES = [
    "conv_same_biasadd_relu",
    "conv_valid_stride2_add_relu6",
    "conv_dilated_nobias",
    "conv_stride_hw",
    "depthwise_mult2_biasadd_relu",
    "depthwise_stride2_valid",
    "max_pool",
    "avg_pool_same",
    "pad_transpose",
    "mean_keepdims",
    "mean",
    "strided_slice",
    "concat",
]
VECTOR_CASES = [
    "dense_biasadd_relu",
    "dense_transpose_b_add",
    "dense_chain_softmax",
    "add_relu",
    "sub_relu6",
    "mul_scalar",
    "activations",
    "reshape_squeeze_expand",
    "identity_stop_gradient",
    "gather_axis1",
    "batch_matmul",
    "matmul_two_inputs",
]
MULTI_CASES = ["add_two_inputs", "gather_embedding"]


def build(kind):
    g = rg.Graph()
    with g.as_default():
        if kind in CONV_CASES:
            ins, outs, feeds = _conv_graph(kind)
        elif kind in VECTOR_CASES:
            ins, outs, feeds = _vector_graph(kind)
        else:
            ins, outs, feeds = _multi_input_graph(kind)
    return g, ins, outs, feeds


@pytest.mark.parametrize("runtime", ["litert", "rill"])
@pytest.mark.parametrize("kind", CONV_CASES + VECTOR_CASES + MULTI_CASES)
def test_float_model_matches_session(kind, runtime):
    g, ins, outs, feeds = build(kind)
    model = convert(g, ins, outs)
    want = Session(graph=g).run(outs, dict(zip(ins, feeds)))
    got = run_model(model, feeds, runtime)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_close_relative(a, b)


# -- what the converter writes ------------------------------------------------------------------


def test_schema_facts_of_a_written_model():
    g, ins, outs, _ = build("dense_chain_softmax")
    model = convert(g, ins, outs)
    assert model[4:8] == b"TFL3"
    info = read_model(model)
    assert info["model"].Version() == 3
    assert info["model"].Buffers(0).DataLength() == 0
    assert info["subgraph_name"] == "main"
    for code, _version, c in info["codes"]:
        assert c.BuiltinCode() == code
        assert c.DeprecatedBuiltinCode() == min(code, 127)
    key, sig_in, sig_out = info["signature"]
    assert key == "serving_default"
    assert sig_in == [("x", info["inputs"][0])]
    assert [i for _, i in sig_out] == info["outputs"]
    assert sig_out[0][0] == outs[0].op.name
    runtime = info["metadata"]["min_runtime_version"]
    assert runtime.rstrip(b"\0").decode().count(".") == 2
    # The input's batch is dynamic: 1 in the shape, -1 in the signature.
    x = info["tensors"][info["inputs"][0]]
    assert x["shape"] == [1, 6] and x["signature"] == [-1, 6]
    # Activations carry no data; every constant has its own buffer.
    const_buffers = [t["buffer"] for t in info["tensors"] if t["data"] is not None]
    assert len(const_buffers) == len(set(const_buffers)) and 0 not in const_buffers
    assert [o["code"] for o in info["ops"]] == ["FULLY_CONNECTED", "FULLY_CONNECTED", "SOFTMAX"]


def test_conv_bias_and_relu_fuse_and_filters_are_ohwi():
    g = rg.Graph()
    w = _rand(3, 2, 3, 4)
    b = _rand(4)
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6, 6, 3], name="x")
        y = rg.relu(rg.bias_add(rg.conv2d(x, w, [1, 2, 1, 1], "SAME"), b), name="y")
    info = read_model(convert(g, [x], [y]))
    (op,) = info["ops"]
    assert op["code"] == "CONV_2D"
    o = op["options"]
    assert (o.FusedActivationFunction(), o.Padding(), o.StrideH(), o.StrideW()) == (1, 0, 2, 1)
    np.testing.assert_array_equal(tensor_array(info, op["inputs"][1]), w.transpose(3, 0, 1, 2))
    np.testing.assert_array_equal(tensor_array(info, op["inputs"][2]), b)
    assert info["tensors"][op["outputs"][0]]["name"] == "y"


def test_depthwise_filter_layout_and_multiplier():
    g = rg.Graph()
    f = _rand(3, 3, 4, 2)
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 5, 5, 4], name="x")
        y = rg.relu6(rg.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "VALID") + _rand(8))
    info = read_model(convert(g, [x], [y]))
    (op,) = info["ops"]
    assert op["code"] == "DEPTHWISE_CONV_2D"
    assert op["options"].DepthMultiplier() == 2
    assert op["options"].FusedActivationFunction() == 3
    filt = tensor_array(info, op["inputs"][1])
    assert filt.shape == (1, 3, 3, 8)
    # Output channel c·M + m holds filter [.., c, m].
    np.testing.assert_array_equal(filt[0, :, :, 2 * 2 + 1], f[:, :, 2, 1])


def test_dense_weights_are_out_by_in():
    g = rg.Graph()
    w = _rand(6, 4)
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        y = rg.matmul(x, w)
    info = read_model(convert(g, [x], [y]))
    (op,) = info["ops"]
    assert op["code"] == "FULLY_CONNECTED" and op["options"].FusedActivationFunction() == 0
    np.testing.assert_array_equal(tensor_array(info, op["inputs"][1]), w.T)
    np.testing.assert_array_equal(tensor_array(info, op["inputs"][2]), np.zeros(4, np.float32))


def test_add_fuses_relu_but_not_when_the_sum_is_also_an_output():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        s = x + 1.0
        y = rg.relu(s)
    fused = read_model(convert(g, [x], [y]))["ops"]
    assert [o["code"] for o in fused] == ["ADD"]
    assert fused[0]["options"].FusedActivationFunction() == 1
    both = read_model(convert(g, [x], [s, y]))["ops"]
    assert [o["code"] for o in both] == ["ADD", "RELU"]


def test_identities_and_constant_subgraphs_fold_away():
    g = rg.Graph()
    w = _rand(4, 3)
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        folded = rg.identity(rg.constant(w) * 2.0 + 1.0)  # computed once, at conversion
        y = rg.identity(rg.stop_gradient(rg.matmul(rg.identity(x), folded)), name="logits")
    model = convert(g, [x], [y])
    info = read_model(model)
    assert [o["code"] for o in info["ops"]] == ["FULLY_CONNECTED"]
    np.testing.assert_allclose(tensor_array(info, info["ops"][0]["inputs"][1]), (w * 2 + 1).T)
    assert info["tensors"][info["outputs"][0]]["name"] == "logits"
    feed = _rand(2, 4)
    assert_close_relative(run_model(model, [feed])[0], feed @ (w * 2 + 1))


def test_placeholder_with_default_folds_to_its_default():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
        gain = rg.placeholder_with_default(np.float32(3.0), [], name="gain")
        y = x * gain
    model = convert(g, [x], [y])
    np.testing.assert_allclose(run_model(model, [np.ones((1, 3), np.float32)])[0], 3.0)


# -- freezing variables ---------------------------------------------------------------------------


def _variable_model():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 5], name="x")
        w = rg.Variable(np.zeros((5, 3), np.float32), name="w")
        b = rg.Variable(np.zeros(3, np.float32), name="b")
        y = rg.identity(rg.relu(rg.matmul(x, w) + b), name="y")
        loss = rg.reduce_mean(y)  # a training-only tail the converter must leave out
        new_w = rg.placeholder(rg.float32, [5, 3], name="new_w")
        assign = w.assign(new_w)
        init = rg.global_variables_initializer()
    return g, x, y, loss, (w, b, new_w, assign, init)


def test_from_session_freezes_the_current_variable_values():
    g, x, y, loss, (w, b, new_w, assign, init) = _variable_model()
    sess = Session(graph=g)
    sess.run(init)
    trained = _rand(5, 3)
    sess.run(assign, {new_w: trained})
    model = TFLiteConverter.from_session(sess, [x], [y]).convert()
    feed = _rand(4, 5)
    want = sess.run(y, {x: feed})
    np.testing.assert_allclose(want, np.maximum(feed @ trained, 0), rtol=1e-6)
    assert_close_relative(run_model(model, [feed])[0], want)
    info = read_model(model)
    assert [o["code"] for o in info["ops"]] == ["FULLY_CONNECTED"]  # no loss, no assign


def test_from_graph_reads_variables_from_a_checkpoint(tmp_path):
    g, x, y, *_ = _variable_model()
    w, b = _rand(5, 3), _rand(3)
    prefix = str(tmp_path / "model")
    write_checkpoint(prefix, {"w": w, "b": b})
    model = TFLiteConverter.from_graph(g, [x], ["y:0"], checkpoint=prefix).convert()
    feed = _rand(2, 5)
    assert_close_relative(run_model(model, [feed])[0], np.maximum(feed @ w + b, 0))


@pytest.mark.parametrize("suffix", [".pb", ".txt"])
def test_from_frozen_graph_file(tmp_path, suffix):
    g, *_ = _variable_model()
    path = tmp_path / f"graph{suffix}"
    if suffix == ".pb":
        path.write_bytes(g.as_graph_def().SerializeToString())
    else:
        path.write_text(g.to_text())
    w, b = _rand(5, 3), _rand(3)
    conv = TFLiteConverter.from_frozen_graph(path, ["x"], ["y"], checkpoint={"w": w, "b": b})
    feed = _rand(2, 5)
    assert_close_relative(run_model(conv.convert(), [feed])[0], np.maximum(feed @ w + b, 0))


def test_missing_variables_are_named():
    g, x, y, *_ = _variable_model()
    with pytest.raises(ConverterError, match=r"variables that have no value: b, w"):
        TFLiteConverter.from_graph(g, [x], [y]).convert()
    with pytest.raises(ConverterError, match=r"no value: b\b"):
        TFLiteConverter.from_graph(g, [x], [y], checkpoint={"w": _rand(5, 3)}).convert()


# -- errors ---------------------------------------------------------------------------------------


def test_an_unconvertible_op_is_named_with_its_source_line():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        c = rg.softplus(x, name="running")  # this line is in the message
        line = c.op.source[1]
        y = rg.relu(rg.erf(c, name="grow"))
    with pytest.raises(ConverterError) as e:
        convert(g, [x], [y])
    msg = str(e.value)
    assert "2 op(s) cannot be converted" in msg and "no rule for Erf, Softplus" in msg
    assert "op 'running' (Softplus)" in msg and "op 'grow' (Erf)" in msg
    assert f"test_convert.py:{line}" in msg
    assert "%running: f32[?,4] = Softplus(%x" in msg


def test_unlisted_placeholder_is_an_error_with_its_line():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 4], name="x")
        scale = rg.placeholder(rg.float32, [], name="scale")
        y = x * scale
    with pytest.raises(ConverterError, match=r"(?s)op 'scale' \(Placeholder\).*not one of the "
                       r"inputs.*test_convert\.py:\d+"):  # fmt: skip
        convert(g, [x], [y])


def test_rule_errors_name_the_op():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3, 8, 8], name="x")
        y = rg.conv2d(x, _rand(3, 3, 3, 4), [1, 1, 1, 1], "SAME", data_format="NCHW", name="cv")
        f = rg.placeholder(rg.float32, [3, 3, 3, 4], name="f")
        z = rg.conv2d(rg.transpose(x, [0, 2, 3, 1]), f, [1, 1, 1, 1], "SAME", name="cv2")
    with pytest.raises(ConverterError, match=r"(?s)op 'cv' \(Conv2D\): data_format NCHW.*"
                       r"test_convert\.py"):  # fmt: skip
        convert(g, [x], [y])
    with pytest.raises(ConverterError, match=r"op 'cv2' \(Conv2D\): its filter \(f:0\) must be "
                       r"constant"):  # fmt: skip
        convert(g, [x, f], [z])


def test_unsupported_dtypes_and_unknown_ranks_are_refused():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float64, [None, 3], name="x64")
        y = rg.relu(x)
        u = rg.placeholder(rg.float32, None, name="u")
        v = rg.relu(u)
    with pytest.raises(ConverterError, match="x64:0 is float64"):
        convert(g, [x], [y])
    with pytest.raises(ConverterError, match="unknown rank"):
        convert(g, [u], [v])


def test_output_that_is_an_input_is_refused():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
    with pytest.raises(ConverterError, match="also an input"):
        convert(g, [x], [x])
