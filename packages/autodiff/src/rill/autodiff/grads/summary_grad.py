"""The summary ops (rill.graph.ops.summary_ops) have no gradient: they report values."""

from rill.autodiff.registry import not_differentiable

not_differentiable(
    "ScalarSummary",
    "HistogramSummary",
    "ImageSummary",
    "AudioSummaryV2",
    "TensorSummaryV2",
    "MergeSummary",
)
