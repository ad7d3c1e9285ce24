"""Post-training quantization: the parameters written (checked against numpy recomputations of
TensorFlow's conventions), LiteRT running the int8 and dynamic-range models, agreement with rill's
interpreter (bit-exact where the TFLite reference kernels are integer-exact), the demo CNN's size
and accuracy targets, int8 I/O, float fallback, and the quantization report."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib

import numpy as np
import pytest
import tflite
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType

import rill.graph as rg
from rill.exec import Session
from rill.mobile.convert import ConverterError, OpsSet, Optimize, TFLiteConverter

ROOT = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(11)


def _rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def rill_interpreter():
    try:
        return importlib.import_module("rill.mobile").Interpreter
    except (ImportError, AttributeError):
        return None


def make_interpreter(model: bytes, runtime: str, preserve=False):
    if runtime == "rill":
        cls = rill_interpreter()
        if cls is None:
            pytest.skip("rill.mobile.Interpreter is not there yet")
        return cls(model_content=model)
    kind = OpResolverType.BUILTIN_REF if runtime == "ref" else OpResolverType.AUTO
    return LiteRT(
        model_content=model,
        experimental_op_resolver_type=kind,
        experimental_preserve_all_tensors=preserve,
    )


def run_model(model: bytes, feeds, runtime="ref"):
    it = make_interpreter(model, runtime)
    details = it.get_input_details()
    for d, v in zip(details, feeds):
        it.resize_tensor_input(d["index"], list(np.shape(v)))
    it.allocate_tensors()
    for d, v in zip(details, feeds):
        it.set_tensor(d["index"], np.asarray(v, dtype=d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def read_model(buf: bytes):
    """(ops [(code name, inputs, outputs)], tensors [dict]) via `tflite`'s readers."""
    m = tflite.Model.GetRootAs(buf, 0)
    sg = m.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    np_types = {"FLOAT32": np.float32, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64}
    tensors = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        q = t.Quantization()
        quant = None
        if q is not None and q.ScaleLength():
            quant = (q.ScaleAsNumpy().copy(), q.ZeroPointAsNumpy().copy(), q.QuantizedDimension())
        shape = list(t.ShapeAsNumpy()) if t.ShapeLength() else []
        b = m.Buffers(t.Buffer())
        typ = types[t.Type()]
        data = None
        if b.DataLength():
            data = np.frombuffer(bytes(b.DataAsNumpy()), np_types[typ]).reshape(shape)
        tensors.append({"name": t.Name().decode(), "type": typ, "quant": quant, "data": data})
    ops = []
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        c = m.OperatorCodes(o.OpcodeIndex())
        code = names[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())]
        ops.append((code, list(o.InputsAsNumpy()), list(o.OutputsAsNumpy())))
    return ops, tensors, list(sg.InputsAsNumpy()), list(sg.OutputsAsNumpy())


def converter_for(g, ins, outs, data, **settings):
    conv = TFLiteConverter.from_graph(g, ins, outs)
    conv.optimizations = [Optimize.DEFAULT]
    conv.representative_dataset = data
    for k, v in settings.items():
        setattr(conv, k, v)
    return conv


