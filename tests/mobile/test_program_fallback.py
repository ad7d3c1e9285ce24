"""Whole-subgraph programs and fused int8 runs fall back to the per-operator path when their
compiled kernels cannot be compiled, whatever the error (the kernels pass numba an internal
option, `_nrt`, that a future numba may drop): allocate_tensors still succeeds and the outputs
are the per-operator path's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from rill.mobile import program, program_int8
from rill.mobile.interpreter import Interpreter

pytest.importorskip("numba")

from rill.mobile.kernels import _program_int8, _program_loops  # noqa: E402

MODELS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tflite" / "models"


pytestmark = pytest.mark.usefixtures("programs_on")


def _outputs(name: str, on: bool):
    data = np.load(MODELS / f"{name}.npz")
    old = program.set_enabled(on)
    try:
        it = Interpreter(model_path=str(MODELS / f"{name}.tflite"))
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], data["input_0"])
        it.invoke()
        return it, it.get_tensor(it.get_output_details()[0]["index"])
    finally:
        program.set_enabled(old)


def _fused(it) -> int:
    return sum(isinstance(f, program_int8.FusedRun) for f in it._main.run)


def _raiser(exc):
    def compile_run():
        raise exc

    return compile_run


ERRORS = [KeyError("Unrecognized options: {'_nrt'}"), TypeError("unexpected keyword '_nrt'"),
          RuntimeError("a numba error"), ImportError("no numba")]  # fmt: skip


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_float_programs_fall_back_when_compiling_fails(monkeypatch, exc):
    _, want = _outputs("kws_cnn_float", False)
    monkeypatch.setattr(program._loops, "module", None)
    monkeypatch.setattr(program._loops, "failed", False)
    calls = []
    failing = _raiser(exc)
    monkeypatch.setattr(_program_loops, "compile_run", lambda: (calls.append(1), failing()))
    it, got = _outputs("kws_cnn_float", True)
    assert it._main.program is None
    np.testing.assert_array_equal(got, want)
    _outputs("kws_cnn_float", True)  # a failed compile is not tried again
    assert len(calls) == 1


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_fused_int8_runs_fall_back_when_compiling_fails(monkeypatch, exc):
    it, want = _outputs("kws_cnn_int8", False)
    assert _fused(it) == 0
    monkeypatch.setattr(program_int8._loops, "module", None)
    monkeypatch.setattr(program_int8._loops, "failed", False)
    monkeypatch.setattr(_program_int8, "compile_run", _raiser(exc))
    it, got = _outputs("kws_cnn_int8", True)
    assert _fused(it) == 0
    np.testing.assert_array_equal(got, want)


def test_a_numba_without_the_nrt_option(tmp_path):
    """A real compile in a fresh process whose numba no longer knows `_nrt` (numba's cache in
    an empty folder, so nothing compiled before is loaded): both kinds of program fall back."""
    code = (
        "import numba.core.cpu as cpu\n"
        "owner = [k for k in cpu.CPUTargetOptions.__mro__ if '_nrt' in vars(k)]\n"
        "delattr(owner[0], '_nrt')\n"
        "from rill.mobile.interpreter import Interpreter\n"
        "from rill.mobile.program_int8 import FusedRun\n"
        f"f = Interpreter(model_path={str(MODELS / 'kws_cnn_float.tflite')!r})\n"
        "f.allocate_tensors()\n"
        f"q = Interpreter(model_path={str(MODELS / 'kws_cnn_int8.tflite')!r})\n"
        "q.allocate_tensors()\n"
        "print(f._main.program is None, any(isinstance(r, FusedRun) for r in q._main.run))\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), RILL_JIT="1", RILL_JIT_PROGRAM="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600, check=True)  # fmt: skip
    assert out.stdout.strip() == "True False", out.stderr
