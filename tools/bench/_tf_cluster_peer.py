"""TensorFlow's own distributed runtime, for the distributed benchmarks (runs in the PEER Python).

Needs TensorFlow (`RILL_PEER_PYTHON=/path/to/python-with-tensorflow`); it is never imported by
rill. Every task is a separate `tf.distribute.Server` process on loopback; the client is a TF1
graph-mode session in this process, as rill's side of each benchmark does it.

    python _tf_cluster_peer.py null 1,2,4,8,16     # fetch one scalar from each of N PS
    python _tf_cluster_peer.py fetch 100           # fetch a 100 MB variable from one PS
    python _tf_cluster_peer.py mlp 5 [WORKERS]     # Figure 1 MLP, 2 (or WORKERS) async workers, 5 s
    python _tf_cluster_peer.py serve CLUSTER JOB I # (internal) one task

It prints one JSON object last. The measuring loop is the same as rill's side (tools/bench/_dist).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from _cluster_loops import async_steps, measure  # this folder: the script runs from here

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    """TensorFlow tasks as subprocesses of this script (`serve`), killed on exit. A start that
    fails (a port taken meanwhile) is retried once on fresh ports."""

    def __init__(self, jobs: dict[str, int], timeout: float = 300.0):
        for attempt in range(2):
            try:
                self._start(jobs, timeout)
                return
            except RuntimeError:
                if attempt:
                    raise

    def _start(self, jobs, timeout):
        import select
        import tempfile

        ports = iter(free_ports(sum(jobs.values())))
        self.spec = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in jobs.items()}
        self.procs, self.errs = [], []
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        for job, addresses in self.spec.items():
            for i in range(len(addresses)):
                err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by close()
                self.errs.append(err)
                self.procs.append(subprocess.Popen(
                    [sys.executable, __file__, "serve", json.dumps(self.spec), job, str(i)],
                    stdout=subprocess.PIPE, stderr=err, text=True, env=env))  # fmt: skip
        deadline = time.monotonic() + timeout
        for p, err in zip(self.procs, self.errs):
            ready = False
            while not ready:
                left = deadline - time.monotonic()
                if left <= 0 or p.poll() is not None:
                    err.seek(0)
                    tail = err.read()[-1500:]
                    self.close()
                    raise RuntimeError(f"a TensorFlow task did not start:\n{tail}")
                if select.select([p.stdout], [], [], min(left, 1.0))[0]:
                    ready = "ready" in p.stdout.readline()

    def target(self, job: str = "worker", index: int = 0) -> str:
        return "grpc://" + self.spec[job][index]

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def task_cpu(self) -> dict[str, float]:
        """{"ps0": CPU seconds so far, "worker1": ...}, one entry per task process."""
        names = [f"{job}{i}" for job, addresses in self.spec.items() for i in range(len(addresses))]
        out = {name: cpu_seconds(p.pid) for name, p in zip(names, self.procs)}
        if os.environ.get("RILL_BENCH_CSW"):
            for name, p in zip(names, self.procs):
                n = 0
                for tid in os.listdir(f"/proc/{p.pid}/task"):
                    try:
                        with open(f"/proc/{p.pid}/task/{tid}/status") as f:
                            n += sum(int(ln.split()[1]) for ln in f if "ctxt_switches" in ln)
                    except FileNotFoundError:  # the thread ended meanwhile
                        pass
                out[name + "_csw"] = n / 1e3  # reported per step by async_steps
        return out

    def close(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(30)
        for err in self.errs:
            err.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def serve(cluster_json: str, job: str, index: str) -> None:
    import tensorflow as tf

    spec = tf.train.ClusterSpec(json.loads(cluster_json))
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2,
                                      inter_op_parallelism_threads=2)  # fmt: skip
    server = tf.distribute.Server(spec, job_name=job, task_index=int(index), config=config)
    print("ready", flush=True)
    server.join()


def _tf():
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    tf.compat.v1.enable_resource_variables()
    return tf


def bench_null(counts: list[int]) -> dict:
    tf = _tf()
    out = {}
    with Cluster({"ps": max(counts), "worker": 1}) as c:
        for n in counts:
            g = tf.Graph()
            with g.as_default():
                vs = []
                for i in range(n):
                    with tf.device(f"/job:ps/task:{i}"):
                        vs.append(tf.Variable(float(i), name=f"v{i}"))
                init = tf.compat.v1.global_variables_initializer()
            with tf.compat.v1.Session(c.target(), graph=g) as sess:
                sess.run(init)
                ms, cpu, client = measure(lambda vs=vs: sess.run(vs), c.cpu)
            out[str(n)] = {"ms": ms, "cpu_ms": cpu, "client_cpu_ms": client}
    return out


def bench_fetch(mb: int) -> dict:
    tf = _tf()
    n = mb * 1_000_000 // 4
    with Cluster({"ps": 1, "worker": 1}) as c:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(tf.zeros([n], tf.float32), name="big")
        with tf.compat.v1.Session(c.target(), graph=g) as sess:
            sess.run(v.initializer)
            value = sess.run(v)
            assert value.shape == (n,)
            ms, cpu, client = measure(
                lambda: sess.run(v), c.cpu, min_time=2.0, min_steps=5, warmup=1
            )
    return {"MB/s": mb / (ms / 1e3), "ms": ms, "cpu_ms": cpu, "client_cpu_ms": client}


def bench_mlp(seconds: float, n_workers: int = 2) -> dict:
    tf = _tf()
    import numpy as np

    rng = np.random.default_rng(0)
    xv = rng.random((100, 784), dtype=np.float32)
    yv = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 100)]
    with Cluster({"ps": 1, "worker": n_workers}) as c:
        workers = []
        for w in range(n_workers):
            g = tf.Graph()
            setter = tf.compat.v1.train.replica_device_setter(
                ps_tasks=1, worker_device=f"/job:worker/task:{w}"
            )
            with g.as_default(), g.device(setter):
                tf.compat.v1.set_random_seed(1)
                x = tf.compat.v1.placeholder(tf.float32, [None, 784])
                y = tf.compat.v1.placeholder(tf.float32, [None, 10])
                w1 = tf.Variable(tf.random.uniform([784, 100], -0.05, 0.05), name="W_1")
                b1 = tf.Variable(tf.zeros([100]), name="b_1")
                l1 = tf.nn.relu(tf.matmul(x, w1) + b1)
                w2 = tf.Variable(tf.random.uniform([100, 10], -0.05, 0.05), name="W_2")
                b2 = tf.Variable(tf.zeros([10]), name="b_2")
                l2 = tf.matmul(l1, w2) + b2
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=l2))
                train = tf.compat.v1.train.AdagradOptimizer(0.01).minimize(loss)
                init = tf.compat.v1.global_variables_initializer()
            sess = tf.compat.v1.Session(c.target("worker", w), graph=g)
            if w == 0:
                sess.run(init)
            workers.append((sess, train, loss, {x: xv, y: yv}))
        try:
            return async_steps(workers, seconds, c.cpu, c.task_cpu)
        finally:
            for sess, *_ in workers:
                sess.close()


def main(argv: list[str]) -> None:
    what = argv[0]
    if what == "serve":
        serve(*argv[1:4])
        return
    if what == "null":
        out = bench_null([int(n) for n in argv[1].split(",")])
    elif what == "fetch":
        out = bench_fetch(int(argv[1]))
    elif what == "mlp":
        out = bench_mlp(float(argv[1]), *(int(a) for a in argv[2:3]))
    else:
        raise SystemExit(f"unknown benchmark {what!r}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
