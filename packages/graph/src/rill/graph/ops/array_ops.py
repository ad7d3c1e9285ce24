"""Array ops: constants, placeholders, identity, shapes, filling and broadcasting.

Reshaping, joining and transposing live in reshape_ops; slicing, padding, tiling and reversing
in slice_ops; index-driven data movement (gather, scatter, partition, where, unique, top_k) in
gather_ops. Their builders are re-exported here, as TensorFlow-1 keeps them all in `array_ops`.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph, placeholder
from rill.graph.op_def import defop
from rill.graph.ops.gather_ops import *  # noqa: F403 - TensorFlow keeps these in array_ops
from rill.graph.ops.gather_ops import __all__ as _gather_all
from rill.graph.ops.reshape_ops import *  # noqa: F403
from rill.graph.ops.reshape_ops import __all__ as _reshape_all
from rill.graph.ops.reshape_ops import reshape
from rill.graph.ops.slice_ops import *  # noqa: F403
from rill.graph.ops.slice_ops import __all__ as _slice_all
from rill.graph.ops.slice_ops import contains_tensor, index_value
from rill.graph.shapes import TensorShape, as_shape
from rill.graph.tensor_util import constant_value, constant_value_as_shape

__all__ = [
    "constant",
    "placeholder",
    "placeholder_with_default",
    "identity",
    "identity_n",
    "no_op",
    "stop_gradient",
    "group",
    "shape",
    "shape_n",
    "size",
    "rank",
    "invert_permutation",
    "fill",
    "zeros",
    "ones",
    "zeros_like",
    "ones_like",
    "broadcast_to",
    "broadcast_gradient_args",
    *_reshape_all,
    *_slice_all,
    *_gather_all,
]

_INDEX = "{int32, int64} = int32"


def _ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _const_shape(op):
    v = op.attrs["value"]
    want = op.attrs["dtype"]
    if v.dtype != want.np and not (want.np.kind == "O" and v.dtype.kind in "OSU"):
        raise ValueError(f"value has numpy dtype {v.dtype} but dtype is {want.name}")
    return TensorShape(v.shape)


defop(
    "Const",
    outputs=["output: dtype"],
    attrs=["value: tensor", "dtype: type"],
    shape=_const_shape,
    doc="A constant tensor.",
)

defop(
    "Placeholder",
    outputs=["output: dtype"],
    attrs=["dtype: type", "shape: shape = [*]"],
    shape=lambda op: op.attrs["shape"],
    doc="A value fed at run time.",
)


def _with_default_shape(op):
    shape = op.attrs["shape"]
    given = op._inputs[0].shape
    if not given.is_compatible_with(shape) and shape.rank is not None:
        raise ValueError(f"default value has shape {given}, incompatible with shape {shape}")
    return shape


defop(
    "PlaceholderWithDefault",
    inputs=["input: dtype"],
    outputs=["output: dtype"],
    attrs=["dtype: type", "shape: shape"],
    shape=_with_default_shape,
    doc="Passes `input` through unless a value is fed.",
)

defop(
    "Identity",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape=shape_fns.unchanged,
    doc="Returns its input.",
)

defop(
    "IdentityN",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: list(type) >= 1"],
    shape=lambda op: [t.shape for t in op._inputs],
    doc="Returns its inputs.",
)

defop("NoOp", shape=None, doc="Does nothing; used to group control dependencies.")

defop(
    "StopGradient",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type"],
    shape=shape_fns.unchanged,
    doc="Identity in the forward pass; gradients do not flow through it.",
)

# -- shape, size, rank -------------------------------------------------------------------------


def _shape_vector(s: TensorShape) -> TensorShape:
    return TensorShape([s.rank])


defop(
    "Shape",
    inputs=["input: T"],
    outputs=["output: out_type"],
    attrs=["T: type", f"out_type: {_INDEX}"],
    shape=lambda op: _shape_vector(op._inputs[0].shape),
    doc="The shape of `input` as a 1-D integer tensor.",
)

defop(
    "ShapeN",
    inputs=["input: N * T"],
    outputs=["output: N * out_type"],
    attrs=["N: int >= 1", "T: type", f"out_type: {_INDEX}"],
    shape=lambda op: [_shape_vector(t.shape) for t in op._inputs],
    doc="The shapes of N tensors.",
)

defop(
    "Size",
    inputs=["input: T"],
    outputs=["output: out_type"],
    attrs=["T: type", f"out_type: {_INDEX}"],
    shape=shape_fns.scalar_shape,
    doc="The number of elements of `input`.",
)

defop(
    "Rank",
    inputs=["input: T"],
    outputs=["output: int32"],
    attrs=["T: type"],
    shape=shape_fns.scalar_shape,
    doc="The number of dimensions of `input`.",
)

# -- permutations, filling and broadcasting --------------------------------------------------

defop(
    "InvertPermutation",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=[f"T: {_INDEX}"],
    shape=lambda op: op._inputs[0].shape.with_rank(1),
    doc="y[x[i]] = i for a permutation x of 0..n-1.",
)


def _fill_shape(op):
    dims = op._inputs[0]
    dims.shape.with_rank(1)
    op._inputs[1].shape.with_rank(0)
    value = constant_value(dims)
    if value is not None and any(d < 0 for d in _ints(value)):
        raise ValueError(f"fill dimensions must be >= 0, got {_ints(value)}")
    return constant_value_as_shape(dims)


defop(
    "Fill",
    inputs=["dims: index_type", "value: T"],
    outputs=["output: T"],
    attrs=["T: type", f"index_type: {_INDEX}"],
    shape=_fill_shape,
    doc="A tensor of shape `dims` with every element `value`.",
)

defop(
    "ZerosLike",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=["T: type"],
    shape=shape_fns.unchanged,
    doc="Zeros with the shape and type of `x`.",
)

defop(
    "OnesLike",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs=[
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, "
        "uint64, complex64, complex128, bool}"
    ],
    shape=shape_fns.unchanged,
    doc="Ones with the shape and type of `x`.",
)


def _broadcast_to_shape(op):
    given = op._inputs[0].shape
    op._inputs[1].shape.with_rank(1)
    target = constant_value_as_shape(op._inputs[1])
    if target.rank is None or given.rank is None:
        return target
    if given.rank > target.rank:
        raise ValueError(f"cannot broadcast shape {given} to the lower-rank shape {target}")
    dims = list(target.dims)
    lead = target.rank - given.rank
    for i, d in enumerate(given.dims):
        t = dims[lead + i]
        if d is None or d <= 1:
            continue  # as in TensorFlow, only sizes above 1 pin the output statically
        if t is None:
            dims[lead + i] = d
        elif t != d:
            raise ValueError(f"cannot broadcast shape {given} to shape {target}")
    return TensorShape(dims)


defop(
    "BroadcastTo",
    inputs=["input: T", "shape: Tidx"],
    outputs=["output: T"],
    attrs=["T: type", f"Tidx: {_INDEX}"],
    shape=_broadcast_to_shape,
    doc="`input` broadcast (numpy rules) to `shape`.",
)


def _bcast_args_shape(op):
    for t in op._inputs:
        t.shape.with_rank(1)
    return [TensorShape([None]), TensorShape([None])]


defop(
    "BroadcastGradientArgs",
    inputs=["s0: T", "s1: T"],
    outputs=["r0: T", "r1: T"],
    attrs=[f"T: {_INDEX}"],
    shape=_bcast_args_shape,
    doc="The axes over which to sum the gradients of the two sides of a broadcasting op.",
)

# -- builders --------------------------------------------------------------------------------


def _create(op_type: str, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name)


def placeholder_with_default(input, shape, name: str = "PlaceholderWithDefault") -> Tensor:
    """A placeholder that takes `input` when nothing is fed.

    >>> from rill.graph import Graph
    >>> with Graph().as_default():
    ...     placeholder_with_default([1.0, 2.0], [None]).shape
    TensorShape([None])
    """
    x = convert_to_tensor(input)
    return _create(
        "PlaceholderWithDefault", [x], {"dtype": x.dtype, "shape": as_shape(shape)}, name
    ).outputs[0]


def identity(input, name: str = "Identity") -> Tensor:
    """`input`, passed through an Identity op."""
    return _create("Identity", [input], name=name).outputs[0]


def identity_n(inputs, name: str = "IdentityN") -> list[Tensor]:
    """Each of `inputs`, passed through one IdentityN op."""
    return _create("IdentityN", [list(inputs)], name=name).outputs


def no_op(name: str = "NoOp"):
    """An op that does nothing (a target for control dependencies)."""
    return _create("NoOp", [], name=name)


def stop_gradient(input, name: str = "StopGradient") -> Tensor:
    """`input`, through which no gradient flows."""
    return _create("StopGradient", [input], name=name).outputs[0]


def group(*inputs, name: str = "group_deps"):
    """A NoOp that runs after all of `inputs` (tensors or ops)."""
    g = get_default_graph()
    with g.control_dependencies([i for i in inputs if i is not None]):
        return g.create_op("NoOp", [], name=name)


def shape(input, name: str | None = None, out_type=dtypes.int32) -> Tensor:
    """The shape of `input`; a constant when it is fully known, as in TensorFlow.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     shape(rg.placeholder(rg.float32, [None, 3])).shape
    TensorShape([2])
    """
    x = convert_to_tensor(input)
    out_type = dtypes.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return constant(np.array(x.shape.dims, out_type.np), name=name or "Shape")
    return _create("Shape", [x], {"out_type": out_type}, name or "Shape").outputs[0]


def shape_n(input, out_type=dtypes.int32, name: str | None = None) -> list[Tensor]:
    """The shapes of a list of tensors (one ShapeN op)."""
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    return _create("ShapeN", [list(input)], attrs, name or "ShapeN").outputs


def size(input, name: str | None = None, out_type=dtypes.int32) -> Tensor:
    """The number of elements of `input`; a constant when its shape is fully known."""
    x = convert_to_tensor(input)
    out_type = dtypes.as_dtype(out_type)
    n = x.shape.num_elements()
    if n is not None:
        return constant(np.array(n, out_type.np), name=name or "Size")
    return _create("Size", [x], {"out_type": out_type}, name or "Size").outputs[0]


def rank(input, name: str | None = None) -> Tensor:
    """The rank of `input`; a constant when it is known."""
    x = convert_to_tensor(input)
    if x.shape.rank is not None:
        return constant(np.int32(x.shape.rank), name=name or "Rank")
    return _create("Rank", [x], name=name or "Rank").outputs[0]


def invert_permutation(x, name: str | None = None) -> Tensor:
    """The inverse permutation y of x: y[x[i]] = i."""
    return _create("InvertPermutation", [x], name=name or "InvertPermutation").outputs[0]


def fill(dims, value, name: str | None = None) -> Tensor:
    """A tensor of shape `dims` filled with `value`."""
    return _create("Fill", [index_value(dims), value], name=name or "Fill").outputs[0]


_SMALL_CONSTANT = 1000  # fewer elements than this become a Const rather than a Fill


def _filled(shape, value, dtype, name: str) -> Tensor:
    dtype = dtypes.as_dtype(dtype)
    scalar = np.array(value if dtype is not dtypes.string else b"", dtype=dtype.np)
    g = get_default_graph()
    with g.name_scope(name) as scope:
        if isinstance(shape, TensorShape) or not (
            isinstance(shape, Tensor)
            or (isinstance(shape, (list, tuple)) and contains_tensor(shape))
        ):
            dims = as_shape(_ints(shape) if isinstance(shape, np.ndarray) else shape)
            if not dims.is_fully_defined():
                raise ValueError(f"the shape {dims} of a zeros/ones tensor must be fully known")
            if dims.num_elements() < _SMALL_CONSTANT:
                return constant(np.full(dims.dims, scalar), dtype=dtype, name=scope)
            big = max(dims.dims, default=0) >= 2**31
            shape = np.array(dims.as_tuple(), np.int64 if big else np.int32)
        shape = convert_to_tensor(shape, name="packed" if isinstance(shape, list) else "shape")
        if shape.shape.rank == 0:
            shape = reshape(shape, [-1])
        return fill(shape, constant(scalar, dtype=dtype), name=scope)


def zeros(shape, dtype=dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of zeros (a Const when small and of known shape, else a Fill).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     zeros([2, 3]).op.type, zeros([1000, 1000]).op.type
    ('Const', 'Fill')
    """
    return _filled(shape, 0, dtype, name or "zeros")


