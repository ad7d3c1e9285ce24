"""Lookup tables: a key of the wrong dtype, a lookup before initialization and a second
initialization of an immutable table are clear errors; the TensorFlow-made cases are in the
lookup fixture (test_tf_graph_fixtures.py)."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import FailedPreconditionError, InvalidArgumentError
from rill.graph.ops import lookup_ops as lk


def test_table_errors_are_clear():
    with rg.Graph().as_default() as g:
        t = lk.hash_table(rg.string, rg.int64, name="vocab")
        init = lk.initialize_table(t, rg.constant([b"a", b"b"]), rg.constant([0, 1], rg.int64))
        good = lk.lookup(t, rg.constant([b"b", b"z"]), rg.constant(-1, rg.int64))
        wrong = lk.lookup(t, rg.constant([1, 2], rg.int64), rg.constant(-1, rg.int64))
    with Session(graph=g) as s:
        with pytest.raises(FailedPreconditionError, match="'vocab' not initialized"):
            s.run(good)
        s.run(init)
        np.testing.assert_array_equal(s.run(good), [1, -1])
        with pytest.raises(InvalidArgumentError, match="key must be type string but got int64"):
            s.run(wrong)
        with pytest.raises(FailedPreconditionError, match="already initialized"):
            s.run(init)
        np.testing.assert_array_equal(s.run(good), [1, -1])  # the table is unchanged


def test_mutable_table_insert_and_size():
    with rg.Graph().as_default() as g:
        t = lk.mutable_hash_table(rg.int64, rg.float32)
        ins = lk.insert(t, rg.constant([7, 9], rg.int64), rg.constant([0.5, 1.5]))
        got = lk.lookup(t, rg.constant([9, 8], rg.int64), rg.constant(0.0))
        n = lk.size(t)
    with Session(graph=g) as s:
        assert int(s.run(n)) == 0
        s.run(ins)
        np.testing.assert_array_equal(s.run(got), [1.5, 0.0])
        assert int(s.run(n)) == 2


def test_export_returns_every_entry():
    with rg.Graph().as_default() as g:
        t = lk.mutable_hash_table(rg.int64, rg.float32)
        ins = lk.insert(t, rg.constant([7, 9], rg.int64), rg.constant([0.5, 1.5]))
        op = g.create_op("LookupTableExportV2", [t], {"Tkeys": rg.int64, "Tvalues": rg.float32})
    with Session(graph=g) as s:
        s.run(ins)
        keys, values = s.run(op.outputs)
        assert dict(zip(keys.tolist(), values.tolist())) == {7: 0.5, 9: 1.5}
