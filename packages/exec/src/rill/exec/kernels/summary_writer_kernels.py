"""Kernels for rill.graph.ops.summary_writer_ops: a summary file writer resource that appends
Event records (TFRecord framing, TensorFlow's Event protocol buffer) to an event file, as
TensorFlow's SummaryFileWriter does.

The event file is `<logdir>/events.out.tfevents.<seconds>.<host>.<pid>.<n><suffix>`; its first
record is the file_version event ("brain.Event:2"). Each Write* op appends one event with the
wall time, the step and a Summary made as the v1 summary ops make it (ScalarSummary's
simple_value, HistogramSummary's buckets, ImageSummary's PNGs, AudioSummaryV2's WAVs,
TensorSummaryV2's tensor and metadata). Events are buffered and written every max_queue events,
at FlushSummaryWriter / CloseSummaryWriter, and when the resource is released.

Event's fields are few and fixed (wall_time = 1: double, step = 2: int64, file_version = 3:
string, summary = 5: Summary), so they are encoded here directly.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time
from types import SimpleNamespace

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import summary_kernels as sk
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.exec.tfrecord import TFRecordWriter
from rill.graph.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from rill.graph.proto.summary_pb2 import Summary

_COUNTER = itertools.count()


def _varint(v: int) -> bytes:
    v &= 0xFFFFFFFFFFFFFFFF  # negative steps as int64's two's complement
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def event_bytes(step: int, *, summary: bytes | None = None, file_version: str | None = None,
                wall_time: float | None = None) -> bytes:  # fmt: skip
    """A serialized Event."""
    out = b"\x09" + struct.pack("<d", time.time() if wall_time is None else wall_time)
    if step:
        out += b"\x10" + _varint(int(step))
    if file_version is not None:
        v = file_version.encode()
        out += b"\x1a" + _varint(len(v)) + v
    if summary is not None:
        out += b"\x2a" + _varint(len(summary)) + summary
    return out


class SummaryFileWriter:
    """One open event file; thread-safe."""

    def __init__(self, logdir: str, max_queue: int, flush_millis: int, suffix: str):
        os.makedirs(logdir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_COUNTER)}{suffix}")  # fmt: skip
        self.logdir, self.path = logdir, os.path.join(logdir, name)
        self.max_queue = max(int(max_queue), 1)
        self.flush_secs = max(int(flush_millis), 0) / 1000.0
        self.lock = threading.Lock()
        self._file = TFRecordWriter(self.path)
        self._pending = 0
        self._last_flush = time.monotonic()
        self._file.write(event_bytes(0, file_version="brain.Event:2"))
        self._file.flush()

    def write(self, event: bytes) -> None:
        with self.lock:
            if self._file is None:
                raise FailedPreconditionError(
                    f"the summary writer of {self.logdir!r} is closed; create it again to write"
                )
            self._file.write(event)
            self._pending += 1
            now = time.monotonic()
            if self._pending >= self.max_queue or now - self._last_flush >= self.flush_secs:
                self._file.flush()
                self._pending, self._last_flush = 0, now

    def flush(self) -> None:
        with self.lock:
            if self._file is not None:
                self._file.flush()
                self._pending, self._last_flush = 0, time.monotonic()

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        del cancel_pending_enqueues  # the resource manager's release signature
        with self.lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class _WriterSlot:
    """The resource a SummaryWriter handle names: empty until CreateSummaryFileWriter."""

    def __init__(self, name: str):
        self.name = name
        self.writer: SummaryFileWriter | None = None
        self.lock = threading.Lock()

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self.lock:
            w, self.writer = self.writer, None
        if w is not None:
            w.close()


@register_kernel("SummaryWriter")
def summary_writer(shared_name, container, node, device):
    name = shared_name or node.name
    handle = handle_array(ResourceHandle(device.name, container, name, "SummaryWriter"))
    resources = device.resources

    def compute():
        resources.lookup_or_create(container, name, lambda: _WriterSlot(name))
        return handle

    return compute


def _slot(ctx, h) -> _WriterSlot:
    hd = handle_of(h)
    s = ctx.resources.get(hd.container, hd.name)
    if s is None:
        raise NotFoundError(f"summary writer {hd.name!r} does not exist; run its SummaryWriter op")
    if not isinstance(s, _WriterSlot):
        raise InvalidArgumentError(f"resource {hd.name!r} is a {type(s).__name__}, not a writer")
    return s


def _open(ctx, h) -> SummaryFileWriter:
    s = _slot(ctx, h)
    w = s.writer
    if w is None:
        raise FailedPreconditionError(
            f"summary writer {s.name!r} is not open: run its CreateSummaryFileWriter op (the "
            "writer's init) first"
        )
    return w


def _str(v) -> str:
    x = np.asarray(v)
    if x.shape != ():
        raise InvalidArgumentError(f"expected a scalar string, got shape {list(x.shape)}")
    x = x[()]
    return x.decode() if isinstance(x, bytes) else str(x)


def _step(step) -> int:
    s = np.asarray(step)
    if s.shape != ():
        raise InvalidArgumentError(f"step must be a scalar, got shape {list(s.shape)}")
    return int(s)


@register_kernel("CreateSummaryFileWriter", context=True)
def create_summary_file_writer():
    def compute(ctx, h, logdir, max_queue, flush_millis, filename_suffix):
        s = _slot(ctx, h)
        with s.lock:
            if s.writer is None:
                s.writer = SummaryFileWriter(_str(logdir), int(max_queue), int(flush_millis),
                                             _str(filename_suffix))  # fmt: skip

    return compute


@register_kernel("FlushSummaryWriter", context=True)
def flush_summary_writer():
    def compute(ctx, h):
        w = _slot(ctx, h).writer
        if w is not None:
            w.flush()

    return compute


@register_kernel("CloseSummaryWriter", context=True)
def close_summary_writer():
    def compute(ctx, h):
        _slot(ctx, h).close()

    return compute


def _write(ctx, h, step, summary: bytes) -> None:
    _open(ctx, h).write(event_bytes(_step(step), summary=summary))


def _summary_of(out) -> bytes:
    return np.asarray(out, dtype=object)[()]


@register_kernel("WriteScalarSummary", context=True)
def write_scalar_summary(T):
    def compute(ctx, h, step, tag, value):
        v = np.asarray(value)
        if v.shape != ():
            raise InvalidArgumentError(f"the value of a scalar summary must be a scalar, got "
                                       f"shape {list(v.shape)} for tag {_str(tag)!r}")  # fmt: skip
        s = Summary()
        s.value.add(tag=_str(tag), simple_value=float(v))
        _write(ctx, h, step, s.SerializeToString())

    return compute


@register_kernel("WriteHistogramSummary", context=True)
def write_histogram_summary(T):
    hist = sk.histogram_summary(T)

    def compute(ctx, h, step, tag, values):
        _write(ctx, h, step, _summary_of(hist(tag, np.asarray(values, np.float64))))

    return compute


@register_kernel("WriteImageSummary", context=True)
def write_image_summary(max_images, T):
    def compute(ctx, h, step, tag, tensor, bad_color):
        node = SimpleNamespace(attrs={"bad_color": np.asarray(bad_color).reshape(-1).tolist()})
        image = sk.image_summary(max_images, T, node)
        _write(ctx, h, step, _summary_of(image(tag, tensor)))

    return compute


@register_kernel("WriteAudioSummary", context=True)
def write_audio_summary(max_outputs):
    audio = sk.audio_summary(max_outputs)

    def compute(ctx, h, step, tag, tensor, sample_rate):
        _write(ctx, h, step, _summary_of(audio(tag, tensor, sample_rate)))

    return compute


@register_kernel("WriteSummary", context=True)
def write_summary(T):
    tensor_summary = sk.tensor_summary(T)

    def compute(ctx, h, step, tensor, tag, summary_metadata):
        _write(ctx, h, step, _summary_of(tensor_summary(tag, tensor, summary_metadata)))

    return compute


@register_kernel("WriteRawProtoSummary", context=True)
def write_raw_proto_summary():
    def compute(ctx, h, step, tensor):
        w, s = _open(ctx, h), _step(step)
        for raw in np.asarray(tensor, dtype=object).reshape(-1):
            raw = bytes(raw)
            try:
                Summary.FromString(raw)
            except Exception as e:
                raise InvalidArgumentError(f"not a serialized Summary: {e}") from None
            w.write(event_bytes(s, summary=raw))

    return compute
