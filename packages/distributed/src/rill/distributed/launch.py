"""`local_cluster`: a cluster of rill tasks as subprocesses on loopback, for tests, benchmarks and
demos.

Each task is `python -m rill.distributed --cluster ... --job_name J --task_index I`, on a free
port of 127.0.0.1 picked by the launcher. Task output is read by one thread per task and written
with the task's name in front (`[ps:0] ...`); the last lines are kept for error messages. Every
wait has a deadline. Teardown sends SIGTERM, then SIGKILL after `stop_timeout`; the tasks also
watch the launching process and stop when it is gone, so none outlives a killed test run.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref

from rill.distributed.cluster import ClusterSpec, task_device_name
from rill.graph.errors import UnavailableError

__all__ = ["LocalCluster", "LocalTask", "local_cluster", "pick_ports", "process_cpu_seconds"]

_READY_MARK = ": serving at "
_LOG_KEEP = 400  # lines of each task's output kept for error messages
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def pick_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports that were free on `host` a moment ago (all held open while picking)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (Linux /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14, 15)


class LocalTask:
    """One task of a `LocalCluster`: its process, address, log, and kill/restart controls."""

    def __init__(self, cluster: LocalCluster, job: str, index: int, port: int):
        self._cluster = cluster
        self.job, self.index, self.port = job, index, port
        self.address = f"{cluster.host}:{port}"
        self.process: subprocess.Popen | None = None
        self.log_lines: collections.deque[str] = collections.deque(maxlen=_LOG_KEEP)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self.starts = 0

    @property
    def name(self) -> str:
        """The task's full name, '/job:ps/replica:0/task:0'."""
        return task_device_name(self.job, self.index)

    @property
    def short_name(self) -> str:
        return f"{self.job}:{self.index}"

    @property
    def target(self) -> str:
        """The session target, 'grpc://127.0.0.1:<port>'."""
        return f"grpc://{self.address}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def log(self, last: int | None = None) -> str:
        """The task's output (its last `last` lines)."""
        lines = list(self.log_lines)
        return "\n".join(lines if last is None else lines[-last:])

    def cpu_seconds(self) -> float:
        """CPU seconds the task's process has used so far."""
        return process_cpu_seconds(self.pid)

    # -- process control ------------------------------------------------------------------------

    def _spawn(self) -> None:
        c = self._cluster
        argv = [c.python, "-m", "rill.distributed", "--cluster", json.dumps(c.cluster_spec.as_dict()),
                "--job_name", self.job, "--task_index", str(self.index),
                "--parent_pid", str(os.getpid()), "--log_level", c.log_level, *c.extra_args]  # fmt: skip
        env = dict(os.environ if c.env is None else c.env)
        env.pop("TF_CONFIG", None)  # the flags describe the task
        env["PYTHONUNBUFFERED"] = "1"
        self._ready.clear()
        self.log_lines.clear()
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, start_new_session=True, text=True, errors="replace", bufsize=1,
        )  # fmt: skip
        self.starts += 1
        c._procs.append(self.process)
        self._reader = threading.Thread(target=self._read, args=(self.process,),
                                        name=f"log-{self.short_name}", daemon=True)  # fmt: skip
        self._reader.start()

    def _read(self, process: subprocess.Popen) -> None:
        prefix = f"[{self.short_name}] "
        for line in process.stdout:
            line = line.rstrip("\n")
            self.log_lines.append(line)
            if _READY_MARK in line:
                self._ready.set()
            self._cluster._emit(prefix + line)
        process.stdout.close()

    def wait_ready(self, timeout: float, budget: float | None = None) -> None:
        """Waits until the task serves and answers an RPC; raises UnavailableError with its log.

        `budget` is the whole start-up time allowed (for the message), when more than `timeout`.
        """
        deadline = time.monotonic() + timeout
        budget = timeout if budget is None else budget
        while not self._ready.wait(0.05):
            if not self.alive:
                self._join_reader(2.0)
                self._fail(f"exited with status {self.returncode} before it was serving")
            if time.monotonic() > deadline:
                self._fail(f"was not serving within the start timeout ({budget:g} s)")
        error = _probe(self.address, deadline)
        if error is not None:
            self._fail(f"does not answer at {self.address}: {error}")

    def _fail(self, what: str):
        raise UnavailableError(
            f"local_cluster: task {self.name} ({self.address}, pid {self.pid}) {what}; its log:\n"
            + "\n".join(f"  | {line}" for line in list(self.log_lines)[-60:])
        )

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 10.0) -> int | None:
        """Sends `sig` (default SIGKILL: kill -9) and waits up to `timeout` s for the exit."""
        if self.alive:
            try:
                self.process.send_signal(sig)
            except ProcessLookupError:
                pass
        return self.wait(timeout)

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the server stops cleanly and exits 0), then SIGKILL after `timeout` s."""
        code = self.kill(signal.SIGTERM, timeout)
        if self.alive:
            code = self.kill(signal.SIGKILL, 5.0)
        return code

    def wait(self, timeout: float) -> int | None:
        """The exit status, or None if the task still runs after `timeout` s."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._join_reader(2.0)
        return code

    def restart(self, timeout: float | None = None) -> None:
        """Starts the task again on the same address (terminating it first if it runs)."""
        if self.alive:
            self.terminate(self._cluster.stop_timeout)
        self._spawn()
        self.wait_ready(self._cluster.start_timeout if timeout is None else timeout)

    def _join_reader(self, timeout: float) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self.returncode}"
        return f"<LocalTask {self.name} {self.address} pid={self.pid} {state}>"


