"""local_cluster: tasks as subprocesses on loopback, reachable, prefixed logs, kill/restart, and a
teardown that leaves no process behind."""

from __future__ import annotations

import os
import signal
import time

import grpc
import pytest

from rill.distributed import local_cluster
from rill.distributed.launch import LocalCluster, pick_ports, process_cpu_seconds
from rill.graph.errors import UnavailableError

pytestmark = pytest.mark.distributed


def _gone(pid: int) -> bool:
    """The process has exited and been reaped (or is a zombie of someone else)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _answers(address: str, timeout: float = 10.0) -> bool:
    with grpc.insecure_channel(address) as ch:
        try:
            grpc.channel_ready_future(ch).result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            return False


def test_start_every_task_reachable_prefixed_logs_and_clean_teardown():
    lines = []
    with local_cluster(ps=2, workers=2, log=lines.append) as c:
        assert c.cluster_spec.jobs == ["ps", "worker"]
        assert c.cluster_spec.num_tasks("ps") == 2 and c.cluster_spec.num_tasks("worker") == 2
        addrs = [a for _, _, a in c.cluster_spec.tasks()]
        assert len(set(addrs)) == 4 and all(a.startswith("127.0.0.1:") for a in addrs)
        assert c.targets["worker"] == [f"grpc://{c.cluster_spec.task_address('worker', i)}"
                                       for i in range(2)]  # fmt: skip
        assert c.target("ps", 1) == "grpc://" + c.cluster_spec.task_address("ps", 1)
        for t in c.tasks:
            assert t.alive and _answers(t.address)
        assert c.cpu_seconds() > 0
        pids = c.pids
        assert len(pids) == 4
    for prefix in ("[ps:0] ", "[ps:1] ", "[worker:0] ", "[worker:1] "):
        assert any(line.startswith(prefix) and "serving at grpc://" in line for line in lines)
    # the tasks logged their peers
    assert any(line.startswith("[worker:1] ") and "/job:ps/replica:0/task:1" in line
               for line in lines)  # fmt: skip
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids)
    # SIGTERM stopped every server cleanly: exit 0
    assert all(t.returncode == 0 for t in c.tasks), [t.log(5) for t in c.tasks]
    assert any(line.startswith("[ps:0] ") and "stopping (SIGTERM)" in line for line in lines)


def test_teardown_when_the_body_raises():
    with pytest.raises(RuntimeError, match="boom"):
        with local_cluster(ps=1, workers=1, log=None) as c:
            pids = c.pids
            raise RuntimeError("boom")
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids)


def test_kill_9_and_restart_one_task():
    # log_level WARNING: the "serving at" line is printed whatever the level
    with local_cluster(ps=1, workers=1, chief=True, log=None, log_level="WARNING") as c:
        assert c.cluster_spec.jobs == ["chief", "ps", "worker"]
        ps = c.task("ps", 0)
        old_pid = ps.pid
        assert ps.kill() == -signal.SIGKILL
        assert not ps.alive and not _answers(ps.address, timeout=0.5)
        assert c.task("worker", 0).alive  # the others keep running
        assert c.cpu_seconds() > 0  # counts the running tasks
        ps.restart()
        assert ps.alive and ps.pid != old_pid and ps.starts == 2
        assert _answers(ps.address)
        assert "serving at" in ps.log()
        # terminate: SIGTERM, a clean stop
        assert c.task("worker", 0).terminate() == 0
    assert _gone(old_pid) and _gone(ps.pid)


def test_a_task_that_fails_to_start_gives_its_log():
    t0 = time.monotonic()
    with pytest.raises(UnavailableError) as info:
        local_cluster(ps=1, workers=1, log=None, extra_args=("--protocol", "http"))
    msg = str(info.value)
    assert "task /job:ps/replica:0/task:0" in msg and "exited with status 2" in msg
    assert "| rill-server: bad configuration: rpc layer 'http' is not served" in msg
    assert time.monotonic() - t0 < 60


def test_a_task_that_never_serves_times_out_with_its_log(tmp_path):
    # An interpreter that prints and then sleeps: never serving; the start deadline ends it.
    fake = tmp_path / "fake_python"
    fake.write_text('#!/bin/sh\necho pretending to start "$@"\nexec sleep 600\n')
    fake.chmod(0o755)
    c = LocalCluster(ps=1, workers=0, log=None, python=str(fake), start_timeout=1.5,
                     stop_timeout=2)  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(
        UnavailableError, match=r"was not serving within the start timeout \(1.5 s\)"
    ) as info:
        c.start()
    assert "| pretending to start -m rill.distributed --cluster" in str(info.value)
    assert time.monotonic() - t0 < 15
    assert all(_gone(p) for p in [t.pid for t in c.tasks])


def test_pick_ports_distinct_and_cpu_seconds():
    ports = pick_ports(8)
    assert len(set(ports)) == 8 and all(0 < p < 65536 for p in ports)
    assert process_cpu_seconds(os.getpid()) > 0


def test_bad_counts():
    with pytest.raises(ValueError, match="positive number of tasks"):
        LocalCluster(ps=0, workers=0)


def test_tasks_stop_when_the_launching_process_is_killed():
    import subprocess
    import sys

    script = (
        "from rill.distributed import local_cluster\n"
        "c = local_cluster(ps=1, workers=1, log=None)\n"
        "print(' '.join(map(str, c.pids)), flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(_gone(p) for p in pids)
    finally:
        parent.kill()  # kill -9: no teardown runs in the launcher
        parent.wait(10)
    deadline = time.monotonic() + 20
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if not _gone(p)]
    for p in left:  # do not leave them behind even when the assertion fails
        os.kill(p, signal.SIGKILL)
    assert not left
