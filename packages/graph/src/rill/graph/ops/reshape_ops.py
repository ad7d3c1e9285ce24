"""Reshaping, joining, splitting and transposing: Reshape, ExpandDims, Squeeze, ConcatV2,
ConcatOffset, Split, SplitV, Pack, Unpack and Transpose. Re-exported by array_ops.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.slice_ops import contains_tensor, index_value
from rill.graph.shapes import TensorShape, check_rank, unknown_shape
from rill.graph.tensor_util import constant_value, constant_value_as_shape

__all__ = [
    "reshape",
    "expand_dims",
    "squeeze",
    "concat",
    "concat_offset",
    "split",
    "stack",
    "unstack",
    "transpose",
]

_INDEX = "{int32, int64} = int32"


def _ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _create(op_type: str, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name)


# -- reshaping -----------------------------------------------------------------------------------


def _known_elements(s: TensorShape) -> int | None:
    """The number of elements, known when every dimension is, or when one is 0."""
    if s.dims is not None and 0 in s.dims:
        return 0
    return s.num_elements()


def _reshape_shape(op):
    """The target shape, with its single unknown dimension inferred where the sizes allow."""
    given = op._inputs[0].shape
    sizes = op._inputs[1]
    sizes.shape.with_rank(1)
    value = constant_value(sizes)
    if value is not None:
        check_rank(np.size(value), f"the shape given by {sizes.name!r}")
        bad = [int(v) for v in np.asarray(value).reshape(-1) if int(v) < -1]
        if bad:
            raise ValueError(f"the requested shape {_ints(value)} has a size {bad[0]} below -1")
    out = constant_value_as_shape(sizes)
    if out.rank is None or given.rank is None:
        return out

    def split(s: TensorShape) -> tuple[int, list[int]]:
        # (known element count, positions of unknown dims); no unknowns when the count is known.
        n = _known_elements(s)
        if n is not None:
            return n, []
        unknown = [i for i, d in enumerate(s.dims) if d is None]
        return int(np.prod([d for d in s.dims if d is not None], dtype=np.int64)), unknown

    known_in, in_unknown = split(given)
    known_out, out_unknown = split(out)
    if len(in_unknown) > 1 or len(out_unknown) > 1:
        return out
    if not in_unknown and not out_unknown:
        if known_in != known_out:
            raise ValueError(
                f"cannot reshape a tensor with {known_in} elements to shape {out} "
                f"({known_out} elements)"
            )
    elif not in_unknown and known_out > 0:
        if known_in % known_out:
            raise ValueError(
                f"cannot reshape a tensor with {known_in} elements to shape {out}: "
                f"{known_in} is not a multiple of {known_out}"
            )
        dims = list(out.dims)
        dims[out_unknown[0]] = known_in // known_out
        return TensorShape(dims)
    elif not out_unknown and in_unknown and known_in != 0:
        if known_out % known_in:
            raise ValueError(
                f"cannot reshape a tensor of shape {given} to shape {out}: {known_out} elements "
                f"is not a multiple of the {known_in} known input elements"
            )
    elif in_unknown and out_unknown and known_in == known_out:
        dims = list(out.dims)
        dims[out_unknown[0]] = given.dims[in_unknown[0]]
        return TensorShape(dims)
    return out


defop(
    "Reshape",
    inputs=["tensor: T", "shape: Tshape"],
    outputs=["output: T"],
    attrs=["T: type", f"Tshape: {_INDEX}"],
    shape=_reshape_shape,
    doc="`tensor`'s elements in row-major order with shape `shape` (one entry may be -1).",
)


def _expand_dims_shape(op):
    given = op._inputs[0].shape
    dim = constant_value(op._inputs[1])
    if given.rank is None:
        return unknown_shape()
    if dim is None:
        return unknown_shape(given.rank + 1)
    if np.size(dim) != 1:
        raise ValueError(f"'dim' must hold a single value, got {_ints(dim)}")
    d = _ints(dim)[0]
    r = given.rank
    if not -r - 1 <= d <= r:
        raise ValueError(f"dim {d} is out of range [{-r - 1}, {r}] for input of shape {given}")
    d = d + r + 1 if d < 0 else d
    return TensorShape(given.dims[:d] + (1,) + given.dims[d:])


defop(
    "ExpandDims",
    inputs=["input: T", "dim: Tdim"],
    outputs=["output: T"],
    attrs=["T: type", f"Tdim: {_INDEX}"],
    shape=_expand_dims_shape,
    doc="Inserts a dimension of size 1 at index `dim`.",
)


def _squeeze_shape(op):
    given = op._inputs[0].shape
    if given.rank is None:
        return unknown_shape()
    r = given.rank
    wanted = set()
    for d in op.attrs["squeeze_dims"]:
        if not -r <= d < r:
            raise ValueError(f"cannot squeeze dim {d} of a tensor of rank {r} (shape {given})")
        wanted.add(d % r)
    out = []
    for i, d in enumerate(given.dims):
        if wanted:
            if i in wanted:
                if d is not None and d != 1:
                    raise ValueError(f"cannot squeeze dim {i} of shape {given}: its size is {d}")
                continue
        elif d is None:
            return unknown_shape()  # it may or may not be 1 at run time
        elif d == 1:
            continue
        out.append(d)
    return TensorShape(out)


defop(
    "Squeeze",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "squeeze_dims: list(int) >= 0 = []"],
    shape=_squeeze_shape,
    doc="Removes dimensions of size 1 (those in `squeeze_dims`, or all of them).",
)

# -- joining and splitting -----------------------------------------------------------------------


def _concat_shapes(shapes: list[TensorShape], axis: int | None) -> TensorShape:
    r = None
    for s in shapes:
        if s.rank is not None:
            if r is not None and s.rank != r:
                raise ValueError(
                    f"all inputs must have the same rank; got shapes {[str(x) for x in shapes]}"
                )
            r = s.rank
    if r is None:
        return unknown_shape()
    if r == 0:
        raise ValueError("cannot concatenate scalars (use stack instead)")
    if axis is None:
        return unknown_shape(r)
    if not -r <= axis < r:
        raise ValueError(f"axis {axis} is out of range [{-r}, {r}) for inputs of rank {r}")
    axis %= r
    dims: list[int | None] = [None] * r
    total: int | None = 0
    for s in shapes:
        if s.rank is None:
            total = None
            continue
        for i, d in enumerate(s.dims):
            if i == axis:
                total = None if total is None or d is None else total + d
            elif d is not None:
                if dims[i] is not None and dims[i] != d:
                    raise ValueError(
                        f"dimension {i} must be equal in all inputs but is {dims[i]} and {d}; "
                        f"shapes are {[str(x) for x in shapes]}"
                    )
                dims[i] = d
    dims[axis] = total
    return TensorShape(dims)


def _concat_v2_shape(op):
    axis = constant_value(op._inputs[-1])
    return _concat_shapes([t.shape for t in op._inputs[:-1]], None if axis is None else int(axis))


defop(
    "ConcatV2",
    inputs=["values: N * T", "axis: Tidx"],
    outputs=["output: T"],
    attrs=["N: int >= 2", "T: type", f"Tidx: {_INDEX}"],
    shape=_concat_v2_shape,
    doc="Joins `values` along dimension `axis`.",
)

defop(
    "ConcatOffset",
    inputs=["concat_dim: int32", "shape: N * shape_type"],
    outputs=["offset: N * shape_type"],
    attrs=["N: int >= 2", f"shape_type: {_INDEX}"],
    shape=lambda op: [t.shape.with_rank(1) for t in op._inputs[1:]],
    doc="Where each input of a concat along `concat_dim` starts in the output (for gradients).",
)


def _split_shape(op):
    axis = constant_value(op._inputs[0])
    given = op._inputs[1].shape
    n = op.attrs["num_split"]
    if given.rank is None:
        return [unknown_shape()] * n
    if axis is None:
        return [unknown_shape(given.rank)] * n
    a = shape_fns.canonical_axis(int(axis), given.rank, "split_dim")
    d = given.dims[a]
    if d is not None and d % n:
        raise ValueError(f"dimension {a} of shape {given} (size {d}) is not divisible by {n}")
    dims = list(given.dims)
    dims[a] = None if d is None else d // n
    return [TensorShape(dims)] * n


defop(
    "Split",
    inputs=["split_dim: int32", "value: T"],
    outputs=["output: num_split * T"],
    attrs=["num_split: int >= 1", "T: type"],
    shape=_split_shape,
    doc="Splits `value` into `num_split` equal pieces along `split_dim`.",
)


def _split_v_shape(op):
    given = op._inputs[0].shape
    sizes = constant_value(op._inputs[1])
    axis = constant_value(op._inputs[2])
    n = op.attrs["num_split"]
    if given.rank is None:
        return [unknown_shape()] * n
    if axis is None:
        return [unknown_shape(given.rank)] * n
    a = shape_fns.canonical_axis(int(axis), given.rank, "split_dim")
    if sizes is None:
        return [TensorShape(given.dims[:a] + (None,) + given.dims[a + 1 :])] * n
    sizes = _ints(sizes)
    if len(sizes) != n:
        raise ValueError(f"size_splits has {len(sizes)} entries but num_split is {n}")
    if sizes.count(-1) > 1:
        raise ValueError(f"size_splits {sizes} has more than one -1")
    if any(s < -1 for s in sizes):
        raise ValueError(f"size_splits {sizes} has a negative size")
    d = given.dims[a]
    known = sum(s for s in sizes if s != -1)
    if d is not None and ((-1 in sizes and known > d) or (-1 not in sizes and known != d)):
        raise ValueError(
            f"size_splits {sizes} must sum to dimension {a} of shape {given} ({d}), or stay "
            "below it when one size is -1"
        )
    out = []
    for s in sizes:
        size = s if s != -1 else (None if d is None else d - known)
        out.append(TensorShape(given.dims[:a] + (size,) + given.dims[a + 1 :]))
    return out


defop(
    "SplitV",
    inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
    outputs=["output: num_split * T"],
    attrs=["num_split: int >= 1", "T: type", "Tlen: {int8, int32, int64} = int64"],
    shape=_split_v_shape,
    doc="Splits `value` along `split_dim` into pieces of the sizes in `size_splits`.",
)


def _pack_shape(op):
    s = shape_fns.merge_all_inputs(op)
    if s.rank is None:
        return unknown_shape()
    axis = shape_fns.canonical_axis(op.attrs["axis"], s.rank + 1)
    return TensorShape(s.dims[:axis] + (len(op._inputs),) + s.dims[axis:])


defop(
    "Pack",
    inputs=["values: N * T"],
    outputs=["output: T"],
    attrs=["N: int >= 1", "T: type", "axis: int = 0"],
    shape=_pack_shape,
    doc="Stacks N tensors of one shape into a tensor of rank one higher, along `axis`.",
)


def _unpack_shape(op):
    given = op._inputs[0].shape
    n = op.attrs["num"]
    if given.rank is None:
        return [unknown_shape()] * n
    axis = shape_fns.canonical_axis(op.attrs["axis"], given.rank)
    if given.dims[axis] is not None and given.dims[axis] != n:
        raise ValueError(f"dimension {axis} of shape {given} must be num={n}")
    return [TensorShape(given.dims[:axis] + given.dims[axis + 1 :])] * n


defop(
    "Unpack",
    inputs=["value: T"],
    outputs=["output: num * T"],
    attrs=["num: int >= 0", "T: type", "axis: int = 0"],
    shape=_unpack_shape,
    doc="Splits `value` along `axis` into `num` tensors of rank one lower.",
)

# -- permutations and broadcasting -------------------------------------------------------------


def _check_permutation(perm: list[int], rank: int) -> list[int]:
    out = [p + rank if p < 0 else p for p in perm]
    if sorted(out) != list(range(rank)):
        raise ValueError(f"perm {perm} is not a permutation of the {rank} dimensions")
    return out


def _transpose_shape(op):
    given = op._inputs[0].shape
    perm_shape = op._inputs[1].shape.with_rank(1)
    r = given.rank if given.rank is not None else perm_shape[0]
    if r is None:
        return unknown_shape()
    if perm_shape[0] is not None and perm_shape[0] != r:
        raise ValueError(f"perm has {perm_shape[0]} entries but the input has rank {r}")
    perm = constant_value(op._inputs[1])
    if perm is None:
        return unknown_shape(r)
    perm = _check_permutation(_ints(perm), r)
    if given.rank is None:
        return unknown_shape(r)
    return TensorShape([given.dims[p] for p in perm])


defop(
    "Transpose",
    inputs=["x: T", "perm: Tperm"],
    outputs=["y: T"],
    attrs=["T: type", f"Tperm: {_INDEX}"],
    shape=_transpose_shape,
    doc="Permutes the dimensions of `x`: output dimension i is input dimension perm[i].",
)


# -- builders ---------------------------------------------------------------------------------------


def reshape(tensor, shape, name: str | None = None) -> Tensor:
    """`tensor` with a new shape; one entry of `shape` may be -1 and is inferred.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     reshape(rg.placeholder(rg.float32, [4, 6]), [-1, 3]).shape
    TensorShape([8, 3])
    """
    return _create("Reshape", [tensor, index_value(shape)], name=name or "Reshape").outputs[0]


def expand_dims(input, axis=None, name: str | None = None, dim=None) -> Tensor:
    """`input` with a dimension of size 1 inserted at `axis` (`dim` is the old name)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("expand_dims needs an axis")
    return _create("ExpandDims", [input, axis], name=name or "ExpandDims").outputs[0]


