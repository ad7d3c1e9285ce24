"""Kernels for rill.graph.ops.lookup_ops: hash tables as resources of the device's ResourceMgr.

A table checks every key and value against its declared dtypes (a lookup with keys of the wrong
dtype is InvalidArgumentError naming both), refuses lookups before an immutable table is
initialized (FailedPreconditionError), and serializes its updates on a lock.
"""

from __future__ import annotations

import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.graph import dtypes
from rill.graph.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from rill.graph.shapes import TensorShape


class HashTable:
    """key -> value for scalar keys and values of fixed dtypes."""

    def __init__(self, name: str, key_dtype, value_dtype, mutable: bool):
        self.name = name
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self.mutable = mutable
        self.initialized = mutable
        self.data: dict = {}
        self.lock = threading.Lock()

    def _keys(self, keys: np.ndarray, what: str) -> list:
        if keys.dtype.kind in "OSU":
            got = dtypes.string
        else:
            got = dtypes.as_dtype(keys.dtype)
        if got is not self.key_dtype:
            raise InvalidArgumentError(
                f"{what} table {self.name!r}: key must be type {self.key_dtype.name} but got "
                f"{got.name}"
            )
        flat = keys.reshape(-1).tolist()
        return [bytes(k) if isinstance(k, (bytes, bytearray)) else k for k in flat]

    def _check_values(self, values: np.ndarray, what: str) -> None:
        got = dtypes.string if values.dtype.kind in "OSU" else dtypes.as_dtype(values.dtype)
        if got is not self.value_dtype:
            raise InvalidArgumentError(
                f"{what} table {self.name!r}: value must be type {self.value_dtype.name} but got "
                f"{got.name}"
            )

    def insert(self, keys, values, what: str, replace: bool = False) -> None:
        ks = self._keys(keys, what)
        self._check_values(values, what)
        if values.shape != keys.shape:
            raise InvalidArgumentError(
                f"{what} table {self.name!r}: keys {TensorShape(keys.shape)} and values "
                f"{TensorShape(values.shape)} must have the same shape"
            )
        with self.lock:
            if not self.mutable and self.initialized and not replace:
                raise FailedPreconditionError(f"Table {self.name!r} already initialized.")
            if replace:
                self.data.clear()
            self.data.update(zip(ks, values.reshape(-1).tolist()))
            self.initialized = True

    def find(self, keys, default) -> np.ndarray:
        ks = self._keys(keys, "looking up in")
        self._check_values(default, "the default value of")
        if default.ndim != 0:
            raise InvalidArgumentError("default_value must be a scalar")
        with self.lock:
            if not self.initialized:
                raise FailedPreconditionError(
                    f"Table {self.name!r} not initialized: run its initializer (e.g. "
                    "tables_initializer()) first"
                )
            d = default[()]
            vals = [self.data.get(k, d) for k in ks]
        if self.value_dtype is dtypes.string:
            out = np.empty(len(vals), dtype=object)
            out[:] = vals
        else:
            out = np.asarray(vals, dtype=self.value_dtype.np)
        return out.reshape(keys.shape)


def _table_factory(mutable: bool):
    def factory(container, shared_name, use_node_name_sharing, key_dtype, value_dtype, node,
                device):  # fmt: skip
        name = shared_name or node.name
        handle = handle_array(
            ResourceHandle(device.name, container, name, "HashTable", key_dtype, None)
        )
        resources = device.resources

        def compute():
            resources.lookup_or_create(
                container, name, lambda: HashTable(name, key_dtype, value_dtype, mutable)
            )
            return handle

        return compute

    return factory


register_kernel("HashTableV2")(_table_factory(False))
register_kernel("MutableHashTableV2")(_table_factory(True))


def _table(ctx, h) -> HashTable:
    hd = handle_of(h)
    t = ctx.resources.get(hd.container, hd.name)
    if t is None:
        raise NotFoundError(f"table {hd.name!r} does not exist")
    if not isinstance(t, HashTable):
        raise InvalidArgumentError(f"resource {hd.name!r} is a {type(t).__name__}, not a table")
    return t


@register_kernel("LookupTableFindV2", context=True)
def lookup_table_find(Tin, Tout):
    def compute(ctx, h, keys, default):
        return _table(ctx, h).find(keys, default)

    return compute


@register_kernel("LookupTableInsertV2", context=True)
def lookup_table_insert(Tin, Tout):
    def compute(ctx, h, keys, values):
        t = _table(ctx, h)
        if not t.mutable:
            raise InvalidArgumentError(
                f"table {t.name!r} is immutable: insert into a MutableHashTable"
            )
        t.insert(keys, values, "inserting into")

    return compute


@register_kernel("LookupTableImportV2", context=True)
def lookup_table_import(Tin, Tout):
    def compute(ctx, h, keys, values):
        _table(ctx, h).insert(keys, values, "importing into", replace=True)

    return compute


@register_kernel("LookupTableExportV2", context=True)
def lookup_table_export(Tkeys, Tvalues):
    def arr(xs, dtype):
        if dtype is dtypes.string:
            out = np.empty(len(xs), dtype=object)
            out[:] = xs
            return out
        return np.asarray(xs, dtype=dtype.np)

    def compute(ctx, h):
        t = _table(ctx, h)
        with t.lock:
            items = list(t.data.items())
        return arr([k for k, _ in items], Tkeys), arr([v for _, v in items], Tvalues)

    return compute


@register_kernel("LookupTableSizeV2", context=True)
def lookup_table_size():
    def compute(ctx, h):
        t = _table(ctx, h)
        with t.lock:
            return np.int64(len(t.data))

    return compute


@register_kernel("InitializeTableV2", context=True)
def initialize_table(Tkey, Tval):
    def compute(ctx, h, keys, values):
        _table(ctx, h).insert(keys, values, "initializing")

    return compute


@register_kernel("InitializeTableFromTextFileV2", context=True)
def initialize_table_from_text_file(key_index, value_index, vocab_size, delimiter, offset):
    def field(line: str, parts: list, index: int, lineno: int, dtype, where: str):
        if index == -2:
            v = line
        elif index == -1:
            v = lineno
        else:
            if index >= len(parts):
                raise InvalidArgumentError(f"{where}: line {lineno} has no field {index}: {line!r}")
            v = parts[index]
        if dtype is dtypes.string:
            return str(v).encode()
        try:
            return dtype.np.type(v)
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"{where}: field {index} of line {lineno} ({v!r}) is not a {dtype.name}"
            ) from None

    def compute(ctx, h, filename):
        t = _table(ctx, h)
        path = filename[()].decode() if isinstance(filename[()], bytes) else str(filename[()])
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            raise NotFoundError(f"vocabulary file {path} does not exist") from None
        if vocab_size >= 0:
            if len(lines) < vocab_size:
                raise InvalidArgumentError(
                    f"{path}: vocab_size {vocab_size} but the file has {len(lines)} lines"
                )
            lines = lines[:vocab_size]
        keys, vals = [], []
        for i, line in enumerate(lines):
            parts = line.split(delimiter)
            keys.append(field(line, parts, key_index, i, t.key_dtype, path))
            vals.append(field(line, parts, value_index, i, t.value_dtype, path))

        def arr(xs, dtype):
            if dtype is dtypes.string:
                out = np.empty(len(xs), dtype=object)
                out[:] = xs
                return out
            return np.asarray(xs, dtype=dtype.np)

        t.insert(arr(keys, t.key_dtype), arr(vals, t.value_dtype), "initializing")

    return compute
