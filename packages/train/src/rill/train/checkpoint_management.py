"""Finding checkpoints: the `checkpoint` state file, latest_checkpoint, and keep-best bookkeeping.

A directory of checkpoints holds, next to each checkpoint's `.index` and `.data-*` files, one
small state file (by default named `checkpoint`) in TensorFlow's text format for its
`CheckpointState` message:

    model_checkpoint_path: "model.ckpt-300"
    all_model_checkpoint_paths: "model.ckpt-200"
    all_model_checkpoint_paths: "model.ckpt-300"
    all_model_checkpoint_timestamps: 1712345600.25
    all_model_checkpoint_timestamps: 1712345660.5
    last_preserved_timestamp: 1712345500.0

Paths are written relative to the state file's directory, so the directory can be moved or
copied; readers join them back onto the directory they were read from.

rill extension (written only by a Saver with `keep_best`, or by `save(..., metric=...)`): one
`checkpoint_metrics { path: "..." metric: 0.25 timestamp: ... }` entry per kept checkpoint that
was saved with a metric, `best_mode: "min"` or `"max"`, and `best_model_checkpoint_paths`, the
checkpoints kept for their metric, best first. TensorFlow's parser does not know these fields;
a state file without them is exactly TensorFlow's.

The state file is replaced atomically: written to a temporary name in the same directory,
fsynced, then renamed over the old one.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> update_checkpoint_state(d, os.path.join(d, "model-2"), [os.path.join(d, "model-1")])
>>> print(open(os.path.join(d, "checkpoint")).read(), end="")
model_checkpoint_path: "model-2"
all_model_checkpoint_paths: "model-1"
all_model_checkpoint_paths: "model-2"
>>> get_checkpoint_state(d).model_checkpoint_path == os.path.join(d, "model-2")
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from rill.exec import checkpoint_format
from rill.exec.tf_checkpoint import open_checkpoint
from rill.graph.errors import NotFoundError

__all__ = [
    "CheckpointMetric",
    "CheckpointState",
    "best_checkpoint",
    "checkpoint_exists",
    "fault_hook",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_variable",
    "remove_checkpoint",
    "update_checkpoint_state",
]

_log = logging.getLogger(__name__)


@dataclasses.dataclass
class CheckpointMetric:
    """The metric a checkpoint was saved with (rill extension)."""

    path: str
    metric: float
    timestamp: float = 0.0


@dataclasses.dataclass
class CheckpointState:
    """TensorFlow's CheckpointState message, plus rill's keep-best fields."""

    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list[str] = dataclasses.field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = dataclasses.field(default_factory=list)
    last_preserved_timestamp: float = 0.0
    best_mode: str = ""
    best_model_checkpoint_paths: list[str] = dataclasses.field(default_factory=list)
    checkpoint_metrics: list[CheckpointMetric] = dataclasses.field(default_factory=list)

    def metric_of(self, path: str) -> float | None:
        """The metric `path` was saved with, or None."""
        for m in self.checkpoint_metrics:
            if m.path == path:
                return m.metric
        return None


# -- fault injection ----------------------------------------------------------------------------

_hooks = threading.local()


@contextlib.contextmanager
def fault_hook(fn: Callable[[str, dict], None]):
    """Calls fn(stage, paths) at each stage of a checkpoint save made by this thread (tests).

    Stages, in order: checkpoint_format's "data_written", "index_written" and "data_renamed"
    (while the checkpoint's own files are written; see `checkpoint_format.fault_hook`), then
    "state_written" (the new state file is complete under a temporary name, the old one still
    in place) and "state_renamed" (the new state file is in place; checkpoints it no longer
    lists are not deleted yet). Raising from fn simulates a crash at that point; `os._exit`
    from fn is a real one.

    Note: the checkpoint_format stages run on the thread that runs the SaveV2 kernel, which is
    the caller's for the small save graphs Saver builds on one device.
    """
    prev = getattr(_hooks, "fn", None)
    _hooks.fn = fn
    try:
        with checkpoint_format.fault_hook(fn):
            yield
    finally:
        _hooks.fn = prev


def _stage(stage: str, paths: dict) -> None:
    fn = getattr(_hooks, "fn", None)
    if fn is not None:
        fn(stage, paths)


# -- the text format ----------------------------------------------------------------------------

_REPEATED = {"all_model_checkpoint_paths", "all_model_checkpoint_timestamps"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "'": 39, "a": 7, "b": 8, "f": 12,
              "v": 11, "?": 63}  # fmt: skip


def _quote(s: str) -> str:
    out = []
    for b in os.fsencode(s):
        c = chr(b)
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _number(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _format_state(state: CheckpointState) -> str:
    lines = [f"model_checkpoint_path: {_quote(state.model_checkpoint_path)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in state.all_model_checkpoint_paths]
    lines += [
        f"all_model_checkpoint_timestamps: {_number(t)}"
        for t in state.all_model_checkpoint_timestamps
    ]
    if state.last_preserved_timestamp:
        lines.append(f"last_preserved_timestamp: {_number(state.last_preserved_timestamp)}")
    if state.best_mode:
        lines.append(f"best_mode: {_quote(state.best_mode)}")
    lines += [
        f"best_model_checkpoint_paths: {_quote(p)}" for p in state.best_model_checkpoint_paths
    ]
    for m in state.checkpoint_metrics:
        lines.append(
            f"checkpoint_metrics {{ path: {_quote(m.path)} metric: {_number(m.metric)} "
            f"timestamp: {_number(m.timestamp)} }}"
        )
    return "\n".join(lines) + "\n"


_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(?P<punct>[:{}])"""
    r"""|(?P<word>[-+]?(?:[0-9.][0-9.]*(?:[eE][-+]?[0-9]+)?[fF]?|[A-Za-z_][A-Za-z0-9_.]*))"""
)


