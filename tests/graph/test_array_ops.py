"""Shape functions and builders of the array op family (array_ops, reshape_ops, slice_ops,
gather_ops): known, partially known and unknown inputs, and errors that name the op and the
line of this file that built it."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import rill.graph as rg
from rill.graph.errors import GraphTypeError, GraphValueError
from rill.graph.ops import array_ops
from rill.graph.shapes import TensorShape

U = None  # an unknown dimension


def ph(shape=None, dtype=rg.float32):
    """A placeholder; shape None means unknown rank."""
    return rg.placeholder(dtype, shape)


def op(op_type, inputs, attrs=None):
    return rg.get_default_graph().create_op(op_type, inputs, attrs)


def shape_of(t):
    return TensorShape(None) if t.shape.rank is None else t.shape


@contextlib.contextmanager
def fails(op_type: str, *fragments: str, error=GraphValueError):
    """The block must fail while building `op_type`, naming it and this file's line."""
    with pytest.raises(error) as e:
        yield
    msg = str(e.value)
    assert op_type in msg, msg
    assert "test_array_ops.py" in msg, msg
    for f in fragments:
        assert f in msg, msg


def S(*dims):
    return TensorShape(dims)


UNKNOWN = TensorShape(None)


# -- shape, size, rank -----------------------------------------------------------------------------


def test_shape_size_rank_shapes(graph):
    assert op("Shape", [ph([2, U, 3])]).outputs[0].shape == S(3)
    assert op("Shape", [ph()]).outputs[0].shape == S(U)
    assert op("Shape", [ph([])]).outputs[0].shape == S(0)
    assert op("Size", [ph()]).outputs[0].shape == S()
    assert op("Rank", [ph([U])]).outputs[0].shape == S()
    outs = op("ShapeN", [[ph([1, 2]), ph(), ph([U])]]).outputs
    assert [t.shape for t in outs] == [S(2), S(U), S(1)]
    assert op("Shape", [ph()], {"out_type": rg.int64}).outputs[0].dtype is rg.int64
    with fails("Shape", "out_type", error=GraphTypeError):
        op("Shape", [ph()], {"out_type": rg.float32})
    with fails("Size", "out_type", error=GraphTypeError):
        op("Size", [ph()], {"out_type": rg.int8})
    with fails("ShapeN", "out_type", error=GraphTypeError):
        op("ShapeN", [[ph(), ph()]], {"out_type": rg.string})
    with fails("Rank", "expected T=int32", error=GraphTypeError):
        op("Rank", [ph([2])], {"T": rg.int32})


def test_shape_size_rank_builders_fold_known_shapes(graph):
    x = ph([2, 3])
    s, n, r = rg.shape(x), rg.size(x), rg.rank(x)
    assert [t.op.type for t in (s, n, r)] == ["Const", "Const", "Const"]
    assert s.op.name == "Shape" and n.op.name == "Size" and r.op.name == "Rank"
    assert s.op.attrs["value"].tolist() == [2, 3] and int(n.op.attrs["value"]) == 6
    y = ph([U, 3])
    assert rg.shape(y, out_type=rg.int64).op.type == "Shape"
    assert rg.shape(y, out_type=rg.int64).dtype is rg.int64
    assert rg.size(y).op.type == "Size" and rg.rank(ph()).op.type == "Rank"
    assert rg.rank(y).op.type == "Const"
    assert [t.dtype for t in rg.shape_n([x, y], out_type=rg.int64)] == [rg.int64] * 2


# -- reshape, expand_dims, squeeze ---------------------------------------------------------------


def test_reshape_shapes(graph):
    assert rg.reshape(ph([4, 6]), [-1, 3]).shape == S(8, 3)
    assert rg.reshape(ph([4, 6]), [2, 2, 6]).shape == S(2, 2, 6)
    assert rg.reshape(ph([U, 3, 2]), [-1, 6]).shape == S(U, 6)
    assert rg.reshape(ph([U, 3]), [2, -1]).shape == S(2, U)
    assert rg.reshape(ph(), [-1, 5]).shape == S(U, 5)
    assert rg.reshape(ph([3]), ph([2], rg.int32)).shape == S(U, U)
    assert rg.reshape(ph([3]), ph([U], rg.int32)).shape == UNKNOWN
    assert rg.reshape(ph([6]), [-1, -1]).shape == S(U, U)  # only the kernel refuses two -1s
    # A known 0 anywhere makes the element count known (0), as in TensorFlow.
    assert rg.reshape(ph([0, U, 1]), [-1]).shape == S(0)
    assert rg.reshape(ph([0, 3]), [-1, 0]).shape == S(U, 0)
    # Partially constant targets (Pack of a constant and a tensor).
    n = ph([], rg.int32)
    assert rg.reshape(ph([4, 6]), rg.stack([n, 8])).shape == S(3, 8)  # 24 / 8
    assert rg.reshape(ph([U, 6]), rg.stack([n, 8])).shape == S(U, 8)
    assert rg.reshape(ph([4, 6]), rg.stack([3, -1])).shape == S(3, 8)
    with fails("Reshape", "cannot reshape a tensor with 6 elements to shape [5]"):
        rg.reshape(ph([2, 3]), [5])
    with fails("Reshape", "not a multiple of 4"):
        rg.reshape(ph([2, 3]), [-1, 4])
    with fails("Reshape", "not a multiple of the 3 known input elements"):
        rg.reshape(ph([U, 3]), [5, 4])
    with fails("Reshape", "cannot reshape a tensor with 1 elements"):
        rg.reshape(ph([]), [-1, 0, 4])
    with fails("Reshape", "below -1"):
        rg.reshape(ph([2, 3]), [-2, 3])
    with fails("Reshape", "rank 1"):
        rg.reshape(ph([1]), [[1]])


