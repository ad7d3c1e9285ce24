"""GPU train steps, rill on the GPU against PyTorch on the same GPU in the same process: the CNN
of cnn_train at batch 64 and 512, the LSTM 512×64×50 (static_rnn and dynamic_rnn) and the
Figure 1 MLP step. Needs cupy and a CUDA device (and torch with CUDA for the peer column).

Each step is timed to completion (the device is synchronized after every step, for both).
Set RILL_BENCH_JSON=path to also write the rows as JSON.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np

from tools.bench import Row


def _sync_rill():
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _time(fn, sync, min_time: float = 1.0, repeats: int = 5) -> float:
    """Median milliseconds per fn() call, each call followed by sync()."""
    for _ in range(3):
        fn()
    sync()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        if time.perf_counter() - t0 > min_time / repeats or n >= 256:
            break
        n *= 2
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1000 / n)
    return statistics.median(ts)


def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


# -- rill ------------------------------------------------------------------------------------------


def _graphs_note(sess, what: str) -> None:
    """Prints whether the step ran as a CUDA graph (rill.exec.step_graphs)."""
    state = [(p.graphs.captures, p.graphs.replays, p.graphs.off) for p in sess._plans.values()
             if p.graphs is not None and p.feed_checks]  # fmt: skip
    print(f"  {what}: CUDA graphs (captures, replays, why off): {state}", flush=True)


def cnn_step(batch: int):
    """(session, train step, loss) of cnn_train's CNN at `batch`, initialized (tools.gpu_profile
    profiles the same steps)."""
    from rill.exec import Session
    from tools.bench.cnn_train import build_rill

    g, x, y, loss, train, init = build_rill()
    rng = np.random.default_rng(0)
    feed = {x: rng.random((batch, 28, 28, 1), dtype=np.float32),
            y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]}  # fmt: skip
    sess = Session(graph=g)
    sess.run(init)
    return sess, lambda: sess.run(train, feed), lambda: sess.run(loss, feed)


def lstm_step(dynamic: bool):
    """(session, train step) of the LSTM 512×64×50, initialized."""
    from rill.exec import Session
    from tools.bench.lstm import BATCH, INPUT, STEPS, build

    g, x, train, init = build(dynamic)
    xv = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    sess = Session(graph=g)
    sess.run(init)
    return sess, lambda: sess.run(train, {x: xv})


def mlp_step():
    """(session, train step) of the Figure 1 MLP with Adagrad, initialized."""
    import rill.graph as rg
    from rill.exec import Session
    from rill.train import AdagradOptimizer
    from tools.bench._fig1 import batch, build_rill

    m = build_rill()
    with m["graph"].as_default():
        train = AdagradOptimizer(0.01).minimize(m["loss"])
        init = rg.global_variables_initializer()
    xv, yv = batch()
    sess = Session(graph=m["graph"])
    sess.run(init)
    feed = {m["x"]: xv, m["y"]: yv}
    return sess, lambda: sess.run(train, feed)


def rill_cnn(batch: int) -> float:
    sess, step, loss = cnn_step(batch)
    first = loss()
    for _ in range(5):
        step()
    assert loss() < first  # it trains
    t = _time(step, _sync_rill)
    _graphs_note(sess, f"CNN b{batch}")
    return t


def rill_lstm(dynamic: bool) -> float:
    sess, step = lstm_step(dynamic)
    t = _time(step, _sync_rill, min_time=2.0, repeats=3)
    _graphs_note(sess, "LSTM " + ("dynamic_rnn" if dynamic else "static_rnn"))
    return t


def rill_mlp() -> float:
    sess, step = mlp_step()
    t = _time(step, _sync_rill)
    _graphs_note(sess, "MLP")
    return t


# -- PyTorch on the same GPU -------------------------------------------------------------------------


def torch_cnn(batch: int):
    torch = _torch()
    if torch is None:
        return None
    dev = torch.device("cuda")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(7 * 7 * 64, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(dev)  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    tx = torch.from_numpy(rng.random((batch, 1, 28, 28), dtype=np.float32)).to(dev)
    ty = torch.from_numpy(rng.integers(0, 10, batch)).to(dev)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(tx), ty).backward()
        opt.step()

    return _time(step, torch.cuda.synchronize)


def torch_lstm(cudnn: bool):
    torch = _torch()
    if torch is None:
        return None
    from tools.bench.lstm import BATCH, INPUT, STEPS, UNITS

    dev = torch.device("cuda")
    tx = torch.from_numpy(
        np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    ).to(dev)
    if cudnn:
        lstm = torch.nn.LSTM(INPUT, UNITS).to(dev)
        params = list(lstm.parameters())

        def forward():
            return lstm(tx)[0]
    else:
        cell = torch.nn.LSTMCell(INPUT, UNITS).to(dev)
        params = list(cell.parameters())

        def forward():
            h = torch.zeros(BATCH, UNITS, device=dev)
            c = torch.zeros(BATCH, UNITS, device=dev)
            outs = []
            for t in range(STEPS):
                h, c = cell(tx[t], (h, c))
                outs.append(h)
            return torch.stack(outs)

    opt = torch.optim.SGD(params, lr=0.01)

    def step():
        opt.zero_grad()
        torch.mean(torch.square(forward())).backward()
        opt.step()

    return _time(step, torch.cuda.synchronize, min_time=2.0, repeats=3)


def torch_mlp():
    torch = _torch()
    if torch is None:
        return None
    from tools.bench._fig1 import batch

    dev = torch.device("cuda")
    xv, yv = batch()
    w1 = torch.empty(784, 100, device=dev).uniform_(-0.05, 0.05).requires_grad_()
    b1 = torch.zeros(100, device=dev, requires_grad=True)
    w2 = torch.empty(100, 10, device=dev).uniform_(-0.05, 0.05).requires_grad_()
    b2 = torch.zeros(10, device=dev, requires_grad=True)
    opt = torch.optim.Adagrad([w1, b1, w2, b2], lr=0.01, initial_accumulator_value=0.1)
    tx, ty = torch.from_numpy(xv).to(dev), torch.from_numpy(yv).to(dev)

    def step():
        opt.zero_grad()
        logits = torch.relu(tx @ w1 + b1) @ w2 + b2
        torch.nn.functional.cross_entropy(logits, ty).backward()
        opt.step()

    return _time(step, torch.cuda.synchronize)


def _guard(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - a failing measurement is reported, not fatal
        print(f"  {fn.__name__}{args}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        return None


def run() -> list[Row]:
    from rill.exec.device import gpu_available

    if not gpu_available():
        print("  no CUDA device (cupy): nothing to measure")
        return []
    cases = [
        ("CNN train step (cnn_train), batch 64, GPU", rill_cnn, (64,), torch_cnn, (64,)),
        ("CNN train step (cnn_train), batch 512, GPU", rill_cnn, (512,), torch_cnn, (512,)),
        ("Figure 1 MLP train step (Adagrad, batch 100), GPU", rill_mlp, (), torch_mlp, ()),
        ("LSTM 512x64x50 train step, static_rnn vs nn.LSTM (cuDNN), GPU", rill_lstm, (False,),
         torch_lstm, (True,)),
        ("LSTM 512x64x50 train step, dynamic_rnn vs nn.LSTM (cuDNN), GPU", rill_lstm, (True,),
         torch_lstm, (True,)),
        ("LSTM 512x64x50 train step, static_rnn vs LSTMCell loop, GPU", rill_lstm, (False,),
         torch_lstm, (False,)),
    ]  # fmt: skip
    rows, out = [], []
    cache: dict = {}
    for name, rf, ra, pf, pa in cases:
        key = (rf.__name__, ra)
        if key not in cache:
            cache[key] = _guard(rf, *ra)
        r = cache[key]
        p = _guard(pf, *pa)
        print(f"  {name}: rill {r} ms, pytorch {p} ms", flush=True)
        out.append({"name": name, "rill_ms": r, "pytorch_ms": p,
                    "rill_over_pytorch": (r / p) if r and p else None})  # fmt: skip
        if r is not None:
            rows.append(Row(name, "ms", r, {"pytorch": p}))
    path = os.environ.get("RILL_BENCH_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
    return rows
