"""LSTM, GRU, RNN, ConvTranspose and Resize imported into rill, against onnxruntime (and onnx's
own node cases with every size made a constant, which takes Resize's import-time path)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

from rill.exec import Session
from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(20)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = oh.make_graph(nodes, "main", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def ort_run(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def batchwise_via_time_major(m, feeds):
    """onnxruntime refuses layout=1: run the layout-0 twin on transposed inputs, transpose back."""
    twin = m.__deepcopy__()
    node = twin.graph.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    ins = dict(zip(node.input, range(len(node.input))))
    for v in (*twin.graph.input, *twin.graph.output):
        v.type.tensor_type.ClearField("shape")
    fed = {}
    for k, v in feeds.items():
        fed[k] = np.swapaxes(v, 0, 1) if ins.get(k) in (0, 5, 6) else v
    y, *states = ort_run(twin, fed)
    return [y.transpose(2, 0, 1, 3), *[np.swapaxes(s, 0, 1) for s in states]]


def check(m, feeds, rtol=1e-4, atol=1e-5):
    layout = [a.i for a in m.graph.node[0].attribute if a.name == "layout"]
    want = batchwise_via_time_major(m, feeds) if layout == [1] else ort_run(m, feeds)
    g, inputs, outputs = import_onnx(m)
    with Session(graph=g) as s:
        got = s.run([outputs[o.name] for o in m.graph.output],
                    {inputs[k]: v for k, v in feeds.items()})  # fmt: skip
    for name, a, b in zip([o.name for o in m.graph.output], got, want):
        a = np.asarray(a)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)
    return g


def rnn_model(kind, *, t=5, b=3, i=4, h=6, direction="forward", layout=0, seq_lens=False,
              initial=False, bias=True, peepholes=False, inputs_dynamic=False, **attrs):  # fmt: skip
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    d = 2 if direction == "bidirectional" else 1
    inits = [nh.from_array(RNG.normal(0, 0.5, (d, gates * h, i)).astype(np.float32), "W"),
             nh.from_array(RNG.normal(0, 0.5, (d, gates * h, h)).astype(np.float32), "R")]  # fmt: skip
    names = ["X", "W", "R"]
    if bias:
        inits.append(nh.from_array(RNG.normal(0, 0.5, (d, 2 * gates * h)).astype(np.float32), "B"))
    names.append("B" if bias else "")
    ins = [vi("X", shape=["T", "N", i] if inputs_dynamic else
              ([t, b, i] if layout == 0 else [b, t, i]))]  # fmt: skip
    feeds = {"X": RNG.normal(size=(t, b, i) if layout == 0 else (b, t, i)).astype(np.float32)}
    names.append("L" if seq_lens else "")
    if seq_lens:
        ins.append(vi("L", TP.INT32, [b]))
        feeds["L"] = np.array([t, 2, t - 1][:b] + [1] * max(0, b - 3), np.int32)
    state_shape = [d, b, h] if layout == 0 else [b, d, h]
    names.append("H0" if initial else "")
    if initial:
        ins.append(vi("H0", shape=state_shape))
        feeds["H0"] = RNG.normal(size=state_shape).astype(np.float32)
    outs = ["Y", "Y_h"]
    if kind == "LSTM":
        names.append("C0" if initial else "")
        if initial:
            ins.append(vi("C0", shape=state_shape))
            feeds["C0"] = RNG.normal(size=state_shape).astype(np.float32)
        if peepholes:
            inits.append(nh.from_array(RNG.normal(0, 0.5, (d, 3 * h)).astype(np.float32), "P"))
            names.append("P")
        outs.append("Y_c")
    while names and names[-1] == "":
        names.pop()
    node = oh.make_node(kind, names, outs, hidden_size=h, direction=direction, layout=layout,
                        name=f"my_{kind.lower()}", **attrs)  # fmt: skip
    return model([node], ins, [vi(o) for o in outs], inits), feeds


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_layouts_lengths_and_initial_states(kind, direction, layout):
    m, feeds = rnn_model(kind, direction=direction, layout=layout, seq_lens=True, initial=True)
    check(m, feeds)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_unknown_sequence_length_and_batch(kind):
    m, feeds = rnn_model(kind, direction="bidirectional", inputs_dynamic=True, bias=False)
    g = check(m, feeds)
    assert any(o.type == "TensorArrayV3" for o in g.get_operations())  # a loop, not unrolled


def test_lstm_peepholes_clip_input_forget_and_activations():
    m, feeds = rnn_model("LSTM", direction="bidirectional", peepholes=True, seq_lens=True,
                         clip=0.7, input_forget=1,
                         activations=["HardSigmoid", "Tanh", "Softsign",
                                      "Sigmoid", "LeakyRelu", "Tanh"],
                         activation_alpha=[0.3, 0.05], activation_beta=[0.4])  # fmt: skip
    check(m, feeds)


def test_gru_linear_before_reset_with_lengths_reverse():
    m, feeds = rnn_model("GRU", direction="reverse", seq_lens=True, initial=True,
                         linear_before_reset=1)  # fmt: skip
    check(m, feeds)


@pytest.mark.parametrize("acts", [["Relu"], ["Sigmoid"], ["Affine"], ["ScaledTanh"],
                                  ["ThresholdedRelu"], ["Elu"], ["Softplus"]])  # fmt: skip
def test_rnn_activations(acts):
    m, feeds = rnn_model("RNN", activations=acts, activation_alpha=[0.6], activation_beta=[0.3])
    check(m, feeds)


def test_lstm_weights_that_disagree_with_hidden_size_are_named():
    m, _ = rnn_model("LSTM", h=6)
    m.graph.node[0].attribute[[a.name for a in m.graph.node[0].attribute]
                              .index("hidden_size")].i = 5  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"my_lstm.*LSTM.*W \(hidden_size 5.*\[1, 24, 4\].*"
                                              r"expected \[1, 20, 4\]"):  # fmt: skip
        import_onnx(m)


# -- ConvTranspose ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs,xshape,wshape", [
    ({"strides": [2, 2]}, [2, 3, 5, 4], [3, 4, 3, 3]),
    ({"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}, [1, 3, 5, 4],
     [3, 2, 3, 3]),
    ({"strides": [2, 3], "dilations": [2, 1], "pads": [2, 1, 1, 2]}, [1, 2, 4, 4], [2, 3, 3, 2]),
    ({"group": 2, "strides": [2, 2]}, [1, 4, 3, 3], [4, 3, 2, 2]),
    ({"group": 4}, [1, 4, 3, 3], [4, 1, 3, 3]),
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, [1, 2, 3, 5], [2, 2, 3, 3]),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [1, 2, 3, 5], [2, 2, 4, 4]),
    ({"output_shape": [11, 10], "strides": [3, 2]}, [1, 2, 3, 4], [2, 2, 3, 3]),
    ({"strides": [2], "output_padding": [1], "pads": [1, 2]}, [2, 3, 6], [3, 2, 4]),
    ({"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}, [1, 2, 3, 3, 4], [2, 2, 2, 3, 3]),
])  # fmt: skip
def test_conv_transpose(attrs, xshape, wshape):
    w = nh.from_array(RNG.normal(size=wshape).astype(np.float32), "W")
    b = nh.from_array(RNG.normal(size=[wshape[1] * attrs.get("group", 1)]).astype(np.float32), "B")
    m = model([oh.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], **attrs)],
              [vi("X", shape=xshape)], [vi("Y")], [w, b])  # fmt: skip
    check(m, {"X": RNG.normal(size=xshape).astype(np.float32)})


# -- Resize ----------------------------------------------------------------------------------------


def _resize_cases():
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in load_model_tests(kind="node")
                if c.name.startswith("test_resize") and "_expanded" not in c.name]  # fmt: skip


RESIZE_CASES = _resize_cases()


@pytest.mark.parametrize("case", RESIZE_CASES, ids=[c.name for c in RESIZE_CASES])
def test_resize_node_cases_with_constant_sizes(case):
    """onnx's Resize cases with roi / scales / sizes as initializers: the import-time plan."""
    m = case.model.__deepcopy__()
    (inputs, outputs) = case.data_sets[0]
    g = m.graph
    feeds = {}
    inits = []
    for vi_, v in zip(list(g.input), inputs):
        if vi_.name == g.node[0].input[0]:
            feeds[vi_.name] = v
        else:
            inits.append(nh.from_array(v, vi_.name))
    del g.input[1:]
    g.initializer.extend(inits)
    gr, ins, outs = import_onnx(m)
    kinds = {o.type for o in gr.get_operations()}
    assert "Range" not in kinds  # nothing left to compute at run time
    with Session(graph=gr) as s:
        got = s.run(outs[g.output[0].name], {ins[k]: v for k, v in feeds.items()})
    np.testing.assert_allclose(got, outputs[0], rtol=1e-3, atol=1e-6)
    assert got.dtype == outputs[0].dtype


