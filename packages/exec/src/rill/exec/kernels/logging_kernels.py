"""Kernels for rill.graph.ops.logging_ops: Assert, Print, CheckNumerics."""

from __future__ import annotations

import sys
import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError


def format_values(values, summarize: int) -> str:
    """TensorFlow's rendering of Assert/Print data: each tensor in brackets, strings as text,
    at most `summarize` elements of each (`...` when cut short; summarize < 0 shows all)."""
    parts = []
    for v in values:
        a = np.asarray(v)
        if a.dtype == object or a.dtype.kind in "SU":
            flat = [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
                    for x in a.reshape(-1)]  # fmt: skip
        else:
            flat = [str(x) for x in a.reshape(-1).tolist()]
        if a.ndim == 0:
            parts.append(f"[{flat[0]}]")
            continue
        shown = flat if summarize < 0 else flat[:summarize]
        more = "..." if len(shown) < len(flat) else ""
        parts.append("[" + " ".join(shown) + more + "]")
    return " ".join(parts)


@register_kernel("Assert")
def assert_(T, summarize):
    def compute(condition, *data):
        if np.shape(condition) != ():
            raise InvalidArgumentError(
                f"In[0] (condition) must be a scalar, got shape {list(np.shape(condition))}"
            )
        if not bool(condition):
            raise InvalidArgumentError("assertion failed: " + format_values(data, summarize))

    return compute


@register_kernel("Print")
def print_(T, U, message, first_n, summarize):
    lock = threading.Lock()
    count = [0]

    def compute(input, *data):
        with lock:
            if first_n >= 0 and count[0] >= first_n:
                return input
            count[0] += 1
        print(message + format_values(data, summarize), file=sys.stderr, flush=True)
        return input

    return compute


@register_kernel("CheckNumerics")
def check_numerics(T, message):
    def compute(tensor):
        a = np.asarray(tensor)
        if a.size and not np.isfinite(a.astype(np.float64, copy=False)).all():
            wide = a.astype(np.float64, copy=False)
            has_nan, has_inf = bool(np.isnan(wide).any()), bool(np.isinf(wide).any())
            what = "Inf and NaN" if has_nan and has_inf else ("NaN" if has_nan else "Inf")
            raise InvalidArgumentError(f"{message} : Tensor had {what} values")
        return tensor

    return compute
