"""rill-server / python -m rill.distributed: which task it runs, bad configurations, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rill.distributed import ClusterConfigError
from rill.distributed.cli import build_parser, main, parse_cluster_flag, resolve_task
from rill.distributed.launch import pick_ports

TF_CONFIG = json.dumps({"cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]},
                        "task": {"type": "worker", "index": 1}})  # fmt: skip


def resolve(argv, environ=None):
    return resolve_task(build_parser().parse_args(argv), {} if environ is None else environ)


def test_flags_cluster_json_and_compact():
    c = resolve(["--cluster", '{"ps": ["p:1"], "worker": ["w0:1", "w1:1"]}',
                 "--job_name", "worker", "--task_index", "1"])  # fmt: skip
    assert c.task_name == "/job:worker/replica:0/task:1" and c.address == "w1:1"
    c = resolve(["--cluster", "ps=p:1;worker=w0:1,w1:1", "--job_name", "ps"])
    assert c.task_name == "/job:ps/replica:0/task:0" and c.rpc_layer == "grpc"
    c = resolve(["--cluster", '{"ps": {"3": "p:1"}}', "--job_name", "ps", "--task_index", "3"])
    assert c.address == "p:1"


def test_flags_allow_any_job_name():
    c = resolve(["--cluster", "trainer=t:1", "--job-name", "trainer", "--task-index", "0"])
    assert c.task_name == "/job:trainer/replica:0/task:0"


def test_classic_hosts_flags():
    c = resolve(["--ps_hosts", "p0:1,p1:1", "--worker_hosts", "w0:1", "--job_name", "ps",
                 "--task_index", "1"])  # fmt: skip
    assert c.address == "p1:1" and c.cluster.jobs == ["ps", "worker"]


def test_tf_config_from_environment():
    c = resolve([], {"TF_CONFIG": TF_CONFIG})
    assert c.task_name == "/job:worker/replica:0/task:1" and c.address == "w1:2222"
    assert c.rpc_layer == "grpc"
    c = resolve(["--job_name", "ps"], {"TF_CONFIG": TF_CONFIG})  # flags pick another task
    assert c.task_name == "/job:ps/replica:0/task:0"


def test_flags_win_over_tf_config():
    c = resolve(["--cluster", "ps=p:1", "--job_name", "ps"], {"TF_CONFIG": TF_CONFIG})
    assert c.address == "p:1"


def test_standalone_server():
    c = resolve([])
    assert c.task_name == "/job:localhost/replica:0/task:0" and c.address == "localhost:0"
    assert resolve(["--port", "5000"]).address == "localhost:5000"


@pytest.mark.parametrize(
    "argv, environ, part",
    [
        (["--cluster", "ps=p:1"], None, "needs --job_name (one of: ps)"),
        (["--cluster", "ps=p:1", "--job_name", "worker"], None, "'worker' is not a job"),
        (
            ["--cluster", "ps=p:1", "--job_name", "ps", "--task_index", "1"],
            None,
            "--task_index 1 is out of range for job 'ps' (its tasks: 0)",
        ),
        (["--cluster", "ps=p:1", "--job_name", "ps", "--task_index", "-1"], None, "negative"),
        (["--cluster", "ps=p:1,p:1", "--job_name", "ps"], None, "address 'p:1' is given to"),
        (["--cluster", "ps=grpc://p:1", "--job_name", "ps"], None, "without a scheme"),
        (["--cluster", "ps:p:1", "--job_name", "ps"], None, "is not 'job=host:port"),
        (["--cluster", "ps=a:1;ps=b:1", "--job_name", "ps"], None, "names job 'ps' twice"),
        (["--cluster", '{"ps": ["p:1"]', "--job_name", "ps"], None, "not valid JSON"),
        (["--cluster", '{"ps": "p:1"}', "--job_name", "ps"], None, "must be a list"),
        (["--cluster", "ps=p:1", "--ps_hosts", "p:1", "--job_name", "ps"], None, "not both"),
        (
            ["--cluster", "ps=p:1", "--job_name", "ps", "--protocol", "http"],
            None,
            "rpc layer 'http' is not served",
        ),
        (["--cluster", "ps=p:1", "--job_name", "ps", "--port", "70000"], None, "--port 70000"),
        (["--job_name", "ps"], None, "need a cluster"),
        ([], {"TF_CONFIG": '{"cluster": {"ps": ["p:1"]}}'}, "TF_CONFIG names no task"),
        (
            [],
            {"TF_CONFIG": '{"cluster": {"ps": ["p:1"]}, "task": {"type": "evaluator"}}'},
            "evaluator runs a client",
        ),
        (
            [],
            {"TF_CONFIG": '{"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 4}}'},
            "out of range",
        ),
        ([], {"TF_CONFIG": "{cluster}"}, "not valid JSON"),
        (
            [],
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"ps": ["p:1"]}, "rpc_layer": "grpc+verbs", "task": {"type": "ps"}}
                )
            },
            "rpc layer 'grpc+verbs'",
        ),  # fmt: skip
        (["--task_index", "3"], {"TF_CONFIG": TF_CONFIG}, "--task_index 3 is out of range"),
    ],
)
def test_bad_configuration(argv, environ, part):
    with pytest.raises(ClusterConfigError) as info:
        resolve(argv, environ)
    assert part in str(info.value)


def test_parse_cluster_flag_spaces():
    assert parse_cluster_flag(" ps=p:1  worker=w:1 ").jobs == ["ps", "worker"]
    with pytest.raises(ClusterConfigError, match="names no job"):
        parse_cluster_flag(" ; ")


def test_main_check_prints_the_task(capsys):
    assert main(["--check", "--cluster", "ps=p:1;worker=w0:1,w1:1", "--job_name", "worker"]) == 0
    out = capsys.readouterr().out
    assert "task /job:worker/replica:0/task:0 (worker 0, chief) at w0:1" in out
    assert "/job:ps/replica:0/task:0" in out and "w1:1" in out


def test_main_bad_configuration_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"ps": ["p:1"]}, "task": {"type": "boss"}}')
    assert main([]) == 2
    err = capsys.readouterr().err
    assert 'rill-server: bad configuration: TF_CONFIG "task" has unknown role "type": "boss"' in err


def _env(**extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def test_module_entry_point_bad_config_exits_2():
    proc = subprocess.run([sys.executable, "-m", "rill.distributed"], capture_output=True,
                          text=True, timeout=60,
                          env=_env(TF_CONFIG='{"cluster": {"ps": ["p:1", "p:1"]}}'))  # fmt: skip
    assert proc.returncode == 2
    assert 'address "p:1" is given to 2 tasks' in proc.stderr


class _Output:
    """Collects a process's merged output on a thread; waits for lines with a deadline."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, mark, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(mark in line for line in self.lines):
                return "\n".join(self.lines)
            if self.proc.poll() is not None and not self._thread.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line with {mark!r} in:\n" + "\n".join(self.lines))

    def finish(self, timeout=60.0):
        code = self.proc.wait(timeout)
        self._thread.join(10)
        return code, "\n".join(self.lines)


