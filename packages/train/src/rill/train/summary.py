"""TensorFlow-1's `tf.summary`: summary ops collected in the graph, and `FileWriter`, which
writes them to event files that TensorBoard reads.

The summary values are computed by graph ops (rill.graph's ScalarSummary, HistogramSummary,
...); the event files are written by tensorboardX's `EventsWriter` (its TFRecord framing with
masked CRCs, the file name and version record TensorBoard expects, and its `Event` protocol
buffers), so rill does not frame records of its own.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     loss = rg.constant(0.25)
...     scalar("loss", loss).op.type, merge_all().op.type
('ScalarSummary', 'MergeSummary')
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
import weakref

import numpy as np
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import event_pb2, summary_pb2
from tensorboardX.record_writer import directory_check

from rill.graph import dtypes
from rill.graph.graph import Graph, Tensor, convert_to_tensor, get_default_graph
from rill.graph.ops import summary_ops
from rill.train.variable_scope import GraphKeys

__all__ = [
    "scalar",
    "histogram",
    "image",
    "audio",
    "text",
    "tensor_summary",
    "merge",
    "merge_all",
    "get_summary_description",
    "FileWriter",
    "FileWriterCache",
    "Summary",
    "SummaryDescription",
    "Event",
    "SessionLog",
    "TaggedRunMetadata",
    "HistogramProto",
]

# The protocol buffers TensorFlow-1 exposes as tf.summary.Summary, tf.Event, ...
Summary = summary_pb2.Summary
SummaryDescription = summary_pb2.SummaryDescription
SummaryMetadata = summary_pb2.SummaryMetadata
HistogramProto = summary_pb2.HistogramProto
Event = event_pb2.Event
SessionLog = event_pb2.SessionLog
TaggedRunMetadata = event_pb2.TaggedRunMetadata

# TensorBoard's tag alphabet (TensorFlow's summary_op_util): letters, digits, _ - . /
_VALID_TAG = re.compile(r"^[-/\w.]+$")
_INVALID_CHAR = re.compile(r"[^-/\w.]")


def _check_name(name, what: str = "summary name") -> str:
    """A summary name TensorBoard can show, or a ValueError naming the bad characters.

    TensorFlow replaces such characters by "_" with a log line; rill refuses the name, so the
    tag a program asked for is the tag it gets.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}")
    if not _VALID_TAG.match(name):
        bad = sorted(set(_INVALID_CHAR.findall(name)))
        raise ValueError(
            f"{what} {name!r} has characters TensorBoard does not accept: "
            + ", ".join(repr(c) for c in bad)
            + "; use letters, digits, '_', '-', '.' and '/'"
        )
    return name


class _Scope:
    """TensorFlow's summary_scope: the tag is the name scope opened for the summary (prefixed
    by `family`), so summaries made inside name scopes carry them."""

    def __init__(self, name, family):
        self.name = _check_name(name)
        self.family = _check_name(family, "summary family") if family is not None else None
        base = self.name if self.family is None else f"{self.family}/{self.name}"
        self._cm = get_default_graph().name_scope(base)

    def __enter__(self):
        scope = self._cm.__enter__()
        tag = scope.rstrip("/")
        if self.family is not None:
            tag = f"{self.family}/{tag}"
        return tag, scope

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def _collect(t: Tensor, collections, default=(GraphKeys.SUMMARIES,)) -> Tensor:
    g = t.graph
    for key in collections if collections is not None else default:
        g.add_to_collection(key, t)
    return t


def scalar(name, tensor, collections=None, family=None) -> Tensor:
    """A summary of one real number (`tf.summary.scalar`).

    Raises:
        ValueError: `tensor` is not a scalar, or `name` has characters TensorBoard rejects.
    """
    with _Scope(name, family) as (tag, scope):
        t = convert_to_tensor(tensor)
        if t.shape.rank not in (None, 0):
            raise ValueError(
                f"tf.summary.scalar {name!r} needs a scalar tensor, got shape {t.shape}"
            )
        return _collect(summary_ops.scalar_summary(tag, t, name=scope), collections)


