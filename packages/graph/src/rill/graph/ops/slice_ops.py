"""Slicing, padding, tiling and reversing: Slice, StridedSlice (and `Tensor.__getitem__`),
StridedSliceGrad, Tile, Pad, PadV2, MirrorPad, ReverseV2.

`strided_slice_items` turns StridedSlice's sparse spec (begin/end/strides and five bit masks)
into one item per output position; the shape functions here and the kernels in rill.exec share
it, so static shapes and run-time results follow the same rules.
"""

from __future__ import annotations

import builtins

import numpy as np

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, constant, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value, constant_value_as_shape

__all__ = [
    "slice",
    "strided_slice",
    "strided_slice_grad",
    "tile",
    "pad",
    "reverse",
    "reverse_v2",
    "strided_slice_items",
]

_SLICE_MASKS = [
    "begin_mask: int = 0",
    "end_mask: int = 0",
    "ellipsis_mask: int = 0",
    "new_axis_mask: int = 0",
    "shrink_axis_mask: int = 0",
]
_MASK_NAMES = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
# A begin or end value that is not known while building the graph.
UNKNOWN = object()


def _ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def contains_tensor(values) -> bool:
    """Whether a (nested) list holds a Tensor, so it must be packed rather than made a Const."""
    for v in values:
        if isinstance(v, Tensor) or hasattr(v, "_as_tensor"):
            return True
        if isinstance(v, (list, tuple)) and contains_tensor(v):
            return True
    return False


def index_value(value):
    """`value` ready to pass as an integer input: Python ints and lists of them (empty ones
    included) become int32 arrays (int64 when too big), TensorFlow's default index type."""
    if isinstance(value, (Tensor, np.ndarray, np.generic)) or hasattr(value, "_as_tensor"):
        return value
    if isinstance(value, (list, tuple)) and contains_tensor(value):
        return value
    try:
        arr = np.asarray(value)
    except ValueError:
        return value
    if arr.size == 0 and arr.dtype.kind == "f":
        return arr.astype(np.int32)
    if arr.dtype.kind in "iu" and arr.size:
        big = arr.max() >= 2**31 or arr.min() < -(2**31)
        return arr.astype(np.int64 if big else np.int32)
    return value


# -- Slice ---------------------------------------------------------------------------------------


def _slice_shape(op):
    given = op._inputs[0].shape
    n = op._inputs[1].shape.with_rank(1).merge_with(op._inputs[2].shape.with_rank(1))[0]
    r = given.rank if given.rank is not None else n
    if r is None:
        return unknown_shape()
    if n is not None and n != r:
        raise ValueError(f"begin and size have {n} entries but the input has rank {r}")
    begin = constant_value(op._inputs[1])
    size = constant_value(op._inputs[2])
    if size is None:
        partial = constant_value_as_shape(op._inputs[2])
        return partial if partial.rank == r else unknown_shape(r)
    size = _ints(size)
    dims = []
    for i, s in enumerate(size):
        d = given.dims[i] if given.rank is not None else None
        b = None if begin is None else _ints(begin)[i]
        if b is not None and d is not None and not 0 <= b <= d:
            raise ValueError(f"begin[{i}] = {b} is not in [0, {d}] for input of shape {given}")
        if s == -1:
            dims.append(None if b is None or d is None else d - b)
            continue
        if s < -1 or (b is not None and d is not None and b + s > d):
            limit = "" if b is None or d is None else f" in [0, {d - b}]"
            raise ValueError(
                f"size[{i}] = {s} is not{limit or ' >= -1'} for input of shape {given}"
            )
        dims.append(s)
    return TensorShape(dims)


defop(
    "Slice",
    inputs=["input: T", "begin: Index", "size: Index"],
    outputs=["output: T"],
    attrs=["T: type", "Index: {int32, int64}"],
    shape=_slice_shape,
    doc="The block of `input` starting at `begin` with extent `size` (-1: to the end).",
)

# -- StridedSlice --------------------------------------------------------------------------------