# -- the parameters ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed():
    """conv+bias+relu → depthwise+bias → max pool → concat → reshape → dense → softmax, with
    sigmoid and tanh heads; float weights and calibration data kept for recomputation."""
    w_conv, b_conv = _rand(3, 3, 3, 4, scale=0.5), _rand(4, scale=0.1)
    w_dw, b_dw = _rand(3, 3, 4, 2, scale=0.5), _rand(8, scale=0.1)
    w_fc, b_fc = _rand(4 * 4 * 12, 5, scale=0.2), _rand(5, scale=0.1)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 8, 8, 3], name="x")
        h = rg.relu(rg.bias_add(rg.conv2d(x, w_conv, [1, 1, 1, 1], "SAME"), b_conv), name="c1")
        d = rg.bias_add(rg.depthwise_conv2d_native(h, w_dw, [1, 1, 1, 1], "SAME"), b_dw)
        cat = rg.concat(
            [
                rg.max_pool(d, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                rg.avg_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
            ],
            -1,
            name="cat",
        )
        flat = rg.reshape(cat, [-1, 4 * 4 * 12])
        logits = rg.bias_add(rg.matmul(flat, w_fc), b_fc, name="logits")
        probs = rg.softmax(logits, name="probs")
        gate = rg.sigmoid(logits, name="gate")
        squash = rg.tanh(logits, name="squash")
    data = [_rand(4, 8, 8, 3) for _ in range(3)]
    conv = converter_for(g, [x], [probs, gate, squash], lambda: ([b] for b in data))
    model = conv.convert()
    return dict(g=g, x=x, outs=[probs, gate, squash], conv=conv, model=model, data=data,
                w_conv=w_conv, b_conv=b_conv, w_dw=w_dw, w_fc=w_fc, b_fc=b_fc, h=h, d=d,
                cat=cat, logits=logits)  # fmt: skip


def _op(ops, code, k=0):
    return [o for o in ops if o[0] == code][k]


def _expected_activation(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0)
    zp = -128.0 - lo / float(scale)
    zp = int(np.clip(np.sign(zp) * np.floor(abs(zp) + 0.5), -128, 127))
    return scale, zp


def _range(m, tensor):
    sess = Session(graph=m["g"])
    vals = [sess.run(tensor, {m["x"]: b}) for b in m["data"]]
    return float(min(v.min() for v in vals)), float(max(v.max() for v in vals))


def test_weights_are_symmetric_per_channel(mixed):
    ops, tensors, *_ = read_model(mixed["model"])
    for code, w, axis, n in (
        ("CONV_2D", mixed["w_conv"].transpose(3, 0, 1, 2), 0, 4),
        ("DEPTHWISE_CONV_2D", mixed["w_dw"].reshape(1, 3, 3, 8), 3, 8),
        ("FULLY_CONNECTED", mixed["w_fc"].T, 0, 5),
    ):
        t = tensors[_op(ops, code)[1][1]]
        scale, zp, qdim = t["quant"]
        assert t["type"] == "INT8" and qdim == axis and len(scale) == n
        assert not zp.any()
        other = tuple(i for i in range(w.ndim) if i != axis)
        np.testing.assert_array_equal(scale, np.max(np.abs(w), axis=other) / np.float32(127))
        q = t["data"]
        assert q.min() >= -127 and q.max() <= 127 and np.abs(q).max() == 127
        shape = [1] * w.ndim
        shape[axis] = -1
        np.testing.assert_array_equal(q, np.round(w / scale.reshape(shape)).astype(np.int8))


def test_bias_is_int32_at_input_times_weight_scale(mixed):
    ops, tensors, *_ = read_model(mixed["model"])
    for code, b in (("CONV_2D", mixed["b_conv"]), ("FULLY_CONNECTED", mixed["b_fc"])):
        x_i, w_i, b_i = _op(ops, code)[1]
        bias = tensors[b_i]
        assert bias["type"] == "INT32"
        s_in = tensors[x_i]["quant"][0][0]
        s_w = tensors[w_i]["quant"][0]
        np.testing.assert_array_equal(bias["quant"][0], (np.float32(s_in) * s_w).astype(np.float32))
        assert not bias["quant"][1].any()
        np.testing.assert_array_equal(bias["data"], np.round(b / bias["quant"][0]).astype(np.int32))


def test_activations_are_asymmetric_from_calibration(mixed):
    ops, tensors, inputs, _ = read_model(mixed["model"])
    # The dense layer's output (no shared-parameter op touches it); the model input gets a
    # QUANTIZE with the input's calibrated range.
    out = tensors[_op(ops, "FULLY_CONNECTED")[2][0]]
    scale, zp = _expected_activation(*_range(mixed, mixed["logits"]))
    assert out["type"] == "INT8"
    assert out["quant"][0][0] == scale and out["quant"][1][0] == zp
    q_in = tensors[_op(ops, "QUANTIZE")[2][0]]
    scale, zp = _expected_activation(*_range(mixed, mixed["x"]))
    assert q_in["quant"][0][0] == scale and q_in["quant"][1][0] == zp
    assert tensors[inputs[0]]["type"] == "FLOAT32"


def test_fixed_and_shared_output_parameters(mixed):
    ops, tensors, *_ = read_model(mixed["model"])

    def qp(i):
        return float(tensors[i]["quant"][0][0]), int(tensors[i]["quant"][1][0])

    assert qp(_op(ops, "SOFTMAX")[2][0]) == (1 / 256, -128)
    assert qp(_op(ops, "LOGISTIC")[2][0]) == (1 / 256, -128)
    assert qp(_op(ops, "TANH")[2][0]) == (1 / 128, 0)
    cat = _op(ops, "CONCATENATION")
    shared = {qp(i) for i in cat[1] + cat[2]}
    for code in ("MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE"):
        _, ins, outs = _op(ops, code)
        shared |= {qp(ins[0]), qp(outs[0])}
    assert len(shared) == 1  # pooling → concat → reshape all carry one scale / zero point
    # The shared range is the union of the members' calibrated ranges.
    los, his = zip(*(_range(mixed, t) for t in (mixed["cat"], mixed["h"], mixed["d"])))
    assert shared == {tuple(map(float, _expected_activation(min(los), max(his))))}


def test_edges_quantize_and_dequantize(mixed):
    ops, tensors, inputs, outputs = read_model(mixed["model"])
    assert ops[0][0] == "QUANTIZE" and ops[0][1] == inputs
    assert [o[0] for o in ops[-3:]] == ["DEQUANTIZE"] * 3
    assert [tensors[i]["type"] for i in outputs] == ["FLOAT32"] * 3
    assert [tensors[i]["name"] for i in outputs] == ["probs", "gate", "squash"]


@pytest.mark.parametrize("runtime", ["auto", "ref", "rill"])
def test_int8_model_runs_close_to_float(mixed, runtime):
    feed = mixed["data"][0]
    got = run_model(mixed["model"], [feed], runtime)
    want = Session(graph=mixed["g"]).run(mixed["outs"], {mixed["x"]: feed})
    for a, b, quantum in zip(got, want, (1 / 256, 1 / 256, 1 / 128)):
        # A few output quanta: the error of three int8 layers in a row.
        assert np.max(np.abs(a - b)) <= 12 * quantum


# -- rill's interpreter against LiteRT's reference kernels ---------------------------------------


def _single_op(kind):
    g = rg.Graph()
    with g.as_default():
        if kind in ("conv", "depthwise", "max_pool", "avg_pool", "concat"):
            x = rg.placeholder(rg.float32, [None, 7, 7, 4], name="x")
            feeds = [_rand(2, 7, 7, 4) for _ in range(3)]
            if kind == "conv":
                y = rg.relu(rg.conv2d(x, _rand(3, 3, 4, 6), [1, 2, 2, 1], "SAME") + _rand(6))
            elif kind == "depthwise":
                y = rg.depthwise_conv2d_native(x, _rand(3, 3, 4, 2), [1, 1, 1, 1], "VALID")
            elif kind == "max_pool":
                y = rg.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
            elif kind == "avg_pool":
                y = rg.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
            else:
                y = rg.concat([x, rg.relu(x) * 3.0], -1)
        else:
            x = rg.placeholder(rg.float32, [None, 12], name="x")
            feeds = [_rand(3, 12) * 2 for _ in range(3)]
            y = {
                "fully_connected": lambda: rg.relu6(rg.matmul(x, _rand(12, 7)) + _rand(7)),
                "add": lambda: x + _rand(12),
                "mul": lambda: x * _rand(12),
                "reshape": lambda: rg.reshape(x, [-1, 3, 4]),
                "softmax": lambda: rg.softmax(x),
                "logistic": lambda: rg.sigmoid(x),
                "tanh": lambda: rg.tanh(x),
                "sub": lambda: _rand(12) - x,
                "relu": lambda: rg.relu(x[:, ::2]),
                "relu6": lambda: rg.relu6(x[:, 1:] * 3.0),
                "leaky_relu": lambda: rg.leaky_relu(x, 0.2),
                "mean": lambda: rg.reduce_mean(rg.reshape(x, [-1, 3, 4]), axis=[1]),
                "pad": lambda: rg.pad(rg.reshape(x, [-1, 3, 4]), [[0, 0], [1, 1], [0, 2]]),
                "transpose": lambda: rg.transpose(rg.reshape(x, [-1, 3, 4]), [0, 2, 1]),
                "strided_slice": lambda: x[:, 1:11:3],
                "gather": lambda: rg.gather(x, np.array([3, 1, 1, 0], np.int32), axis=1),
                "squeeze_expand_dims": lambda: rg.squeeze(rg.expand_dims(x, 1), [1]),
                "batch_matmul": lambda: rg.matmul(rg.reshape(x, [-1, 3, 4]), _rand(4, 5)),
            }[kind]()
    return g, x, y, feeds


EXACT = ["conv", "depthwise", "fully_connected", "add", "mul", "max_pool", "avg_pool",
         "reshape", "concat"]  # fmt: skip
ONE_QUANTUM = ["softmax", "logistic", "tanh"]
# Beyond the list: pure data movement must be exact too; arithmetic within one quantum.
MOVES = ["pad", "transpose", "strided_slice", "gather", "squeeze_expand_dims"]
ARITHMETIC = ["sub", "relu", "relu6", "leaky_relu", "mean", "batch_matmul"]


@pytest.mark.parametrize("kind", EXACT + ONE_QUANTUM + MOVES + ARITHMETIC)
def test_rill_interpreter_matches_litert_reference_kernels(kind):
    g, x, y, feeds = _single_op(kind)
    conv = converter_for(g, [x], [y], lambda: ([f] for f in feeds))
    conv.inference_input_type = conv.inference_output_type = np.int8
    model = conv.convert()
    ops, tensors, inputs, _ = read_model(model)
    assert "QUANTIZE" not in [o[0] for o in ops]
    scale, zp, _ = tensors[inputs[0]]["quant"]
    q = [np.clip(np.round(f / scale[0]) + zp[0], -128, 127).astype(np.int8) for f in feeds]
    for feed in q:
        (ref,) = run_model(model, [feed], "ref")
        (got,) = run_model(model, [feed], "rill")
        assert got.dtype == np.int8 and got.shape == ref.shape
        diff = np.abs(got.astype(np.int32) - ref.astype(np.int32))
        assert diff.max() <= (0 if kind in EXACT + MOVES else 1)


@pytest.mark.parametrize("kind", ["fully_connected", "conv_1x1", "conv_3x3"])
def test_rill_interpreter_bit_exact_over_many_accumulators(kind):
    """Wide layers and many outputs: requantization ties happen here (about one per thousand
    outputs), which small layers rarely reach. Measured on LiteRT 2.x (BUILTIN_REF): per-channel int8
    FULLY_CONNECTED rounds once, (acc·M0 + 2^(30−shift)) >> (31−shift), where CONV_2D uses the
    double rounding of reference/formats.md §3 (SaturatingRoundingDoublingHighMul, then
    RoundingDivideByPOT); the two differ exactly on those ties."""
    rng = np.random.default_rng(3)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 256], name="x")
        w = (rng.standard_normal((256, 64)) * 0.1).astype(np.float32)
        if kind == "fully_connected":
            y = rg.matmul(x, w) + _rand(64)
        elif kind == "conv_1x1":
            y = rg.conv2d(rg.reshape(x, [-1, 1, 1, 256]), w.reshape(1, 1, 256, 64),
                          [1, 1, 1, 1], "VALID")  # fmt: skip
        else:
            y = rg.conv2d(rg.reshape(x, [-1, 4, 4, 16]), _rand(3, 3, 16, 64, scale=0.1),
                          [1, 1, 1, 1], "SAME")  # fmt: skip
    data = [rng.standard_normal((50, 256)).astype(np.float32) for _ in range(3)]
    conv = converter_for(g, [x], [y], lambda: ([d] for d in data))
    conv.inference_input_type = conv.inference_output_type = np.int8
    model = conv.convert()
    q = rng.integers(-128, 128, (400, 256)).astype(np.int8)
    (ref,) = run_model(model, [q], "ref")
    (got,) = run_model(model, [q], "rill")
    mismatched = int(np.sum(got != ref))
    assert mismatched == 0, f"{mismatched} of {ref.size} int8 outputs differ from LiteRT's"


