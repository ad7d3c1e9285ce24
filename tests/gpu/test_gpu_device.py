"""The real GPU suite (marker `gpu`; skipped without cupy and a CUDA device): every op sample,
forward and gradient, on the GPU against the CPU with per-dtype tolerances
(op_samples._device_check.TOLERANCES), the extras, the Figure 1 MLP and the CNN trained on the
GPU to the CPU's accuracy, and the device's error paths.

Set RILL_GPU_REPORT=path.json to write the counts (samples run / matching / failing, with the
failures' messages)."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest
from op_samples import load_all
from op_samples._device_check import EXTRAS, compare

import rill.graph as rg
from rill.exec import ConfigProto, Session
from rill.exec.device import gpu_available
from rill.graph.errors import InvalidArgumentError, ResourceExhaustedError

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_available() == 0, reason="needs cupy and a CUDA device"),
    pytest.mark.no_roundtrip("GPU runs; round trips are checked by the CPU suites"),
]

SAMPLES = load_all()
_RESULTS: dict = {}
CPU_ONLY = ConfigProto(device_count={"GPU": 0})


def _write_report():
    path = os.environ.get("RILL_GPU_REPORT")
    if not path or not _RESULTS:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # one file per xdist worker; tools/gpu_check.sh adds them up
        path = f"{path}.{worker}"
    fails = {k: v for k, v in _RESULTS.items() if not v["ok"]}
    on_gpu = sum(1 for v in _RESULTS.values() if v["op_on_gpu"])
    extras = [k for k in _RESULTS if k.startswith("extra-")]
    pathlib.Path(path).write_text(json.dumps({
        "samples_run": len(_RESULTS),
        "of_which_extras": len(extras),
        "matching": len(_RESULTS) - len(fails),
        "failing": len(fails),
        "sample_op_ran_on_gpu": on_gpu,
        "failures": {k: v["msg"] for k, v in fails.items()},
    }, indent=1))  # fmt: skip


def _cases():
    for op in sorted(SAMPLES):
        for s in SAMPLES[op]:
            for grad in (False, True):
                yield pytest.param(s, grad, id=f"{s.id}-{'grad' if grad else 'fwd'}")
    for s in EXTRAS:
        yield pytest.param(s, False, id=f"extra-{s.op_type}-fwd")
        if s.name == "extra-grad":
            yield pytest.param(s, True, id=f"extra-{s.op_type}-grad")


@pytest.mark.parametrize("s,grad", list(_cases()))
def test_sample_on_gpu_matches_cpu(s, grad):
    ok, msg, on_gpu = compare(s, grad)
    key = f"{'extra-' + s.op_type if s.name.startswith('extra') else s.id}-"
    key += "grad" if grad else "fwd"
    _RESULTS[key] = {"ok": ok, "msg": msg, "op_on_gpu": s.op_type in on_gpu}
    _write_report()  # after every case: a run stopped at its time limit still reports
    assert ok, msg


def _placed(sess):
    out = {}
    for plan in sess._plans.values():
        for n in plan.plan_graph.nodes:
            out.setdefault(n.device.device_type, set()).add(n.type)
    return out


def _demo():
    ex = str(pathlib.Path(__file__).resolve().parents[2] / "examples")
    if ex not in sys.path:
        sys.path.insert(0, ex)
    import demo
    import digits

    return demo, digits


def _train_eval(build, steps, batch, gpu):
    demo, digits = _demo()
    train_set, test_set = digits.load()
    g, m = build()
    with g.as_default():
        init = rg.global_variables_initializer()
    src = digits.batches(train_set, batch, seed=3)
    with Session(graph=g, config=None if gpu else CPU_ONLY) as sess:
        sess.run(init)
        for _ in range(steps):
            xb, yb = next(src)
            sess.run(m["train"], {m["x"]: xb, m["y"]: np.eye(10, dtype=np.float32)[yb]})
        acc = sess.run(m["accuracy"], {m["x"]: test_set.images, m["y"]: test_set.one_hot})
        return float(acc), _placed(sess)


def test_figure1_mlp_trains_on_gpu_to_cpu_accuracy():
    demo, _ = _demo()
    acc_gpu, placed = _train_eval(demo.figure1, 1500, 100, gpu=True)
    acc_cpu, _ = _train_eval(demo.figure1, 1500, 100, gpu=False)
    print(f"MLP test accuracy: GPU {acc_gpu:.4f}, CPU {acc_cpu:.4f}")
    assert {"MatMul", "ResourceApplyAdagrad", "SoftmaxCrossEntropyWithLogits"} <= placed["GPU"]
    assert acc_gpu >= 0.95 and abs(acc_gpu - acc_cpu) <= 0.02


def test_cnn_trains_on_gpu_to_cpu_accuracy():
    demo, _ = _demo()
    acc_gpu, placed = _train_eval(demo.small_cnn, 300, 64, gpu=True)
    acc_cpu, _ = _train_eval(demo.small_cnn, 300, 64, gpu=False)
    print(f"CNN test accuracy: GPU {acc_gpu:.4f}, CPU {acc_cpu:.4f}")
    assert {"Conv2D", "Conv2DBackpropFilter", "MaxPoolGrad", "ResourceApplyMomentum"} <= placed[
        "GPU"
    ]
    assert acc_gpu >= 0.97 and abs(acc_gpu - acc_cpu) <= 0.02


def test_fetches_are_numpy_and_feeds_reach_the_gpu():
    import cupy

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3])
        y = rg.exp(x) * 2.0
    with Session(graph=g) as sess:
        out = sess.run(y, {x: np.ones(3, np.float32)})
        assert type(out) is np.ndarray and not isinstance(out, cupy.ndarray)
        np.testing.assert_allclose(out, 2 * np.e, rtol=1e-6)
        assert {"Exp", "Mul"} <= _placed(sess)["GPU"]


@pytest.mark.parametrize("soft", [False, True])
def test_nonexistent_gpu(soft):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2])
        with g.device(f"/device:GPU:{gpu_available() + 1}"):
            y = x * 3.0
    with Session(graph=g, config=ConfigProto(allow_soft_placement=soft)) as sess:
        if soft:
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [3.0, 6.0])
        else:
            with pytest.raises(InvalidArgumentError, match="no device matches"):
                sess.run(y, {x: [1.0, 2.0]})
        np.testing.assert_allclose(sess.run(x + 1.0, {x: [1.0, 2.0]}), [2.0, 3.0])


def test_out_of_memory_is_resource_exhausted_and_session_survives():
    import cupy

    pool = cupy.get_default_memory_pool()
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None])
        big = rg.tile(x, [1 << 16], name="big_tile")
        small = x * 2.0
    old = pool.get_limit()
    with Session(graph=g) as sess:
        sess.run(small, {x: np.ones(4, np.float32)})
        pool.set_limit(size=pool.total_bytes() + (64 << 20))
        try:
            with pytest.raises(ResourceExhaustedError, match=r"big_tile.*bytes"):
                sess.run(big, {x: np.ones(1 << 12, np.float32)})  # 1 GiB asked
        finally:
            pool.set_limit(size=old)
        np.testing.assert_allclose(sess.run(small, {x: np.ones(4, np.float32)}), 2.0)


def _lstm(swap: bool, steps: int = 600):
    import rill.train as rt

    g = rg.Graph()
    with g.as_default():
        g.seed = 0
        x = rg.placeholder(rg.float32, [steps, 32, 64])
        out, _ = rt.dynamic_rnn(rt.BasicLSTMCell(256), x, dtype=rg.float32, time_major=True,
                                swap_memory=swap)  # fmt: skip
        loss = rg.reduce_mean(rg.square(out))
        train = rt.GradientDescentOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    xv = np.random.default_rng(0).standard_normal((steps, 32, 64)).astype(np.float32)
    return g, x, xv, loss, train, init


def test_swap_memory_trains_an_lstm_whose_activations_exceed_the_memory_cap():
    """With swap_memory the saved forward values go to host memory; under a memory-pool cap
    they do not fit into, the step fails without it (ResourceExhaustedError) and trains with it."""
    import cupy

    pool = cupy.get_default_memory_pool()
    old = pool.get_limit()
    g, x, xv, loss, train, init = _lstm(swap=True)
    with Session(graph=g) as sess:
        gpu = sess._devices[-1]
        sess.run(init)
        sess.run(train, {x: xv})
        assert "StackPushV2" in _placed(sess)["GPU"]
        saved = gpu.swapped_bytes  # the activations one step keeps for its gradient
    assert saved > 100 << 20, saved
    import gc

    results = {}
    for swap in (False, True):
        g, x, xv, loss, train, init = _lstm(swap)
        with Session(graph=g) as sess:
            sess.run(init)
            first = sess.run(loss, {x: xv})
            gc.collect()
            pool.free_all_blocks()
            # Room for 80% of the saved activations above what the session holds now.
            pool.set_limit(size=pool.used_bytes() + saved * 4 // 5)
            try:
                for _ in range(2):
                    sess.run(train, {x: xv})
                results[swap] = bool(sess.run(loss, {x: xv}) < first)
            except ResourceExhaustedError as e:
                results[swap] = f"ResourceExhaustedError: {e.message[:200]}"  # no traceback kept
            finally:
                pool.set_limit(size=old)
        del g, sess
        gc.collect()
        pool.free_all_blocks()
    print(f"saved activations {saved / 2**20:.0f} MiB; results {results}")
    assert str(results[False]).startswith("ResourceExhaustedError"), results
    assert results[True] is True, results


def _lstm_model(dynamic: bool):
    import rill.train as rt

    g = rg.Graph()
    with g.as_default():
        g.seed = 0
        x = rg.placeholder(rg.float32, [6, 8, 12], name="x")
        if dynamic:
            out, _ = rt.dynamic_rnn(rt.BasicLSTMCell(16), x, dtype=rg.float32, time_major=True)
        else:
            out, _ = rt.static_rnn(rt.BasicLSTMCell(16), rg.unstack(x), dtype=rg.float32)
            out = rg.stack(out)
        loss = rg.reduce_mean(rg.square(out))
        train = rt.GradientDescentOptimizer(0.5).minimize(loss)
    rng = np.random.default_rng(1)
    return (
        g,
        {"x": x, "loss": loss, "train": train},
        lambda i: {x: rng.standard_normal((6, 8, 12)).astype(np.float32)},
    )


def _demo_model(name):
    demo, digits = _demo()
    g, m = {"mlp": demo.figure1, "cnn": demo.small_cnn}[name]()
    train_set, _ = digits.load()
    src = digits.batches(train_set, 64, seed=3)

    def feeds(i):
        xb, yb = next(src)
        return {m["x"]: xb, m["y"]: np.eye(10, dtype=np.float32)[yb]}

    return g, m, feeds


@pytest.mark.parametrize("which", ["mlp", "cnn", "lstm_static", "lstm_dynamic"])
def test_captured_steps_match_uncaptured_steps(which, monkeypatch):
    """CUDA graphs (rill.exec.step_graphs): the same train steps with and without capture give
    the same losses and variables, and the captured session replays its step."""
    runs = {}
    for graphs in (False, True):
        monkeypatch.setenv("RILL_CUDA_GRAPHS", "1" if graphs else "0")
        if which.startswith("lstm"):
            g, m, feeds = _lstm_model(which == "lstm_dynamic")
        else:
            g, m, feeds = _demo_model(which)
        with g.as_default():
            init = rg.global_variables_initializer()
            variables = rg.global_variables()
        with Session(graph=g) as sess:
            sess.run(init)
            losses = [float(sess.run([m["loss"], m["train"]], feeds(i))[0]) for i in range(12)]
            vals = sess.run(variables)
            state = [(p.graphs.captures, p.graphs.replays, p.graphs.off)
                     for p in sess._plans.values() if p.graphs is not None]  # fmt: skip
            placed = _placed(sess)
        runs[graphs] = (losses, vals, state)
    print(f"{which}: graphs (captures, replays, why off) {runs[True][2]}; CPU ops "
          f"{sorted(placed.get('CPU', ()))}")  # fmt: skip
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-6)
    for a, b in zip(runs[True][1], runs[False][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert any(rep > 0 for _, rep, off in runs[True][2] if off is None), runs[True][2]
    assert not runs[False][2]
