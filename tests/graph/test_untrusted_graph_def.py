"""GraphDef bytes from an untrusted source: GraphValueError naming the node, never a plain
ValueError/TypeError (found by tools/fuzz)."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from rill.graph import Graph, graph_def
from rill.graph.errors import GraphTypeError, GraphValueError
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
    with pytest.raises(GraphValueError, match=r"node 'i' attr 'T': expected a type value but "):
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


# -- the GraphDef defect classes of issue 22's last campaign -----------------------------------


def test_number_attr_holding_an_empty_value_names_the_node_and_attr():
    # An AttrValue with no value set where the op declares an int (Merge's N).
    text = _X + (
        'node { name: "m" op: "Merge" input: "x" input: "x" '
        'attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { } } }'
    )
    with pytest.raises(GraphValueError, match=r"node 'm' attr 'N': expected a int value"):
        _import(text)


@pytest.mark.parametrize("n", [-1, 3])
def test_number_attr_against_the_inputs_present(n):
    text = _X + (
        f'node {{ name: "s" op: "AddN" input: "x" input: "x" '
        f'attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "N" value {{ i: {n} }} }} }}'
    )
    with pytest.raises(GraphValueError, match=rf"node 's' \(AddN\) has N={n} .*2 data inputs"):
        _import(text)


def _const(name: str, dtype: str, dims, values: str = "") -> str:
    shape = " ".join(f"dim {{ size: {d} }}" for d in dims)
    return (
        f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }} '
        f'attr {{ key: "value" value {{ tensor {{ dtype: {dtype} tensor_shape {{ {shape} }} '
        f"{values} }} }} }} }}\n"
    )


def test_const_fill_is_bounded_before_allocating():
    # One value standing for 2^40 doubles (8 TiB): refused before any allocation.
    text = _const("big", "DT_DOUBLE", [1 << 20, 1 << 20], "double_val: 1.5")
    with pytest.raises(
        GraphValueError, match=r"node 'big' attr 'value': .*shape \[1048576, 1048576\].*MAX_TENSOR"
    ):
        _import(text)


def test_const_fill_within_the_limit_is_tensorflow_fill(monkeypatch):
    g = _import(_const("c", "DT_FLOAT", [3, 2], "float_val: 1 float_val: 2"))
    value = g.get_operation_by_name("c").attrs["value"]
    np.testing.assert_array_equal(value, [[1, 2], [2, 2], [2, 2]])
    # The limit is configurable: 24 bytes of float32 over a limit of 16.
    monkeypatch.setattr(graph_def, "MAX_TENSOR_BYTES", 16)
    with pytest.raises(GraphValueError, match=r"node 'c' .*24 bytes.*limit of 16 bytes"):
        _import(_const("c", "DT_FLOAT", [3, 2], "float_val: 1 float_val: 2"))


def test_const_tensor_content_must_match_its_shape():
    text = _const("c", "DT_FLOAT", [1 << 30], r'tensor_content: "\000\000\200?"')
    with pytest.raises(GraphValueError, match=r"node 'c' .*holds 4 bytes; a float32\[1073741824\]"):
        _import(text)


def test_colocation_group_that_is_not_utf8_names_the_node():
    text = _X + (
        'node { name: "i" op: "Identity" input: "x" attr { key: "T" value { type: DT_FLOAT } } '
        r'attr { key: "_class" value { list { s: "loc:@x\377" } } } }'
    )
    with pytest.raises(GraphValueError, match=r"node 'i' attr '_class' .*not UTF-8"):
        _import(text)


def test_reshape_shape_longer_than_the_maximum_rank_is_refused():
    # 100,000 ones filling a shape vector: a rank check, not a 100,000-entry shape list.
    text = (
        _X
        + _const("shape", "DT_INT32", [100000], "int_val: 1")
        + (
            'node { name: "r" op: "Reshape" input: "x" input: "shape" '
            'attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tshape" value { type: DT_INT32 } } }'
        )
    )
    with pytest.raises(GraphValueError, match=r"node 'r'.*'shape:0' has rank 100000, above"):
        _import(text)


_BRANCH = """
library { function {
  signature { name: "id" input_arg { name: "a" type: DT_INT32 } output_arg { name: "o" type: DT_INT32 } }
  ret { key: "o" value: "a" } } }
"""  # noqa: E501


def _i32(name: str) -> str:
    return _const(name, "DT_INT32", [], "int_val: 0")


@pytest.mark.parametrize(
    ("node", "message"),
    [
        # A Case with no branches (the fuzz case: an IndexError in function_lowering.py).
        ('node { name: "c" op: "Case" input: "i" input: "i" attr { key: "Tin" value { list { '
         'type: DT_INT32 } } } attr { key: "Tout" value { list { type: DT_INT32 } } } '
         'attr { key: "branches" value { list { } } } }',
         r"node 'c' \(Case\) has no branches"),
        ('node { name: "c" op: "If" attr { key: "then_branch" value { func { name: "id" } } } '
         'attr { key: "else_branch" value { func { name: "id" } } } }',
         r"node 'c' \(If\) has no inputs; its first input is the predicate"),
        ('node { name: "c" op: "While" input: "i" attr { key: "T" value { list { type: DT_INT32 '
         'type: DT_INT32 } } } attr { key: "cond" value { func { name: "id" } } } '
         'attr { key: "body" value { func { name: "id" } } } }',
         r"node 'c' \(While\) has 1 data inputs for 2 loop variables"),
        ('node { name: "c" op: "If" input: "i" input: "i" attr { key: "Tcond" value { type: '
         'DT_INT32 } } attr { key: "Tin" value { list { type: DT_INT32 } } } attr { key: "Tout" '
         'value { list { type: DT_INT32 type: DT_INT32 } } } '
         'attr { key: "then_branch" value { func { name: "id" } } } '
         'attr { key: "else_branch" value { func { name: "id" } } } }',
         r"node 'c': branch function 'id' returns 1 values; the node declares 2"),
    ],
)  # fmt: skip
def test_malformed_functional_control_flow_names_the_node(node, message):
    with pytest.raises(GraphValueError, match=message):
        _import(_BRANCH + _i32("i") + node)


def test_a_loop_back_edge_of_another_type_is_refused():
    # Found by tools/fuzz: a loop's Switch turned into a Merge of (int32, bool) imported (the back
    # edge was not type-checked) and the loop never ended.
    text = (
        _i32("x") + 'node { name: "m" op: "Merge" input: "x" input: "b" '
        'attr { key: "T" value { type: DT_INT32 } } attr { key: "N" value { i: 2 } } }\n'
        'node { name: "b" op: "Less" input: "m" input: "x" attr { key: "T" value { type: DT_INT32 } } }'
    )
    with pytest.raises(GraphTypeError, match=r"node 'm' \(Merge\) input 1 is b:0 of type bool"):
        _import(text)
