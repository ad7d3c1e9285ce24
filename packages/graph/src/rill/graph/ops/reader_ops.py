"""TensorFlow 1's reader ops: a reader resource (TFRecordReaderV2, TextLineReaderV2,
WholeFileReaderV2, FixedLengthRecordReaderV2) that takes file names from a queue of strings and
yields (key, value) records, through ReaderReadV2 / ReaderReadUpToV2; ReaderResetV2 and the
ReaderNum*V2 counters. tf.compat.v1's input pipelines (string_input_producer + a reader) build
these.

>>> import rill.graph as rg
>>> from rill.graph.ops.data_flow_ops import FIFOQueue
>>> with rg.Graph().as_default():
...     q = FIFOQueue(4, [rg.string], shapes=[[]])
...     key, value = reader_read(tf_record_reader(), q.queue_ref)
>>> key.dtype, value.shape
(rill.string, TensorShape([]))
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["tf_record_reader", "text_line_reader", "whole_file_reader",
           "fixed_length_record_reader", "reader_read", "reader_read_up_to", "reader_reset",
           "reader_num_records_produced", "reader_num_work_units_completed"]  # fmt: skip

_SHARING = ["container: string = ''", "shared_name: string = ''"]


def _scalar(op):
    return [TensorShape([])]


def _two_scalars(op):
    return [TensorShape([]), TensorShape([])]


def _two_vectors(op):
    return [TensorShape([None]), TensorShape([None])]


def _none(op):
    return []


defop("TFRecordReaderV2", outputs=["reader_handle: resource"],
      attrs=[*_SHARING, "compression_type: string = ''"], shape=_scalar, stateful=True,
      doc="A reader of TFRecord files (uncompressed, ZLIB or GZIP); keys are file:offset.")  # fmt: skip
defop("TextLineReaderV2", outputs=["reader_handle: resource"],
      attrs=["skip_header_lines: int = 0", *_SHARING], shape=_scalar, stateful=True,
      doc="A reader of the lines of text files (without their newlines); keys are "
      "file:line.")  # fmt: skip
defop("WholeFileReaderV2", outputs=["reader_handle: resource"], attrs=_SHARING,
      shape=_scalar, stateful=True,
      doc="A reader giving each file whole; the key is the file name.")  # fmt: skip
defop("FixedLengthRecordReaderV2", outputs=["reader_handle: resource"],
      attrs=["header_bytes: int = 0", "record_bytes: int", "footer_bytes: int = 0",
             "hop_bytes: int = 0", *_SHARING, "encoding: string = ''"],
      shape=_scalar, stateful=True,
      doc="A reader of fixed-size records after a header and before a footer; keys are "
      "file:record_number.")  # fmt: skip
defop("ReaderReadV2", inputs=["reader_handle: resource", "queue_handle: resource"],
      outputs=["key: string", "value: string"], shape=_two_scalars, stateful=True,
      doc="The next record, taking the next file name from the queue when a file ends.")  # fmt: skip
defop("ReaderReadUpToV2",
      inputs=["reader_handle: resource", "queue_handle: resource", "num_records: int64"],
      outputs=["keys: string", "values: string"], shape=_two_vectors, stateful=True,
      doc="Up to num_records records (fewer when the queue is closed and runs out).")  # fmt: skip
defop("ReaderNumRecordsProducedV2", inputs=["reader_handle: resource"],
      outputs=["records_produced: int64"], shape=_scalar, stateful=True,
      doc="The number of records the reader has produced.")  # fmt: skip
defop("ReaderNumWorkUnitsCompletedV2", inputs=["reader_handle: resource"],
      outputs=["units_completed: int64"], shape=_scalar, stateful=True,
      doc="The number of files the reader has finished.")  # fmt: skip
defop("ReaderResetV2", inputs=["reader_handle: resource"], shape=_none, stateful=True,
      doc="Restores the reader to its initial clean state.")  # fmt: skip


def _create(op_type: str, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs or {}, name=name or op_type)


def tf_record_reader(compression_type: str = "", name=None) -> Tensor:
    return _create("TFRecordReaderV2", [], {"compression_type": compression_type},
                   name).outputs[0]  # fmt: skip


def text_line_reader(skip_header_lines: int = 0, name=None) -> Tensor:
    return _create("TextLineReaderV2", [], {"skip_header_lines": int(skip_header_lines)},
                   name).outputs[0]  # fmt: skip


def whole_file_reader(name=None) -> Tensor:
    return _create("WholeFileReaderV2", [], name=name).outputs[0]


def fixed_length_record_reader(record_bytes: int, header_bytes: int = 0, footer_bytes: int = 0,
                               hop_bytes: int = 0, encoding: str = "", name=None) -> Tensor:  # fmt: skip
    attrs = {"record_bytes": int(record_bytes), "header_bytes": int(header_bytes),
             "footer_bytes": int(footer_bytes), "hop_bytes": int(hop_bytes),
             "encoding": encoding}  # fmt: skip
    return _create("FixedLengthRecordReaderV2", [], attrs, name).outputs[0]


def reader_read(reader, queue, name=None) -> tuple[Tensor, Tensor]:
    op = _create("ReaderReadV2", [reader, queue], name=name)
    return op.outputs[0], op.outputs[1]


def reader_read_up_to(reader, queue, num_records, name=None) -> tuple[Tensor, Tensor]:
    n = convert_to_tensor(num_records, dtype=dtypes.int64, name="num_records")
    op = _create("ReaderReadUpToV2", [reader, queue, n], name=name)
    return op.outputs[0], op.outputs[1]


def reader_reset(reader, name=None) -> Operation:
    return _create("ReaderResetV2", [reader], name=name)


def reader_num_records_produced(reader, name=None) -> Tensor:
    return _create("ReaderNumRecordsProducedV2", [reader], name=name).outputs[0]


def reader_num_work_units_completed(reader, name=None) -> Tensor:
    return _create("ReaderNumWorkUnitsCompletedV2", [reader], name=name).outputs[0]
