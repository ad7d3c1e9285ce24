"""tf.Example parsing: ParseExampleV2 (a batch of serialized Examples) and ParseSingleExample.

Each feature is dense (a fixed shape, with an optional default), sparse (indices, values and a
dense shape, one row per example) or, for ParseExampleV2, ragged (values and row splits).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     s = rg.placeholder(rg.string, [None])
...     out = parse_example(s, dense={"x": (rg.float32, [3], None)}, sparse={"ids": rg.int64})
>>> out["x"].shape, out["ids"][1].dtype
(TensorShape([None, 3]), rill.int64)
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["parse_example", "parse_single_example"]

_TYPES = "{float32, int64, string}"


def _outputs_shape(batch: bool):
    def shape(op):
        a = op.attrs
        ns = a["num_sparse"]
        b = [None] if batch else []
        if batch:
            s = op._inputs[0].shape  # a scalar serialized is one Example: no batch dimension
            b = [] if s.rank == 0 else [s[0] if s.rank == 1 else None]
        out = [TensorShape([None, len(b) + 1])] * ns + [TensorShape([None])] * ns
        out += [TensorShape([len(b) + 1])] * ns
        for s in a["dense_shapes"]:
            out.append(TensorShape(b).concatenate(s) if s.rank is not None else TensorShape(None))
        if batch:
            nr = len(a["ragged_value_types"])
            out += [TensorShape([None])] * nr + [TensorShape([None])] * nr
        return out

    return shape


defop(
    "ParseExampleV2",
    inputs=["serialized: string", "names: string", "sparse_keys: string", "dense_keys: string",
            "ragged_keys: string", "dense_defaults: Tdense"],
    outputs=["sparse_indices: num_sparse * int64", "sparse_values: sparse_types",
             "sparse_shapes: num_sparse * int64", "dense_values: Tdense",
             "ragged_values: ragged_value_types", "ragged_row_splits: ragged_split_types"],
    attrs=[f"Tdense: list({_TYPES}) >= 0", "num_sparse: int >= 0",
           f"sparse_types: list({_TYPES}) >= 0", f"ragged_value_types: list({_TYPES}) >= 0",
           "ragged_split_types: list({int32, int64}) >= 0", "dense_shapes: list(shape) >= 0"],
    shape=_outputs_shape(True),
    doc="Parses a batch of serialized tf.Example protos into dense, sparse and ragged tensors.",
)  # fmt: skip
defop(
    "ParseSingleExample",
    inputs=["serialized: string", "dense_defaults: Tdense"],
    outputs=["sparse_indices: num_sparse * int64", "sparse_values: sparse_types",
             "sparse_shapes: num_sparse * int64", "dense_values: Tdense"],
    attrs=["num_sparse: int >= 0", "sparse_keys: list(string) >= 0",
           "dense_keys: list(string) >= 0", f"sparse_types: list({_TYPES}) >= 0",
           f"Tdense: list({_TYPES}) >= 0", "dense_shapes: list(shape) >= 0"],
    shape=_outputs_shape(False),
    doc="Parses one serialized tf.Example proto.",
)  # fmt: skip


def _defaults(dense):
    out = []
    for dtype, _shape, default in dense.values():
        dt = dtypes.as_dtype(dtype)
        if default is None:
            out.append(convert_to_tensor([], dtype=dt, name=f"default_{len(out)}"))
        else:
            out.append(convert_to_tensor(default, dtype=dt, name=f"default_{len(out)}"))
    return out


def parse_example(serialized, dense=None, sparse=None, name=None) -> dict:
    """{key: dense tensor or (indices, values, dense_shape)} from a batch of Examples.

    dense: {key: (dtype, shape, default or None)}; sparse: {key: dtype}.
    """
    dense, sparse = dict(dense or {}), dict(sparse or {})
    g = get_default_graph()
    with g.name_scope(name or "ParseExample"):
        inputs = [serialized, convert_to_tensor([], dtype=dtypes.string, name="names"),
                  convert_to_tensor(list(sparse), dtype=dtypes.string, name="sparse_keys"),
                  convert_to_tensor(list(dense), dtype=dtypes.string, name="dense_keys"),
                  convert_to_tensor([], dtype=dtypes.string, name="ragged_keys"),
                  _defaults(dense)]  # fmt: skip
        attrs = {
            "num_sparse": len(sparse),
            "sparse_types": tuple(dtypes.as_dtype(t) for t in sparse.values()),
            "dense_shapes": tuple(TensorShape(s) for _, s, _ in dense.values()),
            "ragged_value_types": (),
            "ragged_split_types": (),
        }
        op = g.create_op("ParseExampleV2", inputs, attrs, name="ParseExampleV2")
    return _collect(op.outputs, dense, sparse)


def parse_single_example(serialized, dense=None, sparse=None, name=None) -> dict:
    """As parse_example, for one scalar serialized Example (ParseSingleExample)."""
    dense, sparse = dict(dense or {}), dict(sparse or {})
    attrs = {
        "num_sparse": len(sparse),
        "sparse_keys": tuple(sparse),
        "dense_keys": tuple(dense),
        "sparse_types": tuple(dtypes.as_dtype(t) for t in sparse.values()),
        "dense_shapes": tuple(TensorShape(s) for _, s, _ in dense.values()),
    }
    g = get_default_graph()
    with g.name_scope(name or "ParseSingleExample"):
        op = g.create_op("ParseSingleExample", [serialized, _defaults(dense)], attrs,
                         name="ParseSingleExample")  # fmt: skip
    return _collect(op.outputs, dense, sparse)


def _collect(outs, dense, sparse) -> dict:
    ns = len(sparse)
    result = {}
    for i, key in enumerate(sparse):
        result[key] = (outs[i], outs[ns + i], outs[2 * ns + i])
    for j, key in enumerate(dense):
        result[key] = outs[3 * ns + j]
    return result
