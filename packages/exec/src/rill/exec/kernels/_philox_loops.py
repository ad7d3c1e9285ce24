"""Compiled loops for the Philox samplers (rill.exec.kernels.stateless_random_kernels).

TensorFlow's float Box-Muller calls the C library's logf, sinf and cosf; those are not always
correctly rounded, so numpy's own float (or double-then-rounded) functions differ from them in
about one value in a hundred. A numba loop calls the same C library functions (LLVM lowers
math.log / sin / cos on float32 to logf / sinf / cosf; no fast-math, no SVML), so rill's floats
equal TensorFlow's bit for bit.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, error_model="numpy")


@_jit
def log_sin_cos32(u, v, log_u, sin_v, cos_v):  # pragma: no cover - compiled
    """log_u[i] = logf(u[i]); sin_v[i], cos_v[i] = sinf(v[i]), cosf(v[i]) (1-D float32)."""
    for i in range(u.shape[0]):
        log_u[i] = math.log(u[i])
        sin_v[i] = math.sin(v[i])
        cos_v[i] = math.cos(v[i])


def box_muller_parts(u: np.ndarray, v: np.ndarray):
    """logf(u), sinf(v), cosf(v) of float32 arrays of one shape."""
    uf = np.ascontiguousarray(u, np.float32).reshape(-1)
    vf = np.ascontiguousarray(v, np.float32).reshape(-1)
    outs = [np.empty(uf.shape, np.float32) for _ in range(3)]
    log_sin_cos32(uf, vf, *outs)
    return [o.reshape(np.shape(u)) for o in outs]