def test_expand_dims_shapes(graph):
    x = ph([2, 3])
    assert [rg.expand_dims(x, d).shape for d in (0, 1, 2, -1, -3)] == [
        S(1, 2, 3), S(2, 1, 3), S(2, 3, 1), S(2, 3, 1), S(1, 2, 3)
    ]  # fmt: skip
    assert rg.expand_dims(ph([U]), [0]).shape == S(1, U)
    assert rg.expand_dims(x, ph([], rg.int32)).shape == S(U, U, U)
    assert rg.expand_dims(ph(), 0).shape == UNKNOWN
    assert rg.expand_dims(x, dim=1).shape == S(2, 1, 3)
    with fails("ExpandDims", "dim 3 is out of range [-3, 2]"):
        rg.expand_dims(x, 3)
    with fails("ExpandDims", "single value"):
        rg.expand_dims(x, [1, 2])
    with pytest.raises(ValueError, match="both 'axis' and 'dim'"):
        rg.expand_dims(x, 0, dim=0)


def test_squeeze_shapes(graph):
    assert rg.squeeze(ph([1, 3, 1])).shape == S(3)
    assert rg.squeeze(ph([1, 3, 1]), [0]).shape == S(3, 1)
    assert rg.squeeze(ph([1, 3, 1]), -1).shape == S(1, 3)
    assert rg.squeeze(ph([U, 1, 3]), [0]).shape == S(1, 3)  # the unknown dim must be 1
    assert rg.squeeze(ph([U, 1, 3])).shape == UNKNOWN  # it may or may not be 1
    assert rg.squeeze(ph()).shape == UNKNOWN
    sq = rg.squeeze(ph([1, 2, 1]), squeeze_dims=[2])
    assert sq.op.attrs["squeeze_dims"] == (2,) and sq.shape == S(1, 2)
    with fails("Squeeze", "cannot squeeze dim 0 of shape [3,4]: its size is 3"):
        rg.squeeze(ph([3, 4]), [0])
    with fails("Squeeze", "cannot squeeze dim 2 of a tensor of rank 2"):
        rg.squeeze(ph([1, 4]), [2])


# -- concat, split, stack ------------------------------------------------------------------------


def test_concat_shapes(graph):
    assert rg.concat([ph([2, 3]), ph([4, 3])], 0).shape == S(6, 3)
    assert rg.concat([ph([U, 3]), ph([2, U])], 0).shape == S(U, 3)
    assert rg.concat([ph([2, U]), ph([U, 5]), ph([2, 1])], -1).shape == S(2, U)
    assert rg.concat([ph(), ph([2, U])], 1).shape == S(2, U)
    assert rg.concat([ph(), ph()], 0).shape == UNKNOWN
    assert rg.concat([ph([2, 3]), ph([2, 3])], ph([], rg.int32)).shape == S(U, U)
    assert rg.concat([ph([2, 0]), ph([2, 3])], 1).shape == S(2, 3)
    with fails("ConcatV2", "dimension 1 must be equal in all inputs but is 3 and 4"):
        rg.concat([ph([2, 3]), ph([2, 4])], 0)
    with fails("ConcatV2", "same rank"):
        rg.concat([ph([2, 3]), ph([3])], 0)
    with fails("ConcatV2", "axis 2 is out of range [-2, 2)"):
        rg.concat([ph([2, 3]), ph([2, 3])], 2)
    with fails("ConcatV2", "cannot concatenate scalars"):
        rg.concat([ph([]), ph([])], 0)


def test_concat_of_one_value_is_an_identity(graph):
    x = ph([2])
    y = rg.concat([x], 0)
    assert (y.op.type, y.op.name) == ("Identity", "concat")
    assert rg.get_default_graph().get_operation_by_name("concat/concat_dim").type == "Const"


def test_concat_offset_shapes(graph):
    outs = rg.concat_offset(1, [ph([3], rg.int32), ph([U], rg.int32)])
    assert [t.shape for t in outs] == [S(3), S(U)]
    assert rg.concat_offset(0, [ph(None, rg.int64), ph([2], rg.int64)])[0].dtype is rg.int64
    with fails("ConcatOffset", "rank 1"):
        rg.concat_offset(0, [ph([2, 2], rg.int32), ph([2], rg.int32)])


def test_split_shapes(graph):
    parts = rg.split(ph([4, 6]), 3, axis=1)
    assert [p.shape for p in parts] == [S(4, 2)] * 3
    assert parts[0].op.type == "Split" and parts[0].op.name == "split"
    assert [p.shape for p in rg.split(ph([U, 4]), 2, 0)] == [S(U, 4)] * 2
    assert [p.shape for p in rg.split(ph([2, 4]), 2, ph([], rg.int32))] == [S(U, U)] * 2
    assert [p.shape for p in rg.split(ph(), 2, 0)] == [UNKNOWN] * 2
    with fails("Split", "is not divisible by 3"):
        rg.split(ph([4, 4]), 3, 1)
    with fails("Split", "split_dim 2 is out of range"):
        rg.split(ph([4, 4]), 2, 2)


