"""Shared by the distributed benchmarks: rill's side of each measurement and the TensorFlow peer.

Every task is a separate process on loopback (rill: `local_cluster`, TensorFlow:
tools/bench/_tf_cluster_peer.py run by the peer Python); the client is this process. Cluster CPU
is the user + system time of every task process (/proc/<pid>/stat), not the client's.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from tools.bench import peer_python
from tools.bench._cluster_loops import async_steps, measure
from tools.bench._fig1 import batch

PEER_SCRIPT = pathlib.Path(__file__).with_name("_tf_cluster_peer.py")
START_TIMEOUT = 300.0  # 17 task processes importing rill on a loaded 2-core machine
VAR_OPS = {"VariableV2", "VarHandleOp", "Variable", "VariableV1"}


def run_tf(*args: str, timeout: float = 1200, script: str | None = None) -> dict:
    """Runs one benchmark of the TensorFlow peer script (`script` names another peer script in
    this folder); {} without a peer or on failure."""
    py = peer_python()
    if py is None:
        return {}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    from rill.distributed import _grpc_env

    if _grpc_env.SET_HERE:
        env.pop("GRPC_EXPERIMENTS", None)  # TensorFlow runs with grpc's defaults
    try:
        path = PEER_SCRIPT if script is None else PEER_SCRIPT.with_name(script)
        proc = subprocess.run([py, str(path), *args], capture_output=True, text=True,
                              timeout=timeout, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"TensorFlow peer {args} timed out\n")
        return {}
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write(f"TensorFlow peer {args} failed:\n{proc.stderr[-2000:]}\n")
    return {}


def task_cpu(cluster) -> dict[str, float]:
    """{"ps0": CPU seconds so far, "worker1": ...}, one entry per task process of a local cluster."""
    out = {f"{t.job}{t.index}": t.cpu_seconds() for t in cluster.tasks}
    if os.environ.get("RILL_BENCH_CSW"):
        for t in cluster.tasks:
            out[f"{t.job}{t.index}_csw"] = context_switches(t.pid)
    return out


def context_switches(pid: int) -> float:
    """Voluntary + involuntary context switches of a process so far (/proc/<pid>/task/*/status; a thread that ended is not counted), as
    'CPU seconds' x 1000 so that task_cpu_ms reports switches per step (RILL_BENCH_CSW=1)."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                n += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return n / 1e3


def _cluster(**jobs):
    from rill.distributed import local_cluster

    return local_cluster(**jobs, log=None, log_level="WARNING", start_timeout=START_TIMEOUT)


def rill_null(counts: list[int]) -> dict:
    import rill.graph as rg
    from rill.exec import Session

    out = {}
    with _cluster(ps=max(counts), workers=1) as c:
        for n in counts:
            g = rg.Graph()
            with g.as_default():
                vs = []
                for i in range(n):
                    with g.device(f"/job:ps/task:{i}"):
                        vs.append(rg.Variable(rg.constant(float(i)), name=f"v{i}"))
                init = rg.global_variables_initializer()
            with Session(c.target("worker", 0), graph=g) as sess:
                sess.run(init)
                got = sess.run(vs)
                assert [float(v) for v in got] == [float(i) for i in range(n)], got
                ms, cpu, client = measure(lambda vs=vs: sess.run(vs), c.cpu_seconds)
            out[str(n)] = {"ms": ms, "cpu_ms": cpu, "client_cpu_ms": client}
    return out


def rill_fetch(mb: int) -> dict:
    import rill.graph as rg
    from rill.exec import Session

    n = mb * 1_000_000 // 4
    with _cluster(ps=1, workers=1) as c:
        g = rg.Graph()
        with g.as_default(), g.device("/job:ps/task:0"):
            v = rg.Variable(rg.zeros([n], rg.float32), name="big")
            init = rg.global_variables_initializer()
        with Session(c.target("worker", 0), graph=g) as sess:
            sess.run(init)
            value = sess.run(v)
            assert value.shape == (n,) and not value.any()
            ms, cpu, client = measure(lambda: sess.run(v), c.cpu_seconds, min_time=2.0, min_steps=5,
                              warmup=1)  # fmt: skip
    return {"MB/s": mb / (ms / 1e3), "ms": ms, "cpu_ms": cpu, "client_cpu_ms": client}


def fig1_between_graph(worker: int, lr: float = 0.01):
    """The Figure 1 MLP for worker `worker` of a between-graph replicated job: variables (and
    their optimizer slots) on /job:ps/task:0, everything else on the worker."""
    import rill.graph as rg
    from rill.train import AdagradOptimizer

    g = rg.Graph()

    def device(op):
        return "/job:ps/task:0" if op.type in VAR_OPS else f"/job:worker/task:{worker}"

    with g.as_default(), g.device(device):
        g.seed = 1
        x = rg.placeholder(rg.float32, [None, 784], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")
        w1 = rg.Variable(rg.random_uniform([784, 100], -0.05, 0.05), name="W_1")
        b1 = rg.Variable(rg.zeros([100]), name="b_1")
        layer_1 = rg.relu(rg.matmul(x, w1) + b1)
        w2 = rg.Variable(rg.random_uniform([100, 10], -0.05, 0.05), name="W_2")
        b2 = rg.Variable(rg.zeros([10]), name="b_2")
        layer_2 = rg.matmul(layer_1, w2) + b2
        loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=layer_2))
        train = AdagradOptimizer(lr).minimize(loss)
        init = rg.global_variables_initializer()
    return g, x, y, loss, train, init


def rill_mlp(seconds: float, n_workers: int = 2) -> dict:
    from rill.exec import Session

    xv, yv = batch()
    with _cluster(ps=1, workers=n_workers) as c:
        workers = []
        try:
            for w in range(n_workers):
                g, x, y, loss, train, init = fig1_between_graph(w)
                sess = Session(c.target("worker", w), graph=g)
                if w == 0:
                    sess.run(init)
                workers.append((sess, train, loss, {x: xv, y: yv}))
            out = async_steps(workers, seconds, c.cpu_seconds, lambda: task_cpu(c))
        finally:
            for sess, *_ in workers:
                sess.close()
    assert np.isfinite(out["loss"]).all()
    return out
