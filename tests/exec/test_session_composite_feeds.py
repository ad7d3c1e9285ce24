"""Nested feed_dict keys (an LSTMStateTuple fed as one key) and composite fetches
(IndexedSlices -> IndexedSlicesValue), as TensorFlow-1's Session.run accepts them."""

import collections

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import IndexedSlicesValue, gradients
from rill.exec import Session

StateTuple = collections.namedtuple("StateTuple", ["c", "h"])


def test_a_namedtuple_key_feeds_each_of_its_tensors():
    g = rg.Graph()
    with g.as_default():
        state = StateTuple(
            rg.placeholder(rg.float32, [2], "c"), rg.placeholder(rg.float32, [2], "h")
        )
        out = state.c * 10.0 + state.h
        with Session(graph=g) as s:
            got = s.run(out, {state: StateTuple(np.ones(2), np.full(2, 2.0))})
            np.testing.assert_allclose(got, [12.0, 12.0])
            # A plain tuple value and a list leaf (one tensor's value) both work.
            got = s.run(out, {state: ([1.0, 2.0], [3.0, 4.0])})
            np.testing.assert_allclose(got, [13.0, 24.0])
            nested = (state, rg.placeholder_with_default(1.0, []))
            got = s.run(out * nested[1], {nested: (([0.0, 1.0], [0.0, 0.0]), 3.0)})
            np.testing.assert_allclose(got, [0.0, 30.0])
            with pytest.raises(ValueError, match="sequence of 2 values"):
                s.run(out, {state: (np.ones(2),)})


def test_fetching_indexed_slices_gives_an_indexed_slices_value():
    g = rg.Graph()
    with g.as_default():
        params = rg.constant(np.arange(12.0).reshape(4, 3), name="params")
        ids = rg.constant([3, 1])
        loss = rg.reduce_sum(rg.gather(params, ids) * 2.0)
        (grad,) = gradients(loss, [params])
        with Session(graph=g) as s:
            v = s.run(grad)
            assert isinstance(v, IndexedSlicesValue)
            np.testing.assert_array_equal(v.indices, [3, 1])
            np.testing.assert_allclose(v.values, np.full((2, 3), 2.0))
            np.testing.assert_array_equal(v.dense_shape, [4, 3])
            both = s.run({"g": grad, "l": loss})
            assert isinstance(both["g"], IndexedSlicesValue) and float(both["l"]) == 2 * 42.0


def test_an_indexed_slices_is_fed_from_an_indexed_slices_value():
    g = rg.Graph()
    with g.as_default():
        values = rg.placeholder(rg.float32, [None, 2])
        indices = rg.placeholder(rg.int32, [None])
        shape = rg.placeholder(rg.int32, [2])
        from rill.autodiff import IndexedSlices, convert_to_dense

        slices = IndexedSlices(values, indices, shape)
        dense = convert_to_dense(slices)
        with Session(graph=g) as s:
            feed = IndexedSlicesValue(np.ones((2, 2)), np.array([2, 0]), np.array([3, 2]))
            np.testing.assert_array_equal(s.run(dense, {slices: feed}), [[1, 1], [0, 0], [1, 1]])
