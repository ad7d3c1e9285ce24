"""Kernels for the stateless samplers beyond uniforms and normals (issue 18): the algorithm
queries and StatelessMultinomial, on TensorFlow's Philox stream (stateless_random_kernels).

StatelessMultinomial takes one double per sample from the stream (two uint32 values: 20 + 32
mantissa bits), rows one after another; each row's cumulative distribution is exp(logit - max)
summed in double over the finite logits, and a sample is the first class whose cumulative
value exceeds u * total. TensorFlow's CPU kernel does the same when it runs the op as one
shard (small batches); when its thread pool splits a large batch into shards, each shard after
the first restarts the stream at an offset (row * ceil-ish(num_samples / 4) calls), so TF's own
numbers then depend on its thread count; rill always computes the one-shard stream.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.stateless_random_kernels import (
    LIBM_F,
    _uint16_to_half,
    _uint32_to_float,
    _uint64_to_double,
    key_counter,
    random_bits,
)
from rill.graph.errors import InvalidArgumentError

PHILOX = 1  # TensorFlow's RNG_ALG_PHILOX; the CPU's counter-based algorithm


@register_kernel("StatelessRandomGetKeyCounterAlg")
def stateless_random_get_key_counter_alg(Tseed):
    def compute(seed):
        (k0, k1), c = key_counter(seed)
        key = np.array([k0 | (k1 << 32)], np.uint64)
        counter = np.array([c[0] | (c[1] << 32), c[2] | (c[3] << 32)], np.uint64)
        return key, counter, np.int32(PHILOX)

    return compute


@register_kernel("StatelessRandomGetAlg")
def stateless_random_get_alg():
    return lambda: np.int32(PHILOX)


def multinomial(logits: np.ndarray, num_samples: int, seed, out_dtype) -> np.ndarray:
    if logits.ndim != 2:
        raise InvalidArgumentError(f"logits should be a matrix, got shape {list(logits.shape)}")
    batch, classes = logits.shape
    if num_samples < 0:
        raise InvalidArgumentError(f"num_samples should be nonnegative, got {num_samples}")
    if classes == 0 and batch and num_samples:
        raise InvalidArgumentError("num_classes should be positive, got 0")
    out = np.empty((batch, num_samples), out_dtype)
    total = batch * num_samples
    if total == 0:
        return out
    bits = random_bits(seed, -(-total // 2)).reshape(-1, 2)[:total]
    u = _uint64_to_double(bits[:, 0], bits[:, 1]).reshape(batch, num_samples)
    finite = np.isfinite(logits)
    with np.errstate(all="ignore"):
        for r in range(batch):
            row, fin = logits[r], finite[r]
            top = float(row[fin].max()) if fin.any() else float(np.finfo(np.float64).min)
            e = np.exp(row.astype(np.float64) - top)
            cdf = np.cumsum(np.where(fin, e, 0.0))
            out[r] = np.searchsorted(cdf, u[r] * cdf[-1], side="right")
    return out


@register_kernel("StatelessMultinomial")
def stateless_multinomial(T, Tseed, output_dtype):
    def compute(logits, num_samples, seed):
        n = np.asarray(num_samples)
        if n.ndim:
            raise InvalidArgumentError(f"num_samples should be a scalar, got shape {list(n.shape)}")
        return multinomial(np.asarray(logits), int(n), seed, output_dtype.np)

    return compute


# -- StatelessParameterizedTruncatedNormal ---------------------------------------------------------
# TensorFlow's three samplers, chosen per batch (per element of the broadcast parameters) from the
# normalized bounds: rejection from normals when a bound lies beyond 1.3 standard deviations on
# the mean's far side, else uniform proposals on [lo, hi] accepted with probability
# exp((lo^2 or 0 - z^2) / 2), else Robert's exponential proposals shifted to lo. The stream is
# read one Philox call at a time (4 floats or 2 doubles per call, normals by Box-Muller), batch
# after batch, a batch's unused values dropped; a batch that fails 1000 times in a row takes the
# last proposal. Arithmetic is in the output type, each transcendental rounded once from double
# through the C library's functions as TensorFlow's are (2*pi of Box-Muller is the double constant).

_MAX_ITERATIONS = 1000
_RANDN_BOUND = 1.3  # kStdDevsInsideBoundsToUseRandnSampler


class _Stream:
    """Philox calls counter, counter + 1, ... of one key, fetched in chunks."""

    def __init__(self, key, base, chunk: int = 64, first: np.ndarray | None = None):
        self.key, self.base, self.chunk = key, base, chunk
        self.pos, self.start = 0, 0
        self.buf = np.empty((0, 4), np.uint32) if first is None else first

    def call(self) -> np.ndarray:
        if self.pos >= self.start + len(self.buf):
            n = self.chunk
            self.chunk = min(self.chunk * 2, 1 << 16)
            self.start = self.pos
            self.buf = random_bits(None, n, (self.key, _shifted(self.base, self.pos)))
        out = self.buf[self.pos - self.start]
        self.pos += 1
        return out


def first_calls(key, base, n_outputs: int, stride: int, calls: int) -> np.ndarray:
    """[n_outputs, calls, 4] uint32: the first calls Philox calls of each output's stretch
    (output o's starts stride * o calls after base), in one vectorized pass."""
    from rill.exec.kernels.stateless_random_kernels import _LO, philox

    start = np.uint64(base[0] | (base[1] << 32))
    offs = np.arange(n_outputs, dtype=np.uint64)[:, None] * np.uint64(stride)
    low = (start + offs + np.arange(calls, dtype=np.uint64)).reshape(-1)
    ctr = np.stack([low & _LO, low >> np.uint64(32), np.full(low.size, base[2], np.uint64),
                    np.full(low.size, base[3], np.uint64)], axis=1).astype(np.uint32)  # fmt: skip
    return philox(ctr, key).reshape(n_outputs, calls, 4)


def _shifted(base, n: int) -> list[int]:
    low = ((base[0] | (base[1] << 32)) + n) & 0xFFFFFFFFFFFFFFFF
    return [low & 0xFFFFFFFF, low >> 32, base[2], base[3]]


_LIBM_F = LIBM_F


class _Math:
    """Scalar math in the output type T as TensorFlow's CPU kernel does it: double through the C
    library (Python's math), float through the C library's float functions, half through float
    and rounded (Eigen's half)."""

    def __init__(self, T):
        import math

        self.T, self.double = T, T is np.float64
        if self.double:
            self.exp, self.log, self.sqrt = math.exp, math.log, math.sqrt
            self.sin, self.cos = math.sin, math.cos
            return
        f32, c = np.float32, _LIBM_F or {}

        def wrap(name, py_fn):
            c_fn = c.get(name)
            if c_fn is not None:
                return lambda x: T(f32(c_fn(float(x))))
            return lambda x: T(f32(py_fn(float(x))))

        def safe_exp(x):
            return math.exp(x) if x < 89 else math.inf

        self.exp, self.log = wrap("exp", safe_exp), wrap("log", math.log)
        self.sin, self.cos = wrap("sin", math.sin), wrap("cos", math.cos)
        self.sqrt = lambda x: T(f32(math.sqrt(float(x))))

    def uniform(self, s: _Stream) -> list:
        b = s.call()
        if self.double:
            return [float(v) for v in _uint64_to_double(b[[0, 2]], b[[1, 3]])]
        if self.T is np.float16:
            return list(_uint16_to_half(b))
        return list(_uint32_to_float(b))

    def normal(self, s: _Stream) -> list:
        b = s.call()
        if self.double:
            u = _uint64_to_double(b[[0, 2]], b[[1, 3]])
            u1, v = max(float(u[0]), 1.0e-7), 2.0 * np.pi * float(u[1])
            r = self.sqrt(-2.0 * self.log(u1))
            return [self.sin(v) * r, self.cos(v) * r]
        # float Box-Muller (a half normal is the float normal, rounded)
        u = _uint32_to_float(b)
        f32, out = np.float32, []
        for u1, u2 in ((u[0], u[1]), (u[2], u[3])):
            u1 = max(u1, f32(1.0e-7))
            v = f32(2.0 * np.pi * float(u2))
            r = f32(np.sqrt(f32(-2.0) * _flt(self, "log", u1)))
            out += [self.T(_flt(self, "sin", v) * r), self.T(_flt(self, "cos", v) * r)]
        return out


def _flt(m: _Math, name: str, x) -> np.float32:
    """The float (not T) value of a C library function, for Box-Muller."""
    import math

    f = (_LIBM_F or {}).get(name)
    return np.float32(f(float(x)) if f is not None else getattr(math, name)(float(x)))


def _truncated_batch(m: _Math, s: _Stream, n: int, mu, sd, lo, hi) -> list:
    T, out, fails = m.T, [], 0
    if (np.isinf(lo) and lo < 0) or hi < mu:  # sample the mirrored problem
        lo, hi, sd = hi, lo, -sd
    nlo, nhi = (lo - mu) / sd, (hi - mu) / sd
    root = m.sqrt(nlo * nlo + T(4))
    cutoff = T(2) * m.exp(T(0.5) + (nlo * (nlo - root)) / T(4)) / (nlo + root)
    if (nlo < -T(_RANDN_BOUND) and nhi >= 0) or (nhi > T(_RANDN_BOUND) and nlo <= 0):
        while len(out) < n:
            for z in m.normal(s):
                if nlo <= z <= nhi:
                    out.append(z * sd + mu)
                    fails = 0
                    if len(out) >= n:
                        break
                else:
                    fails += 1
    elif nhi - nlo < cutoff:
        span, plus = nhi - nlo, T(0) if nlo < 0 else nlo * nlo
        while len(out) < n:
            z = [r * span + nlo for r in m.uniform(s)]
            u = m.uniform(s)
            for zi, ui in zip(z, u):
                if ui <= m.exp((plus - zi * zi) / T(2)) or fails + 1 >= _MAX_ITERATIONS:
                    out.append(zi * sd + mu)
                    fails = 0
                    if len(out) >= n:
                        break
                else:
                    fails += 1
    else:
        alpha = (nlo + m.sqrt(nlo * nlo + T(4))) / T(2)
        while len(out) < n:
            r = m.uniform(s)
            for i in range(0, len(r), 2):
                z = -m.log(r[i]) / alpha + nlo
                x = alpha - z if nlo < alpha else nlo - alpha
                if (r[i + 1] <= m.exp(-x * x / T(2)) and z < nhi) or fails + 1 >= _MAX_ITERATIONS:
                    out.append(z * sd + mu)
                    fails = 0
                    if len(out) >= n:
                        break
                else:
                    fails += 1
    return out


def parameterized_truncated_normal(shape, seed, means, stddevs, minvals, maxvals, T):
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    T = np.dtype(T).type
    try:
        params = np.broadcast_arrays(
            *(np.asarray(p, T) for p in (means, stddevs, minvals, maxvals))
        )
    except ValueError:
        raise InvalidArgumentError(
            "means, stddevs, minvals and maxvals must broadcast together, got shapes "
            + ", ".join(str(list(np.shape(p))) for p in (means, stddevs, minvals, maxvals))
        ) from None
    bshape = params[0].shape
    if len(dims) < len(bshape) or (bshape and dims[len(dims) - len(bshape) :] != bshape):
        raise InvalidArgumentError(
            f"Shape passed in must end with broadcasted shape: shape {list(dims)}, parameters "
            f"broadcast to {list(bshape)}"
        )
    batches = int(np.prod(bshape, dtype=np.int64))
    total = int(np.prod(dims, dtype=np.int64))
    per_batch = total // batches if batches else 0
    mu, sd, lo, hi = (p.reshape(-1) for p in params)
    bad = ~((sd > 0) & (lo < hi) & (np.isfinite(lo) | np.isfinite(hi)))
    if total and bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(
            "Invalid parameters: need stddev > 0, minval < maxval and a finite bound; batch "
            f"{i} has mean {mu[i]}, stddev {sd[i]}, minval {lo[i]}, maxval {hi[i]}"
        )
    out = np.empty((per_batch, batches), T)
    if total:
        key, base = key_counter(seed)
        m, s = _Math(T), _Stream(key, base)
        with np.errstate(over="ignore"):
            for b in range(batches):
                out[:, b] = _truncated_batch(m, s, per_batch, mu[b], sd[b], lo[b], hi[b])
    return out.reshape(dims)


@register_kernel("StatelessParameterizedTruncatedNormal")
def stateless_parameterized_truncated_normal(S, Tseed, dtype):
    def compute(shape, seed, means, stddevs, minvals, maxvals):
        return parameterized_truncated_normal(shape, seed, means, stddevs, minvals, maxvals,
                                              dtype.np)  # fmt: skip

    return compute


# -- StatelessShuffle -------------------------------------------------------------------------------
# Forward Fisher-Yates over the first dimension: position i (0 .. n - 2) swaps with
# i + (next uint32 of the stream) % (n - i); TensorFlow reads the uint32 values one at a time.


def shuffle_permutation(n: int, kc) -> np.ndarray:
    perm = np.arange(n, dtype=np.int64)
    if n <= 1:
        return perm
    bits = random_bits(None, -(-(n - 1) // 4), kc).reshape(-1)[: n - 1].tolist()
    p = perm.tolist()
    for i, b in enumerate(bits):
        j = i + b % ((n - i) & 0xFFFFFFFF)
        p[i], p[j] = p[j], p[i]
    return np.asarray(p, np.int64)


@register_kernel("StatelessShuffle")
def stateless_shuffle(T):
    from rill.exec.kernels.stateless_random_kernels import _alg, _split

    def compute(value, key, counter, alg):
        _alg(alg)
        value = np.asarray(value)
        if value.ndim == 0 or value.size <= 1 or value.shape[0] <= 1:
            return value.copy()
        return value[shuffle_permutation(value.shape[0], _split(key, counter))]

    return compute


# -- StatelessRandomPoisson ----------------------------------------------------------------------
# Output element o (rate-major: o = rate_index * samples_per_rate + sample) reads its own stretch
# of the stream, 256 Philox calls after element o - 1's, two doubles per call taken last first.
# The arithmetic is in double whatever the types: below rate 10 Knuth's product of uniforms;
# from 10 on Hormann's transformed rejection (PTRS) with his constants.

_RESERVED_PER_OUTPUT = 256


def _libm_lgamma():
    import ctypes
    import ctypes.util
    import math

    try:
        f = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6").lgamma
        f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
        return f
    except (OSError, AttributeError):
        return math.lgamma


_lgamma = _libm_lgamma()


class _OutputUniforms:
    """The doubles of one output's stretch, in TensorFlow's order (second of a call first)."""

    def __init__(self, key, base, index: int, first: np.ndarray):
        self.key, self.base, self.index = key, base, index
        self.vals, self.calls = first, len(first) // 2

    def __iter__(self):
        i = 0
        while True:
            if i >= len(self.vals):
                more = random_bits(None, self.calls, (self.key, _shifted(
                    self.base, self.index * _RESERVED_PER_OUTPUT + self.calls)))  # fmt: skip
                self.vals = np.concatenate([self.vals, _doubles_last_first(more)])
                self.calls *= 2
            yield float(self.vals[i])
            i += 1


def _doubles_last_first(bits: np.ndarray) -> np.ndarray:
    d = _uint64_to_double(bits[:, [0, 2]].reshape(-1), bits[:, [1, 3]].reshape(-1))
    return d.reshape(-1, 2)[:, ::-1].reshape(-1)


def _first_uniforms(key, base, n_outputs: int, calls: int) -> np.ndarray:
    """[n_outputs, 2 * calls] doubles: the first calls Philox calls of each output's stretch."""
    start = np.uint64(base[0] | (base[1] << 32))
    offs = np.arange(n_outputs, dtype=np.uint64)[:, None] * np.uint64(_RESERVED_PER_OUTPUT)
    low = (start + offs + np.arange(calls, dtype=np.uint64)).reshape(-1)
    from rill.exec.kernels.stateless_random_kernels import _LO, philox

    ctr = np.stack([low & _LO, low >> np.uint64(32), np.full(low.size, base[2], np.uint64),
                    np.full(low.size, base[3], np.uint64)], axis=1).astype(np.uint32)  # fmt: skip
    return _doubles_last_first(philox(ctr, key)).reshape(n_outputs, 2 * calls)


def _poisson_one(rate: float, u, highest: float) -> float:
    import math

    if rate < 10:
        limit, prod, x = math.exp(-rate), 1.0, 0.0
        for v in u:
            prod *= v
            if prod <= limit and x <= highest:
                return x
            x += 1.0
    log_rate = math.log(rate)
    b = 0.931 + 2.53 * math.sqrt(rate)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    it = iter(u)
    while True:
        us = next(it) - 0.5
        v = next(it)
        shifted = 0.5 - abs(us)
        k = math.floor((2.0 * a / shifted + b) * us + rate + 0.43)
        if k > highest:
            continue
        if shifted >= 0.07 and v <= 0.9277 - 3.6224 / (b - 2.0):
            return k
        if k < 0 or (shifted < 0.013 and v > shifted):
            continue
        s = math.log(v * inv_alpha / (a / (shifted * shifted) + b))
        t = -rate + k * log_rate - _lgamma(k + 1.0)
        if s <= t:
            return k


def poisson(shape, seed, lam, out_dtype) -> np.ndarray:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    lam = np.asarray(lam)
    if len(dims) < lam.ndim or (lam.ndim and dims[len(dims) - lam.ndim :] != lam.shape):
        raise InvalidArgumentError(
            f"Shape passed in must end with broadcasted shape: shape {list(dims)}, lam has "
            f"shape {list(lam.shape)}"
        )
    out_dtype = np.dtype(out_dtype)
    total = int(np.prod(dims, dtype=np.int64))
    n_rate = max(lam.size, 1)
    out = np.empty((total // n_rate if lam.size else 0, n_rate), out_dtype)
    if total == 0 or lam.size == 0:
        return out.reshape(dims)
    per_rate = total // n_rate
    highest = float(np.finfo(out_dtype).max if out_dtype.kind == "f" else np.iinfo(out_dtype).max)
    key, base = key_counter(seed)
    rates = lam.reshape(-1).astype(np.float64)
    first = _first_uniforms(key, base, total, 4)
    for o in range(total):
        r, smp = divmod(o, per_rate)
        u = _OutputUniforms(key, base, o, first[o])
        out[smp, r] = _poisson_one(float(rates[r]), iter(u), highest)
    return out.reshape(dims)


@register_kernel("StatelessRandomPoisson")
def stateless_random_poisson(Rtype, dtype, T, Tseed):
    def compute(shape, seed, lam):
        return poisson(shape, seed, lam, dtype.np)

    return compute


# -- StatelessRandomGammaV2 / V3 -----------------------------------------------------------------
# Each output on its own 256-call stretch, in double: alpha == 1 is -log1p(-u) of the second
# double of the first call; otherwise Marsaglia and Tsang's squeeze-and-reject on a normal
# buffer and a uniform buffer (each refilled by one Philox call, read last value first), with
# alpha < 1 boosted (d = alpha + 2/3, times u ** (1 / alpha)).


class _Buffered:
    def __init__(self, draw, s: _Stream):
        self.draw, self.s, self.vals = draw, s, []

    def __call__(self) -> float:
        if not self.vals:
            self.vals = self.draw(self.s)
        return self.vals.pop()


def _gamma_one(alpha: float, s: _Stream, m: _Math) -> float:
    import math

    if alpha == 1.0:
        return -math.log1p(-m.uniform(s)[1])
    normal, uniform = _Buffered(m.normal, s), _Buffered(m.uniform, s)
    small = alpha < 1.0
    d = alpha + (2.0 / 3 if small else -1.0 / 3)
    c = 1.0 / 3 / math.sqrt(d)
    while True:
        x = normal()
        v = 1 + c * x
        if v <= 0:
            continue
        v = v * v * v
        u = uniform()
        if u < 1 - 0.0331 * (x * x) * (x * x) or math.log(u) < 0.5 * x * x + d * (
            1 - v + math.log(v)
        ):
            res = d * v
            if small:
                res *= math.pow(uniform(), 1 / alpha)
            return res


def gamma(shape, alpha, out_dtype, kc) -> np.ndarray:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    alpha = np.asarray(alpha)
    if len(dims) < alpha.ndim or (alpha.ndim and dims[len(dims) - alpha.ndim :] != alpha.shape):
        raise InvalidArgumentError(
            f"Shape passed in must end with broadcasted shape: shape {list(dims)}, alpha has "
            f"shape {list(alpha.shape)}"
        )
    total = int(np.prod(dims, dtype=np.int64))
    if total and alpha.size == 0:
        raise InvalidArgumentError("Input alpha should have non-zero element count, got: 0")
    out = np.empty((total // max(alpha.size, 1), max(alpha.size, 1)), out_dtype)
    if total == 0:
        return out.reshape(dims)
    per_alpha = total // alpha.size
    key, base = kc
    m = _Math(np.float64)
    alphas = alpha.reshape(-1).astype(np.float64)
    first = first_calls(key, base, total, _RESERVED_PER_OUTPUT, 2)
    for o in range(total):
        a, smp = divmod(o, per_alpha)
        s = _Stream(key, _shifted(base, o * _RESERVED_PER_OUTPUT), chunk=4, first=first[o])
        out[smp, a] = _gamma_one(float(alphas[a]), s, m)
    return out.reshape(dims)


@register_kernel("StatelessRandomGammaV2")
def stateless_random_gamma_v2(dtype, T, Tseed):
    def compute(shape, seed, alpha):
        return gamma(shape, alpha, dtype.np, key_counter(seed))

    return compute


@register_kernel("StatelessRandomGammaV3")
def stateless_random_gamma_v3(dtype, shape_dtype):
    from rill.exec.kernels.stateless_random_kernels import _alg, _split

    def compute(shape, key, counter, alg, alpha):
        _alg(alg)
        return gamma(shape, alpha, dtype.np, _split(key, counter))

    return compute
