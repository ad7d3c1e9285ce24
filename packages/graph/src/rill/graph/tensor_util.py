"""Static evaluation of small subgraphs, used by shape functions and graph passes.

`constant_value(t)` returns a numpy value when `t` can be computed while building the graph
(from Const, Shape of a fully known tensor, Pack of constants, ...), else None.
`constant_value_as_shape(t)` reads a 1-D int tensor as a possibly partial TensorShape.
"""

from __future__ import annotations

import numpy as np

from rill.graph.shapes import TensorShape, check_rank, unknown_shape

__all__ = ["constant_value", "constant_value_as_shape"]

_MAX_DEPTH = 32


def constant_value(tensor, _depth: int = 0):
    if tensor is None or _depth > _MAX_DEPTH:
        return None
    op = tensor.op
    t = op.type
    if t == "Const":
        return op.attrs["value"]
    if t in ("Identity", "StopGradient"):
        return constant_value(op._inputs[0], _depth + 1)
    if t == "Shape":
        s = op._inputs[0].shape
        if s.is_fully_defined():
            return np.array(s.dims, dtype=op.attrs["out_type"].np)
        return None
    if t == "Size":
        n = op._inputs[0].shape.num_elements()
        return None if n is None else np.array(n, dtype=op.attrs["out_type"].np)
    if t == "Rank":
        r = op._inputs[0].shape.rank
        return None if r is None else np.array(r, dtype=np.int32)
    if t == "Pack":
        vals = [constant_value(x, _depth + 1) for x in op._inputs]
        if any(v is None for v in vals):
            return None
        return np.stack(vals, axis=op.attrs["axis"])
    if t == "ConcatV2":
        vals = [constant_value(x, _depth + 1) for x in op._inputs[:-1]]
        axis = constant_value(op._inputs[-1], _depth + 1)
        if axis is None or any(v is None for v in vals):
            return None
        return np.concatenate(vals, axis=int(axis))
    if t == "Cast":
        v = constant_value(op._inputs[0], _depth + 1)
        return None if v is None else v.astype(op.attrs["DstT"].np)
    if t == "Fill":
        dims = constant_value(op._inputs[0], _depth + 1)
        v = constant_value(op._inputs[1], _depth + 1)
        if dims is None or v is None or int(np.prod(dims)) > 1024:
            return None
        return np.full(tuple(int(d) for d in dims), v)
    return None


def constant_value_as_shape(tensor, _depth: int = 0) -> TensorShape:
    """The shape described by a 1-D int tensor, with unknown entries as None.

    Unknown rank comes back when not even the length of the vector is known.
    """
    if _depth > _MAX_DEPTH:
        return unknown_shape()
    shape = tensor.shape
    if shape.rank == 0:
        v = constant_value(tensor)
        if v is not None and int(v) == -1:
            return unknown_shape()
    op = tensor.op
    t = op.type
    if t == "Shape":
        return op._inputs[0].shape
    if t == "Pack":
        dims = []
        for x in op._inputs:
            v = constant_value(x, _depth + 1)
            dims.append(None if v is None or int(v) < 0 else int(v))
        return TensorShape(dims)
    if t == "ConcatV2":
        out = TensorShape([])
        for x in op._inputs[:-1]:
            out = out.concatenate(constant_value_as_shape(x, _depth + 1))
        return out
    if t == "StridedSlice" and op._inputs[0].op.type == "Shape":
        base = op._inputs[0].op._inputs[0].shape
        b = constant_value(op._inputs[1])
        e = constant_value(op._inputs[2])
        s = constant_value(op._inputs[3])
        a = op.attrs
        if (
            base.rank is not None
            and b is not None
            and e is not None
            and s is not None
            and a["ellipsis_mask"] == 0
            and a["new_axis_mask"] == 0
            and a["shrink_axis_mask"] == 0
            and len(b) == 1
        ):
            start = None if a["begin_mask"] & 1 else int(b[0])
            stop = None if a["end_mask"] & 1 else int(e[0])
            return TensorShape(list(base.dims)[slice(start, stop, int(s[0]))])
    v = constant_value(tensor, _depth + 1)
    if v is not None:
        v = np.asarray(v).reshape(-1)
        check_rank(v.size, f"the shape given by {tensor.name!r}")
        return TensorShape([None if int(d) < 0 else int(d) for d in v])
    if shape.rank == 1 and shape[0] is not None:
        check_rank(shape[0], f"the shape given by {tensor.name!r}")
        return TensorShape([None] * shape[0])
    return unknown_shape()