def test_split_v_shapes(graph):
    parts = rg.split(ph([4, 6]), [1, -1, 2], axis=1)
    assert parts[0].op.type == "SplitV" and parts[0].op.attrs["Tlen"] is rg.int32
    assert [p.shape for p in parts] == [S(4, 1), S(4, 3), S(4, 2)]
    assert [p.shape for p in rg.split(ph([U, 4]), [1, -1], 0)] == [S(1, 4), S(U, 4)]
    sizes = ph([2], rg.int64)
    assert [p.shape for p in rg.split(ph([5, 4]), sizes, 0)] == [S(U, 4)] * 2
    assert [p.shape for p in rg.split(ph([5, 4]), [1, 4], ph([], rg.int32))] == [S(U, U)] * 2
    with fails("SplitV", "must sum to dimension 1 of shape [4,6] (6)"):
        rg.split(ph([4, 6]), [1, 2], 1)
    with fails("SplitV", "more than one -1"):
        rg.split(ph([4, 6]), [-1, -1], 1)
    with fails("SplitV", "3 entries but num_split is 2"):
        op("SplitV", [ph([4, 6]), [1, 2, 3], 1], {"num_split": 2})
    with pytest.raises(ValueError, match="cannot infer num"):
        rg.split(ph([4]), ph([U], rg.int32))
    with pytest.raises(ValueError, match="rank-0"):
        rg.split(ph([4]), ph([], rg.int32))


def test_pack_shapes(graph):
    assert rg.stack([ph([3]), ph([3])]).shape == S(2, 3)
    assert rg.stack([ph([U, 3]), ph([2, U])], 1).shape == S(2, 2, 3)
    assert rg.stack([ph([3]), ph([3]), ph([3])], -1).shape == S(3, 3)
    assert rg.stack([ph(), ph([2])]).shape == S(2, 2)
    assert rg.stack([ph(), ph()]).shape == UNKNOWN
    with fails("Pack", "incompatible"):
        rg.stack([ph([3, 4]), ph([4, 3])])
    with fails("Pack", "axis 3 is out of range"):
        rg.stack([ph([3, 4]), ph([3, 4])], axis=3)


def test_stack_builder(graph):
    c = rg.stack([[1, 2], [3, 4]])
    assert (c.op.type, c.op.name, c.shape) == ("Const", "stack", S(2, 2))
    x = ph([2])
    p = rg.stack([x, [1.0, 2.0]])
    assert p.op.type == "Pack" and p.shape == S(2, 2)
    packed = rg.convert_to_tensor([x, [3.0, 4.0]])
    assert (packed.op.type, packed.op.name) == ("Pack", "packed")


def test_unpack_shapes(graph):
    outs = rg.unstack(ph([3, 4]))
    assert len(outs) == 3 and all(t.shape == S(4) for t in outs)
    assert outs[0].op.name == "unstack"
    outs = rg.unstack(ph([U, 4, 2]), axis=-2)
    assert [t.shape for t in outs] == [S(U, 2)] * 4
    assert [t.shape for t in rg.unstack(ph(), num=2)] == [UNKNOWN] * 2
    assert [t.shape for t in rg.unstack(ph([U, 3]), num=2)] == [S(3)] * 2
    with fails("Unpack", "must be num=2"):
        rg.unstack(ph([3, 4]), num=2)
    with fails("Unpack", "axis 2 is out of range"):
        rg.unstack(ph([3, 4]), num=3, axis=2)
    with pytest.raises(ValueError, match="cannot infer num"):
        rg.unstack(ph([U, 4]))


def test_iterating_a_tensor_unstacks_it(graph):
    rows = list(ph([3, 2]))
    assert len(rows) == 3 and rows[0].op.type == "Unpack" and rows[0].shape == S(2)


# -- transpose, invert_permutation, fill, *_like, broadcasting ---------------------------------


def test_transpose_shapes(graph):
    x = ph([2, U, 4])
    assert rg.transpose(x, [2, 0, 1]).shape == S(4, 2, U)
    assert rg.transpose(x, [-1, 0, 1]).shape == S(4, 2, U)
    assert rg.transpose(x).shape == S(4, U, 2)
    t = rg.transpose(x)
    assert t.op.inputs[1].op.name == t.op.name + "/perm"
    assert rg.transpose(x, ph([3], rg.int32)).shape == S(U, U, U)
    assert rg.transpose(ph(), [1, 0]).shape == S(U, U)
    assert rg.transpose(ph(), ph([U], rg.int32)).shape == UNKNOWN
    with fails("Transpose", "perm has 2 entries but the input has rank 3"):
        rg.transpose(x, [1, 0])
    with fails("Transpose", "not a permutation"):
        rg.transpose(ph([2, 2]), [0, 0])


def test_transpose_of_unknown_rank_builds_its_permutation():
    from rill.graph.ops import math_ops

    if not hasattr(math_ops, "range") or not hasattr(math_ops, "subtract"):
        pytest.skip("math_ops has no range/subtract yet")
    with rg.Graph().as_default() as g:
        y = rg.transpose(ph())
        assert y.op.name == "transpose" and y.shape == UNKNOWN
        assert g.get_operation_by_name("transpose/Rank").type == "Rank"


def test_invert_permutation_shapes(graph):
    assert rg.invert_permutation(ph([5], rg.int32)).shape == S(5)
    assert rg.invert_permutation(ph(None, rg.int64)).shape == S(U)
    with fails("InvertPermutation", "rank 1"):
        rg.invert_permutation(ph([2, 2], rg.int32))
    with fails("InvertPermutation", "not allowed", error=GraphTypeError):
        rg.invert_permutation(ph([2]))


