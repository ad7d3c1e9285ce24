"""Kernels for rill.graph.ops.candidate_sampling_ops: the candidate samplers and
ComputeAccidentalHits.

Each sampler kernel owns a distribution over [0, range_max) and a numpy Generator made once from
(seed, seed2) (fresh entropy for (0, 0)), both guarded by a lock: concurrent steps share them.
The draws are not TensorFlow's (its Philox stream is not reproduced); the distributions and the
expected counts are.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError

_FLT_MAX = float(np.finfo(np.float32).max)


def _generator(seed: int, seed2: int) -> np.random.Generator:
    if seed == 0 and seed2 == 0:
        return np.random.default_rng()
    return np.random.default_rng([seed % 2**64, seed2 % 2**64])


class _Sampler:
    """A distribution over [0, range_max): draws, and the probability of given ids."""

    def __init__(self, range_max: int):
        self.range_max = range_max

    def draw(self, gen: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def probability(self, ids: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def update(self, ids: np.ndarray) -> None:
        """Learns from the true classes of a run (only the learned sampler does)."""


class _Uniform(_Sampler):
    def draw(self, gen, n):
        return gen.integers(0, self.range_max, size=n, dtype=np.int64)

    def probability(self, ids):
        return np.full(ids.shape, 1.0 / self.range_max)


class _LogUniform(_Sampler):
    def __init__(self, range_max: int):
        super().__init__(range_max)
        self.log_range = math.log(range_max + 1)

    def draw(self, gen, n):
        # exp(u·log(range+1)) lies in [k + 1, k + 2) with probability P(k).
        k = np.floor(np.exp(gen.random(n) * self.log_range)).astype(np.int64) - 1
        return np.clip(k, 0, self.range_max - 1)

    def probability(self, ids):
        ids = ids.astype(np.float64)
        return (np.log(ids + 2.0) - np.log(ids + 1.0)) / self.log_range


class _Weighted(_Sampler):
    """P(k) = weights[k] / sum(weights)."""

    def __init__(self, weights: np.ndarray):
        super().__init__(len(weights))
        self.weights = np.asarray(weights, np.float64)
        self._refresh()

    def _refresh(self) -> None:
        self.total = float(self.weights.sum())
        self.cdf = np.cumsum(self.weights) / self.total

    def draw(self, gen, n):
        k = np.searchsorted(self.cdf, gen.random(n) * self.cdf[-1], side="right")
        return np.minimum(k, self.range_max - 1).astype(np.int64)

    def probability(self, ids):
        return self.weights[ids] / self.total


class _Learned(_Weighted):
    def __init__(self, range_max: int):
        # Every count starts at one, so the first run draws uniformly.
        super().__init__(np.ones(range_max))

    def update(self, ids):
        np.add.at(self.weights, ids.reshape(-1), 1.0)
        self._refresh()


def _check_classes(true_classes: np.ndarray, num_true: int, range_max: int) -> None:
    if true_classes.ndim != 2 or true_classes.shape[1] != num_true:
        raise InvalidArgumentError(
            f"true_classes must be a matrix [batch, num_true={num_true}], got shape "
            f"{list(true_classes.shape)}"
        )
    bad = (true_classes < 0) | (true_classes >= range_max)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InvalidArgumentError(
            f"true_classes[{i},{j}] = {int(true_classes[i, j])} is not in [0, {range_max})"
        )


def _sampler_compute(sampler: _Sampler, num_true, num_sampled, unique, seed, seed2):
    """The compute function of a sampler kernel."""
    gen = _generator(seed, seed2)
    lock = threading.Lock()
    range_max = sampler.range_max
    if unique and num_sampled > range_max:
        raise InvalidArgumentError(
            f"cannot draw {num_sampled} distinct candidates from range_max={range_max}"
        )

    def compute(true_classes):
        _check_classes(true_classes, num_true, range_max)
        with lock:
            if unique:
                sampled, tries = _draw_unique(sampler, gen, num_sampled)
            else:
                sampled, tries = sampler.draw(gen, num_sampled), num_sampled
            true_p = sampler.probability(true_classes)
            sampled_p = sampler.probability(sampled)
            sampler.update(true_classes)
        return [sampled, _expected(true_p, tries, unique), _expected(sampled_p, tries, unique)]

    return compute


def _draw_unique(sampler: _Sampler, gen, n: int) -> tuple[np.ndarray, int]:
    """n distinct ids in the order first drawn, and how many draws that took."""
    seen: dict[int, None] = {}
    tries = 0
    while len(seen) < n:
        for v in sampler.draw(gen, max(2 * (n - len(seen)), 16)).tolist():
            tries += 1
            if v not in seen:
                seen[v] = None
                if len(seen) == n:
                    break
    return np.fromiter(seen, np.int64, n), tries


def _expected(p: np.ndarray, tries: int, unique: bool) -> np.ndarray:
    """The expected number of times an id of probability p is drawn: num_sampled·p, or with
    unique draws 1 - (1 - p)^tries (drawn at least once in `tries` draws)."""
    if not unique:
        return (p * tries).astype(np.float32)
    return (-np.expm1(tries * np.log1p(-np.minimum(p, 1.0 - 1e-16)))).astype(np.float32)


@register_kernel("UniformCandidateSampler")
def uniform_candidate_sampler(num_true, num_sampled, unique, range_max, seed, seed2):
    return _sampler_compute(_Uniform(range_max), num_true, num_sampled, unique, seed, seed2)


@register_kernel("LogUniformCandidateSampler")
def log_uniform_candidate_sampler(num_true, num_sampled, unique, range_max, seed, seed2):
    return _sampler_compute(_LogUniform(range_max), num_true, num_sampled, unique, seed, seed2)


@register_kernel("LearnedUnigramCandidateSampler")
def learned_unigram_candidate_sampler(num_true, num_sampled, unique, range_max, seed, seed2):
    return _sampler_compute(_Learned(range_max), num_true, num_sampled, unique, seed, seed2)


def _fixed_weights(range_max, vocab_file, distortion, num_reserved_ids, num_shards, shard,
                   unigrams) -> np.ndarray:  # fmt: skip
    if shard >= num_shards:
        raise InvalidArgumentError(f"shard {shard} must be below num_shards {num_shards}")
    if vocab_file:
        counts = []
        n = 0
        try:
            with open(vocab_file, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):  # noqa: B007 - n names the line in errors
                    if line.strip():
                        counts.append(float(line.rstrip("\n").split(",")[-1]))
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"vocab_file {vocab_file!r}, line {n}: {e}") from None
    elif unigrams:
        counts = list(unigrams)
    else:
        raise InvalidArgumentError(
            "FixedUnigramCandidateSampler needs unigrams or a vocab_file (both are empty)"
        )
    if len(counts) + num_reserved_ids != range_max:
        raise InvalidArgumentError(
            f"{len(counts)} unigram counts + {num_reserved_ids} reserved ids must equal "
            f"range_max={range_max}"
        )
    if any(c < 0 for c in counts):
        raise InvalidArgumentError("unigram counts must be non-negative")
    w = np.concatenate(
        [np.zeros(num_reserved_ids), np.power(np.asarray(counts, float), distortion)]
    )
    if num_shards > 1:
        # Only this shard's ids (k % num_shards == shard) are drawn; ids stay global.
        w[np.arange(range_max) % num_shards != shard] = 0.0
    if w.sum() <= 0:
        raise InvalidArgumentError("the unigram weights of this sampler sum to zero")
    return w


@register_kernel("FixedUnigramCandidateSampler")
def fixed_unigram_candidate_sampler(num_true, num_sampled, unique, range_max, vocab_file,
                                    distortion, num_reserved_ids, num_shards, shard, unigrams,
                                    seed, seed2):  # fmt: skip
    weights = _fixed_weights(range_max, vocab_file, distortion, num_reserved_ids, num_shards,
                             shard, unigrams)  # fmt: skip
    return _sampler_compute(_Weighted(weights), num_true, num_sampled, unique, seed, seed2)


@register_kernel("ComputeAccidentalHits")
def compute_accidental_hits(num_true):
    def compute(true_classes, sampled_candidates):
        if true_classes.ndim != 2 or true_classes.shape[1] != num_true:
            raise InvalidArgumentError(
                f"true_classes must be a matrix [batch, num_true={num_true}], got shape "
                f"{list(true_classes.shape)}"
            )
        if sampled_candidates.ndim != 1:
            raise InvalidArgumentError(
                f"sampled_candidates must be a vector, got shape {list(sampled_candidates.shape)}"
            )
        positions: dict[int, list[int]] = {}
        for j, v in enumerate(sampled_candidates.tolist()):
            positions.setdefault(v, []).append(j)
        rows, ids = [], []
        for i, row in enumerate(true_classes.tolist()):
            for v in row:
                for j in positions.get(v, ()):
                    rows.append(i)
                    ids.append(j)
        return [
            np.asarray(rows, np.int32),
            np.asarray(ids, np.int64),
            np.full(len(rows), -_FLT_MAX, np.float32),
        ]

    return compute
