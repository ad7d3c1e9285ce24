"""Byte- and token-level mutations of seed inputs (deterministic given the random.Random)."""

from __future__ import annotations

import random
import re
import struct

_INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                0xFFFFFFFF, (1 << 31) + 5, (1 << 40), (1 << 63) - 1]  # fmt: skip


def _varint(v: int) -> bytes:
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def mutate_bytes(data: bytes, rng: random.Random, rounds: int | None = None) -> bytes:
    """A few random edits: bit flips, byte sets, interesting ints (fixed-width and varint),
    deleted, duplicated or truncated chunks."""
    b = bytearray(data)
    for _ in range(rounds or rng.randint(1, 4)):
        if not b:
            b.extend(rng.randbytes(rng.randint(1, 16)))
            continue
        i = rng.randrange(len(b))
        k = rng.randrange(9)
        if k == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif k == 1:
            b[i] = rng.randrange(256)
        elif k == 2:
            v = rng.choice(_INTERESTING)
            fmt = rng.choice(["<I", "<Q", "<i", "<H"])
            try:
                packed = struct.pack(fmt, v if fmt[1] in "IQH" else -v)
            except struct.error:
                packed = struct.pack("<Q", v & ((1 << 64) - 1))
            b[i : i + len(packed)] = packed
        elif k == 3:
            b[i : i + 1] = _varint(rng.choice(_INTERESTING) * rng.choice([1, -1]))
        elif k == 4:
            del b[i : i + rng.randint(1, 64)]
        elif k == 5:
            j = rng.randrange(len(b))
            b[j:j] = b[i : i + rng.randint(1, 64)]
        elif k == 6:
            del b[rng.randrange(len(b)) :]
        elif k == 7:
            b[i] = rng.choice([0, 0xFF, 0x7F, 0x80])
        else:
            j = rng.randrange(len(b))
            n = rng.randint(1, 16)
            b[i : i + n], b[j : j + n] = b[j : j + n], b[i : i + n]
    return bytes(b)


_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_TEXT_VALUES = ["0", "-1", "-2", "1.5", "4294967296", "99999999999999999999", "1e308", "nan",
                "1073741824", "2147483648", "?", "*", "", "[", "]", ",", '"', "\\x", "%", "^%x",
                "fill(1)", "b64\"AAAA\"", "[" * 300, "@/job:", "@/device:CPU:x"]  # fmt: skip


_ATTR = re.compile(r"(\w+)=(\[[^\]]*\]|[^,()\[]*)")
_ATTR_VALUES = ['["\\xff"]', "[1, 2]", '"s"', "f32", "[[1]]", 'b"\\xff"', "true", "-1", "[]",
                "[f32, i64]", "@f", "tensor<f32[2]>[1, 2]", "shape[2,?]", "[shape[?]]", "1.5",
                '["loc:@x"]', "99999999999"]  # fmt: skip
_ATTR_NAMES = ["_class", "_output_shapes", "_gradient_op_type", "T", "N", "dtype", "shape",
               "value", "axis", "bogus"]  # fmt: skip


def _mutate_attr_text(line: str, rng: random.Random) -> str:
    """An attr's value replaced by a value of another kind, or an attr added."""
    attrs = list(_ATTR.finditer(line))
    if attrs and rng.random() < 0.6:
        m = rng.choice(attrs)
        return line[: m.start(2)] + rng.choice(_ATTR_VALUES) + line[m.end(2) :]
    j = line.rfind(")")
    if j < 0:
        return line
    sep = "" if line[:j].rstrip().endswith("(") else ", "
    return f"{line[:j]}{sep}{rng.choice(_ATTR_NAMES)}={rng.choice(_ATTR_VALUES)}{line[j:]}"


def mutate_text(text: str, rng: random.Random) -> str:
    """Token-level edits of the text form: numbers replaced by extreme values, attr values
    replaced by values of another kind or attrs added, punctuation inserted or dropped, lines
    duplicated, swapped or dropped; then maybe a byte-level edit."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        line = lines[i]
        k = rng.randrange(8)
        if k >= 6:
            line = _mutate_attr_text(line, rng)
        elif k <= 1:
            nums = list(_NUM.finditer(line))
            if nums:
                m = rng.choice(nums)
                line = line[: m.start()] + rng.choice(_TEXT_VALUES) + line[m.end() :]
        elif k == 2 and line:
            j = rng.randrange(len(line))
            line = line[:j] + rng.choice(_TEXT_VALUES) + line[j:]
        elif k == 3 and line:
            j = rng.randrange(len(line))
            line = line[:j] + line[j + rng.randint(1, 8) :]
        elif k == 4:
            lines.insert(rng.randrange(len(lines) + 1), line)
        else:
            lines.pop(i)
            continue
        lines[i] = line
    out = "\n".join(lines)
    if rng.random() < 0.2:
        out = mutate_bytes(out.encode(), rng, 1).decode("utf-8", "replace")
    return out