def histogram(name, values, collections=None, family=None) -> Tensor:
    """A histogram of `values` in TensorFlow's default buckets (`tf.summary.histogram`)."""
    with _Scope(name, family) as (tag, scope):
        return _collect(summary_ops.histogram_summary(tag, values, name=scope), collections)


def image(name, tensor, max_outputs: int = 3, collections=None, family=None) -> Tensor:
    """Up to `max_outputs` images of a [batch, height, width, 1|3|4] tensor
    (`tf.summary.image`); tags are `<tag>/image/<i>`."""
    with _Scope(name, family) as (tag, scope):
        t = summary_ops.image_summary(tag, tensor, max_images=max_outputs, name=scope)
        return _collect(t, collections)


def audio(name, tensor, sample_rate, max_outputs: int = 3, collections=None, family=None):
    """Up to `max_outputs` WAV clips of a [batch, frames] or [batch, frames, channels] float
    tensor in [-1, 1] (`tf.summary.audio`)."""
    with _Scope(name, family) as (tag, scope):
        t = summary_ops.audio_summary(tag, tensor, sample_rate, max_outputs, name=scope)
        return _collect(t, collections)


def text(name, tensor, collections=None) -> Tensor:
    """A string tensor shown by TensorBoard's text dashboard (`tf.summary.text`)."""
    t = convert_to_tensor(tensor)
    if t.dtype is not dtypes.string:
        raise ValueError(f"tf.summary.text {name!r} needs a string tensor, got {t.dtype.name}")
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name, t, summary_metadata=meta, collections=collections)


def tensor_summary(
    name,
    tensor,
    summary_description=None,
    collections=None,
    summary_metadata=None,
    family=None,
    display_name=None,
) -> Tensor:
    """A summary holding `tensor` itself (`tf.summary.tensor_summary`)."""
    meta = SummaryMetadata()
    if summary_metadata is not None:
        meta.ParseFromString(summary_metadata.SerializeToString())
    if summary_description is not None:
        meta.summary_description = summary_description
    if display_name is not None:
        meta.display_name = display_name
    with _Scope(name, family) as (tag, scope):
        t = summary_ops.tensor_summary(tag, tensor, meta.SerializeToString(), name=scope)
        return _collect(t, collections)


def merge(inputs, collections=None, name=None) -> Tensor:
    """One summary holding the values of all `inputs` (`tf.summary.merge`)."""
    t = summary_ops.merge_summary(inputs, name=name)
    return _collect(t, collections, default=())


def merge_all(key: str = GraphKeys.SUMMARIES, scope=None, name=None) -> Tensor | None:
    """Merges every summary in the graph collection `key` (optionally under name scope
    `scope`), or None when there is none (`tf.summary.merge_all`)."""
    found = get_default_graph().get_collection(key, scope)
    if not found:
        return None
    return merge(found, name=name)


def get_summary_description(node_def) -> SummaryDescription:
    """The SummaryDescription of a TensorSummary node (its `description` attr)."""
    desc = SummaryDescription()
    attr = getattr(node_def, "attr", {})
    if "description" in attr:
        desc.ParseFromString(attr["description"].s)
    return desc


def _summary_bytes(summary) -> bytes:
    if isinstance(summary, bytes):
        return summary
    if isinstance(summary, np.ndarray):
        return _summary_bytes(summary.item())
    if hasattr(summary, "SerializeToString"):
        return summary.SerializeToString()
    raise TypeError(
        f"add_summary takes a serialized Summary (what running a summary op returns) or a "
        f"Summary protocol buffer, got {type(summary).__name__}"
    )