def _unquote(tok: str) -> str:
    body, out, i = tok[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = body[i + 1]
        if e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif e == "x":
            m = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2 :])
            if not m:
                raise ValueError(f"bad escape in {tok}")
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        elif e in _UNESCAPES:
            out.append(_UNESCAPES[e])
            i += 2
        else:
            raise ValueError(f"bad escape \\{e} in {tok}")
    return os.fsdecode(bytes(out))


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"unexpected text at offset {pos}: {text[pos : pos + 20]!r}")
        pos = m.end()
        if m.lastgroup:
            out.append((m.lastgroup, m.group(m.lastgroup)))
    return out


def _to_float(tok: tuple[str, str]) -> float:
    kind, v = tok
    if kind != "word":
        raise ValueError(f"expected a number, found {v!r}")
    low = v.lower().lstrip("+")
    if low in ("inf", "infinity", "-inf", "-infinity", "nan", "-nan"):
        return float(low)
    return float(v.rstrip("fF") if not low.startswith("0x") else int(v, 16))


def _parse_state(text: str) -> CheckpointState:
    toks = _tokens(text)
    state = CheckpointState()
    i = 0

    def expect(kind: str) -> str:
        nonlocal i
        if i >= len(toks) or toks[i][0] != kind and toks[i][1] != kind:
            found = toks[i][1] if i < len(toks) else "the end"
            raise ValueError(f"expected {kind!r}, found {found!r}")
        i += 1
        return toks[i - 1][1]

    def string() -> str:
        nonlocal i
        if i >= len(toks) or toks[i][0] != "str":
            raise ValueError(f"expected a string, found {toks[i][1] if i < len(toks) else 'end'}")
        i += 1
        return _unquote(toks[i - 1][1])

    def number() -> float:
        nonlocal i
        if i >= len(toks):
            raise ValueError("expected a number, found the end")
        i += 1
        return _to_float(toks[i - 1])

    while i < len(toks):
        name = expect("word")
        if name == "checkpoint_metrics":
            if toks[i][1] == ":":
                i += 1
            expect("{")
            m = CheckpointMetric("", math.nan)
            while toks[i][1] != "}":
                field = expect("word")
                expect(":")
                if field == "path":
                    m.path = string()
                elif field in ("metric", "timestamp"):
                    setattr(m, field, number())
                else:
                    raise ValueError(f"checkpoint_metrics has no field {field!r}")
            expect("}")
            state.checkpoint_metrics.append(m)
            continue
        expect(":")
        if name in ("model_checkpoint_path", "best_mode"):
            setattr(state, name, string())
        elif name in ("all_model_checkpoint_paths", "best_model_checkpoint_paths"):
            getattr(state, name).append(string())
        elif name == "all_model_checkpoint_timestamps":
            state.all_model_checkpoint_timestamps.append(number())
        elif name == "last_preserved_timestamp":
            state.last_preserved_timestamp = number()
        else:
            raise ValueError(f"CheckpointState has no field {name!r}")
    return state