def resize_model(x_shape, scales=None, sizes=None, opset=19, **attrs):
    inits = [nh.from_array(np.array([], np.float32), "roi")]
    names = ["X", "roi"]
    if scales is not None or opset < 13:  # opset 11 wants scales, empty beside sizes
        inits.append(nh.from_array(np.array(scales or [], np.float32), "scales"))
    names.append("scales" if scales is not None or opset < 13 else "")
    if sizes is not None:
        inits.append(nh.from_array(np.array(sizes, np.int64), "sizes"))
        names.append("sizes")
    node = oh.make_node("Resize", names, ["Y"], name="my_resize", **attrs)
    return model([node], [vi("X", shape=x_shape)], [vi("Y")], inits, opset=opset)


@pytest.mark.parametrize("attrs", [
    {"mode": "nearest"},
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "cubic", "coordinate_transformation_mode": "half_pixel"},
])  # fmt: skip
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_resize_opsets_against_onnxruntime(attrs, opset):
    # (align_corners with a fractional scale·length: onnx's reference and its node cases use the
    # fractional length, onnxruntime the integer one; rill follows the node cases. Here
    # every scaled length is whole.)
    x = RNG.normal(size=(1, 2, 5, 6)).astype(np.float32)
    check(resize_model(list(x.shape), scales=[1, 1, 2.0, 1.5], opset=opset, **attrs), {"X": x})
    check(resize_model(list(x.shape), sizes=[1, 2, 3, 11], opset=opset, **attrs), {"X": x})