class FileWriter:
    """Writes Summary protocol buffers and graphs to an event file in `logdir`
    (`tf.summary.FileWriter`). Each event is appended to the file's buffer at once (no
    background thread); the file is flushed every `max_queue` events, when `flush_secs`
    seconds have passed since the last flush, on `flush()` / `close()`, and at interpreter exit
    for writers never closed.

    Args:
        logdir: the directory (created if missing).
        graph: a Graph (or graph_def) written at once as the graph TensorBoard shows.
        max_queue: events held before a write.
        flush_secs: seconds between background writes.
        filename_suffix: appended to the event file's name.
    """

    def __init__(
        self,
        logdir,
        graph=None,
        max_queue: int = 10,
        flush_secs: float = 120,
        graph_def=None,
        filename_suffix: str | None = None,
        session=None,
    ):
        if session is not None:
            raise NotImplementedError(
                "FileWriter(session=...) writes through summary ops of TF2's writer API, which "
                "rill does not have; pass a logdir"
            )
        self._logdir = str(logdir)
        self._suffix = filename_suffix or ""
        self._max_queue = max(1, int(max_queue))
        self._flush_secs = float(flush_secs)
        self._lock = threading.Lock()
        self._open()
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def _open(self) -> None:
        directory_check(self._logdir)
        self._events = EventsWriter(os.path.join(self._logdir, "events"), self._suffix)
        self._pending = 0
        self._last_flush = time.monotonic()
        self._closed = False
        _OPEN_WRITERS.add(self)

    def get_logdir(self) -> str:
        return self._logdir

    def add_event(self, event) -> None:
        """Appends an Event protocol buffer to the file."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the FileWriter is closed; reopen() it to write again")
            self._events.write_event(event)
            self._pending += 1
            now = time.monotonic()
            if self._pending >= self._max_queue or now - self._last_flush >= self._flush_secs:
                self._events.flush()
                self._pending, self._last_flush = 0, now

    def _event(self, global_step, **fields) -> Event:
        e = Event(wall_time=time.time(), **fields)
        if global_step is not None:
            e.step = int(global_step)
        return e

    def add_summary(self, summary, global_step=None) -> None:
        """Adds a Summary (serialized, as fetched from a summary op, or a proto) at
        `global_step`."""
        s = Summary.FromString(_summary_bytes(summary))
        self.add_event(self._event(global_step, summary=s))

    def add_graph(self, graph=None, global_step=None, graph_def=None) -> None:
        """Adds the graph TensorBoard's graph dashboard draws."""
        if graph is not None and graph_def is not None:
            raise ValueError("pass graph or graph_def, not both")
        if isinstance(graph, Graph):
            serialized = graph.as_graph_def(add_shapes=True).SerializeToString()
        elif graph is not None:
            serialized = graph.SerializeToString()
        elif graph_def is not None:
            serialized = graph_def.SerializeToString()
        else:
            raise ValueError("add_graph needs a graph or a graph_def")
        self.add_event(self._event(global_step, graph_def=serialized))

    def add_session_log(self, session_log, global_step=None) -> None:
        log = SessionLog.FromString(session_log.SerializeToString())
        self.add_event(self._event(global_step, session_log=log))

    def add_run_metadata(self, run_metadata, tag: str, global_step=None) -> None:
        """Adds a step's RunMetadata (its step stats) under `tag`."""
        meta = TaggedRunMetadata(tag=tag, run_metadata=run_metadata.SerializeToString())
        self.add_event(self._event(global_step, tagged_run_metadata=meta))

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._events.flush()
                self._pending, self._last_flush = 0, time.monotonic()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._events.close()
                self._closed = True
                _OPEN_WRITERS.discard(self)

    def reopen(self) -> None:
        """Starts a new event file in the same directory after close()."""
        with self._lock:
            if self._closed:
                self._open()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# Writers still open at exit are closed (their queued events written) before the interpreter
# tears down the writer threads' queues: TF1 programs often never call close().
_OPEN_WRITERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_open_writers() -> None:
    for w in list(_OPEN_WRITERS):
        try:
            w.close()
        except Exception:  # noqa: BLE001, S110 - best effort at interpreter exit
            pass


class FileWriterCache:
    """One FileWriter per log directory (`tf.summary.FileWriterCache`)."""

    _cache: dict = {}
    _lock = threading.Lock()

    @staticmethod
    def get(logdir) -> FileWriter:
        with FileWriterCache._lock:
            w = FileWriterCache._cache.get(str(logdir))
            if w is None:
                w = FileWriterCache._cache[str(logdir)] = FileWriter(logdir)
            return w

    @staticmethod
    def clear() -> None:
        with FileWriterCache._lock:
            for w in FileWriterCache._cache.values():
                w.close()
            FileWriterCache._cache.clear()
