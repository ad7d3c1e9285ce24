"""Partitioners, get_variable(..., partitioner=...) and PartitionedVariable: shard layout, slice
infos, initializers that see the full shape, reuse, placement over PS tasks, conversion to one
dense tensor (with a warning), embedding lookups, and the errors for shapes that cannot split."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.exec import ConfigProto, Session
from rill.graph.shapes import TensorShape


def test_fixed_size_partitioner():
    p = rt.fixed_size_partitioner(4)
    assert p(TensorShape([10, 3]), rg.float32) == [4, 1]
    assert p(TensorShape([2, 3]), rg.float32) == [2, 1]  # no more shards than rows
    assert rt.fixed_size_partitioner(3, axis=1)(TensorShape([2, 7]), rg.float32) == [1, 3]
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        rt.fixed_size_partitioner(3, axis=2)(TensorShape([2, 7]), rg.float32)
    with pytest.raises(ValueError, match="not fully defined"):
        p(TensorShape([None, 3]), rg.float32)


def test_variable_axis_size_partitioner():
    p = rt.variable_axis_size_partitioner(max_shard_bytes=100)
    assert p(TensorShape([10, 5]), rg.float32) == [2, 1]  # 20 bytes a row: 5 rows a shard
    assert p(TensorShape([10, 50]), rg.float32) == [10, 1]  # a row is over the limit: 1 a shard
    assert rt.variable_axis_size_partitioner(100, max_shards=3)(
        TensorShape([10, 50]), rg.float32
    ) == [3, 1]
    assert rt.variable_axis_size_partitioner(64)(TensorShape([8]), rg.string) == [2]
    with pytest.raises(ValueError, match="positive"):
        rt.variable_axis_size_partitioner(0)


def test_min_max_variable_partitioner():
    p = rt.min_max_variable_partitioner(max_partitions=8, min_slice_size=64)
    assert p(TensorShape([10, 4]), rg.float32) == [3, 1]  # 160 bytes / 64 → 3
    assert p(TensorShape([1000, 4]), rg.float32) == [8, 1]  # capped by max_partitions
    assert p(TensorShape([2, 400]), rg.float32) == [2, 1]  # capped by the axis size
    assert rt.min_max_variable_partitioner(4)(TensorShape([10, 4]), rg.float32) == [1, 1]


def test_get_variable_with_partitioner_layout_and_slice_infos():
    with rg.Graph().as_default():
        with rt.variable_scope("m"):
            emb = rt.get_variable("emb", [10, 4], partitioner=rt.fixed_size_partitioner(3))
        assert isinstance(emb, rt.PartitionedVariable)
        assert (emb.name, emb.shape.as_list(), len(emb)) == ("m/emb", [10, 4], 3)
        assert [v.op.name for v in emb] == ["m/emb/part_0", "m/emb/part_1", "m/emb/part_2"]
        infos = [v._save_slice_info for v in emb]
        assert [i.var_offset for i in infos] == [[0, 0], [4, 0], [7, 0]]
        assert [i.spec for i in infos] == ["10 4 0,4:-", "10 4 4,3:-", "10 4 7,3:-"]
        assert emb._get_partitions() == [3, 1]
        # Every shard is an ordinary global, trainable variable.
        assert set(rg.get_default_graph().get_collection("trainable_variables")) == set(emb)


def test_initializers_see_the_full_shape():
    seen = []

    def init(shape, dtype=None, partition_info=None):
        seen.append((list(shape), partition_info.full_shape, partition_info.var_offset))
        return rg.zeros(shape, dtype)

    with rg.Graph().as_default():
        rt.get_variable("w", [5, 2], initializer=init, partitioner=rt.fixed_size_partitioner(2))
    assert seen == [([3, 2], [5, 2], [0, 0]), ([2, 2], [5, 2], [3, 0])]


def test_value_initializer_is_sliced_and_as_tensor_warns_with_its_size():
    full = np.arange(24.0).reshape(6, 4)
    with rg.Graph().as_default():
        v = rt.get_variable("v", initializer=full, partitioner=rt.fixed_size_partitioner(4))
        with pytest.warns(UserWarning, match=r"converted to one dense tensor of 96 bytes"):
            dense = v.as_tensor()
        with pytest.warns(UserWarning, match="PartitionedVariable v"):
            doubled = v * 2.0
        with Session() as s:
            s.run(rg.global_variables_initializer())
            got, got2, parts = s.run([dense, doubled, [p.value() for p in v]])
    np.testing.assert_array_equal(got, full)
    np.testing.assert_array_equal(got2, full * 2)
    assert [p.shape[0] for p in parts] == [2, 2, 1, 1]


def test_variable_scope_partitioner_reuse_and_sharing_errors():
    with rg.Graph().as_default():
        with rt.variable_scope("s", partitioner=rt.fixed_size_partitioner(2)):
            a = rt.get_variable("a", [4, 3])
            scalar = rt.get_variable("c", [])  # a scalar is never partitioned
        with rt.variable_scope("s", reuse=True):
            a2 = rt.get_variable("a", [4, 3], partitioner=rt.fixed_size_partitioner(2))
        assert a2 is a and len(a) == 2 and isinstance(scalar, rg.Variable)
        with rt.variable_scope("s", reuse=True):
            with pytest.raises(ValueError, match="specified shape"):
                rt.get_variable("a", [5, 3], partitioner=rt.fixed_size_partitioner(2))
        with pytest.raises(ValueError, match="already exists"):
            rt.get_variable("s/a", [4, 3], partitioner=rt.fixed_size_partitioner(2))


def test_partitioner_on_a_shape_it_cannot_split():
    with rg.Graph().as_default():
        with pytest.raises(
            ValueError, match=r"cannot split dimension 0 of shape \[3,2\].*5 shards"
        ):
            rt.get_variable("a", [3, 2], partitioner=lambda shape, dtype: [5, 1])
        with pytest.raises(ValueError, match="one axis only"):
            rt.get_variable("b", [4, 4], partitioner=lambda shape, dtype: [2, 2])
        with pytest.raises(ValueError, match="one count per dimension"):
            rt.get_variable("c", [4, 4], partitioner=lambda shape, dtype: [2])
        with pytest.raises(ValueError, match="not fully defined"):
            rt.get_variable(
                "d", initializer=rg.placeholder(rg.float32, [None, 2]),
                partitioner=rt.fixed_size_partitioner(2), validate_shape=False,
            )  # fmt: skip


def test_shards_spread_over_ps_tasks_greedy_by_bytes():
    g = rg.Graph()
    greedy = rt.GreedyLoadBalancingStrategy(4, rt.byte_size_load_fn)
    with g.as_default(), g.device(rt.replica_device_setter(ps_tasks=4, ps_strategy=greedy)):
        emb = rt.get_variable("emb", [1000, 8], partitioner=rt.fixed_size_partitioner(4))
        bias = rt.get_variable("bias", [8])
    assert [v.device for v in emb] == [f"/job:ps/task:{i}" for i in range(4)]
    assert bias.device == "/job:ps/task:0"  # all tasks hold 8000 bytes: the first wins
    assert greedy.loads == [8032, 8000, 8000, 8000]


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_of_a_partitioned_variable_on_several_devices(strategy):
    full = np.random.default_rng(0).standard_normal((11, 3))
    if strategy == "mod":  # with "mod", shard p holds rows p, p + n, ...
        order = np.concatenate([np.arange(p, 11, 3) for p in range(3)])
        init = full[order]
    else:
        init = full
    ids = np.array([10, 0, 5, 5, 7, 1])
    g = rg.Graph()
    with g.as_default(), g.device(rt.local_device_setter(3)):
        emb = rt.get_variable("emb", initializer=init, partitioner=rt.fixed_size_partitioner(3))
        y = rg.embedding_lookup(emb, ids, partition_strategy=strategy)
        initop = rg.global_variables_initializer()
    assert [v.device for v in emb] == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    with Session(graph=g, config=ConfigProto(device_count={"CPU": 3})) as s:
        s.run(initop)
        np.testing.assert_array_equal(s.run(y), full[ids])
