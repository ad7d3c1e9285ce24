"""The LiteRT-compatible API: details, set_tensor checks, resize_tensor_input, signature runners,
intermediate tensors (by index and name), tensor() views, and the arena plan of a real model."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType
from mobile.tflite_builder import Op, T, build, quant

from rill.mobile import Interpreter as LazyInterpreter
from rill.mobile.interpreter import Interpreter

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


def _pair(name: str, **kw):
    path = str(FIXTURES / f"{name}.tflite")
    return Interpreter(model_path=path, **kw), LiteRT(model_path=path, **kw)


def _same_details(a: dict, b: dict) -> None:
    assert a.keys() >= {"name", "index", "shape", "shape_signature", "dtype", "quantization",
                        "quantization_parameters", "sparsity_parameters"}  # fmt: skip
    for key in ("name", "index", "dtype", "quantization", "sparsity_parameters"):
        assert a[key] == b[key], key
    for key in ("shape", "shape_signature"):
        np.testing.assert_array_equal(a[key], b[key])
        assert a[key].dtype == np.int32
    for key in ("scales", "zero_points", "quantized_dimension"):
        np.testing.assert_array_equal(a["quantization_parameters"][key],
                                      b["quantization_parameters"][key])  # fmt: skip


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8", "depthwise_int8"])
def test_details_match_litert(name):
    rill, peer = _pair(name)
    for a, b in zip(rill.get_input_details(), peer.get_input_details(), strict=True):
        _same_details(a, b)
    for a, b in zip(rill.get_output_details(), peer.get_output_details(), strict=True):
        _same_details(a, b)
    for a, b in zip(rill.get_tensor_details(), peer.get_tensor_details(), strict=True):
        _same_details(a, b)
    assert rill.get_signature_list() == peer.get_signature_list()


def test_lazy_package_export():
    assert LazyInterpreter is Interpreter


def test_set_tensor_checks_dtype_and_shape():
    it = Interpreter(model_path=str(FIXTURES / "cnn_int8.tflite"))
    idx = it.get_input_details()[0]["index"]
    with pytest.raises(RuntimeError, match="allocate_tensors"):
        it.set_tensor(idx, np.zeros((1, 28, 28, 1), np.int8))
    it.allocate_tensors()
    with pytest.raises(ValueError, match="Got value of type FLOAT32 but expected type INT8"):
        it.set_tensor(idx, np.zeros((1, 28, 28, 1), np.float32))
    with pytest.raises(ValueError, match="Got 3 but expected 4 for input 0"):
        it.set_tensor(idx, np.zeros((1, 28, 28), np.int8))
    with pytest.raises(ValueError, match="Got 2 but expected 1 for dimension 3 of input 0"):
        it.set_tensor(idx, np.zeros((1, 28, 28, 2), np.int8))
    with pytest.raises(ValueError, match="is a constant of the model"):
        it.set_tensor(9, np.zeros((8, 3, 3, 1), np.int8))
    with pytest.raises(ValueError, match="out of range"):
        it.set_tensor(99, np.zeros(1, np.int8))
    it.set_tensor(idx, np.zeros((1, 28, 28, 1), np.int8))
    it.invoke()


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8", "depthwise_int8"])
def test_invoke_twice_on_the_same_input(name):
    """Inputs are never overwritten by the arena: a second invoke gives the same outputs."""
    it = Interpreter(model_path=str(FIXTURES / f"{name}.tflite"))
    it.allocate_tensors()
    x = np.load(FIXTURES / f"{name}.npz")["input_0"][:1]
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    first = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_input_details()[0]["index"]), x)
    for a, d in zip(first, it.get_output_details()):
        np.testing.assert_array_equal(a, it.get_tensor(d["index"]))


def test_invoke_before_allocate_is_an_error():
    it = Interpreter(model_path=str(FIXTURES / "cnn_float.tflite"))
    with pytest.raises(RuntimeError, match="allocate_tensors"):
        it.invoke()


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8"])
def test_resize_input_batch_matches_litert(name):
    data = np.load(FIXTURES / f"{name}.npz")
    x = data["input_0"]  # three samples
    rill, _ = _pair(name)
    idx = rill.get_input_details()[0]["index"]
    rill.resize_tensor_input(idx, x.shape, strict=True)
    with pytest.raises(RuntimeError, match="allocate_tensors"):
        rill.invoke()
    rill.allocate_tensors()
    assert list(rill.get_input_details()[0]["shape"]) == list(x.shape)
    rill.set_tensor(idx, x)
    rill.invoke()
    got = rill.get_tensor(rill.get_output_details()[0]["index"])
    assert got.shape == (3, 10)
    want = data["ref_output_0"]
    if got.dtype == np.int8:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    # Back to batch 1.
    rill.resize_tensor_input(idx, [1, 28, 28, 1])
    rill.allocate_tensors()
    rill.set_tensor(idx, x[:1])
    rill.invoke()
    assert rill.get_tensor(rill.get_output_details()[0]["index"]).shape == (1, 10)


def test_resize_strict_only_changes_dynamic_dimensions():
    it = Interpreter(model_path=str(FIXTURES / "cnn_float.tflite"))
    with pytest.raises(ValueError, match=r"strict=True: its shape signature is \[-1, 28, 28, 1\]"):
        it.resize_tensor_input(0, [1, 32, 32, 1], strict=True)
    it.resize_tensor_input(0, [1, 30, 30, 1])  # not strict: allowed, shapes propagate
    it.allocate_tensors()
    # 30x30 → 15x15 → 13x13 → 6x6x16 = 576 features: the model still runs.
    assert it.get_output_details()[0]["shape"].tolist() == [1, 10]
    with pytest.raises(ValueError, match="not an input"):
        it.resize_tensor_input(5, [1])


def test_resize_to_an_incompatible_shape_fails_in_prepare():
    from rill.mobile.errors import PrepareError

    it = Interpreter(model_path=str(FIXTURES / "cnn_float.tflite"))
    it.resize_tensor_input(0, [1, 32, 32, 1])
    # 32x32 gives a 7x7x16 map before RESHAPE to [-1, 576]: 784 elements, not a multiple.
    with pytest.raises(PrepareError, match="#4 RESHAPE.*cannot reshape"):
        it.allocate_tensors()


def test_signature_runner():
    data = np.load(FIXTURES / "depthwise_int8.npz")
    rill = Interpreter(model_path=str(FIXTURES / "depthwise_int8.tflite"))
    runner = rill.get_signature_runner()
    assert list(runner.get_input_details()) == ["x"]
    assert sorted(runner.get_output_details()) == ["feat", "probs"]
    out = runner(x=data["input_0"][:1])
    ref = LiteRT(model_path=str(FIXTURES / "depthwise_int8.tflite"),
                 experimental_op_resolver_type=OpResolverType.BUILTIN_REF)  # fmt: skip
    want = ref.get_signature_runner("serving_default")(x=data["input_0"][:1])
    assert out.keys() == want.keys()
    for k in out:
        np.testing.assert_array_equal(out[k], want[k])
    # A batch of three resizes the subgraph on the fly.
    out3 = runner(x=data["input_0"])
    assert out3["probs"].shape == (3, 4)
    with pytest.raises(ValueError, match="missing \\['x'\\], unknown \\['y'\\]"):
        runner(y=data["input_0"])
    with pytest.raises(ValueError, match="no signature 'nope'"):
        rill.get_signature_runner("nope")


def test_signature_runner_without_signature_defs():
    model = build([T((2, 3)), T((2, 3))], [Op("RELU", [0], [1])], [0], [1])
    runner = Interpreter(model_content=model).get_signature_runner()
    out = runner(t0=np.array([[-1, 2, -3], [4, -5, 6]], np.float32))
    np.testing.assert_array_equal(out["t1"], [[0, 2, 0], [4, 0, 6]])


def test_signature_runner_with_signature_defs():
    model = build([T((2, 3)), T((2, 3))], [Op("RELU", [0], [1])], [0], [1],
                  signature={"key": "run", "inputs": {"a": 0}, "outputs": {"b": 1}})  # fmt: skip
    it = Interpreter(model_content=model)
    assert it.get_signature_list() == {"run": {"inputs": ["a"], "outputs": ["b"]}}
    out = it.get_signature_runner("run")(a=np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(out["b"], np.ones((2, 3)))


def test_intermediates_readable_by_index_and_name_when_preserved():
    data = np.load(FIXTURES / "cnn_int8.npz")
    rill, _ = _pair("cnn_int8", experimental_preserve_all_tensors=True)
    rill.allocate_tensors()
    rill.set_tensor(0, data["input_0"][:1])
    rill.invoke()
    details = {d["index"]: d["name"] for d in rill.get_tensor_details()}
    for key in data.files:
        if key.startswith("ref_tensor_"):
            i = int(key.rsplit("_", 1)[1])
            got = rill.get_tensor(i)
            np.testing.assert_array_equal(got, data[key])  # every int8 layer bit-exact
            np.testing.assert_array_equal(rill.get_tensor_by_name(details[i]), got)
    with pytest.raises(KeyError, match="no tensor named"):
        rill.get_tensor_by_name("nope")


def test_reused_intermediate_is_not_silently_wrong():
    rill, _ = _pair("cnn_float")
    rill.allocate_tensors()
    rill.set_tensor(0, np.ones((1, 28, 28, 1), np.float32))
    rill.invoke()
    plan_bytes = rill.arena_size
    # The first conv's output (#10) is dead after MAX_POOL and its bytes are reused later.
    with pytest.raises(ValueError, match="experimental_preserve_all_tensors=True"):
        rill.get_tensor(10)
    assert rill.get_tensor(rill.get_output_details()[0]["index"]).shape == (1, 10)
    preserved, _ = _pair("cnn_float", experimental_preserve_all_tensors=True)
    preserved.allocate_tensors()
    assert preserved.arena_size > plan_bytes


def test_tensor_view_and_get_tensor_copy():
    rill, _ = _pair("cnn_float")
    rill.allocate_tensors()
    view = rill.tensor(0)
    view()[...] = 0.5
    np.testing.assert_array_equal(rill.get_tensor(0), np.full((1, 28, 28, 1), 0.5, np.float32))
    copy = rill.get_tensor(0)
    copy[...] = 1.0
    assert float(view()[0, 0, 0, 0]) == 0.5


def test_constant_tensor_readable():
    rill, peer = _pair("cnn_float")
    rill.allocate_tensors()
    peer.allocate_tensors()
    np.testing.assert_array_equal(rill.get_tensor(8), peer.get_tensor(8))


def test_memory_plan_of_a_real_model():
    rill, _ = _pair("cnn_int8")
    rill.allocate_tensors()
    plan = rill.memory_plan()
    assert plan["arena_size"] == rill.arena_size
    assert plan["arena_size"] < plan["requested"]
    rows = plan["buffers"]
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            live = a["first"] <= b["last"] and b["first"] <= a["last"]
            overlap = (
                a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]
            )
            assert not (live and overlap and a["size"] and b["size"]), (a, b)


def test_op_resolver_type_and_threads_accepted():
    from rill.mobile.interpreter import OpResolverType as RillResolver

    path = str(FIXTURES / "cnn_float.tflite")
    it = Interpreter(model_path=path, num_threads=2,
                     experimental_op_resolver_type=RillResolver.BUILTIN_REF)  # fmt: skip
    it2 = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    assert it.get_input_details()[0]["shape"].tolist() == [1, 28, 28, 1]
    assert it2.get_input_details()[0]["shape"].tolist() == [1, 28, 28, 1]
    with pytest.raises(ValueError, match="delegates"):
        Interpreter(model_path=path, experimental_delegates=[object()])


def test_int8_model_input_quantization_details():
    x = quant((1, 4), np.int8, 0.5, -3)
    model = build([x, quant((1, 4), np.int8, 0.5, -3)], [Op("RELU", [0], [1])], [0], [1])
    d = Interpreter(model_content=model).get_input_details()[0]
    assert d["quantization"] == (0.5, -3)
    assert d["quantization_parameters"]["zero_points"].tolist() == [-3]


def test_operators_on_constants_are_folded_once():
    """DEQUANTIZE of constant int8 weights (dynamic-range models) runs in allocate_tensors; its
    output is a constant for FULLY_CONNECTED and takes no arena bytes."""
    from mobile.kernel_testing import check

    w = quant((6, 10), np.int8, [0.01 * (k + 1) for k in range(6)], [0] * 6,
              np.arange(60, dtype=np.int8).reshape(6, 10) - 30, quantized_dimension=0)  # fmt: skip
    tensors = [T((2, 10)), w, T((6, 10)), T((2, 6))]
    ops = [Op("DEQUANTIZE", [1], [2], None, 4), Op("FULLY_CONNECTED", [0, 2, -1], [3])]
    model = build(tensors, ops, [0], [3])
    x = np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 10)
    check(model, [x])
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    assert [b["name"] for b in it.memory_plan()["buffers"] if b["key"][0] == "t"] == ["t0", "t3"]
    np.testing.assert_allclose(it.get_tensor(2), w.data * np.float32(0.01) * np.arange(1, 7)[:, None],
                               rtol=1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="computed from constants"):
        it.set_tensor(2, np.zeros((6, 10), np.float32))


def _reshape_chain_model() -> bytes:
    """RELU → RESHAPE → EXPAND_DIMS → TANH, and a RELU6 that reads the reshape's output last."""
    tensors = [T((2, 6)), T((2, 6)), T((2,), np.int32, np.array([3, 4], np.int32)), T((3, 4)),
               T((1,), np.int32, np.array([0], np.int32)), T((1, 3, 4)), T((1, 3, 4)),
               T((3, 4))]  # fmt: skip
    ops = [Op("RELU", [0], [1]), Op("RESHAPE", [1, 2], [3]), Op("EXPAND_DIMS", [3, 4], [5]),
           Op("TANH", [5], [6]), Op("RELU6", [3], [7])]  # fmt: skip
    return build(tensors, ops, [0], [6, 7])