# -- reading and writing the state file ---------------------------------------------------------


def _state_path(checkpoint_dir, latest_filename: str | None) -> str:
    return os.path.join(os.fspath(checkpoint_dir), latest_filename or "checkpoint")


def _relative(path: str, directory: str) -> str:
    try:
        return os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    except ValueError:  # another drive (Windows): keep it absolute
        return os.path.abspath(path)


def _absolute(path: str, directory: str) -> str:
    return path if not path or os.path.isabs(path) else os.path.join(directory, path)


def generate_checkpoint_state_proto(
    save_dir,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Sequence[str] | None = None,
    all_model_checkpoint_timestamps: Sequence[float] | None = None,
    last_preserved_timestamp: float | None = None,
) -> CheckpointState:
    """A CheckpointState whose paths are relative to `save_dir`.

    `model_checkpoint_path` is appended to `all_model_checkpoint_paths` when it is not already
    its last entry, as TensorFlow does.
    """
    save_dir = os.fspath(save_dir)
    paths = list(all_model_checkpoint_paths or [])
    stamps = list(all_model_checkpoint_timestamps or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
        if stamps and len(stamps) == len(paths) - 1:
            stamps.append(time.time())
    if stamps and len(stamps) != len(paths):
        raise ValueError(
            f"{len(stamps)} checkpoint timestamps for {len(paths)} checkpoint paths; give one "
            "timestamp per path"
        )
    return CheckpointState(
        model_checkpoint_path=_relative(model_checkpoint_path, save_dir),
        all_model_checkpoint_paths=[_relative(p, save_dir) for p in paths],
        all_model_checkpoint_timestamps=[float(t) for t in stamps],
        last_preserved_timestamp=float(last_preserved_timestamp or 0.0),
    )


def _write_state(save_dir: str, state: CheckpointState, latest_filename: str | None) -> None:
    """Replaces the state file atomically (temporary file, fsync, rename, fsync the directory)."""
    if latest_filename and os.path.basename(latest_filename) != latest_filename:
        raise ValueError(f"latest_filename {latest_filename!r} must not contain path components")
    final = _state_path(save_dir, latest_filename)
    tmp = f"{final}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    paths = {"state_tmp": tmp, "state": final}
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(_format_state(state))
            f.flush()
            os.fsync(f.fileno())
        _stage("state_written", paths)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    checkpoint_format._fsync_dir(os.fspath(save_dir) or ".")


def update_checkpoint_state(
    save_dir,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Sequence[str] | None = None,
    latest_filename: str | None = None,
    all_model_checkpoint_timestamps: Sequence[float] | None = None,
    last_preserved_timestamp: float | None = None,
) -> None:
    """Writes the state file of `save_dir` (atomically), with paths relative to `save_dir`.

    Args:
        save_dir: the directory holding the state file.
        model_checkpoint_path: the latest checkpoint's prefix.
        all_model_checkpoint_paths: the checkpoints still kept, oldest first;
            model_checkpoint_path is appended when it is not the last.
        latest_filename: the state file's name (default "checkpoint").
        all_model_checkpoint_timestamps: one creation time (seconds since the epoch) per path.
        last_preserved_timestamp: the time of the last checkpoint kept for
            keep_checkpoint_every_n_hours.
    """
    state = generate_checkpoint_state_proto(
        save_dir,
        model_checkpoint_path,
        all_model_checkpoint_paths,
        all_model_checkpoint_timestamps,
        last_preserved_timestamp,
    )
    _write_state(os.fspath(save_dir), state, latest_filename)


def get_checkpoint_state(checkpoint_dir, latest_filename: str | None = None):
    """The CheckpointState in `checkpoint_dir`, or None when it has no state file.

    Relative paths in the file are returned joined onto `checkpoint_dir`. A state file that does
    not parse is logged and treated as absent, as TensorFlow does.
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    path = _state_path(checkpoint_dir, latest_filename)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        _log.warning("%s: cannot read the checkpoint state file: %s", path, e)
        return None
    try:
        state = _parse_state(text)
    except (ValueError, IndexError) as e:
        _log.warning("%s: the checkpoint state file does not parse (%s); ignoring it", path, e)
        return None
    if not state.model_checkpoint_path:
        _log.warning("%s: the checkpoint state file has no model_checkpoint_path", path)
        return None
    join = lambda p: _absolute(p, checkpoint_dir)  # noqa: E731
    state.model_checkpoint_path = join(state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [join(p) for p in state.all_model_checkpoint_paths]
    state.best_model_checkpoint_paths = [join(p) for p in state.best_model_checkpoint_paths]
    for m in state.checkpoint_metrics:
        m.path = join(m.path)
    return state


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint (its index) exists at `checkpoint_prefix`."""
    return checkpoint_format.checkpoint_exists(checkpoint_prefix)


def latest_checkpoint(checkpoint_dir, latest_filename: str | None = None) -> str | None:
    """The prefix of the newest checkpoint recorded in `checkpoint_dir`'s state file, or None.

    None also when the state file names a checkpoint whose index is gone.
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None:
        return None
    if checkpoint_exists(state.model_checkpoint_path):
        return state.model_checkpoint_path
    _log.error(
        "couldn't find the checkpoint %s named by the state file", state.model_checkpoint_path
    )
    return None


def best_checkpoint(checkpoint_dir, latest_filename: str | None = None) -> str | None:
    """The prefix of the best checkpoint by metric kept in `checkpoint_dir` (rill extension).

    It is the first of the state's best_model_checkpoint_paths (written by a Saver with
    keep_best); None when there is none.
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None:
        return None
    for p in state.best_model_checkpoint_paths:
        if checkpoint_exists(p):
            return p
    return None


