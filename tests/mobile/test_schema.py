"""Loading .tflite files: what the loader reads (checked against LiteRT's view of the same
files), the listing of unsupported operators before anything runs, and clear errors for bad
bytes — a wrong identifier or version, truncation, corruption — never a crash inside numpy or
flatbuffers."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT
from mobile.tflite_builder import Op, T, build, quant, single_op

from rill.mobile.errors import ModelFormatError, PrepareError, UnsupportedOperatorError
from rill.mobile.interpreter import Interpreter, find_unsupported
from rill.mobile.schema import load_model

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
MODELS = ["cnn_float", "cnn_int8", "depthwise_float", "depthwise_int8"]


@pytest.mark.parametrize("name", MODELS)
def test_load_matches_litert_view(name):
    raw = (FIXTURES / f"{name}.tflite").read_bytes()
    model = load_model(raw)
    assert model.version == 3
    sg = model.subgraphs[0]
    peer = LiteRT(model_content=raw)
    details = peer.get_tensor_details()
    assert len(details) == len(sg.tensors)
    for d, t in zip(details, sg.tensors):
        assert d["name"] == t.name
        assert list(d["shape"]) == list(t.shape)
        assert list(d["shape_signature"]) == list(t.shape_signature or t.shape)
        assert np.dtype(d["dtype"]) == t.dtype
        qp = d["quantization_parameters"]
        if t.quantization is None:
            assert qp["scales"].size == 0
        else:
            np.testing.assert_array_equal(qp["scales"], t.quantization.scale)
            np.testing.assert_array_equal(qp["zero_points"], t.quantization.zero_point)
            assert qp["quantized_dimension"] == t.quantization.quantized_dimension
        if t.is_constant:
            np.testing.assert_array_equal(peer.get_tensor(t.index), t.data)
    ops = peer._get_ops_details()
    assert [o["op_name"] for o in ops] == [op.name for op in sg.operators]
    for o, op in zip(ops, sg.operators):
        assert list(o["inputs"]) == list(op.inputs)
        assert list(o["outputs"]) == list(op.outputs)
    assert [s.key for s in model.signature_defs] == list(peer.get_signature_list())


def test_operator_options_and_versions():
    model = load_model(FIXTURES / "depthwise_int8.tflite")
    ops = {op.name: op for op in reversed(model.subgraphs[0].operators)}  # first of each kind
    dw = ops["DEPTHWISE_CONV_2D"]
    assert dw.version == 3 and dw.options_type == "DepthwiseConv2DOptions"
    assert dw.options["depth_multiplier"] == 2
    assert dw.options["fused_activation_function"] == 1  # RELU
    assert ops["MEAN"].options == {"keep_dims": False}
    assert ops["QUANTIZE"].options == {}
    # Constant data is a read-only view of the file's bytes.
    w = model.subgraphs[0].tensors[dw.inputs[1]]
    assert w.data.dtype == np.int8 and not w.data.flags.writeable
    assert model.metadata.keys() >= {"min_runtime_version"}


def test_omitted_optional_input_is_minus_one():
    x = T((2, 4), np.float32)
    w = T((3, 4), np.float32, np.ones((3, 4), np.float32))
    model = load_model(single_op("FULLY_CONNECTED", [x, w, None, None], [T((2, 3))]))
    # Trailing omitted inputs are dropped by the builder; one in the middle stays -1.
    model2 = build([x, w, T((2, 3))], [Op("FULLY_CONNECTED", [0, 1, -1], [2])], [0], [2])
    assert load_model(model2).subgraphs[0].operators[0].inputs == (0, 1, -1)
    assert model.subgraphs[0].operators[0].inputs == (0, 1)


def test_opcode_read_from_extended_and_deprecated_fields():
    # BATCH_MATMUL is 126 (< 127): both fields hold it. Reading max() is what matters for
    # codes >= 127, whose deprecated field holds 127.
    model = load_model(single_op("BATCH_MATMUL", [T((2, 3)), T((3, 4))], [T((2, 4))]))
    assert model.subgraphs[0].operators[0].name == "BATCH_MATMUL"


def test_unsupported_operators_are_all_listed_before_running():
    x = T((2, 4), np.float32)
    tensors = [x, T((2, 4)), T((2, 4)), T((2, 4)), T((2, 4))]
    ops = [Op("RELU", [0], [1]), Op("ADD", [1, 1], [2], {}, version=9),
           Op("RELU", [2], [3], version=7), Op("RELU", [3], [4], version=7)]  # fmt: skip
    model = build(tensors, ops, [0], [4])
    unsupported = find_unsupported(load_model(model))
    assert unsupported == [("ADD", 9, [1]), ("RELU", 7, [2, 3])]
    with pytest.raises(UnsupportedOperatorError) as e:
        Interpreter(model_content=model)
    msg = str(e.value)
    assert "ADD version 9 (operator #1)" in msg
    assert "RELU version 7 (operators #2, #3)" in msg
    assert "supported operators:" in msg and "CONV_2D" in msg


def test_unknown_builtin_is_listed():
    from tflite.BuiltinOperator import BuiltinOperator

    assert BuiltinOperator.SVDF == 27
    model = build([T((3,)), T((3,))], [Op("SVDF", [0], [1])], [0], [1])
    with pytest.raises(UnsupportedOperatorError, match="SVDF version 1"):
        Interpreter(model_content=model)


def test_wrong_file_identifier():
    raw = bytearray((FIXTURES / "cnn_float.tflite").read_bytes())
    raw[4:8] = b"ONNX"
    with pytest.raises(ModelFormatError, match=r"file identifier is b'ONNX', expected b'TFL3'"):
        Interpreter(model_content=bytes(raw))


def test_wrong_schema_version():
    model = single_op("RELU", [T((2,))], [T((2,))])
    bad = build([T((2,)), T((2,))], [Op("RELU", [0], [1])], [0], [1], version=2)
    assert Interpreter(model_content=model)
    with pytest.raises(
        ModelFormatError, match="schema version 2; this interpreter reads version 3"
    ):
        Interpreter(model_content=bad)


def test_not_a_model_at_all():
    with pytest.raises(ModelFormatError, match="too short"):
        Interpreter(model_content=b"TFL")
    with pytest.raises(ModelFormatError, match="file identifier"):
        Interpreter(model_content=b"hello world, this is not a model")
    with pytest.raises(ValueError, match="exactly one of model_path and model_content"):
        Interpreter()


@pytest.mark.parametrize("name", ["cnn_int8", "depthwise_float"])
def test_every_truncation_is_a_clear_error(name):
    raw = (FIXTURES / f"{name}.tflite").read_bytes()
    # Every length from 0 to the full size, in steps (all of the first 256 bytes).
    lengths = list(range(0, 256)) + list(range(256, len(raw), 7))
    for n in lengths:
        with pytest.raises(ModelFormatError, match=r"truncated|invalid|identifier"):
            Interpreter(model_content=raw[:n])


@pytest.mark.parametrize("seed", range(4))
def test_corrupted_bytes_never_crash_inside_numpy(seed):
    """Random bytes overwritten: the model loads (the damage hit weights) and runs, or an error
    of rill's own says what is wrong; nothing else escapes."""
    raw = (FIXTURES / "depthwise_int8.tflite").read_bytes()
    rng = np.random.default_rng(seed)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(150):
        data = bytearray(raw)
        pos = rng.integers(8, len(data), size=int(rng.integers(1, 6)))
        for p in pos:
            data[p] = int(rng.integers(0, 256))
        try:
            it = Interpreter(model_content=bytes(data))
            it.allocate_tensors()
            d = it.get_input_details()[0]
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            it.invoke()
            outcomes["ok"] += 1
        except (ModelFormatError, UnsupportedOperatorError, PrepareError) as e:
            assert str(e)
            outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"]


def test_constant_buffer_of_wrong_size():
    w = T((3, 4), np.float32, np.ones(12, np.float32))  # data matches 12 floats
    model = bytearray(build([T((2, 4)), w, T((2, 3))], [Op("FULLY_CONNECTED", [0, 1], [2])],
                            [0], [2]))  # fmt: skip
    # Shrink the constant's shape in place: [3, 4] -> [3, 3] (the first shape vector [3, 4]).
    needle = np.array([2, 3, 4], np.int32).tobytes()  # length-prefixed [3, 4]
    pos = bytes(model).find(needle)
    assert pos > 0
    model[pos + 8 : pos + 12] = np.int32(3).tobytes()
    with pytest.raises(ModelFormatError, match="buffer 1 holds 48 bytes but shape \\[3, 3\\]"):
        Interpreter(model_content=bytes(model))


def test_quantization_parameters_read():
    x = quant((1, 4), np.int8, 0.5, -3)
    model = load_model(single_op("RELU", [x], [quant((1, 4), np.int8, 0.25, 7)]))
    q = model.subgraphs[0].tensors[1].quantization
    assert float(q.scale[0]) == 0.25 and int(q.zero_point[0]) == 7 and not q.per_channel