def squeeze(input, axis=None, name: str | None = None, squeeze_dims=None) -> Tensor:
    """`input` without its dimensions of size 1 (only those in `axis` when given)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("cannot specify both 'axis' and 'squeeze_dims'")
        axis = squeeze_dims
    if isinstance(axis, (int, np.integer)):
        axis = [axis]
    attrs = {"squeeze_dims": list(axis or [])}
    return _create("Squeeze", [input], attrs, name or "Squeeze").outputs[0]


def concat(values, axis, name: str = "concat") -> Tensor:
    """Joins `values` along `axis`; a single value passes through an Identity.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [None, 3])
    ...     concat([x, rg.placeholder(rg.float32, [2, 3])], 0).shape
    TensorShape([None, 3])
    """
    values = list(values)
    if len(values) == 1:
        g = get_default_graph()
        with g.name_scope(name) as scope:
            a = convert_to_tensor(axis, dtype=dtypes.int32, name="concat_dim")
            if a.shape.rank not in (None, 0):
                raise ValueError(f"axis must be a scalar, got shape {a.shape}")
            return _create("Identity", [values[0]], name=scope).outputs[0]
    return _create("ConcatV2", [values, axis], name=name).outputs[0]


def concat_offset(concat_dim, shape, name: str | None = None) -> list[Tensor]:
    """The offset of each input of a concat along `concat_dim` (used by concat's gradient)."""
    return _create("ConcatOffset", [concat_dim, list(shape)], name=name or "ConcatOffset").outputs


def split(value, num_or_size_splits, axis=0, num=None, name: str = "split") -> list[Tensor]:
    """Splits `value` along `axis`: into that many equal pieces (Split), or pieces of the given
    sizes (SplitV; one size may be -1).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     [t.shape for t in split(rg.placeholder(rg.float32, [4, 6]), [1, -1], axis=1)]
    [TensorShape([4, 1]), TensorShape([4, 5])]
    """
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(
        num_or_size_splits, bool
    ):
        attrs = {"num_split": int(num_or_size_splits)}
        return _create("Split", [axis, value], attrs, name).outputs
    sizes = convert_to_tensor(num_or_size_splits)
    if sizes.shape.rank == 0:
        raise ValueError(
            "a rank-0 tensor is not a valid num_or_size_splits; pass a Python int for equal "
            f"pieces or a 1-D tensor of sizes, got {num_or_size_splits!r}"
        )
    if num is None:
        num = sizes.shape[0] if sizes.shape.rank == 1 else None
        if num is None:
            raise ValueError(f"cannot infer num from the shape of {num_or_size_splits!r}")
    return _create("SplitV", [value, sizes, axis], {"num_split": num}, name).outputs


def stack(values, axis: int = 0, name: str = "stack") -> Tensor:
    """Stacks tensors of one shape along a new dimension `axis` (Pack).

    A list of plain Python or numpy values stacked along axis 0 becomes one constant.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     stack([rg.placeholder(rg.float32, [3]), rg.placeholder(rg.float32, [3])], 1).shape
    TensorShape([3, 2])
    """
    values = list(values)
    if axis == 0 and not contains_tensor(values):
        return convert_to_tensor(values, name=name)
    return _create("Pack", [values], {"axis": axis}, name).outputs[0]


def unstack(value, num: int | None = None, axis: int = 0, name: str = "unstack") -> list[Tensor]:
    """Splits `value` along `axis` into `num` tensors of rank one lower (Unpack)."""
    value = convert_to_tensor(value)
    if num is None:
        s = value.shape
        if s.rank is not None:
            num = s.dims[shape_fns.canonical_axis(axis, s.rank)]
        if num is None:
            raise ValueError(f"cannot infer num from shape {s}; pass num=")
    return _create("Unpack", [value], {"num": num, "axis": axis}, name).outputs


def transpose(a, perm=None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """Permutes the dimensions of `a`; `perm=None` reverses them.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     transpose(rg.placeholder(rg.float32, [2, 3, 4])).shape
    TensorShape([4, 3, 2])
    """
    a = convert_to_tensor(a)
    if conjugate and a.dtype.is_complex:
        raise NotImplementedError("transpose(conjugate=True) of complex tensors is not supported")
    if perm is not None:
        return _create("Transpose", [a, index_value(perm)], name=name).outputs[0]
    if a.shape.rank is not None:
        perm = np.arange(a.shape.rank - 1, -1, -1, dtype=np.int32)
        return _create("Transpose", [a, perm], name=name).outputs[0]
    from rill.graph.ops import math_ops

    sub, rng = getattr(math_ops, "subtract", None), getattr(math_ops, "range", None)
    if sub is None or rng is None:
        raise NotImplementedError("transpose of a tensor of unknown rank needs Sub and Range")
    g = get_default_graph()
    with g.name_scope(name) as scope:
        r = _create("Rank", [a], name="Rank").outputs[0]
        perm = rng(sub(r, 1), -1, -1)
        return _create("Transpose", [a, perm], name=scope).outputs[0]