def strided_slice_items(
    rank: int,
    begin,
    end,
    strides: list[int],
    begin_mask: int = 0,
    end_mask: int = 0,
    ellipsis_mask: int = 0,
    new_axis_mask: int = 0,
    shrink_axis_mask: int = 0,
) -> list[tuple]:
    """Expands a sparse strided-slice spec into one item per position of the index tuple.

    Items are ("new",), ("index", b, s) or ("range", b, e, s), in numpy's indexing order; every
    item but "new" consumes one input dimension, and together they consume all `rank` of them
    (an implicit trailing ellipsis). A masked begin or end is None; a value not known while
    building the graph (begin or end passed as None) is UNKNOWN. Raises ValueError for a spec
    no input of this rank accepts; `canonical_index` checks an index against its dimension.

    >>> strided_slice_items(3, [1, 0], [2, 0], [1, 1], shrink_axis_mask=1, ellipsis_mask=2)
    [('index', 1, 1), ('range', None, None, 1), ('range', None, None, 1)]
    """
    n = len(strides)
    ellipses = [i for i in range(n) if ellipsis_mask >> i & 1]
    if len(ellipses) > 1:
        raise ValueError(
            f"the slice spec has more than one ellipsis (ellipsis_mask={ellipsis_mask})"
        )
    consumed = sum(
        1 for i in range(n) if not (ellipsis_mask >> i & 1) and not (new_axis_mask >> i & 1)
    )
    if consumed > rank:
        if rank == 0:
            raise ValueError("cannot slice a scalar: it has no dimensions to index")
        raise ValueError(f"the slice spec indexes {consumed} dimensions but the input has {rank}")
    full = ("range", None, None, 1)
    items: list[tuple] = []
    for i in range(n):
        bit = 1 << i
        if ellipsis_mask & bit:
            items.extend([full] * (rank - consumed))
            continue
        if new_axis_mask & bit:
            items.append(("new",))
            continue
        s = int(strides[i])
        if s == 0:
            raise ValueError(f"strides[{i}] must be non-zero")
        b = UNKNOWN if begin is None else int(begin[i])
        if shrink_axis_mask & bit:
            # An index ignores begin_mask and end, as in TensorFlow.
            items.append(("index", b, s))
            continue
        e = UNKNOWN if end is None else int(end[i])
        items.append(("range", None if begin_mask & bit else b, None if end_mask & bit else e, s))
    if not ellipses:
        items.extend([full] * (rank - consumed))
    return items


def canonical_index(item: tuple, dim: int, position: int) -> int:
    """The in-range form of an ("index", b, s) item for a dimension of size `dim`; ValueError
    when it is outside, or when its stride is negative (TensorFlow refuses that)."""
    _, b, s = item
    if s < 0:
        raise ValueError(f"an index (into dimension {position}) needs a positive stride, got {s}")
    x = b + dim if b < 0 else b
    if not 0 <= x < dim:
        raise ValueError(f"index {b} is out of bounds for dimension {position} of size {dim}")
    return x


def _strided_slice_shape_of(op, given: TensorShape) -> TensorShape:
    ins = op._inputs
    n = ins[1].shape.with_rank(1)
    for t in ins[2:4]:
        try:
            n = n.merge_with(t.shape.with_rank(1))
        except ValueError:
            raise ValueError(
                "begin, end and strides must be 1-D of equal length; got shapes "
                f"{ins[1].shape}, {ins[2].shape}, {ins[3].shape}"
            ) from None
    strides = constant_value(ins[3])
    # Strides known only at run time (x[::k]): the spec's length and masks still fix the rank;
    # every ranged dimension is then unknown.
    strided = strides is not None
    if given.rank is None or (not strided and n.dims[0] is None):
        return unknown_shape()
    begin, end = constant_value(ins[1]), constant_value(ins[2])
    masks = {k: op.attrs[k] for k in _MASK_NAMES}
    items = strided_slice_items(
        given.rank,
        None if begin is None or not strided else _ints(begin),
        None if end is None or not strided else _ints(end),
        # Unknown strides stand in as 2s: the spec's own ranges are then told apart from the
        # whole dimensions an ellipsis or the implicit tail adds (stride 1).
        _ints(strides) if strided else [2] * n.dims[0],
        **masks,
    )
    dims: list[int | None] = []
    k = 0
    for item in items:
        if item[0] == "new":
            dims.append(1)
            continue
        d = given.dims[k]
        if item[0] == "index":
            if d is not None and item[2] < 0:
                # Checked even when begin is unknown, as in TensorFlow.
                raise ValueError(f"an index (into dimension {k}) needs a positive stride")
            if d is not None and item[1] is not UNKNOWN:
                canonical_index(item, d, k)
        else:
            _, b, e, s = item
            if d is None or b is UNKNOWN or e is UNKNOWN or (not strided and s != 1):
                dims.append(None)
            else:
                dims.append(len(range(*builtins.slice(b, e, s).indices(d))))
        k += 1
    return TensorShape(dims)


