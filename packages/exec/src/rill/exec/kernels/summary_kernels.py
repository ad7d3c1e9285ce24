"""Kernels for rill.graph.ops.summary_ops, producing TensorFlow's Summary protos.

Histograms use TensorFlow's default buckets: limits 1e-12·1.1^k up to 1e20 and DBL_MAX, their
negatives, and 0; a value falls in the first bucket whose limit exceeds it; runs of empty buckets
collapse into one entry (the last limit of the run), as TensorFlow's Histogram encodes them.
"""

from __future__ import annotations

import sys

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.proto import summary_pb2
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _default_limits() -> np.ndarray:
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    neg = [-x for x in reversed(pos)]
    return np.array(neg + [0.0] + pos)


_LIMITS = _default_limits()


def _str(x) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


def histogram_proto(values: np.ndarray) -> summary_pb2.HistogramProto:
    v = values.astype(np.float64).reshape(-1)
    if not np.isfinite(v).all():
        raise InvalidArgumentError("Nan in summary histogram" if np.isnan(v).any()
                                   else "Infinity in summary histogram")  # fmt: skip
    counts = np.bincount(np.searchsorted(_LIMITS, v, side="right"), minlength=len(_LIMITS))
    counts = counts[: len(_LIMITS)].astype(np.float64)
    h = summary_pb2.HistogramProto()
    h.min = float(v.min()) if v.size else sys.float_info.max
    h.max = float(v.max()) if v.size else -sys.float_info.max
    h.num = float(v.size)
    # Sequential sums, in element order, as TensorFlow's Histogram::Add accumulates them.
    h.sum = float(np.add.accumulate(v)[-1]) if v.size else 0.0
    h.sum_squares = float(np.add.accumulate(v * v)[-1]) if v.size else 0.0
    i, n = 0, len(counts)
    while i < n:
        end, count = _LIMITS[i], counts[i]
        i += 1
        if count <= 0:
            while i < n and counts[i] <= 0:
                end, count = _LIMITS[i], counts[i]
                i += 1
        h.bucket_limit.append(float(end))
        h.bucket.append(float(count))
    return h


@register_kernel("ScalarSummary")
def scalar_summary(T):
    def compute(tags, values):
        if tags.shape != values.shape:
            raise InvalidArgumentError(
                f"tags and values are not the same shape: {TensorShape(tags.shape)} != "
                f"{TensorShape(values.shape)}"
            )
        s = summary_pb2.Summary()
        for tag, v in zip(tags.reshape(-1), values.reshape(-1)):
            s.value.add(tag=_str(tag), simple_value=float(v))
        return np.asarray(s.SerializeToString(), dtype=object)

    return compute


@register_kernel("HistogramSummary")
def histogram_summary(T):
    def compute(tag, values):
        if np.ndim(tag) != 0:
            raise InvalidArgumentError("tag must be a scalar")
        s = summary_pb2.Summary()
        s.value.add(tag=_str(tag[()]), histo=histogram_proto(values))
        return np.asarray(s.SerializeToString(), dtype=object)

    return compute


@register_kernel("MergeSummary")
def merge_summary(N):
    def compute(*inputs):
        out = summary_pb2.Summary()
        seen = set()
        for x in inputs:
            for raw in np.asarray(x).reshape(-1):
                s = summary_pb2.Summary()
                try:
                    s.ParseFromString(bytes(raw))
                except Exception:
                    raise InvalidArgumentError(
                        "Could not parse one of the summary inputs"
                    ) from None
                for v in s.value:
                    if v.tag in seen:
                        raise InvalidArgumentError(f"Duplicate tag {v.tag} found in summary inputs")
                    seen.add(v.tag)
                    out.value.add().CopyFrom(v)
        return np.asarray(out.SerializeToString(), dtype=object)

    return compute