@pytest.mark.parametrize("kind", EXACT + ONE_QUANTUM + MOVES + ARITHMETIC)
def test_litert_runs_each_int8_op_near_float(kind):
    g, x, y, feeds = _single_op(kind)
    conv = converter_for(g, [x], [y], lambda: ([f] for f in feeds))
    model = conv.convert()
    (got,) = run_model(model, [feeds[0]], "ref")
    want = Session(graph=g).run(y, {x: feeds[0]})
    out = [t for t in conv.model.tensors if t.source == y.name and t.quant is not None][0]
    # One quantum of the output plus what the input's and weights' rounding can move it.
    assert np.max(np.abs(got - want)) <= 4 * float(out.quant.scale[0])


# -- int8 I/O, fallback, dynamic range ----------------------------------------------------------


def _two_layer():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 64], name="x")
        h = rg.relu(rg.matmul(x, _rand(64, 32, scale=0.2)) + _rand(32), name="hidden")
        y = rg.identity(rg.matmul(h, _rand(32, 4, scale=0.3)) + _rand(4), name="y")
    data = [_rand(8, 64) for _ in range(4)]
    return g, x, y, data


def test_int8_inputs_and_outputs():
    g, x, y, data = _two_layer()
    conv = converter_for(g, [x], [y], lambda: ([b] for b in data))
    conv.inference_input_type = conv.inference_output_type = np.int8
    model = conv.convert()
    ops, tensors, inputs, outputs = read_model(model)
    assert [o[0] for o in ops] == ["FULLY_CONNECTED", "FULLY_CONNECTED"]
    assert tensors[inputs[0]]["type"] == "INT8" and tensors[outputs[0]]["type"] == "INT8"
    s_in, zp_in, _ = tensors[inputs[0]]["quant"]
    s_out, zp_out, _ = tensors[outputs[0]]["quant"]
    feed = data[0]
    q = np.clip(np.round(feed / s_in[0]) + zp_in[0], -128, 127).astype(np.int8)
    (out,) = run_model(model, [q], "ref")
    want = Session(graph=g).run(y, {x: feed})
    assert (
        np.max(np.abs((out.astype(np.float32) - zp_out[0]) * s_out[0] - want))
        < 0.1 * np.abs(want).max()
    )


