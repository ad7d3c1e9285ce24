"""A script run as `python tools/X.py` has tools/ first on sys.path, so a module there named like
a package that a dependency imports hides that package. tools/coverage.py once hid `coverage`
from numba, whose compiler imports it when present: every compiled kernel then failed in
`python tools/onnx_suite_report.py` with "module 'coverage' has no attribute 'types'".
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"

# Modules our dependencies import when they are present (numba: coverage; numpy/onnx: none).
OPTIONAL_IMPORTS = ("coverage", "scipy", "tbb", "yaml", "typeguard", "psutil", "threadpoolctl")


def test_no_tools_module_takes_a_name_dependencies_look_for():
    ours = {p.stem for p in TOOLS.glob("*.py")} | {p.name for p in TOOLS.iterdir() if p.is_dir()}
    assert not ours & set(OPTIONAL_IMPORTS)


def test_numba_compiles_in_a_script_run_from_tools():
    pytest.importorskip("numba")
    code = (
        f"import sys; sys.path.insert(0, {str(TOOLS)!r})\n"
        "from numba import njit\n"
        "print(njit(lambda x: x + 1)(41))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["42"]
