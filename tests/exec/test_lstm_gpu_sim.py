"""The fused LSTM cell's GPU kernels (rill.exec.kernels.gpu.rnn) on the simulated GPU: train
steps of BasicLSTMCell / LSTMCell RNNs (static_rnn, dynamic_rnn's while loop) give the CPU's
loss and updated weights with LSTMBlockCell and LSTMBlockCellGrad placed on the GPU; cell
clipping and float16; the CPU's errors for bad shapes; no device value read on the host; the
fused path's plumbing and its fallback, with a stand-in `fuse`."""

from __future__ import annotations

import types

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff import gradients
from rill.exec import ConfigProto, Session, simgpu
from rill.exec.kernels.gpu import rnn as gpu_rnn
from rill.exec.simgpu import SimArray, simcupy, simulated_gpus
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.rnn_ops import lstm_block_cell

T, B, D, N = 4, 3, 5, 6
CPU_ONLY = ConfigProto(device_count={"GPU": 0})
LSTM_OPS = {"LSTMBlockCell", "LSTMBlockCellGrad"}


def _placed(sess) -> dict:
    out: dict = {}
    for plan in sess._plans.values():
        for n in plan.plan_graph.nodes:
            out.setdefault(n.device.device_type, set()).add(n.type)
    return out


def _session(g, gpu: bool) -> Session:
    if not gpu:
        return Session(graph=g, config=CPU_ONLY)
    with simulated_gpus(1):
        return Session(graph=g)


# -- train steps --------------------------------------------------------------------------------

CELLS = {
    "basic": lambda: rt.BasicLSTMCell(N, forget_bias=0.5),
    "peepholes": lambda: rt.LSTMCell(N, use_peepholes=True),
}


def _train_graph(make_cell, unroll: str):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [T, B, D], name="x")
        cell = make_cell()
        if unroll == "static":
            outs, state = rt.static_rnn(cell, rg.unstack(x), dtype=rg.float32)
            out = rg.stack(outs)
        else:
            out, state = rt.dynamic_rnn(cell, x, dtype=rg.float32, time_major=True)
        loss = rg.reduce_sum(rg.square(out)) + rg.reduce_sum(state[0] * 0.5)
        train = rt.GradientDescentOptimizer(0.1).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, loss, train, init, list(cell.trainable_variables)


def _train(make_cell, unroll: str, gpu: bool):
    """(loss before and after two steps, the weights after them, op types on the GPU)."""
    g, x, loss, train, init, variables = _train_graph(make_cell, unroll)
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((T, B, D)).astype(np.float32)
    sess = _session(g, gpu)
    with sess:
        sess.run(init)
        for v in variables:  # the same weights on both (the GPU's initializers draw others)
            v.load(rng.uniform(-0.5, 0.5, v.shape.as_list()).astype(np.float32), sess)
        losses = [sess.run([loss, train], {x: xv})[0] for _ in range(2)]
        losses.append(sess.run(loss, {x: xv}))
        weights = sess.run(variables)
        return losses, weights, _placed(sess).get("GPU", set())