def test_float_fallback_keeps_named_layers_float():
    g, x, y, data = _two_layer()
    conv = converter_for(g, [x], [y], lambda: ([b] for b in data))
    conv.float_fallback_ops = ["hidden"]  # the Relu fused into the first FULLY_CONNECTED
    model = conv.convert()
    ops, tensors, *_ = read_model(model)
    assert [o[0] for o in ops] == ["FULLY_CONNECTED", "QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"]
    first, second = ops[0], ops[2]
    assert [tensors[i]["type"] for i in first[1]] == ["FLOAT32"] * 3
    assert [tensors[i]["type"] for i in second[1]] == ["INT8", "INT8", "INT32"]
    feed = data[1]
    (got,) = run_model(model, [feed], "ref")
    want = Session(graph=g).run(y, {x: feed})
    assert np.max(np.abs(got - want)) < 0.05 * np.abs(want).max()
    conv.float_fallback_ops = ["no/such/op"]
    with pytest.raises(ConverterError, match="not in the model: \\['no/such/op'\\]"):
        conv.convert()


def test_fallback_in_the_middle_gets_dequantize_before_and_quantize_after():
    g, x, y, data = _two_layer()
    conv = converter_for(g, [x], [y], lambda: ([b] for b in data))
    conv.float_fallback_ops = [y.op.inputs[0].op.inputs[0].op.name]  # the second MatMul
    ops, tensors, *_ = read_model(conv.convert())
    codes = [o[0] for o in ops]
    assert codes == ["QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE", "FULLY_CONNECTED"]
    assert tensors[ops[3][2][0]]["type"] == "FLOAT32"


