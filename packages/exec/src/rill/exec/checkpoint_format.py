"""The on-disk checkpoint format of SaveV2 / RestoreV2 (format "rill.checkpoint", version 1).

A checkpoint at path prefix P is two files in one directory:

- `P.index`: UTF-8 JSON describing every tensor;
- `P.data-00000-of-00001`: a 32-byte header followed by the tensors' bytes.

Both are readable with numpy and the standard library alone; nothing is pickled. The README of
rill-exec ("Checkpoint format") is the specification; this module is its reference reader and
writer.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> write_checkpoint(os.path.join(d, "model"), {"w": np.eye(2, dtype=np.float32)})
>>> read_checkpoint(os.path.join(d, "model"))["w"]
array([[1., 0.],
       [0., 1.]], dtype=float32)
>>> list_checkpoint(os.path.join(d, "model"))
[('w', 'float32', (2, 2))]

Writes are atomic per file and ordered: the data file and the index are written to temporary
names in the destination directory, flushed and fsynced, then the data file is renamed into
place and the index last. A reader therefore never finds an index whose data is missing or
partial; the index records a random checkpoint id that the data file's header repeats, so an
interrupted overwrite of the same prefix (new data, old index) is reported as DataLossError
rather than read wrongly.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
import threading
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from rill.exec.checkpoint_checks import check_data_file_name, check_string_count, element_count
from rill.graph import dtypes
from rill.graph.dtypes import DType
from rill.graph.errors import DataLossError, InvalidArgumentError, NotFoundError

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "CheckpointReader",
    "checkpoint_exists",
    "data_path",
    "fault_hook",
    "index_path",
    "list_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]

FORMAT_NAME = "rill.checkpoint"
FORMAT_VERSION = 1
DATA_MAGIC = b"RILLDATA"
HEADER_SIZE = 32  # magic (8) + version u32 + reserved u32 + checkpoint id (16)
_STR_LEN = struct.Struct("<Q")
_UNSAVABLE = (dtypes.resource, dtypes.variant)


def index_path(prefix) -> str:
    return f"{os.fspath(prefix)}.index"


def data_path(prefix, shard: int = 0, num_shards: int = 1) -> str:
    return f"{os.fspath(prefix)}.data-{shard:05d}-of-{num_shards:05d}"


def checkpoint_exists(prefix) -> bool:
    return os.path.exists(index_path(prefix))


# -- fault injection ----------------------------------------------------------------------------

_hooks = threading.local()


@contextlib.contextmanager
def fault_hook(fn: Callable[[str, dict], None]):
    """Calls fn(stage, paths) at each stage of writes made by this thread, for tests.

    Stages, in order: "data_written" (temporary data file complete and fsynced), "index_written"
    (temporary index complete and fsynced, nothing renamed yet), "data_renamed" (the data file is
    in place, the index not yet). `paths` maps "data_tmp", "index_tmp", "data", "index" to paths.
    Raising from fn simulates a crash at that point (the temporary files are then removed;
    `os._exit` from fn leaves them, like a real crash).
    """
    prev = getattr(_hooks, "fn", None)
    _hooks.fn = fn
    try:
        yield
    finally:
        _hooks.fn = prev


def _stage(stage: str, paths: dict) -> None:
    fn = getattr(_hooks, "fn", None)
    if fn is not None:
        fn(stage, paths)


# -- encoding -----------------------------------------------------------------------------------


def _dtype_of(value: np.ndarray) -> DType:
    if value.dtype.kind in "OSU":
        return dtypes.string
    return dtypes.as_dtype(value.dtype)


def _le_numeric(dtype: DType) -> np.dtype:
    """The little-endian numpy dtype holding a numeric tensor's bytes on disk."""
    if dtype is dtypes.bfloat16:
        return np.dtype("<u2")
    return dtype.np.newbyteorder("<") if dtype.np.byteorder not in ("|",) else dtype.np


def _encode(value: np.ndarray, dtype: DType, name: str):
    """The tensor's bytes on disk (a buffer: bytes or a uint8 array)."""
    if dtype is dtypes.string:
        parts = []
        for s in value.reshape(-1):
            if isinstance(s, str):
                s = s.encode()
            elif not isinstance(s, (bytes, bytearray, np.bytes_)):
                raise InvalidArgumentError(
                    f"tensor {name!r}: string tensors hold bytes, found {type(s).__name__}"
                )
            parts.append(_STR_LEN.pack(len(s)))
            parts.append(bytes(s))
        return b"".join(parts)
    if dtype is dtypes.bfloat16:
        value = np.ascontiguousarray(value).view(np.uint16)
    arr = np.ascontiguousarray(value, dtype=_le_numeric(dtype))
    return arr.reshape(-1).view(np.uint8)


