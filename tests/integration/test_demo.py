"""The main demo runs end to end (quick mode in the default suite, the full run under `slow`)."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path, *args):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--out", str(tmp_path), *args],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_demo_quick(tmp_path):
    out = _run(tmp_path, "--quick", "--no-distributed")  # section 6 is multi-process: below
    assert "identical evaluation" in out and "DIFFERENT" not in out
    assert (tmp_path / "figure1.pb").stat().st_size > 1000
    log = (tmp_path / "train.log").read_text()
    assert re.search(r"step 60/60 +loss=", log)


@pytest.mark.distributed
def test_demo_distributed_section(tmp_path):
    out = _run(tmp_path, "--quick", "--distributed-only")
    assert re.search(r"^4\d global steps \(\d+ by worker 0, \d+ by worker 1\) in .* global steps/s",
                     out, re.M), out  # fmt: skip
    assert "cluster shut down (task exit status 0)" in out
    log = (tmp_path / "cluster.log").read_text()
    assert "[ps:0] " in log and "[worker:1] " in log


@pytest.mark.slow
def test_demo_reaches_the_accuracy_targets(tmp_path):
    out = _run(tmp_path)
    accs = dict(re.findall(r"^(mlp|cnn): .* test accuracy ([0-9.]+)%", out, re.M))
    assert float(accs["mlp"]) >= 95.0 and float(accs["cnn"]) >= 97.0