@pytest.mark.parametrize("runtime", ["auto", "ref", "rill"])
def test_dynamic_range_int8_weights_float_activations(runtime):
    g, x, y, data = _two_layer()
    conv = TFLiteConverter.from_graph(g, [x], [y])
    conv.optimizations = [Optimize.DEFAULT]
    model = conv.convert()
    float_model = TFLiteConverter.from_graph(g, [x], [y]).convert()
    assert len(model) < 0.5 * len(float_model)
    ops, tensors, inputs, outputs = read_model(model)
    assert [o[0] for o in ops] == ["DEQUANTIZE", "FULLY_CONNECTED"] * 2
    for deq, fc in zip(ops[0::2], ops[1::2]):
        w = tensors[deq[1][0]]
        assert (
            w["type"] == "INT8" and w["quant"][2] == 0 and len(w["quant"][0]) == w["data"].shape[0]
        )
        assert fc[1][1] == deq[2][0]
    assert tensors[inputs[0]]["type"] == tensors[outputs[0]]["type"] == "FLOAT32"
    (got,) = run_model(model, [data[0]], runtime)
    want = Session(graph=g).run(y, {x: data[0]})
    assert np.max(np.abs(got - want)) < 0.02 * np.abs(want).max()


# -- settings that cannot work ------------------------------------------------------------------


