"""Candidate samplers for sampled losses (TensorFlow's candidate_sampling ops): each draws
`num_sampled` class ids from a distribution over `[0, range_max)` and returns them with the
expected number of times each true and each sampled class is drawn (the Q of the sampled
softmax and NCE formulas), plus ComputeAccidentalHits.

- UniformCandidateSampler: P(k) = 1 / range_max;
- LogUniformCandidateSampler (Zipfian): P(k) = log((k + 2) / (k + 1)) / log(range_max + 1);
- LearnedUnigramCandidateSampler: P(k) proportional to how often k appeared in true_classes in
  earlier runs of the op (each count starts at 1 in rill);
- FixedUnigramCandidateSampler: P(k) proportional to `unigrams[k] ** distortion` (or counts
  read from `vocab_file`, one "word,count" line per id), after `num_reserved_ids` ids of weight
  0; with `num_shards` > 1 only the ids `k % num_shards == shard` are drawn.

With `unique`, draws repeat until num_sampled distinct ids are found, and the expected count of
an id drawn with probability p in n tries is `1 - (1 - p) ** n`; without it, `num_sampled · p`.
Seeds follow TensorFlow 1 (`get_seed`): (0, 0) draws from fresh entropy.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     s = log_uniform_candidate_sampler([[1], [5]], 1, 4, True, 100, seed=3)
...     [t.shape for t in s]
[TensorShape([4]), TensorShape([2, 1]), TensorShape([4])]
"""

from __future__ import annotations

from typing import NamedTuple

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.random_ops import get_seed
from rill.graph.shapes import TensorShape, unknown_shape

__all__ = [
    "compute_accidental_hits",
    "fixed_unigram_candidate_sampler",
    "learned_unigram_candidate_sampler",
    "log_uniform_candidate_sampler",
    "uniform_candidate_sampler",
]

_COMMON = [
    "num_true: int >= 1",
    "num_sampled: int >= 1",
    "unique: bool",
    "range_max: int >= 1",
]
_SEEDS = ["seed: int = 0", "seed2: int = 0"]
_OUTPUTS = [
    "sampled_candidates: int64",
    "true_expected_count: float",
    "sampled_expected_count: float",
]


def _sampler_shape(op):
    true = op._inputs[0].shape
    num_true, num_sampled = op.attrs["num_true"], op.attrs["num_sampled"]
    if true.rank is not None and true.rank != 2:
        raise ValueError(f"true_classes must be a matrix [batch, num_true], got shape {true}")
    if true.rank == 2 and true.dims[1] is not None and true.dims[1] != num_true:
        raise ValueError(f"true_classes has {true.dims[1]} columns, but num_true is {num_true}")
    if op.attrs["unique"] and num_sampled > op.attrs["range_max"]:
        raise ValueError(
            f"cannot draw {num_sampled} distinct candidates from range_max="
            f"{op.attrs['range_max']} classes (unique=True)"
        )
    batch = true.dims[0] if true.rank == 2 else None
    return [
        TensorShape([num_sampled]),
        TensorShape([batch, num_true]),
        TensorShape([num_sampled]),
    ]


for _name, _doc in (
    ("UniformCandidateSampler", "Draws candidate classes uniformly from [0, range_max)."),
    ("LogUniformCandidateSampler", "Draws candidate classes from a log-uniform (Zipf) law."),
    ("LearnedUnigramCandidateSampler", "Draws candidates by the frequencies of seen classes."),
):
    defop(
        _name,
        inputs=["true_classes: int64"],
        outputs=_OUTPUTS,
        attrs=[*_COMMON, *_SEEDS],
        shape=_sampler_shape,
        stateful=True,
        doc=_doc,
    )

defop(
    "FixedUnigramCandidateSampler",
    inputs=["true_classes: int64"],
    outputs=_OUTPUTS,
    attrs=[
        *_COMMON,
        "vocab_file: string = ''",
        "distortion: float = 1.0",
        "num_reserved_ids: int = 0",
        "num_shards: int >= 1 = 1",
        "shard: int >= 0 = 0",
        "unigrams: list(float) = []",
        *_SEEDS,
    ],
    shape=_sampler_shape,
    stateful=True,
    doc="Draws candidate classes by fixed unigram weights (a list, or a vocabulary file).",
)

defop(
    "ComputeAccidentalHits",
    inputs=["true_classes: int64", "sampled_candidates: int64"],
    outputs=["indices: int32", "ids: int64", "weights: float"],
    attrs=["num_true: int", *_SEEDS],
    shape=lambda op: [unknown_shape(1)] * 3,
    doc="The (row, sampled position) pairs where a sampled candidate is one of the row's true "
    "classes, each with weight -FLT_MAX (to remove it from the logits).",
)


class CandidateSample(NamedTuple):
    sampled_candidates: Tensor
    true_expected_count: Tensor
    sampled_expected_count: Tensor


def _sampler(op_type, true_classes, num_true, num_sampled, unique, range_max, seed, name,
             **attrs) -> CandidateSample:  # fmt: skip
    seed1, seed2 = (s or 0 for s in get_seed(seed))
    true_classes = convert_to_tensor(true_classes, dtypes.int64, name="true_classes")
    attrs.update(num_true=num_true, num_sampled=num_sampled, unique=unique, range_max=range_max,
                 seed=seed1, seed2=seed2)  # fmt: skip
    op = get_default_graph().create_op(op_type, [true_classes], attrs, name=name or op_type)
    return CandidateSample(*op.outputs)


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None,
                              name=None) -> CandidateSample:  # fmt: skip
    """num_sampled ids drawn uniformly from [0, range_max) (UniformCandidateSampler)."""
    return _sampler("UniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name)  # fmt: skip


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None) -> CandidateSample:  # fmt: skip
    """num_sampled ids drawn from the log-uniform law (LogUniformCandidateSampler): ids are
    expected sorted by decreasing frequency, as in a vocabulary."""
    return _sampler("LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name)  # fmt: skip


def learned_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                      seed=None, name=None) -> CandidateSample:  # fmt: skip
    """num_sampled ids drawn by the frequencies of the true classes seen so far."""
    return _sampler("LearnedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                    unique, range_max, seed, name)  # fmt: skip


def fixed_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                    vocab_file="", distortion=1.0, num_reserved_ids=0,
                                    num_shards=1, shard=0, unigrams=(), seed=None,
                                    name=None) -> CandidateSample:  # fmt: skip
    """num_sampled ids drawn by fixed weights `unigrams` (or `vocab_file`) ** distortion."""
    return _sampler(
        "FixedUnigramCandidateSampler", true_classes, num_true, num_sampled, unique, range_max,
        seed, name, vocab_file=vocab_file, distortion=float(distortion),
        num_reserved_ids=num_reserved_ids, num_shards=num_shards, shard=shard,
        unigrams=[float(u) for u in unigrams],
    )  # fmt: skip


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """(indices, ids, weights): for each row i and sampled position j where sampled[j] is one
    of row i's true classes, (i, j, -FLT_MAX)."""
    seed1, seed2 = (s or 0 for s in get_seed(seed))
    g = get_default_graph()
    op = g.create_op(
        "ComputeAccidentalHits",
        [convert_to_tensor(true_classes, dtypes.int64),
         convert_to_tensor(sampled_candidates, dtypes.int64)],
        {"num_true": num_true, "seed": seed1, "seed2": seed2},
        name=name or "ComputeAccidentalHits",
    )  # fmt: skip
    return tuple(op.outputs)
