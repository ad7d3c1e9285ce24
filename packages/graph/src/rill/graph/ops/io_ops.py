"""Checkpoint ops: SaveV2 writes named tensors under a path prefix, RestoreV2 reads them back.

The file format is rill.exec's (see the "Checkpoint format" section of rill-exec's README); the
graph only names the tensors and their dtypes.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     out = restore_v2("/tmp/model.ckpt", ["w", "b"], ["", ""], [rg.float32, rg.int64])
>>> [t.dtype.name for t in out], out[0].shape
(['float32', 'int64'], TensorShape(None))
"""

from __future__ import annotations

from rill.graph import dtypes as _dtypes
from rill.graph.graph import Operation, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = ["restore_v2", "save_v2"]


def parse_shape_and_slice(spec: str):
    """Parses a TF shape-and-slice string ("4 5 0,2:-": full shape, then one `start,length` or
    `-` per dimension). Returns (full shape, [(start, length) | None per dim]), or None for "".

    >>> parse_shape_and_slice("4 5 0,2:-")
    ([4, 5], [(0, 2), None])
    """
    spec = spec.strip()
    if not spec:
        return None
    parts = spec.split(" ")
    if len(parts) < 1:
        raise ValueError(f"malformed shape_and_slice {spec!r}")
    try:
        dims = [int(p) for p in parts[:-1]]
    except ValueError:
        raise ValueError(
            f"malformed shape_and_slice {spec!r}: the shape must be integers"
        ) from None
    slices = parts[-1].split(":")
    if len(slices) != len(dims) or any(d < 0 for d in dims):
        raise ValueError(
            f"malformed shape_and_slice {spec!r}: {len(dims)} dimensions but {len(slices)} slices"
        )
    out = []
    for d, s in zip(dims, slices):
        if s == "-":
            out.append(None)
            continue
        try:
            start, length = (int(x) for x in s.split(","))
        except ValueError:
            raise ValueError(f"malformed slice {s!r} in shape_and_slice {spec!r}") from None
        if start < 0 or length < 0 or start + length > d:
            raise ValueError(f"slice {s!r} is out of range for dimension {d} in {spec!r}")
        out.append((start, length))
    return dims, out


def _vector_shape(op, i: int, what: str, n: int | None) -> None:
    s = op._inputs[i].shape
    if s.rank is not None and s.rank != 1:
        raise ValueError(f"{what} must be a vector, got shape {s}")
    if n is not None and s.rank == 1 and s[0] is not None and s[0] != n:
        raise ValueError(f"{what} has {s[0]} entries, expected {n} (one per tensor)")


def _check_common(op, n: int) -> None:
    p = op._inputs[0].shape
    if p.rank not in (None, 0):
        raise ValueError(f"prefix must be a scalar, got shape {p}")
    _vector_shape(op, 1, "tensor_names", n)
    _vector_shape(op, 2, "shape_and_slices", n)
    names = constant_value(op._inputs[1])
    specs = constant_value(op._inputs[2])
    if names is not None:
        # One name may appear with several slices (the shards of a partitioned variable).
        keys = names.reshape(-1).tolist()
        if specs is not None and specs.size == names.size:
            keys = list(zip(keys, specs.reshape(-1).tolist()))
        if len(set(keys)) != len(keys):
            raise ValueError(f"tensor_names has duplicates: {names.reshape(-1).tolist()}")


def _save_shape(op):
    _check_common(op, len(op.attrs["dtypes"]))
    return []


def _restore_shape(op):
    n = len(op.attrs["dtypes"])
    _check_common(op, n)
    specs = constant_value(op._inputs[2])
    if specs is None:
        return [unknown_shape()] * n
    out = []
    for s in specs.reshape(-1):
        parsed = parse_shape_and_slice(s.decode() if isinstance(s, bytes) else str(s))
        if parsed is None:
            out.append(unknown_shape())
        else:
            dims, slices = parsed
            out.append(TensorShape([d if sl is None else sl[1] for d, sl in zip(dims, slices)]))
    return out


defop(
    "SaveV2",
    inputs=[
        "prefix: string",
        "tensor_names: string",
        "shape_and_slices: string",
        "tensors: dtypes",
    ],
    attrs=["dtypes: list(type) >= 1"],
    shape=_save_shape,
    stateful=True,
    doc="Writes tensors under the names tensor_names to the checkpoint at prefix.",
)

defop(
    "RestoreV2",
    inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
    outputs=["tensors: dtypes"],
    attrs=["dtypes: list(type) >= 1"],
    shape=_restore_shape,
    stateful=True,
    doc="Reads the tensors named tensor_names from the checkpoint at prefix.",
)

# What TensorFlow's sharded Saver builds around SaveV2 (so its meta graphs import and save).
defop(
    "ShardedFilename",
    inputs=["basename: string", "shard: int32", "num_shards: int32"],
    outputs=["filename: string"],
    shape=lambda op: [TensorShape([])],
    doc='"<basename>-<shard, 5 digits>-of-<num_shards, 5 digits>".',
)
defop(
    "ShardedFilespec",
    inputs=["basename: string", "num_shards: int32"],
    outputs=["filename: string"],
    shape=lambda op: [TensorShape([])],
    doc='"<basename>-?????-of-<num_shards, 5 digits>".',
)
defop(
    "MergeV2Checkpoints",
    inputs=["checkpoint_prefixes: string", "destination_prefix: string"],
    attrs=["delete_old_dirs: bool = true", "allow_missing_files: bool = false"],
    shape=lambda op: [],
    stateful=True,
    doc="Merges the checkpoints at checkpoint_prefixes into one at destination_prefix and "
    "deletes them (and their directories when emptied, with delete_old_dirs).",
)


def save_v2(prefix, tensor_names, shape_and_slices, tensors, name: str = "SaveV2") -> Operation:
    """An op that writes `tensors` under `tensor_names` to the checkpoint at `prefix`.

    `shape_and_slices` has one entry per tensor; "" saves the whole tensor.
    """
    return get_default_graph().create_op(
        "SaveV2",
        [prefix, tensor_names, shape_and_slices, list(tensors)],
        name=name,
    )


def restore_v2(prefix, tensor_names, shape_and_slices, dtypes, name: str = "RestoreV2"):
    """Tensors read from the checkpoint at `prefix`, one per name, of the given dtypes."""
    op = get_default_graph().create_op(
        "RestoreV2",
        [prefix, tensor_names, shape_and_slices],
        {"dtypes": [_dtypes.as_dtype(t) for t in dtypes]},
        name=name,
    )
    return list(op.outputs)