defop(
    "StridedSlice",
    inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
    outputs=["output: T"],
    attrs=["T: type", "Index: {int16, int32, int64}", *_SLICE_MASKS],
    shape=lambda op: _strided_slice_shape_of(op, op._inputs[0].shape),
    doc="Python-style slicing: input[begin:end:strides] per dimension, with masks for omitted "
    "bounds, ellipsis, new axes and indices that drop a dimension.",
)


def _strided_slice_grad_shape(op):
    out = constant_value_as_shape(op._inputs[0])
    forward = _strided_slice_shape_of(op, out)
    dy = op._inputs[4].shape
    if not dy.is_compatible_with(forward):
        raise ValueError(f"dy has shape {dy} but slicing shape {out} gives {forward}")
    return out


defop(
    "StridedSliceGrad",
    inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
    outputs=["output: T"],
    attrs=["T: type", "Index: {int32, int64}", *_SLICE_MASKS],
    shape=_strided_slice_grad_shape,
    doc="Scatters `dy` into zeros of shape `shape` at the positions StridedSlice read.",
)

# -- Tile, Pad, ReverseV2 ------------------------------------------------------------------------


def _tile_shape(op):
    given = op._inputs[0].shape
    mshape = op._inputs[1].shape.with_rank(1)
    r = given.rank if given.rank is not None else mshape[0]
    if r is None:
        return unknown_shape()
    if mshape[0] is not None and mshape[0] != r:
        raise ValueError(f"multiples has {mshape[0]} entries but the input has rank {r}")
    mult = constant_value_as_shape(op._inputs[1])
    value = constant_value(op._inputs[1])
    if value is not None and any(m < 0 for m in _ints(value)):
        raise ValueError(f"multiples must be >= 0, got {_ints(value)}")
    if mult.rank is None:
        mult = unknown_shape(r)
    dims = given.dims if given.rank is not None else (None,) * r
    out = []
    for d, m in zip(dims, mult.dims):
        # A known 0 on either side makes the product 0, as in TensorFlow.
        out.append(0 if 0 in (d, m) else None if d is None or m is None else d * m)
    return TensorShape(out)


defop(
    "Tile",
    inputs=["input: T", "multiples: Tmultiples"],
    outputs=["output: T"],
    attrs=["T: type", "Tmultiples: {int32, int64} = int32"],
    shape=_tile_shape,
    doc="`input` repeated multiples[i] times along dimension i.",
)


def _pad_shape(op, mirror: str | None = None):
    given = op._inputs[0].shape
    pshape = op._inputs[1].shape.with_rank(2)
    if pshape[1] is not None and pshape[1] != 2:
        raise ValueError(f"paddings must have shape [rank, 2], got {pshape}")
    if len(op._inputs) > 2:
        op._inputs[2].shape.with_rank(0)
    r = given.rank if given.rank is not None else pshape[0]
    if r is None:
        return unknown_shape()
    if pshape[0] is not None and pshape[0] != r:
        raise ValueError(f"paddings has {pshape[0]} rows but the input has rank {r}")
    value = constant_value(op._inputs[1])
    if value is None:
        return unknown_shape(r)
    pads = np.asarray(value).reshape(r, 2)
    dims = given.dims if given.rank is not None else (None,) * r
    out = []
    for i, (d, (lo, hi)) in enumerate(zip(dims, pads.tolist())):
        if lo < 0 or hi < 0:
            raise ValueError(f"paddings must be >= 0, got {pads.tolist()}")
        if mirror and d is not None:
            limit = d if mirror == "SYMMETRIC" else d - 1
            if lo > limit or hi > limit:
                raise ValueError(
                    f"{mirror} paddings of dimension {i} (size {d}) must be at most {limit}, "
                    f"got [{lo}, {hi}]"
                )
        out.append(None if d is None else d + lo + hi)
    return TensorShape(out)


_PAD_DOC = "`input` with paddings[i] = [before, after] elements added around dimension i"

defop(
    "Pad",
    inputs=["input: T", "paddings: Tpaddings"],
    outputs=["output: T"],
    attrs=["T: type", "Tpaddings: {int32, int64} = int32"],
    shape=_pad_shape,
    doc=_PAD_DOC + " (zeros).",
)

defop(
    "PadV2",
    inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
    outputs=["output: T"],
    attrs=["T: type", "Tpaddings: {int32, int64} = int32"],
    shape=_pad_shape,
    doc=_PAD_DOC + " (`constant_values`).",
)