def ones(shape, dtype=dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of ones (a Const when small and of known shape, else a Fill)."""
    return _filled(shape, 1, dtype, name or "ones")


def zeros_like(tensor, dtype=None, name: str | None = None, optimize: bool = True) -> Tensor:
    """Zeros with the shape of `tensor` (a constant when that shape is fully known)."""
    g = get_default_graph()
    with g.name_scope(name or "zeros_like") as scope:
        t = convert_to_tensor(tensor)
        want = dtypes.as_dtype(dtype) if dtype is not None else t.dtype
        if optimize and t.shape.is_fully_defined() and want is not dtypes.variant:
            return zeros(t.shape, want, name=scope)
        if want is not t.dtype:
            return zeros(_shape_of(t, optimize), want, scope)
        return _create("ZerosLike", [t], name=scope).outputs[0]


def _shape_of(t: Tensor, optimize: bool) -> Tensor:
    if optimize and t.shape.is_fully_defined():
        return constant(np.array(t.shape.dims, np.int32), name="Shape")
    return _create("Shape", [t], name="Shape").outputs[0]


def ones_like(tensor, dtype=None, name: str | None = None, optimize: bool = True) -> Tensor:
    """Ones with the shape of `tensor`, built as Fill(Shape(tensor), 1) as TensorFlow does."""
    g = get_default_graph()
    with g.name_scope(name or "ones_like") as scope:
        t = convert_to_tensor(tensor)
        want = dtypes.as_dtype(dtype) if dtype is not None else t.dtype
        return _filled(_shape_of(t, optimize), 1, want, scope)


def broadcast_to(input, shape, name: str | None = None) -> Tensor:
    """`input` broadcast to `shape` with numpy's rules."""
    return _create("BroadcastTo", [input, index_value(shape)], name=name or "BroadcastTo").outputs[
        0
    ]


def broadcast_gradient_args(s0, s1, name: str | None = None) -> tuple[Tensor, Tensor]:
    """The reduction axes for the gradients of a broadcasting binary op with shapes s0 and s1."""
    op = _create("BroadcastGradientArgs", [s0, s1], name=name or "BroadcastGradientArgs")
    return op.outputs[0], op.outputs[1]


def _broadcast_args_shape(op):
    for t in op._inputs:
        t.shape.with_rank(1)
    n = [t.shape[0] for t in op._inputs]
    return [TensorShape([None if None in n else max(n)])]


defop(
    "BroadcastArgs",
    inputs=["s0: T", "s1: T"],
    outputs=["r0: T"],
    attrs=[f"T: {_INDEX}"],
    shape=_broadcast_args_shape,
    doc="The shape that shapes s0 and s1 broadcast to (numpy rules).",
)
