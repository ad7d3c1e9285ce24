"""Partitioned variables: one logical variable stored as shards along one axis (TensorFlow-1's
`tf.compat.v1.get_variable(..., partitioner=...)`).

A partitioner is `fn(shape: TensorShape, dtype: DType) -> list[int]`, the number of shards per
axis (all 1 but one axis). `get_variable("emb", [V, D], partitioner=...)` then creates shards
`emb/part_0`, `emb/part_1`, ... — each an ordinary variable, created in the device scope in
force, so that `replica_device_setter` spreads them over PS tasks — and returns a
`PartitionedVariable` that iterates them. Along the split axis the first `size % n` shards hold
one more slice than the others (TensorFlow's layout). Each shard carries a `SaveSliceInfo`
(the logical name and shape, its offset and shape) with which the Saver writes the logical
variable once and restores it into any other partitioning.

>>> import rill.graph as rg
>>> from rill.train import get_variable
>>> with rg.Graph().as_default():
...     emb = get_variable("emb", [10, 4], partitioner=fixed_size_partitioner(3))
...     [v.name for v in emb], [v.shape.as_list() for v in emb]
(['emb/part_0:0', 'emb/part_1:0', 'emb/part_2:0'], [[4, 4], [3, 4], [3, 4]])
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, get_default_graph
from rill.graph.ops import array_ops, reshape_ops
from rill.graph.ops.slice_ops import slice as slice_op
from rill.graph.shapes import TensorShape, as_shape

__all__ = [
    "PartitionInfo",
    "PartitionedVariable",
    "SaveSliceInfo",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "variable_axis_size_partitioner",
]


# -- partitioners --------------------------------------------------------------------------------


def _element_bytes(dtype, bytes_per_string_element: int) -> int:
    dtype = dtypes.as_dtype(dtype)
    return bytes_per_string_element if dtype is dtypes.string else dtype.size


def fixed_size_partitioner(num_shards: int, axis: int = 0):
    """A partitioner into `num_shards` shards along `axis` (fewer when the axis is shorter).

    >>> fixed_size_partitioner(4)(TensorShape([10, 3]), dtypes.float32)
    [4, 1]
    """
    if num_shards < 1:
        raise ValueError(f"fixed_size_partitioner needs num_shards >= 1, got {num_shards}")

    def _partitioner(shape, dtype=None):
        shape = as_shape(shape)
        _check_axis(shape, axis, "fixed_size_partitioner")
        partitions = [1] * shape.rank
        partitions[axis] = min(num_shards, shape.dims[axis])
        return partitions

    return _partitioner


def variable_axis_size_partitioner(
    max_shard_bytes: int, axis: int = 0, bytes_per_string_element: int = 16, max_shards=None
):
    """A partitioner whose shards hold at most `max_shard_bytes` each (but at least one slice
    along `axis`, and at most `max_shards` shards).

    >>> variable_axis_size_partitioner(100)(TensorShape([10, 5]), dtypes.float32)
    [2, 1]
    """
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("max_shard_bytes and bytes_per_string_element must be positive")
    if max_shards is not None and max_shards < 1:
        raise ValueError(f"max_shards must be positive, got {max_shards}")

    def _partitioner(shape, dtype):
        shape = as_shape(shape)
        _check_axis(shape, axis, "variable_axis_size_partitioner")
        partitions = [1] * shape.rank
        bytes_per_slice = (
            shape.num_elements()
            / shape.dims[axis]
            * _element_bytes(dtype, bytes_per_string_element)
        )
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        shards = int(math.ceil(shape.dims[axis] / slices_per_shard))
        partitions[axis] = min(max_shards, shards) if max_shards else shards
        return partitions

    return _partitioner


def min_max_variable_partitioner(
    max_partitions: int = 1,
    axis: int = 0,
    min_slice_size: int = 256 << 10,
    bytes_per_string_element: int = 16,
):
    """A partitioner into as many shards as keep each at least `min_slice_size` bytes, at most
    `max_partitions` (and at most the size of the axis).

    >>> min_max_variable_partitioner(8, min_slice_size=64)(TensorShape([10, 4]), dtypes.float32)
    [3, 1]
    """
    if max_partitions < 1:
        raise ValueError(f"max_partitions must be >= 1, got {max_partitions}")

    def _partitioner(shape, dtype):
        shape = as_shape(shape)
        _check_axis(shape, axis, "min_max_variable_partitioner")
        total = shape.num_elements() * _element_bytes(dtype, bytes_per_string_element)
        partitions = [1] * shape.rank
        partitions[axis] = max(
            1, min(shape.dims[axis], max_partitions, int(math.ceil(total / min_slice_size)))
        )
        return partitions

    return _partitioner


def _check_axis(shape: TensorShape, axis: int, who: str) -> None:
    if shape.rank is None or not shape.is_fully_defined():
        raise ValueError(f"{who}: cannot partition a variable of shape {shape} (not fully defined)")
    if not 0 <= axis < shape.rank:
        raise ValueError(f"{who}: axis {axis} is out of range for a variable of shape {shape}")


# -- slices ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    """What an initializer learns about the shard it fills: the full shape and its offset."""

    full_shape: list
    var_offset: list

    def single_offset(self, shape) -> int:
        axis = self.single_slice_dim(shape)
        return 0 if axis is None else self.var_offset[axis]

    def single_slice_dim(self, shape) -> int | None:
        shape = list(shape)
        for i, (full, part) in enumerate(zip(self.full_shape, shape)):
            if full != part:
                return i
        return None


@dataclasses.dataclass(frozen=True)
class SaveSliceInfo:
    """Where a shard sits in its logical variable (TensorFlow's Variable.SaveSliceInfo)."""

    full_name: str
    full_shape: list
    var_offset: list
    var_shape: list

    @property
    def spec(self) -> str:
        """The checkpoint slice spec, e.g. "10 4 4,3:-" (full shape, then start,length per
        dimension; "-" for a whole dimension)."""
        full = " ".join(str(d) for d in self.full_shape)
        parts = [
            "-" if (o == 0 and n == f) else f"{o},{n}"
            for o, n, f in zip(self.var_offset, self.var_shape, self.full_shape)
        ]
        return f"{full} {':'.join(parts)}"


def shard_layout(shape: TensorShape, partitions, name: str) -> tuple[int, list[tuple[int, int]]]:
    """(the split axis, [(offset, size) per shard]) for `partitions` of `shape`.

    Raises:
        ValueError: the partitions do not fit the shape (wrong length, several axes, more shards
            than slices, a shard count below 1).
    """
    try:
        parts = [int(p) for p in partitions]
    except TypeError:
        raise ValueError(
            f"variable {name}: the partitioner returned {partitions!r}, not a list of ints"
        ) from None
    dims = shape.as_list()
    if len(parts) != len(dims):
        raise ValueError(
            f"variable {name}: the partitioner returned {parts} for shape {shape}; it needs "
            f"one count per dimension ({len(dims)})"
        )
    if any(p < 1 for p in parts):
        raise ValueError(f"variable {name}: the partitioner returned {parts}; counts must be >= 1")
    split = [i for i, p in enumerate(parts) if p > 1]
    if len(split) > 1:
        raise ValueError(
            f"variable {name}: the partitioner returned {parts}; a variable can be partitioned "
            "along one axis only"
        )
    axis = split[0] if split else 0
    n = parts[axis]
    if n > dims[axis]:
        raise ValueError(
            f"variable {name}: cannot split dimension {axis} of shape {shape} ({dims[axis]} "
            f"slices) into {n} shards"
        )
    base, extra = divmod(dims[axis], n)
    layout, offset = [], 0
    for i in range(n):
        size = base + (1 if i < extra else 0)
        layout.append((offset, size))
        offset += size
    return axis, layout


# -- PartitionedVariable ---------------------------------------------------------------------------


class PartitionedVariable:
    """A logical variable made of shards along one axis.

    Iterating gives the shards (ordinary variables); `embedding_lookup` takes it directly.
    Converting it to a tensor (`as_tensor()`, or passing it to an op) concatenates every shard
    into one dense tensor, which a parameter-server job usually wants to avoid: it warns,
    naming the size.
    """

    __array_priority__ = 100
    __array_ufunc__ = None

    def __init__(self, name: str, shape, dtype, variable_list: list, partitions: list):
        self._name = name
        self._shape = as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._variables = list(variable_list)
        self._partitions = list(partitions)
        self._axis = next((i for i, p in enumerate(partitions) if p > 1), 0)

    name = property(lambda self: self._name)
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    graph = property(lambda self: self._variables[0].graph)

    def get_shape(self) -> TensorShape:
        return self._shape

    def __iter__(self):
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)

    def _get_variable_list(self) -> list:
        return list(self._variables)

    def _get_partitions(self) -> list:
        return list(self._partitions)

    @property
    def op(self):
        return self._variables[0].op

    def as_tensor(self) -> Tensor:
        """The whole variable as one tensor (a ConcatV2 of every shard's value)."""
        nbytes = self._shape.num_elements() * self._dtype.size
        warnings.warn(
            f"PartitionedVariable {self._name} (shape {self._shape}, {len(self)} shards) is "
            f"converted to one dense tensor of {nbytes} bytes",
            stacklevel=2,
        )
        with get_default_graph().name_scope(self._name.split("/")[-1] + "/ConcatPartitions"):
            if len(self._variables) == 1:
                return array_ops.identity(self._variables[0].value())
            return reshape_ops.concat([v.value() for v in self._variables], self._axis)

    def _as_tensor(self, dtype=None) -> Tensor:
        if dtype is not None and dtypes.as_dtype(dtype) is not self._dtype:
            raise TypeError(
                f"cannot convert PartitionedVariable {self._name} of dtype {self._dtype.name} "
                f"to {dtypes.as_dtype(dtype).name}"
            )
        return self.as_tensor()

    def assign(self, value, use_locking=None, name=None, read_value: bool = True):
        """Assigns each shard its slice of `value` (the shards' ops, grouped)."""
        g = get_default_graph()
        ops = []
        for v in self._variables:
            info = v._save_slice_info
            with g.colocate_with(v):
                part = slice_op(value, info.var_offset, info.var_shape)
                ops.append(v.assign(part, read_value=False))
        return array_ops.group(*ops, name=name or "assign")

    def __repr__(self) -> str:
        return (
            f"<rill.PartitionedVariable {self._name!r} shape={self._shape} "
            f"dtype={self._dtype.name} shards={len(self)}>"
        )


