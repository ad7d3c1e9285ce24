"""Element structures of tf.data: nested tuples and dicts of tensor specs.

As in TensorFlow, tuples (named tuples too) and dicts nest; a list is a value, converted to one
tensor. An element travels between pipeline stages flattened: a tuple of numpy arrays in the
order `rill.graph.nest.flatten` gives (dict entries by sorted key).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rill.graph import dtypes, nest
from rill.graph.dtypes import DType
from rill.graph.graph import Tensor, convert_to_tensor
from rill.graph.shapes import TensorShape, as_shape

__all__ = ["TensorSpec", "normalize", "spec_of", "to_array", "flat_specs"]


@dataclass(frozen=True)
class TensorSpec:
    """The dtype and static shape of one component of a dataset's elements."""

    shape: TensorShape
    dtype: DType

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype.name})"


def _is_structure(x) -> bool:
    return isinstance(x, (tuple, dict))


def normalize(value, name: str = "component"):
    """`value` with every leaf a Tensor (lists and arrays become one tensor each)."""
    if isinstance(value, dict):
        return type(value)((k, normalize(v, f"{name}_{k}")) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[normalize(v, f"{name}_{i}") for i, v in enumerate(value)])
    if isinstance(value, tuple):
        return tuple(normalize(v, f"{name}_{i}") for i, v in enumerate(value))
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "_as_tensor"):
        return value._as_tensor(None)
    if hasattr(value, "_to_components"):
        raise TypeError(
            f"tf.data elements must be dense tensors; got a {type(value).__name__} "
            f"({name}), which rill's tf.data does not carry yet"
        )
    return convert_to_tensor(value, name=name)


def spec_of(structure):
    """The TensorSpec structure of a structure of tensors."""
    return nest.map_structure(lambda t: TensorSpec(t.shape, t.dtype), structure)


def flat_specs(structure) -> list[TensorSpec]:
    return nest.flatten(structure)


def types_of(structure):
    return nest.map_structure(lambda s: s.dtype, structure)


def shapes_of(structure):
    return nest.map_structure(lambda s: s.shape, structure)


def flatten_up_to(spec, value, where: str, error=ValueError) -> list:
    """`value` flattened as deep as `spec` nests (a leaf of `spec` may match a list or a
    tuple in `value`: a shape, or a component given as a list)."""
    if isinstance(spec, dict):
        if not isinstance(value, dict) or sorted(value) != sorted(spec):
            raise error(f"{where}: expected a dict with keys {sorted(spec)}, got {value!r:.80}")
        return [c for k in sorted(spec) for c in flatten_up_to(spec[k], value[k], where, error)]
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise error(f"{where}: expected a tuple of {len(spec)} components, got {value!r:.80}")
        return [c for s, v in zip(spec, value) for c in flatten_up_to(s, v, where, error)]
    return [value]


def structure_from(output_types, output_shapes=None):
    """A TensorSpec structure from TF's (output_types, output_shapes) pair."""
    flat_t = nest.flatten(output_types)
    if output_shapes is None:
        flat_s = [None] * len(flat_t)
    else:
        flat_s = flatten_up_to(output_types, output_shapes, "output_shapes must have the "
                               "structure of output_types")  # fmt: skip
    specs = [
        TensorSpec(as_shape(s) if s is not None else TensorShape(None), dtypes.as_dtype(t))
        for t, s in zip(flat_t, flat_s)
    ]
    return nest.pack_sequence_as(output_types, specs)


def to_array(value, dtype: DType) -> np.ndarray:
    """`value` as an array of `dtype` (strings as object arrays of bytes)."""
    if dtype is dtypes.string:
        if isinstance(value, np.ndarray) and value.dtype == object:
            return value
        arr = np.asarray(value, dtype=object)
        out = np.empty(arr.shape, dtype=object)
        for idx, v in np.ndenumerate(arr):
            out[idx] = v.encode() if isinstance(v, str) else bytes(v)
        return out
    if isinstance(value, np.ndarray) and value.dtype == dtype.np:
        return value
    return np.asarray(value, dtype=dtype.np)


def describe_structure(structure) -> str:
    def one(s):
        return f"{s.dtype.name}{list(s.shape) if s.shape.rank is not None else '<unknown>'}"

    if not _is_structure(structure):
        return one(structure)
    flat = nest.flatten(structure)
    return "(" + ", ".join(one(s) for s in flat) + ")"
