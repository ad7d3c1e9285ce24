"""GraphDef bytes from an untrusted source: GraphValueError naming the node, never a plain
ValueError/TypeError (found by tools/fuzz)."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from rill.graph import Graph
from rill.graph.errors import GraphValueError
from rill.graph.graph_def import import_graph_def
from rill.graph.proto import graph_pb2

_X = (
    'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
    'attr { key: "shape" value { shape { dim { size: 2 } } } } }\n'
)


def _import(text: str):
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    g = Graph()
    with g.as_default():
        import_graph_def(gd.SerializeToString(), name="")
    return g


@pytest.mark.parametrize("device", ["/job:a:b:c/zz", "/device:CPU:x", "/replica:-1"])
def test_malformed_device_names_the_node(device):
    text = _X + (
        f'node {{ name: "i" op: "Identity" input: "x" device: "{device}" '
        'attr { key: "T" value { type: DT_FLOAT } } }'
    )
    with pytest.raises(GraphValueError, match=r"node 'i' has a malformed device"):
        _import(text)


def test_empty_type_attr_names_the_node():
    text = _X + 'node { name: "i" op: "Identity" input: "x" attr { key: "T" value { } } }'
    with pytest.raises(GraphValueError, match=r"node 'i' \(Identity\)"):
        _import(text)


def test_conv_dilations_shorter_than_4_are_refused_at_import():
    text = (
        'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "shape" value { shape { dim { size: 1 } dim { size: 4 } dim { size: 4 } '
        "dim { size: 1 } } } } }\n"
        'node { name: "w" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "shape" value { shape { dim { size: 1 } dim { size: 1 } dim { size: 1 } '
        "dim { size: 1 } } } } }\n"
        'node { name: "c" op: "Conv2D" input: "x" input: "w" '
        'attr { key: "T" value { type: DT_FLOAT } } '
        'attr { key: "strides" value { list { i: 1 i: 1 i: 1 i: 1 } } } '
        'attr { key: "padding" value { s: "SAME" } } '
        'attr { key: "dilations" value { list { i: 1 i: 1 } } } }'
    )
    with pytest.raises(GraphValueError, match=r"node 'c'.*dilations must have 4 values"):
        _import(text)