def _delegate(name: str):
    def method(self, *args):
        return getattr(Tensor, name)(self.as_tensor(), *args)

    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "matmul", "pow"):
    setattr(PartitionedVariable, f"__{_name}__", _delegate(f"__{_name}__"))
    setattr(PartitionedVariable, f"__r{_name}__", _delegate(f"__r{_name}__"))
for _name in ("neg", "getitem"):
    setattr(PartitionedVariable, f"__{_name}__", _delegate(f"__{_name}__"))


def create_partitioned_variable(get_single, name: str, shape, dtype, initializer, partitioner,
                                reuse, found) -> PartitionedVariable:  # fmt: skip
    """The shards of `name` made by `get_single(shard_name, shape, initializer)` and wrapped.

    `found` is the PartitionedVariable already stored under `name` (or None).
    """
    from_value = initializer is not None and not callable(initializer)
    if from_value:
        value = initializer
        if isinstance(value, Tensor):
            shape = value.shape
        else:
            value = np.asarray(value)
            shape = TensorShape(list(value.shape))
    if shape is None:
        raise ValueError(f"variable {name}: a partitioned variable needs a shape")
    shape = as_shape(shape)
    if shape.rank is None or not shape.is_fully_defined():
        raise ValueError(
            f"variable {name}: cannot partition a variable of shape {shape} (not fully defined)"
        )
    if found is not None:
        if not reuse:
            raise ValueError(
                f"Partitioned variable with name {name} already exists. Did you mean to set "
                "reuse=True or reuse=AUTO_REUSE in VarScope?"
            )
        if not shape.is_compatible_with(found.shape):
            raise ValueError(
                f"Trying to reuse partitioned variable {name}, but specified shape {shape} and "
                f"found shape {found.shape}."
            )
        return found
    if reuse is True:
        raise ValueError(
            f"PartitionedVariable {name} does not exist, or was not created with "
            "get_variable(). Did you mean to set reuse=AUTO_REUSE in VarScope?"
        )
    partitions = partitioner(shape=shape, dtype=dtypes.as_dtype(dtype))
    axis, layout = shard_layout(shape, partitions, name)
    full = shape.as_list()
    shards = []
    for i, (offset, size) in enumerate(layout):
        var_offset = [0] * len(full)
        var_offset[axis] = offset
        var_shape = list(full)
        var_shape[axis] = size
        info = PartitionInfo(full_shape=full, var_offset=var_offset)
        if from_value:
            part = (
                value[tuple(slice(o, o + n) for o, n in zip(var_offset, var_shape))]
                if (not isinstance(value, Tensor))
                else slice_op(value, var_offset, var_shape)
            )
            shard_init, shard_shape = part, None
        else:
            shard_init = _shard_initializer(initializer, info)
            shard_shape = var_shape
        v = get_single(f"{name}/part_{i}", shard_shape, shard_init)
        v._save_slice_info = SaveSliceInfo(name, full, var_offset, var_shape)
        shards.append(v)
    parts = [1] * len(full)
    parts[axis] = len(layout)
    return PartitionedVariable(name, shape, dtype, shards, parts)