def test_resize_opset_10_through_the_version_converter():
    x = RNG.normal(size=(1, 1, 3, 4)).astype(np.float32)
    scales = nh.from_array(np.array([1, 1, 2, 3], np.float32), "scales")
    for mode in ("nearest", "linear"):
        m = model([oh.make_node("Resize", ["X", "scales"], ["Y"], mode=mode)],
                  [vi("X", shape=[1, 1, 3, 4])], [vi("Y")], [scales], opset=10)  # fmt: skip
        check(m, {"X": x})


def test_resize_of_uint8_images_rounds_and_saturates():
    x = RNG.integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    m = resize_model([1, 3, 4, 4], scales=[1, 1, 2, 2], mode="linear")
    m.graph.input[0].type.tensor_type.elem_type = TP.UINT8
    m.graph.output[0].type.tensor_type.elem_type = TP.UINT8
    g, ins, outs = import_onnx(m)
    with Session(graph=g) as s:
        got = s.run(outs["Y"], {ins["X"]: x})
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]
    assert got.dtype == np.uint8
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # rounding of halves


def test_resize_with_both_scales_and_sizes_is_named():
    m = resize_model([1, 1, 2, 2], scales=[1, 1, 2, 2], sizes=[1, 1, 4, 4])
    with pytest.raises(OnnxImportError, match=r"my_resize.*Resize.*both scales and sizes"):
        import_onnx(m)


def test_resize_cubic_of_uint8_saturates_instead_of_wrapping():
    x = np.zeros((1, 1, 4, 4), np.uint8)
    x[..., 2:] = 255  # a step: cubic overshoots below 0 and above 255
    out = {}
    for elem, v in ((TP.UINT8, x), (TP.FLOAT, x.astype(np.float32))):
        m = resize_model([1, 1, 4, 4], scales=[1, 1, 1, 3], mode="cubic")
        m.graph.input[0].type.tensor_type.elem_type = elem
        m.graph.output[0].type.tensor_type.elem_type = elem
        g, ins, outs = import_onnx(m)
        with Session(graph=g) as s:
            out[elem] = s.run(outs["Y"], {ins["X"]: v})
    f = out[TP.FLOAT]
    assert f.min() < 0 and f.max() > 255  # the overshoot is there
    np.testing.assert_array_equal(out[TP.UINT8], np.clip(np.round(f), 0, 255).astype(np.uint8))