def test_fill_shapes(graph):
    n = ph([], rg.int32)
    assert rg.fill([2, 3], 1.0).shape == S(2, 3)
    assert rg.fill(rg.stack([2, n]), 1.0).shape == S(2, U)
    assert rg.fill(ph([3], rg.int32), 1.0).shape == S(U, U, U)
    assert rg.fill(ph(None, rg.int64), 1.0).shape == UNKNOWN
    assert rg.fill([], 1.0).shape == S()
    with fails("Fill", "must be >= 0"):
        rg.fill([-1, 2], 1.0)
    with fails("Fill", "rank 0"):
        rg.fill([2], [1.0])


def test_zeros_and_ones_builders(graph):
    z = rg.zeros([2, 3])
    assert (z.op.type, z.op.name, z.dtype, z.shape) == ("Const", "zeros", rg.float32, S(2, 3))
    big = rg.ones([1000, 2], rg.int64)
    assert (big.op.type, big.op.name, big.shape) == ("Fill", "ones", S(1000, 2))
    n = ph([], rg.int32)
    z2 = rg.zeros([2, n], rg.bool_)
    assert z2.op.type == "Fill" and z2.shape == S(2, U) and z2.dtype is rg.bool_
    assert z2.op.inputs[0].op.name == "zeros_1/packed"
    assert rg.zeros(ph([2], rg.int32)).shape == S(U, U)
    assert rg.ones(n).shape == S(U)  # a scalar shape is reshaped to a vector
    assert rg.zeros(rg.TensorShape([3])).shape == S(3)
    s = rg.zeros([2], rg.string)
    assert s.op.attrs["value"].tolist() == [b"", b""]
    with pytest.raises(ValueError, match="must be fully known"):
        rg.zeros(rg.TensorShape([U, 2]))


def test_zeros_like_and_ones_like(graph):
    x = ph([2, 3], rg.int32)
    z = rg.zeros_like(x)
    assert (z.op.type, z.op.name, z.dtype) == ("Const", "zeros_like", rg.int32)
    v = ph([U])
    zl = rg.zeros_like(v)
    assert (zl.op.type, zl.op.name, zl.shape) == ("ZerosLike", "zeros_like_1", S(U))
    zc = rg.zeros_like(v, dtype=rg.int64)
    assert zc.op.type == "Fill" and zc.dtype is rg.int64 and zc.shape == S(U)
    o = rg.ones_like(x)
    assert (o.op.type, o.op.name, o.shape) == ("Fill", "ones_like", S(2, 3))
    o2 = rg.ones_like(v, dtype=rg.float64)
    assert o2.op.inputs[0].op.type == "Shape" and o2.dtype is rg.float64 and o2.shape == S(U)
    raw = [op(t, [ph([U, 2])]).outputs[0].shape for t in ("ZerosLike", "OnesLike")]
    assert raw == [S(U, 2)] * 2
    assert op("ZerosLike", [ph()]).outputs[0].shape == UNKNOWN
    with fails("OnesLike", "not allowed", error=GraphTypeError):
        op("OnesLike", [ph([2], rg.string)])
    with fails("ZerosLike", "expected T=int64", error=GraphTypeError):
        op("ZerosLike", [ph([2])], {"T": rg.int64})


def test_broadcast_to_shapes(graph):
    assert rg.broadcast_to(ph([3]), [2, 3]).shape == S(2, 3)
    assert rg.broadcast_to(ph([3, 1]), rg.stack([2, ph([], rg.int32), 4])).shape == S(2, 3, 4)
    assert rg.broadcast_to(ph([U]), [2, 3]).shape == S(2, 3)
    assert rg.broadcast_to(ph(), [2, 3]).shape == S(2, 3)
    assert rg.broadcast_to(ph([3]), ph([2], rg.int32)).shape == S(U, 3)
    assert rg.broadcast_to(ph([3]), ph(None, rg.int32)).shape == UNKNOWN
    with fails("BroadcastTo", "cannot broadcast shape [3] to shape [2,2]"):
        rg.broadcast_to(ph([3]), [2, 2])
    with fails("BroadcastTo", "lower-rank shape"):
        rg.broadcast_to(ph([2, 3]), [3])


def test_broadcast_gradient_args_shapes(graph):
    r0, r1 = rg.broadcast_gradient_args(ph([2], rg.int32), [3])
    assert (r0.shape, r1.shape, r0.dtype) == (S(U), S(U), rg.int32)
    assert rg.broadcast_gradient_args(ph(None, rg.int64), ph(None, rg.int64))[1].dtype is rg.int64
    with fails("BroadcastGradientArgs", "rank 1"):
        rg.broadcast_gradient_args(ph([2, 2], rg.int32), [1])


# -- slicing -------------------------------------------------------------------------------------


