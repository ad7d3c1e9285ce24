"""StatelessRandomBinomial on TensorFlow's Philox stream (issue 18).

Each output reads its own stretch of the stream (42 Philox calls per output for the inversion
sampler, 256 for the rejection sampler), two doubles per call taken last first. With p the
smaller of prob and 1 - prob (a draw for 1 - prob is counted down from count): count * p < 10
sums geometric variates ceil(log u / log1p(-p)) until they pass count (inversion); from 10 on,
Hormann's BTRS transformed rejection with its Stirling-series tail. count <= 0 or prob <= 0
gives 0, prob >= 1 gives count, a NaN prob NaN.
"""

from __future__ import annotations

import math

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.stateless_random_kernels import key_counter
from rill.exec.kernels.stateless_sampling_kernels import _Math, _shifted, _Stream, first_calls
from rill.graph.errors import InvalidArgumentError

_INVERSION_STRIDE = 42
_BTRS_STRIDE = 256
# log(k!) - Stirling's approximation, for k = 0 .. 9
_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
         0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
         0.00925546218271273, 0.00833056343336287)  # fmt: skip


def _tail(k: float) -> float:
    if k <= 9:
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _uniforms(s: _Stream, m: _Math):
    while True:
        yield from reversed(m.uniform(s))


def _inversion(count: float, p: float, u) -> float:
    total, n = 0.0, 0
    log_q = math.log1p(-p)
    while True:
        total += math.ceil(math.log(next(u)) / log_q)
        if total > count:
            return float(n)
        n += 1


def _btrs(count: float, p: float, u) -> float:
    spq = math.sqrt(count * p * (1 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = count * p + 0.5
    v_r = 0.92 - 4.2 / b
    r = p / (1 - p)
    alpha = (2.83 + 5.1 / b) * spq
    m = math.floor((count + 1) * p)
    while True:
        x = next(u) - 0.5
        v = next(u)
        us = 0.5 - abs(x)
        k = math.floor((2 * a / us + b) * x + c)
        if us >= 0.07 and v <= v_r:
            return float(k)
        if k < 0 or k > count:
            continue
        v = math.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * math.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * math.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * math.log(r * (count - k + 1) / (k + 1))
                 + _tail(m) + _tail(count - m) - _tail(k) - _tail(count - k))  # fmt: skip
        if v <= bound:
            return float(k)


def binomial(shape, seed, counts, probs, out_dtype) -> np.ndarray:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    counts, probs = np.asarray(counts), np.asarray(probs)
    try:
        c, p = np.broadcast_arrays(counts, probs)
    except ValueError:
        raise InvalidArgumentError(
            "counts and probs must have compatible batch dimensions: "
            f"{list(counts.shape)} vs. {list(probs.shape)}"
        ) from None
    if len(dims) < c.ndim or (c.ndim and dims[len(dims) - c.ndim :] != c.shape):
        raise InvalidArgumentError(
            f"Shape passed in must end with broadcasted shape: shape {list(dims)}, counts and "
            f"probs broadcast to {list(c.shape)}"
        )
    T = counts.dtype.type
    batches = max(c.size, 1)
    total = int(np.prod(dims, dtype=np.int64))
    per_batch = total // batches if c.size else 0
    out = np.empty((per_batch, batches), out_dtype)
    if total == 0:
        return out.reshape(dims)
    key, base = key_counter(seed)
    m = _Math(np.float64)
    cs, ps = c.reshape(-1), p.reshape(-1)
    firsts = {}  # stride -> the first calls of every output's stretch, fetched when first needed

    def stream(o: int, stride: int) -> _Stream:
        if stride not in firsts:
            firsts[stride] = first_calls(key, base, total, stride, 2)
        return _Stream(key, _shifted(base, o * stride), chunk=4, first=firsts[stride][o])

    with np.errstate(invalid="ignore"):
        for o in range(total):
            bi, smp = divmod(o, per_batch)
            count, prob = cs[bi], ps[bi]
            dcount = float(count)
            if dcount <= 0.0 or prob <= T(0):
                res = 0.0
            elif prob >= T(1):
                res = dcount
            elif prob <= T(0.5) or prob > T(0.5):
                low = prob <= T(0.5)
                q = prob if low else T(1) - prob
                if count * q >= T(10):
                    s = stream(o, _BTRS_STRIDE)
                    draw = _btrs(dcount, float(q), _uniforms(s, m))
                else:
                    s = stream(o, _INVERSION_STRIDE)
                    draw = _inversion(dcount, float(q), _uniforms(s, m))
                res = draw if low else dcount - draw
            else:  # a NaN probability
                res = math.nan
            out[smp, bi] = res
    return out.reshape(dims)


@register_kernel("StatelessRandomBinomial")
def stateless_random_binomial(S, Tseed, T, dtype):
    def compute(shape, seed, counts, probs):
        return binomial(shape, seed, counts, probs, dtype.np)

    return compute