def _probe(address: str, deadline: float) -> str | None:
    """None once a gRPC call to the task gets any answer; else the last error."""
    import grpc

    channel = grpc.insecure_channel(address)
    try:
        call = channel.unary_unary("/tensorflow.WorkerService/GetStatus")
        last = "no answer"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return last
            try:
                call(b"", timeout=min(remaining, 5.0), wait_for_ready=True)
                return None
            except grpc.RpcError as e:
                code = e.code()
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    return None  # it answered, even if with an error
                last = f"{code.name}: {e.details()}"
                time.sleep(0.05)
    finally:
        channel.close()


def _reap(processes: list) -> None:
    for p in processes:
        if p is not None and p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


class LocalCluster:
    """Tasks of a cluster running as subprocesses on loopback (see `local_cluster`)."""

    def __init__(self, ps: int = 2, workers: int = 2, chief: bool = False, *, jobs=None,
                 start_timeout: float = 120.0, stop_timeout: float = 10.0, log=sys.stderr,
                 log_level: str = "INFO", env=None, python: str | None = None, extra_args=(),
                 host: str = "127.0.0.1"):  # fmt: skip
        counts = dict(jobs) if jobs is not None else {"chief": int(bool(chief)), "ps": ps,
                                                      "worker": workers}  # fmt: skip
        counts = {j: n for j, n in counts.items() if n}
        if not counts or any(not isinstance(n, int) or n < 0 for n in counts.values()):
            raise ValueError(f"local_cluster needs a positive number of tasks; got {counts}")
        self.host = host
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.log_level, self.env, self.extra_args = log_level, env, tuple(extra_args)
        self.python = python or sys.executable
        self._log = log
        self._log_lock = threading.Lock()
        self._counts = counts
        self.tasks: list[LocalTask] = []
        self._finalizer = None
        self._procs: list[subprocess.Popen] = []  # every process started, for the finalizer
        self.cluster_spec = ClusterSpec()

    # -- the cluster ------------------------------------------------------------------------------

    def task(self, job: str, index: int = 0) -> LocalTask:
        for t in self.tasks:
            if t.job == job and t.index == index:
                return t
        raise KeyError(f"no task {job}:{index} in this local cluster ({self.cluster_spec.jobs})")

    @property
    def targets(self) -> dict[str, list[str]]:
        """{job: [target of task 0, ...]}, e.g. {"ps": ["grpc://127.0.0.1:40001"], ...}."""
        out: dict[str, list[str]] = {}
        for t in self.tasks:
            out.setdefault(t.job, []).append(t.target)
        return out

    def target(self, job: str = "worker", index: int = 0) -> str:
        return self.task(job, index).target

    @property
    def pids(self) -> list[int]:
        return [t.pid for t in self.tasks if t.pid is not None]

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the running tasks of the cluster together."""
        total = 0.0
        for t in self.tasks:
            try:
                total += t.cpu_seconds()
            except (FileNotFoundError, ProcessLookupError, TypeError):  # not running
                pass
        return total

    def _emit(self, line: str) -> None:
        sink = self._log
        if sink is None:
            return
        with self._log_lock:
            try:
                if callable(sink) and not hasattr(sink, "write"):
                    sink(line)
                else:
                    sink.write(line + "\n")
                    sink.flush()
            except (ValueError, OSError):  # the sink was closed (late lines at teardown)
                pass

    # -- lifetime ---------------------------------------------------------------------------------

    def start(self, attempts: int = 3) -> LocalCluster:
        """Starts every task and waits until each answers (bounded by start_timeout)."""
        for attempt in range(attempts):
            ports = pick_ports(sum(self._counts.values()), self.host)
            it = iter(ports)
            self.tasks = [LocalTask(self, job, i, next(it))
                          for job, n in sorted(self._counts.items()) for i in range(n)]  # fmt: skip
            self.cluster_spec = ClusterSpec(
                {job: [t.address for t in self.tasks if t.job == job] for job in self._counts}
            )
            self._procs = []
            self._finalizer = weakref.finalize(self, _reap, self._procs)
            try:
                for t in self.tasks:
                    t._spawn()
                deadline = time.monotonic() + self.start_timeout
                for t in self.tasks:
                    t.wait_ready(max(0.0, deadline - time.monotonic()), self.start_timeout)
                return self
            except BaseException as e:
                self.stop()
                port_taken = isinstance(e, UnavailableError) and "in use" in str(e).lower()
                if not port_taken or attempt == attempts - 1:
                    raise
        return self  # pragma: no cover

    def stop(self) -> dict[str, int | None]:
        """SIGTERM to every task, SIGKILL to those still running after stop_timeout; returns
        {task name: exit status}."""
        for t in self.tasks:
            if t.alive:
                try:
                    t.process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.stop_timeout
        codes = {}
        for t in self.tasks:
            code = t.wait(max(0.0, deadline - time.monotonic()))
            if code is None and t.process is not None:
                code = t.kill(signal.SIGKILL, 5.0)
            codes[t.name] = code
        if self._finalizer is not None:
            self._finalizer.detach()
        return codes

    def __enter__(self) -> LocalCluster:
        if not any(t.alive for t in self.tasks):
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<LocalCluster {self.cluster_spec.as_dict()}>"


def local_cluster(ps: int = 2, workers: int = 2, chief: bool = False, **kwargs) -> LocalCluster:
    """Starts a cluster of rill tasks as subprocesses on loopback; a context manager.

    Args:
      ps, workers: how many "ps" and "worker" tasks; chief: add one "chief" task.
      jobs: instead of the three counts, {job: count} for any job names.
      start_timeout: seconds for every task to serve and answer (the error quotes its log).
      stop_timeout: seconds between SIGTERM and SIGKILL at teardown.
      log: where task output goes, each line prefixed "[job:index] ": a file (default stderr),
        a callable taking the line, or None (kept only for error messages: `task.log()`).
      log_level, env, python, extra_args: the tasks' log level, environment, interpreter and
        extra `rill-server` flags.

    Returns:
      A started `LocalCluster`: `cluster_spec`, `targets` ({job: [grpc://...]}), `target(job, i)`,
      `task(job, i)` with `kill()` (SIGKILL), `terminate()`, `restart()`, `log()`; `stop()`.

    Raises:
      UnavailableError: a task exited or did not answer in time; the message holds its log.

    Example::

        with local_cluster(ps=1, workers=2) as cluster:
            with rill.exec.Session(cluster.target("worker", 0)) as sess:
                ...
    """
    return LocalCluster(ps=ps, workers=workers, chief=chief, **kwargs).start()