defop(
    "MirrorPad",
    inputs=["input: T", "paddings: Tpaddings"],
    outputs=["output: T"],
    attrs=["T: type", "Tpaddings: {int32, int64} = int32", "mode: {'REFLECT', 'SYMMETRIC'}"],
    shape=lambda op: _pad_shape(op, op.attrs["mode"]),
    doc=_PAD_DOC + " (mirrored; REFLECT leaves out the edge, SYMMETRIC repeats it).",
)


def _reverse_shape(op):
    given = op._inputs[0].shape
    op._inputs[1].shape.with_rank(1)
    axes = constant_value(op._inputs[1])
    if axes is not None and given.rank is not None:
        seen = set()
        for a in _ints(axes):
            c = shape_fns.canonical_axis(a, given.rank)
            if c in seen:
                raise ValueError(f"axis {c} is given more than once in {_ints(axes)}")
            seen.add(c)
    return given


defop(
    "ReverseV2",
    inputs=["tensor: T", "axis: Tidx"],
    outputs=["output: T"],
    attrs=[
        "Tidx: {int32, int64} = int32",
        "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, half, "
        "float, double, complex64, complex128, string}",
    ],
    shape=_reverse_shape,
    doc="`tensor` with the dimensions in `axis` reversed.",
)

# -- builders --------------------------------------------------------------------------------


def _create(op_type: str, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name)


def slice(input_, begin, size, name: str | None = None) -> Tensor:
    """The block of `input_` at `begin` of extent `size` (-1 takes the rest of a dimension).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     slice(rg.placeholder(rg.float32, [4, 5]), [1, 2], [2, -1]).shape
    TensorShape([2, 3])
    """
    return _create(
        "Slice", [input_, index_value(begin), index_value(size)], name=name or "Slice"
    ).outputs[0]


def strided_slice(
    input_,
    begin,
    end,
    strides=None,
    begin_mask: int = 0,
    end_mask: int = 0,
    ellipsis_mask: int = 0,
    new_axis_mask: int = 0,
    shrink_axis_mask: int = 0,
    var=None,
    name: str | None = None,
) -> Tensor:
    """input_[begin:end:strides] with TensorFlow's masks (see `Tensor.__getitem__`)."""
    del var  # TF uses it for sliced assignment to variables, which rill does not offer
    begin, end = index_value(begin), index_value(end)
    if strides is None:
        from rill.graph.ops.array_ops import ones_like

        strides = ones_like(begin)
    strides = index_value(strides)
    attrs = dict(zip(_MASK_NAMES, (begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                   shrink_axis_mask)))  # fmt: skip
    op = _create("StridedSlice", [input_, begin, end, strides], attrs, name or "StridedSlice")
    return op.outputs[0]


def strided_slice_grad(
    shape, begin, end, strides, dy, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
    shrink_axis_mask=0, name: str | None = None,
) -> Tensor:  # fmt: skip
    """The gradient of StridedSlice: `dy` scattered into zeros of the forward input's shape."""
    attrs = dict(zip(_MASK_NAMES, (begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                   shrink_axis_mask)))  # fmt: skip
    ints = [index_value(v) for v in (shape, begin, end, strides)]
    op = _create("StridedSliceGrad", [*ints, dy], attrs,
                 name or "StridedSliceGrad")  # fmt: skip
    return op.outputs[0]


def tile(input, multiples, name: str | None = None) -> Tensor:
    """`input` repeated multiples[i] times along each dimension i."""
    return _create("Tile", [input, index_value(multiples)], name=name or "Tile").outputs[0]


def pad(tensor, paddings, mode: str = "CONSTANT", name: str | None = None, constant_values=0):
    """Pads `tensor`: CONSTANT (Pad, or PadV2 for a non-zero value), REFLECT or SYMMETRIC
    (MirrorPad). Mode names are case-insensitive.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [2, 3])
    ...     [pad(x, [[1, 1], [0, 2]], m).op.type for m in ("constant", "REFLECT")]
    ['Pad', 'MirrorPad']
    """
    mode = mode.upper()
    paddings = index_value(paddings)
    if mode == "CONSTANT":
        if (
            not isinstance(constant_values, Tensor)
            and np.ndim(constant_values) == 0
            and constant_values == np.zeros_like(constant_values)
        ):
            return _create("Pad", [tensor, paddings], name=name or "Pad").outputs[0]
        op = _create("PadV2", [tensor, paddings, constant_values], name=name or "PadV2")
        return op.outputs[0]
    if mode in ("REFLECT", "SYMMETRIC"):
        attrs = {"mode": mode}
        return _create("MirrorPad", [tensor, paddings], attrs, name or "MirrorPad").outputs[0]
    raise ValueError(f"unknown padding mode {mode!r}; expected CONSTANT, REFLECT or SYMMETRIC")


