"""The fused LSTM cell's GPU kernels on a real GPU (marker `gpu`): the elementwise passes compile
as cupy.fuse kernels (no fallback), the cell and its gradient match the CPU for each
configuration and dtype, and an RNN train step on the GPU gives the CPU's loss and weights."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff import gradients
from rill.exec import ConfigProto, Session
from rill.exec.device import gpu_available
from rill.graph.ops.rnn_ops import lstm_block_cell

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_available() == 0, reason="needs cupy and a CUDA device"),
    pytest.mark.no_roundtrip("GPU runs; round trips are checked by the CPU suites"),
]

B, D, N, T = 16, 24, 32, 6
CPU_ONLY = ConfigProto(device_count={"GPU": 0})
LSTM_OPS = {"LSTMBlockCell", "LSTMBlockCellGrad"}


def _placed(sess) -> set:
    return {n.type for plan in sess._plans.values() for n in plan.plan_graph.nodes
            if n.device.device_type == "GPU"}  # fmt: skip


def _cell(vals, dtype, forget_bias, clip, peep, gpu):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(dtype, v.shape) for v in vals]
        outs = lstm_block_cell(*phs, forget_bias=forget_bias, cell_clip=clip, use_peephole=peep)
        k = rg.constant(np.random.default_rng(9).standard_normal((B, N)).astype(dtype.np))
        loss = rg.reduce_sum(outs[6] * k) + rg.reduce_sum(outs[1] * (k * k))
        fetches = outs + gradients(loss, phs)
    with Session(graph=g, config=None if gpu else CPU_ONLY) as sess:
        return sess.run(fetches, dict(zip(phs, vals))), _placed(sess)


@pytest.mark.parametrize(
    "dtype, forget_bias, clip, peep",
    [(rg.float32, 1.0, -1.0, False), (rg.float32, 0.5, 0.3, True), (rg.float16, 1.0, 0.5, True),
     (rg.float16, 0.0, -1.0, False)],
)  # fmt: skip
def test_fused_cell_and_gradient_match_cpu(dtype, forget_bias, clip, peep):
    from rill.exec.kernels.gpu import rnn

    rng = np.random.default_rng(0)
    shapes = [(B, D), (B, N), (B, N), (D + N, 4 * N), (N,), (N,), (N,), (4 * N,)]
    vals = [rng.standard_normal(s).astype(dtype.np) for s in shapes]
    want, _ = _cell(vals, dtype, forget_bias, clip, peep, gpu=False)
    got, on_gpu = _cell(vals, dtype, forget_bias, clip, peep, gpu=True)
    assert on_gpu >= LSTM_OPS
    assert rnn.FUSED_FALLBACK_REASON is None, rnn.FUSED_FALLBACK_REASON
    import cupy

    assert rnn.fused_in_use(cupy)
    tol = (1e-4, 1e-5) if dtype == rg.float32 else (2e-2, 2e-2)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, k
        np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=f"fetch {k}")


@pytest.mark.parametrize("unroll", ["static", "dynamic"])
def test_lstm_train_step_on_gpu_matches_cpu(unroll):
    results = []
    for gpu in (False, True):
        g = rg.Graph()
        with g.as_default():
            x = rg.placeholder(rg.float32, [T, B, D])
            cell = rt.BasicLSTMCell(N)
            if unroll == "static":
                out = rg.stack(rt.static_rnn(cell, rg.unstack(x), dtype=rg.float32)[0])
            else:
                out = rt.dynamic_rnn(cell, x, dtype=rg.float32, time_major=True)[0]
            loss = rg.reduce_sum(rg.square(out))
            train = rt.GradientDescentOptimizer(0.01).minimize(loss)
            init = rg.global_variables_initializer()
        rng = np.random.default_rng(1)
        xv = rng.standard_normal((T, B, D)).astype(np.float32)
        with Session(graph=g, config=None if gpu else CPU_ONLY) as sess:
            sess.run(init)
            for v in cell.trainable_variables:
                v.load(rng.uniform(-0.3, 0.3, v.shape.as_list()).astype(np.float32), sess)
            losses = [sess.run([loss, train], {x: xv})[0] for _ in range(3)]
            results.append((losses, sess.run(cell.trainable_variables)))
            if gpu:
                assert _placed(sess) >= LSTM_OPS
    (want_l, want_w), (got_l, got_w) = results
    np.testing.assert_allclose(got_l, want_l, rtol=1e-4)
    for a, b in zip(got_w, want_w):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
