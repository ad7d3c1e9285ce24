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