def test_slice_shapes(graph):
    x = ph([4, 5])
    assert rg.slice(x, [1, 2], [2, -1]).shape == S(2, 3)
    assert rg.slice(ph([U, 5]), [1, 1], [-1, -1]).shape == S(U, 4)
    assert rg.slice(x, ph([2], rg.int32), [2, -1]).shape == S(2, U)
    assert rg.slice(x, [0, 0], ph([2], rg.int32)).shape == S(U, U)
    assert rg.slice(ph(), [0, 0, 0], [1, 2, -1]).shape == S(1, 2, U)
    assert rg.slice(ph(), ph([U], rg.int32), ph([U], rg.int32)).shape == UNKNOWN
    assert (
        rg.slice(x, np.array([1, 1], np.int64), np.array([1, 1], np.int64)).op.attrs["Index"]
        is rg.int64
    )
    with fails("Slice", "size[0] = 3 is not in [0, 2]"):
        rg.slice(ph([3, 4]), [1, 0], [3, 1])
    with fails("Slice", "begin[1] = 5 is not in [0, 4]"):
        rg.slice(ph([3, 4]), [0, 5], [1, 0])
    with fails("Slice", "begin and size have 1 entries but the input has rank 2"):
        rg.slice(ph([3, 4]), [0], [1])


def _numpy_shape(shape, idx):
    return np.empty(shape)[idx].shape


GETITEM = [
    np.s_[0],
    np.s_[-1],
    np.s_[1:3],
    np.s_[::-1],
    np.s_[3:0:-2],
    np.s_[-100:100],
    np.s_[5:1],
    np.s_[1:4, 2],
    np.s_[1, 2, 3],
    np.s_[...],
    np.s_[..., 0],
    np.s_[1, ..., 2],
    np.s_[:, None],
    np.s_[None],
    np.s_[None, ..., None],
    np.s_[..., None, 1],
    np.s_[None, 2, None, ::3],
    np.s_[::-3, 4:1:-2, -1:-8:-3],
    np.s_[2, ::-1, None, 1:],
    np.s_[-6:-4, ..., -8:8:4],
]


@pytest.mark.parametrize("idx", GETITEM, ids=str)
def test_getitem_static_shapes_match_numpy(graph, idx):
    y = ph([5, 6, 7])[idx]
    assert y.op.type == "StridedSlice" and y.op.name == "strided_slice"
    assert y.shape == S(*_numpy_shape((5, 6, 7), idx))
    # With the first dimension unknown, every output dim that does not come from it is known.
    z = ph([U, 6, 7])[idx]
    want = _numpy_shape((5, 6, 7), idx)
    assert z.shape.rank == len(want)
    assert z.shape.is_compatible_with(want)


def test_getitem_builds_the_masks_tensorflow_builds(graph):
    x = ph([2, 3])
    y = x[1:, ::2]
    a = y.op.attrs
    assert (a["begin_mask"], a["end_mask"], a["shrink_axis_mask"]) == (2, 3, 0)
    names = [t.op.name for t in y.op.inputs[1:]]
    assert names == ["strided_slice/stack", "strided_slice/stack_1", "strided_slice/stack_2"]
    z = x[0]
    assert z.op.name == "strided_slice_1" and z.op.attrs["shrink_axis_mask"] == 1
    w = x[..., None]
    assert (w.op.attrs["ellipsis_mask"], w.op.attrs["new_axis_mask"]) == (1, 2)
    assert [t.op.attrs["value"].tolist() for t in z.op.inputs[1:]] == [[0], [1], [1]]


def test_getitem_with_tensors(graph):
    x = ph([5, 6])
    i = ph([], rg.int32)
    y = x[i]
    assert y.shape == S(6)
    begin, end = y.op.inputs[1].op, y.op.inputs[2].op
    assert begin.type == "Pack" and end.type == "Pack"
    assert end.inputs[0].op.type == "AddV2"  # x[i] reads [i, i + 1)
    assert x[1:i].shape == S(U, 6)
    assert x[ph([], rg.int64)].op.attrs["Index"] is rg.int64
    with pytest.raises(TypeError, match="scalar int32/int64 tensors"):
        x[1.5]
    with pytest.raises(TypeError, match="boolean masks are not supported"):
        x[True]
    with pytest.raises(TypeError, match="need a scalar"):
        x[ph([2], rg.int32)]
    with pytest.raises(TypeError, match="need int32/int64"):
        x[ph([], rg.float32)]


def test_strided_slice_shapes_with_unknowns(graph):
    x = ph([5, 6, 7])
    b = ph([2], rg.int32)
    ss = rg.strided_slice
    # begin unknown: only fully masked dims (and the untouched ones) are known.
    assert ss(x, b, [3, 4], [1, 1], begin_mask=2, end_mask=2).shape == S(U, 6, 7)
    assert ss(x, b, [3, 4], [1, 2], begin_mask=2, end_mask=2, shrink_axis_mask=1).shape == S(3, 7)
    # strides unknown: the spec's length and masks still give the rank (TensorFlow gives an
    # unknown shape), the spec's own ranges are unknown; the input's rank unknown: nothing is.
    assert ss(x, [0], [2], ph([1], rg.int32)).shape == S(U, 6, 7)
    assert ss(x, [0, 1], [2, 2], ph([2], rg.int32), shrink_axis_mask=2).shape == S(U, 7)
    assert ss(x, *(ph([None], rg.int32) for _ in range(3))).shape == UNKNOWN
    assert ph()[1:3].shape == UNKNOWN
    # The spec's length comes from strides when begin/end have unknown length.
    assert ss(ph([5, 6]), ph(None, rg.int32), ph(None, rg.int32), [1]).shape == S(U, 6)
    # An unknown input dim stays unknown even for a slice that fits in any size.
    assert ph([U, 6])[1:3, 2:].shape == S(U, 4)
    assert ph([U, 6])[1].shape == S(6)
    with fails("StridedSlice", "index 7 is out of bounds for dimension 0 of size 5"):
        x[7]
    with fails("StridedSlice", "needs a positive stride"):
        ss(x, ph([1], rg.int32), [1], [-1], shrink_axis_mask=1)
    with fails("StridedSlice", "more than one ellipsis"):
        ss(x, [0, 0], [1, 1], [1, 1], ellipsis_mask=3)
    with fails("StridedSlice", "indexes 4 dimensions but the input has 3"):
        x[0, 0, 0, 0]
    with fails("StridedSlice", "strides[0] must be non-zero"):
        x[::0]
    with fails("StridedSlice", "1-D of equal length"):
        ss(x, [0, 0], [1], [1])
    with fails("StridedSlice", "cannot slice a scalar"):
        ph([])[0]


