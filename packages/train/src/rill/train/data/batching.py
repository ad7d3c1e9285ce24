"""Batching transformations of tf.data.Dataset: batch, padded_batch and unbatch.

The static batch dimension is None unless drop_remainder is set with a Python int batch size,
as in TensorFlow.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes, nest
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph import Tensor
from rill.graph.shapes import TensorShape, as_shape, unknown_shape
from rill.train.data import structure
from rill.train.data.dataset import Dataset, _int_arg, _scalar_arg, _tensors
from rill.train.data.structure import TensorSpec


def _where(ds: Dataset, k: int) -> str:
    return f"{ds.describe()}, element {k}"


def _batched_spec(spec: TensorSpec, batch, drop_remainder) -> TensorSpec:
    dim = batch if drop_remainder and isinstance(batch, int) else None
    return TensorSpec(TensorShape([dim]).concatenate(spec.shape), spec.dtype)


def _groups(ds: Dataset, env, batch: int, drop_remainder: bool):
    if batch <= 0:
        raise InvalidArgumentError(f"{ds.describe()}: batch_size must be positive, got {batch}")
    group = []
    for element in ds._inputs[0]._elements(env):
        group.append(element)
        if len(group) == batch:
            yield group
            group = []
    if group and not drop_remainder:
        yield group


class _Batch(Dataset):
    _op_name = "BatchDatasetV2"

    def __init__(self, input_ds: Dataset, batch_size, drop_remainder):
        self._batch = _scalar_arg(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        spec = nest.map_structure(lambda s: _batched_spec(s, self._batch, self._drop),
                                  input_ds.element_spec)  # fmt: skip
        super().__init__(spec, [input_ds], _tensors(self._batch))

    def _elements(self, env):
        for group in _groups(self, env, _int_arg(env, self._batch), self._drop):
            out = []
            for c in range(len(group[0])):
                parts = [np.asarray(e[c]) for e in group]
                first = parts[0].shape
                for i, p in enumerate(parts):
                    if p.shape != first:
                        raise InvalidArgumentError(
                            f"{self.describe()}: Cannot batch tensors with different shapes in "
                            f"component {c}. First element had shape {list(first)} and element "
                            f"{i} had shape {list(p.shape)}."
                        )
                out.append(np.stack(parts))
            yield tuple(out)


def _padding_value(value, spec: TensorSpec) -> np.ndarray:
    if value is None:
        return structure.to_array(b"" if spec.dtype is dtypes.string else 0, spec.dtype)
    if isinstance(value, Tensor):
        from rill.graph.tensor_util import constant_value

        v = constant_value(value)
        if v is None:
            raise ValueError(
                f"padded_batch(): padding value {value.name} must be a constant, not computed"
            )
        value = v
    arr = structure.to_array(value, spec.dtype)
    if arr.shape != ():
        raise ValueError(f"padded_batch(): a padding value must be a scalar, got {value!r}")
    return arr


class _PaddedBatch(Dataset):
    _op_name = "PaddedBatchDatasetV2"

    def __init__(self, input_ds: Dataset, batch_size, padded_shapes, padding_values,
                 drop_remainder):  # fmt: skip
        spec = input_ds.element_spec
        if padded_shapes is None:
            padded_shapes = nest.map_structure(
                lambda s: TensorShape([None] * s.shape.rank) if s.shape.rank is not None
                else unknown_shape(), spec)  # fmt: skip
        flat_spec = structure.flat_specs(spec)
        flat_shapes = _flatten_shapes(spec, padded_shapes)
        if padding_values is None:
            flat_pad = [None] * len(flat_spec)
        else:
            flat_pad = nest.flatten(padding_values)
            if len(flat_pad) != len(flat_spec):
                raise ValueError("padded_batch(): padding_values must have the element's structure")
        self._pads = [_padding_value(v, s) for v, s in zip(flat_pad, flat_spec)]
        self._shapes = flat_shapes
        self._batch = _scalar_arg(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        padded_spec = nest.pack_sequence_as(
            spec, [TensorSpec(p, s.dtype) for p, s in zip(flat_shapes, flat_spec)]
        )
        out = nest.map_structure(lambda s: _batched_spec(s, self._batch, self._drop),
                                 padded_spec)  # fmt: skip
        super().__init__(out, [input_ds], _tensors(self._batch))

    def _elements(self, env):
        for group in _groups(self, env, _int_arg(env, self._batch), self._drop):
            out = []
            for c, (shape, pad) in enumerate(zip(self._shapes, self._pads)):
                parts = [np.asarray(e[c]) for e in group]
                rank = parts[0].ndim
                if any(p.ndim != rank for p in parts):
                    raise InvalidArgumentError(
                        f"{self.describe()}: component {c} has elements of different ranks"
                    )
                target = []
                for d in range(rank):
                    longest = max(p.shape[d] for p in parts)
                    want = shape[d] if shape.rank is not None else None
                    if want is not None and want < longest:
                        raise InvalidArgumentError(
                            f"{self.describe()}: Attempted to pad to a smaller size than the "
                            f"input element: component {c} has dimension {d} of {longest}, "
                            f"the padded shape is {shape}"
                        )
                    target.append(longest if want is None else want)
                batch = np.full([len(parts)] + target, pad, dtype=pad.dtype)
                for i, p in enumerate(parts):
                    batch[(i,) + tuple(slice(0, n) for n in p.shape)] = p
                out.append(batch)
            yield tuple(out)


def _flatten_shapes(spec, padded_shapes) -> list[TensorShape]:
    """padded_shapes (nested like the element; each leaf a shape) flattened as `spec`."""
    if isinstance(spec, dict):
        return [s for k in sorted(spec) for s in _flatten_shapes(spec[k], padded_shapes[k])]
    if isinstance(spec, tuple):
        if not isinstance(padded_shapes, (tuple, list)) or len(padded_shapes) != len(spec):
            raise ValueError("padded_batch(): padded_shapes must have the element's structure")
        return [s for a, b in zip(spec, padded_shapes) for s in _flatten_shapes(a, b)]
    if isinstance(padded_shapes, Tensor):
        from rill.graph.tensor_util import constant_value_as_shape

        shape = constant_value_as_shape(padded_shapes)
    else:
        dims = padded_shapes.dims if isinstance(padded_shapes, TensorShape) else padded_shapes
        if dims is not None:
            dims = [None if d is None or d == -1 else int(d) for d in dims]
        shape = as_shape(dims) if dims is not None else unknown_shape()
    if shape.rank is not None and spec.shape.rank is not None and shape.rank != spec.shape.rank:
        raise ValueError(
            f"padded_batch(): padded shape {shape} has rank {shape.rank}, but the component "
            f"has shape {spec.shape}"
        )
    return [shape]


class _Unbatch(Dataset):
    _op_name = "UnbatchDataset"

    def __init__(self, input_ds: Dataset):
        def row(s: TensorSpec) -> TensorSpec:
            if s.shape.rank == 0:
                raise ValueError("Dataset.unbatch(): every component must be at least a vector")
            return TensorSpec(s.shape[1:] if s.shape.rank is not None else unknown_shape(),
                              s.dtype)  # fmt: skip

        super().__init__(nest.map_structure(row, input_ds.element_spec), [input_ds])

    def _elements(self, env):
        for k, element in enumerate(self._inputs[0]._elements(env)):
            n = len(element[0])
            if any(len(c) != n for c in element):
                raise InvalidArgumentError(
                    f"{_where(self, k)}: unbatch needs components of one first dimension, got "
                    f"{[len(c) for c in element]}"
                )
            for i in range(n):
                yield tuple(c[i, ...] for c in element)
