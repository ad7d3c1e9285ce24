"""Fetching a tensor computed inside a while loop's body: InvalidArgumentError naming it (found
by tools/fuzz: a KeyError from the dataflow executor, a TypeError from the structured one)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from rill.exec import Session
from rill.graph import Graph
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph_def import import_graph_def

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"


def _graph(path):
    g = Graph()
    with g.as_default():
        import_graph_def((FIXTURES / path).read_bytes(), name="")
    return g


def test_fetch_inside_a_v1_while_loop():
    g = _graph("tf/cf_while_cond.pb")
    t = g.get_operation_by_name("loop/branch/switch_f").outputs[0]
    feeds = {op.outputs[0]: np.zeros([d or 1 for d in op.outputs[0].shape.dims],
                                     op.outputs[0].dtype.np)
             for op in g.get_operations() if op.type == "Placeholder"}  # fmt: skip
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError, match="switch_f.*while loop"):
        s.run(t, feeds)


def test_fetch_inside_a_lowered_functional_while_loop():
    g = _graph("tf_graphs/frozen_tf2_functional.pb")
    t = g.get_operation_by_name("while/body/while/cond/then/switch_1").outputs[0]
    feeds = {op.outputs[0]: np.zeros([d or 1 for d in op.outputs[0].shape.dims],
                                     op.outputs[0].dtype.np)
             for op in g.get_operations() if op.type == "Placeholder"}  # fmt: skip
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError, match="switch_1.*while loop"):
        s.run(t, feeds)