@pytest.mark.parametrize("preserve", [False, True])
def test_reshapes_share_their_input_bytes_and_are_skipped(preserve):
    it = Interpreter(model_content=_reshape_chain_model(),
                     experimental_preserve_all_tensors=preserve)  # fmt: skip
    it.allocate_tensors()
    x = np.linspace(-8, 8, 12, dtype=np.float32).reshape(2, 6)
    for _ in range(2):  # a second run on the same arena gives the same
        it.set_tensor(0, x)
        it.invoke()
        relu = np.maximum(x, 0).reshape(3, 4)
        if it._main.program is None:
            np.testing.assert_array_equal(it.get_tensor(6), np.tanh(relu)[None])
        else:  # a compiled program's tanh (rill.mobile.program) agrees to float rounding
            np.testing.assert_allclose(it.get_tensor(6), np.tanh(relu)[None], rtol=1e-6)
        np.testing.assert_array_equal(it.get_tensor(7), np.minimum(relu, 6))
    sg = it._main
    if preserve:  # every tensor keeps its own bytes; every operator runs
        assert len(sg.run) == 5
        np.testing.assert_array_equal(it.get_tensor(3), relu)
        np.testing.assert_array_equal(it.get_tensor(5), relu[None])
    else:
        assert len(sg.run) == 3 and sg.aliased == {3: 1, 5: 1}
        assert np.shares_memory(sg.arrays[3], sg.arrays[1])
        assert np.shares_memory(sg.arrays[5], sg.arrays[1])
        # the bytes stay the reshape's until RELU6, its last reader: nothing reuses them before
        np.testing.assert_array_equal(it.get_tensor(3), relu)
        assert not any(o in sg.clobbered for o in (1, 3, 5))
