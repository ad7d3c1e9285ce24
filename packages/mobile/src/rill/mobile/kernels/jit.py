"""Optional compiled loops (numba) for the interpreter's hottest kernels.

The interpreter needs only numpy; when numba is installed (the `jit` extra, or alongside
rill-exec) the int8 depthwise convolution, the int8 output stage of the matrix products, the
float32 depthwise convolution and the int8 pair-table lookup run as compiled loops instead of a
dozen numpy passes. Every kernel keeps its numpy path, and the two give bit-identical results
(tests/mobile/test_jit.py runs both): the int8 loops are the reference kernels' integer
arithmetic, the float loops the numpy path's float32 operations in the same order.

`loops()` gives the compiled module, or None when numba is missing or turned off (`RILL_JIT=0`
in the environment, as for rill.exec, or `set_enabled(False)`). The choice is made when a model
is prepared (`allocate_tensors`), so switching affects the next allocation. Loops compile on
first use and are cached on disk by numba.
"""

from __future__ import annotations

import importlib
import os
import threading

__all__ = ["loops", "enabled", "set_enabled", "nan_cast"]

_lock = threading.Lock()
_enabled = os.environ.get("RILL_JIT", "1").strip().lower() not in ("0", "false", "off", "no")
_module = None
_failed = False


def enabled() -> bool:
    return _enabled


def set_enabled(on: bool) -> bool:
    """Turns the compiled loops on or off (tests, benchmarks); returns the old setting."""
    global _enabled
    old, _enabled = _enabled, bool(on)
    return old


def loops():
    """The compiled-loop module (rill.mobile.kernels._loops), or None when it cannot be used."""
    global _module, _failed
    if not _enabled:
        return None
    if _module is not None or _failed:
        return _module
    with _lock:
        if _module is None and not _failed:
            try:
                _module = importlib.import_module("rill.mobile.kernels._loops")
            except ImportError:
                _failed = True
    return _module


def nan_cast(dtype) -> int:
    """What numpy's unsafe cast of a float NaN to the integer `dtype` gives on this machine (C
    leaves it undefined): the compiled loops write it where the numpy path casts a NaN."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        return int(np.array([np.nan], np.float64).astype(dtype)[0])
