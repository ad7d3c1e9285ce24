"""embedding_lookup over one tensor or shards (mod and div, uneven shards, repeated ids) and
embedding_lookup_sparse (sum / mean / sqrtn), against numpy gathers; the Figure-4 graph."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError

V, D = 11, 3
TABLE = np.arange(V * D, dtype=np.float64).reshape(V, D) / 7.0


def shard_table(n: int, strategy: str, div_sizes=None) -> list[np.ndarray]:
    if strategy == "mod":
        return [TABLE[p::n] for p in range(n)]
    sizes = div_sizes or [V // n + (1 if p < V % n else 0) for p in range(n)]
    return np.split(TABLE, np.cumsum(sizes)[:-1])


IDS = np.array([7, 3, 3, 10, 0, 7, 5, 1, 10, 2, 9], np.int64)  # repeated and out of order


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_lookup_equals_dense_gather(strategy, n):
    with rg.Graph().as_default():
        shards = [rg.constant(s) for s in shard_table(n, strategy)]
        ids = rg.placeholder(rg.int64, [None])
        y = rg.embedding_lookup(shards if n > 1 else shards[0], ids, partition_strategy=strategy)
        assert y.shape.as_list() == [None, D]
        got = Session().run(y, {ids: IDS})
    np.testing.assert_array_equal(got, TABLE[IDS])


@pytest.mark.parametrize("sizes", [[1, 6, 4], [5, 1, 1, 4], [2, 9]])
def test_div_with_shards_of_any_sizes(sizes):
    # TensorFlow's "div" assumed the first V % n shards are one row longer and returned wrong
    # rows otherwise (its issue #19265); here the row offsets come from the shards themselves.
    with rg.Graph().as_default():
        shards = [rg.constant(s) for s in shard_table(len(sizes), "div", sizes)]
        y = rg.embedding_lookup(shards, IDS, partition_strategy="div")
        got = Session().run(y)
    np.testing.assert_array_equal(got, TABLE[IDS])


def test_div_with_shard_sizes_known_only_when_run():
    with rg.Graph().as_default():
        feeds = [rg.placeholder(rg.float64, [None, D]) for _ in range(3)]
        y = rg.embedding_lookup(feeds, rg.constant(IDS), partition_strategy="div")
        parts = shard_table(3, "div", [2, 5, 4])
        got = Session().run(y, dict(zip(feeds, parts)))
    np.testing.assert_array_equal(got, TABLE[IDS])


def test_ids_of_any_shape_and_int32():
    ids = np.array([[1, 2, 3], [10, 10, 0]], np.int32)
    with rg.Graph().as_default():
        y = rg.embedding_lookup([rg.constant(s) for s in shard_table(3, "mod")], ids)
        assert y.shape.as_list() == [2, 3, D]
        np.testing.assert_array_equal(Session().run(y), TABLE[ids])


def test_graph_is_figure_4_with_one_gather_per_shard_colocated():
    with rg.Graph().as_default() as g:
        with g.device("/device:CPU:1"):
            s0 = rg.constant(TABLE[0::2], name="s0")
        with g.device("/device:CPU:2"):
            s1 = rg.constant(TABLE[1::2], name="s1")
        rg.embedding_lookup([s0, s1], IDS, name="emb")
    types = [op.type for op in g.get_operations() if op.name.startswith("emb/")]
    assert types.count("DynamicPartition") == 2  # the rows and their positions
    assert types.count("DynamicStitch") == 1
    assert types.count("Unique") == 1  # each shard sees each distinct row once
    shard_gathers = [
        op for op in g.get_operations()
        if op.type == "GatherV2" and op.inputs[0].op in (s0.op, s1.op)
    ]  # fmt: skip
    assert sorted(op.colocation_groups() for op in shard_gathers) == [["s0"], ["s1"]]
    assert sorted(op.device for op in shard_gathers) == ["/device:CPU:1", "/device:CPU:2"]


def test_duplicate_ids_are_read_once_per_shard():
    with rg.Graph().as_default() as g:
        shards = [rg.constant(s) for s in shard_table(2, "mod")]
        y = rg.embedding_lookup(shards, np.array([4, 4, 4, 1, 4, 1], np.int64))
        reads = [op.outputs[0] for op in g.get_operations()
                 if op.type == "GatherV2" and op.inputs[0].op in [s.op for s in shards]]  # fmt: skip
        got, rows = Session().run([y, reads])
    np.testing.assert_array_equal(got, TABLE[[4, 4, 4, 1, 4, 1]])
    assert [r.shape[0] for r in rows] == [1, 1]


@pytest.mark.parametrize("strategy,n", [("mod", 3), ("div", 3), ("mod", 1)])
@pytest.mark.parametrize("bad", [11, -1, 40])
def test_out_of_range_id_names_the_op_and_the_id(strategy, n, bad):
    with rg.Graph().as_default():
        shards = [rg.constant(s) for s in shard_table(n, strategy)]
        ids = rg.placeholder(rg.int64, [None])
        y = rg.embedding_lookup(shards, ids, partition_strategy=strategy, name="emb")
        with pytest.raises(InvalidArgumentError) as e:
            Session().run(y, {ids: [0, 3, bad]})
    msg = str(e.value)
    if bad >= 0:  # the range check names the id and the number of rows
        assert f"= {bad} is out of range [0, 11)" in msg or f"= {bad} is not in [0, 11)" in msg
    else:  # a negative id fails in its shard's gather, by value
        assert f"= {bad} is not in [0, " in msg
    assert "%emb/" in msg


def test_bad_arguments():
    with rg.Graph().as_default():
        t = rg.constant(TABLE)
        with pytest.raises(ValueError, match="partition_strategy"):
            rg.embedding_lookup(t, [0], partition_strategy="rows")
        with pytest.raises(ValueError, match="empty list"):
            rg.embedding_lookup([], [0])
        with pytest.raises(TypeError, match="int32 or int64"):
            rg.embedding_lookup(t, [0.5])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_max_norm_clips_rows(strategy):
    with rg.Graph().as_default():
        shards = [rg.constant(s) for s in shard_table(3, strategy)]
        y = rg.embedding_lookup(shards, IDS, partition_strategy=strategy, max_norm=2.0)
        got = Session().run(y)
    want = TABLE[IDS]
    norms = np.linalg.norm(want, axis=1, keepdims=True)
    want = want * 2.0 / np.maximum(norms, 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- embedding_lookup_sparse -------------------------------------------------------------------

SP_INDICES = np.array([[0, 0], [0, 1], [0, 2], [2, 0], [3, 0], [3, 1]], np.int64)
SP_IDS = np.array([3, 7, 3, 10, 0, 5], np.int64)
SP_W = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 4.0])


def numpy_sparse(combiner, weights):
    out = np.zeros((5, D))
    for row in range(5):
        sel = SP_INDICES[:, 0] == row
        if not sel.any():
            continue
        w = weights[sel]
        e = TABLE[SP_IDS[sel]]
        total = (w[:, None] * e).sum(0)
        if combiner == "sum":
            out[row] = total
        elif combiner == "mean":
            out[row] = total / w.sum()
        else:
            out[row] = total / np.sqrt((w * w).sum())
    return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [True, False])
def test_lookup_sparse_matches_numpy(combiner, weighted):
    with rg.Graph().as_default():
        sp_ids = rg.sparse_placeholder(rg.int64, [5, 3], name="sp_ids")
        sp_w = rg.SparseTensor(sp_ids.indices, rg.constant(SP_W), sp_ids.dense_shape)
        shards = [rg.constant(s) for s in shard_table(3, "div")]
        y = rg.embedding_lookup_sparse(
            shards, sp_ids, sp_w if weighted else None, partition_strategy="div", combiner=combiner
        )
        got = Session().run(y, {sp_ids.indices: SP_INDICES, sp_ids.values: SP_IDS})
    want = numpy_sparse(combiner, SP_W if weighted else np.ones(len(SP_IDS)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not got[1].any() and not got[4].any()  # rows without ids are zeros


def test_lookup_sparse_bad_combiner_and_types():
    with rg.Graph().as_default():
        sp = rg.SparseTensor(SP_INDICES, SP_IDS, [5, 3])
        with pytest.raises(ValueError, match="combiner"):
            rg.embedding_lookup_sparse(rg.constant(TABLE), sp, None, combiner="max")
        with pytest.raises(TypeError, match="SparseTensor"):
            rg.embedding_lookup_sparse(rg.constant(TABLE), SP_IDS, None)
        with pytest.raises(ValueError, match="3 coordinates but values hold 2"):
            rg.SparseTensor([[0, 0], [1, 1], [2, 2]], [1.0, 2.0], [3, 3])
