"""File sources of tf.data: TFRecordDataset, TextLineDataset and Dataset.list_files.

Records are read with rill.exec.tfrecord (checksums checked, DataLossError on a corrupt file);
only uncompressed files. `filenames` may be a string, a list of strings, a string tensor (a
placeholder fed at iterator initialization, say) or a Dataset of strings.
"""

from __future__ import annotations

import csv
import glob
import pathlib

import numpy as np

from rill.exec.tfrecord import tf_record_iterator
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, NotFoundError
from rill.graph.graph import Tensor, convert_to_tensor
from rill.graph.ops.random_ops import get_seed
from rill.graph.shapes import scalar
from rill.train.data import structure
from rill.train.data.dataset import Dataset, _int_arg, _scalar_arg, _tensors
from rill.train.data.structure import TensorSpec
from rill.train.data.transforms import interleave

__all__ = [
    "CsvDataset",
    "FixedLengthRecordDataset",
    "TFRecordDataset",
    "TextLineDataset",
    "list_files",
]

_STRING = TensorSpec(scalar(), dtypes.string)


def _string_tensor(value, what: str) -> Tensor:
    t = value if isinstance(value, Tensor) else convert_to_tensor(value, dtypes.string)
    if t.dtype is not dtypes.string:
        raise TypeError(f"{what} must be strings, got {t.dtype.name} ({t.name})")
    if t.shape.rank not in (None, 0, 1):
        raise ValueError(f"{what} must be a scalar or a vector, got shape {t.shape}")
    return t


def _paths(value) -> list[str]:
    flat = np.asarray(value, dtype=object).reshape(-1)
    return [v.decode() if isinstance(v, bytes) else str(v) for v in flat]


def _scalar(record: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = record
    return out


def _check_compression(compression_type, who: str) -> None:
    if isinstance(compression_type, Tensor) or compression_type not in (None, "", "NONE"):
        raise ValueError(f"{who}: only uncompressed files are supported, got {compression_type!r}")


class _FileDataset(Dataset):
    """Records of each file in turn (or `num_parallel_reads` files interleaved, one record from
    each in turn, as TensorFlow's parallel reading orders them)."""

    def __init__(self, filenames, num_parallel_reads, who: str):
        self._who = who
        if isinstance(filenames, Dataset):
            if [s.dtype for s in filenames._flat_specs()] != [dtypes.string]:
                raise TypeError(f"{who}: a dataset of file names must hold scalar strings")
            self._names, inputs, captured = None, [filenames], []
        else:
            self._names = _string_tensor(filenames, f"{who} filenames")
            inputs, captured = [], [self._names]
        self._parallel = _scalar_arg(num_parallel_reads or 1, "num_parallel_reads")
        super().__init__(_STRING, inputs, captured + _tensors(self._parallel))

    def _files(self, env):
        if self._names is not None:
            yield from _paths(env.value(self._names))
        else:
            for (name,) in self._inputs[0]._elements(env):
                yield from _paths(name)

    def _records(self, path: str):
        raise NotImplementedError

    def _elements(self, env):
        parallel = _int_arg(env, self._parallel)
        if parallel <= 1:
            for path in self._files(env):
                for r in self._checked(path):
                    yield (_scalar(r),)
        else:
            for r in interleave(self._files(env), self._checked, parallel, 1):
                yield (_scalar(r),)

    def _checked(self, path: str):
        try:
            yield from self._records(path)
        except NotFoundError as e:
            raise NotFoundError(f"{self.describe()}: {e.message}") from None


class TFRecordDataset(_FileDataset):
    """The records of TFRecord files (`tf.data.TFRecordDataset`), as scalar strings."""

    _op_name = "TFRecordDataset"

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None):  # fmt: skip
        _check_compression(compression_type, "TFRecordDataset")
        super().__init__(filenames, num_parallel_reads, "TFRecordDataset")

    def _records(self, path: str):
        return tf_record_iterator(path)


class TextLineDataset(_FileDataset):
    """The lines of text files (`tf.data.TextLineDataset`), without their line ends."""

    _op_name = "TextLineDataset"

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None):  # fmt: skip
        _check_compression(compression_type, "TextLineDataset")
        super().__init__(filenames, num_parallel_reads, "TextLineDataset")

    def _records(self, path: str):
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise NotFoundError(f"{path}: no such file") from None
        with f:
            for line in f:
                if line.endswith(b"\n"):
                    line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                yield line


class FixedLengthRecordDataset(_FileDataset):
    """Records of `record_bytes` bytes from binary files, after `header_bytes` and before
    `footer_bytes` (`tf.data.FixedLengthRecordDataset`), as scalar strings."""

    _op_name = "FixedLengthRecordDataset"

    def __init__(self, filenames, record_bytes: int, header_bytes=None, footer_bytes=None,
                 buffer_size=None, compression_type=None, num_parallel_reads=None):  # fmt: skip
        _check_compression(compression_type, "FixedLengthRecordDataset")
        self._sizes = (int(record_bytes), int(header_bytes or 0), int(footer_bytes or 0))
        if self._sizes[0] <= 0 or min(self._sizes[1:]) < 0:
            raise ValueError(
                f"FixedLengthRecordDataset: record_bytes must be positive and header/footer "
                f"sizes non-negative, got {self._sizes}"
            )
        super().__init__(filenames, num_parallel_reads, "FixedLengthRecordDataset")

    def _records(self, path: str):
        record, header, footer = self._sizes
        try:
            data = pathlib.Path(path).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"{path}: no such file") from None
        body = len(data) - header - footer
        if body < 0 or body % record:
            raise InvalidArgumentError(
                f"{self.describe()}: excluding the header ({header} bytes) and footer ({footer} "
                f"bytes), input file {path!r} has body length {body} bytes, which is not an "
                f"exact multiple of the record length ({record} bytes)"
            )
        for start in range(header, header + body, record):
            yield data[start : start + record]


