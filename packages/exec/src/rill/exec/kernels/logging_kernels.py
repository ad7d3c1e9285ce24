"""Kernels for rill.graph.ops.logging_ops: Assert, CheckNumerics, Print, StringFormat, PrintV2.

Tensors print as TensorFlow's summaries do: brackets per dimension, elements separated by a
space, rows on new lines indented by their depth, at most `summarize` elements at each end of a
dimension with "..." between; floats in the shortest of %.6g / %.9g (%.15g / %.17g for float64)
that reads back to the same value.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError


def _scalar_text(v, dtype: np.dtype) -> str:
    if dtype.kind == "f":
        short, long_ = ("%.15g", "%.17g") if dtype == np.float64 else ("%.6g", "%.9g")
        s = short % float(v)
        if dtype.type(float(s)) != v and not np.isnan(v):
            s = long_ % float(v)
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(s, s)
    if dtype.kind == "b":
        return "1" if v else "0"
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def summarize_tensor(x: np.ndarray, n: int) -> str:
    """TensorFlow's printed form of a tensor (n < 0: every element)."""
    x = np.asarray(x)
    if x.ndim == 0:
        return _scalar_text(x[()], x.dtype)

    def rec(a, depth):
        k = a.shape[0]
        idx = (
            list(range(k))
            if n < 0 or k <= 2 * n
            else list(range(n)) + [None] + list(range(k - n, k))
        )
        if a.ndim == 1:
            parts = ["..." if i is None else _scalar_text(a[i], a.dtype) for i in idx]
            return "[" + " ".join(parts) + "]"
        sep = "\n" * (a.ndim - 1) + " " * (depth + 1)
        parts = ["..." if i is None else rec(a[i], depth + 1) for i in idx]
        return "[" + sep.join(parts) + "]"

    return rec(x, 0)


def summarize_flat(x: np.ndarray, n: int) -> str:
    """The older form Print uses: the first n elements in row-major order, in their brackets,
    with "..." where elements were left out (TensorFlow's Tensor::SummarizeValue)."""
    x = np.asarray(x)
    if x.ndim == 0:
        return _scalar_text(x[()], x.dtype)
    budget = [x.size if n < 0 else n]

    def rec(a):
        parts, cut = [], False
        for i in range(a.shape[0]):
            if budget[0] <= 0:
                cut = True
                break
            if a.ndim == 1:
                parts.append(_scalar_text(a[i], a.dtype))
                budget[0] -= 1
            else:
                parts.append(rec(a[i]))
        return "[" + " ".join(parts) + ("..." if cut else "") + "]"

    return rec(x)


@register_kernel("Assert")  # host-side, as TensorFlow keeps Assert on the CPU
def assert_(T, summarize):
    n = summarize

    def compute(condition, *data):
        if np.ndim(condition) != 0:
            raise InvalidArgumentError("the condition of an Assert must be a scalar")
        if not bool(condition):
            shown = "\n".join(summarize_tensor(np.asarray(d), n) for d in data)
            raise InvalidArgumentError(f"assertion failed: {shown}")

    return compute


def _check_numerics(message):
    def compute(x):
        bad_nan = bool(np.isnan(x).any())
        bad_inf = bool(np.isinf(x).any())
        if bad_nan or bad_inf:
            what = " and ".join(w for w, b in (("Inf", bad_inf), ("NaN", bad_nan)) if b)
            raise InvalidArgumentError(f"{message} : Tensor had {what} values")
        return x

    return compute


@register_kernel("CheckNumerics", devices=("CPU", "GPU"))
def check_numerics(T, message):
    return _check_numerics(message)


@register_kernel("CheckNumericsV2", devices=("CPU", "GPU"))
def check_numerics_v2(T, message):
    return _check_numerics(message)


@register_kernel("Print")
def print_(T, U, message, first_n, summarize):
    lock = threading.Lock()
    count = [0]

    def compute(x, *data):
        with lock:
            count[0] += 1
            show = first_n < 0 or count[0] <= first_n
        if show:
            text = message + "".join(summarize_flat(np.asarray(d), summarize) for d in data)
            print(text, file=sys.stderr)
        return x

    return compute


@register_kernel("StringFormat")
def string_format(T, template, placeholder, summarize):
    pieces = template.split(placeholder)
    if len(pieces) - 1 != len(T):
        raise InvalidArgumentError(
            f"StringFormat: the template has {len(pieces) - 1} placeholders but there are "
            f"{len(T)} inputs"
        )
    n = summarize

    def compute(*xs):
        out = [pieces[0]]
        for x, rest in zip(xs, pieces[1:]):
            out.append(summarize_tensor(np.asarray(x), n))
            out.append(rest)
        return np.asarray("".join(out).encode(), dtype=object)

    return compute


@register_kernel("PrintV2")
def print_v2(output_stream, end):
    streams = {"stdout": sys.stdout, "stderr": sys.stderr}

    def compute(s):
        if np.ndim(s) != 0:
            raise InvalidArgumentError("PrintV2 prints a scalar string")
        text = s[()] if isinstance(s, np.ndarray) else s
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        stream = streams.get(output_stream, sys.stderr)
        stream.write(text + end)
        stream.flush()

    return compute
