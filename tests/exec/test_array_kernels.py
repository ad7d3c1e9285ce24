"""CPU kernels of the array op family against independent numpy references written here.

Graphs are built with the real builders; `evaluate` runs each op's kernel directly (run_kernel
checks output counts and dtypes), so these tests need no executor.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.testing import run_kernel
from rill.graph.errors import InvalidArgumentError


def evaluate(fetches, feeds: dict):
    """Runs the kernels `fetches` need, op by op, feeding `feeds` (tensor -> array)."""
    cache: dict = {}

    def value(t):
        if t in feeds:
            return feeds[t]
        op = t.op
        if op not in cache:
            cache[op] = run_kernel(op, *[value(i) for i in op.inputs])
        return cache[op][t.value_index]

    if isinstance(fetches, (list, tuple)):
        return [value(t) for t in fetches]
    return value(fetches)


def run(build, *arrays):
    """build(*placeholders) with one placeholder per array (of its dtype and shape)."""
    with rg.Graph().as_default():
        phs = []
        for a in arrays:
            a = np.asarray(a)
            dt = rg.string if a.dtype.kind in "OSU" else rg.as_dtype(a.dtype)
            phs.append(rg.placeholder(dt, a.shape))
        out = build(*phs)
        feeds = {p: np.asarray(a) for p, a in zip(phs, arrays)}
        return evaluate(out, feeds)


def check(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"), (got, want)


def arange(shape, dtype=np.float32):
    return (np.arange(int(np.prod(shape))) % 13 - 4).astype(dtype).reshape(shape)


# -- shape, size, rank ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (2, 3), (4, 0, 5)])
@pytest.mark.parametrize("out_type", [rg.int32, rg.int64])
def test_shape_size_rank(shape, out_type):
    x = arange(shape)
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32)  # shape unknown: real ops, not constants
        s = rg.shape(p, out_type=out_type)
        n = rg.size(p, out_type=out_type)
        r = rg.rank(rg.placeholder(rg.float32))
        sn = rg.shape_n([p, p], out_type=out_type)
        assert (s.op.type, n.op.type, r.op.type) == ("Shape", "Size", "Rank")
        got = evaluate([s, n, *sn], {p: x})
        got_rank = evaluate(r, {r.op.inputs[0]: x})
    check(got[0], np.array(list(shape), dtype=out_type.np))
    check(got[1], np.array(int(np.prod(shape)), dtype=out_type.np))
    check(got[2], np.array(list(shape), dtype=out_type.np))
    check(got_rank, np.array(len(shape), np.int32))


def test_shape_n_with_one_input_returns_one_output():
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, [None])
        (s,) = rg.shape_n([p])
        check(evaluate(s, {p: np.zeros(4, np.float32)}), np.array([4], np.int32))


# -- reshape, expand_dims, squeeze ----------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, target, want",
    [
        ((2, 3), [3, 2], (3, 2)),
        ((2, 3), [-1], (6,)),
        ((2, 3, 4), [4, -1], (4, 6)),
        ((1,), [], ()),
        ((), [1, 1], (1, 1)),
        ((0, 3), [-1, 3], (0, 3)),
        ((0,), [-1], (0,)),
        ((0,), [5, -1], (5, 0)),
        # With a 0 in the target, TensorFlow infers -1 from the non-zero sizes.
        ((0, 5), [-1, 0], (5, 0)),
        ((2, 0, 4), [-1, 0], (8, 0)),
        ((2, 0, 4), [3, -1, 0], (3, 2, 0)),
    ],
)
def test_reshape(shape, target, want):
    x = arange(shape)
    got = run(lambda p: rg.reshape(p, np.array(target, np.int32)), x)
    check(got, x.reshape(want))


@pytest.mark.parametrize(
    "shape, target, message",
    [
        ((2, 3), [5], "6 values, but the requested shape [5] has 5"),
        ((2, 3), [-1, 4], "requires a multiple of 4"),
        ((2, 3), [-1, -1], "only one size may be -1"),
        ((2, 3), [-2, -3], "must be non-negative, not -2"),
        ((6,), [0, -1], "has 0"),
    ],
)
def test_reshape_errors(shape, target, message):
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32)
        t = rg.placeholder(rg.int32, [None])
        y = rg.reshape(p, t)
        with pytest.raises(InvalidArgumentError) as e:
            evaluate(y, {p: arange(shape), t: np.array(target, np.int32)})
    assert message in str(e.value)


def test_reshape_shape_must_be_a_vector():
    with rg.Graph().as_default():
        y = rg.reshape(rg.placeholder(rg.float32), rg.placeholder(rg.int32, [None]))
        with pytest.raises(InvalidArgumentError, match="1-D"):
            run_kernel(y.op, np.zeros(1, np.float32), np.array([[1]], np.int32))


@pytest.mark.parametrize("shape", [(), (3,), (2, 0, 4)])
def test_expand_dims_every_position(shape):
    x = arange(shape)
    r = len(shape)
    for d in range(-r - 1, r + 1):
        check(run(lambda p, d=d: rg.expand_dims(p, d), x), np.expand_dims(x, d))
    with pytest.raises(InvalidArgumentError, match=f"cannot insert a dimension at {r + 1}"):
        with rg.Graph().as_default():
            p, a = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
            evaluate(rg.expand_dims(p, a), {p: x, a: np.int32(r + 1)})


@pytest.mark.parametrize(
    "shape, axis",
    [((1, 3, 1), None), ((1, 3, 1), [0]), ((1, 3, 1), [-1, 0]), ((1, 1), None), ((0, 1), [1])],
)
def test_squeeze(shape, axis):
    x = arange(shape)
    want = np.squeeze(x, axis=None if axis is None else tuple(axis))
    check(run(lambda p: rg.squeeze(p, axis), x), want)


def test_squeeze_errors():
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32)
        with pytest.raises(
            InvalidArgumentError, match="cannot squeeze dim 1 of shape .1,3.: its size is 3"
        ):
            evaluate(rg.squeeze(p, [1]), {p: arange((1, 3))})
        with pytest.raises(InvalidArgumentError, match="squeeze dim 2 is out of range"):
            evaluate(rg.squeeze(p, [2]), {p: arange((1, 3))})


# -- concat, split, stack ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3), (4, 3)], 0),
        ([(2, 3), (2, 0), (2, 5)], -1),
        ([(0, 3), (0, 3)], 1),
        ([(1, 2, 3), (1, 4, 3), (1, 1, 3)], 1),
    ],
)
def test_concat(shapes, axis):
    xs = [arange(s) + 10 * i for i, s in enumerate(shapes)]
    check(run(lambda *ps: rg.concat(list(ps), axis), *xs), np.concatenate(xs, axis=axis))


def test_concat_errors():
    with rg.Graph().as_default():
        a, b, ax = rg.placeholder(rg.float32), rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.concat([a, b], ax)
        cases = [
            ((2, 3), (2, 3), 2, "axis 2 is out of range [-2, 2)"),
            ((2, 3), (3, 2), 0, "dimension 1 must be equal"),
            ((2, 3), (3,), 0, "ranks of all inputs must match"),
            ((), (), 0, "cannot concatenate scalars"),
        ]
        for sa, sb, axis, message in cases:
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(y, {a: arange(sa), b: arange(sb), ax: np.int32(axis)})
            assert message in str(e.value)


@pytest.mark.parametrize("shape_type", [np.int32, np.int64])
def test_concat_offset(shape_type):
    shapes = [np.array(s, shape_type) for s in ([2, 3, 5], [2, 7, 5], [2, 0, 5])]
    for dim in (1, -2):
        got = run(lambda *ps, dim=dim: rg.concat_offset(dim, list(ps)), *shapes)
        want, pos = [], 0
        for s in shapes:
            want.append(np.array([0, pos, 0], shape_type))
            pos += int(s[1])
        for g, w in zip(got, want):
            check(g, w)
    with pytest.raises(InvalidArgumentError, match="all dimensions except 1 must match"):
        run(lambda a, b: rg.concat_offset(1, [a, b]), np.array([2, 3]), np.array([3, 3]))
    with pytest.raises(InvalidArgumentError, match="concat_dim 2 is out of range"):
        run(lambda a, b: rg.concat_offset(2, [a, b]), np.array([2, 3]), np.array([2, 3]))


@pytest.mark.parametrize(
    "shape, num, axis", [((4, 6), 2, 1), ((4, 6), 3, -1), ((0, 2), 2, 0), ((3,), 1, 0)]
)
def test_split_equal(shape, num, axis):
    x = arange(shape)
    got = run(lambda p: rg.split(p, num, axis), x)
    want = np.split(x, num, axis=axis)
    assert len(got) == num
    for g, w in zip(got, want):
        check(g, w)


@pytest.mark.parametrize(
    "sizes, axis",
    [([1, 2, 3], 1), ([1, -1, 1], 1), ([0, 6], -1), ([-1], 1), ([4, 0, -1], 0), ([2, 2], 0)],
)
def test_split_sizes(sizes, axis):
    x = arange((4, 6))
    d = x.shape[axis]
    known = sum(s for s in sizes if s != -1)
    full = [d - known if s == -1 else s for s in sizes]
    if len(sizes) == 1 and sizes[0] == -1:
        with pytest.raises(InvalidArgumentError, match="with one output, size_splits must be"):
            run(lambda p: rg.split(p, np.array(sizes, np.int32), axis), x)
        return
    got = run(lambda p: rg.split(p, np.array(sizes, np.int32), axis), x)
    got = got if isinstance(got, list) else [got]
    starts = np.cumsum([0] + full)
    for k, g in enumerate(got):
        idx = [slice(None)] * 2
        idx[axis] = slice(starts[k], starts[k + 1])
        check(g, x[tuple(idx)])


def test_split_errors():
    x = arange((4, 6))
    with pytest.raises(
        InvalidArgumentError, match="cannot split dimension 1 of shape .4,6. evenly into 4"
    ):
        with rg.Graph().as_default():
            p, a = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
            evaluate(rg.split(p, 4, a), {p: x, a: np.int32(1)})
    for sizes, message in [
        ([1, 2], "must sum to dimension 1"),
        ([-1, -1], "more than one -1"),
        ([-2, 8], "size_splits[0] = -2 must be >= 0"),
        ([7, -1], "must sum to dimension 1"),
    ]:
        with rg.Graph().as_default():
            p, s = rg.placeholder(rg.float32), rg.placeholder(rg.int32, [2])
            outs = rg.split(p, s, 1)
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(outs, {p: x, s: np.array(sizes, np.int32)})
        assert message in str(e.value)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (0, 2), ()])
def test_stack_and_unstack(shape):
    xs = [arange(shape) + i for i in range(3)]
    r = len(shape)
    for axis in range(-r - 1, r + 1):
        check(run(lambda *ps, axis=axis: rg.stack(list(ps), axis), *xs), np.stack(xs, axis=axis))
    stacked = np.stack(xs, axis=0)
    for axis in range(-r - 1, r + 1):
        got = run(lambda p, axis=axis: rg.unstack(p, axis=axis), stacked)
        want = [np.take(stacked, i, axis=axis) for i in range(stacked.shape[axis])]
        got = got if isinstance(got, list) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w)


def test_stack_and_unstack_errors():
    with rg.Graph().as_default():
        a, b = rg.placeholder(rg.float32), rg.placeholder(rg.float32)
        with pytest.raises(InvalidArgumentError, match="shapes of all inputs must match"):
            evaluate(rg.stack([a, b]), {a: arange((3, 4)), b: arange((4, 3))})
        with pytest.raises(InvalidArgumentError, match="axis 3 is out of range"):
            evaluate(rg.stack([a, b], axis=3), {a: arange((3, 4)), b: arange((3, 4))})
        u = rg.unstack(a, num=2)
        with pytest.raises(InvalidArgumentError, match="must equal num=2"):
            evaluate(u, {a: arange((3, 4))})
    # num=0 has no outputs at all
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, [0, 2])
        assert rg.unstack(p) == []


# -- transpose, invert_permutation, fill, *_like, broadcasting ------------------------------------


def test_transpose():
    x = arange((2, 3, 4))
    for perm in itertools.permutations(range(3)):
        check(run(lambda p, perm=perm: rg.transpose(p, list(perm)), x), np.transpose(x, perm))
    check(run(lambda p: rg.transpose(p, [-1, 0, 1]), x), np.transpose(x, (2, 0, 1)))
    check(run(lambda p: rg.transpose(p), x), x.T)
    check(run(lambda p: rg.transpose(p), np.float32(3)), np.float32(3))
    check(run(lambda p: rg.transpose(p), arange((0, 2))), np.zeros((2, 0), np.float32))
    with rg.Graph().as_default():
        p, q = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.transpose(p, q)
        with pytest.raises(
            InvalidArgumentError, match="perm has 1 entries but the input has rank 2"
        ):
            evaluate(y, {p: arange((2, 3)), q: np.array([0], np.int32)})
        with pytest.raises(InvalidArgumentError, match=r"perm \[0, 0\] is not a permutation"):
            evaluate(y, {p: arange((2, 3)), q: np.array([0, 0], np.int32)})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_invert_permutation(dtype):
    rng = np.random.default_rng(0)
    for n in (0, 1, 7):
        p = rng.permutation(n).astype(dtype)
        want = np.empty_like(p)
        for i, v in enumerate(p):
            want[v] = i
        check(run(rg.invert_permutation, p), want)
    with pytest.raises(InvalidArgumentError, match="2 is duplicated"):
        run(rg.invert_permutation, np.array([2, 2, 1], dtype))
    with pytest.raises(InvalidArgumentError, match="3 is not between 0 and 3"):
        run(rg.invert_permutation, np.array([3, 0, 1], dtype))
    with pytest.raises(InvalidArgumentError, match="-1 is not between"):
        run(rg.invert_permutation, np.array([-1, 0, 1], dtype))


def test_fill_zeros_ones():
    check(
        run(lambda d: rg.fill(d, 2.5), np.array([2, 3], np.int32)), np.full((2, 3), 2.5, np.float32)
    )
    check(
        run(lambda d: rg.fill(d, np.int64(7)), np.array([0, 3], np.int64)),
        np.full((0, 3), 7, np.int64),
    )
    check(run(lambda d: rg.fill(d, True), np.zeros([0], np.int32)), np.array(True))
    got = run(lambda d: rg.fill(d, "ab"), np.array([2], np.int32))
    assert got.dtype == object and list(got) == [b"ab", b"ab"]
    with pytest.raises(InvalidArgumentError, match=r"dims\[0\] = -1 must be >= 0"):
        run(lambda d: rg.fill(d, 1.0), np.array([-1, 2], np.int32))
    # Large or partially known shapes go through Fill.
    with rg.Graph().as_default():
        n = rg.placeholder(rg.int32, [])
        z, o = rg.zeros([2, n], rg.int64), rg.ones([n], rg.bool_)
        assert z.op.type == o.op.type == "Fill"
        got = evaluate([z, o], {n: np.int32(3)})
    check(got[0], np.zeros((2, 3), np.int64))
    check(got[1], np.ones(3, bool))
    with rg.Graph().as_default():
        big = rg.ones([1000, 2], rg.float16)
        check(evaluate(big, {}), np.ones((1000, 2), np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.complex64, np.bool_])
def test_zeros_like_and_ones_like(dtype):
    x = arange((2, 0, 3), dtype) if dtype != np.bool_ else np.zeros((2, 0, 3), bool)
    y = arange((2, 3), dtype) if dtype != np.bool_ else np.array([[True, False, True]] * 2)
    for v in (x, y):
        with rg.Graph().as_default():
            p = rg.placeholder(rg.as_dtype(dtype), [None] * v.ndim)
            ops = [rg.zeros_like(p), rg.ones_like(p)]
            raw = [
                rg.get_default_graph().create_op(t, [p]).outputs[0]
                for t in ("ZerosLike", "OnesLike")
            ]
            got = evaluate(ops + raw, {p: v})
        for g, w in zip(got, [np.zeros_like(v), np.ones_like(v)] * 2):
            check(g, w)


def test_zeros_like_strings_are_empty_bytes():
    got = run(lambda p: rg.get_default_graph().create_op("ZerosLike", [p]).outputs[0],
              np.array([b"x", b"yz"], object))  # fmt: skip
    assert got.dtype == object and list(got) == [b"", b""]


@pytest.mark.parametrize(
    "shape, target",
    [((3,), [2, 3]), ((3, 1), [3, 4]), ((), [2, 2]), ((1, 0), [2, 3, 0]), ((2, 1), [0, 2, 5])],
)
def test_broadcast_to(shape, target):
    x = arange(shape)
    got = run(lambda p: rg.broadcast_to(p, np.array(target, np.int32)), x)
    check(got, np.broadcast_to(x, target).copy())
    assert got.flags.writeable


def test_broadcast_to_errors():
    with rg.Graph().as_default():
        p, s = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.broadcast_to(p, s)
        with pytest.raises(
            InvalidArgumentError, match=r"cannot broadcast shape \[3\] to shape \[2,1\]"
        ):
            evaluate(y, {p: arange((3,)), s: np.array([2, 1], np.int32)})
        with pytest.raises(InvalidArgumentError, match="lower-rank shape"):
            evaluate(y, {p: arange((2, 3)), s: np.array([3], np.int32)})


def _bcast_reduction_ref(a, b):
    """Reduction axes of each side, from the definition: the dims where that side is 1 (after
    left-padding with 1s) and the result is not 1 by both, except when shapes are equal."""
    if list(a) == list(b):
        return [], []
    n = max(len(a), len(b))
    pa = [1] * (n - len(a)) + list(a)
    pb = [1] * (n - len(b)) + list(b)
    return [i for i in range(n) if pa[i] == 1], [i for i in range(n) if pb[i] == 1]


@pytest.mark.parametrize(
    "a, b",
    [
        ([2, 3, 1], [3, 4]),
        ([1, 1], [1]),
        ([2, 1], [2, 1]),
        ([], [2, 1, 3]),
        ([1, 0], [5, 1]),
        ([0], [1]),
        ([3, 1], [1, 1]),
        ([], []),
    ],
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_broadcast_gradient_args(a, b, dtype):
    got = run(rg.broadcast_gradient_args, np.array(a, dtype), np.array(b, dtype))
    ra, rb = _bcast_reduction_ref(a, b)
    check(got[0], np.array(ra, dtype))
    check(got[1], np.array(rb, dtype))


def test_broadcast_gradient_args_incompatible():
    with pytest.raises(
        InvalidArgumentError, match=r"incompatible shapes for broadcasting: \[2,3\] vs. \[4,3\]"
    ):
        run(rg.broadcast_gradient_args, np.array([2, 3]), np.array([4, 3]))


# -- slicing -----------------------------------------------------------------------------------


def test_slice():
    x = arange((4, 5, 3))
    for begin, size in [([1, 2, 0], [2, -1, 3]), ([0, 0, 0], [4, 5, 3]), ([4, 5, 3], [0, 0, 0])]:
        want = x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]
        check(run(lambda p, b=begin, s=size: rg.slice(p, b, s), x), want)
    with rg.Graph().as_default():
        p, b, s = rg.placeholder(rg.float32), rg.placeholder(rg.int64), rg.placeholder(rg.int64)
        y = rg.slice(p, b, s)
        for bv, sv, message in [
            ([1, 1], [3, 2], "size[0] = 3 is not in [0, 2]"),
            ([-1, 1], [1, 2], "begin[0] = -1 is not in [0, 3]"),
            ([1, 1], [-2, 2], "size[0] = -2 is not in [0, 2]"),
            ([1], [1], "vectors of length 2"),
        ]:
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(y, {p: arange((3, 4)), b: np.array(bv), s: np.array(sv)})
            assert message in str(e.value)


_X = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)

# Index expressions that numpy and TensorFlow's StridedSlice read the same way.
GETITEM_CASES = [
    np.s_[0],
    np.s_[-1],
    np.s_[4],
    np.s_[1:3],
    np.s_[::2],
    np.s_[::-1],
    np.s_[::-2],
    np.s_[3:0:-1],
    np.s_[-2:],
    np.s_[:-2],
    np.s_[-100:100],
    np.s_[100:],
    np.s_[5:1],
    np.s_[1:4, 2],
    np.s_[1, 2, 3],
    np.s_[-1, -1, -1],
    np.s_[...],
    np.s_[..., 0],
    np.s_[..., ::-1],
    np.s_[1, ...],
    np.s_[1, ..., 2],
    np.s_[:, None],
    np.s_[None],
    np.s_[None, ..., None],
    np.s_[..., None, 1],
    np.s_[None, 2, None, ::3],
    np.s_[:, :, :],
    np.s_[1:2, 1:2, 1:2],
    np.s_[::-3, 4:1:-2, -1:-8:-3],
    np.s_[2, ::-1, None, 1:],
    np.s_[0:0],
    np.s_[:, 6:],
    np.s_[-6:-4, ..., -8:8:4],
]


@pytest.mark.parametrize("idx", GETITEM_CASES, ids=str)
def test_getitem_matches_numpy(idx):
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, _X.shape)
        y = p[idx]
        assert y.op.type == "StridedSlice"
        got = evaluate(y, {p: _X})
    check(got, _X[idx])


def test_getitem_with_scalar_tensor_indices():
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, _X.shape)
        i = rg.placeholder(rg.int32, [])
        j = rg.placeholder(rg.int64, [])
        ys = [p[i], p[1:i], p[i, ::-1, 2], p[..., j:], p[j, j::-1]]
        got = evaluate(ys, {p: _X, i: np.int32(3), j: np.int64(-2)})
        with pytest.raises(TypeError, match="index tensors have different dtypes"):
            p[i, j]
    for g, w in zip(got, [_X[3], _X[1:3], _X[3, ::-1, 2], _X[..., -2:], _X[-2, -2::-1]]):
        check(g, w)


def test_getitem_on_empty_and_scalar_tensors():
    e = np.zeros((3, 0, 2), np.int32)
    for idx in (np.s_[1], np.s_[:, :, 1], np.s_[::-1, 5:], np.s_[..., None]):
        check(run(lambda p, idx=idx: p[idx], e), e[idx])
    s = np.float64(2.5)
    for idx in (np.s_[...], np.s_[None], np.s_[None, ..., None]):
        check(run(lambda p, idx=idx: p[idx], s), np.asarray(s)[idx])


def test_strided_slice_masks_follow_tensorflow():
    x = np.arange(24).reshape(2, 3, 4)

    def ss(b, e, s, **masks):
        return run(lambda p: rg.strided_slice(p, b, e, s, **masks), x)

    # An index ignores begin_mask and end (x[2] on a dim of 2 is out of bounds).
    with rg.Graph().as_default():
        p, b = rg.placeholder(rg.int64), rg.placeholder(rg.int32)
        y = rg.strided_slice(p, b, [3], [1], shrink_axis_mask=1, begin_mask=1)
        with pytest.raises(InvalidArgumentError, match="index 2 is out of bounds for dimension 0"):
            evaluate(y, {p: x, b: np.array([2], np.int32)})
    # A new axis wins over shrink on the same bit, an ellipsis over a new axis.
    check(ss([0], [1], [1], new_axis_mask=1, shrink_axis_mask=1), x[None])
    check(ss([0], [1], [1], ellipsis_mask=1, new_axis_mask=1), x)
    # Bits beyond the spec are ignored.
    check(ss([0], [1], [1], begin_mask=6, end_mask=6), x[0:1])
    # An index may have a positive stride other than 1.
    check(ss([1], [0], [2], shrink_axis_mask=1), x[1])
    # strides=None means all ones (built with ones_like, as TensorFlow does).
    check(run(lambda p: rg.strided_slice(p, [0, 1], [2, 3]), x), x[0:2, 1:3])


@pytest.mark.parametrize(
    "b, e, s, masks, message",
    [
        (
            [5],
            [6],
            [1],
            {"shrink_axis_mask": 1},
            "index 5 is out of bounds for dimension 0 of size 2",
        ),
        ([-3], [0], [1], {"shrink_axis_mask": 1}, "index -3 is out of bounds"),
        ([1], [0], [-1], {"shrink_axis_mask": 1}, "needs a positive stride"),
        ([0, 0], [1, 1], [1, 1], {"ellipsis_mask": 3}, "more than one ellipsis"),
        ([0] * 4, [1] * 4, [1] * 4, {}, "indexes 4 dimensions but the input has 3"),
        ([0], [1], [0], {}, "strides[0] must be non-zero"),
        ([0, 0], [1], [1], {}, "vectors of equal length"),
    ],
)
def test_strided_slice_errors(b, e, s, masks, message):
    x = np.zeros((2, 3, 4), np.float32)
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32)
        ts = [rg.placeholder(rg.int32, [None]) for _ in range(3)]
        y = rg.strided_slice(p, *ts, **masks)
        feeds = {p: x, **{t: np.array(v, np.int32) for t, v in zip(ts, (b, e, s))}}
        with pytest.raises(InvalidArgumentError) as err:
            evaluate(y, feeds)
    assert message in str(err.value)


def test_strided_slice_of_a_scalar():
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32)
        y = rg.strided_slice(p, [0], [1], [1])
        with pytest.raises(InvalidArgumentError, match="cannot slice a scalar"):
            evaluate(y, {p: np.float32(1)})


@pytest.mark.parametrize("idx", [np.s_[1:4, ::-2], np.s_[2], np.s_[..., None, 1], np.s_[::3, 7:]])
def test_strided_slice_grad(idx):
    dy = _X[idx] + 1
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, _X.shape)
        fwd = p[idx].op
        g = rg.strided_slice_grad(
            np.array(_X.shape, np.int32), *fwd.inputs[1:], rg.placeholder(rg.float32, dy.shape),
            **{k: fwd.attrs[k] for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                         "new_axis_mask", "shrink_axis_mask")},
        )  # fmt: skip
        got = evaluate(g, {g.op.inputs[4]: dy})
    want = np.zeros_like(_X)
    want[idx] = dy
    check(got, want)


def test_strided_slice_grad_checks_dy():
    with rg.Graph().as_default():
        dy = rg.placeholder(rg.float32)
        g = rg.strided_slice_grad([4], [1], [3], [1], dy)
        with pytest.raises(InvalidArgumentError, match=r"dy has shape \[3\]"):
            evaluate(g, {dy: np.zeros(3, np.float32)})


@pytest.mark.parametrize(
    "shape, mult", [((2, 3), [1, 2]), ((2, 3), [0, 3]), ((), []), ((2, 0), [2, 2]), ((3,), [4])]
)
def test_tile(shape, mult):
    x = arange(shape)
    want = x
    for axis, m in enumerate(mult):
        want = np.concatenate([want] * m, axis=axis) if m else np.take(want, [], axis=axis)
    check(run(lambda p: rg.tile(p, mult), x), want)
    if shape:
        with pytest.raises(InvalidArgumentError, match=r"multiples\[0\] = -1 must be >= 0"):
            with rg.Graph().as_default():
                p, m = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
                evaluate(rg.tile(p, m), {p: x, m: np.array([-1] + mult[1:], np.int32)})


def _pad_ref(x, pads, value):
    out = np.full([d + a + b for d, (a, b) in zip(x.shape, pads)], value, dtype=x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.complex128])
def test_pad_and_pad_v2(dtype):
    x = arange((2, 3), dtype)
    pads = [[1, 0], [2, 3]]
    check(run(lambda p: rg.pad(p, pads), x), _pad_ref(x, pads, 0))
    value = np.array(1, dtype)
    y = run(lambda p: rg.pad(p, pads, constant_values=value), x)
    check(y, _pad_ref(x, pads, value))
    check(run(lambda p: rg.pad(p, [[0, 0], [0, 0]]), x), x)
    check(
        run(lambda p: rg.pad(p, np.zeros([0, 2], np.int32)), np.array(5, dtype)), np.array(5, dtype)
    )
    e = np.zeros((0, 2), dtype)
    check(run(lambda p: rg.pad(p, [[1, 1], [0, 1]]), e), _pad_ref(e, [[1, 1], [0, 1]], 0))


def test_pad_strings_with_empty_bytes():
    x = np.array([b"a", b"b"], object)
    got = run(lambda p: rg.pad(p, [[1, 2]]), x)
    assert list(got) == [b"", b"a", b"b", b"", b""]


def test_pad_errors():
    with rg.Graph().as_default():
        p, q = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.pad(p, q)
        with pytest.raises(InvalidArgumentError, match="paddings must be >= 0"):
            evaluate(y, {p: arange((2, 3)), q: np.array([[-1, 0], [0, 0]], np.int32)})
        with pytest.raises(InvalidArgumentError, match=r"paddings must have shape \[2, 2\]"):
            evaluate(y, {p: arange((2, 3)), q: np.array([[1, 0]], np.int32)})
        c = rg.placeholder(rg.float32)
        z = rg.pad(p, q, constant_values=c)
        with pytest.raises(InvalidArgumentError, match="constant_values must be a scalar"):
            evaluate(
                z, {p: arange((2,)), q: np.array([[1, 0]], np.int32), c: np.ones(1, np.float32)}
            )


def _mirror_ref(x, pads, symmetric):
    """Mirrors one axis at a time with explicit index lists."""
    out = x
    for axis, (lo, hi) in enumerate(pads):
        n = out.shape[axis]
        off = 0 if symmetric else 1
        left = [lo - 1 - i + off for i in range(lo)]  # mirror image of positions -lo..-1
        right = [n - 1 - i - off for i in range(hi)]
        idx = left + list(range(n)) + right
        out = np.take(out, idx, axis=axis)
    return out


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad(mode):
    x = arange((3, 4))
    lim = 3 if mode == "SYMMETRIC" else 2
    for pads in ([[0, 0], [0, 0]], [[lim, 1], [2, lim]], [[1, 2], [0, 3]]):
        check(
            run(lambda p, pads=pads: rg.pad(p, pads, mode), x),
            _mirror_ref(x, pads, mode == "SYMMETRIC"),
        )
    check(
        run(lambda p: rg.pad(p, [[2, 2]], "reflect"), np.array([1, 2, 3])),
        np.array([3, 2, 1, 2, 3, 2, 1]),
    )
    with rg.Graph().as_default():
        p, q = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.pad(p, q, mode)
        with pytest.raises(
            InvalidArgumentError, match=f"{mode} paddings of dim 0 .size 3. must be at most {lim}"
        ):
            evaluate(y, {p: x, q: np.array([[lim + 1, 0], [0, 0]], np.int32)})


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
def test_reverse(dtype):
    x = arange((2, 3, 4), dtype)
    for axes in ([], [0], [-1], [0, 2], [1, -3, 2]):
        want = x
        for a in axes:
            want = np.flip(want, a)
        check(run(lambda p, axes=axes: rg.reverse(p, np.array(axes, np.int32)), x), want)
    s = np.array([b"a", b"b", b"c"], object)
    assert list(run(lambda p: rg.reverse(p, [0]), s)) == [b"c", b"b", b"a"]
    with rg.Graph().as_default():
        p, a = rg.placeholder(rg.as_dtype(dtype)), rg.placeholder(rg.int32)
        y = rg.reverse(p, a)
        with pytest.raises(InvalidArgumentError, match="axis 0 is given more than once"):
            evaluate(y, {p: x, a: np.array([0, -3], np.int32)})
        with pytest.raises(InvalidArgumentError, match="axis 3 is out of range"):
            evaluate(y, {p: x, a: np.array([3], np.int32)})
        # An empty input comes back as is, as in TensorFlow, whatever the axes.
        check(
            evaluate(y, {p: np.zeros((0, 2), dtype), a: np.array([5], np.int32)}),
            np.zeros((0, 2), dtype),
        )


# -- gather, scatter -----------------------------------------------------------------------------


def _gather_ref(params, indices, axis, batch_dims):
    axis %= params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    out_shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    out = np.zeros(out_shape, params.dtype)
    for pos in np.ndindex(*out_shape):
        pre = pos[:axis]
        ipos = pos[axis : axis + indices.ndim - batch_dims]
        post = pos[axis + indices.ndim - batch_dims :]
        i = indices[pre[:batch_dims] + ipos]
        out[pos] = params[pre + (i,) + post]
    return out


@pytest.mark.parametrize(
    "pshape, ishape, axis, batch_dims",
    [
        ((5,), (3,), 0, 0),
        ((5, 3), (2, 2), 0, 0),
        ((5, 3), (4,), 1, 0),
        ((5, 3), (), -1, 0),
        ((2, 3, 4), (2, 5), 2, 1),
        ((2, 3, 4), (2, 3, 2), 2, 2),
        ((2, 3, 4, 2), (2, 1, 3), 2, 1),
        ((2, 3, 4), (2, 5), -1, -1),
        ((0, 3), (0,), 0, 0),
        ((4, 0), (3,), 0, 0),
    ],
)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64, np.int16])
def test_gather(pshape, ishape, axis, batch_dims, index_dtype):
    rng = np.random.default_rng(1)
    params = arange(pshape)
    limit = pshape[axis]
    indices = rng.integers(0, max(limit, 1), size=ishape).astype(index_dtype)
    got = run(lambda p, i: rg.gather(p, i, axis=axis, batch_dims=batch_dims), params, indices)
    check(got, _gather_ref(params, indices, axis, batch_dims))


def test_gather_errors():
    params = arange((3, 4))
    with rg.Graph().as_default():
        p, i, a = rg.placeholder(rg.float32), rg.placeholder(rg.int32), rg.placeholder(rg.int32)
        y = rg.gather(p, i, axis=a)
        for idx, axis, message in [
            ([0, 5], 0, "indices[1] = 5 is not in [0, 3)"),
            ([[0], [-1]], 0, "indices[1,0] = -1 is not in [0, 3)"),
            ([0], 2, "axis 2 is out of range [-2, 2)"),
        ]:
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(y, {p: params, i: np.array(idx, np.int32), a: np.int32(axis)})
            assert message in str(e.value)
        # Nothing is read from an empty output, so no index is checked (as in TensorFlow).
        got = evaluate(
            y, {p: np.zeros((0, 2), np.float32), i: np.array([7], np.int32), a: np.int32(1)}
        )
        check(got, np.zeros((0, 1), np.float32))
        yb = rg.gather(p, i, axis=1, batch_dims=1)
        with pytest.raises(
            InvalidArgumentError, match=r"params.shape\[0\] = 3 must equal indices.shape\[0\] = 2"
        ):
            evaluate(yb, {p: params, i: np.zeros((2, 1), np.int32)})


def _gather_nd_ref(params, indices):
    r = indices.shape[-1]
    lead = indices.shape[:-1]
    out = np.zeros(lead + params.shape[r:], params.dtype)
    for pos in np.ndindex(*lead):
        out[pos] = params[tuple(int(v) for v in indices[pos])]
    return out


@pytest.mark.parametrize(
    "pshape, ishape",
    [
        ((3, 4), (2, 2)),
        ((3, 4), (2,)),
        ((3, 4, 2), (2, 3, 1)),
        ((3, 4), (2, 0)),
        ((3, 4), (0, 2)),
        ((3,), (1,)),
    ],
)
def test_gather_nd(pshape, ishape):
    rng = np.random.default_rng(2)
    params = arange(pshape)
    r = ishape[-1]
    cols = [rng.integers(0, pshape[j], size=ishape[:-1]) for j in range(r)]
    indices = np.stack(cols, axis=-1).astype(np.int32) if r else np.zeros(ishape, np.int32)
    check(run(rg.gather_nd, params, indices), _gather_nd_ref(params, indices))


@pytest.mark.parametrize(
    "pshape, ishape, batch_dims",
    [
        ((2, 4, 3), (2, 1), 1),
        ((2, 4, 3), (2, 5, 2), 1),
        ((2, 3, 4, 5), (2, 3, 2, 1), 2),
        ((3, 4), (3, 2, 1), 1),
        ((2, 3, 4), (2, 3, 0), 2),
    ],
)
def test_gather_nd_with_batch_dims(pshape, ishape, batch_dims):
    """Each batch entry's tuples index its own slice of params (tf.gather_nd's batch_dims)."""
    rng = np.random.default_rng(3)
    params = arange(pshape)
    r = ishape[-1]
    cols = [rng.integers(0, pshape[batch_dims + j], size=ishape[:-1]) for j in range(r)]
    indices = np.stack(cols, axis=-1).astype(np.int32) if r else np.zeros(ishape, np.int32)
    want = np.stack(
        [_gather_nd_ref(params[b], indices[b]) for b in np.ndindex(*pshape[:batch_dims])]
    ).reshape(indices.shape[:-1] + params.shape[batch_dims + r :])
    with rg.Graph().as_default():
        p = rg.placeholder(rg.float32, pshape)
        i = rg.placeholder(rg.int32, [None] * len(ishape))
        y = rg.gather_nd(p, i, batch_dims=batch_dims)
        check(evaluate(y, {p: params, i: indices}), want)
    for bad, message in [(len(ishape), "less than the rank of indices"), (-1, "non-negative")]:
        with rg.Graph().as_default(), pytest.raises(ValueError, match=message):
            rg.gather_nd(params, indices, batch_dims=bad)


def test_gather_nd_errors():
    with rg.Graph().as_default():
        p, i = rg.placeholder(rg.float32), rg.placeholder(rg.int64)
        y = rg.gather_nd(p, i)
        for pv, iv, message in [
            (
                arange((3, 4)),
                [[0, 1], [3, 0]],
                "indices[1] = [3, 0] does not index into param shape [3,4]",
            ),
            (arange((3, 4)), [[-1, 0]], "indices[0] = [-1, 0] does not index"),
            (arange((3, 4)), [[0, 0, 0]], "innermost dimension of indices (3) must be <= the rank"),
            (np.zeros((0, 4), np.float32), [[0]], "params is empty"),
        ]:
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(y, {p: pv, i: np.array(iv, np.int64)})
            assert message in str(e.value)


def _scatter_ref(indices, updates, shape):
    out = np.zeros(shape, updates.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        target = tuple(int(v) for v in indices[pos])
        if out.dtype == bool:
            out[target] = out[target] | updates[pos]
        else:
            out[target] = out[target] + updates[pos]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64, np.bool_])
def test_scatter_nd(dtype):
    cases = [
        (np.array([[1], [1], [3]]), (4,)),  # duplicates sum
        (np.array([[1], [0]]), (3, 2)),
        (np.array([[[0, 1], [2, 2]], [[0, 1], [1, 0]]]), (3, 3, 2)),
        (np.zeros((0, 1), np.int64), (3,)),
    ]
    for indices, shape in cases:
        ushape = indices.shape[:-1] + shape[indices.shape[-1] :]
        updates = (arange(ushape, np.float32) + 5).astype(dtype)
        got = run(lambda i, u, shape=shape: rg.scatter_nd(i, u, list(shape)), indices, updates)
        check(got, _scatter_ref(indices, updates, shape))


def test_scatter_nd_errors():
    with rg.Graph().as_default():
        i, u, s = rg.placeholder(rg.int32), rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.scatter_nd(i, u, s)
        for iv, uv, sv, message in [
            ([[1], [4]], [1, 2], [4], "indices[1] = [4] does not index into shape [4]"),
            ([[-1]], [1], [4], "indices[0] = [-1] does not index"),
            ([[1], [2]], [1, 2, 3], [4], "updates has shape [3]"),
            ([[0]], [1], [0], "empty output"),
            ([[0]], [1], [-1], "sizes >= 0"),
        ]:
            feeds = {
                i: np.array(iv, np.int32),
                u: np.array(uv, np.float32),
                s: np.array(sv, np.int32),
            }
            with pytest.raises(InvalidArgumentError) as e:
                evaluate(y, feeds)
            assert message in str(e.value)


def _one_hot_ref(indices, depth, on, off, axis):
    out = np.full(indices.shape + (depth,), off, dtype=np.asarray(on).dtype)
    for pos in np.ndindex(*indices.shape):
        if 0 <= indices[pos] < depth:
            out[pos + (int(indices[pos]),)] = on
    return np.moveaxis(out, -1, axis) if axis != -1 else out


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_one_hot(axis, index_dtype):
    indices = np.array([[0, 2, 5], [1, 3, 0]]).astype(index_dtype)
    if index_dtype != np.uint8:
        indices[0, 2] = -1
    got = run(lambda i: rg.one_hot(i, 4, 5.0, -1.0, axis=axis), indices)
    check(got, _one_hot_ref(indices, 4, np.float32(5), np.float32(-1), axis))
    got = run(lambda i: rg.one_hot(i, 3, True, False, axis=min(axis, 1)), indices[0])
    check(got, _one_hot_ref(indices[0], 3, True, False, min(axis, 1)))


def test_one_hot_edge_cases():
    check(run(lambda i: rg.one_hot(i, 0), np.array([0, 1])), np.zeros((2, 0), np.float32))
    check(run(lambda i: rg.one_hot(i, 2), np.zeros((0,), np.int32)), np.zeros((0, 2), np.float32))
    check(
        run(lambda i: rg.one_hot(i, 3, dtype=rg.int64), np.int32(1)), np.array([0, 1, 0], np.int64)
    )
    with rg.Graph().as_default():
        i, d = rg.placeholder(rg.int32), rg.placeholder(rg.int32)
        with pytest.raises(InvalidArgumentError, match="depth must be >= 0, got -1"):
            evaluate(rg.one_hot(i, d), {i: np.array([0]), d: np.int32(-1)})


def _partition_ref(data, partitions, n):
    outs = [[] for _ in range(n)]
    flat_p = partitions.reshape(-1)
    flat_d = data.reshape((flat_p.size,) + data.shape[partitions.ndim :])
    for k, p in enumerate(flat_p):
        outs[p].append(flat_d[k])
    return [
        np.array(o, data.dtype).reshape((len(o),) + data.shape[partitions.ndim :]) for o in outs
    ]


@pytest.mark.parametrize(
    "dshape, partitions, n",
    [
        ((4,), [1, 0, 1, 1], 3),
        ((2, 2, 3), [[0, 1], [1, 1]], 2),
        ((3, 2), [2, 2, 0], 3),
        ((0, 2), np.zeros([0], np.int32), 2),
        ((3,), [0, 0, 0], 1),
    ],
)
def test_dynamic_partition(dshape, partitions, n):
    data = arange(dshape)
    partitions = np.array(partitions, np.int32)
    got = run(lambda d, p: rg.dynamic_partition(d, p, n), data, partitions)
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, _partition_ref(data, partitions, n), strict=True):
        check(g, w)


def test_dynamic_partition_errors():
    with rg.Graph().as_default():
        d, p = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.dynamic_partition(d, p, 3)
        with pytest.raises(InvalidArgumentError, match=r"partitions\[2\] = 5 is not in \[0, 3\)"):
            evaluate(y, {d: arange((4,)), p: np.array([1, 0, 5, 1], np.int32)})
        with pytest.raises(InvalidArgumentError, match=r"partitions\[0,1\] = -1 is not in"):
            evaluate(y, {d: arange((2, 2)), p: np.array([[0, -1], [0, 0]], np.int32)})
        with pytest.raises(
            InvalidArgumentError, match="data.shape must start with partitions.shape"
        ):
            evaluate(y, {d: arange((2, 2)), p: np.array([1, 0, 0], np.int32)})


def _stitch_ref(indices, data):
    rest = data[0].shape[indices[0].ndim :]
    size = max([int(i.max()) + 1 for i in indices if i.size] + [0])
    out = np.zeros((size,) + rest, data[0].dtype)
    for ix, dx in zip(indices, data):  # later assignments win, in order
        for pos in np.ndindex(*ix.shape):
            out[ix[pos]] = dx[pos]
    return out


def test_dynamic_stitch():
    cases = [
        ([[0, 4], [4, 1]], [[1.0, 2.0], [3.0, 4.0]]),
        ([[0, 5]], [[1.0, 2.0]]),  # a gap is filled with zeros
        ([[[0, 1], [2, 3]], [5]], [np.ones([2, 2, 3]), np.zeros([1, 3])]),
        ([1, 0], [[1.0, 2.0], [3.0, 4.0]]),  # scalar indices
        ([[2, 2, 2]], [[7.0, 8.0, 9.0]]),  # within one tensor, the last wins
        ([np.zeros([0], np.int32)], [np.zeros([0, 2])]),
    ]
    for indices, data in cases:
        indices = [np.array(i, np.int32) for i in indices]
        data = [np.array(d, np.float64) for d in data]
        n = len(indices)
        got = run(lambda *a, n=n: rg.dynamic_stitch(list(a[:n]), list(a[n:])), *indices, *data)
        check(got, _stitch_ref(indices, data))


def test_dynamic_stitch_errors():
    with rg.Graph().as_default():
        i, d = rg.placeholder(rg.int32), rg.placeholder(rg.float32)
        y = rg.dynamic_stitch([i], [d])
        with pytest.raises(InvalidArgumentError, match=r"indices\[0\]\[1\] = -1 is out of range"):
            evaluate(y, {i: np.array([0, -1], np.int32), d: np.zeros(2, np.float32)})
        with pytest.raises(
            InvalidArgumentError, match=r"data\[0\].shape = \[3\] does not start with"
        ):
            evaluate(y, {i: np.array([0, 1], np.int32), d: np.zeros(3, np.float32)})


# -- where, unique, top_k ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        np.array([[0, 1], [2, 0]], np.int32),
        np.array([np.nan, 0.0, -0.0, 1.0], np.float32),
        np.array([[[True, False]], [[False, True]]]),
        np.zeros((3, 0), bool),
        np.array([1 + 0j, 0j], np.complex64),
    ],
)
def test_where(x):
    want = np.array([pos for pos in np.ndindex(*x.shape) if x[pos]], np.int64).reshape(-1, x.ndim)
    check(run(rg.where, x), want)


def test_where_of_a_scalar_fails():
    with pytest.raises(InvalidArgumentError, match="rank >= 1"):
        run(rg.where, np.array(True))


def _unique_ref(x):
    y, idx, seen = [], [], {}
    for v in x.tolist():
        key = v
        if isinstance(v, float) and v != v:  # NaN never equals an earlier value
            key = object()
        if key not in seen:
            seen[key] = len(y)
            y.append(v)
        idx.append(seen[key])
    return y, idx


@pytest.mark.parametrize(
    "x",
    [
        np.array([3, 1, 3, 2, 1], np.int64),
        np.array([np.nan, np.nan, 0.0, -0.0, 2.0], np.float32),
        np.array([True, True, False]),
        np.array([b"a", b"b", b"a"], object),
        np.zeros([0], np.int32),
    ],
)
@pytest.mark.parametrize("out_idx", [rg.int32, rg.int64])
def test_unique(x, out_idx):
    y, idx = run(lambda p: rg.unique(p, out_idx=out_idx), x)
    want_y, want_idx = _unique_ref(x)
    assert y.dtype == x.dtype
    assert np.array_equal(
        np.array(y.tolist(), dtype=x.dtype),
        np.array(want_y, dtype=x.dtype),
        equal_nan=x.dtype.kind == "f",
    )
    if x.dtype.kind == "f":  # the first occurrence's value is kept: 0.0 before -0.0
        assert list(np.signbit(y)) == [False, False, False, False]
    check(idx, np.array(want_idx, out_idx.np))


@pytest.fixture(params=[True, False], ids=["jit", "numpy"])
def jit_on(request):
    from rill.exec.kernels import jit

    old = jit.set_enabled(request.param)
    yield request.param
    jit.set_enabled(old)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint64])
def test_unique_of_integers_compiled_or_not(jit_on, dtype):
    # Many values, repeats and (through the compiled hash table's probing) collisions; the
    # extremes of each dtype.
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    x = rng.integers(0, 300, 2000).astype(dtype)
    x[::7] = info.max
    x[::11] = info.min
    x[5::13] = dtype(info.max - 1)
    for v in (x, x[:1], np.unique(x), rng.permutation(np.arange(500)).astype(dtype)):
        y, idx = run(lambda p: rg.unique(p, out_idx=rg.int32), v)
        want_y, want_idx = _unique_ref(v)
        check(y, np.array(want_y, dtype))
        check(idx, np.array(want_idx, np.int32))


def test_partition_and_stitch_compiled_or_not(jit_on):
    # The embedding lookup's pattern: ids spread over 5 partitions, some empty, then stitched
    # back by position.
    rng = np.random.default_rng(4)
    for n, k in ((1000, 5), (7, 5), (1, 1)):
        data = rng.standard_normal((n, 3)).astype(np.float32)
        parts = rng.integers(0, min(k, 3) if n == 7 else k, n).astype(np.int32)
        got = run(lambda d, p, k=k: rg.dynamic_partition(d, p, k), data, parts)
        got = got if isinstance(got, list) else [got]
        for g, w in zip(got, _partition_ref(data, parts, k), strict=True):
            check(g, w)
        pos = run(
            lambda p, k=k, n=n: rg.dynamic_partition(np.arange(n, dtype=np.int32), p, k), parts
        )
        pos = pos if isinstance(pos, list) else [pos]
        stitched = run(lambda *a, k=k: rg.dynamic_stitch(list(a[:k]), list(a[k:])), *pos, *got)
        check(stitched, data)
    with rg.Graph().as_default():
        d, p = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.dynamic_partition(d, p, 3)
        with pytest.raises(InvalidArgumentError, match=r"partitions\[3\] = 3 is not in \[0, 3\)"):
            evaluate(y, {d: arange((5,)), p: np.array([1, 0, 2, 3, -1], np.int32)})
        i, j, a, b = (rg.placeholder(t) for t in (rg.int32, rg.int32, rg.float32, rg.float32))
        z = rg.dynamic_stitch([i, j], [a, b])
        with pytest.raises(InvalidArgumentError, match=r"indices\[1\]\[0\] = -2 is out of range"):
            evaluate(z, {i: np.array([0, 1], np.int32), j: np.array([-2], np.int32),
                         a: np.zeros(2, np.float32), b: np.zeros(1, np.float32)})  # fmt: skip
        # A gap stays zero, and a repeated index takes the later value.
        got = evaluate(z, {i: np.array([0, 3], np.int32), j: np.array([3], np.int32),
                           a: np.array([1.0, 2.0], np.float32), b: np.array([5.0], np.float32)})  # fmt: skip
        check(got, np.array([1.0, 0.0, 0.0, 5.0], np.float32))


def test_unique_needs_a_vector():
    with pytest.raises(InvalidArgumentError, match="unique expects a vector"):
        with rg.Graph().as_default():
            p = rg.placeholder(rg.int32)
            evaluate(rg.unique(p).y, {p: np.zeros((1, 2), np.int32)})


def _top_k_ref(x, k):
    rows = x.reshape(-1, x.shape[-1])
    vals, idxs = [], []
    for row in rows:
        order = sorted(range(len(row)), key=lambda i: (-float(row[i]), i))[:k]
        idxs.append(order)
        vals.append([row[i] for i in order])
    shape = x.shape[:-1] + (k,)
    return np.array(vals, x.dtype).reshape(shape), np.array(idxs).reshape(shape)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64, np.float16]
)
@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_top_k(dtype, k):
    x = np.array([[1, 3, 3, 2, 3], [5, 5, 0, 1, 4], [2, 2, 2, 2, 2]], dtype)
    for index_type in (rg.int32, rg.int64):
        values, indices = run(lambda p, t=index_type: rg.top_k(p, k, index_type=t), x)
        want_v, want_i = _top_k_ref(x, k)
        check(values, want_v)
        check(indices, want_i.astype(index_type.np))


def test_top_k_edge_cases():
    values, indices = run(lambda p: rg.top_k(p, 2), np.zeros((0, 3), np.float32))
    check(values, np.zeros((0, 2), np.float32))
    check(indices, np.zeros((0, 2), np.int32))
    big = np.array([2**63 + 1, 2**63, 5], np.uint64)
    values, indices = run(lambda p: rg.top_k(p, 2), big)
    check(values, big[:2])
    check(indices, np.array([0, 1], np.int32))
    values, _ = run(lambda p: rg.top_k(p, 3, sorted=False), np.array([5.0, 1.0, 4.0, 3.0]))
    assert sorted(values.tolist(), reverse=True) == [5.0, 4.0, 3.0]
    with rg.Graph().as_default():
        p, k = rg.placeholder(rg.float32), rg.placeholder(rg.int32)
        y = rg.top_k(p, k)
        with pytest.raises(InvalidArgumentError, match="needs k=3"):
            evaluate(y, {p: np.zeros(2, np.float32), k: np.int32(3)})
        with pytest.raises(InvalidArgumentError, match="k must be >= 0, got -1"):
            evaluate(y, {p: np.zeros(2, np.float32), k: np.int32(-1)})
        with pytest.raises(InvalidArgumentError, match="at least a vector"):
            evaluate(y, {p: np.float32(1), k: np.int32(0)})
