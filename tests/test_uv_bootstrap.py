"""tools/uv.sh: how the Makefile finds uv, or installs it without touching the system Python.

Each case runs a copy of the script in a scratch checkout with an empty HOME, a PATH holding only
the system's basic tools, and fake `uv` / Python executables that record how they were called.
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASE_PATH = "/usr/bin:/bin"

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_uv(path: Path, log: Path) -> Path:
    # `--version` is the script's probe that a found uv runs; it is not logged.
    return _executable(path, f'[ "$1" = --version ] && exit 0\necho "uv $*" >> "{log}"\n')


def _checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "rill"
    (checkout / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "uv.sh", checkout / "tools" / "uv.sh")
    (tmp_path / "home").mkdir()
    return checkout


def _run(
    checkout: Path, tmp_path: Path, *, py: str, extra_path: str = ""
) -> subprocess.CompletedProcess:
    path = f"{extra_path}:{BASE_PATH}" if extra_path else BASE_PATH
    env = {"HOME": str(tmp_path / "home"), "PATH": path, "PY": py}
    return subprocess.run(
        ["sh", str(checkout / "tools" / "uv.sh"), "sync", "--locked"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_uv_on_path_is_used_and_nothing_is_installed(tmp_path):
    checkout = _checkout(tmp_path)
    log = tmp_path / "calls.log"
    _fake_uv(tmp_path / "bin" / "uv", log)
    python_log = tmp_path / "python.log"
    py = _executable(tmp_path / "py" / "python3", f'echo "python $*" >> "{python_log}"; exit 1\n')
    result = _run(checkout, tmp_path, py=str(py), extra_path=str(tmp_path / "bin"))
    assert result.returncode == 0, result.stderr
    assert log.read_text() == "uv sync --locked\n"
    assert not python_log.exists()
    assert not (checkout / ".venv-tools").exists()
    assert result.stderr == ""


def test_uv_where_its_installer_puts_it_is_used(tmp_path):
    checkout = _checkout(tmp_path)
    log = tmp_path / "calls.log"
    _fake_uv(tmp_path / "home" / ".local" / "bin" / "uv", log)
    py = _executable(tmp_path / "py" / "python3", "exit 1\n")
    result = _run(checkout, tmp_path, py=str(py))
    assert result.returncode == 0, result.stderr
    assert log.read_text() == "uv sync --locked\n"


def test_missing_uv_goes_into_a_private_venv(tmp_path):
    checkout = _checkout(tmp_path)
    log = tmp_path / "calls.log"
    pip_log = tmp_path / "pip.log"
    # A Python whose `-m venv DIR` makes DIR/bin/python; that python's `-m pip install uv`
    # drops a (fake) uv beside it.
    venv_python = (
        f'echo "pip $*" >> "{pip_log}"\n'
        'bin=$(dirname "$0")\n'
        f'printf \'#!/bin/sh\\necho "uv $*" >> "{log}"\\n\' > "$bin/uv"\n'
        'chmod +x "$bin/uv"\n'
    )
    py = _executable(
        tmp_path / "py" / "python3",
        'if [ "$1 $2" = "-m venv" ]; then\n'
        '  mkdir -p "$3/bin"\n'
        f"  cat > \"$3/bin/python\" <<'EOF'\n#!/bin/sh\n{venv_python}EOF\n"
        '  chmod +x "$3/bin/python"\n'
        "  exit 0\n"
        "fi\n"
        "exit 1\n",
    )
    result = _run(checkout, tmp_path, py=str(py))
    assert result.returncode == 0, result.stderr
    assert "installing it into" in result.stderr and ".venv-tools" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pip install" in pip_log.read_text() and "uv" in pip_log.read_text()
    assert "--user" not in pip_log.read_text()
    assert log.read_text() == "uv sync --locked\n"
    assert (checkout / ".venv-tools" / "bin" / "uv").exists()

    # The next run finds the uv it installed and installs nothing more.
    pip_log.unlink()
    result = _run(checkout, tmp_path, py=str(py))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert not pip_log.exists()


def test_without_venv_it_falls_back_to_a_user_install(tmp_path):
    checkout = _checkout(tmp_path)
    log = tmp_path / "calls.log"
    pip_log = tmp_path / "pip.log"
    home_bin = tmp_path / "home" / ".local" / "bin"
    py = _executable(
        tmp_path / "py" / "python3",
        'if [ "$1 $2" = "-m pip" ]; then\n'
        f'  echo "$*" >> "{pip_log}"\n'
        f'  mkdir -p "{home_bin}"\n'
        f'  printf \'#!/bin/sh\\n[ "$1" = --version ] && exit 0\\necho "uv $*" >> "{log}"\\n\' > "{home_bin}/uv"\n'
        f'  chmod +x "{home_bin}/uv"\n'
        "  exit 0\n"
        "fi\n"
        "exit 1\n",
    )
    result = _run(checkout, tmp_path, py=str(py))
    assert result.returncode == 0, result.stderr
    assert "--break-system-packages" in result.stderr
    flags = pip_log.read_text().split()
    assert {"--user", "--break-system-packages", "uv"} <= set(flags)
    assert log.read_text() == "uv sync --locked\n"
    assert not (checkout / ".venv-tools").exists()


def test_no_python_at_all_is_a_clear_error(tmp_path):
    checkout = _checkout(tmp_path)
    result = _run(checkout, tmp_path, py="python3-that-does-not-exist")
    assert result.returncode != 0
    assert "no Python named 'python3-that-does-not-exist'" in result.stderr


def test_makefile_never_installs_into_the_system_python():
    makefile = (ROOT / "Makefile").read_text()
    assert "tools/uv.sh" in makefile
    assert "pip install" not in makefile
    assert os.access(ROOT / "tools" / "uv.sh", os.X_OK)
