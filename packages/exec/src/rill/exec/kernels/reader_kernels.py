"""Kernels for rill.graph.ops.reader_ops: readers as resources, with TensorFlow's ReaderBase
behaviour.

A read takes the next record of the current file; when there is no current file it dequeues the
next file name from the queue (a scalar string; blocking, cancellable) and opens it; when the
file ends the reader counts it finished and moves on. A closed, empty queue ends the read with
OutOfRangeError; ReaderReadUpTo then returns the records it already has. Keys are TensorFlow's:
`file:offset` (TFRecord), `file:line` (text, 1-based, header lines counted), `file:index`
(fixed-length records), the file name (whole files).

A TFRecord whose checksums fail is DataLossError naming the file and offset (as
rill.exec.tfrecord); compressed files (ZLIB, GZIP) are inflated whole when opened.
"""

from __future__ import annotations

import gzip
import os
import struct
import threading
import zlib

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.data_flow_kernels import lookup_queue
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.exec.tf_checkpoint import _mask, crc32c
from rill.graph.errors import (
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
)


def _read_file(path: str, compression: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise NotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InvalidArgumentError(f"{path} is a directory, not a file") from None
    try:
        if compression == "ZLIB":
            return zlib.decompress(data)
        if compression == "GZIP":
            return gzip.decompress(data)
    except (zlib.error, OSError, EOFError) as e:
        raise DataLossError(f"{path}: not a valid {compression} stream: {e}") from None
    return data


class _Reader:
    """ReaderBase: the current work (file), the counters, and read / read_up_to."""

    kind = "Reader"
    ends_with_record = False  # a file's last record also ends it (WholeFileReader)

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.work: str | None = None
        self.produced = self.started = self.finished = 0

    def reset(self) -> None:
        with self.lock:
            self._reset()

    # subclasses: start(path) opens the file; next() -> (key, value) | None at its end
    def start(self, path: str) -> None:
        raise NotImplementedError

    def next(self):
        raise NotImplementedError

    def _next_work(self, ctx, queue) -> None:
        element = queue.dequeue(ctx)
        if len(element) != 1 or np.shape(element[0]) != ():
            raise InvalidArgumentError(
                f"reader {self.name!r}: expected to dequeue a one-element string tensor (a file "
                f"name) from queue {queue.name!r}"
            )
        v = element[0][()] if isinstance(element[0], np.ndarray) else element[0]
        path = os.fsdecode(v) if isinstance(v, bytes) else str(v)
        self.work = None
        self.start(path)
        self.work = path
        self.started += 1

    def _step(self, ctx, queue):
        """One ReadLocked: (record or None, whether the file ended), opening the next file
        first when none is open."""
        if self.work is None:
            self._next_work(ctx, queue)
        rec = self.next()
        at_end = rec is None or self.ends_with_record
        if at_end:
            self.work = None
            self.finished = self.started
        if rec is not None:
            self.produced += 1
        return rec, at_end

    def read(self, ctx, queue):
        with self.lock:
            while True:
                rec, _ = self._step(ctx, queue)
                if rec is not None:
                    return rec

    def read_up_to(self, ctx, queue, n: int):
        """Up to n records; as TensorFlow's, it stops early at the end of a file once it has
        at least one record."""
        if n <= 0:
            raise InvalidArgumentError(f"num_records must be positive, got {n}")
        out = []
        with self.lock:
            while len(out) < n:
                rec, at_end = self._step(ctx, queue)
                if rec is not None:
                    out.append(rec)
                if at_end and out:
                    break
        return out

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        del cancel_pending_enqueues


class TFRecordReader(_Reader):
    def __init__(self, name: str, compression: str):
        if compression not in ("", "ZLIB", "GZIP"):
            raise InvalidArgumentError(
                f"compression_type must be '', 'ZLIB' or 'GZIP', got {compression!r}"
            )
        super().__init__(name)
        self.compression = compression

    def start(self, path):
        self._data, self._pos, self._path = _read_file(path, self.compression), 0, path

    def next(self):
        data, pos, path = self._data, self._pos, self._path
        if pos >= len(data):
            return None
        if pos + 12 > len(data):
            raise DataLossError(f"{path}: truncated record header at offset {pos}")
        length_bytes = data[pos : pos + 8]
        (length_crc,) = struct.unpack_from("<I", data, pos + 8)
        if _mask(crc32c(length_bytes)) != length_crc:
            raise DataLossError(
                f"{path}: corrupted record at offset {pos}: the length's checksum does not match"
            )
        (length,) = struct.unpack("<Q", length_bytes)
        end = pos + 12 + length
        if end + 4 > len(data):
            raise DataLossError(
                f"{path}: truncated record at offset {pos}: it says {length} bytes but the "
                f"file ends at {len(data)}"
            )
        record = data[pos + 12 : end]
        (data_crc,) = struct.unpack_from("<I", data, end)
        if _mask(crc32c(record)) != data_crc:
            raise DataLossError(
                f"{path}: corrupted record at offset {pos}: the data's checksum does not match"
            )
        self._pos = end + 4
        return f"{path}:{pos}", record


class TextLineReader(_Reader):
    def __init__(self, name: str, skip_header_lines: int):
        super().__init__(name)
        self.skip = int(skip_header_lines)

    def start(self, path):
        data = _read_file(path, "")
        self._lines = data.split(b"\n")
        if self._lines and self._lines[-1] == b"":
            self._lines.pop()  # a final newline ends the last line; it starts none
        self._path, self._line = path, min(self.skip, len(self._lines))

    def next(self):
        if self._line >= len(self._lines):
            return None
        line = self._lines[self._line]
        self._line += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        return f"{self._path}:{self._line}", line


class WholeFileReader(_Reader):
    ends_with_record = True

    def start(self, path):
        self._path, self._data = path, _read_file(path, "")

    def next(self):
        if self._data is None:
            return None
        data, self._data = self._data, None
        return self._path, data


class FixedLengthRecordReader(_Reader):
    def __init__(self, name, header_bytes, record_bytes, footer_bytes, hop_bytes, encoding):
        if record_bytes <= 0 or header_bytes < 0 or footer_bytes < 0 or hop_bytes < 0:
            raise InvalidArgumentError(
                f"record_bytes must be positive and header_bytes, footer_bytes, hop_bytes "
                f"non-negative, got {record_bytes}, {header_bytes}, {footer_bytes}, {hop_bytes}"
            )
        if encoding not in ("", "ZLIB", "GZIP"):
            raise InvalidArgumentError(f"encoding must be '', 'ZLIB' or 'GZIP', got {encoding!r}")
        super().__init__(name)
        self.header, self.record, self.footer = header_bytes, record_bytes, footer_bytes
        self.hop, self.encoding = hop_bytes, encoding

    def start(self, path):
        self._path, self._data, self._i = path, _read_file(path, self.encoding), 0

    def next(self):
        step = self.hop or self.record
        start = self.header + self._i * step
        if start + self.record > len(self._data) - self.footer:
            return None
        self._i += 1
        return f"{self._path}:{self._i - 1}", self._data[start : start + self.record]


def _reader_kernel(make):
    def factory(container, shared_name, node, device, **attrs):
        name = shared_name or node.name
        handle = handle_array(ResourceHandle(device.name, container, name, "Reader"))
        resources = device.resources

        def compute():
            resources.lookup_or_create(container, name, lambda: make(name, **attrs))
            return handle

        return compute

    return factory


@register_kernel("TFRecordReaderV2")
def tf_record_reader(container, shared_name, compression_type, node, device):
    make = _reader_kernel(lambda name, c: TFRecordReader(name, c))
    return make(container, shared_name, node, device, c=compression_type)


@register_kernel("TextLineReaderV2")
def text_line_reader(skip_header_lines, container, shared_name, node, device):
    make = _reader_kernel(lambda name, skip: TextLineReader(name, skip))
    return make(container, shared_name, node, device, skip=skip_header_lines)


@register_kernel("WholeFileReaderV2")
def whole_file_reader(container, shared_name, node, device):
    return _reader_kernel(lambda name: WholeFileReader(name))(container, shared_name, node, device)


@register_kernel("FixedLengthRecordReaderV2")
def fixed_length_record_reader(header_bytes, record_bytes, footer_bytes, hop_bytes, container,
                               shared_name, encoding, node, device):  # fmt: skip
    FixedLengthRecordReader("check", header_bytes, record_bytes, footer_bytes, hop_bytes,
                            encoding)  # bad attrs fail when the kernel is made  # fmt: skip
    make = _reader_kernel(lambda name: FixedLengthRecordReader(
        name, header_bytes, record_bytes, footer_bytes, hop_bytes, encoding))  # fmt: skip
    return make(container, shared_name, node, device)


def _reader(ctx, h) -> _Reader:
    hd = handle_of(h)
    r = ctx.resources.get(hd.container, hd.name)
    if r is None:
        raise NotFoundError(f"reader {hd.name!r} does not exist; run its reader op")
    if not isinstance(r, _Reader):
        raise InvalidArgumentError(f"resource {hd.name!r} is a {type(r).__name__}, not a reader")
    return r


def _strings(items) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


@register_kernel("ReaderReadV2", context=True, blocking=True)
def reader_read():
    def compute(ctx, r, q):
        key, value = _reader(ctx, r).read(ctx, lookup_queue(ctx, q))
        return np.array(key.encode(), dtype=object), np.array(value, dtype=object)

    return compute


@register_kernel("ReaderReadUpToV2", context=True, blocking=True)
def reader_read_up_to():
    def compute(ctx, r, q, n):
        recs = _reader(ctx, r).read_up_to(ctx, lookup_queue(ctx, q), int(n))
        return _strings([k.encode() for k, _ in recs]), _strings([v for _, v in recs])

    return compute


@register_kernel("ReaderNumRecordsProducedV2", context=True)
def reader_num_records_produced():
    def compute(ctx, r):
        return np.int64(_reader(ctx, r).produced)

    return compute


@register_kernel("ReaderNumWorkUnitsCompletedV2", context=True)
def reader_num_work_units_completed():
    def compute(ctx, r):
        return np.int64(_reader(ctx, r).finished)

    return compute


@register_kernel("ReaderResetV2", context=True)
def reader_reset():
    def compute(ctx, r):
        _reader(ctx, r).reset()

    return compute
