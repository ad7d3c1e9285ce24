"""Untrusted ONNX input: external data, lying tensors, C++ shape inference on invalid models."""

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rill.graph.onnx.import_util import OnnxImportError  # noqa: E402
from rill.graph.onnx.importer import import_onnx  # noqa: E402


def _constant_model(tensor: TensorProto) -> bytes:
    node = helper.make_node("Constant", [], ["y"], value=tensor)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([node], "g", [], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _external(name: str, location: str, length: int = 16) -> TensorProto:
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[length // 4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def test_constant_with_external_data_is_refused_without_a_base_dir(tmp_path, monkeypatch):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    monkeypatch.chdir(tmp_path)  # the file the model names sits in the caller's cwd
    data = _constant_model(_external("leak", "secret.bin"))
    with pytest.raises(OnnxImportError, match=r"'leak'.*external.*external_data_dir"):
        import_onnx(data)


def test_initializer_with_external_data_is_refused_without_a_base_dir(tmp_path, monkeypatch):
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    monkeypatch.chdir(tmp_path)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y],
                          [_external("w", "w.bin")])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"initializer 'w'.*external"):
        import_onnx(m.SerializeToString())


def test_external_data_is_read_from_the_named_directory_only(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    g, _, outs = import_onnx(_constant_model(_external("c", "w.bin")), external_data_dir=tmp_path)
    from rill.graph.tensor_util import constant_value

    np.testing.assert_array_equal(constant_value(outs["y"].op.inputs[0]), np.arange(4))
    outside = tmp_path / "sub"
    outside.mkdir()
    with pytest.raises(OnnxImportError, match="outside the base directory"):
        import_onnx(_constant_model(_external("c", "../w.bin")), external_data_dir=outside)
    with pytest.raises(OnnxImportError, match=r"lies outside 'w.bin'"):
        import_onnx(_constant_model(_external("c", "w.bin", 64)), external_data_dir=tmp_path)


def test_initializer_whose_dims_disagree_with_its_data():
    t = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    t.dims[:] = [5]
    with pytest.raises(OnnxImportError, match=r"node 'Constant'.*'w'.*5 elements"):
        import_onnx(_constant_model(t))
    t.dims[:] = [-1, -4]
    with pytest.raises(OnnxImportError, match="negative"):
        import_onnx(_constant_model(t))
    t.dims[:] = [1 << 40, 1 << 20]
    with pytest.raises(OnnxImportError, match="over the limit"):
        import_onnx(_constant_model(t))


_CHILD = """
import sys
from onnx import parser
from rill.graph.onnx.importer import import_onnx
from rill.graph.onnx.import_util import OnnxImportError
m = parser.parse_model(sys.stdin.read())
try:
    import_onnx(m)
except OnnxImportError as e:
    print("clean error:", e)
else:
    print("accepted")
"""

# Models onnx's C++ inference crashed on in earlier releases (onnx issues 6180, 6185): an invalid
# operand rank with a malformed attribute. rill must not hand them to C++ inference unchecked.
_CRASHERS = [
    """<ir_version: 9, opset_import: ["" : 17]>
graph (float[7,6,1,5] in0, float in1, float[7,2,3,2,1] in2) => (float out0) {
   out0 = Conv <auto_pad = "NOTSET", group = 1> (in0, in1, in2)
}""",
    """<ir_version: 9, opset_import: ["" : 17]>
graph (double[2,1] in0, double in1, double[2] in2) => (double out0) {
   out0 = Gemm <alpha: float = 1, beta: float = -693.752, broadcast: int = -436> (in0, in1, in2)
}""",
]


@pytest.mark.parametrize("text", _CRASHERS)
def test_invalid_models_end_in_a_clean_error_in_a_child_process(text):
    r = subprocess.run([sys.executable, "-c", _CHILD], input=text, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]  # a signal would be a negative return code
    assert r.stdout.startswith("clean error:"), r.stdout + r.stderr[-2000:]


def test_shape_inference_is_skipped_for_a_model_the_checker_rejects(monkeypatch):
    from rill.graph.onnx import untrusted

    called = []
    monkeypatch.setattr(untrusted.onnx.shape_inference, "infer_shapes",
                        lambda m: called.append(m) or m)  # fmt: skip
    bad = onnx.parser.parse_model(_CRASHERS[1])
    assert untrusted.infer_types_if_valid(bad) is bad
    assert called == []
    good = onnx.parser.parse_model("""<ir_version: 9, opset_import: ["" : 17]>
graph (float[2] a) => (float[2] b) { b = Relu(a) }""")
    untrusted.infer_types_if_valid(good)
    assert called == [good]


def _one_node_model(node, inputs, outputs) -> bytes:
    g = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_reshape_whose_shape_input_declares_a_huge_length_is_refused():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [1 << 40])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    data = _one_node_model(helper.make_node("Reshape", ["x", "s"], ["y"], name="r"), [x, s], [y])
    with pytest.raises(OnnxImportError, match=r"node 'r'.*rank 1099511627776.*maximum rank 254"):
        import_onnx(data)