def test_bad_settings_are_refused():
    g, x, y, data = _two_layer()
    conv = TFLiteConverter.from_graph(g, [x], [y])
    conv.inference_input_type = conv.inference_output_type = np.int8
    with pytest.raises(ConverterError, match="need full integer quantization"):
        conv.convert()
    conv = converter_for(g, [x], [y], None)
    conv.target_spec.supported_ops = [OpsSet.TFLITE_BUILTINS_INT8]
    with pytest.raises(ConverterError, match="needs a representative_dataset"):
        conv.convert()
    conv = converter_for(g, [x], [y], lambda: iter(()))
    with pytest.raises(ConverterError, match="yielded no samples"):
        conv.convert()
    conv = converter_for(g, [x], [y], [[data[0], data[1]]])
    with pytest.raises(ConverterError, match="has 2 arrays; the model has 1 inputs"):
        conv.convert()
    conv = converter_for(g, [x], [y], [{"z": data[0]}])
    with pytest.raises(ConverterError, match="missing \\['x:0'\\]"):
        conv.convert()


def test_dataset_forms_agree():
    g, x, y, data = _two_layer()
    models = [
        converter_for(g, [x], [y], form).convert()
        for form in (
            lambda: ([b] for b in data),
            [(b,) for b in data],
            [{"x": b} for b in data],
            [{"x:0": b} for b in data],
            data,
        )
    ]
    assert all(m == models[0] for m in models)


# -- the demo CNN -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_cnn():
    """The demo's CNN, trained briefly on the digits (about 95% test accuracy)."""
    spec = importlib.util.spec_from_file_location("rill_demo", ROOT / "examples" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    import digits  # the demo puts examples/ on sys.path

    g, m = demo.small_cnn()
    train, test = digits.load()
    with g.as_default():
        init = rg.global_variables_initializer()
    sess = Session(graph=g)
    sess.run(init)
    source = digits.batches(train, 64, seed=3)
    for _ in range(120):
        xb, yb = next(source)
        sess.run(m["train"], {m["x"]: xb, m["y"]: np.eye(10, dtype=np.float32)[yb]})
    return sess, m, train, test


def _accuracy(model, images, labels, runtime):
    (logits,) = run_model(model, [images], runtime)
    return float(np.mean(np.argmax(logits, 1) == labels))


@pytest.mark.parametrize("runtime", ["ref", "rill"])
def test_demo_cnn_int8_size_and_accuracy(demo_cnn, runtime):
    sess, m, train, test = demo_cnn
    float_model = TFLiteConverter.from_session(sess, [m["x"]], [m["logits"]]).convert()
    conv = TFLiteConverter.from_session(sess, [m["x"]], [m["logits"]])
    conv.optimizations = [Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([train.images[i : i + 100]] for i in range(0, 500, 100))
    int8_model = conv.convert()
    assert len(int8_model) <= 0.27 * len(float_model)
    acc_session = float(np.mean(np.argmax(sess.run(m["logits"], {m["x"]: test.images}), 1)
                                == test.labels))  # fmt: skip
    acc_float = _accuracy(float_model, test.images, test.labels, "auto")
    acc_int8 = _accuracy(int8_model, test.images, test.labels, runtime)
    assert acc_float == acc_session and acc_session > 0.9
    assert acc_int8 >= acc_float - 0.01


# -- the quantization report --------------------------------------------------------------------


def _litert_with_intermediates(model_content):
    return LiteRT(
        model_content=model_content,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=True,
    )


def test_report_ranks_layers_and_matches_numpy(mixed):
    conv = mixed["conv"]
    report = conv.quantization_report(interpreter=_litert_with_intermediates)
    layers = {r.layer for r in report.rows}
    conv_name = mixed["h"].op.inputs[0].op.inputs[0].op.name
    assert conv_name in layers and "probs" in layers and "cat" in layers
    row = next(r for r in report.rows if r.layer == conv_name)
    assert row.ops == (conv_name, mixed["h"].op.inputs[0].op.name, "c1")
    assert row.tensor == "c1:0" and row.tflite_op == "CONV_2D"
    sqnrs = [r.sqnr_db for r in report.rows]
    assert sqnrs == sorted(sqnrs)
    assert report.worst(3) == report.rows[:3] and report.num_samples == len(mixed["data"])
    # Recompute every row: LiteRT's int8 tensors, dequantized, against rill's float values,
    # fetched together as the report fetches them (a plan that fetches only `gate` fuses its
    # Sigmoid into the MatMul, whose compiled epilogue rounds within a few ulp of numpy's).
    sess = Session(graph=mixed["g"])
    every = [mixed["g"].get_tensor_by_name(r.tensor) for r in report.rows]
    by_source = {t.source: i for i, t in enumerate(conv.model.tensors)
                 if t.source and t.dtype == np.int8 and not t.is_const}  # fmt: skip
    for r in report.rows:
        index = by_source[r.tensor]
        q = conv.model.tensors[index].quant
        errs, refs = [], []
        for b in mixed["data"]:
            it = _litert_with_intermediates(mixed["model"])
            it.resize_tensor_input(it.get_input_details()[0]["index"], list(b.shape))
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], b)
            it.invoke()
            deq = (it.get_tensor(index).astype(np.float64) - q.zero_point[0]) * q.scale[0]
            ref = sess.run(every, {mixed["x"]: b})[report.rows.index(r)]
            errs.append((deq - ref).ravel())
            refs.append(ref.astype(np.float64).ravel())
        err, ref = np.concatenate(errs), np.concatenate(refs)
        assert r.max_abs == pytest.approx(np.abs(err).max(), rel=1e-9)
        assert r.mean_abs == pytest.approx(np.abs(err).mean(), rel=1e-9)
        sqnr = 10 * np.log10(np.sum(ref**2) / np.sum(err**2))
        assert r.sqnr_db == pytest.approx(sqnr, rel=1e-9)
    d = report.to_dict()
    assert d["samples"] == 3 and [x["layer"] for x in d["layers"]] == [r.layer for r in report.rows]
    table = report.format_table()
    assert table.splitlines()[0].split()[:3] == ["layer", "(rill", "op)"]
    assert conv_name in table and len(table.splitlines()) == len(report.rows) + 2


