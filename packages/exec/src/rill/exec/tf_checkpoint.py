"""TensorFlow's checkpoint format (the "tensor bundle"), read and written.

A TensorFlow checkpoint at prefix P is `P.index` plus data shards `P.data-SSSSS-of-NNNNN`:

- `P.index` is a LevelDB-style sorted table: data blocks of prefix-compressed key/value entries
  with restart points, an index block pointing at them, an (empty) metaindex block and a 48-byte
  footer ending in the table magic 0xdb4775248b80fb57. Every block is followed by a compression
  byte and the masked CRC32C of the block and that byte. The value under the empty key is a
  BundleHeaderProto (number of shards, endianness, version); the value under each tensor's name
  a BundleEntryProto (dtype, shape, shard, offset, size, masked CRC32C of the tensor's bytes).
- A data shard holds the tensors' bytes back to back: numbers little-endian, row-major; a string
  tensor as the varint64 length of every element, a masked CRC32C of those length bytes
  (4 bytes, little-endian), then the elements' bytes.

Facts from TensorFlow's tensor_bundle.proto and LevelDB's table format documentation; the code is
rill's own. rill's own format (rill.exec.checkpoint_format) stays the default for checkpoints
rill writes; `open_checkpoint` reads either, so RestoreV2 and the Saver restore TensorFlow's.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> write_tf_checkpoint(os.path.join(d, "m"), {"w": np.eye(2, dtype=np.float32), "s": np.array(b"x")})
>>> r = open_checkpoint(os.path.join(d, "m"))
>>> type(r).__name__, r.names(), r.read("w")[1]
('TFCheckpointReader', ['s', 'w'], array([0., 1.], dtype=float32))

Bad input is reported, never trusted: a block or tensor whose checksum does not match raises
DataLossError naming the file (and the tensor); a size or offset that points past the end of its
file is refused before anything is allocated.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Mapping

import numpy as np

from rill.exec.checkpoint_checks import check_string_count, element_count
from rill.exec.proto import tensor_bundle_pb2
from rill.exec.tf_checkpoint_slices import encode_tensor_name_slice, spec_text
from rill.graph import dtypes
from rill.graph.dtypes import DType
from rill.graph.errors import DataLossError, InvalidArgumentError, NotFoundError

__all__ = [
    "TFCheckpointReader",
    "crc32c",
    "is_tf_checkpoint",
    "open_checkpoint",
    "write_tf_checkpoint",
]

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
_MASK_DELTA = 0xA282EAD8
_RESTART_INTERVAL = 16
_BLOCK_SIZE = 256 << 10
_MAX_BLOCK = 1 << 28  # the most a compressed index block may expand to


# -- CRC32C (Castagnoli) --------------------------------------------------------------------------


def _make_table() -> np.ndarray:
    t = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t[i] = c
    return t


_TABLE = _make_table()
_TABLE_LIST = [int(x) for x in _TABLE]


def _crc_py(data: bytes, crc: int) -> int:
    t = _TABLE_LIST
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _compiled_crc():
    from rill.exec.kernels import jit

    m = jit.loops()
    return None if m is None else m.crc32c_update


def crc32c(data, crc: int = 0) -> int:
    """The CRC32C of `data` (bytes-like), continuing from `crc`.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    crc ^= 0xFFFFFFFF
    fast = _compiled_crc() if buf.size > 4096 else None
    if fast is not None:
        crc = int(fast(buf, np.uint32(crc), _TABLE))
    else:
        crc = _crc_py(buf.tobytes(), crc)
    return crc ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


# -- varints --------------------------------------------------------------------------------------