@pytest.mark.distributed
@pytest.mark.parametrize("sig, port_flag", [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_server_runs_from_tf_config_and_stops_on_signal(sig, port_flag):
    (port,) = pick_ports(1)
    # With --port the task listens there, whatever port its TF_CONFIG address has.
    mine = "127.0.0.1:2" if port_flag else f"127.0.0.1:{port}"
    tf_config = json.dumps({"cluster": {"worker": [mine], "ps": ["127.0.0.1:1"]},
                            "task": {"type": "worker", "index": 0}})  # fmt: skip
    flags = ["--port", str(port)] if port_flag else []
    proc = subprocess.Popen([sys.executable, "-m", "rill.distributed", *flags], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=_env(TF_CONFIG=tf_config))  # fmt: skip
    try:
        out = _Output(proc)
        text = out.wait_for("serving at")
        assert "task /job:worker/replica:0/task:0 (worker 0, chief)" in text
        assert "/job:ps/replica:0/task:0" in text  # its peer is logged
        assert f"serving at grpc://127.0.0.1:{port}" in text
        proc.send_signal(sig)
        code, rest = out.finish()
        assert code == 0, rest
        assert f"stopping ({signal.Signals(sig).name})" in rest and "stopped in" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.distributed
def test_standalone_server_port_and_console_script():
    script = os.path.join(os.path.dirname(sys.executable), "rill-server")
    cmd = [script] if os.path.exists(script) else [sys.executable, "-m", "rill.distributed"]
    proc = subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=_env())  # fmt: skip
    try:
        out = _Output(proc)
        assert "/job:localhost/replica:0/task:0" in out.wait_for("serving at grpc://")
        proc.terminate()
        code, text = out.finish()
        assert code == 0, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.distributed
def test_port_in_use_exits_1():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rill.distributed", "--cluster", f"ps=127.0.0.1:{port}",
             "--job_name", "ps"], capture_output=True, text=True, timeout=60, env=_env(),
        )  # fmt: skip
    finally:
        s.close()
    assert proc.returncode == 1, proc.stderr
    assert f"/job:ps/replica:0/task:0 at 127.0.0.1:{port} failed to start" in proc.stderr


