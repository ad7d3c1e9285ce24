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


# Float products as the kernels make them: a U-Net's 3x3 convolution with its bias column
# ([256, 289] x [289, 16]) and a 1x1 one ([1024, 217] x [217, 8]), MobileNetV2's last 1x1
# convolution ([9, 112] x [112, 1280]): their threaded OpenBLAS products (Haswell kernels) differ
# from one thread's; a product under OpenBLAS's threading threshold; a transposed im2col
# operand (cols.T: "T", [K, M] stored); a batched one.
_PRODUCTS = [((256, 289), (289, 16)), ((1024, 217), (217, 8)), ((9, 112), (112, 1280)),
             ((2304, 28), (28, 16)), ((8, 8), (8, 8)), ((289, 256, "T"), (289, 16)),
             ((3, 64, 96), (3, 96, 80))]  # fmt: skip


def _operands(rng, sa, sb, dtype=np.float32):
    if sa[-1] == "T":
        a = rng.standard_normal(sa[:-1]).astype(dtype).T
    else:
        a = rng.standard_normal(sa).astype(dtype)
    return a, rng.standard_normal(sb).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_gives_one_threads_bits(needs_blas, dtype):
    """threads.matmul on 2 or 4 BLAS threads gives the bits of np.matmul on one, with and
    without an output array, whatever this machine's BLAS does with threads."""
    rng = np.random.default_rng(0)
    for sa, sb in _PRODUCTS:
        a, b = _operands(rng, sa, sb, dtype)
        with threads.blas_limit(1):
            one = np.matmul(a, b)
        for n in (2, 4):
            with threads.blas_limit(n):
                got = threads.matmul(a, b)
                out = np.empty_like(one)
                threads.matmul(a, b, out=out)
            assert np.array_equal(got, one) and np.array_equal(out, one), (sa, sb, n)


def test_matmul_keeps_the_threads_only_where_exact(needs_blas, monkeypatch):
    """A product threaded_exact accepts runs on the invoke's threads; any other on one, and
    the invoke's count is back after it."""
    seen = []

    def gemm(a, b, out=None):
        seen.append(threads.blas_threads())
        return np.matmul(a, b, out=out)

    monkeypatch.setattr(threads, "_gemm", gemm)
    a = np.ones((64, 64), np.float32)
    for exact, want in ((True, 2), (False, 1)):
        monkeypatch.setattr(threads, "threaded_exact", lambda *args, v=exact: v)
        with threads.blas_limit(2):
            threads.matmul(a, a)
            assert seen[-1] == want
            assert threads.blas_threads() == 2 and threads._now[0] == 2
        assert threads._now[0] == 1
    monkeypatch.setattr(threads, "threaded_exact", None)  # outside an invoke: not called
    threads.matmul(a, a)
    assert len(seen) == 3


def test_threaded_exact_verdicts(needs_blas):
    """A verdict holds for other values of the same layout (it is one of the layout, not of
    the values), is kept, and integer products (numpy's own loops) are exact."""
    rng = np.random.default_rng(1)
    for sa, sb in _PRODUCTS:
        a, b = _operands(rng, sa, sb)
        with threads.blas_limit(2):
            verdict = threads.threaded_exact(a, b, None, 2)
            assert threads.threaded_exact(a, b, None, 2) is verdict
            c, d = _operands(rng, sa, sb)
            many = np.matmul(c, d)
            with threads.blas_limit(1):
                one = np.matmul(c, d)
        if verdict:
            assert np.array_equal(many, one), (sa, sb)
    i = np.arange(64 * 64, dtype=np.int64).reshape(64, 64)
    with threads.blas_limit(2):
        assert threads.threaded_exact(i, i, None, 2)


def test_bad_num_threads():
    with pytest.raises(ValueError, match="num_threads"):
        Interpreter(model_path=str(SMALL), num_threads=-2)
    assert Interpreter(model_path=str(SMALL), num_threads=3).num_threads == 3


def test_blas_limit_takes_effect_on_any_thread(needs_blas):
    # threadpoolctl 3.8 lets one Python thread set OpenBLAS's count and ignores the others'; an
    # invoke on another thread (a server's, say) must still get the count it asks for.
    import threading

    import threadpoolctl

    seen = []

    def invoke():
        with threads.blas_limit(1):
            seen.append(threads.blas_threads())
        seen.append(threads.blas_threads())

    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # this thread takes the control
        t = threading.Thread(target=invoke)
        t.start()
        t.join(timeout=30)
        assert not t.is_alive()
        assert seen == [1, 2]
        assert threads.blas_threads() == 2