class _ListFiles(Dataset):
    _op_name = "MatchingFilesDataset"

    def __init__(self, patterns, shuffle, seed):
        self._patterns = _string_tensor(patterns, "list_files file_pattern")
        self._shuffle = True if shuffle is None else bool(shuffle)
        self._seeds = get_seed(seed)
        super().__init__(_STRING, captured=[self._patterns])

    def _elements(self, env):
        patterns = _paths(env.value(self._patterns))
        names = []
        for p in patterns:
            names.extend(sorted(glob.glob(p)))
        if not names:
            raise InvalidArgumentError(
                f"{self.describe()}: No files matched pattern: {', '.join(patterns)}"
            )
        if self._shuffle:
            key = (self._id, "rng")
            rng = env.state.store.get(key)
            if rng is None:
                seeds = self._seeds
                rng = np.random.default_rng(None if seeds == (None, None) else list(seeds))
                env.state.store[key] = rng
            names = [names[i] for i in rng.permutation(len(names))]
        for n in names:
            yield (_scalar(n.encode()),)


def list_files(file_pattern, shuffle=None, seed=None) -> Dataset:
    """The files matching `file_pattern` (`tf.data.Dataset.list_files`)."""
    return _ListFiles(file_pattern, shuffle, seed)


def _csv_default(value, k: int):
    """(dtype, default or None) for one entry of record_defaults."""
    if isinstance(value, dtypes.DType) or (isinstance(value, type) and value is not None
                                           and not isinstance(value, list)):  # fmt: skip
        return dtypes.as_dtype(value), None
    if isinstance(value, Tensor):
        from rill.graph.tensor_util import constant_value

        dtype, value = value.dtype, constant_value(value)
        if value is None:
            raise ValueError(f"CsvDataset: record_defaults[{k}] must be a constant")
    else:
        arr = np.asarray(value)
        dtype = dtypes.string if arr.dtype.kind in "SUO" else dtypes.as_dtype(arr.dtype)
        if isinstance(value, list) and arr.dtype == np.float64:
            dtype = dtypes.float32  # TensorFlow converts [0.0] to float32
        value = arr
    flat = np.asarray(value, dtype=object if dtype is dtypes.string else dtype.np).reshape(-1)
    if flat.size > 1:
        raise ValueError(f"CsvDataset: record_defaults[{k}] must hold at most one value")
    if dtype not in (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64, dtypes.string):
        raise TypeError(f"CsvDataset: record_defaults[{k}] has unsupported type {dtype.name}")
    return dtype, (structure.to_array(flat[0], dtype) if flat.size else None)


class CsvDataset(_FileDataset):
    """The rows of CSV files (`tf.data.experimental.CsvDataset`): a tuple of scalars per row,
    typed by `record_defaults` (a dtype: a required field; a value: the default of an empty
    one)."""

    _op_name = "CSVDataset"

    def __init__(self, filenames, record_defaults, compression_type=None, buffer_size=None,
                 header=False, field_delim=",", use_quote_delim=True, na_value="",
                 select_cols=None):  # fmt: skip
        _check_compression(compression_type, "CsvDataset")
        self._columns = [_csv_default(v, k) for k, v in enumerate(record_defaults)]
        if not self._columns:
            raise ValueError("CsvDataset: record_defaults must not be empty")
        self._select = None if select_cols is None else [int(c) for c in select_cols]
        if self._select is not None and (
            len(self._select) != len(self._columns) or self._select != sorted(set(self._select))
        ):
            raise ValueError(
                "CsvDataset: select_cols must be increasing column indices, one per "
                f"record_defaults entry; got {select_cols}"
            )
        self._header, self._delim, self._quote = bool(header), field_delim, use_quote_delim
        self._na = na_value
        super().__init__(filenames, None, "CsvDataset")
        self._element_spec = tuple(TensorSpec(scalar(), d) for d, _ in self._columns)

    def _records(self, path: str):
        try:
            f = open(path, newline="", encoding="utf-8")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise NotFoundError(f"{path}: no such file") from None
        with f:
            quoting = csv.QUOTE_MINIMAL if self._quote else csv.QUOTE_NONE
            rows = csv.reader(f, delimiter=self._delim, quoting=quoting)
            for k, row in enumerate(rows):
                if k == 0 and self._header:
                    continue
                yield self._parse(row, path, k)

    def _parse(self, row, path: str, k: int) -> tuple:
        where = f"{self.describe()}: {path} record {k}"
        cols = self._select if self._select is not None else range(len(self._columns))
        if len(row) <= max(cols) or (self._select is None and len(row) != len(self._columns)):
            raise InvalidArgumentError(
                f"{where}: expect {len(self._columns)} fields but have {len(row)}"
            )
        out = []
        for i, (c, (dtype, default)) in enumerate(zip(cols, self._columns)):
            field = row[c]
            if field == "" or field == self._na:
                if default is None:
                    raise InvalidArgumentError(f"{where}: Field {i} is required but missing")
                out.append(default)
                continue
            try:
                if dtype is dtypes.string:
                    out.append(structure.to_array(field.encode(), dtype))
                elif dtype.is_integer:
                    out.append(np.asarray(int(field), dtype.np))
                else:
                    out.append(np.asarray(float(field), dtype.np))
            except (ValueError, OverflowError):
                raise InvalidArgumentError(
                    f"{where}: Field {i} is not a valid {dtype.name}: {field!r}"
                ) from None
        return tuple(out)

    def _elements(self, env):
        for path in self._files(env):
            yield from self._checked(path)
