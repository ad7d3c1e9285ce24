"""Compiled loops (numba) for the memory-bound CPU kernels.

numpy runs an elementwise expression as one pass over memory per operation; a kernel such as
the max-pool gradient, which reads each window, picks its maximum and routes the gradient, takes
a dozen such passes where one loop would do. `loops()` gives the module of those loops compiled
with numba, or None when numba is missing or turned off (`RILL_JIT=0` in the environment, or
`set_enabled(False)`): every caller keeps its numpy path, which gives bit-identical results
(float32 Sigmoid, Swish, Exp, Tanh and Softmax aside: their compiled exponentials agree with
numpy's to an ulp or a few, see _sigmoid_loops and _exp_tanh_loops), and the tests run both.

The loops release the GIL and work on a range of the outermost axis, so the kernels split them
over the intra-op threads with `parallel_for` (no second thread pool). They are compiled on
first use for the dtypes they meet (float32 and float64; the kernels keep numpy for the rest)
and cached on disk by numba.
"""

from __future__ import annotations

import importlib
import os
import threading

import numpy as np

__all__ = ["loops", "direct", "conv_loops", "exp_tanh", "set_enabled", "enabled", "env_on",
           "FLOATS"]  # fmt: skip

# The dtypes the compiled loops are used for.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def env_on(name: str) -> bool:
    """Whether the switch `name` in the environment is on: unset, or anything but 0, false,
    off or no (RILL_JIT, RILL_SPIN, RILL_CONV_DIRECT)."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "off", "no")


_lock = threading.Lock()
_enabled = env_on("RILL_JIT")
_module = None
_failed = False


def enabled() -> bool:
    return _enabled


def set_enabled(on: bool) -> bool:
    """Turns the compiled loops on or off (for tests and benchmarks); returns the old setting."""
    global _enabled
    old, _enabled = _enabled, bool(on)
    return old


def loops():
    """The compiled-loop module (rill.exec.kernels._loops), or None when it cannot be used."""
    global _module, _failed
    if not _enabled:
        return None
    if _module is not None or _failed:
        return _module
    with _lock:
        if _module is None and not _failed:
            try:
                _module = importlib.import_module("rill.exec.kernels._loops")
            except ImportError:
                _failed = True
    return _module


_direct: dict = {}


def direct(name: str):
    """The module rill.exec.kernels.`name` of loops emitted as LLVM IR (_conv_vec, _gemm_vec,
    _winograd_team), imported once, or None where they do not run: the compiled loops off, or
    RILL_CONV_DIRECT=0 in the environment (each caller then takes its numpy / BLAS path)."""
    if name not in _direct:
        on = env_on("RILL_CONV_DIRECT")
        _direct[name] = importlib.import_module(f"rill.exec.kernels.{name}") if on else None
    return _direct[name] if loops() is not None else None


_conv: list = []


def conv_loops():
    """rill.exec.kernels._conv_loops (the channels-first convolution, pooling and reduction
    loops), imported once (an import per call costs about a microsecond, noticeable on the many
    small kernels of a batch-1 inference), or None where the compiled loops are off."""
    if loops() is None:
        return None
    if not _conv:
        _conv.append(importlib.import_module("rill.exec.kernels._conv_loops"))
    return _conv[0]


_exp_tanh: list = []


def exp_tanh():
    """rill.exec.kernels._exp_tanh_loops (the float32 exp32 / tanh32 loops), imported once, or
    None where the compiled loops are off (the kernels then take numpy's exp and tanh)."""
    if loops() is None:
        return None
    if not _exp_tanh:
        _exp_tanh.append(importlib.import_module("rill.exec.kernels._exp_tanh_loops"))
    return _exp_tanh[0]