def _varint(buf, pos: int, end: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise DataLossError(f"{where}: corrupt varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _put_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


# -- the sorted table -----------------------------------------------------------------------------


def _read_block(data: bytes, offset: int, size: int, path: str, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size + 5 > len(data):
        raise DataLossError(
            f"{path}: {what} at [{offset}, {offset + size + 5}) lies outside the file "
            f"({len(data)} bytes)"
        )
    block = data[offset : offset + size]
    kind = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if _mask(crc32c(data[offset : offset + size + 1])) != stored:
        raise DataLossError(f"{path}: checksum mismatch in {what} at offset {offset}; corrupt")
    if kind == 1:  # snappy
        from rill.exec.snappy import decompress

        return decompress(block, f"{path}: {what} at offset {offset}", limit=_MAX_BLOCK)
    if kind != 0:
        raise DataLossError(
            f"{path}: {what} has compression type {kind}; TensorFlow tables use 0 (none) or "
            "1 (snappy)"
        )
    return block


def _block_entries(block: bytes, path: str, what: str) -> list[tuple[bytes, bytes]]:
    where = f"{path}: {what}"
    if len(block) < 4:
        raise DataLossError(f"{where} is too short")
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise DataLossError(f"{where}: bad restart count {n_restarts}")
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos, end, where)
        unshared, pos = _varint(block, pos, end, where)
        vlen, pos = _varint(block, pos, end, where)
        if shared > len(key) or pos + unshared + vlen > end:
            raise DataLossError(f"{where}: corrupt entry at offset {pos}")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    return out


def _handle(value: bytes, where: str) -> tuple[int, int]:
    off, pos = _varint(value, 0, len(value), where)
    size, _ = _varint(value, pos, len(value), where)
    return off, size


def _read_table(path: str) -> list[tuple[bytes, bytes]]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < FOOTER_SIZE:
        raise DataLossError(f"{path} is too short to be a TensorFlow checkpoint index")
    footer = data[-FOOTER_SIZE:]
    if struct.unpack_from("<Q", footer, 40)[0] != TABLE_MAGIC:
        raise DataLossError(f"{path} is not a TensorFlow checkpoint index (bad table magic)")
    _, pos = _varint(footer, 0, 40, path)  # the metaindex handle: unused
    _, pos = _varint(footer, pos, 40, path)
    i_off, pos = _varint(footer, pos, 40, path)
    i_size, _ = _varint(footer, pos, 40, path)
    index = _block_entries(_read_block(data, i_off, i_size, path, "index block"), path, "index")
    entries = []
    for _, h in index:
        off, size = _handle(h, path)
        entries += _block_entries(_read_block(data, off, size, path, "data block"), path, "block")
    return entries


def _block_bytes(entries: list[tuple[bytes, bytes]]) -> bytes:
    out, restarts, last = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        shared = 0
        if i % _RESTART_INTERVAL == 0:
            restarts.append(len(out))
        else:
            n = min(len(k), len(last))
            while shared < n and k[shared] == last[shared]:
                shared += 1
        _put_varint(out, shared)
        _put_varint(out, len(k) - shared)
        _put_varint(out, len(v))
        out += k[shared:]
        out += v
        last = k
    restarts = restarts or [0]
    out += struct.pack(f"<{len(restarts)}I", *restarts)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _write_table(f, entries: list[tuple[bytes, bytes]]) -> None:
    """Writes sorted (key, value) entries as an uncompressed table."""
    pos = 0

    def put_block(raw: bytes) -> bytes:
        nonlocal pos
        trailer = bytes([0])
        crc = _mask(crc32c(raw + trailer))
        f.write(raw + trailer + struct.pack("<I", crc))
        h = bytearray()
        _put_varint(h, pos)
        _put_varint(h, len(raw))
        pos += len(raw) + 5
        return bytes(h)

    index, block, size = [], [], 0
    for k, v in entries:
        block.append((k, v))
        size += len(k) + len(v) + 8
        if size >= _BLOCK_SIZE:
            index.append((block[-1][0], put_block(_block_bytes(block))))
            block, size = [], 0
    if block or not index:
        index.append((block[-1][0] if block else b"", put_block(_block_bytes(block))))
    meta = put_block(_block_bytes([]))
    idx = put_block(_block_bytes(index))
    footer = bytearray(meta + idx)
    footer += bytes(40 - len(footer))
    footer += struct.pack("<Q", TABLE_MAGIC)
    f.write(bytes(footer))


# -- the bundle -----------------------------------------------------------------------------------


def _index_path(prefix: str) -> str:
    return f"{prefix}.index"


def _data_path(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def is_tf_checkpoint(prefix) -> bool:
    """Whether `prefix.index` exists and ends in the sorted table's magic number."""
    path = _index_path(os.fspath(prefix))
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < FOOTER_SIZE:
                return False
            f.seek(-8, os.SEEK_END)
            return struct.unpack("<Q", f.read(8))[0] == TABLE_MAGIC
    except OSError:
        return False


def open_checkpoint(prefix):
    """A reader for the checkpoint at `prefix`: TFCheckpointReader for TensorFlow's format,
    rill.exec.checkpoint_format.CheckpointReader for rill's (both have names, has_tensor, dtype,
    shape and read)."""
    if is_tf_checkpoint(prefix):
        return TFCheckpointReader(prefix)
    from rill.exec.checkpoint_format import CheckpointReader

    return CheckpointReader(prefix)


class TFCheckpointReader:
    """Reads a TensorFlow checkpoint: the index at once, tensors on demand (checksums checked).

    Raises NotFoundError when `prefix.index` does not exist and DataLossError when it or a data
    shard is corrupt.
    """

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        self.index_file = _index_path(self.prefix)
        if not os.path.exists(self.index_file):
            raise NotFoundError(
                f"no checkpoint at prefix {self.prefix!r}: {self.index_file} does not exist"
            )
        entries = _read_table(self.index_file)
        if not entries or entries[0][0] != b"":
            raise DataLossError(f"{self.index_file}: the bundle header (empty key) is missing")
        header = tensor_bundle_pb2.BundleHeaderProto()
        try:
            header.ParseFromString(entries[0][1])
        except Exception as e:
            raise DataLossError(f"{self.index_file}: corrupt bundle header: {e}") from None
        if header.endianness != tensor_bundle_pb2.BundleHeaderProto.LITTLE:
            raise DataLossError(f"{self.index_file}: big-endian checkpoints are not supported")
        self.num_shards = max(int(header.num_shards), 1)
        self.tensors: dict[str, tensor_bundle_pb2.BundleEntryProto] = {}
        # the slices of partitioned variables, under keys that start with a 0 byte
        self._slices: dict[bytes, tensor_bundle_pb2.BundleEntryProto] = {}
        for k, v in entries[1:]:
            e = tensor_bundle_pb2.BundleEntryProto()
            name = k.decode("utf-8", "replace")
            if k[:1] == b"\x00":
                try:
                    e.ParseFromString(v)
                except Exception as err:
                    raise DataLossError(
                        f"{self.index_file}: corrupt slice entry {k!r}: {err}"
                    ) from None
                self._slices[k] = e
                continue
            try:
                e.ParseFromString(v)
            except Exception as err:
                raise DataLossError(
                    f"{self.index_file}: corrupt entry for tensor {name!r}: {err}"
                ) from None
            self.tensors[name] = e

    def names(self) -> list[str]:
        return sorted(self.tensors)

    def has_tensor(self, name: str) -> bool:
        return name in self.tensors

    def _entry(self, name: str):
        e = self.tensors.get(name)
        if e is None:
            have = self.names()
            shown = ", ".join(repr(n) for n in have[:20]) + (", ..." if len(have) > 20 else "")
            raise NotFoundError(
                f"tensor {name!r} is not in the checkpoint at {self.prefix!r}; it has "
                f"{len(have)} tensors: {shown or 'none'}"
            )
        return e

    def dtype(self, name: str) -> DType:
        enum = int(self._entry(name).dtype)
        try:
            return dtypes.as_dtype(enum)
        except (TypeError, ValueError, KeyError):
            raise DataLossError(
                f"{self.index_file}: tensor {name!r} has dtype enum {enum}, which is no dtype"
            ) from None

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d.size) for d in self._entry(name).shape.dim)

    def read(self, name: str, dtype: DType | None = None) -> np.ndarray:
        """The tensor `name`, its bytes checked against the entry's size and CRC32C."""
        e = self._entry(name)
        dt, shape = self.dtype(name), self.shape(name)
        if dtype is not None and dtypes.as_dtype(dtype) is not dt:
            raise InvalidArgumentError(
                f"tensor {name!r} in the checkpoint at {self.prefix!r} has dtype {dt.name}, "
                f"expected {dtypes.as_dtype(dtype).name}"
            )
        if len(e.slices):
            return self._read_sliced(name, e, dt, shape)
        return self._read_entry(e, name, dt, shape)

    def _read_sliced(self, name: str, e, dt: DType, shape: tuple[int, ...]) -> np.ndarray:
        """A partitioned variable's tensor, joined from the slices its entry lists (each stored
        under its own key, as TensorFlow's BundleWriter.AddSlice does)."""
        where = f"{self.index_file}: tensor {name!r}"
        count = element_count(shape, where)
        out = np.empty(shape, dtype=object if dt is dtypes.string else dt.np)
        covered = 0
        for sp in e.slices:
            if len(sp.extent) != len(shape):
                raise DataLossError(f"{where}: a slice of rank {len(sp.extent)}, not {len(shape)}")
            starts, lengths, index = [], [], []
            for ext, d in zip(sp.extent, shape):
                full = ext.WhichOneof("has_length") is None
                start, length = (0, -1) if full else (int(ext.start), int(ext.length))
                stop = d if full else start + length
                if start < 0 or not start <= stop <= d:
                    raise DataLossError(f"{where}: slice extent {start}+{length} outside [0, {d})")
                starts.append(start)
                lengths.append(length)
                index.append(slice(start, stop))
            key = encode_tensor_name_slice(name, starts, lengths)
            part = self._slices.get(key)
            if part is None:
                raise DataLossError(f"{where}: the slice {spec_text(starts, lengths)} is missing")
            part_shape = tuple(x.stop - x.start for x in index)
            out[tuple(index)] = self._read_entry(
                part, f"{name} (slice {spec_text(starts, lengths)})", dt, part_shape
            )
            covered += element_count(part_shape, where)
        if covered != count:
            raise DataLossError(f"{where}: its slices hold {covered} of its {count} elements")
        return out

    def _read_entry(self, e, name: str, dt: DType, shape: tuple[int, ...]) -> np.ndarray:
        if not 0 <= e.shard_id < self.num_shards:
            raise DataLossError(f"{self.index_file}: tensor {name!r} names shard {e.shard_id}")
        path = _data_path(self.prefix, e.shard_id, self.num_shards)
        where = f"tensor {name!r} in data file {path}"
        count = element_count(shape, where)
        if dt is dtypes.string:
            check_string_count(count, e.size, 1, where)  # a varint length per string, at least
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise DataLossError(f"{where}: the data file does not exist") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if e.offset < 0 or e.size < 0 or e.offset + e.size > size:
                raise DataLossError(
                    f"{where}: needs bytes [{e.offset}, {e.offset + e.size}) but the file has "
                    f"{size} bytes (truncated?)"
                )
            if dt is not dtypes.string and e.size != count * dt.np.itemsize:
                raise DataLossError(
                    f"{where}: {e.size} bytes recorded for a {dt.name}{list(shape)} tensor, "
                    f"which needs {count * dt.np.itemsize}"
                )
            f.seek(e.offset)
            buf = f.read(e.size)
        if len(buf) != e.size:
            raise DataLossError(f"{where}: short read ({len(buf)} of {e.size} bytes)")
        if dt is dtypes.string:
            strings, crc = _decode_strings(buf, count, where)
        else:
            crc = crc32c(buf)
        if _mask(crc) != e.crc32c:
            raise DataLossError(f"{where}: checksum mismatch (CRC32C); the file is corrupt")
        if dt is dtypes.string:
            return strings.reshape(shape)
        disk = np.dtype(dt.np).newbyteorder("<") if dt.np.itemsize > 1 else np.dtype(dt.np)
        if dt is dtypes.bfloat16:
            out = np.frombuffer(buf, dtype="<u2").astype(np.uint16).view(dt.np)
        else:
            out = np.frombuffer(buf, dtype=disk).astype(dt.np)
        return out.reshape(shape)


def _size_bytes(lengths) -> bytes:
    # The checksums cover each length as a 4-byte little-endian integer (8 bytes when it does
    # not fit), not the varints on disk: TensorFlow's layout, kept for compatibility.
    return b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)