def _decode_strings(buf: bytes, count: int, where: str) -> np.ndarray:
    out = np.empty(count, dtype=object)
    pos = 0
    for i in range(count):
        if pos + 8 > len(buf):
            raise DataLossError(f"{where}: string {i} of {count} runs past the tensor's bytes")
        (n,) = _STR_LEN.unpack_from(buf, pos)
        pos += 8
        if pos + n > len(buf):
            raise DataLossError(f"{where}: string {i} of {count} runs past the tensor's bytes")
        out[i] = bytes(buf[pos : pos + n])
        pos += n
    if pos != len(buf):
        raise DataLossError(f"{where}: {len(buf) - pos} bytes left over after {count} strings")
    return out


# -- writing ------------------------------------------------------------------------------------


def _items(tensors) -> list[tuple[str, object]]:
    if isinstance(tensors, Mapping):
        return list(tensors.items())
    return list(tensors)


def write_checkpoint(prefix, tensors, dtypes_: Mapping[str, DType] | None = None) -> None:
    """Writes `tensors` (a mapping or (name, array) pairs) as the checkpoint at `prefix`.

    `dtypes_` optionally gives each tensor's DType (needed only to tell bfloat16 or string
    apart from numpy's view of them; by default it is read from the arrays). The directory is
    created when missing. Raises InvalidArgumentError for duplicate names or unsavable dtypes.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(prefix) or "."
    os.makedirs(directory, exist_ok=True)
    final_data, final_index = data_path(prefix), index_path(prefix)
    data_name = os.path.basename(final_data)
    token = uuid.uuid4()
    suffix = f".tmp-{os.getpid()}-{token.hex[:12]}"
    paths = {
        "data_tmp": final_data + suffix,
        "index_tmp": final_index + suffix,
        "data": final_data,
        "index": final_index,
    }
    entries: dict[str, dict] = {}
    try:
        with open(paths["data_tmp"], "wb") as f:
            f.write(DATA_MAGIC + struct.pack("<II", FORMAT_VERSION, 0) + token.bytes)
            offset = HEADER_SIZE
            for name, value in _items(tensors):
                if not isinstance(name, str):
                    name = name.decode() if isinstance(name, bytes) else str(name)
                if name in entries:
                    raise InvalidArgumentError(f"tensor name {name!r} appears twice")
                value = np.asarray(value)
                dtype = (dtypes_ or {}).get(name) or _dtype_of(value)
                if dtype in _UNSAVABLE:
                    raise InvalidArgumentError(f"tensor {name!r}: {dtype.name} cannot be saved")
                buf = _encode(value, dtype, name)
                length = len(buf) if isinstance(buf, bytes) else buf.size
                f.write(buf)
                entries[name] = {
                    "dtype": dtype.name,
                    "shape": list(value.shape),
                    "file": data_name,
                    "offset": offset,
                    "length": length,
                    "crc32": zlib.crc32(buf) & 0xFFFFFFFF,
                }
                offset += length
            f.flush()
            os.fsync(f.fileno())
        _stage("data_written", paths)
        index = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "id": token.hex,
            "data_files": {data_name: {"size": offset}},
            "tensors": entries,
        }
        with open(paths["index_tmp"], "wb") as f:
            f.write(json.dumps(index, indent=1).encode())
            f.flush()
            os.fsync(f.fileno())
        _stage("index_written", paths)
        os.replace(paths["data_tmp"], final_data)
        _stage("data_renamed", paths)
        os.replace(paths["index_tmp"], final_index)
        _fsync_dir(directory)
    except BaseException:
        for p in (paths["data_tmp"], paths["index_tmp"]):
            with contextlib.suppress(OSError):
                os.remove(p)
        raise


def _fsync_dir(directory: str) -> None:
    # Makes the renames durable; not every platform can open a directory.
    if sys.platform == "win32":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- reading ------------------------------------------------------------------------------------


class CheckpointReader:
    """Reads the checkpoint at `prefix`: its index at once, tensors on demand.

    Raises NotFoundError when there is no index at the prefix and DataLossError when the index
    is not a readable version-1 rill checkpoint index.
    """

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        self.index_file = index_path(self.prefix)
        self._dir = os.path.dirname(self.prefix) or "."
        try:
            with open(self.index_file, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise NotFoundError(
                f"no checkpoint at prefix {self.prefix!r}: {self.index_file} does not exist"
            ) from None
        try:
            index = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataLossError(f"checkpoint index {self.index_file} is corrupt: {e}") from None
        if not isinstance(index, dict) or index.get("format") != FORMAT_NAME:
            raise DataLossError(f"{self.index_file} is not a {FORMAT_NAME} index")
        if index.get("version") != FORMAT_VERSION:
            raise DataLossError(
                f"{self.index_file} has format version {index.get('version')!r}; this reader "
                f"understands version {FORMAT_VERSION}"
            )
        try:
            self.id = bytes.fromhex(index["id"])
            self.tensors: dict[str, dict] = dict(index["tensors"])
            for name, e in self.tensors.items():
                where = f"checkpoint index {self.index_file}: tensor {name!r}"
                if "\x00" in name:
                    raise DataLossError(f"{where}: the name holds a NUL byte")
                e["_dtype"] = dtypes.as_dtype(e["dtype"])
                e["_shape"] = tuple(e["shape"])
                e["_count"] = element_count(e["_shape"], where)
                for k in ("offset", "length", "crc32"):
                    if isinstance(e[k], bool) or not isinstance(e[k], int) or e[k] < 0:
                        raise DataLossError(f"{where}: {k} {e[k]!r} is not a non-negative integer")
                check_data_file_name(e["file"], where)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataLossError(f"checkpoint index {self.index_file} is corrupt: {e}") from None
        self._checked_files: set[str] = set()

    def names(self) -> list[str]:
        return sorted(self.tensors)

    def has_tensor(self, name: str) -> bool:
        return name in self.tensors

    def dtype(self, name: str) -> DType:
        return self._entry(name)["_dtype"]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entry(name)["_shape"]

    def _entry(self, name: str) -> dict:
        e = self.tensors.get(name)
        if e is None:
            have = self.names()
            shown = ", ".join(repr(n) for n in have[:20]) + (", ..." if len(have) > 20 else "")
            raise NotFoundError(
                f"tensor {name!r} is not in the checkpoint at {self.prefix!r}; it has "
                f"{len(have)} tensors: {shown or 'none'}"
            )
        return e

    def _open_data(self, e: dict, name: str):
        path = os.path.join(self._dir, e["file"])
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed by the caller
        except FileNotFoundError:
            raise DataLossError(
                f"data file {path} of the checkpoint at {self.prefix!r} (holding tensor "
                f"{name!r}) does not exist"
            ) from None
        if path not in self._checked_files:
            header = f.read(HEADER_SIZE)
            if len(header) < HEADER_SIZE or header[:8] != DATA_MAGIC:
                f.close()
                raise DataLossError(f"data file {path} is truncated or not a rill data file")
            if header[16:32] != self.id:
                f.close()
                raise DataLossError(
                    f"data file {path} belongs to a different checkpoint than {self.index_file} "
                    "(was a save to this prefix interrupted?)"
                )
            self._checked_files.add(path)
        return f, path

    def read(self, name: str, dtype: DType | None = None) -> np.ndarray:
        """The tensor `name`, its bytes checked against the index's length and CRC32.

        With `dtype`, a tensor of another dtype raises InvalidArgumentError.
        """
        e = self._entry(name)
        dt, shape = e["_dtype"], e["_shape"]
        if dtype is not None and dtypes.as_dtype(dtype) is not dt:
            raise InvalidArgumentError(
                f"tensor {name!r} in the checkpoint at {self.prefix!r} has dtype {dt.name}, "
                f"expected {dtypes.as_dtype(dtype).name}"
            )
        offset, length = int(e["offset"]), int(e["length"])
        count = e["_count"]
        f, path = self._open_data(e, name)
        where = f"tensor {name!r} in data file {path}"
        with f:
            size = os.fstat(f.fileno()).st_size
            if offset < HEADER_SIZE or offset + length > size:
                raise DataLossError(
                    f"{where}: needs bytes [{offset}, {offset + length}) but the file has "
                    f"{size} bytes (truncated?)"
                )
            f.seek(offset)
            if dt is dtypes.string:
                check_string_count(count, length, _STR_LEN.size, where)
                buf = f.read(length)
                self._check_crc(buf, e, where)
                return _decode_strings(buf, count, where).reshape(shape)
            disk = _le_numeric(dt)
            if length != count * disk.itemsize:
                raise DataLossError(
                    f"{where}: {length} bytes recorded for a {dt.name}{list(shape)} tensor, "
                    f"which needs {count * disk.itemsize}"
                )
            out = np.empty(count, dtype=disk)
            got = f.readinto(memoryview(out.view(np.uint8)))
            if got != length:
                raise DataLossError(f"{where}: short read ({got} of {length} bytes)")
            self._check_crc(out.view(np.uint8), e, where)
        if dt is dtypes.bfloat16:
            out = out.astype(np.uint16, copy=False).view(dt.np)
        elif out.dtype != dt.np:
            out = out.astype(dt.np)
        return out.reshape(shape)

    @staticmethod
    def _check_crc(buf, e: dict, where: str) -> None:
        crc = zlib.crc32(buf) & 0xFFFFFFFF
        if crc != int(e["crc32"]):
            raise DataLossError(
                f"{where}: checksum mismatch (CRC32 {crc:#010x}, index says "
                f"{int(e['crc32']):#010x}); the file is corrupt"
            )


def read_checkpoint(prefix, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """All tensors of the checkpoint at `prefix` (or those in `names`), by name."""
    r = CheckpointReader(prefix)
    return {n: r.read(n) for n in (r.names() if names is None else names)}


def list_checkpoint(prefix) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype name, shape) of every tensor in the checkpoint at `prefix`, by name."""
    r = CheckpointReader(prefix)
    return [(n, r.dtype(n).name, r.shape(n)) for n in r.names()]
