"""Random ops on the GPU: cupy's generator, one per op instance, seeded from the op's
(seed, seed2) as the CPU kernels seed theirs — the same sequence semantics (a seeded op gives the
same sequence in every session, successive steps continue it, an unseeded one differs per
session), not the same values as the CPU."""

from __future__ import annotations

import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.random_kernels import _BELOW_ONE, _shape_arg
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

_FLOATS = {"dtype": (dtypes.float16, dtypes.float32, dtypes.float64)}


class _Stream:
    def __init__(self, xp, seed: int, seed2: int):
        if seed == 0 and seed2 == 0:
            s = None
        else:
            s = int(np.random.SeedSequence([seed % 2**64, seed2 % 2**64]).generate_state(1)[0])
        self.gen = xp.random.RandomState(s)
        self.lock = threading.Lock()


def _wide(out_t):
    return np.float64 if out_t == np.float64 else np.float32


@register_kernel("RandomUniform", devices="GPU", constraints=_FLOATS)
def random_uniform(seed, seed2, dtype, xp):
    stream = _Stream(xp, seed, seed2)
    out_t = dtype.np

    def compute(shape):
        dims = _shape_arg(shape)
        with stream.lock:
            u = stream.gen.random_sample(dims, dtype=_wide(out_t))
        out = u.astype(out_t, copy=False)
        if out_t in _BELOW_ONE:
            out = xp.minimum(out, out_t.type(_BELOW_ONE[out_t]))
        return out

    return compute


@register_kernel("RandomStandardNormal", devices="GPU", constraints=_FLOATS)
def random_standard_normal(seed, seed2, dtype, xp):
    stream = _Stream(xp, seed, seed2)
    out_t = dtype.np

    def compute(shape):
        dims = _shape_arg(shape)
        with stream.lock:
            z = stream.gen.standard_normal(dims, dtype=_wide(out_t))
        return z.astype(out_t, copy=False)

    return compute


@register_kernel("TruncatedNormal", devices="GPU", constraints=_FLOATS)
def truncated_normal(seed, seed2, dtype, xp):
    stream = _Stream(xp, seed, seed2)
    out_t = dtype.np

    def compute(shape):
        dims = _shape_arg(shape)
        wide = _wide(out_t)
        with stream.lock:
            z = stream.gen.standard_normal(dims, dtype=wide)
            # Redraw the values beyond two standard deviations: each round draws a full-size
            # candidate array and keeps it where the current value is out of range (few rounds,
            # no host round trip per value).
            for _ in range(64):
                bad = xp.abs(z) > 2
                if not bool(bad.any()):
                    break
                z = xp.where(bad, stream.gen.standard_normal(dims, dtype=wide), z)
        return z.astype(out_t, copy=False)

    return compute


@register_kernel(
    "RandomUniformInt", devices="GPU", constraints={"Tout": (dtypes.int32, dtypes.int64)}
)
def random_uniform_int(seed, seed2, Tout, xp):
    stream = _Stream(xp, seed, seed2)
    out_t = Tout.np

    def compute(shape, minval, maxval):
        if np.ndim(minval) != 0 or np.ndim(maxval) != 0:
            raise InvalidArgumentError(
                f"minval and maxval must be scalars, got shapes {list(np.shape(minval))} and "
                f"{list(np.shape(maxval))}"
            )
        dims = _shape_arg(shape)
        if int(np.prod(dims)) == 0:
            return xp.zeros(dims, out_t)
        lo, hi = int(minval), int(maxval)
        if lo >= hi:
            raise InvalidArgumentError(f"Need minval < maxval, got {lo} >= {hi}")
        with stream.lock:
            return stream.gen.randint(lo, hi, size=dims, dtype=out_t)

    return compute