def _decode_strings(buf: bytes, count: int, where: str) -> tuple[np.ndarray, int]:
    """The string elements and the CRC32C that the entry's checksum must match."""
    lengths, pos = [], 0
    for _ in range(count):
        n, pos = _varint(buf, pos, len(buf), where)
        lengths.append(n)
    if pos + 4 > len(buf):
        raise DataLossError(f"{where}: string lengths run past the tensor's bytes")
    (stored,) = struct.unpack_from("<I", buf, pos)
    sizes = _size_bytes(lengths)
    if _mask(crc32c(sizes)) != stored:
        raise DataLossError(f"{where}: checksum mismatch in the string lengths; corrupt")
    crc = crc32c(buf[pos : pos + 4], crc32c(sizes))
    pos += 4
    if pos + sum(lengths) != len(buf):
        raise DataLossError(f"{where}: the string lengths do not add up to the tensor's bytes")
    out = np.empty(count, dtype=object)
    for i, n in enumerate(lengths):
        out[i] = buf[pos : pos + n]
        pos += n
    return out, crc32c(buf[pos - sum(lengths) : pos], crc)


def _encode(value: np.ndarray, dt: DType, name: str) -> tuple[bytes, int]:
    """The bytes of a tensor in a data shard and their (unmasked) CRC32C."""
    if dt is dtypes.string:
        items = [x if isinstance(x, bytes) else str(x).encode() for x in value.reshape(-1)]
        lens = bytearray()
        for s in items:
            _put_varint(lens, len(s))
        sizes = _size_bytes([len(s) for s in items])
        check = struct.pack("<I", _mask(crc32c(sizes)))
        body = b"".join(items)
        return bytes(lens) + check + body, crc32c(body, crc32c(check, crc32c(sizes)))
    if dt in (dtypes.resource, dtypes.variant):
        raise InvalidArgumentError(f"tensor {name!r}: a {dt.name} tensor cannot be saved")
    arr = np.ascontiguousarray(value, dtype=dt.np)
    if dt is dtypes.bfloat16:
        raw = arr.view(np.uint16).astype("<u2").tobytes()
    else:
        if arr.dtype.itemsize > 1:
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        raw = arr.tobytes()
    return raw, crc32c(raw)