def test_strided_slice_grad_shapes(graph):
    dy = ph([2, 5])
    g = rg.strided_slice_grad([4, 5], [1], [3], [1], dy)
    assert (g.op.type, g.shape) == ("StridedSliceGrad", S(4, 5))
    assert rg.strided_slice_grad(ph([2], rg.int32), [1], [3], [1], ph()).shape == S(U, U)
    assert rg.strided_slice_grad(ph(None, rg.int32), [1], [3], [1], ph()).shape == UNKNOWN
    with fails("StridedSliceGrad", "dy has shape [3,5] but slicing shape [4,5] gives [2,5]"):
        rg.strided_slice_grad([4, 5], [1], [3], [1], ph([3, 5]))


def test_tile_shapes(graph):
    assert rg.tile(ph([2, 3]), [2, 3]).shape == S(4, 9)
    assert rg.tile(ph([2, U]), [2, 3]).shape == S(4, U)
    assert rg.tile(ph([2, 3]), rg.stack([2, ph([], rg.int32)])).shape == S(4, U)
    assert rg.tile(ph(), [2, 1, 0]).shape == S(U, U, 0)
    assert rg.tile(ph([2, 3]), ph([2], rg.int32)).shape == S(U, U)
    assert rg.tile(ph(), ph([U], rg.int32)).shape == UNKNOWN
    assert rg.tile(ph([]), []).shape == S()
    with fails("Tile", "multiples has 1 entries but the input has rank 2"):
        rg.tile(ph([2, 3]), [2])
    with fails("Tile", "multiples must be >= 0"):
        rg.tile(ph([2, 3]), [-1, 1])


def test_pad_shapes(graph):
    x = ph([2, U])
    for mode in ("CONSTANT", "REFLECT", "symmetric"):
        assert rg.pad(x, [[1, 1], [0, 1]], mode).shape == S(4, U)
    assert rg.pad(x, ph([2, 2], rg.int32)).shape == S(U, U)
    assert rg.pad(ph(), ph([3, 2], rg.int32)).shape == S(U, U, U)
    assert rg.pad(ph(), [[1, 1]]).shape == S(U)
    assert rg.pad(ph(), ph(None, rg.int32)).shape == UNKNOWN
    assert rg.pad(x, [[1, 2], [0, 1]], constant_values=2.0).shape == S(5, U)
    with fails("Pad", "paddings must be >= 0"):
        rg.pad(ph([2, 3]), [[-1, 0], [0, 0]])
    with fails("PadV2", "paddings has 1 rows but the input has rank 2"):
        rg.pad(ph([2, 3]), [[1, 0]], constant_values=1.0)
    with fails("PadV2", "rank 0"):
        rg.pad(ph([2]), [[1, 0]], constant_values=[1.0])
    with fails("MirrorPad", "REFLECT paddings of dimension 0 (size 3) must be at most 2"):
        rg.pad(ph([3, 4]), [[3, 0], [0, 0]], "REFLECT")
    with fails("MirrorPad", "SYMMETRIC paddings of dimension 1 (size 4) must be at most 4"):
        rg.pad(ph([3, 4]), [[3, 0], [0, 5]], "SYMMETRIC")
    with pytest.raises(ValueError, match="unknown padding mode"):
        rg.pad(x, [[0, 0], [0, 0]], "WRAP")


def test_pad_builder_picks_the_op_as_tensorflow_does(graph):
    x = ph([2, 3])
    pads = [[1, 1], [0, 0]]
    assert rg.pad(x, pads).op.type == "Pad"
    assert rg.pad(x, pads, constant_values=0.0).op.type == "Pad"
    assert rg.pad(x, pads, constant_values=1.5).op.type == "PadV2"
    assert rg.pad(x, pads, constant_values=ph([])).op.type == "PadV2"
    m = rg.pad(x, pads, "Reflect")
    assert (m.op.type, m.op.attrs["mode"]) == ("MirrorPad", "REFLECT")


def test_reverse_shapes(graph):
    assert rg.reverse(ph([2, U]), [0, -1]).shape == S(2, U)
    assert rg.reverse(ph([2, 3]), ph([U], rg.int32)).shape == S(2, 3)
    assert rg.reverse(ph(), [5]).shape == UNKNOWN
    assert rg.reverse(ph([2], rg.string), []).dtype is rg.string
    with fails("ReverseV2", "axis 0 is given more than once"):
        rg.reverse(ph([3, 4]), [0, -2])
    with fails("ReverseV2", "axis 2 is out of range"):
        rg.reverse(ph([3, 4]), [2])


# -- gather, scatter ------------------------------------------------------------------------------


