"""GraphDef surgery from TensorFlow 1.x's `tf.graph_util`: keep what some outputs need, drop
training-only nodes, and freeze variables into constants.

`convert_variables_to_constants(sess, graph_def, ["logits"])` is how TF1 programs export a model
for inference: the result holds no variable, only Const nodes with the values the session has,
and imports into rill or TensorFlow alike.

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     a = rg.constant(1.0, name="a")
...     b = rg.identity(a, name="b")
...     c = rg.constant(2.0, name="unused")
>>> [n.name for n in extract_sub_graph(g.as_graph_def(), ["b"]).node]
['a', 'b']
"""

from __future__ import annotations

import numpy as np

from rill.graph.errors import GraphValueError
from rill.graph.graph_def import make_tensor_proto
from rill.graph.proto import graph_pb2

__all__ = ["extract_sub_graph", "remove_training_nodes", "convert_variables_to_constants"]

_REF_VARIABLES = ("Variable", "VariableV2")


def _node_name(inp: str) -> str:
    """'^a', 'a:1', 'a' -> 'a'."""
    return inp[1:] if inp.startswith("^") else inp.split(":", 1)[0]


def extract_sub_graph(graph_def, dest_nodes) -> graph_pb2.GraphDef:
    """The nodes `dest_nodes` (node names) need, through data and control inputs, in the order
    graph_def has them."""
    if isinstance(dest_nodes, str) or not all(isinstance(d, str) for d in dest_nodes):
        raise TypeError("dest_nodes must be a list of node names")
    by_name = {n.name: n for n in graph_def.node}
    keep: set[str] = set()
    stack = list(dest_nodes)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        node = by_name.get(name)
        if node is None:
            raise GraphValueError(f"{name!r} is not in the graph")
        keep.add(name)
        stack.extend(_node_name(i) for i in node.input)
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    out.node.extend(n for n in graph_def.node if n.name in keep)
    return out


def remove_training_nodes(input_graph, protected_nodes=None) -> graph_pb2.GraphDef:
    """Drops CheckNumerics and splices out Identity nodes (those without control inputs and not
    protected), rewiring their consumers to the Identity's input, as TensorFlow's does."""
    protected = set(protected_nodes or ())
    bypass: dict[str, str] = {}
    for node in input_graph.node:
        if node.name in protected:
            continue
        if node.op in ("Identity", "CheckNumerics") and len(node.input) == 1:
            if not node.input[0].startswith("^"):
                bypass[node.name] = node.input[0]

    def resolve(inp: str) -> str:
        control = inp.startswith("^")
        name = inp[1:] if control else inp
        seen = set()
        while True:
            base, _, port = name.partition(":")
            if base not in bypass or (port not in ("", "0")) or base in seen:
                break
            seen.add(base)
            name = bypass[base]
        return "^" + _node_name(name) if control else name

    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(input_graph.versions)
    out.library.CopyFrom(input_graph.library)
    for node in input_graph.node:
        if node.name in bypass:
            continue
        n = out.node.add()
        n.CopyFrom(node)
        del n.input[:]
        n.input.extend(resolve(i) for i in node.input)
    return out


def convert_variables_to_constants(
    sess,
    input_graph_def,
    output_node_names,
    variable_names_whitelist=None,
    variable_names_blacklist=None,
) -> graph_pb2.GraphDef:
    """The subgraph `output_node_names` need, with every variable it reads replaced by a Const
    holding the value `sess` has for it (TensorFlow 1.x's freezing).

    Reference variables (VariableV2) become Const nodes; a resource variable's VarHandleOp
    becomes a Const of its value, its ReadVariableOps Identity nodes and its ResourceGathers
    GatherV2 nodes. `variable_names_whitelist` / `_blacklist` (node names) choose which
    variables are converted.
    """
    sub = extract_sub_graph(input_graph_def, list(output_node_names))
    allow = set(variable_names_whitelist) if variable_names_whitelist is not None else None
    deny = set(variable_names_blacklist or ())

    def chosen(node) -> bool:
        if node.op not in (*_REF_VARIABLES, "VarHandleOp"):
            return False
        return (allow is None or node.name in allow) and node.name not in deny

    # How to read each chosen variable's value in the session's graph.
    readers: dict[str, str] = {}
    for node in input_graph_def.node:
        if node.op == "ReadVariableOp" and node.input:
            readers.setdefault(_node_name(node.input[0]), node.name + ":0")
    fetch: dict[str, str] = {}
    for node in sub.node:
        if not chosen(node):
            continue
        if node.op == "VarHandleOp":
            if node.name not in readers:
                raise GraphValueError(
                    f"cannot freeze resource variable {node.name!r}: no ReadVariableOp in the "
                    "graph reads it"
                )
            fetch[node.name] = readers[node.name]
        else:
            fetch[node.name] = node.name + ":0"
    names = list(fetch)
    values = dict(zip(names, sess.run([fetch[n] for n in names]))) if names else {}

    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(sub.versions)
    out.library.CopyFrom(sub.library)
    for node in sub.node:
        n = out.node.add()
        if node.name in values:
            value = np.asarray(values[node.name])
            n.op = "Const"
            n.name = node.name
            n.device = node.device
            n.attr["dtype"].CopyFrom(node.attr["dtype"])
            n.attr["value"].tensor.CopyFrom(make_tensor_proto(value))
            continue
        n.CopyFrom(node)
        source = _node_name(node.input[0]) if node.input else None
        if source not in values:
            continue
        if node.op == "ReadVariableOp":
            n.op = "Identity"
            dtype = n.attr["dtype"].type
            del n.attr["dtype"]
            n.attr["T"].type = dtype
        elif node.op == "ResourceGather":
            axis = out.node.add()
            axis.op = "Const"
            axis.name = node.name + "/axis"
            axis.device = node.device
            axis.attr["dtype"].type = 3  # DT_INT32
            axis.attr["value"].tensor.CopyFrom(make_tensor_proto(np.int32(0)))
            dtype = n.attr["dtype"].type
            batch_dims = n.attr["batch_dims"].i if "batch_dims" in n.attr else 0
            for a in ("dtype", "validate_indices", "batch_dims"):
                if a in n.attr:
                    del n.attr[a]
            n.op = "GatherV2"
            n.input.insert(2, axis.name)
            n.attr["Tparams"].type = dtype
            n.attr["Taxis"].type = 3
            n.attr["batch_dims"].i = batch_dims
        elif node.op in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
            raise GraphValueError(
                f"cannot freeze: {node.name!r} ({node.op}) writes variable {source!r}, which the "
                "outputs need"
            )
    return out
