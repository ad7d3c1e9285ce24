"""Kernels for rill.graph.ops.stateless_random_ops: TensorFlow's Philox4x32-10 stream.

The seed pair (s0, s1) is scrambled as TensorFlow's GenerateKey does: one Philox call on the
counter (s0, s1) under the fixed key (0x3ec8f720, 0x02461e29) gives the key (its first two
words) and the counter's upper half (its last two); the lower half starts at 0. Each call then
yields 4 uint32 values: a float32 uniform takes one (23 mantissa bits), a float64 two; normals
come from Box-Muller on pairs of uniforms (float32 for half and bfloat16, then rounded; the
float one with the C library's logf / sinf / cosf, as TensorFlow's). A
float16 / bfloat16 uniform takes the low 10 / 7 bits of one uint32 as its mantissa.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LO = np.uint64(0xFFFFFFFF)


def philox(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of each row of counters ([n, 4] uint32); returns [n, 4] uint32."""
    c = [counters[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = key
    for _ in range(10):
        p0 = _M0 * c[0]
        p1 = _M1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & _LO
        hi1, lo1 = p1 >> np.uint64(32), p1 & _LO
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
        k0 = (k0 + _W0) & 0xFFFFFFFF
        k1 = (k1 + _W1) & 0xFFFFFFFF
    return np.stack([x.astype(np.uint32) for x in c], axis=1)


def key_counter(seed) -> tuple[tuple[int, int], list[int]]:
    s = np.asarray(seed).reshape(-1)
    if s.size != 2:
        raise InvalidArgumentError(f"seed must have shape [2], not {list(np.shape(seed))}")
    s0, s1 = (int(v) & 0xFFFFFFFFFFFFFFFF for v in s)
    ctr = np.array([[s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32]], np.uint32)
    mix = philox(ctr, (0x3EC8F720, 0x02461E29))[0]
    return (int(mix[0]), int(mix[1])), [0, 0, int(mix[2]), int(mix[3])]


def random_bits(seed, n_blocks: int, key_and_counter=None) -> np.ndarray:
    """[n_blocks, 4] uint32: the Philox outputs for counters base, base + 1, ..."""
    key, base = key_and_counter or key_counter(seed)
    i = np.arange(n_blocks, dtype=np.uint64)
    low = np.uint64(base[0] | (base[1] << 32)) + i
    ctr = np.stack([low & _LO, low >> np.uint64(32),
                    np.full(n_blocks, base[2], np.uint64),
                    np.full(n_blocks, base[3], np.uint64)], axis=1).astype(np.uint32)  # fmt: skip
    return philox(ctr, key)


def _uint32_to_float(x: np.ndarray) -> np.ndarray:
    bits = (x & np.uint32(0x7FFFFF)) | np.uint32(127 << 23)
    return bits.view(np.float32) - np.float32(1.0)


def _uint64_to_double(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    man = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | x1.astype(np.uint64)
    bits = man | (np.uint64(1023) << np.uint64(52))
    return bits.view(np.float64) - 1.0


def _shape(shape) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    return dims


def _uint16_to_half(x: np.ndarray) -> np.ndarray:
    bits = ((x & np.uint32(0x3FF)) | np.uint32(15 << 10)).astype(np.uint16)
    return bits.view(np.float16) - np.float16(1.0)


def _uint16_to_bfloat16(x: np.ndarray, bf16) -> np.ndarray:
    bits = ((x & np.uint32(0x7F)) | np.uint32(127 << 7)).astype(np.uint16)
    return (bits.view(bf16).astype(np.float32) - np.float32(1.0)).astype(bf16)


def uniform(shape, seed, dtype: np.dtype, kc=None) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.float16:
        bits = random_bits(seed, -(-n // 4), kc).reshape(-1)
        return _uint16_to_half(bits)[:n].reshape(shape)
    if dtype.name == "bfloat16":
        bits = random_bits(seed, -(-n // 4), kc).reshape(-1)
        return _uint16_to_bfloat16(bits, dtype)[:n].reshape(shape)
    if dtype == np.float64:
        bits = random_bits(seed, -(-n // 2), kc).reshape(-1, 2)
        return _uint64_to_double(bits[:, 0], bits[:, 1])[:n].reshape(shape)
    bits = random_bits(seed, -(-n // 4), kc).reshape(-1)
    return _uint32_to_float(bits)[:n].astype(dtype).reshape(shape)


def normal(shape, seed, dtype: np.dtype, kc=None) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.float64:
        bits = random_bits(seed, -(-n // 2), kc).reshape(-1, 4)
        u1 = _uint64_to_double(bits[:, 0], bits[:, 1])
        u2 = _uint64_to_double(bits[:, 2], bits[:, 3])
        u1 = np.maximum(u1, 1.0e-7)
        v = 2.0 * np.pi * u2
        r = np.sqrt(-2.0 * np.log(u1))
        out = np.stack([r * np.sin(v), r * np.cos(v)], axis=1).reshape(-1)
        return out[:n].reshape(shape)
    bits = random_bits(seed, -(-n // 4), kc).reshape(-1, 2)
    out = _box_muller32(bits[:, 0], bits[:, 1]).reshape(-1)
    return out[:n].astype(dtype).reshape(shape)


@register_kernel("StatelessRandomUniform")
def stateless_random_uniform(dtype, T, Tseed):
    # half and bfloat16 take their own bits (10 and 7 mantissa bits of one uint32 each)
    def compute(shape, seed):
        return uniform(_shape(shape), seed, np.dtype(dtype.np))

    return compute


@register_kernel("StatelessRandomNormal")
def stateless_random_normal(dtype, T, Tseed):
    work = np.float64 if dtype.np == np.float64 else np.float32

    def compute(shape, seed):
        return normal(_shape(shape), seed, np.dtype(work)).astype(dtype.np)

    return compute


def _split(key, counter):
    k = int(np.asarray(key).reshape(-1)[0])
    c = [int(v) for v in np.asarray(counter).reshape(-1)[:2]]
    if len(c) < 2:
        raise InvalidArgumentError("counter must hold 2 values for Philox")
    return ((k & 0xFFFFFFFF, k >> 32),
            [c[0] & 0xFFFFFFFF, c[0] >> 32, c[1] & 0xFFFFFFFF, c[1] >> 32])  # fmt: skip


def _alg(alg):
    a = int(alg)
    if a not in (1, 3):  # Philox, and auto-select (Philox on CPU)
        raise InvalidArgumentError(f"unsupported RNG algorithm {a}; rill implements Philox (1)")


@register_kernel("StatelessRandomGetKeyCounter")
def stateless_random_get_key_counter(Tseed):
    def compute(seed):
        (k0, k1), c = key_counter(seed)
        key = np.array([k0 | (k1 << 32)], np.uint64)
        counter = np.array([c[0] | (c[1] << 32), c[2] | (c[3] << 32)], np.uint64)
        return key, counter

    return compute


@register_kernel("StatelessRandomUniformV2")
def stateless_random_uniform_v2(dtype, Tshape):
    def compute(shape, key, counter, alg):
        _alg(alg)
        return uniform(_shape(shape), None, np.dtype(dtype.np), _split(key, counter))

    return compute


@register_kernel("StatelessRandomNormalV2")
def stateless_random_normal_v2(dtype, Tshape):
    work = np.float64 if dtype.np == np.float64 else np.float32

    def compute(shape, key, counter, alg):
        _alg(alg)
        out = normal(_shape(shape), None, np.dtype(work), _split(key, counter))
        return out.astype(dtype.np)

    return compute


# -- stateful samplers with parameters ------------------------------------------------------------
# Their streams are rill's (random_kernels' seeded generators): the same seeds give the same
# numbers in rill, not TensorFlow's numbers, as for RandomUniform.


def _stream(seed, seed2):
    from rill.exec.kernels.random_kernels import _Stream

    return _Stream(seed, seed2)


def _dims(shape):
    from rill.exec.kernels.random_kernels import _shape_arg

    return _shape_arg(shape)


@register_kernel("RandomGamma")
def random_gamma(seed, seed2, S, T):
    stream = _stream(seed, seed2)

    def compute(shape, alpha):
        if (alpha <= 0).any():
            raise InvalidArgumentError("alpha must be positive")
        dims = _dims(shape)
        with stream.lock:
            out = stream.gen.gamma(alpha.astype(np.float64), size=(*dims, *alpha.shape))
        return out.astype(T.np)

    return compute


def _poisson(seed, seed2, out_dtype):
    stream = _stream(seed, seed2)

    def compute(shape, rate):
        if (rate < 0).any():
            raise InvalidArgumentError("rate must be non-negative")
        dims = _dims(shape)
        with stream.lock:
            out = stream.gen.poisson(rate.astype(np.float64), size=(*dims, *rate.shape))
        return out.astype(out_dtype.np)

    return compute


@register_kernel("RandomPoisson")
def random_poisson(seed, seed2, S, dtype):
    return _poisson(seed, seed2, dtype)


@register_kernel("RandomPoissonV2")
def random_poisson_v2(seed, seed2, S, R, dtype):
    return _poisson(seed, seed2, dtype)


@register_kernel("ParameterizedTruncatedNormal")
def parameterized_truncated_normal(seed, seed2, dtype, T):
    stream = _stream(seed, seed2)

    def compute(shape, means, stdevs, minvals, maxvals):
        dims = _dims(shape)
        if len(dims) != 2:
            raise InvalidArgumentError(f"shape must be [batch, samples], got {list(dims)}")
        batch, n = dims
        params = []
        for name, p in (("means", means), ("stdevs", stdevs), ("minvals", minvals),
                        ("maxvals", maxvals)):  # fmt: skip
            p = np.asarray(p, np.float64).reshape(-1)
            if p.size not in (1, batch):
                raise InvalidArgumentError(f"{name} must be a scalar or have {batch} values")
            params.append(np.broadcast_to(p, (batch,)))
        mu, sd, lo, hi = params
        if (lo >= hi).any():
            raise InvalidArgumentError("minvals must be below maxvals")
        out = np.empty((batch, n))
        with stream.lock:
            for b in range(batch):  # inverse-CDF sampling of the truncated normal
                from math import erf, sqrt

                a = 0.5 * (1 + erf((lo[b] - mu[b]) / (sd[b] * sqrt(2))))
                c = 0.5 * (1 + erf((hi[b] - mu[b]) / (sd[b] * sqrt(2))))
                u = stream.gen.uniform(a, c, n) if c > a else np.full(n, a)
                out[b] = mu[b] + sd[b] * np.sqrt(2) * _erfinv(2 * u - 1)
                out[b] = np.clip(out[b], lo[b], hi[b])
        return out.astype(dtype.np)

    return compute


def _erfinv(x):
    from rill.exec.kernels.special_math_kernels import erfinv

    return erfinv(x)


# -- truncated normals and integers (TensorFlow's distributions over the same stream) -------------
# A truncated normal draws a variable number of samples per output, so TensorFlow gives each
# output group (4 floats, or 2 doubles) its own stretch of the stream: group g starts 256 (floats)
# or 128 (doubles) Philox calls after group g - 1 (256 reserved samples per output) and takes uint32 values one at a time from there, Box-Muller on pairs
# (quadruples for doubles), keeping the values with |x| < 2 until the group is full.

_TRUNCATE = 2.0
_RESERVED_PER_OUTPUT = 256  # TensorFlow's kReservedSamplesPerOutput


def _skip_per_group(double: bool) -> int:
    return (2 if double else 4) * _RESERVED_PER_OUTPUT // 4  # group size x 256 / 4 per call


def _c_float_functions():
    """The C library's logf, sinf, cosf, expf (what TensorFlow's kernels call), or None where it
    cannot be loaded."""
    import ctypes
    import ctypes.util

    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        fns = {}
        for name in ("expf", "logf", "sinf", "cosf"):
            f = getattr(libm, name)
            f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
            fns[name[:-1]] = f
        return fns
    except (OSError, AttributeError):
        return None


LIBM_F = _c_float_functions()


def float_log_sin_cos(u: np.ndarray, v: np.ndarray):
    """logf(u), sinf(v), cosf(v) of float32 arrays of one shape: the compiled loop where numba
    is on, else the C library one value at a time, else (no C library) double rounded to float,
    which differs from the C library's in the last bit for about one value in a hundred."""
    from rill.exec.kernels import jit

    uf = np.ascontiguousarray(u, np.float32).reshape(-1)
    vf = np.ascontiguousarray(v, np.float32).reshape(-1)
    lp = jit.loops()
    if lp is not None:
        outs = [np.empty(uf.shape, np.float32) for _ in range(3)]
        lp.log_sin_cos32(uf, vf, *outs)
    elif LIBM_F is not None:
        lg, sn, cs = LIBM_F["log"], LIBM_F["sin"], LIBM_F["cos"]
        outs = [np.array([f(x) for x in a.tolist()], np.float32)
                for f, a in ((lg, uf), (sn, vf), (cs, vf))]  # fmt: skip
    else:
        outs = [fn(a.astype(np.float64)).astype(np.float32)
                for fn, a in ((np.log, uf), (np.sin, vf), (np.cos, vf))]  # fmt: skip
    return [o.reshape(np.shape(u)) for o in outs]


def _box_muller32(x0, x1):
    """Float Box-Muller as TensorFlow's: the angle is 2*pi (a double) times the uniform, rounded
    to float; log, sin and cos are the C library's float functions (a compiled loop calls them,
    numpy's own differ in the last bit now and then)."""
    f32 = np.float32
    u1 = np.maximum(_uint32_to_float(x0), f32(1.0e-7))
    v = (2.0 * np.pi * _uint32_to_float(x1).astype(np.float64)).astype(f32)
    log_u1, sin_v, cos_v = float_log_sin_cos(u1, v)
    r = np.sqrt(f32(-2.0) * log_u1)
    return np.stack([sin_v * r, cos_v * r], axis=-1)


def _box_muller64(x0, x1, x2, x3):
    u1 = np.maximum(_uint64_to_double(x0, x1), 1.0e-7)
    v = 2.0 * np.pi * _uint64_to_double(x2, x3)
    r = np.sqrt(-2.0 * np.log(u1))
    return np.stack([r * np.sin(v), r * np.cos(v)], axis=-1)


def _group_candidates(key, base, groups: np.ndarray, calls: int, first_call: int, double: bool):
    """Normals from Philox calls first_call .. first_call + calls - 1 of each group's stretch:
    [len(groups), calls * 2] (floats) or [len(groups), calls] (doubles), in stream order."""
    start = np.uint64(base[0] | (base[1] << 32))
    offs = groups.astype(np.uint64)[:, None] * np.uint64(_skip_per_group(double)) + np.arange(
        first_call, first_call + calls, dtype=np.uint64
    )
    low = (start + offs).reshape(-1)
    ctr = np.stack([low & _LO, low >> np.uint64(32), np.full(low.size, base[2], np.uint64),
                    np.full(low.size, base[3], np.uint64)], axis=1).astype(np.uint32)  # fmt: skip
    bits = philox(ctr, key).reshape(len(groups), calls * 4)
    if double:
        b = bits.reshape(len(groups), calls, 4)
        return _box_muller64(b[..., 0], b[..., 1], b[..., 2], b[..., 3]).reshape(len(groups), -1)
    return _box_muller32(bits[:, 0::2], bits[:, 1::2]).reshape(len(groups), -1)


def truncated_normal(shape, seed, dtype: np.dtype, kc=None) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    double = dtype == np.float64
    per_group = 2 if double else 4
    key, base = kc or key_counter(seed)
    n_groups = -(-n // per_group)
    out = np.empty((n_groups, per_group), np.float64 if double else np.float32)
    todo = np.arange(n_groups)
    filled = np.zeros(n_groups, np.int64)
    call, calls = 0, 4  # four calls give 8 candidates per float group; most groups need one round
    while todo.size:
        cand = _group_candidates(key, base, todo, calls, call, double)
        keep = np.abs(cand) < _TRUNCATE
        for row, g in enumerate(todo):
            vals = cand[row][keep[row]][: per_group - filled[g]]
            out[g, filled[g] : filled[g] + vals.size] = vals
            filled[g] += vals.size
        todo = todo[filled[todo] < per_group]
        call += calls  # as TensorFlow, a group that needs more reads on, past its own stretch
    return out.reshape(-1)[:n].astype(dtype).reshape(shape)


@register_kernel("StatelessTruncatedNormal")
def stateless_truncated_normal(dtype, T, Tseed):
    def compute(shape, seed):
        return truncated_normal(_shape(shape), seed, np.dtype(dtype.np))

    return compute


@register_kernel("StatelessTruncatedNormalV2")
def stateless_truncated_normal_v2(dtype, Tshape):
    def compute(shape, key, counter, alg):
        _alg(alg)
        return truncated_normal(_shape(shape), None, np.dtype(dtype.np), _split(key, counter))

    return compute


def _raw_ints(shape, seed, dtype: np.dtype, kc=None) -> np.ndarray:
    """uint32 (4-byte dtypes) or uint64 (two words, low first) values of the stream."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.itemsize == 4:
        return random_bits(seed, -(-n // 4), kc).reshape(-1)[:n]
    bits = random_bits(seed, -(-n // 2), kc).reshape(-1, 2).astype(np.uint64)
    return (bits[:, 0] | (bits[:, 1] << np.uint64(32)))[:n]


def uniform_int(shape, seed, lo, hi, dtype: np.dtype, kc=None) -> np.ndarray:
    lo_v, hi_v = np.asarray(lo), np.asarray(hi)
    if lo_v.ndim or hi_v.ndim:
        raise InvalidArgumentError(
            f"minval and maxval must be scalars, got shapes {list(lo_v.shape)} and "
            f"{list(hi_v.shape)}"
        )
    if not int(lo_v) < int(hi_v):
        raise InvalidArgumentError(f"Need minval < maxval: {int(lo_v)} >= {int(hi_v)}")
    bits = _raw_ints(shape, seed, dtype, kc)
    wide = np.uint64 if dtype.itemsize == 8 else np.uint32
    span = wide(
        (int(hi_v) - int(lo_v)) & (0xFFFFFFFFFFFFFFFF if dtype.itemsize == 8 else 0xFFFFFFFF)
    )
    low = np.asarray(lo_v.astype(dtype)).view(wide) if dtype.kind == "i" else wide(int(lo_v))
    # TensorFlow adds in the unsigned type (wrapping), then reads the result as dtype
    return (
        (np.asarray(low, wide) + bits.astype(wide) % span).astype(wide).view(dtype).reshape(shape)
    )


def uniform_full_int(shape, seed, dtype: np.dtype, kc=None) -> np.ndarray:
    return _raw_ints(shape, seed, dtype, kc).view(dtype).reshape(shape)


@register_kernel("StatelessRandomUniformInt")
def stateless_random_uniform_int(dtype, T, Tseed):
    def compute(shape, seed, minval, maxval):
        return uniform_int(_shape(shape), seed, minval, maxval, np.dtype(dtype.np))

    return compute


@register_kernel("StatelessRandomUniformFullInt")
def stateless_random_uniform_full_int(dtype, T, Tseed):
    def compute(shape, seed):
        return uniform_full_int(_shape(shape), seed, np.dtype(dtype.np))

    return compute


@register_kernel("StatelessRandomUniformIntV2")
def stateless_random_uniform_int_v2(dtype, Tshape):
    def compute(shape, key, counter, alg, minval, maxval):
        _alg(alg)
        kc = _split(key, counter)
        return uniform_int(_shape(shape), None, minval, maxval, np.dtype(dtype.np), kc)

    return compute


@register_kernel("StatelessRandomUniformFullIntV2")
def stateless_random_uniform_full_int_v2(dtype, Tshape):
    def compute(shape, key, counter, alg):
        _alg(alg)
        return uniform_full_int(_shape(shape), None, np.dtype(dtype.np), _split(key, counter))

    return compute


@register_kernel("RandomGammaGrad")
def random_gamma_grad(T):
    """d sample / d alpha by implicit differentiation of the CDF: -(dP(a, x)/da) / pdf(x)."""
    from rill.exec.kernels.special_math_kernels import igamma_grad_a, lgamma

    def compute(alpha, sample):
        a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(sample, np.float64))
        with np.errstate(all="ignore"):
            log_pdf = -x + (a - 1.0) * np.log(x) - lgamma(a)
            out = -igamma_grad_a(a, x) / np.exp(log_pdf)
        return np.where(x > 0, out, 0.0).astype(T.np)

    return compute