def test_kubernetes_tfjob_manifest_runs_rill_server_from_tf_config():
    """examples/k8s/tfjob.yaml: every replica runs `rill-server` unchanged; the TF_CONFIG the
    operator writes for each replica (formats.md §7) resolves to that replica's task."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[2] / "examples/k8s/tfjob.yaml").read_text()
    assert "kind: TFJob" in text and "apiVersion: kubeflow.org/v1" in text
    replicas = dict(re.findall(r"^    (\w+):\n      replicas: (\d+)", text, re.M))
    assert replicas == {"PS": "1", "Worker": "2"}
    assert text.count('command: ["rill-server"]') == 2  # one per replica spec
    assert text.count("name: tensorflow") == 2 and text.count("containerPort: 2222") == 2
    name = re.search(r"^  name: (\S+)", text, re.M).group(1)
    cluster = {rtype.lower(): [f"{name}-{rtype.lower()}-{i}.default.svc:2222" for i in range(int(n))]
               for rtype, n in replicas.items()}  # fmt: skip
    for rtype, addresses in cluster.items():
        for i in range(len(addresses)):
            env = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": rtype, "index": i},
                                            "environment": "cloud"})}  # fmt: skip
            c = resolve([], env)
            assert c.task_name == f"/job:{rtype}/replica:0/task:{i}"
            assert c.address == f"rill-mlp-{rtype}-{i}.default.svc:2222" and c.port == 2222


@pytest.mark.distributed
def test_unresolvable_host_name_fails_after_the_start_timeout():
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rill.distributed", "--cluster", "ps=no-such-host.invalid:2222",
         "--job_name", "ps", "--start_timeout", "1.5"],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "host name 'no-such-host.invalid' does not resolve after 1.5 s" in proc.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.distributed
def test_ps_exits_0_when_the_coordinator_is_gone():
    chief_port, ps_port = pick_ports(2)
    cluster = f"chief=127.0.0.1:{chief_port};ps=127.0.0.1:{ps_port}"
    base = [sys.executable, "-m", "rill.distributed", "--cluster", cluster]
    popen = dict(text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env())
    chief = subprocess.Popen([*base, "--job_name", "chief", "--exit_with_coordinator", "1"],
                             **popen)  # fmt: skip
    ps = subprocess.Popen([*base, "--job_name", "ps", "--exit_with_coordinator", "1"], **popen)
    try:
        chief_out, ps_out = _Output(chief), _Output(ps)
        assert "ignored: this task is the coordinator" in chief_out.wait_for("ignored")
        ps_out.wait_for("coordinator /job:chief/replica:0/task:0 at 127.0.0.1:")  # it saw it up
        chief.terminate()
        assert chief_out.finish()[0] == 0
        t0 = time.monotonic()
        code, text = ps_out.finish(timeout=30)
        assert code == 0, text
        assert "gone for 1 s: the job is finished" in text and "stopped in" in text
        assert time.monotonic() - t0 < 20
    finally:
        for p in (chief, ps):
            if p.poll() is None:
                p.kill()
                p.wait(10)