@pytest.mark.parametrize("unroll", ["static", "dynamic"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_train_step_on_simulated_gpu_matches_cpu(cell, unroll):
    want_losses, want_w, _ = _train(CELLS[cell], unroll, gpu=False)
    got_losses, got_w, on_gpu = _train(CELLS[cell], unroll, gpu=True)
    assert on_gpu >= LSTM_OPS
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    assert want_losses[-1] < want_losses[0]  # the steps train
    for a, b in zip(got_w, want_w):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# -- the op itself: clipping, peepholes, float16 -------------------------------------------------

SHAPES = [(B, D), (B, N), (B, N), (D + N, 4 * N), (N,), (N,), (N,), (4 * N,)]


def _values(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _cell_graph(dtype, forget_bias, clip, peep, shapes=SHAPES):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(dtype, s) for s in shapes]
        outs = lstm_block_cell(*phs, forget_bias=forget_bias, cell_clip=clip, use_peephole=peep)
        rng = np.random.default_rng(9)
        k1 = rg.constant(rng.standard_normal((B, N)).astype(dtype.np))
        k2 = rg.constant(rng.standard_normal((B, N)).astype(dtype.np))
        loss = rg.reduce_sum(outs[6] * k1) + rg.reduce_sum(outs[1] * k2)
        grads = gradients(loss, phs)
    return g, phs, outs + grads


def _run_cell(vals, dtype, forget_bias, clip, peep, gpu):
    g, phs, fetches = _cell_graph(dtype, forget_bias, clip, peep)
    sess = _session(g, gpu)
    with sess:
        got = sess.run(fetches, dict(zip(phs, vals)))
        return got, _placed(sess).get("GPU", set())


@pytest.mark.parametrize(
    "dtype, forget_bias, clip, peep",
    [(rg.float32, 1.0, -1.0, False), (rg.float32, 0.5, 0.3, True), (rg.float32, 0.0, 0.8, False),
     (rg.float16, 1.0, -1.0, True), (rg.float16, 0.5, 0.5, False)],
)  # fmt: skip
def test_cell_and_gradient_on_simulated_gpu_match_cpu(dtype, forget_bias, clip, peep):
    vals = _values(dtype.np)
    want, _ = _run_cell(vals, dtype, forget_bias, clip, peep, gpu=False)
    got, on_gpu = _run_cell(vals, dtype, forget_bias, clip, peep, gpu=True)
    assert on_gpu >= LSTM_OPS
    tol = 1e-5 if dtype == rg.float32 else 2e-2
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype == dtype.np and a.shape == b.shape, k
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"fetch {k}")
    if clip > 0:
        assert np.abs(got[1]).max() <= clip


# -- errors ---------------------------------------------------------------------------------------


def _error(gpu: bool, bad: int, shape) -> str:
    shapes = [None] * 8  # unknown shapes: the kernel, not shape inference, sees the mismatch
    g, phs, fetches = _cell_graph(rg.float32, 1.0, -1.0, True, shapes)
    vals = _values(np.float32)
    vals[bad] = np.ones(shape, np.float32)
    with _session(g, gpu) as sess:
        with pytest.raises(InvalidArgumentError) as e:
            sess.run(fetches, dict(zip(phs, vals)))
        if gpu:
            assert _placed(sess).get("GPU", set()) >= LSTM_OPS
    return str(e.value)


@pytest.mark.parametrize(
    "bad, shape, message",
    [(3, (D + N + 1, 4 * N), "w must be [input size + cell size, 4 * cell size]"),
     (4, (N + 1,), f"wci must be [{N}], got [{N + 1}]"),
     (7, (4 * N - 1,), f"b must be [{4 * N}], got [{4 * N - 1}]")],
)  # fmt: skip
def test_bad_shapes_give_the_cpu_error_on_the_gpu(bad, shape, message):
    cpu, gpu = _error(False, bad, shape), _error(True, bad, shape)
    assert message in cpu and message in gpu
    assert cpu.splitlines()[0] == gpu.splitlines()[0]


def test_gradient_kernel_checks_its_gate_shapes():
    compute = gpu_rnn.lstm_block_cell_grad(use_peephole=False, T=rg.float32, xp=simcupy)
    d = [simcupy.asarray(v) for v in _values(np.float32)]
    gates = [simcupy.zeros((B, N), np.float32) for _ in range(8)]
    gates[2] = simcupy.zeros((B, N + 1), np.float32)
    with pytest.raises(
        InvalidArgumentError, match=rf"f must be \[{B}, {N}\], got \[{B}, {N + 1}\]"
    ):
        compute(*d, *gates)


# -- no device value read on the host -------------------------------------------------------------


def _refuse(*args, **kwargs):
    raise AssertionError("a device value was read on the host")


@pytest.fixture
def no_host_reads(monkeypatch):
    """Every way a SimArray's value reaches the host raises (np.asarray already does)."""
    for name in ("get", "__float__", "__int__", "__bool__", "__index__", "__complex__"):
        monkeypatch.setattr(SimArray, name, _refuse)
    getattr_ = SimArray.__getattr__

    def guarded(self, name):
        if name in ("tolist", "tobytes", "item"):
            _refuse()
        return getattr_(self, name)

    monkeypatch.setattr(SimArray, "__getattr__", guarded)
    monkeypatch.setattr(simcupy, "asnumpy", _refuse)


@pytest.mark.parametrize("dtype", [rg.float32, rg.float16])
@pytest.mark.parametrize("peep, clip", [(False, -1.0), (True, 0.4)])
def test_kernels_read_no_device_value_on_the_host(no_host_reads, dtype, peep, clip):
    dt = dtype.np
    vals = [simcupy.asarray(v) for v in _values(dt)]
    cell = gpu_rnn.lstm_block_cell(forget_bias=1.0, cell_clip=clip, use_peephole=peep, T=dtype,
                                   xp=simcupy)  # fmt: skip
    outs = cell(*vals)
    # With the input projection given, as the CPU loop executor's hoisting passes it.
    xw = simcupy.matmul(vals[0], vals[3][:D])
    outs_xw = cell(*vals, xw)
    grad = gpu_rnn.lstm_block_cell_grad(use_peephole=peep, T=dtype, xp=simcupy)
    h_grad = simcupy.ones((B, N), dt)
    grads = grad(*vals, *outs[:6], h_grad, h_grad)
    for v in (*outs, *outs_xw, *grads):
        assert type(v) is SimArray and v.dtype == dt
    assert [v.shape for v in grads] == [(B, N), (B, 4 * N), (N,), (N,), (N,)]
    tol = 1e-6 if dt == np.float32 else 1e-3
    for a, b in zip(outs, outs_xw):
        np.testing.assert_allclose(a._a, b._a, rtol=tol, atol=tol)


def test_a_bad_input_projection_gives_the_cpu_error():
    from rill.exec.kernels import rnn_kernels

    vals = _values(np.float32)
    attrs = dict(forget_bias=1.0, cell_clip=-1.0, use_peephole=False, T=rg.float32)
    cpu = rnn_kernels.lstm_block_cell(**attrs)
    gpu = gpu_rnn.lstm_block_cell(**attrs, xp=simcupy)
    messages = []
    for compute, xp, conv in ((cpu, np, np.asarray), (gpu, simcupy, simcupy.asarray)):
        with pytest.raises(InvalidArgumentError) as e:
            compute(*(conv(v) for v in vals), xp.zeros((B, 4 * N + 1), np.float32))
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert "the input projection must be a row-major" in messages[0]


def test_train_step_reads_no_device_value_on_the_host_in_lstm_kernels(monkeypatch):
    """The whole simulated-GPU step with only the LSTM kernels strict: their computes run with
    every host read of a device array refused."""
    strict = {"on": False}
    for name in ("get", "__float__", "__int__", "__bool__", "__index__"):
        orig = getattr(SimArray, name)

        def guarded(self, *a, _orig=orig, **kw):
            if strict["on"]:
                _refuse()
            return _orig(self, *a, **kw)

        monkeypatch.setattr(SimArray, name, guarded)
    ran = []

    def wrap(factory):
        def make(**kw):
            compute = factory(**kw)

            def strict_compute(*args):
                strict["on"] = True
                try:
                    return compute(*args)
                finally:
                    strict["on"] = False
                    ran.append(factory.__name__)

            return strict_compute

        return make

    kdefs = [_gpu_kernel_def(f) for f in ("lstm_block_cell", "lstm_block_cell_grad")]
    factories = [k.factory for k in kdefs]
    try:
        for kdef, factory in zip(kdefs, factories):
            object.__setattr__(kdef, "factory", wrap(factory))  # KernelDef is frozen
        _, _, on_gpu = _train(CELLS["basic"], "static", gpu=True)
    finally:
        for kdef, factory in zip(kdefs, factories):
            object.__setattr__(kdef, "factory", factory)
    assert on_gpu >= LSTM_OPS
    assert {"lstm_block_cell", "lstm_block_cell_grad"} <= set(ran)


def _gpu_kernel_def(factory_name):
    from rill.exec.kernel_registry import kernel_registry

    op = {"lstm_block_cell": "LSTMBlockCell", "lstm_block_cell_grad": "LSTMBlockCellGrad"}
    for kdef in kernel_registry.lookup(op[factory_name], ("GPU",)):
        if kdef.factory.__name__ == factory_name:
            return kdef
    raise LookupError(factory_name)


# -- the fused path's plumbing, with a stand-in fuse ----------------------------------------------


@pytest.fixture
def fresh_passes(monkeypatch):
    monkeypatch.setattr(gpu_rnn, "_PASSES", {})
    monkeypatch.setattr(gpu_rnn, "FUSED_FALLBACK_REASON", None)


def _xp_with_fuse(fuse):
    xp = types.ModuleType("fusing_simcupy")
    xp.__dict__.update({k: v for k, v in vars(simcupy).items() if not k.startswith("__")})
    xp.fuse = fuse
    return xp


def _cell_and_grad(xp, peep):
    vals = [simcupy.asarray(v) for v in _values(np.float32)]
    cell = gpu_rnn.lstm_block_cell(forget_bias=1.0, cell_clip=0.5, use_peephole=peep,
                                   T=rg.float32, xp=xp)  # fmt: skip
    outs = cell(*vals)
    grad = gpu_rnn.lstm_block_cell_grad(use_peephole=peep, T=rg.float32, xp=xp)
    g = simcupy.ones((B, N), np.float32)
    return [simcupy.asnumpy(v) for v in (*outs, *grad(*vals, *outs[:6], g, g))]


@pytest.mark.parametrize("peep", [False, True])
def test_fused_passes_are_one_call_each_shared_by_cells(fresh_passes, peep):
    built, calls = [], []

    def fuse(kernel_name):
        def deco(fn):
            built.append(kernel_name)

            def fused(*args):
                calls.append(kernel_name)
                return fn(*args)

            return fused

        return deco

    xp = _xp_with_fuse(fuse)
    got = _cell_and_grad(xp, peep)
    _cell_and_grad(xp, peep)  # a second pair of cells reuses the passes
    assert built == ["rill_lstm_block_cell", "rill_lstm_block_cell_grad"]
    assert calls == built * 2
    assert gpu_rnn.fused_in_use(xp) and gpu_rnn.FUSED_FALLBACK_REASON is None
    want = _cell_and_grad(simcupy, peep)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("when", ["build", "call"])
def test_a_fused_kernel_that_fails_to_build_falls_back_unfused(fresh_passes, when):
    def fuse(kernel_name):
        if when == "build":
            raise RuntimeError("no compiler")

        def deco(fn):
            def fused(*args):
                raise RuntimeError("nvrtc: error: bad code")

            return fused

        return deco

    xp = _xp_with_fuse(fuse)
    got = _cell_and_grad(xp, True)
    assert "RuntimeError" in gpu_rnn.FUSED_FALLBACK_REASON
    assert not gpu_rnn.fused_in_use(xp)
    for a, b in zip(got, _cell_and_grad(simcupy, True)):
        np.testing.assert_array_equal(a, b)


def test_out_of_memory_in_a_fused_kernel_is_not_a_fallback(fresh_passes):
    def fuse(kernel_name):
        def deco(fn):
            def fused(*args):
                raise simgpu.OutOfMemoryError("out of memory")

            return fused

        return deco

    with pytest.raises(MemoryError):
        _cell_and_grad(_xp_with_fuse(fuse), False)
    assert gpu_rnn.FUSED_FALLBACK_REASON is None