def test_gather_shapes(graph):
    p = ph([5, 7, 3])
    assert rg.gather(p, [[0, 2]]).shape == S(1, 2, 7, 3)
    assert rg.gather(p, ph([4], rg.int64), axis=1).shape == S(5, 4, 3)
    assert rg.gather(p, 2, axis=-1).shape == S(5, 7)
    assert rg.gather(p, ph([U, 2], rg.int32), axis=2).shape == S(5, 7, U, 2)
    assert rg.gather(p, [0], axis=ph([], rg.int32)).shape == S(U, U, U)
    assert rg.gather(ph(), [0, 1]).shape == UNKNOWN
    assert rg.gather(p, ph(None, rg.int32), axis=1).shape == UNKNOWN
    # batch_dims: the leading dims of params and indices merge.
    assert rg.gather(ph([U, 7, 3]), ph([5, 4], rg.int32), axis=1, batch_dims=1).shape == S(5, 4, 3)
    assert rg.gather(ph([5, 7, 3]), ph([5, 4], rg.int32), batch_dims=-1, axis=2).shape == S(5, 7, 4)
    g = rg.gather(ph([5, 7]), ph([5, 2], rg.int32), batch_dims=1)
    assert g.op.attrs["batch_dims"] == 1 and g.shape == S(5, 2)  # axis defaults to batch_dims
    assert g.op.name.startswith("GatherV2")
    with fails("GatherV2", "axis 3 is out of range for params of shape [5,7,3]"):
        rg.gather(p, [0], axis=3)
    with fails("GatherV2", "batch_dims (1) must be at most axis (0)"):
        rg.gather(p, ph([5, 1], rg.int32), axis=0, batch_dims=1)
    with fails("GatherV2", "batch dimensions of params and indices"):
        rg.gather(p, ph([4, 1], rg.int32), axis=1, batch_dims=1)
    with fails("GatherV2", "batch_dims 2 is out of range [-1, 1]"):
        rg.gather(p, ph([5], rg.int32), axis=2, batch_dims=2)
    with fails("GatherV2", "not allowed", error=GraphTypeError):
        rg.gather(p, ph([2], rg.float32))


def test_gather_nd_shapes(graph):
    p = ph([5, 4, 3])
    assert rg.gather_nd(p, [[0, 1], [2, 2]]).shape == S(2, 3)
    assert rg.gather_nd(p, ph([U, 7, 1], rg.int32)).shape == S(U, 7, 4, 3)
    assert rg.gather_nd(p, ph([2, 0], rg.int32)).shape == S(2, 5, 4, 3)
    assert rg.gather_nd(p, ph([2, U], rg.int32)).shape == UNKNOWN
    assert rg.gather_nd(ph(), ph([2, 2], rg.int32)).shape == UNKNOWN
    assert rg.gather_nd(p, [1, 2]).shape == S(3)
    with fails("GatherNd", "innermost dimension of indices (4) exceeds the rank of params"):
        rg.gather_nd(p, ph([2, 4], rg.int32))
    with fails("GatherNd", "rank at least 1"):
        rg.gather_nd(p, ph([], rg.int32))
    # batch_dims: each batch entry's tuples index its own slice.
    assert rg.gather_nd(ph([2, 4, 3]), [[1], [3]], batch_dims=1).shape == S(2, 3)
    assert rg.gather_nd(ph([2, 4, 3]), ph([2, 5, 2], rg.int32), batch_dims=1).shape == S(2, 5)
    with pytest.raises(ValueError, match="less than the rank of indices"):
        rg.gather_nd(p, [[0]], batch_dims=2)


def test_scatter_nd_shapes(graph):
    assert rg.scatter_nd([[1], [2]], ph([2, 3]), [4, 3]).shape == S(4, 3)
    n = ph([], rg.int32)
    assert rg.scatter_nd(ph([U, 1], rg.int32), ph([U, 3]), rg.stack([4, n])).shape == S(4, U)
    assert rg.scatter_nd(ph(None, rg.int32), ph(), ph([3], rg.int32)).shape == S(U, U, U)
    assert rg.scatter_nd(ph([2, 1], rg.int64), ph([2]), ph(None, rg.int64)).shape == UNKNOWN
    with fails(
        "ScatterNd",
        "updates has shape [3,3] but indices [2,1] and shape [4,3] need updates of shape [2,3]",
    ):
        rg.scatter_nd(ph([2, 1], rg.int32), ph([3, 3]), [4, 3])
    with fails("ScatterNd", "exceeds the rank of shape"):
        rg.scatter_nd(ph([2, 3], rg.int32), ph([2]), [4, 3])
    with fails("ScatterNd", "shape must be >= 0"):
        rg.scatter_nd([[0]], [1.0], [-1])
    with fails("ScatterNd", "rank at least 1"):
        rg.scatter_nd([0], ph([]), [3])


