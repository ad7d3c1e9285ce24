"""TensorFlow 2's summary writer ops (tf.summary.create_file_writer and the summary_ops_v2
writes in a graph): a SummaryWriter resource that CreateSummaryFileWriter opens on an event file
in a log directory, and Write* ops that append one Event each, at a step.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     w = summary_writer(shared_name="logs")
...     init = create_summary_file_writer(w, "/tmp/logs")
...     op = write_scalar_summary(w, 3, "loss", rg.constant(0.5))
>>> w.dtype, op.type
(rill.resource, 'WriteScalarSummary')
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["summary_writer", "create_summary_file_writer", "flush_summary_writer",
           "close_summary_writer", "write_scalar_summary", "write_histogram_summary",
           "write_image_summary", "write_audio_summary", "write_summary",
           "write_raw_proto_summary"]  # fmt: skip


def _writer_shape(op):
    return [TensorShape([])]


def _none(op):
    return []


_REAL = ("float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, uint32, "
         "uint64")  # fmt: skip
_W = ["writer: resource", "step: int64"]

defop("SummaryWriter", outputs=["writer: resource"],
      attrs=["shared_name: string = ''", "container: string = ''"], shape=_writer_shape,
      stateful=True, doc="The handle of a summary writer (opened by CreateSummaryFileWriter).")  # fmt: skip
defop("CreateSummaryFileWriter",
      inputs=["writer: resource", "logdir: string", "max_queue: int32", "flush_millis: int32",
              "filename_suffix: string"], shape=_none, stateful=True,
      doc="Opens the writer on a new event file in logdir (created if missing); a writer "
      "already open is kept.")  # fmt: skip
defop("FlushSummaryWriter", inputs=["writer: resource"], shape=_none, stateful=True,
      doc="Writes the writer's buffered events to its file.")  # fmt: skip
defop("CloseSummaryWriter", inputs=["writer: resource"], shape=_none, stateful=True,
      doc="Flushes and closes the writer's file; the writer must be created again to write.")  # fmt: skip
defop("WriteScalarSummary", inputs=[*_W, "tag: string", "value: T"], attrs=[f"T: {{{_REAL}}}"],
      shape=_none, stateful=True, doc="An event with the scalar value as a simple_value.")  # fmt: skip
defop("WriteHistogramSummary", inputs=[*_W, "tag: string", "values: T"],
      attrs=[f"T: {{{_REAL}, bool}} = float32"], shape=_none, stateful=True,
      doc="An event with a histogram of values (HistogramSummary's buckets).")  # fmt: skip
defop("WriteImageSummary", inputs=[*_W, "tag: string", "tensor: T", "bad_color: uint8"],
      attrs=["max_images: int >= 1 = 3", "T: {uint8, float64, float32, float16} = float32"],
      shape=_none, stateful=True,
      doc="An event with up to max_images PNG images (ImageSummary's encoding).")  # fmt: skip
defop("WriteAudioSummary", inputs=[*_W, "tag: string", "tensor: float32", "sample_rate: float32"],
      attrs=["max_outputs: int >= 1 = 3"], shape=_none, stateful=True,
      doc="An event with up to max_outputs WAV clips (AudioSummaryV2's encoding).")  # fmt: skip
defop("WriteSummary", inputs=[*_W, "tensor: T", "tag: string", "summary_metadata: string"],
      attrs=["T: type"], shape=_none, stateful=True,
      doc="An event with the tensor and its SummaryMetadata (tf.summary.write).")  # fmt: skip
defop("WriteRawProtoSummary", inputs=[*_W, "tensor: string"], shape=_none, stateful=True,
      doc="An event for each serialized Summary in tensor.")  # fmt: skip


def _t(x, dtype, name):
    return convert_to_tensor(x, dtype=dtype, name=name)


def _create(op_type: str, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs or {}, name=name or op_type)


def summary_writer(shared_name: str = "", container: str = "", name=None) -> Tensor:
    return _create("SummaryWriter", [], {"shared_name": shared_name, "container": container},
                   name).outputs[0]  # fmt: skip


def create_summary_file_writer(writer, logdir, max_queue=10, flush_millis=120000,
                               filename_suffix=".v2", name=None) -> Operation:  # fmt: skip
    ins = [writer, _t(logdir, dtypes.string, "logdir"), _t(max_queue, dtypes.int32, "max_queue"),
           _t(flush_millis, dtypes.int32, "flush_millis"),
           _t(filename_suffix, dtypes.string, "filename_suffix")]  # fmt: skip
    return _create("CreateSummaryFileWriter", ins, name=name)


def flush_summary_writer(writer, name=None) -> Operation:
    return _create("FlushSummaryWriter", [writer], name=name)


def close_summary_writer(writer, name=None) -> Operation:
    return _create("CloseSummaryWriter", [writer], name=name)


def _head(writer, step, tag):
    return [writer, _t(step, dtypes.int64, "step"), _t(tag, dtypes.string, "tag")]


def write_scalar_summary(writer, step, tag, value, name=None) -> Operation:
    return _create("WriteScalarSummary", [*_head(writer, step, tag), value], name=name)


def write_histogram_summary(writer, step, tag, values, name=None) -> Operation:
    return _create("WriteHistogramSummary", [*_head(writer, step, tag), values], name=name)


def write_image_summary(writer, step, tag, tensor, bad_color=(255, 0, 0, 255), max_images=3,
                        name=None) -> Operation:  # fmt: skip
    ins = [*_head(writer, step, tag), tensor, _t(list(bad_color), dtypes.uint8, "bad_color")]
    return _create("WriteImageSummary", ins, {"max_images": int(max_images)}, name)


def write_audio_summary(writer, step, tag, tensor, sample_rate, max_outputs=3,
                        name=None) -> Operation:  # fmt: skip
    ins = [*_head(writer, step, tag), _t(tensor, dtypes.float32, "tensor"),
           _t(sample_rate, dtypes.float32, "sample_rate")]  # fmt: skip
    return _create("WriteAudioSummary", ins, {"max_outputs": int(max_outputs)}, name)


def write_summary(writer, step, tensor, tag, summary_metadata=b"", name=None) -> Operation:
    ins = [writer, _t(step, dtypes.int64, "step"), convert_to_tensor(tensor, name="tensor"),
           _t(tag, dtypes.string, "tag"), _t(summary_metadata, dtypes.string, "metadata")]  # fmt: skip
    return _create("WriteSummary", ins, name=name)


def write_raw_proto_summary(writer, step, tensor, name=None) -> Operation:
    ins = [writer, _t(step, dtypes.int64, "step"), _t(tensor, dtypes.string, "tensor")]
    return _create("WriteRawProtoSummary", ins, name=name)
