#!/bin/sh
# Runs uv with the given arguments, finding or installing it first, without ever touching the
# system Python (PEP 668 "externally managed" distributions forbid that).
#
# Where it looks, in order: `uv` on PATH; the places uv's own installers put it
# (~/.local/bin, ~/.cargo/bin, $XDG_BIN_HOME, $CARGO_HOME/bin); a uv that an earlier run installed in
# this checkout (.venv-tools/); `$PY -m uv` when that Python already has the module.
# Otherwise it installs uv from the package index into .venv-tools/ (a private virtual environment
# made with `$PY -m venv`), or, where venv is unavailable, with
# `pip install --user --break-system-packages`, saying so in one line.
set -eu

PY=${PY:-python3}
here=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
tools_venv="$here/.venv-tools"

found_uv() {
    if command -v uv >/dev/null 2>&1; then
        echo uv
        return 0
    fi
    for candidate in \
        "${XDG_BIN_HOME:-}/uv" \
        "${HOME:-/nonexistent}/.local/bin/uv" \
        "${CARGO_HOME:-${HOME:-/nonexistent}/.cargo}/bin/uv" \
        "$tools_venv/bin/uv"; do
        if [ -x "$candidate" ] && "$candidate" --version >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if uv_cmd=$(found_uv); then
    exec "$uv_cmd" "$@"
fi
if "$PY" -m uv --version >/dev/null 2>&1; then
    exec "$PY" -m uv "$@"
fi

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "uv.sh: uv is not installed and no Python named '$PY' was found; install Python 3.11+" \
        "or uv (https://docs.astral.sh/uv/), or run make PY=/path/to/python3" >&2
    exit 1
fi

rm -rf "$tools_venv"
if "$PY" -m venv "$tools_venv" >/dev/null 2>&1 && [ -x "$tools_venv/bin/python" ]; then
    echo "uv.sh: uv not found; installing it into $tools_venv (a private venv; the system Python is untouched)" >&2
    "$tools_venv/bin/python" -m pip install --quiet --disable-pip-version-check uv >&2
    exec "$tools_venv/bin/uv" "$@"
fi
rm -rf "$tools_venv"

echo "uv.sh: uv not found and '$PY -m venv' is unavailable; installing uv with pip --user --break-system-packages (into ~/.local, not the system site-packages)" >&2
"$PY" -m pip install --quiet --disable-pip-version-check --user --break-system-packages uv >&2
if uv_cmd=$(found_uv); then
    exec "$uv_cmd" "$@"
fi
exec "$PY" -m uv "$@"
