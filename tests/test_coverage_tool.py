"""tools/op_coverage.py: one row per declared op, a column per rule registry."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rill.graph.op_def import RuleRegistry  # noqa: E402
from tools import op_coverage as coverage  # noqa: E402

TITLES = ["shape fn", "CPU kernel", "GPU kernel", "gradient", "ONNX", "TFLite"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.op_coverage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_command_prints_a_row_per_declared_op_and_a_summary():
    res = _run()
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["op", "shape", "fn", "CPU", "kernel", "GPU", "kernel",
                                "gradient", "ONNX", "TFLite"]  # fmt: skip
    assert set(lines[1]) == {"-", " "}
    rows = [line.split() for line in lines[2 : lines.index("")]]
    assert all(len(r) == 7 for r in rows), "one cell per column on every row"
    names = [r[0] for r in rows]
    assert names == sorted(names) and len(set(names)) == len(names)
    # The command runs in a fresh process: only rill's own ops (tests may declare more here).
    assert {"Const", "Identity", "MatMul", "NoOp", "Placeholder"} <= set(names)
    summary = next(line for line in lines if " ops: shape fn " in line)
    assert summary.startswith(f"{len(rows)} ops: shape fn ")
    matmul = next(r for r in rows if r[0] == "MatMul")
    assert matmul[1:4] == ["yes", "yes", "yes"]  # shape fn, CPU and GPU kernels exist


def test_markdown_table():
    res = _run("--markdown", "MatMul", "NoOp")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "| op | " + " | ".join(TITLES) + " |"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert lines[2].startswith("| MatMul | yes | yes | yes |")
    assert lines[3].startswith("| NoOp | n/a |")  # no outputs: no shape fn to have
    assert lines[5].startswith("2 ops: shape fn 1/1, CPU kernel ")


def test_unknown_op_is_an_error():
    res = _run("NoSuchOp")
    assert res.returncode == 2 and "NoSuchOp" in res.stderr


@pytest.fixture
def fake_registries(monkeypatch):
    """Replaces every rule registry by fresh ones for the test (restored afterwards)."""
    monkeypatch.setattr(RuleRegistry, "_all", {})
    kernels = RuleRegistry("kernel")
    kernels.register("MatMul", "cpu-kernel", ("CPU",))
    kernels.register("Identity", "cpu-kernel", ("CPU",))
    kernels.register("Identity", "gpu-kernel", ("GPU",))
    grads = RuleRegistry("gradient")
    grads.register("MatMul", "matmul-grad")
    grads.register("Placeholder", None)  # explicitly not differentiable
    onnx = RuleRegistry("onnx_export")
    onnx.register("Identity", "identity-export")
    return kernels, grads, onnx


def test_cells_follow_the_registries(fake_registries):
    rows = {
        r[0]: r[1:] for r in coverage.coverage_rows(["MatMul", "Identity", "Placeholder", "NoOp"])
    }
    #                       shape  CPU    GPU    grad   ONNX   TFLite
    assert rows["MatMul"] == ("yes", "yes", "no", "yes", "no", "–")
    assert rows["Identity"] == ("yes", "yes", "yes", "no", "yes", "–")
    assert rows["Placeholder"] == ("yes", "no", "no", "n/a", "no", "–")
    assert rows["NoOp"] == ("n/a", "no", "no", "no", "no", "–")


def test_summary_counts_per_column(fake_registries):
    rows = coverage.coverage_rows(["MatMul", "Identity", "Placeholder", "NoOp"])
    assert coverage.summary(rows) == (
        "4 ops: shape fn 3/3, CPU kernel 2/4, GPU kernel 1/4, gradient 1/3, ONNX 1/4, TFLite –"
    )
    text = coverage.format_table(rows)
    assert text.splitlines()[0].split("  ")[0] == "op" and "TFLite" in text.splitlines()[0]
    assert len(text.splitlines()) == 2 + len(rows)


def test_real_kernel_column_matches_the_kernel_registry():
    coverage.load_rule_packages()
    from rill.exec.kernel_registry import kernel_registry

    for name, _shape, cpu, gpu, *_ in coverage.coverage_rows():
        assert cpu == ("yes" if kernel_registry.lookup(name, ("CPU",)) else "no"), name
        assert gpu == ("yes" if kernel_registry.lookup(name, ("GPU",)) else "no"), name
