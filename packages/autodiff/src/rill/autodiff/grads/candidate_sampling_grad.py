"""The candidate samplers and ComputeAccidentalHits have no gradient: their outputs are drawn
ids and expected counts, which the sampled losses treat as constants (stop_gradient)."""

from rill.autodiff.registry import not_differentiable

not_differentiable(
    "UniformCandidateSampler",
    "LogUniformCandidateSampler",
    "LearnedUnigramCandidateSampler",
    "FixedUnigramCandidateSampler",
    "ComputeAccidentalHits",
)