def _shard_initializer(initializer, info: PartitionInfo):
    """The initializer called with the shard's PartitionInfo (when it takes one)."""
    if initializer is None:
        return None
    import inspect

    try:
        params = inspect.signature(initializer).parameters
        takes = "partition_info" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        takes = False
    if not takes:
        return initializer

    def init(shape, dtype=None, partition_info=None):
        return initializer(shape, dtype=dtype, partition_info=info)

    return init


# -- what the Saver writes -------------------------------------------------------------------------


class SlicedVariable:
    """A logical variable made of shards, as the Saver sees it: written once, whole (the shards
    joined on the writing device), and restored shard by shard from slices of it.

    Raises (at construction):
        ValueError: the shards disagree on the logical shape or dtype, overlap, or leave part of
            the logical variable uncovered (each problem named by slice).
    """

    def __init__(self, name: str, shards: list):
        self.name = name
        infos = [v._save_slice_info for v in shards]
        order = sorted(range(len(shards)), key=lambda i: infos[i].var_offset)
        self.shards = [shards[i] for i in order]
        self.infos = [infos[i] for i in order]
        full = self.infos[0].full_shape
        for v, info in zip(self.shards, self.infos):
            if list(info.full_shape) != list(full) or v.dtype is not self.shards[0].dtype:
                raise ValueError(
                    f"the shards of {name} disagree: {v.op.name} is a slice {info.spec!r} of "
                    f"{v.dtype.name}, {self.shards[0].op.name} a slice {self.infos[0].spec!r} "
                    f"of {self.shards[0].dtype.name}"
                )
        self.full_shape = list(full)
        self.dtype = self.shards[0].dtype
        split = {i for info in self.infos for i, (n, f) in enumerate(zip(info.var_shape, full))
                 if n != f}  # fmt: skip
        self.axis = min(split) if split else 0
        expected = 0
        for info in self.infos:
            if len(split) > 1 or info.var_offset[self.axis] != expected:
                raise ValueError(
                    f"the shards of {name} do not tile its shape {full}: slice {info.spec!r} "
                    f"starts at {info.var_offset}, the previous shards end at row {expected} "
                    f"(a Saver needs every shard of a partitioned variable)"
                )
            expected += info.var_shape[self.axis]
        if full and expected != full[self.axis]:
            raise ValueError(
                f"the shards of {name} cover {expected} of its {full[self.axis]} rows along "
                f"axis {self.axis}: slices {[i.spec for i in self.infos]} (a Saver needs every "
                "shard of a partitioned variable)"
            )

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self.full_shape)

    @property
    def graph(self):
        return self.shards[0].graph

    @property
    def specs(self) -> list[str]:
        return [i.spec for i in self.infos]

    def joined(self) -> Tensor:
        """The logical value: the shards' reads joined along the split axis."""
        g = self.graph
        reads = []
        for v in self.shards:
            with g.colocate_with(v):
                reads.append(v.value())
        if len(reads) == 1:
            return reads[0]
        return reshape_ops.concat(reads, self.axis)


def saver_entries(items: list) -> list:
    """(checkpoint name, Variable or SlicedVariable) pairs for a Saver's var_list items, which
    are (name or None, Variable | PartitionedVariable | list of shards). Shards carrying a
    SaveSliceInfo are grouped under their logical name (or the name given)."""
    out, groups = [], {}
    for name, v in items:
        if isinstance(v, PartitionedVariable):
            v = v._get_variable_list()
        if isinstance(v, (list, tuple)):
            key = name or v[0]._save_slice_info.full_name
            groups.setdefault(key, []).extend(v)
            continue
        info = getattr(v, "_save_slice_info", None)
        if info is not None and name is None:
            groups.setdefault(info.full_name, []).append(v)
            continue
        out.append((name, v))
    for key, shards in groups.items():
        missing = [s for s in shards if getattr(s, "_save_slice_info", None) is None]
        if missing:
            raise TypeError(
                f"var_list[{key!r}] holds {missing[0]!r}, which is not a shard of a partitioned "
                "variable (no SaveSliceInfo)"
            )
        out.append((key, SlicedVariable(key, shards)))
    return out
