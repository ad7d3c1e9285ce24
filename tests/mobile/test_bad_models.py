"""Bad models get clear errors naming the operator (its index) and what is wrong: an operator
version newer than the kernel, a WHILE whose body subgraph does not exist, a constant whose
buffer disagrees with its shape. The models are TensorFlow-made fixtures edited with LiteRT's
flatbuffer object API."""

from __future__ import annotations

import pathlib

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from rill.mobile.errors import ModelFormatError, PrepareError, UnsupportedOperatorError
from rill.mobile.interpreter import Interpreter

OPS = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "ops"


def _edit(name: str, change) -> bytes:
    model = schema.ModelT.InitFromPackedBuf((OPS / f"{name}.tflite").read_bytes(), 0)
    change(model)
    b = flatbuffers.Builder(0)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_operator_version_newer_than_the_kernel_is_named_with_its_index():
    def bump(model):
        for code in model.operatorCodes:
            code.version = 99

    with pytest.raises(UnsupportedOperatorError) as e:
        Interpreter(model_content=_edit("while_float", bump))
    assert "WHILE version 99 (operator #0)" in str(e.value)
    assert "WHILE (v1-1)" in str(e.value)  # what is supported, for comparison


def test_while_body_subgraph_out_of_range():
    def bad_body(model):
        model.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex = 7

    interp = Interpreter(model_content=_edit("while_float", bad_body))
    with pytest.raises(PrepareError, match=r"operator #0 WHILE \(version 1\): its "
                                           r"body_subgraph_index 7 is out of range: the model "
                                           r"has subgraphs 0..2"):  # fmt: skip
        interp.allocate_tensors()


def test_while_cond_subgraph_may_not_be_the_main_one():
    def bad_cond(model):
        model.subgraphs[0].operators[0].builtinOptions.condSubgraphIndex = 0

    interp = Interpreter(model_content=_edit("while_float", bad_cond))
    with pytest.raises(PrepareError, match="cond_subgraph_index 0 is out of range"):
        interp.allocate_tensors()


def test_constant_whose_shape_disagrees_with_its_buffer_names_its_operator():
    def bad_shape(model):
        sg = model.subgraphs[0]
        op = sg.operators[0]
        weights = sg.tensors[op.inputs[1]]
        weights.shape = np.array([9, 64], np.int32)  # the buffer holds [32, 64] int8

    with pytest.raises(ModelFormatError) as e:
        Interpreter(model_content=_edit("fully_connected_int8", bad_shape))
    msg = str(e.value)
    assert "holds 2048 bytes but shape [9, 64] of INT8 needs 576" in msg
    assert "read by operator #0 FULLY_CONNECTED" in msg


def test_while_that_works_runs_its_body_subgraphs():
    """The unedited model, for contrast: 3 iterations of y * 0.5 + 1."""
    interp = Interpreter(model_path=str(OPS / "while_float.tflite"))
    interp.allocate_tensors()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    want = x.copy()
    for _ in range(3):
        want = want * 0.5 + 1.0
    np.testing.assert_allclose(interp.get_tensor(interp.get_output_details()[0]["index"]), want)


def test_variables_persist_across_invokes():
    """v starts at arange(6) (CALL_ONCE's init subgraph); each invoke adds x and returns 2v."""
    interp = Interpreter(model_path=str(OPS / "variables_float.tflite"))
    interp.allocate_tensors()
    x = np.ones((2, 3), np.float32)
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        v = v + x
        np.testing.assert_allclose(interp.get_tensor(interp.get_output_details()[0]["index"]),
                                   2 * v)  # fmt: skip


def test_dynamic_shapes_run_eagerly_and_follow_the_values():
    """WHERE's output size depends on the data: the subgraph runs eagerly, every invoke."""
    interp = Interpreter(model_path=str(OPS / "where_float.tflite"))
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    out = interp.get_output_details()[0]["index"]
    for k in (0, 3, 12):
        x = np.zeros(12, np.float32)
        x[:k] = 1.0
        interp.set_tensor(d["index"], x.reshape(3, 4))
        interp.invoke()
        assert interp.get_tensor(out).shape == (k, 2)


@pytest.mark.parametrize("table_kind", ["float", "int8_per_tensor"])
def test_embedding_lookup_matches_litert(table_kind):
    """EMBEDDING_LOOKUP (TF's converter writes GATHER for Keras embeddings, so this one is built
    directly): rows of a float table, or of an int8 table scaled back (hybrid)."""
    from mobile.kernel_testing import fconst, qweights
    from mobile.tflite_builder import T, litert_run, rill_run, single_op

    rng = np.random.default_rng(2)
    if table_kind == "float":
        table = fconst(rng.standard_normal((10, 4)).astype(np.float32))
    else:
        table = qweights((10, 4), axis=None)
    ids = np.array([3, 0, 9, 9, 1, 3], np.int32)
    model = single_op("EMBEDDING_LOOKUP", [T((6,), np.int32), table], [T((6, 4), np.float32)])
    (want,) = litert_run(model, [ids])
    (got,) = rill_run(model, [ids])
    np.testing.assert_array_equal(got, want)


def _endless(model):
    # The body returns its inputs unchanged: the counter never reaches the bound.
    body = model.subgraphs[model.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex]
    body.outputs = np.array(body.inputs, np.int32)


def test_an_endless_while_is_stopped_by_cancel():
    """Found by tools/fuzz: a WHILE whose body keeps its counter loops forever (in LiteRT too);
    cancel() from another thread ends the invoke with InvokeError naming the operator. Whether
    cancel() lands before or during the invoke, the loop stops: no ordering by time."""
    import threading

    from rill.mobile.errors import InvokeError

    interp = Interpreter(model_content=_edit("while_float", _endless))
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], np.ones((2, 3), np.float32))
    out = {}

    def run():
        try:
            interp.invoke()
        except BaseException as e:  # noqa: BLE001 - inspected below
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    interp.cancel()
    t.join(120)
    assert not t.is_alive(), "the WHILE ran on after cancel()"
    assert isinstance(out.get("error"), InvokeError), out
    assert "operator #0 WHILE was cancelled (Interpreter.cancel)" in str(out["error"])
    # The request ended with that invoke: the next one runs (and is cancelled again).
    assert not interp.cancelled
