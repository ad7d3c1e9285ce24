"""The candidate samplers: draw frequencies against each distribution's formula, expected counts
(num_sampled·p, or 1 - (1 - p)^tries for unique draws), seeds, learned counts, fixed unigrams
(distortion, reserved ids, shards, vocabulary files); ComputeAccidentalHits against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError

TRUE = np.array([[1, 3], [0, 7]], np.int64)


def log_uniform_p(k, n):
    return (np.log(k + 2.0) - np.log(k + 1.0)) / np.log(n + 1.0)


def run(sampler, *args, runs: int = 1, **kw):
    with rg.Graph().as_default():
        out = sampler(rg.constant(TRUE), 2, *args, **kw)
        s = Session()
        return [s.run(list(out)) for _ in range(runs)]


def frequencies(draws, n):
    return np.bincount(np.concatenate(draws), minlength=n) / sum(len(d) for d in draws)


@pytest.mark.parametrize(
    "sampler,p",
    [
        (rg.uniform_candidate_sampler, lambda k: np.full(k.shape, 1 / 20)),
        (rg.log_uniform_candidate_sampler, lambda k: log_uniform_p(k, 20)),
    ],
)
def test_draws_follow_the_distribution_and_expected_counts_are_n_p(sampler, p):
    [(sampled, true_q, sampled_q)] = run(sampler, 40000, False, 20, seed=3)
    k = np.arange(20)
    np.testing.assert_allclose(frequencies([sampled], 20), p(k), atol=0.006)
    np.testing.assert_allclose(true_q, 40000 * p(TRUE), rtol=1e-6)
    np.testing.assert_allclose(sampled_q, 40000 * p(sampled), rtol=1e-6)


def test_unique_draws_and_their_expected_counts():
    [(sampled, true_q, sampled_q)] = run(rg.log_uniform_candidate_sampler, 8, True, 30, seed=9)
    assert len(set(sampled.tolist())) == 8 and sampled.min() >= 0 and sampled.max() < 30
    # All expected counts come from one number of tries: 1 - (1 - p)^tries.
    p = log_uniform_p(sampled, 30)
    tries = np.log1p(-sampled_q.astype(np.float64)) / np.log1p(-p)
    assert np.allclose(tries, tries[0], rtol=1e-4) and tries[0] >= 8
    np.testing.assert_allclose(
        true_q, -np.expm1(round(tries[0]) * np.log1p(-log_uniform_p(TRUE, 30))), rtol=1e-5
    )


def test_seeds():
    a = run(rg.uniform_candidate_sampler, 6, True, 1000, seed=4, runs=2)
    b = run(rg.uniform_candidate_sampler, 6, True, 1000, seed=4, runs=2)
    c = run(rg.uniform_candidate_sampler, 6, True, 1000, seed=5)
    assert [r[0].tolist() for r in a] == [r[0].tolist() for r in b]  # same seed, same stream
    assert a[0][0].tolist() != a[1][0].tolist()  # the stream goes on between runs
    assert a[0][0].tolist() != c[0][0].tolist()


def test_learned_unigram_learns_the_true_classes():
    runs = run(rg.learned_unigram_candidate_sampler, 2000, False, 10, seed=1, runs=30)
    # After n runs, class k has count 1 + n·(times k is in TRUE); the last run samples by that.
    counts = np.ones(10)
    np.add.at(counts, TRUE.reshape(-1), 29)
    p = counts / counts.sum()
    sampled, true_q, _ = runs[-1]
    np.testing.assert_allclose(true_q, 2000 * p[TRUE], rtol=1e-5)
    np.testing.assert_allclose(frequencies([sampled], 10), p, atol=0.03)
    np.testing.assert_allclose(runs[0][1], 2000 * np.full(TRUE.shape, 0.1), rtol=1e-6)


def test_fixed_unigram_distortion_reserved_ids_and_shards(tmp_path):
    unigrams = [5.0, 1.0, 2.0, 8.0, 0.5, 3.0, 1.0]
    [(sampled, true_q, _)] = run(
        rg.fixed_unigram_candidate_sampler, 30000, False, 9, unigrams=unigrams, distortion=0.5,
        num_reserved_ids=2, seed=2,
    )  # fmt: skip
    w = np.concatenate([[0, 0], np.sqrt(unigrams)])
    np.testing.assert_allclose(frequencies([sampled], 9), w / w.sum(), atol=0.01)
    np.testing.assert_allclose(true_q, 30000 * (w / w.sum())[TRUE], rtol=1e-5)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"w{i},{c}\n" for i, c in enumerate(unigrams + [4.0])))
    [(sampled, _, _)] = run(
        rg.fixed_unigram_candidate_sampler, 3000, False, 8, vocab_file=str(vocab),
        num_shards=2, shard=1, seed=2,
    )  # fmt: skip
    assert set(sampled.tolist()) <= {1, 3, 5, 7}


def test_errors():
    with rg.Graph().as_default():
        with pytest.raises(ValueError, match="cannot draw 12 distinct candidates"):
            rg.uniform_candidate_sampler(rg.constant(TRUE), 2, 12, True, 10)
        with pytest.raises(ValueError, match="3 columns, but num_true is 2"):
            rg.uniform_candidate_sampler(rg.constant(np.zeros((2, 3), np.int64)), 2, 3, True, 10)
        s = rg.fixed_unigram_candidate_sampler(rg.constant(TRUE), 2, 3, True, 10, unigrams=[1.0])
        with pytest.raises(InvalidArgumentError, match="1 unigram counts .* must equal range_max"):
            Session().run(s.sampled_candidates)
        s = rg.log_uniform_candidate_sampler(rg.constant(TRUE), 2, 3, True, 5)
        with pytest.raises(InvalidArgumentError, match=r"true_classes\[1,1\] = 7 is not in"):
            Session().run(s.sampled_candidates)


@pytest.mark.parametrize("num_true", [1, 3])
def test_compute_accidental_hits(num_true):
    rng = np.random.default_rng(num_true)
    true = rng.integers(0, 6, (4, num_true))
    sampled = rng.integers(0, 6, 7)
    with rg.Graph().as_default():
        out = rg.compute_accidental_hits(true, sampled, num_true=num_true)
        rows, ids, weights = Session().run(list(out))
    want = [(i, j) for i in range(4) for v in true[i] for j in range(7) if sampled[j] == v]
    assert list(zip(rows.tolist(), ids.tolist())) == want
    assert rows.dtype == np.int32 and ids.dtype == np.int64
    assert np.all(weights == -np.finfo(np.float32).max)
