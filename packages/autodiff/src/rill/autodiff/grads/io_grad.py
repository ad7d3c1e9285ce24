"""The reader and summary writer ops have no gradient (their outputs are strings, counters and
side effects), as in TensorFlow."""

from __future__ import annotations

from rill.autodiff.registry import not_differentiable

not_differentiable(
    "TFRecordReaderV2",
    "TextLineReaderV2",
    "WholeFileReaderV2",
    "FixedLengthRecordReaderV2",
    "ReaderReadV2",
    "ReaderReadUpToV2",
    "ReaderNumRecordsProducedV2",
    "ReaderNumWorkUnitsCompletedV2",
    "ReaderResetV2",
    "SummaryWriter",
    "CreateSummaryFileWriter",
    "FlushSummaryWriter",
    "CloseSummaryWriter",
    "WriteScalarSummary",
    "WriteHistogramSummary",
    "WriteImageSummary",
    "WriteAudioSummary",
    "WriteSummary",
    "WriteRawProtoSummary",
)
