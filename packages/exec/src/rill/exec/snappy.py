"""Snappy decompression (the raw block format), for TensorFlow checkpoint index blocks stored
with compression type 1. Written here from the format's description; no dependency.

A block is the varint length of the uncompressed data, then elements, each starting with a tag
byte whose low two bits give its kind:

- 0, a literal: length - 1 in the tag's upper six bits, or (values 60-63) in the next 1-4 bytes
  (little-endian); the literal's bytes follow.
- 1, a copy with an 11-bit offset: length 4-11 from tag bits 2-4, offset bits 8-10 from tag bits
  5-7 and bits 0-7 from the next byte.
- 2 and 3, copies with a 2- or 4-byte little-endian offset and length 1-64 from the upper six
  tag bits.

A copy repeats `length` bytes starting `offset` bytes back in the output; it may overlap what it
writes (offset < length repeats a pattern). Anything out of range is a DataLossError.

>>> decompress(bytes([9, 0x08, 97, 98, 99, 0x09, 3]))
b'abcabcabc'
"""

from __future__ import annotations

from rill.graph.errors import DataLossError

__all__ = ["decompress"]


def _uvarint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 31:
            raise DataLossError(f"{where}: corrupt snappy length")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def decompress(buf: bytes, where: str = "snappy block", limit: int = 1 << 30) -> bytes:
    """The uncompressed bytes of a raw snappy block; `limit` bounds the size it may claim."""
    n, pos = _uvarint(buf, 0, where)
    if n > limit:
        raise DataLossError(f"{where}: claims {n} uncompressed bytes (limit {limit})")
    out = bytearray()
    end = len(buf)
    while pos < end:
        tag = buf[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                if pos + extra > end:
                    raise DataLossError(f"{where}: truncated literal length")
                length = int.from_bytes(buf[pos : pos + extra], "little")
                pos += extra
            length += 1
            if pos + length > end or len(out) + length > n:
                raise DataLossError(f"{where}: literal of {length} bytes runs past the block")
            out += buf[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            if pos >= end:
                raise DataLossError(f"{where}: truncated copy")
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | buf[pos]
            pos += 1
        else:
            width = 2 if kind == 2 else 4
            if pos + width > end:
                raise DataLossError(f"{where}: truncated copy")
            length = (tag >> 2) + 1
            offset = int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        if offset == 0 or offset > len(out) or len(out) + length > n:
            raise DataLossError(
                f"{where}: copy of {length} bytes from {offset} back at output byte {len(out)} "
                "is out of range"
            )
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:  # overlapping: the pattern of `offset` bytes repeats
            pattern = bytes(out[start:])
            out += (pattern * (length // offset + 1))[:length]
    if len(out) != n:
        raise DataLossError(f"{where}: decompressed to {len(out)} bytes, header says {n}")
    return bytes(out)
