"""The summary ops (TensorFlow's logging_ops summaries): each produces a serialized `Summary`
protocol buffer (rill/graph/proto/summary.proto, wire-compatible with TensorFlow's) as a string
scalar. `rill.train.summary` builds TensorFlow-1's `tf.summary` API on them.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     s = rg.scalar_summary("loss", rg.constant(0.5))
...     s, rg.merge_summary([s]).op.type
(<Tensor 'ScalarSummary:0' string[]>, 'MergeSummary')
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = [
    "scalar_summary",
    "histogram_summary",
    "image_summary",
    "audio_summary",
    "tensor_summary",
    "merge_summary",
]

_REAL = "{float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, uint32, uint64}"


def _scalar_out(op):
    return [TensorShape([])]


def _image_shape(op):
    t = op.inputs[1].shape
    if t.rank is not None and t.rank != 4:
        raise ValueError(
            f"ImageSummary's tensor must be 4-D [batch, height, width, channels], got {t}"
        )
    return [TensorShape([])]


defop(
    "ScalarSummary",
    inputs=["tags: string", "values: T"],
    outputs=["summary: string"],
    attrs=[f"T: {_REAL}"],
    shape=_scalar_out,
    doc="A Summary of simple_value entries, one per element of `tags` and `values`.",
)
defop(
    "HistogramSummary",
    inputs=["tag: string", "values: T"],
    outputs=["summary: string"],
    attrs=[f"T: {_REAL} = float32"],
    shape=_scalar_out,
    doc="A Summary with one histogram of `values`.",
)
defop(
    "ImageSummary",
    inputs=["tag: string", "tensor: T"],
    outputs=["summary: string"],
    attrs=[
        "max_images: int >= 1 = 3",
        "T: {uint8, float32, float16, float64} = float32",
        "bad_color: tensor",
    ],
    shape=_image_shape,
    doc="A Summary with up to `max_images` PNG images of a [batch, h, w, 1|3|4] tensor.",
)
defop(
    "AudioSummaryV2",
    inputs=["tag: string", "tensor: float32", "sample_rate: float32"],
    outputs=["summary: string"],
    attrs=["max_outputs: int >= 1 = 3"],
    shape=_scalar_out,
    doc="A Summary with up to `max_outputs` WAV clips of a [batch, frames(, channels)] tensor.",
)
defop(
    "TensorSummaryV2",
    inputs=["tag: string", "tensor: T", "serialized_summary_metadata: string"],
    outputs=["summary: string"],
    attrs=["T: type"],
    shape=_scalar_out,
    doc="A Summary holding `tensor` as a TensorProto, with plugin metadata.",
)
defop(
    "MergeSummary",
    inputs=["inputs: N * string"],
    outputs=["summary: string"],
    attrs=["N: int >= 1"],
    shape=_scalar_out,
    doc="The union of the values of several serialized Summary protocol buffers.",
)

# TensorFlow's ImageSummary default: opaque red for non-finite pixels of float images.
_BAD_COLOR = np.array([255, 0, 0, 255], np.uint8)


def _op(op_type, inputs, attrs, name) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name).outputs[0]


def scalar_summary(tags, values, name: str | None = None) -> Tensor:
    """The ScalarSummary op: tags and values of the same shape."""
    return _op("ScalarSummary", [convert_to_tensor(tags, dtypes.string), values], {}, name)


def histogram_summary(tag, values, name: str | None = None) -> Tensor:
    """The HistogramSummary op."""
    return _op("HistogramSummary", [convert_to_tensor(tag, dtypes.string), values], {}, name)


def image_summary(tag, tensor, max_images: int = 3, bad_color=None, name=None) -> Tensor:
    """The ImageSummary op."""
    color = _BAD_COLOR if bad_color is None else np.asarray(bad_color, np.uint8)
    attrs = {"max_images": int(max_images), "bad_color": color}
    return _op("ImageSummary", [convert_to_tensor(tag, dtypes.string), tensor], attrs, name)


def audio_summary(tag, tensor, sample_rate, max_outputs: int = 3, name=None) -> Tensor:
    """The AudioSummaryV2 op."""
    rate = convert_to_tensor(sample_rate, dtypes.float32)
    inputs = [convert_to_tensor(tag, dtypes.string), tensor, rate]
    return _op("AudioSummaryV2", inputs, {"max_outputs": int(max_outputs)}, name)


def tensor_summary(tag, tensor, serialized_summary_metadata: bytes = b"", name=None) -> Tensor:
    """The TensorSummaryV2 op."""
    meta = convert_to_tensor(np.array(serialized_summary_metadata, dtype=object), dtypes.string)
    inputs = [convert_to_tensor(tag, dtypes.string), tensor, meta]
    return _op("TensorSummaryV2", inputs, {}, name)


def merge_summary(inputs, name: str | None = None) -> Tensor:
    """The MergeSummary op over serialized Summary string tensors."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("merge_summary needs at least one summary tensor")
    return _op("MergeSummary", [inputs], {}, name)
