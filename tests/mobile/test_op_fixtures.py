"""One model per operator (and small whole models), made by TensorFlow 2.21's converter in every
type it emits (tools/fixtures/make_tflite_op_fixtures.py), run by rill's interpreter and compared
with LiteRT's reference kernels on every tensor an operator of the main subgraph writes:
integer and bool tensors exactly (int8: 0 quanta), float tensors within 1e-5 relative.

A fixture rill cannot run yet is listed in GAPS with the reason; its test checks that rill says
so with a clear error (and fails once it starts working, so that the list stays true).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from rill.mobile.errors import PrepareError, UnsupportedOperatorError
from rill.mobile.interpreter import Interpreter

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


def _fixtures(folder: str) -> list[str]:
    manifest = json.loads((ROOT / folder / "manifest.json").read_text())
    return sorted(k for k in manifest if k not in ("skipped", "tensorflow"))


OPS = _fixtures("ops")
MODELS = _fixtures("models")

# Fixture → why rill does not run it yet.
GAPS: dict[str, str] = {}

# Float tolerance per fixture where 1e-5 relative cannot hold. In a chain of hybrid layers, an
# input that differs from LiteRT's by float rounding (1e-7) can round to the neighbouring int8
# code when the next hybrid layer quantizes it, which moves that layer's outputs by one input
# quantum times a weight. Each hybrid operator on its own agrees to float rounding (the
# *_dynamic operator fixtures, at 1e-5).
FLOAT_RTOL: dict[str, float] = {"unet_dynamic": 2e-3}


def _compare(name: str, what: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "fc":
        rtol = FLOAT_RTOL.get(name, 1e-5)
        atol = rtol * float(np.max(np.abs(want), initial=0.0))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# Models whose BUILTIN_REF run aborts inside LiteRT 2.21 (in allocate_tensors): their recorded
# outputs come from LiteRT's optimized builtin kernels, whose int8 rounding differs from the
# reference kernels' in places; only the final outputs are compared, within one quantum. (Every
# int8 operator they use is bit-exact with BUILTIN_REF in the other fixtures.)
NO_REFERENCE = {"mobilenet_v2_int8"}


def _run(folder: str, name: str) -> None:
    data = np.load(ROOT / folder / f"{name}.npz")
    interp = Interpreter(model_path=str(ROOT / folder / f"{name}.tflite"),
                         experimental_preserve_all_tensors=True)  # fmt: skip
    ins = interp.get_input_details()
    for i, d in enumerate(ins):
        x = data[f"input_{i}"]
        if tuple(d["shape"]) != x.shape:
            interp.resize_tensor_input(d["index"], x.shape)
    interp.allocate_tensors()
    for i, d in enumerate(ins):
        interp.set_tensor(d["index"], data[f"input_{i}"])
    interp.invoke()
    if name in NO_REFERENCE:
        for j, d in enumerate(interp.get_output_details()):
            got, want = interp.get_tensor(d["index"]), data[f"ref_output_{j}"]
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.abs(got.astype(np.int64) - want).max() <= 1, f"{name}: output {j}"
        return
    for key in data.files:
        if key.startswith("ref_tensor_"):
            index = int(key.rsplit("_", 1)[1])
            _compare(name, f"{name}: tensor #{index}", interp.get_tensor(index), data[key])
    for j, d in enumerate(interp.get_output_details()):
        _compare(name, f"{name}: output {j}", interp.get_tensor(d["index"]),
                 data[f"ref_output_{j}"])  # fmt: skip


def _check(folder: str, name: str) -> None:
    if name in GAPS:
        # Refused with a clear error naming the operator.
        with pytest.raises((UnsupportedOperatorError, PrepareError)) as e:
            _run(folder, name)
        assert "operator #" in str(e.value)
        return
    _run(folder, name)


def test_gaps_name_existing_fixtures():
    assert set(GAPS) <= set(OPS) | set(MODELS)


@pytest.mark.parametrize("name", OPS)
def test_operator_fixture_matches_litert_reference(name):
    _check("ops", name)


@pytest.mark.parametrize("name", MODELS)
def test_model_fixture_matches_litert_reference(name):
    _check("models", name)
