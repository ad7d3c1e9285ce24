"""TensorFlow-1 summary ops: ScalarSummary, HistogramSummary, MergeSummary. Each outputs a
serialized Summary protocol buffer (a scalar string) that TensorBoard reads.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     s = scalar_summary("loss", rg.constant(0.5))
...     h = histogram_summary("w", rg.placeholder(rg.float32, [None]))
...     m = merge_summary([s, h])
>>> m.op.type, m.dtype, m.shape
('MergeSummary', rill.string, TensorShape([]))
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["scalar_summary", "histogram_summary", "merge_summary"]

_T = ("T: {float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, "
      "uint32, uint64}")  # fmt: skip


def _scalar_out(op):
    return [TensorShape([])]


def _scalar_summary_shape(op):
    tags, values = op._inputs[0].shape, op._inputs[1].shape
    if not tags.is_compatible_with(values):
        raise ValueError(f"tags and values must have the same shape, got {tags} and {values}")
    return [TensorShape([])]


defop("ScalarSummary", inputs=["tags: string", "values: T"], outputs=["summary: string"],
      attrs=[_T], shape=_scalar_summary_shape,
      doc="A Summary with one simple_value per element of values, under the matching tag.")  # fmt: skip
defop("HistogramSummary", inputs=["tag: string", "values: T"], outputs=["summary: string"],
      attrs=[_T + " = float32"], shape=_scalar_out,
      doc="A Summary with the histogram of values (TensorFlow's exponential buckets).")  # fmt: skip
defop("MergeSummary", inputs=["inputs: N * string"], outputs=["summary: string"],
      attrs=["N: int >= 1"], shape=_scalar_out,
      doc="The values of several Summary protos in one; a tag may appear once.")  # fmt: skip


def _op(op_type, inputs, name=None) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, name=name or op_type).outputs[0]


def scalar_summary(tags, values, name=None) -> Tensor:
    tags = convert_to_tensor(tags, dtype=dtypes.string, name="tags")
    return _op("ScalarSummary", [tags, values], name)


def histogram_summary(tag, values, name=None) -> Tensor:
    tag = convert_to_tensor(tag, dtype=dtypes.string, name="tag")
    return _op("HistogramSummary", [tag, values], name)


def merge_summary(inputs, name=None) -> Tensor:
    return _op("MergeSummary", [list(inputs)], name)
