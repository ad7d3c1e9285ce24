"""Gradients of the array op family: what the finite-difference conformance suite cannot see.

Sparse gradients stay sparse (an embedding lookup's gradient reaches the variable as an
IndexedSlices whose values never pass through a densifying op), variables' gradients checked
numerically by perturbing the variable, dynamic-shape paths, the ops the gradient graphs use,
None for integer and non-differentiable inputs, and TensorFlow's quirks kept on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import IndexedSlices, compute_gradient_error, gradients
from rill.autodiff.indexed_slices import convert_to_dense
from rill.exec import Session
from rill.graph.ops import grad_ops, state_ops

DENSIFYING = {"ScatterNd", "UnsortedSegmentSum"}  # ops that turn slices into a dense tensor

rng = np.random.default_rng(42)


def uniform(*shape) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape)


def ancestors(t) -> set[rg.Operation]:
    """Every op `t` depends on (iteratively: gradient graphs can be deep)."""
    seen: set = set()
    stack = [t.op]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(i.op for i in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def op_types(ts) -> set[str]:
    out: set[str] = set()
    for t in ts:
        out |= {op.type for op in ancestors(t)}
    return out


def grad_ops_of(g: rg.Graph) -> set[str]:
    return {op.type for op in g.get_operations() if op.name.startswith("gradients/")}


def numeric_error(x, value, y, feed=None, sess=None) -> float:
    """Largest difference between the symbolic and finite-difference Jacobians of y wrt x."""
    feed = dict(feed or {})
    y_shape = list(np.shape(sess.run(y, {**feed, x: value})))
    return compute_gradient_error(
        x, list(value.shape), y, y_shape, x_init_value=value, delta=1e-5,
        extra_feed_dict=feed, session=sess,
    )  # fmt: skip


def sparse_to_dense(values, indices, dense_shape) -> np.ndarray:
    out = np.zeros(dense_shape, values.dtype)
    np.add.at(out, indices, values)
    return out


# -- the sparse path of embedding lookups -------------------------------------------------------


def test_embedding_gradient_stays_sparse_and_equals_the_one_hot_gradient(graph):
    table = uniform(6, 3)
    ids = np.array([[0, 2], [2, 5], [5, 5]], np.int32)  # repeated ids must add up
    v = rg.Variable(table, name="embedding")
    emb = v.sparse_read(ids)
    assert emb.op.type == "ResourceGather"
    # The loss is sum(emb · w): its gradient with respect to emb is w, fed as grad_ys.
    w = rg.placeholder(rg.float64, [3, 2, 3], name="w")
    (g,) = gradients(emb, [v], grad_ys=w)
    assert isinstance(g, IndexedSlices)
    assert g.values.shape == rg.TensorShape([6, 3])
    assert g.indices.shape == rg.TensorShape([6])
    # Nothing between the loss gradient and the values scatters, segments or fills.
    between = op_types([g.values, g.indices])
    assert not between & DENSIFYING, between
    assert between <= {"Reshape", "Placeholder", "Const"}, between
    dense = convert_to_dense(g)
    w_value = uniform(3, 2, 3)
    with Session() as sess:
        sess.run(v.initializer)
        values, indices, shape, dense_value = sess.run(
            [g.values, g.indices, g.dense_shape, dense], {w: w_value}
        )
    one_hot = np.eye(6)[ids.reshape(-1)]  # [6 lookups, 6 rows]
    want = one_hot.T @ w_value.reshape(-1, 3)  # d/dtable of sum((one_hot @ table) · w)
    np.testing.assert_array_equal(shape, [6, 3])
    np.testing.assert_array_equal(indices, ids.reshape(-1))
    np.testing.assert_allclose(sparse_to_dense(values, indices, shape), want, rtol=1e-12)
    np.testing.assert_allclose(dense_value, want, rtol=1e-12)


def test_gather_of_a_read_variable_is_sparse_at_the_variable(graph):
    v = rg.Variable(uniform(5, 2), name="v")
    rows = rg.gather(v.read_value(), [4, 1, 4])  # Identity(ReadVariableOp) then GatherV2
    (g,) = gradients(rows, [v])
    assert isinstance(g, IndexedSlices)
    assert not op_types([g.values, g.indices]) & DENSIFYING
    with Session() as sess:
        sess.run(v.initializer)
        values, indices, shape = sess.run([g.values, g.indices, g.dense_shape])
    np.testing.assert_array_equal(indices, [4, 1, 4])
    want = np.zeros((5, 2))
    want[[1, 4]] = [[1, 1], [2, 2]]
    np.testing.assert_array_equal(sparse_to_dense(values, indices, shape), want)


def test_row_gather_gradient_values_do_not_read_the_indices(graph):
    """With a known row shape the values are the incoming gradient's rows, however many: they
    do not wait on the indices (in a sharded lookup those live on the parameter server), and
    a dynamic number of indices still gives the right slices."""
    v = rg.Variable(uniform(6, 3), name="v")
    ids = rg.placeholder(rg.int32, [None])
    dy = rg.placeholder(rg.float64, [None, 3])  # the gradient arriving from the worker's loss
    (g,) = gradients(v.sparse_read(ids), [v], grad_ys=dy)
    assert isinstance(g, IndexedSlices)
    assert ids.op not in ancestors(g.values)
    with Session() as sess:
        sess.run(v.initializer)
        for feed in ([5, 0, 5], [2]):
            d = uniform(len(feed), 3)
            values, indices = sess.run([g.values, g.indices], {ids: feed, dy: d})
            np.testing.assert_array_equal(indices, feed)
            np.testing.assert_array_equal(values, d)


def test_two_lookups_of_one_table_concatenate_their_slices(graph):
    v = rg.Variable(uniform(4, 2), name="v")
    a, b = v.sparse_read([0, 1]), v.sparse_read([[3], [1]])
    (g,) = gradients([a, b], [v])
    assert isinstance(g, IndexedSlices)
    assert not op_types([g.values]) & DENSIFYING
    with Session() as sess:
        sess.run(v.initializer)
        values, indices = sess.run([g.values, g.indices])
    assert sorted(indices.tolist()) == [0, 1, 1, 3]
    want = np.zeros((4, 2))
    want[[0, 3]] = 1.0
    want[1] = 2.0
    np.testing.assert_array_equal(sparse_to_dense(values, indices, (4, 2)), want)


# -- variables, checked by perturbing them --------------------------------------------------------


def variable_numeric_check(v, init: np.ndarray, y, w: np.ndarray, dense) -> None:
    """dense (the symbolic gradient of sum(y · w)) against central differences obtained by
    loading perturbed values into the variable."""
    delta = 1e-6
    with Session() as sess:
        sess.run(v.initializer)
        got = sess.run(dense)
        numeric = np.zeros_like(init)
        for i in np.ndindex(*init.shape):
            total = []
            for sign in (1, -1):
                value = init.copy()
                value[i] += sign * delta
                v.load(value, sess)
                total.append(np.sum(sess.run(y) * w))
            numeric[i] = (total[0] - total[1]) / (2 * delta)
    np.testing.assert_allclose(got, numeric, atol=1e-7)


def test_resource_gather_gradient_matches_finite_differences(graph):
    init = uniform(5, 2, 2)
    v = rg.Variable(init, name="v")
    y = v.sparse_read([[3, 0], [3, 4]])
    w = uniform(2, 2, 2, 2)
    (g,) = gradients(y, [v], grad_ys=rg.constant(w))
    assert isinstance(g, IndexedSlices)
    variable_numeric_check(v, init, y, w, convert_to_dense(g))


def test_resource_gather_with_batch_dims_is_dense_and_correct(graph):
    init = uniform(2, 4, 3)
    v = rg.Variable(init, name="v")
    y = state_ops.resource_gather(
        v.handle, np.array([[0, 3, 3], [1, 1, 2]], np.int32), rg.float64, batch_dims=1
    )
    assert y.shape == rg.TensorShape([2, 3, 3])
    w = uniform(2, 3, 3)
    (g,) = gradients(y, [v], grad_ys=rg.constant(w))
    assert isinstance(g, rg.Tensor)
    assert g.shape == rg.TensorShape([2, 4, 3])
    variable_numeric_check(v, init, y, w, g)


def test_resource_gather_of_a_variable_of_unknown_shape(graph):
    init = uniform(4, 3)
    v = rg.Variable(init, name="v", validate_shape=False)
    assert v.shape.rank is None
    y = v.sparse_read([2, 2, 0])
    w = uniform(3, 3)
    (g,) = gradients(y, [v], grad_ys=rg.constant(w))
    assert isinstance(g, IndexedSlices)
    variable_numeric_check(v, init, y, w, convert_to_dense(g))


def test_read_variable_gradient_is_the_incoming_gradient(graph):
    init = uniform(3, 4)
    v = rg.Variable(init, name="v")
    y = rg.transpose(rg.reverse(v.value(), [1]))
    w = uniform(4, 3)
    (g,) = gradients(y, [v], grad_ys=rg.constant(w))
    assert isinstance(g, rg.Tensor) and g.shape == rg.TensorShape([3, 4])
    variable_numeric_check(v, init, y, w, g)


# -- IndexedSlices arriving at array ops ------------------------------------------------------------


def test_concat_along_rows_splits_a_sparse_gradient_per_input(graph):
    a = rg.placeholder(rg.float64, [3, 2], name="a")
    b = rg.placeholder(rg.float64, [None, 2], name="b")
    y = rg.gather(rg.concat([a, b], 0), [0, 3, 4, 3])
    ga, gb = gradients(y, [a, b])
    assert isinstance(ga, IndexedSlices) and isinstance(gb, IndexedSlices)
    assert not op_types([ga.values, gb.values]) & DENSIFYING
    feed = {a: uniform(3, 2), b: uniform(2, 2)}
    with Session() as sess:
        va, ia, sa, vb, ib, sb = sess.run(
            [ga.values, ga.indices, ga.dense_shape, gb.values, gb.indices, gb.dense_shape], feed
        )
        np.testing.assert_array_equal(ia, [0])
        np.testing.assert_array_equal(ib, [0, 1, 0])
        np.testing.assert_array_equal(sb, [2, 2])
        want_b = np.array([[2.0, 2.0], [1.0, 1.0]])
        np.testing.assert_array_equal(sparse_to_dense(vb, ib, sb), want_b)
        np.testing.assert_array_equal(sparse_to_dense(va, ia, sa), [[1, 1], [0, 0], [0, 0]])
        for x in (a, b):
            assert numeric_error(x, feed[x], y, {k: v for k, v in feed.items() if k is not x},
                                 sess) < 1e-8  # fmt: skip


def test_concat_along_columns_keeps_the_rows_and_splits_the_values(graph):
    a = rg.placeholder(rg.float64, [3, 1], name="a")
    b = rg.placeholder(rg.float64, [3, 2], name="b")
    y = rg.gather(rg.concat([a, b], 1), [2, 2, 0])
    ga, gb = gradients(y, [a, b], grad_ys=rg.constant(np.arange(9.0).reshape(3, 3)))
    assert isinstance(ga, IndexedSlices) and isinstance(gb, IndexedSlices)
    feed = {a: uniform(3, 1), b: uniform(3, 2)}
    with Session() as sess:
        va, ia, vb, ib = sess.run([ga.values, ga.indices, gb.values, gb.indices], feed)
    np.testing.assert_array_equal(ia, [2, 2, 0])
    np.testing.assert_array_equal(va, [[0], [3], [6]])
    np.testing.assert_array_equal(vb, [[1, 2], [4, 5], [7, 8]])


def test_sparse_gradients_are_densified_where_an_op_needs_it(graph):
    x = rg.placeholder(rg.float64, [2, 6], name="x")
    # Reshape, DynamicStitch and a concat along a run-time axis receive IndexedSlices.
    y1 = rg.gather(rg.reshape(x, [4, 3]), [3, 0, 3])
    y2 = rg.gather(rg.dynamic_stitch([[1, 0]], [x]), [1, 1])
    axis = rg.placeholder_with_default(np.int32(0), [], name="axis")
    y3 = rg.gather(rg.concat([x, x], axis), [0, 3])
    value = uniform(2, 6)
    with Session() as sess:
        for y in (y1, y2, y3):
            assert numeric_error(x, value, y, sess=sess) < 1e-8


# -- dynamic shapes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, value",
    [
        (lambda x: rg.concat([x, rg.reverse(x, [1]), x], 1), uniform(2, 3)),
        (lambda x: rg.slice(x, [1, 0], [1, -1]), uniform(3, 4)),
        (lambda x: rg.tile(x, [2, 3]), uniform(2, 2)),
        (lambda x: rg.pad(x, [[1, 0], [2, 2]]), uniform(2, 3)),
        (lambda x: rg.broadcast_to(x, [3, 2, 4]), uniform(2, 1)),
        (lambda x: rg.gather(x, [[1, 0], [2, 2]], axis=1), uniform(2, 3)),
        (lambda x: rg.gather(x, [2, 0, 2]), uniform(3, 2)),
        (lambda x: rg.gather(x, [[0, 2], [1, 1]], axis=1, batch_dims=1), uniform(2, 3)),
        (lambda x: rg.gather_nd(x, [[1, 0], [0, 2]]), uniform(2, 3)),
        (lambda x: rg.top_k(x, 2).values, np.array([[0.3, 0.9, 0.1], [0.5, 0.2, 0.8]])),
        (lambda x: rg.dynamic_partition(x, [1, 0], 2), uniform(2, 3)),
        (lambda x: rg.transpose(x), uniform(2, 3)),
        (lambda x: x[1:, ::-1], uniform(3, 2)),
    ],
    ids=["concat", "slice", "tile", "pad", "broadcast_to", "gather_axis1", "gather_axis0",
         "gather_batch", "gather_nd", "top_k", "dynamic_partition", "transpose", "strided"],
)  # fmt: skip
def test_gradients_of_tensors_of_unknown_shape(graph, build, value):
    for shape in ([None, None], None):
        x = rg.placeholder(rg.float64, shape)
        y = build(x)
        with Session() as sess:
            ys = y if isinstance(y, list) else [y]
            for out in ys:
                assert numeric_error(x, value, out, sess=sess) < 1e-8


def test_gather_along_an_axis_known_only_at_run_time(graph):
    p = rg.placeholder(rg.float64, [2, 3, 4], name="p")
    axis = rg.placeholder(rg.int32, [], name="axis")
    y = rg.gather(p, [[3, 0], [1, 1]], axis=axis)
    (g,) = gradients(y, [p])
    assert isinstance(g, rg.Tensor) and g.shape == rg.TensorShape([2, 3, 4])
    value = uniform(2, 3, 4)
    with Session() as sess:
        for a in (2, -1):
            assert numeric_error(p, value, y, {axis: np.int32(a)}, sess) < 1e-8


def test_pad_and_slice_with_run_time_arguments(graph):
    x = rg.placeholder(rg.float64, [2, 3], name="x")
    paddings = rg.placeholder(rg.int32, [2, 2], name="paddings")
    begin = rg.placeholder(rg.int64, [2], name="begin")
    padded = rg.pad(x, paddings)
    sliced = rg.slice(x, begin, np.array([1, 2], np.int64))
    value = uniform(2, 3)
    with Session() as sess:
        feed = {paddings: np.array([[0, 2], [1, 0]], np.int32)}
        assert numeric_error(x, value, padded, feed, sess) < 1e-8
        assert numeric_error(x, value, sliced, {begin: np.array([1, 1])}, sess) < 1e-8


def test_unsorted_segment_sum_with_ids_of_unknown_rank(graph):
    data = rg.placeholder(rg.float64, [3, 2], name="data")
    ids = rg.placeholder(rg.int32, None, name="ids")
    y = grad_ops.unsorted_segment_sum(data, ids, 3)
    value = uniform(3, 2)
    with Session() as sess:
        assert numeric_error(data, value, y, {ids: np.array([2, -1, 2], np.int32)}, sess) < 1e-8
        # A dropped slice (negative id) gets a zero gradient, not the gradient of row 0.
        (g,) = gradients(y, [data], grad_ys=rg.constant(np.arange(6.0).reshape(3, 2)))
        got = sess.run(g, {data: value, ids: np.array([2, -1, 0], np.int32)})
    np.testing.assert_array_equal(got, [[4, 5], [0, 0], [0, 1]])


# -- the gradient graphs ----------------------------------------------------------------------------


def test_concat_gradient_uses_concat_offset_and_slice(graph):
    a = rg.placeholder(rg.float64, [2, None], name="a")
    b = rg.placeholder(rg.float64, [2, 3], name="b")
    ga, gb = gradients(rg.concat([a, b], 1), [a, b])
    assert {"ConcatOffset", "Slice", "ShapeN"} <= grad_ops_of(graph)
    assert ga.op.type == "Slice" and gb.op.type == "Slice"
    assert gb.shape == rg.TensorShape([2, 3])


def test_mirror_pad_gradient_is_mirror_pad_grad(graph):
    x = rg.placeholder(rg.float64, [3, 4], name="x")
    (g,) = gradients(rg.pad(x, [[1, 2], [0, 3]], "SYMMETRIC"), [x])
    assert g.op.type == "MirrorPadGrad" and g.op.attrs["mode"] == "SYMMETRIC"
    assert g.shape == rg.TensorShape([3, 4])


def test_gather_along_axis_one_is_dense_through_unsorted_segment_sum(graph):
    p = rg.placeholder(rg.float64, [2, 5, 3], name="p")
    (g,) = gradients(rg.gather(p, [4, 4, 1], axis=1), [p])
    assert isinstance(g, rg.Tensor)
    assert "UnsortedSegmentSum" in grad_ops_of(graph)
    assert g.shape == rg.TensorShape([2, 5, 3])


def test_gather_along_axis_zero_uses_the_shape_of_params(graph):
    p = rg.placeholder(rg.float64, [None, 3], name="p")
    (g,) = gradients(rg.gather(p, [[1, 0]]), [p])
    assert isinstance(g, IndexedSlices)
    assert g.values.shape == rg.TensorShape([2, 3])
    assert "Shape" in op_types([g.dense_shape])
    with Session() as sess:
        shape = sess.run(g.dense_shape, {p: np.zeros((4, 3))})
    np.testing.assert_array_equal(shape, [4, 3])


def test_gather_nd_of_whole_rows_is_sparse(graph):
    p = rg.placeholder(rg.float64, [4, 3], name="p")
    (rows,) = gradients(rg.gather_nd(p, [[2], [0]]), [p])
    (elems,) = gradients(rg.gather_nd(p, [[2, 1], [0, 0]]), [p])
    assert isinstance(rows, IndexedSlices)
    assert isinstance(elems, rg.Tensor) and elems.op.type == "ScatterNd"


def test_static_shapes_fold_into_constants(graph):
    x = rg.placeholder(rg.float64, [4, 5], name="x")
    (gs,) = gradients(rg.slice(x, [1, 2], [2, 2]), [x])
    assert gs.op.type == "Pad" and gs.op.inputs[1].op.type == "Const"
    np.testing.assert_array_equal(gs.op.inputs[1].op.attrs["value"], [[1, 1], [2, 1]])
    (gb,) = gradients(rg.broadcast_to(x, [3, 4, 5]), [x])
    (gt,) = gradients(rg.transpose(x, [1, 0]), [x])
    assert "BroadcastGradientArgs" not in op_types([gb])
    assert "InvertPermutation" not in op_types([gt]) and gt.shape == rg.TensorShape([4, 5])


def test_run_time_shapes_use_shape_ops(graph):
    x = rg.placeholder(rg.float64, [None, 5], name="x")
    perm = rg.placeholder(rg.int32, [2], name="perm")
    (gb,) = gradients(rg.broadcast_to(x, [3, 4, 5]), [x])
    (gt,) = gradients(rg.transpose(x, perm), [x])
    assert "BroadcastGradientArgs" in op_types([gb])
    assert "InvertPermutation" in op_types([gt])
    with Session() as sess:
        value = uniform(4, 5)
        assert numeric_error(x, value, rg.transpose(x, perm), {perm: [1, 0]}, sess) < 1e-8


# -- None for integers and non-differentiable ops --------------------------------------------------


def test_integer_inputs_get_no_gradient(graph):
    x = rg.placeholder(rg.float64, [4, 3], name="x")
    idx = rg.placeholder(rg.int32, [2], name="idx")
    shape = rg.placeholder(rg.int32, [2], name="shape")
    paddings = rg.placeholder(rg.int32, [2, 2], name="paddings")
    y = rg.reshape(rg.gather(x, idx), shape)
    z = rg.pad(x, paddings)
    assert gradients(y, [idx, shape]) == [None, None]
    assert gradients(z, [paddings]) == [None]
    values, k = rg.top_k(x, 2)
    assert gradients(values, [x])[0] is not None
    assert gradients(rg.cast(k, rg.float64), [x]) == [None]


def test_non_differentiable_ops_give_none(graph):
    x = rg.placeholder(rg.float64, [2, 3], name="x")
    for y in (rg.zeros_like(x, optimize=False), rg.ones_like(x, optimize=False),
              rg.stop_gradient(x), rg.one_hot([0, 1], 3, on_value=rg.reduce_sum(x))):  # fmt: skip
        assert gradients(y, [x]) == [None], y.op.type
    shape = graph.create_op("Shape", [x]).outputs[0]
    assert gradients(rg.cast(shape, rg.float64), [x]) == [None]


def test_fill_gradient_is_the_sum(graph):
    v = rg.placeholder(rg.float64, [], name="v")
    dims = rg.placeholder(rg.int32, [2], name="dims")
    (g,) = gradients(rg.fill(dims, v), [v], grad_ys=rg.fill(dims, np.float64(0.5)))
    with Session() as sess:
        assert sess.run(g, {v: 1.0, dims: [3, 4]}) == 6.0


# -- TensorFlow's gradients, quirks included ------------------------------------------------------


def test_pad_v2_gives_constant_values_no_gradient_as_tensorflow_does(graph):
    x = rg.placeholder(rg.float64, [2], name="x")
    c = rg.placeholder(rg.float64, [], name="c")
    y = rg.pad(x, [[1, 1]], constant_values=c)
    assert y.op.type == "PadV2"
    gx, gc = gradients(y, [x, c])
    assert gc is None and gx is not None


def test_dynamic_stitch_passes_the_gradient_to_every_duplicate_as_tensorflow_does(graph):
    a = rg.placeholder(rg.float64, [3], name="a")
    b = rg.placeholder(rg.float64, [2], name="b")
    y = rg.dynamic_stitch([[0, 1, 2], [1, 3]], [a, b])
    ga, gb = gradients(y, [a, b])
    with Session() as sess:
        got = sess.run([ga, gb], {a: np.zeros(3), b: np.zeros(2)})
    np.testing.assert_array_equal(got[0], [1, 1, 1])  # a[1] is overwritten, yet gets 1
    np.testing.assert_array_equal(got[1], [1, 1])


def test_split_fills_missing_output_gradients_with_zeros(graph):
    x = rg.placeholder(rg.float64, [6], name="x")
    parts = rg.split(x, 3)
    (g,) = gradients(parts[1], [x])
    with Session() as sess:
        np.testing.assert_array_equal(sess.run(g, {x: np.zeros(6)}), [0, 0, 1, 1, 0, 0])


def test_top_k_gradient_goes_to_the_selected_entries(graph):
    x = rg.placeholder(rg.float64, [2, 4], name="x")
    values, _ = rg.top_k(x, 2)
    (g,) = gradients(values, [x], grad_ys=rg.constant(np.array([[10.0, 20.0], [30.0, 40.0]])))
    with Session() as sess:
        got = sess.run(g, {x: np.array([[0.1, 0.7, 0.3, 0.9], [0.5, 0.4, 0.2, 0.1]])})
    np.testing.assert_array_equal(got, [[0, 20, 0, 10], [30, 40, 0, 0]])
