"""TFRecord files (tf.io.TFRecordWriter / tf.data.TFRecordDataset's format), read and written.

A file is a sequence of records, each:

    uint64 length (little-endian) | uint32 masked CRC32C of the 8 length bytes |
    length bytes of data          | uint32 masked CRC32C of the data

(the mask is TensorFlow's: rotate right by 15 and add 0xa282ead8). Only uncompressed files.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
>>> with TFRecordWriter(path) as w:
...     w.write(b"first"); w.write(b"")
>>> list(tf_record_iterator(path))
[b'first', b'']

A record whose length or data fails its checksum, or a file that ends inside a record, raises
DataLossError naming the file and the record's offset; nothing is allocated beyond what the file
holds.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from rill.exec.tf_checkpoint import _mask, crc32c
from rill.graph.errors import DataLossError, NotFoundError

__all__ = ["TFRecordWriter", "tf_record_iterator"]


class TFRecordWriter:
    """Writes records to a TFRecord file (a context manager; `close()` flushes)."""

    def __init__(self, path, options=None):
        if options not in (None, "", "NONE"):
            raise ValueError(f"only uncompressed TFRecord files are supported, got {options!r}")
        self.path = os.fspath(path)
        self._f = open(self.path, "wb")  # noqa: SIM115 - closed by close()

    def write(self, record: bytes) -> None:
        record = bytes(record)
        length = struct.pack("<Q", len(record))
        self._f.write(length)
        self._f.write(struct.pack("<I", _mask(crc32c(length))))
        self._f.write(record)
        self._f.write(struct.pack("<I", _mask(crc32c(record))))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def tf_record_iterator(path) -> Iterator[bytes]:
    """The records of a TFRecord file, in order, each checked against its checksums."""
    path = os.fspath(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise NotFoundError(f"{path}: no such TFRecord file") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise DataLossError(f"{path}: truncated record header at offset {offset}")
            length_bytes, (length_crc,) = head[:8], struct.unpack("<I", head[8:])
            if _mask(crc32c(length_bytes)) != length_crc:
                raise DataLossError(
                    f"{path}: corrupted record at offset {offset}: the length's checksum does not "
                    "match"
                )
            (length,) = struct.unpack("<Q", length_bytes)
            if offset + 16 + length > size:
                raise DataLossError(
                    f"{path}: truncated record at offset {offset}: it says {length} bytes but "
                    f"the file ends at {size}"
                )
            data = f.read(length)
            (data_crc,) = struct.unpack("<I", f.read(4))
            if _mask(crc32c(data)) != data_crc:
                raise DataLossError(
                    f"{path}: corrupted record at offset {offset}: the data's checksum does not "
                    "match"
                )
            yield data
            offset += 16 + length