def get_checkpoint_mtimes(checkpoint_prefixes: Sequence[str]) -> list[float]:
    """The modification time of each existing checkpoint's index (missing ones are skipped)."""
    out = []
    for p in checkpoint_prefixes:
        with contextlib.suppress(OSError):
            out.append(os.path.getmtime(checkpoint_format.index_path(p)))
    return out


def remove_checkpoint(
    checkpoint_prefix, checkpoint_format_version: int = 2, meta_graph_suffix="meta"
):
    """Deletes a checkpoint's files: its index first (so it stops existing at once), then its
    data files and meta graph. Files already gone are ignored."""
    prefix = os.fspath(checkpoint_prefix)
    for path in (
        [checkpoint_format.index_path(prefix)]
        + sorted(glob.glob(glob.escape(prefix) + ".data-?????-of-?????"))
        + [f"{prefix}.{meta_graph_suffix}"]
    ):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _prefix_for(ckpt_dir_or_file) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise NotFoundError(f"no checkpoint state file (or checkpoint) in directory {path!r}")
        return found
    return path


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list[int]]]:
    """(name, shape) of every tensor in a checkpoint (a prefix, or a directory's latest)."""
    reader = open_checkpoint(_prefix_for(ckpt_dir_or_file))
    return [(n, list(reader.shape(n))) for n in reader.names()]


def load_variable(ckpt_dir_or_file, name: str):
    """The value of tensor `name` in a checkpoint (a prefix, or a directory's latest)."""
    if name.endswith(":0"):
        name = name[:-2]
    return open_checkpoint(_prefix_for(ckpt_dir_or_file)).read(name)
