"""Kernels for rill.graph.ops.string_ops. Strings are bytes in numpy object arrays; patterns
follow Python's re module (RE2's syntax for the common constructs; RE2-only syntax is refused by
re with an error naming the pattern)."""

from __future__ import annotations

import re
import struct

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _objects(values, shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _b(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


def _map(fn, x: np.ndarray) -> np.ndarray:
    return _objects([fn(_b(v)) for v in x.reshape(-1)], x.shape)


def _broadcast(*xs):
    try:
        return np.broadcast_arrays(*xs)
    except ValueError:
        shapes = ", ".join(str(TensorShape(np.shape(x))) for x in xs)
        raise InvalidArgumentError(
            f"inputs must be scalars or of one shape, got {shapes}"
        ) from None


@register_kernel("StringJoin")
def string_join(N, separator):
    sep = separator.encode()

    def compute(*xs):
        if not xs:
            return np.asarray(b"", dtype=object)
        bs = _broadcast(*xs)
        shape = bs[0].shape
        rows = zip(*(b.reshape(-1) for b in bs))
        return _objects([sep.join(_b(v) for v in row) for row in rows], shape)

    return compute


@register_kernel("StringSplitV2")
def string_split_v2(maxsplit):
    def compute(x, sep):
        if x.ndim != 1:
            raise InvalidArgumentError(f"input must be a vector, got {TensorShape(x.shape)}")
        s = _b(sep[()]) if isinstance(sep, np.ndarray) else _b(sep)
        idx, vals, longest = [], [], 0
        for i, v in enumerate(x):
            v = _b(v)
            if s:
                parts = v.split(s, maxsplit) if maxsplit >= 0 else v.split(s)
            else:
                parts = v.split(None, maxsplit) if maxsplit >= 0 else v.split()
            longest = max(longest, len(parts))
            for j, p in enumerate(parts):
                idx.append((i, j))
                vals.append(p)
        indices = np.array(idx, np.int64).reshape(-1, 2)
        return indices, _objects(vals, (len(vals),)), np.array([len(x), longest], np.int64)

    return compute


def _utf8_chars(s: bytes) -> list[bytes]:
    try:
        return [c.encode() for c in s.decode("utf-8")]
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"invalid UTF-8 string {s!r}") from None


@register_kernel("Substr")
def substr(T, unit):
    def compute(x, pos, length):
        xb, pb, lb = _broadcast(x, pos, length)
        out = []
        for v, p, n in zip(xb.reshape(-1), pb.reshape(-1), lb.reshape(-1)):
            units = _utf8_chars(_b(v)) if unit == "UTF8_CHAR" else _b(v)
            size, p, n = len(units), int(p), int(n)
            start = p + size if p < 0 else p
            if not 0 <= start <= size:
                raise InvalidArgumentError(f"pos {p} out of range for string b'{_b(v)!r}' at index")
            piece = units[start : start + max(n, 0)]
            out.append(b"".join(piece) if unit == "UTF8_CHAR" else piece)
        return _objects(out, xb.shape)

    return compute


def _compile(pattern: bytes):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidArgumentError(f"invalid pattern {pattern!r}: {e}") from None


def _rewrite(rewrite: bytes) -> bytes:
    # RE2's rewrite names groups \0..\9; Python's \g<0> for the whole match.
    return re.sub(rb"\\0", rb"\\g<0>", rewrite)


@register_kernel("RegexReplace")
def regex_replace(replace_global):
    def compute(x, pattern, rewrite):
        rx = _compile(_b(pattern[()]))
        rw = _rewrite(_b(rewrite[()]))
        return _map(lambda v: rx.sub(rw, v, count=0 if replace_global else 1), x)

    return compute


@register_kernel("StaticRegexReplace")
def static_regex_replace(pattern, rewrite, replace_global):
    rx = _compile(pattern.encode())
    rw = _rewrite(rewrite.encode())

    def compute(x):
        return _map(lambda v: rx.sub(rw, v, count=0 if replace_global else 1), x)

    return compute


def _full_match(rx, x: np.ndarray) -> np.ndarray:
    flat = [rx.fullmatch(_b(v)) is not None for v in x.reshape(-1)]
    return np.asarray(flat, dtype=bool).reshape(x.shape)


@register_kernel("RegexFullMatch")
def regex_full_match():
    def compute(x, pattern):
        if np.ndim(pattern) != 0:
            raise InvalidArgumentError("pattern must be a scalar string")
        p = pattern[()] if isinstance(pattern, np.ndarray) else pattern
        return _full_match(_compile(_b(p)), x)

    return compute


@register_kernel("StaticRegexFullMatch")
def static_regex_full_match(pattern):
    rx = _compile(pattern.encode())

    def compute(x):
        return _full_match(rx, x)

    return compute


_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 of data under the key (k0, k1) (Aumasson and Bernstein's definition)."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(n):
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _M64
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    n = len(data)
    tail = n - n % 8
    for i in range(0, tail, 8):
        (m,) = struct.unpack_from("<Q", data, i)
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = (n & 0xFF) << 56
    for i, c in enumerate(data[tail:]):
        last |= c << (8 * i)
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return (v0 ^ v1 ^ v2 ^ v3) & _M64


@register_kernel("StringToHashBucketStrong")
def string_to_hash_bucket_strong(num_buckets, key):
    if len(key) != 2:
        raise InvalidArgumentError(f"key must have 2 elements, got {len(key)}")
    k0, k1 = (int(k) & _M64 for k in key)

    def compute(x):
        flat = [siphash24(k0, k1, _b(v)) % num_buckets for v in x.reshape(-1)]
        return np.array(flat, np.int64).reshape(x.shape)

    return compute


@register_kernel("AsString")
def as_string(T, precision, scientific, shortest, width, fill):
    if fill and len(fill) > 1:
        raise InvalidArgumentError(f"Fill string must be one or fewer characters: {fill!r}")
    if scientific and shortest:
        raise InvalidArgumentError("Cannot select both scientific and shortest notation")
    head = "%" + (fill if fill else "") + (str(width) if width > -1 else "")
    prec = f".{precision}" if precision > -1 else ""
    if T.is_floating or T.is_complex:
        spec = head + prec + ("g" if shortest else "e" if scientific else "f")
    elif T.is_integer:
        spec = head + "d"
    else:
        spec = head + "s"

    def one(v):
        if T is dtypes.bool_:
            return (head + "s") % ("true" if v else "false")
        if T is dtypes.string:
            return (head + "s") % _b(v).decode("utf-8", "replace")
        if T.is_complex:
            return f"({spec % v.real},{spec % v.imag})"
        return spec % (float(v) if T.is_floating else int(v))

    def compute(x):
        return _objects([one(v).encode() for v in x.reshape(-1)], x.shape)

    return compute


@register_kernel("StringToNumber")
def string_to_number(out_type):
    def conv(s: bytes):
        text = s.decode("utf-8", "replace").strip()
        try:
            if out_type.is_floating:
                return float(text)
            return int(text, 10)
        except ValueError:
            raise InvalidArgumentError(
                f"StringToNumberOp could not correctly convert string: {text}"
            ) from None

    def compute(x):
        vals = [conv(_b(v)) for v in x.reshape(-1)]
        if out_type.is_integer:
            info = np.iinfo(out_type.np)
            for v in vals:
                if not info.min <= v <= info.max:
                    raise InvalidArgumentError(
                        f"StringToNumberOp could not correctly convert string: {v} (out of "
                        f"range for {out_type.name})"
                    )
        return np.array(vals, dtype=out_type.np).reshape(x.shape)

    return compute


@register_kernel("StringLength")
def string_length(unit):
    def compute(x):
        flat = [
            len(_utf8_chars(_b(v))) if unit == "UTF8_CHAR" else len(_b(v)) for v in x.reshape(-1)
        ]
        return np.array(flat, np.int32).reshape(x.shape)

    return compute


def _case(upper: bool):
    def factory(encoding):
        if encoding not in ("", "utf-8", "UTF-8"):
            raise InvalidArgumentError(f"unsupported encoding {encoding!r}")

        def fn(s: bytes) -> bytes:
            if encoding:
                t = s.decode("utf-8")
                return (t.upper() if upper else t.lower()).encode()
            # ASCII letters only, as TensorFlow does without an encoding
            return s.upper() if upper else s.lower()

        return lambda x: _map(fn, x)

    return factory


register_kernel("StringLower")(_case(False))
register_kernel("StringUpper")(_case(True))


@register_kernel("ReduceJoin")
def reduce_join(keep_dims, separator):
    sep = separator.encode()

    def compute(x, axes):
        r = x.ndim
        ax = sorted({(int(a) + r) % r if r else 0 for a in np.asarray(axes).reshape(-1)})
        for a in np.asarray(axes).reshape(-1):
            if not -r <= int(a) < max(r, 1):
                raise InvalidArgumentError(f"Invalid reduction dimension {int(a)} for rank {r}")
        if not ax:
            return x
        keep = [i for i in range(r) if i not in ax]
        moved = np.transpose(x, keep + ax)
        kept_shape = moved.shape[: len(keep)]
        flat = moved.reshape(int(np.prod(kept_shape, dtype=np.int64)), -1)
        out = _objects([sep.join(_b(v) for v in row) for row in flat], kept_shape)
        if keep_dims:
            out = out.reshape([1 if i in ax else x.shape[i] for i in range(r)])
        return out

    return compute


@register_kernel("DecodeRaw")
def decode_raw(out_type, little_endian):
    dt = np.dtype(out_type.np)
    if dt.itemsize > 1:
        dt = dt.newbyteorder("<" if little_endian else ">")

    def compute(x):
        flat = [_b(v) for v in x.reshape(-1)]
        if not flat:
            return np.zeros((*x.shape, 0), out_type.np)
        n = len(flat[0])
        if any(len(v) != n for v in flat):
            raise InvalidArgumentError(
                f"DecodeRaw requires input strings to all be the same size, but element 0 has "
                f"size {n} and another has size {next(len(v) for v in flat if len(v) != n)}"
            )
        if n % dt.itemsize:
            raise InvalidArgumentError(
                f"Input to DecodeRaw has length {n} that is not a multiple of {dt.itemsize}, the "
                f"size of {out_type.name}"
            )
        rows = [np.frombuffer(v, dtype=dt).astype(out_type.np) for v in flat]
        return np.stack(rows).reshape(*x.shape, n // dt.itemsize)

    return compute


def _csv_fields(record: bytes, delim: bytes, quotes: bool, where: str) -> list[bytes]:
    if not quotes:
        return record.split(delim)
    fields, cur, i, n = [], bytearray(), 0, len(record)
    while True:
        if i < n and record[i : i + 1] == b'"':
            i += 1
            while True:
                if i >= n:
                    raise InvalidArgumentError(f"{where}: quoted field has no closing quote")
                if record[i : i + 1] == b'"':
                    if record[i + 1 : i + 2] == b'"':
                        cur += b'"'
                        i += 2
                        continue
                    i += 1
                    break
                cur += record[i : i + 1]
                i += 1
            if i < n and record[i : i + len(delim)] != delim:
                raise InvalidArgumentError(f"{where}: a quoted field must end at a delimiter")
        else:
            j = record.find(delim, i)
            j = n if j < 0 else j
            cur += record[i:j]
            i = j
        fields.append(bytes(cur))
        cur = bytearray()
        if i >= n:
            return fields
        i += len(delim)
        if i >= n:  # a trailing delimiter ends with an empty field
            fields.append(b"")
            return fields


@register_kernel("DecodeCSV")
def decode_csv(OUT_TYPE, field_delim, use_quote_delim, na_value, select_cols):
    delim, na = field_delim.encode(), na_value.encode()

    def parse(text: bytes, dtype, default, col, where):
        if text == b"" or text == na:
            if default.size == 0:
                raise InvalidArgumentError(f"{where}: Field {col} is required but missing")
            return default.reshape(-1)[0]
        if dtype is dtypes.string:
            return text
        try:
            return dtype.np.type(float(text) if dtype.is_floating else int(text))
        except ValueError:
            raise InvalidArgumentError(
                f"{where}: Field {col} in record is not a valid {dtype.name}: {text!r}"
            ) from None

    def compute(records, *defaults):
        n_out = len(OUT_TYPE)
        cols = list(select_cols) if select_cols else list(range(n_out))
        outs = [[] for _ in range(n_out)]
        for r, rec in enumerate(records.reshape(-1)):
            where = f"record {r}"
            fields = _csv_fields(_b(rec), delim, use_quote_delim, where)
            if not select_cols and len(fields) != n_out:
                raise InvalidArgumentError(
                    f"{where}: Expect {n_out} fields but have {len(fields)} in record"
                )
            for k, c in enumerate(cols):
                if c >= len(fields):
                    raise InvalidArgumentError(f"{where}: no column {c} ({len(fields)} fields)")
                outs[k].append(parse(fields[c], OUT_TYPE[k], np.asarray(defaults[k]), c, where))
        result = []
        for k, dt in enumerate(OUT_TYPE):
            if dt is dtypes.string:
                result.append(_objects([_b(v) for v in outs[k]], records.shape))
            else:
                result.append(np.array(outs[k], dtype=dt.np).reshape(records.shape))
        return result[0] if n_out == 1 else result

    return compute