def test_one_hot_shapes_and_dtypes(graph):
    i = ph([4, 2], rg.int32)
    y = rg.one_hot(i, 3)
    assert (y.shape, y.dtype, y.op.name, y.op.type) == (S(4, 2, 3), rg.float32, "one_hot", "OneHot")
    assert rg.one_hot(i, 3, axis=0).shape == S(3, 4, 2)
    assert rg.one_hot(i, 3, axis=1).shape == S(4, 3, 2)
    assert rg.one_hot(i, ph([], rg.int32)).shape == S(4, 2, U)
    assert rg.one_hot(ph(None, rg.int64), 3).shape == UNKNOWN
    assert rg.one_hot(i, 3, on_value=5).dtype is rg.int32
    assert rg.one_hot(i, 3, off_value=np.float64(0)).dtype is rg.float64
    assert rg.one_hot(i, 3, on_value=True, off_value=False).dtype is rg.bool_
    assert rg.one_hot(i, 3, dtype=rg.int64).dtype is rg.int64
    assert rg.one_hot([1, 2], 3).op.attrs["TI"] is rg.int32
    with pytest.raises(TypeError, match="does not match dtype"):
        rg.one_hot(i, 3, on_value=1.0, dtype=rg.int32)
    with pytest.raises(TypeError, match="on_value is float32 but off_value is int32"):
        rg.one_hot(i, 3, on_value=1.0, off_value=0)
    with fails("OneHot", "axis must be -1 or in [0, 3)"):
        rg.one_hot(i, 3, axis=3)
    with fails("OneHot", "depth must be >= 0"):
        rg.one_hot(i, -1)


def test_dynamic_partition_shapes(graph):
    outs = rg.dynamic_partition(ph([5, 3]), ph([5], rg.int32), 3)
    assert [t.shape for t in outs] == [S(U, 3)] * 3
    outs = rg.dynamic_partition(ph([U, 2, 3]), ph([4, U], rg.int32), 2)
    assert [t.shape for t in outs] == [S(U, 3)] * 2
    assert [t.shape for t in rg.dynamic_partition(ph(), ph([2], rg.int32), 2)] == [UNKNOWN] * 2
    with fails("DynamicPartition", "data's leading dimensions and partitions' shape"):
        rg.dynamic_partition(ph([3, 4]), ph([4], rg.int32), 2)
    with fails("DynamicPartition", "rank at least 2"):
        rg.dynamic_partition(ph([3]), ph([3, 1], rg.int32), 2)


def test_dynamic_stitch_shapes(graph):
    assert rg.dynamic_stitch([[0, 5], [1, 2]], [ph([2, 3]), ph([2, 3])]).shape == S(6, 3)
    y = rg.dynamic_stitch([ph([U], rg.int32), [1, 2]], [ph([U, 3]), ph([2, U])])
    assert y.shape == S(U, 3)
    assert rg.dynamic_stitch([ph(None, rg.int32)], [ph()]).shape == S(U).concatenate(UNKNOWN)
    assert rg.dynamic_stitch([np.zeros([0], np.int32)], [ph([0, 2])]).shape == S(0, 2)
    with fails("DynamicStitch", "indices[0]"):
        rg.dynamic_stitch([ph([3], rg.int32)], [ph([4, 2])])
    with fails("DynamicStitch", "the slice shapes of data"):
        rg.dynamic_stitch([[0], [1]], [ph([1, 2]), ph([1, 3])])


def test_where_shapes(graph):
    assert rg.where(ph([5, 7], rg.bool_)).shape == S(U, 2)
    assert rg.where(ph([U], rg.float32)).shape == S(U, 1)
    assert rg.where(ph(None, rg.bool_)).shape == S(U, U)
    w = rg.where(ph([3], rg.int32))
    assert (w.dtype, w.op.type, w.op.name[:5]) == (rg.int64, "Where", "Where")
    with fails("Where", "not allowed", error=GraphTypeError):
        rg.where(ph([3], rg.string))
    with pytest.raises(ValueError, match="both be given"):
        rg.where(ph([3], rg.bool_), ph([3]))


def test_where_with_x_and_y_selects():
    from rill.graph.ops import math_ops

    if not hasattr(math_ops, "select_v2"):
        pytest.skip("math_ops has no select_v2 yet")
    with rg.Graph().as_default():
        y = rg.where(ph([3], rg.bool_), ph([3]), 0.0)
        assert y.op.type == "SelectV2" and y.shape == S(3)


def test_unique_shapes(graph):
    y, idx = rg.unique(ph([5], rg.int32))
    assert (y.shape, idx.shape, idx.dtype, y.op.name) == (S(U), S(5), rg.int32, "Unique")
    out = rg.unique(ph(None, rg.string), out_idx=rg.int64)
    assert (out.y.shape, out.idx.shape, out.idx.dtype) == (S(U), S(U), rg.int64)
    with fails("Unique", "rank 1"):
        rg.unique(ph([2, 2], rg.int32))


def test_top_k_shapes(graph):
    values, indices = rg.top_k(ph([5, 7]), 3)
    assert (values.shape, indices.shape, indices.dtype) == (S(5, 3), S(5, 3), rg.int32)
    assert values.op.name == "TopKV2" and values.op.attrs["sorted"] is True
    out = rg.top_k(ph([U, 10]), ph([], rg.int32), sorted=False, index_type=rg.int64)
    assert (out.values.shape, out.indices.dtype) == (S(U, U), rg.int64)
    assert rg.top_k(ph([U, U]), 4).indices.shape == S(U, 4)
    assert rg.top_k(ph()).values.shape == UNKNOWN
    with fails("TopKV2", "fewer than k=5 entries"):
        rg.top_k(ph([3, 4]), 5)
    with fails("TopKV2", "k must be >= 0"):
        rg.top_k(ph([3, 4]), -1)
    with fails("TopKV2", "rank at least 1"):
        rg.top_k(ph([]), 1)


def test_builders_are_reexported_by_array_ops():
    for name in ("gather", "top_k", "strided_slice", "pad", "stack", "unstack", "where", "reshape"):
        assert getattr(array_ops, name) is getattr(rg, name)
