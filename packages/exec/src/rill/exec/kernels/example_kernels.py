"""Kernels for rill.graph.ops.example_ops: tf.Example protos (rill.exec.proto.example_pb2, wire
compatible with TensorFlow's) parsed into dense, sparse and ragged tensors, with TensorFlow's
errors for a missing required feature, a value count that does not fit the dense shape, and a
feature of the wrong type."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.proto import example_pb2
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

_KIND = {dtypes.float32: "float_list", dtypes.int64: "int64_list", dtypes.string: "bytes_list"}
_NAME = {dtypes.float32: "float", dtypes.int64: "int64", dtypes.string: "string"}


def _parse(data: bytes, where: str) -> dict:
    ex = example_pb2.Example()
    try:
        ex.ParseFromString(bytes(data))
    except Exception:
        raise InvalidArgumentError(f"Could not parse example input, value: {where}") from None
    return ex.features.feature


def _values(feature, key: str, dtype) -> np.ndarray:
    kind = feature.WhichOneof("kind")
    if kind is None:
        return _empty(dtype)
    if kind != _KIND[dtype]:
        have = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}[kind]
        raise InvalidArgumentError(
            f"Feature: {key} (data type: {_NAME[dtype]}) ... Data types don't match. Data type: "
            f"{have} but expected type: {_NAME[dtype]}"
        )
    vals = getattr(feature, kind).value
    if dtype is dtypes.string:
        out = np.empty(len(vals), dtype=object)
        out[:] = list(vals)
        return out
    return np.asarray(vals, dtype=dtype.np)


def _empty(dtype) -> np.ndarray:
    return np.empty(0, dtype=object) if dtype is dtypes.string else np.empty(0, dtype.np)


def _dense(features, key, dtype, shape, default, where):
    dims = shape.as_list() if shape.rank is not None else None
    if dims is None or any(d is None for d in dims):
        raise InvalidArgumentError(
            f"dense feature {key!r} has shape {shape}; only fully defined dense shapes are "
            "supported"
        )
    n = int(np.prod(dims, dtype=np.int64))
    if key not in features:
        if default.size == 0:
            raise InvalidArgumentError(
                f"{where}: Feature: {key} (data type: {_NAME[dtype]}) is required but could not "
                "be found."
            )
        return np.broadcast_to(default, dims).copy()
    v = _values(features[key], key, dtype)
    if v.size != n:
        raise InvalidArgumentError(
            f"{where}: Key: {key}.  Can't parse serialized Example: the dense shape {dims} "
            f"needs {n} values, the feature has {v.size}"
        )
    return v.reshape(dims)


def _decode_keys(t) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else str(k) for k in np.asarray(t).reshape(-1)]


def _parse_batch(serialized, sparse_keys, sparse_types, dense_keys, dense_types, dense_shapes,
                 defaults, ragged_keys=(), ragged_types=(), split_types=(), single=False):  # fmt: skip
    records = [serialized[()]] if single else list(np.asarray(serialized).reshape(-1))
    parsed = [_parse(r, f"Name: <unknown>, example {i}") for i, r in enumerate(records)]
    b = len(parsed)
    sp_idx, sp_val, sp_shape = [], [], []
    for key, dt in zip(sparse_keys, sparse_types):
        rows = [(_values(f[key], key, dt) if key in f else _empty(dt)) for f in parsed]
        longest = max((len(r) for r in rows), default=0)
        if single:
            idx = np.arange(len(rows[0]), dtype=np.int64).reshape(-1, 1)
            shape = np.array([len(rows[0])], np.int64)
        else:
            idx = np.array([[i, j] for i, r in enumerate(rows) for j in range(len(r))],
                           np.int64).reshape(-1, 2)  # fmt: skip
            shape = np.array([b, longest], np.int64)
        vals = np.concatenate(rows) if rows else _empty(dt)
        sp_idx.append(idx)
        sp_val.append(vals.astype(object) if dt is dtypes.string else vals.astype(dt.np))
        sp_shape.append(shape)
    dense = []
    for key, dt, shape, default in zip(dense_keys, dense_types, dense_shapes, defaults):
        per = [_dense(f, key, dt, shape, np.asarray(default), f"Name: <unknown>, example {i}")
               for i, f in enumerate(parsed)]  # fmt: skip
        arr = per[0] if single else np.stack(per) if per else np.empty((0, *shape.as_list()),
                                                                         dt.np)  # fmt: skip
        dense.append(arr)
    r_vals, r_splits = [], []
    for key, dt, st in zip(ragged_keys, ragged_types, split_types):
        rows = [(_values(f[key], key, dt) if key in f else _empty(dt)) for f in parsed]
        r_vals.append(np.concatenate(rows) if rows else _empty(dt))
        r_splits.append(np.cumsum([0] + [len(r) for r in rows]).astype(st.np))
    return sp_idx, sp_val, sp_shape, dense, r_vals, r_splits


@register_kernel("ParseExampleV2")
def parse_example_v2(Tdense, num_sparse, sparse_types, ragged_value_types, ragged_split_types,
                     dense_shapes):  # fmt: skip
    def compute(serialized, names, sparse_keys, dense_keys, ragged_keys, *defaults):
        sk, dk, rk = _decode_keys(sparse_keys), _decode_keys(dense_keys), _decode_keys(ragged_keys)
        if len(sk) != num_sparse or len(dk) != len(Tdense) or len(rk) != len(ragged_value_types):
            raise InvalidArgumentError(
                "the numbers of sparse, dense and ragged keys must match the op's attrs"
            )
        # A scalar serialized is one Example: no batch dimension (TensorFlow's rule).
        out = _parse_batch(serialized, sk, sparse_types, dk, Tdense, dense_shapes, defaults,
                           rk, ragged_value_types, ragged_split_types,
                           single=np.ndim(serialized) == 0)  # fmt: skip
        return _results([x for group in out for x in group])

    return compute


def _results(flat: list):
    """A kernel's result: the value itself for one output, None for none."""
    if len(flat) == 1:
        return flat[0]
    return flat or None


@register_kernel("ParseSingleExample")
def parse_single_example(num_sparse, sparse_keys, dense_keys, sparse_types, Tdense, dense_shapes):
    def compute(serialized, *defaults):
        if np.ndim(serialized) != 0:
            raise InvalidArgumentError("serialized must be a scalar string")
        out = _parse_batch(serialized, sparse_keys, sparse_types, dense_keys, Tdense,
                           dense_shapes, defaults, single=True)  # fmt: skip
        return _results([x for group in out[:4] for x in group])

    return compute