def write_tf_checkpoint(prefix, tensors: Mapping, dtypes_: Mapping | None = None) -> None:
    """Writes `tensors` (name -> array) as a one-shard TensorFlow checkpoint at `prefix`.

    The data shard and the index are written to temporary names and renamed into place, the
    index last, so a reader never sees an index whose data is missing.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(prefix) or "."
    os.makedirs(directory, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    data_final, index_final = _data_path(prefix, 0, 1), _index_path(prefix)
    data_tmp, index_tmp = f"{data_final}.tmp{tag}", f"{index_final}.tmp{tag}"
    entries = []
    offset = 0
    try:
        with open(data_tmp, "wb") as f:
            for name in sorted(tensors):
                value = np.asarray(tensors[name])
                dt = dtypes.as_dtype(dtypes_[name]) if dtypes_ and name in dtypes_ else None
                if dt is None:
                    dt = (
                        dtypes.string if value.dtype.kind in "OSU" else dtypes.as_dtype(value.dtype)
                    )
                raw, crc = _encode(value, dt, name)
                e = tensor_bundle_pb2.BundleEntryProto(
                    dtype=_enum_of(dt), offset=offset, size=len(raw), crc32c=_mask(crc)
                )
                for d in value.shape:
                    e.shape.dim.add().size = int(d)
                f.write(raw)
                offset += len(raw)
                entries.append((name.encode("utf-8"), e.SerializeToString(deterministic=True)))
            f.flush()
            os.fsync(f.fileno())
        header = tensor_bundle_pb2.BundleHeaderProto(num_shards=1)
        header.version.producer = 1
        entries.insert(0, (b"", header.SerializeToString(deterministic=True)))
        with open(index_tmp, "wb") as f:
            _write_table(f, entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(data_tmp, data_final)
        os.replace(index_tmp, index_final)
    finally:
        for p in (data_tmp, index_tmp):
            if os.path.exists(p):
                os.remove(p)


def _enum_of(dt: DType) -> int:
    return int(dt.enum)