def test_report_with_rill_interpreter(mixed):
    if rill_interpreter() is None:
        pytest.skip("rill.mobile.Interpreter is not there yet")
    ours = mixed["conv"].quantization_report()
    theirs = mixed["conv"].quantization_report(interpreter=_litert_with_intermediates)
    assert [r.layer for r in ours.rows] == [r.layer for r in theirs.rows]
    for a, b in zip(ours.rows, theirs.rows):
        assert a.max_abs == pytest.approx(b.max_abs, abs=2 * a.scale)


def test_report_needs_an_int8_conversion():
    g, x, y, _ = _two_layer()
    conv = TFLiteConverter.from_graph(g, [x], [y])
    conv.convert()
    with pytest.raises(ConverterError, match="needs a full int8 conversion"):
        conv.quantization_report(interpreter=_litert_with_intermediates)


def test_integer_inputs_pass_through_an_int8_embedding_model():
    table, w = _rand(20, 8), _rand(8, 3)
    g = rg.Graph()
    with g.as_default():
        ids = rg.placeholder(rg.int32, [None, 5], name="ids")
        pooled = rg.reduce_mean(rg.gather(table, ids), axis=[1])
        y = rg.softmax(rg.matmul(pooled, w), name="probs")
    data = [RNG.integers(0, 20, (4, 5)).astype(np.int32) for _ in range(3)]
    conv = converter_for(g, [ids], [y], lambda: ([d] for d in data))
    model = conv.convert()
    ops, tensors, inputs, _ = read_model(model)
    assert [o[0] for o in ops] == ["GATHER", "MEAN", "FULLY_CONNECTED", "SOFTMAX", "DEQUANTIZE"]
    assert tensors[inputs[0]]["type"] == "INT32"
    table_q = tensors[ops[0][1][0]]
    assert table_q["type"] == "INT8" and table_q["quant"][0].size == 1  # per-tensor
    (got,) = run_model(model, [data[0]], "ref")
    want = Session(graph=g).run(y, {ids: data[0]})
    assert np.max(np.abs(got - want)) <= 4 / 256
