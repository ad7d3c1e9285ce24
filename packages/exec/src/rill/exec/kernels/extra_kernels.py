"""numpy kernels of rill.graph.ops.extra_ops."""

from __future__ import annotations

import base64
import os
import re

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError, NotFoundError
from rill.graph.shapes import TensorShape


def _b(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


def _strings(values, shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _map(fn, x: np.ndarray) -> np.ndarray:
    return _strings([fn(_b(v)) for v in x.reshape(-1)], x.shape)


@register_kernel("Rint")
def rint():
    return np.rint  # halves to even, as TensorFlow's Rint


@register_kernel("Cross")
def cross():
    def compute(a, b):
        if a.shape != b.shape:
            raise InvalidArgumentError(f"a and b must have the same shape, got "
                                       f"{TensorShape(a.shape)} and {TensorShape(b.shape)}")  # fmt: skip
        if a.ndim < 1 or a.shape[-1] != 3:
            raise InvalidArgumentError(f"the last dimension of a and b must be 3, got shape "
                                       f"{TensorShape(a.shape)}")  # fmt: skip
        return np.cross(a, b).astype(a.dtype)

    return compute


@register_kernel("UnravelIndex")
def unravel_index():
    def compute(indices, dims):
        if dims.ndim != 1:
            raise InvalidArgumentError(
                f"dims must be a vector, got shape {TensorShape(dims.shape)}"
            )
        if indices.ndim > 1:
            raise InvalidArgumentError(
                f"indices must be a scalar or a vector, got shape {TensorShape(indices.shape)}"
            )
        if (dims <= 0).any():
            raise InvalidArgumentError(f"dims must all be positive, got {dims.tolist()}")
        size = int(np.prod(dims.astype(np.int64)))
        bad = (indices < 0) | (indices >= size)
        if bad.any():
            raise InvalidArgumentError(
                f"index out of bound as input index is {int(indices[bad].reshape(-1)[0])} while "
                f"the product of dims {dims.tolist()} is {size}"
            )
        return np.stack(np.unravel_index(indices, tuple(int(d) for d in dims))).astype(dims.dtype)

    return compute


@register_kernel("EnsureShape")
def ensure_shape(shape):
    want = TensorShape(shape)

    def compute(x):
        if not TensorShape(x.shape).is_compatible_with(want):
            raise InvalidArgumentError(
                f"Shape of tensor {TensorShape(x.shape)} is not compatible with expected shape "
                f"{want}."
            )
        return x

    return compute


@register_kernel("ReadFile")
def read_file():
    def compute(filename):
        path = _b(filename.item()).decode()
        try:
            with open(path, "rb") as f:
                return _strings([f.read()], ())
        except FileNotFoundError:
            raise NotFoundError(f"{path}; No such file or directory") from None
        except IsADirectoryError:
            raise InvalidArgumentError(f"{path} is a directory, not a file") from None

    return compute


@register_kernel("WriteFile")
def write_file():
    def compute(filename, contents):
        if filename.ndim != 0 or contents.ndim != 0:
            raise InvalidArgumentError("filename and contents must be scalars")
        path = _b(filename.item()).decode()
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "wb") as f:
            f.write(_b(contents.item()))

    return compute


@register_kernel("StringStrip")
def string_strip():
    # absl's StripAsciiWhitespace: space, \t, \n, \v, \f, \r (what bytes.strip() removes).
    return lambda x: _map(bytes.strip, x)


@register_kernel("EncodeBase64")
def encode_base64(pad):
    def fn(s: bytes) -> bytes:
        out = base64.urlsafe_b64encode(s)
        return out if pad else out.rstrip(b"=")

    return lambda x: _map(fn, x)


_BASE64 = re.compile(rb"[A-Za-z0-9_-]*")


@register_kernel("DecodeBase64")
def decode_base64():
    def fn(s: bytes) -> bytes:
        body = s.rstrip(b"=") if len(s) % 4 == 0 else s
        if not _BASE64.fullmatch(body) or len(body) % 4 == 1:
            raise InvalidArgumentError(f"Invalid character found in base64 (or a bad length): "
                                       f"{s[:40]!r}")  # fmt: skip
        return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))

    return lambda x: _map(fn, x)


_MASK = (1 << 64) - 1
_M = 0xC6A4A7935BD1E995


def hash64(data: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's Hash64 (tensorflow/core/platform/hash.cc, MurmurHash64A) of data."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    full = n - n % 8
    for i in range(0, full, 8):
        k = int.from_bytes(data[i : i + 8], "little")
        k = (k * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    tail = data[full:]
    if tail:
        for j in range(len(tail) - 1, -1, -1):
            h ^= tail[j] << (8 * j)
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    h ^= h >> 47
    return h


@register_kernel("StringToHashBucket")
def string_to_hash_bucket(num_buckets):
    def compute(x):
        flat = [hash64(_b(v)) % num_buckets for v in x.reshape(-1)]
        return np.array(flat, np.int64).reshape(x.shape)

    return compute


@register_kernel("StringSplit")
def string_split(skip_empty):
    def compute(source, delimiter):
        if source.ndim != 1:
            raise InvalidArgumentError(f"input must be a vector, got shape "
                                       f"{TensorShape(source.shape)}")  # fmt: skip
        if delimiter.ndim != 0:
            raise InvalidArgumentError("delimiter must be a scalar")
        delims = set(_b(delimiter.item()))
        indices, values, longest = [], [], 0
        for row, s in enumerate(source.reshape(-1)):
            s = _b(s)
            if not s:
                parts = []  # TensorFlow's Split of "" has no pieces, even without skip_empty
            elif not delims:
                parts = [s[i : i + 1] for i in range(len(s))]
            else:
                parts, start = [], 0
                for i, c in enumerate(s):
                    if c in delims:
                        parts.append(s[start:i])
                        start = i + 1
                parts.append(s[start:])
                if skip_empty:
                    parts = [p for p in parts if p]
            for col, p in enumerate(parts):
                indices.append((row, col))
                values.append(p)
            longest = max(longest, len(parts))
        idx = np.array(indices, np.int64).reshape(-1, 2)
        return idx, _strings(values, (len(values),)), np.array([source.shape[0], longest], np.int64)

    return compute
