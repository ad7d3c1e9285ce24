"""Saver and partitioned variables: each logical variable is written once, whole, and restores
into another number of shards (4 → 3), into an unpartitioned variable and back; mismatches are
reported by name and slice."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.exec import ConfigProto, Session
from rill.graph.errors import InvalidArgumentError, NotFoundError

FULL = np.arange(40.0, dtype=np.float32).reshape(10, 4)
BIAS = np.array([1.0, 2.0], np.float32)


def build(shards: int | None, shape=(10, 4), devices: int = 3):
    """A graph with "emb" split in `shards` (None: one variable) over `devices` CPUs."""
    g = rg.Graph()
    with g.as_default(), g.device(rt.local_device_setter(devices)):
        part = rt.fixed_size_partitioner(shards) if shards else None
        emb = rt.get_variable(
            "emb", list(shape), initializer=rt.zeros_initializer(), partitioner=part
        )
        bias = rt.get_variable("bias", [2], initializer=rt.zeros_initializer())
        saver = rt.Saver()
        init = rg.global_variables_initializer()
    return g, emb, bias, saver, init


def session(g, devices: int = 3) -> Session:
    return Session(graph=g, config=ConfigProto(device_count={"CPU": devices}))


def values(s, emb) -> np.ndarray:
    if isinstance(emb, rt.PartitionedVariable):
        return np.concatenate(s.run([v.value() for v in emb]))
    return s.run(emb.value())


def save_from(tmp_path, shards) -> str:
    g, emb, bias, saver, init = build(shards)
    with session(g) as s:
        s.run(init)
        with g.as_default():
            s.run([emb.assign(FULL) if shards else emb.assign(FULL), bias.assign(BIAS)])
        return saver.save(s, os.fspath(tmp_path / "model"), global_step=1)


@pytest.mark.parametrize("saved,restored", [(4, 3), (3, 4), (4, None), (None, 3), (2, 2)])
def test_restore_into_another_partitioning(tmp_path, saved, restored):
    path = save_from(tmp_path, saved)
    # The checkpoint holds the logical variables, whole, whatever the partitioning was.
    assert dict(rt.list_variables(path)) == {"emb": [10, 4], "bias": [2]}
    np.testing.assert_array_equal(rt.load_variable(path, "emb"), FULL)
    g, emb, bias, saver, init = build(restored)
    with session(g) as s:
        s.run(init)
        saver.restore(s, path)
        np.testing.assert_array_equal(values(s, emb), FULL)
        np.testing.assert_array_equal(s.run(bias.value()), BIAS)
        if restored:
            assert len(emb) == restored


def test_saver_takes_a_partitioned_variable_in_var_list(tmp_path):
    g, emb, bias, _, init = build(4)
    with g.as_default():
        saver = rt.Saver([emb])
        renamed = rt.Saver({"table": emb})
    with session(g) as s:
        s.run(init)
        with g.as_default():
            s.run(emb.assign(FULL))
        p1 = saver.save(s, os.fspath(tmp_path / "a"))
        p2 = renamed.save(s, os.fspath(tmp_path / "b"))
    assert dict(rt.list_variables(p1)) == {"emb": [10, 4]}
    assert dict(rt.list_variables(p2)) == {"table": [10, 4]}


def test_restore_with_a_mismatched_slice_names_the_variable_and_slices(tmp_path):
    path = save_from(tmp_path, 4)
    g, emb, bias, saver, init = build(3, shape=(12, 4))
    with session(g) as s:
        s.run(init)
        with pytest.raises(InvalidArgumentError) as e:
            saver.restore(s, path)
        msg = str(e.value)
        assert "'emb': the variable is float32[12,4]" in msg
        assert "slices '12 4 0,4:-', '12 4 4,4:-', '12 4 8,4:-'" in msg
        assert "the checkpoint has float32[10,4]" in msg
        np.testing.assert_array_equal(values(s, emb), np.zeros((12, 4)))  # nothing assigned


def test_restore_of_a_missing_partitioned_variable(tmp_path):
    g = rg.Graph()
    with g.as_default():
        rt.get_variable("other", [3], initializer=rt.zeros_initializer())
        saver = rt.Saver()
        with Session() as s:
            s.run(rg.global_variables_initializer())
            path = saver.save(s, os.fspath(tmp_path / "m"))
    g, emb, bias, saver, init = build(2)
    with session(g) as s:
        s.run(init)
        with pytest.raises(NotFoundError, match=r"'emb' \(float32\[10,4\], partitioned variable, "
                           r"slices '10 4 0,5:-', '10 4 5,5:-'\)"):  # fmt: skip
            saver.restore(s, path)


def test_a_saver_needs_every_shard(tmp_path):
    g, emb, bias, _, _ = build(3)
    with g.as_default():
        with pytest.raises(ValueError, match=r"cover 7 of its 10 rows.*'10 4 0,4:-'"):
            rt.Saver({"emb": list(emb)[:2]})
        with pytest.raises(ValueError, match=r"do not tile.*'10 4 7,3:-'"):
            rt.Saver({"emb": [list(emb)[0], list(emb)[2]]})
