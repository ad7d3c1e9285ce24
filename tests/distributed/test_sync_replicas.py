"""Between-graph replicated training on a local cluster (marker `distributed`): synchronous
replicas with a backup worker, and training that survives kill -9 of a worker, the PS or the
chief. Each replica is examples/distributed_digits.py in a process of its own, using its task's
server (started by local_cluster); every process is ended by the test, whatever happens."""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from rill.distributed import local_cluster

pytestmark = pytest.mark.distributed

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "distributed_digits.py"
STEP_LINE = re.compile(r"global step (\d+): replicas \[([^\]]*)\] contributed, (\d+) stale")
FINAL = re.compile(r"final global step (\d+); test accuracy ([0-9.]+)")


class Replica:
    """One worker program: its process, and its output read on a thread."""

    def __init__(self, cluster, index: int, *args: str):
        self.index = index
        self.lines: list[str] = []
        ps = ",".join(cluster.cluster_spec.job_tasks("ps"))
        workers = ",".join(cluster.cluster_spec.job_tasks("worker"))
        self.argv = [sys.executable, str(PROGRAM), "--ps_hosts", ps, "--worker_hosts", workers,
                     "--job_name", "worker", "--task_index", str(index),
                     "--master", cluster.target("worker", index), *args]  # fmt: skip
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()

    def _read(self, proc) -> None:
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(
                f"worker {self.index} did not finish in {timeout} s:\n{self.output()[-4000:]}"
            )
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def global_step(self) -> int:
        """The last global step the chief's update loop reported (or a worker logged)."""
        for line in reversed(self.lines):
            m = STEP_LINE.search(line) or re.search(r"global step (\d+)", line)
            if m:
                return int(m.group(1))
        return -1


def _wait_until(pred, timeout: float, what: str, replicas) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- worker {r.index}\n{r.output()[-3000:]}" for r in replicas)
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        if any(r.proc.poll() not in (None, 0) for r in replicas):
            logs = "\n".join(f"--- worker {r.index}\n{r.output()[-3000:]}" for r in replicas)
            pytest.fail(f"a replica failed while waiting for {what}\n{logs}")
        time.sleep(0.2)


@pytest.fixture
def replicas():
    started: list[Replica] = []
    yield started
    for r in started:
        r.kill()


def _final(chief: Replica) -> tuple[int, float]:
    m = FINAL.search(chief.output())
    assert m, chief.output()[-4000:]
    return int(m.group(1)), float(m.group(2))


def test_two_of_three_with_a_backup_worker_train_the_mlp(replicas):
    steps = 400  # at 250 steps accuracy varied 0.947-0.978 with which replicas contribute
    with local_cluster(ps=1, workers=3, log=None) as cluster:
        for i in range(3):
            replicas.append(Replica(cluster, i, "--sync", "--replicas_to_aggregate", "2",
                                    "--train_steps", str(steps)))  # fmt: skip
        codes = [r.wait(600) for r in replicas]
        assert codes == [0, 0, 0], [r.output()[-3000:] for r in replicas]
    chief = replicas[0]
    final_step, accuracy = _final(chief)
    assert final_step == steps
    assert accuracy >= 0.95
    reports = [STEP_LINE.search(line) for line in chief.lines]
    reports = [m for m in reports if m]
    # The global step advances exactly once per aggregation, each reported once.
    assert [int(m.group(1)) for m in reports] == list(range(1, steps + 1))
    assert all(len(m.group(2).split(",")) >= 1 for m in reports)
    # With one backup replica, stale gradients are dropped and counted.
    total_dropped = sum(int(m.group(3)) for m in reports)
    assert total_dropped > 0
    assert f"({total_dropped} dropped in all)" in chief.output()


def test_a_worker_killed_mid_training_does_not_stop_the_job(replicas, tmp_path):
    steps = 200
    with local_cluster(ps=1, workers=3, log=None) as cluster:
        for i in range(3):
            replicas.append(Replica(cluster, i, "--sync", "--replicas_to_aggregate", "2",
                                    "--train_steps", str(steps)))  # fmt: skip
        chief, _, victim = replicas
        _wait_until(lambda: chief.global_step() >= 40, 300, "global step 40", replicas)
        victim.kill()
        cluster.task("worker", 2).kill()
        assert chief.wait(600) == 0, chief.output()[-5000:]
        assert replicas[1].wait(120) == 0, replicas[1].output()[-5000:]
    final_step, accuracy = _final(chief)
    assert final_step == steps
    assert accuracy >= 0.9


def _async_args(steps: int, ckpt: pathlib.Path) -> list[str]:
    return ["--train_steps", str(steps), "--checkpoint_dir", str(ckpt),
            "--save_checkpoint_steps", "20"]  # fmt: skip


def test_the_ps_killed_and_restarted_resumes_from_the_latest_checkpoint(replicas, tmp_path):
    steps = 360  # at 240 the async pair's final accuracy once ended at 0.85 after a restore
    with local_cluster(ps=1, workers=2, log=None) as cluster:
        for i in range(2):
            replicas.append(Replica(cluster, i, *_async_args(steps, tmp_path)))
        chief = replicas[0]
        _wait_until(
            lambda: any("model.ckpt-" in p.name for p in tmp_path.iterdir()) and
            chief.global_step() >= 60, 300, "a checkpoint and global step 60", replicas,
        )  # fmt: skip
        ps = cluster.task("ps", 0)
        ps.kill()
        time.sleep(1.0)
        ps.restart()
        codes = [r.wait(600) for r in replicas]
        assert codes == [0, 0], [r.output()[-3000:] for r in replicas]
    out = chief.output()
    assert "Restoring parameters from" in out
    final_step, accuracy = _final(chief)
    assert final_step >= steps
    assert accuracy >= 0.9


def test_the_chief_killed_and_restarted_resumes_from_the_latest_checkpoint(replicas, tmp_path):
    steps = 360  # at 240 the async pair's final accuracy once ended at 0.85 after a restore
    with local_cluster(ps=1, workers=2, log=None) as cluster:
        for i in range(2):
            replicas.append(Replica(cluster, i, *_async_args(steps, tmp_path)))
        chief = replicas[0]
        _wait_until(
            lambda: any("model.ckpt-" in p.name for p in tmp_path.iterdir()) and
            chief.global_step() >= 60, 300, "a checkpoint and global step 60", replicas,
        )  # fmt: skip
        chief.kill()
        first_run = chief.output()
        chief.lines = []
        chief.start()
        codes = [r.wait(600) for r in replicas]
        assert codes == [0, 0], [r.output()[-3000:] for r in replicas]
    assert "Restoring parameters from" in chief.output(), first_run[-2000:]
    final_step, accuracy = _final(chief)
    assert final_step >= steps
    assert accuracy >= 0.9
