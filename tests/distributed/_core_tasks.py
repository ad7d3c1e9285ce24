"""A small launcher for the core runtime's multi-process tests: every task a subprocess on
loopback, each a rill Server, torn down (SIGTERM, then SIGKILL) when the block ends. A task also
exits when its parent goes away, so no process outlives the tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

_TASK = r"""
import json, os, sys
from rill.distributed import Server
from rill.exec.proto.config_pb2 import ConfigProto
spec, job, index = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cfg = ConfigProto()
if len(sys.argv) > 4:
    cfg.operation_timeout_in_ms = int(sys.argv[4])
s = Server(spec, job_name=job, task_index=index, config=cfg, connect_timeout_s=20)
parent = os.getppid()
import signal
signal.signal(signal.SIGTERM, lambda *a: s.stop(grace=0))
print("ready", s.target, flush=True)
while not s.join(0.5):
    if os.getppid() != parent:
        s.stop(grace=0)
sys.exit(0)
"""


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("localhost", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class TaskCluster:
    """`with TaskCluster(ps=2, worker=2) as c:` — c.spec, c.target("worker", 0), c.kill(...)."""

    def __init__(self, start_timeout: float = 90.0, timeout_ms: int = 0, **jobs: int):
        ports = iter(free_ports(sum(jobs.values())))
        self.spec = {job: [f"localhost:{next(ports)}" for _ in range(n)] for job, n in jobs.items()}
        self.start_timeout = start_timeout
        self.timeout_ms = timeout_ms
        self.procs: dict[tuple[str, int], subprocess.Popen] = {}

    def target(self, job: str, index: int = 0) -> str:
        return f"grpc://{self.spec[job][index]}"

    def __enter__(self) -> TaskCluster:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            for job, addrs in self.spec.items():
                for i in range(len(addrs)):
                    args = [sys.executable, "-c", _TASK, json.dumps(self.spec), job, str(i)]
                    if self.timeout_ms:
                        args.append(str(self.timeout_ms))
                    self.procs[(job, i)] = subprocess.Popen(
                        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
                    )
            end = time.monotonic() + self.start_timeout
            for (job, i), p in self.procs.items():
                line = ""
                while not line.startswith("ready"):
                    if time.monotonic() > end or p.poll() is not None:
                        out = p.stdout.read() if p.poll() is not None else ""
                        raise RuntimeError(f"task {job}:{i} did not start: {line}{out}")
                    line = p.stdout.readline()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def kill(self, job: str, index: int) -> None:
        p = self.procs[(job, index)]
        p.send_signal(signal.SIGKILL)
        p.wait(10)

    def __exit__(self, *exc) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            if p.stdout:
                p.stdout.close()
