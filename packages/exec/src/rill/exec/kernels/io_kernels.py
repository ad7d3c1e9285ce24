"""Kernels for rill.graph.ops.io_ops: SaveV2 and RestoreV2, over rill.exec.checkpoint_format."""

from __future__ import annotations

import os

import numpy as np

from rill.exec.checkpoint_format import checkpoint_exists, data_path, index_path, write_checkpoint
from rill.exec.kernel_registry import register_kernel
from rill.exec.tf_checkpoint import open_checkpoint
from rill.graph.errors import InvalidArgumentError, UnimplementedError
from rill.graph.ops.io_ops import parse_shape_and_slice


def _str(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _strings(value, what: str, n: int) -> list[str]:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidArgumentError(f"{what} must be a vector of {n} strings, got shape {arr.shape}")
    return [_str(s) for s in arr]


def _prefix(value) -> str:
    arr = np.asarray(value, dtype=object)
    if arr.shape != ():
        raise InvalidArgumentError(f"prefix must be a scalar string, got shape {arr.shape}")
    return os.fsdecode(arr[()] if isinstance(arr[()], bytes) else str(arr[()]))


def _whole(spec: str, name: str, shape: tuple[int, ...] | None) -> None:
    """Accepts "" or a spec naming the whole tensor: a checkpoint holds whole tensors (the Saver
    joins a partitioned variable's shards before writing it)."""
    try:
        parsed = parse_shape_and_slice(spec)
    except ValueError as e:
        raise InvalidArgumentError(f"tensor {name!r}: {e}") from None
    if parsed is None:
        return
    dims, slices = parsed
    if any(s is not None and s != (0, d) for s, d in zip(slices, dims)) or (
        shape is not None and tuple(dims) != tuple(shape)
    ):
        raise UnimplementedError(
            f"tensor {name!r}: shape_and_slice {spec!r} names part of a larger tensor; SaveV2 "
            'writes whole tensors (save the joined shards with ""; RestoreV2 reads slices)'
        )


@register_kernel("SaveV2", expensive=True)
def save_v2(dtypes):
    def compute(prefix, tensor_names, shape_and_slices, *tensors):
        n = len(tensors)
        names = _strings(tensor_names, "tensor_names", n)
        specs = _strings(shape_and_slices, "shape_and_slices", n)
        for name, spec, t in zip(names, specs, tensors):
            _whole(spec, name, np.shape(t))
        write_checkpoint(_prefix(prefix), list(zip(names, tensors)), dict(zip(names, dtypes)))

    return compute


def _scalar_int(x, what: str) -> int:
    if np.ndim(x) != 0:
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {np.shape(x)}")
    return int(x)


@register_kernel("ShardedFilename")
def sharded_filename():
    def compute(basename, shard, num_shards):
        base = _prefix(basename)
        s, n = _scalar_int(shard, "shard"), _scalar_int(num_shards, "num_shards")
        return np.asarray(f"{base}-{s:05d}-of-{n:05d}".encode(), dtype=object)

    return compute


@register_kernel("ShardedFilespec")
def sharded_filespec():
    def compute(basename, num_shards):
        n = _scalar_int(num_shards, "num_shards")
        return np.asarray(f"{_prefix(basename)}-?????-of-{n:05d}".encode(), dtype=object)

    return compute


@register_kernel("MergeV2Checkpoints", expensive=True)
def merge_v2_checkpoints(delete_old_dirs, allow_missing_files):
    def compute(checkpoint_prefixes, destination_prefix):
        sources = [
            p.decode() if isinstance(p, bytes) else str(p)
            for p in np.asarray(checkpoint_prefixes, dtype=object).reshape(-1)
        ]
        dest = _prefix(destination_prefix)
        tensors: dict = {}
        kinds: dict = {}
        present = []
        for src in sources:
            if not checkpoint_exists(src):
                if allow_missing_files:
                    continue
                raise InvalidArgumentError(f"MergeV2Checkpoints: no checkpoint at {src!r}")
            reader = open_checkpoint(src)
            for name in reader.names():
                if name in tensors:
                    raise InvalidArgumentError(
                        f"MergeV2Checkpoints: tensor {name!r} is in more than one checkpoint"
                    )
                kinds[name] = reader.dtype(name)
                tensors[name] = reader.read(name, kinds[name])
            present.append(src)
        write_checkpoint(dest, list(tensors.items()), kinds)
        for src in present:
            if os.path.abspath(src) == os.path.abspath(dest):
                continue
            for path in (index_path(src), data_path(src)):
                if os.path.exists(path):
                    os.remove(path)
            parent = os.path.dirname(os.path.abspath(src))
            if delete_old_dirs and parent != os.path.dirname(os.path.abspath(dest)):
                try:
                    os.rmdir(parent)  # only when the shards left it empty
                except OSError:
                    pass

    return compute


class _CachedReader:
    """A checkpoint reader that reads each tensor once per RestoreV2 run (several shards of one
    partitioned variable slice the same tensor)."""

    def __init__(self, prefix: str):
        self._reader = open_checkpoint(prefix)  # rill's format or TensorFlow's
        self._values: dict = {}

    def shape(self, name: str):
        return self._reader.shape(name)

    def read(self, name: str, dt):
        key = (name, dt)
        if key not in self._values:
            self._values[key] = self._reader.read(name, dt)
        return self._values[key]


def _read_slice(reader: _CachedReader, name: str, spec: str, dt) -> np.ndarray:
    """The part of checkpoint tensor `name` that `spec` names (the whole tensor for ""). The
    checkpoint holds each logical tensor whole; a slice (a partitioned variable's shard) is read
    from it, and its full shape must be the stored one."""
    try:
        parsed = parse_shape_and_slice(spec)
    except ValueError as e:
        raise InvalidArgumentError(f"tensor {name!r}: {e}") from None
    if parsed is None:
        return reader.read(name, dt)
    dims, slices = parsed
    stored = tuple(reader.shape(name))
    if tuple(dims) != stored:
        shown = "[" + ",".join(map(str, stored)) + "]"
        raise InvalidArgumentError(
            f"tensor {name!r}: the slice {spec!r} is of a tensor of shape "
            f"[{','.join(map(str, dims))}], but the checkpoint holds shape {shown}"
        )
    value = reader.read(name, dt)
    index = tuple(slice(None) if s is None else slice(s[0], s[0] + s[1]) for s in slices)
    return np.ascontiguousarray(value[index])


@register_kernel("RestoreV2", expensive=True)
def restore_v2(dtypes):
    def compute(prefix, tensor_names, shape_and_slices):
        n = len(dtypes)
        names = _strings(tensor_names, "tensor_names", n)
        specs = _strings(shape_and_slices, "shape_and_slices", n)
        reader = _CachedReader(_prefix(prefix))
        out = [_read_slice(reader, name, spec, dt) for name, spec, dt in zip(names, specs, dtypes)]
        return out[0] if n == 1 else out

    return compute
