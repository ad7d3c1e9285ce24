"""The rill-onnx command line: check, import, export, parity."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

import rill.graph as rg
from rill.graph.onnx.cli import main


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def write_model(path, nodes, inputs, outputs, inits=(), opset=17, domains=()):
    g = oh.make_graph(nodes, "cli", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset), *(oh.make_opsetid(d, 1) for d in domains)]
    m = oh.make_model(g, opset_imports=ops, ir_version=8)
    onnx.save(m, path)
    return m


def conv_model(path):
    w = nh.from_array(np.random.default_rng(0).standard_normal((2, 1, 3, 3)).astype(np.float32),
                      "w")  # fmt: skip
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             oh.make_node("Relu", ["c"], ["y"], name="relu")]  # fmt: skip
    return write_model(path, nodes, [vi("x", shape=["N", 1, 4, 4])], [vi("y")], [w])


def test_console_script_is_declared():
    eps = importlib.metadata.entry_points(group="console_scripts")
    assert any(e.name == "rill-onnx" and e.value == "rill.graph.onnx.cli:main" for e in eps)


def test_check_lists_unsupported_ops_with_opsets(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    nodes = [oh.make_node("Relu", ["x"], ["r"]),
             oh.make_node("ImageDecoder", ["r"], ["u"]),
             oh.make_node("Frob", ["u"], ["y"], domain="com.example")]  # fmt: skip
    write_model(path, nodes, [vi("x", TP.UINT8, [10])], [vi("y")], opset=20,
                domains=["com.example"])  # fmt: skip
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "2 op type(s) rill cannot import" in out
    assert "ai.onnx::ImageDecoder (opset 20)" in out and "com.example::Frob (opset 1)" in out
    assert "Relu" not in out.split("cannot import")[1]


def test_check_passes_a_supported_model(tmp_path, capsys):
    path = tmp_path / "conv.onnx"
    conv_model(path)
    assert main(["check", str(path)]) == 0
    assert "every op is supported" in capsys.readouterr().out


def test_import_refuses_unsupported_before_building(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    write_model(path, [oh.make_node("ImageDecoder", ["x"], ["y"])], [vi("x", TP.UINT8, [10])],
                [vi("y", TP.UINT8)], opset=20)  # fmt: skip
    out = tmp_path / "g.pb"
    assert main(["import", str(path), "-o", str(out)]) == 1
    assert not out.exists()
    assert "ImageDecoder (opset 20)" in capsys.readouterr().err


def test_import_then_export_round_trip(tmp_path, capsys):
    src = tmp_path / "conv.onnx"
    m = conv_model(src)
    pb, txt, back = tmp_path / "g.pb", tmp_path / "g.txt", tmp_path / "back.onnx"
    assert main(["import", str(src), "-o", str(pb), "--text", str(txt)]) == 0
    out = capsys.readouterr().out
    assert "input  x -> x:0 float32[?,1,4,4]" in out and "output y -> y:0" in out
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def(pb.read_bytes(), name="")
    assert "Conv2D" in [o.type for o in g.get_operations()]
    assert "Conv2D" in txt.read_text()
    rc = main(["export", str(pb), "-o", str(back), "--inputs", "x:0", "--outputs", "y:0",
               "--opset", "17"])  # fmt: skip
    assert rc == 0
    m2 = onnx.load(back)
    x = np.random.default_rng(1).standard_normal((2, 1, 4, 4)).astype(np.float32)
    a = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    b = ort.InferenceSession(m2.SerializeToString()).run(None, {m2.graph.input[0].name: x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bad_files_exit_2_with_one_message(tmp_path, capsys):
    path = tmp_path / "cut.onnx"
    data = conv_model(tmp_path / "ok.onnx").SerializeToString()
    path.write_bytes(data[: len(data) // 3])
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rill-onnx check:") and "truncated" in err
    missing = tmp_path / "missing.onnx"
    write_model(missing, [oh.make_node("Conv", ["x", "W"], ["y"], name="c")],
                [vi("x", shape=[1, 1, 3, 3])], [vi("y")])  # fmt: skip
    assert main(["import", str(missing), "-o", str(tmp_path / "g.pb")]) == 2
    assert "reads 'W'" in capsys.readouterr().err


def test_parity_subcommand(tmp_path, capsys):
    path = tmp_path / "conv.onnx"
    conv_model(path)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(2).standard_normal((1, 1, 4, 4)).astype(np.float32))
    assert main(["parity", str(path), "--input", str(x)]) == 0
    out = capsys.readouterr().out
    assert "tolerance:" in out and "conv" in out and "2 of 2 node outputs pass" in out
    assert main(["parity", str(path), "--input", f"x={x}", "--rtol", "0", "--atol", "0"]) in (0, 1)