def _lrn_reference(x, size, alpha, beta, bias):
    c = x.shape[1]
    out = np.empty_like(x)
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + size - 1 - (size - 1) // 2)
        s = (x[:, lo : hi + 1] ** 2).sum(axis=1)
        out[:, i] = x[:, i] / (bias + alpha / size * s) ** beta
    return out


def test_lrn_with_a_huge_size_imports_in_time_bounded_by_the_channels():
    from rill.exec import Session

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    size = 10**9
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=1.0, name="lrn")
    g, ins, outs = import_onnx(_one_node_model(node, [x], [y]))
    assert sum(o.type == "Slice" for o in g.get_operations()) <= 5  # 2C-1 channel offsets
    v = np.random.default_rng(0).standard_normal((1, 3, 2, 2)).astype(np.float32)
    with Session(graph=g) as s:
        got = s.run(outs["y"], {ins["x"]: v})
    np.testing.assert_allclose(got, _lrn_reference(v, size, 1.0, 0.75, 1.0), rtol=1e-5)
    node = helper.make_node("LRN", ["x"], ["y"], size=0, name="lrn")
    with pytest.raises(OnnxImportError, match=r"node 'lrn'.*LRN size 0"):
        import_onnx(_one_node_model(node, [x], [y]))


_X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
_Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


@pytest.mark.parametrize(
    "node, message",
    [
        (
            helper.make_node("Add", ["x", ""], ["y"], name="n"),
            r"node 'n'.*input 1 \(B\) is required",
        ),
        (
            helper.make_node("Conv", ["x", ""], ["y"], name="n"),
            r"node 'n'.*input 1 \(W\) is required",
        ),
        (
            helper.make_node("Relu", ["y"], ["y"], name="n"),
            r"node 'n'.*input 0 'y' is defined by no",
        ),
        (helper.make_node("Split", ["x"], ["y"], axis=7, num_outputs=2, name="n"), r"node 'n'"),
        (helper.make_node("Concat", ["x", "x"], ["y"], axis=9, name="n"), r"node 'n'.*axis 9"),
    ],
)
def test_malformed_nodes_raise_onnx_import_error_naming_the_node(node, message):
    with pytest.raises(OnnxImportError, match=message):
        import_onnx(_one_node_model(node, [_X], [_Y]))


def test_malformed_attribute_names_the_node_and_attribute():
    node = helper.make_node("Softmax", ["x"], ["y"], name="n")
    a = node.attribute.add()
    a.name, a.type, a.s = "axis", onnx.AttributeProto.STRING, b"\xff\xfe"
    with pytest.raises(OnnxImportError, match=r"node 'n'.*attribute 'axis' is malformed"):
        import_onnx(_one_node_model(node, [_X], [_Y]))


def test_a_name_that_is_not_utf8_is_refused():
    data = _one_node_model(helper.make_node("Relu", ["x"], ["y"], name="rel\u00e9"), [_X], [_Y])
    bad = data.replace("rel\u00e9".encode(), b"rel\xab\xab")  # same length, invalid UTF-8
    assert bad != data
    with pytest.raises(OnnxImportError, match=r"node #0 of graph 'g': its name .* not valid UTF-8"):
        import_onnx(bad)


def _saved_with_external_data(tmp_path, location: str):
    """A Mul model saved as PyTorch's exporter saves large ones: the .onnx file and its weights
    in a separate file beside it."""
    from onnx import external_data_helper

    w = numpy_helper.from_array(np.arange(1, 65, dtype=np.float32).reshape(8, 8), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    external_data_helper.convert_model_to_external_data(m, location=location, size_threshold=0)
    path = tmp_path / "model.onnx"
    onnx.save_model(m, str(path))
    return path


def test_a_model_file_reads_its_external_data_from_its_own_directory(tmp_path, monkeypatch):
    from rill.exec import Session

    path = _saved_with_external_data(tmp_path, "model.onnx.data")
    assert (tmp_path / "model.onnx.data").exists()
    monkeypatch.chdir("/")  # not the file's directory: the data is found beside the model
    for model in (path, str(path)):
        g, ins, outs = import_onnx(model)
        with Session(graph=g) as s:
            x = np.full((8, 8), 2, np.float32)
            got = s.run(outs["y"], {ins["x"]: x})
        np.testing.assert_array_equal(got, 2 * np.arange(1, 65, dtype=np.float32).reshape(8, 8))
    # The same model as bytes names no directory: refused.
    with pytest.raises(OnnxImportError, match=r"initializer 'w'.*external"):
        import_onnx(path.read_bytes())


def test_a_model_files_external_data_may_not_lie_outside_its_directory(tmp_path):
    inner = tmp_path / "models"
    inner.mkdir()
    path = _saved_with_external_data(inner, "weights.bin")
    (tmp_path / "weights.bin").write_bytes((inner / "weights.bin").read_bytes())
    m = onnx.load_model(str(path), load_external_data=False)
    (inner / "link.bin").symlink_to(tmp_path / "weights.bin")
    for location in ("../weights.bin", "link.bin"):  # up a level; a link leading out
        for t in m.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = location
        onnx.save_model(m, str(path))
        with pytest.raises(OnnxImportError, match="outside the base directory"):
            import_onnx(path)