def reverse(tensor, axis, name: str | None = None) -> Tensor:
    """`tensor` with the dimensions listed in `axis` reversed (ReverseV2)."""
    return _create("ReverseV2", [tensor, index_value(axis)], name=name or "ReverseV2").outputs[0]


reverse_v2 = reverse

# -- Tensor.__getitem__ ---------------------------------------------------------------------


def _index_dtype(parts) -> dtypes.DType:
    tensor_types = {p.dtype for p in parts if isinstance(p, Tensor)}
    if len(tensor_types) > 1:
        names = sorted(t.name for t in tensor_types)
        raise TypeError(f"index tensors have different dtypes ({', '.join(names)}); cast them")
    for p in parts:
        if isinstance(p, Tensor) and p.dtype is dtypes.int64:
            return dtypes.int64
        if isinstance(p, (int, np.integer)) and not -(2**31) <= int(p) < 2**31:
            return dtypes.int64
    return dtypes.int32


def _check_index(idx) -> None:
    if isinstance(idx, (bool, np.bool_)):
        raise TypeError(f"a bool ({idx!r}) is not a valid index; boolean masks are not supported")
    if isinstance(idx, (int, np.integer)):
        return
    if isinstance(idx, Tensor):
        if idx.dtype not in (dtypes.int32, dtypes.int64, dtypes.int16):
            raise TypeError(f"index tensor {idx.name} has dtype {idx.dtype.name}; need int32/int64")
        if idx.shape.rank not in (None, 0):
            raise TypeError(f"index tensor {idx.name} has shape {idx.shape}; need a scalar")
        return
    raise TypeError(
        "only integers, slices (`:`), ellipsis (`...`), None (newaxis) and scalar int32/int64 "
        f"tensors are valid indices, got {idx!r}"
    )


def _plus_one(t: Tensor, g) -> Tensor:
    with g.as_default():
        return g.create_op("AddV2", [t, np.array(1, t.dtype.np)], name="add").outputs[0]


def _slice_helper(tensor: Tensor, slice_spec) -> Tensor:
    """`tensor[slice_spec]` as one StridedSlice op, as TensorFlow-1 builds it.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [5, 6, 7])
    ...     x[1:, ..., None, ::-2].shape, x[0, :, 3].shape
    (TensorShape([4, 6, 1, 4]), TensorShape([6]))
    """
    if not isinstance(slice_spec, tuple):
        slice_spec = (slice_spec,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASK_NAMES, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, builtins.slice):
            if s.start is not None:
                _check_index(s.start)
                begin.append(s.start)
            else:
                begin.append(0)
                masks["begin_mask"] |= bit
            if s.stop is not None:
                _check_index(s.stop)
                end.append(s.stop)
            else:
                end.append(0)
                masks["end_mask"] |= bit
            if s.step is not None:
                _check_index(s.step)
            strides.append(1 if s.step is None else s.step)
        elif s is Ellipsis or s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask" if s is Ellipsis else "new_axis_mask"] |= bit
        else:
            _check_index(s)
            begin.append(s)
            # x[i] reads [i, i+1); a tensor index gets its end from an AddV2, as in TensorFlow.
            end.append(_plus_one(s, tensor.graph) if isinstance(s, Tensor) else int(s) + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    g = tensor.graph
    with g.as_default(), g.name_scope("strided_slice") as scope:
        if begin:
            from rill.graph.ops.array_ops import stack

            dt = _index_dtype(begin + end + strides)
            packed = []
            for part in (begin, end, strides):
                if any(isinstance(p, Tensor) for p in part):
                    part = [p if isinstance(p, Tensor) else np.array(p, dt.np) for p in part]
                    packed.append(stack(part))
                else:
                    packed.append(constant(np.array([int(p) for p in part], dt.np), name="stack"))
        else:
            empty = constant(np.zeros([0], np.int32), name="Const")
            packed = [empty] * 3
        return strided_slice(tensor, *packed, **masks, name=scope)


Tensor._override_operator("__getitem__", _slice_helper)
