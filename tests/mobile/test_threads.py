"""Interpreter(num_threads=...): the BLAS threads an invoke runs with (rill.mobile.threads).

The count is read inside a kernel during invoke (threadpoolctl), never inferred from timings; the
machine's load is replaced by a fixed figure so that the tests do not depend on it.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from rill.mobile import program, threads
from rill.mobile.interpreter import Interpreter

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
BIG = FIXTURES / "models" / "mobilenet_v2_float.tflite"  # largest product above GEMM_GRAIN
SMALL = FIXTURES / "models" / "transformer_block_float.tflite"  # all products below it


def _can_use_two() -> bool:
    """Whether this thread can set the BLAS library to two threads (and back): there is a
    BLAS threadpoolctl controls, and no other live thread holds OpenBLAS's controls."""
    if threads.blas_threads() is None:
        return False
    with threads.blas_limit(2):
        ok = threads.blas_threads() == 2
    return ok


@pytest.fixture(autouse=True)
def _per_operator():
    """The BLAS bound applies to the per-operator path; a whole-subgraph program
    (rill.mobile.program) uses no BLAS, so these tests keep programs off."""
    old = program.set_enabled(False)
    yield
    program.set_enabled(old)


@pytest.fixture
def needs_blas():
    if not _can_use_two():
        pytest.skip("no BLAS whose threads this thread can set to 2")


@pytest.fixture
def idle(monkeypatch, needs_blas):
    """A machine whose every core is idle: cores_idle() reports `n` (default 4)."""
    state = {"n": 4}
    monkeypatch.setattr(threads, "cores_idle", lambda: state["n"])
    return state


def _run(path, num_threads, seen: list | None = None):
    """Runs the fixture's first input; `seen` gets the BLAS thread count read by a wrapper
    around the first and last kernels while invoke runs."""
    interp = Interpreter(model_path=str(path), num_threads=num_threads)
    interp.allocate_tensors()
    x = np.load(path.with_suffix(".npz"))["input_0"][:1]
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    if seen is not None:
        run = interp._main.run

        def watch(f):
            def g():
                seen.append(threads.blas_threads())
                f()

            return g

        run[0], run[-1] = watch(run[0]), watch(run[-1])
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def test_invoke_threads_policy():
    big, small = threads.GEMM_GRAIN * 4, threads.GEMM_GRAIN // 2
    for default in (None, -1, 0, 1):  # LiteRT's default runs single-threaded; 0 means 1
        assert threads.invoke_threads(default, big) == 1
    assert threads.invoke_threads(3, small) == 1  # small products: one thread
    assert 1 <= threads.invoke_threads(3, big) <= 3
    assert 1 <= threads.cores_idle() <= threads._CPUS


def test_num_threads_bounds_blas_threads_during_invoke(idle):
    before = threads.blas_threads()
    for num_threads, want in ((2, 2), (1, 1), (None, 1), (-1, 1)):
        seen = []
        _run(BIG, num_threads, seen)
        assert seen == [want, want], (num_threads, seen)
        assert threads.blas_threads() == before  # the previous count comes back after invoke
    idle["n"] = 1  # every core busy: one thread whatever num_threads says
    seen = []
    _run(BIG, 2, seen)
    assert seen == [1, 1]


def test_small_model_runs_single_threaded(idle):
    interp = Interpreter(model_path=str(SMALL), num_threads=2)
    interp.allocate_tensors()
    assert interp._main.gemm_work < threads.GEMM_GRAIN
    seen = []
    _run(SMALL, 2, seen)
    assert seen == [1, 1]


def test_signature_runner_is_bounded_too(idle):
    interp = Interpreter(model_path=str(BIG), num_threads=2)
    runner = interp.get_signature_runner()
    runner.allocate_tensors()
    sg = runner._sg
    seen = []
    f = sg.run[0]

    def watch():
        seen.append(threads.blas_threads())
        f()

    sg.run[0] = watch
    name = next(iter(runner.get_input_details()))
    x = np.load(BIG.with_suffix(".npz"))["input_0"][:1]
    runner(**{name: x})
    assert seen == [2]


@pytest.mark.parametrize(
    "name",
    ["cnn_float", "cnn_int8", "models/mobilenet_v2_float", "models/mobilenet_v2_int8",
     "models/kws_cnn_float", "models/unet_float", "models/mobilenet_v2_dynamic"],
)  # fmt: skip
def test_results_identical_for_one_and_several_threads(idle, name):
    path = FIXTURES / f"{name}.tflite"
    one = _run(path, 1)
    for n in (2, 4):
        many = _run(path, n)
        for a, b in zip(one, many):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (name, n)


def test_bad_num_threads():
    with pytest.raises(ValueError, match="num_threads"):
        Interpreter(model_path=str(SMALL), num_threads=-2)
    assert Interpreter(model_path=str(SMALL), num_threads=3).num_threads == 3
