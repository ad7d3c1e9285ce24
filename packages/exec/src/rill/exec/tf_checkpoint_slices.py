"""The index keys of a TensorFlow checkpoint's slice entries (a partitioned variable's parts):
TensorFlow's EncodeTensorNameSlice in its OrderedCode encoding, written here from the encoding's
description and checked against checkpoints TensorFlow wrote (tests/fixtures/tf_graphs/ckpt_*).

A key is: the number 0, the tensor's name, its rank, then each dimension's start and length
(-1 for a whole dimension), numbers unsigned or signed in OrderedCode's order-preserving forms.

>>> encode_tensor_name_slice("p", [4, 0], [3, -1])
b'\\x00p\\x00\\x01\\x01\\x02\\x84\\x83\\x80\\x7f'
"""

from __future__ import annotations

__all__ = ["encode_tensor_name_slice", "spec_text"]

_SIGNED_HEADER = {1: (0x80, 0), 2: (0xC0, 0), 3: (0xE0, 0), 4: (0xF0, 0), 5: (0xF8, 0),
                  6: (0xFC, 0), 7: (0xFE, 0), 8: (0xFF, 0), 9: (0xFF, 0x80), 10: (0xFF, 0xC0)}  # fmt: skip


def _num_increasing(v: int) -> bytes:
    """An unsigned number: a length byte, then its big-endian bytes without leading zeros."""
    body = v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""
    return bytes([len(body)]) + body


def _escape(s: bytes) -> bytes:
    out = bytearray()
    for b in s:
        out += b"\x00\xff" if b == 0 else b"\xff\x00" if b == 0xFF else bytes([b])
    return bytes(out)


def _signed_increasing(v: int) -> bytes:
    """A signed number: its length in the leading bits (ones for positive numbers, their
    complement for negative ones), then the two's-complement bits, big-endian."""
    x = ~v if v < 0 else v
    n = 1
    while x.bit_length() + 1 > 7 * n:  # n bytes carry 7n - 1 value bits beside the header
        n += 1
    raw = bytearray((v & ((1 << (8 * n)) - 1)).to_bytes(n, "big"))
    h0, h1 = _SIGNED_HEADER[n]
    raw[0] ^= h0
    if n > 1:
        raw[1] ^= h1
    return bytes(raw)


def encode_tensor_name_slice(name: str, starts, lengths) -> bytes:
    """The index key of one slice of tensor `name` (a full dimension: start 0, length -1)."""
    out = _num_increasing(0) + _escape(name.encode("utf-8")) + b"\x00\x01"
    out += _num_increasing(len(starts))
    for s, n in zip(starts, lengths):
        out += _signed_increasing(int(s)) + _signed_increasing(int(n))
    return out


def spec_text(starts, lengths) -> str:
    return ":".join("-" if n == -1 else f"{s},{n}" for s, n in zip(starts, lengths))
