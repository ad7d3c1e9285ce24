"""Values an export can know without running the graph: constants, frozen variables (read
once through the caller's Session), static shapes, and small integer arithmetic on them. Rules
use them for what ONNX wants as attributes or constant inputs (axes, perms, pads, sizes), and
the exporter writes such values as initializers instead of computing them in the model."""

from __future__ import annotations

import numpy as np

from rill.graph.errors import UnimplementedError
from rill.graph.graph import Operation, Tensor
from rill.graph.ops.state_ops import resource_producer

__all__ = ["StaticValues", "describe"]


def describe(op: Operation) -> str:
    src = op.source
    where = f" (created at {src[0]}:{src[1]} in {src[2]})" if src else ""
    return f"{op.type} op {op.name!r}{where}"


class StaticValues:
    """Memoized static evaluation; `fed` tensors are never static."""

    def __init__(self, fed: set[Tensor], session):
        self.fed = fed
        self.session = session
        self._static: dict[Tensor, object] = {}
        self._frozen: dict[Operation, np.ndarray] = {}

    def frozen(self, op: Operation) -> np.ndarray:
        """The value of the variable `op` (a ReadVariableOp or ResourceGather) reads."""
        # Through Identities, conds and loops (while_v2 carries captured variables as loop
        # variables), as the variable's shape function finds it.
        handle = resource_producer(op._inputs[0])
        if handle is None:
            raise UnimplementedError(
                f"cannot export {describe(op)}: its handle merges several variables", op=op
            )
        if handle in self._frozen:
            return self._frozen[handle]
        if handle.type != "VarHandleOp":
            raise UnimplementedError(
                f"cannot export {describe(op)}: it reads a {handle.type}, not a variable", op=op
            )
        if self.session is None:
            raise UnimplementedError(
                f"cannot export {describe(op)}: variable {handle.name!r} must be frozen into the "
                "model; pass session= (a Session in which the variable is initialized)",
                op=op,
            )
        reader = next((c for c in handle.outputs[0].consumers()
                       if c.type == "ReadVariableOp" and c._control_flow_context is None), None)  # fmt: skip
        if reader is None:
            raise UnimplementedError(
                f"cannot export {describe(op)}: variable {handle.name!r} has no read outside "
                "control flow to take its value from",
                op=op,
            )
        value = np.asarray(self.session.run(reader.outputs[0]))
        self._frozen[handle] = value
        return value

    def static(self, t: Tensor, depth: int = 0):
        """t's value when it is known at export time (constants, frozen variables, static
        shapes and small arithmetic on them), else None."""
        if t in self._static:
            return self._static[t]
        v = None if depth > 32 or t in self.fed else self._static_uncached(t, depth)
        if v is not None:
            v = np.asarray(v)
        self._static[t] = v
        return v

    def _static_uncached(self, t: Tensor, depth: int):
        op, ins = t.op, t.op._inputs

        def arg(i):
            return self.static(ins[i], depth + 1)

        kind = op.type
        if kind == "Const":
            return op.attrs["value"]
        if kind in ("Identity", "StopGradient", "Snapshot", "PlaceholderWithDefault", "Enter",
                    "Switch", "PreventGradient"):  # fmt: skip
            return arg(0)
        if kind == "IdentityN":
            return arg(t.value_index)
        if kind == "ReadVariableOp":
            return self.frozen(op)
        if kind in ("Shape", "Size", "Rank", "ShapeN"):
            s = ins[t.value_index if kind == "ShapeN" else 0].shape
            if kind == "Rank":
                return None if s.rank is None else np.int32(s.rank)
            if not s.is_fully_defined():
                return None
            want = op.attrs["out_type"].np
            return np.array(s.dims if kind != "Size" else np.prod(s.dims), dtype=want)
        if kind == "Cast":
            v = arg(0)
            # Only exact casts: float to int follows TensorFlow's own rounding rules.
            return None if v is None or v.dtype.kind not in "iub" else v.astype(op.attrs["DstT"].np)
        if kind == "Pack":
            vals = [self.static(x, depth + 1) for x in ins]
            return None if any(v is None for v in vals) else np.stack(vals, op.attrs["axis"])
        if kind == "ConcatV2":
            vals = [self.static(x, depth + 1) for x in ins]
            if any(v is None for v in vals):
                return None
            return np.concatenate(vals[:-1], axis=int(vals[-1]))
        if kind in ("AddV2", "Add", "Sub", "Mul", "Maximum", "Minimum", "FloorDiv"):
            a, b = arg(0), arg(1)
            if a is None or b is None or a.dtype.kind not in "iu":
                return None
            fn = {"AddV2": np.add, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                  "Maximum": np.maximum, "Minimum": np.minimum, "FloorDiv": np.floor_divide}  # fmt: skip
            return fn[kind](a, b).astype(a.dtype)
        if kind == "Neg":
            a = arg(0)
            return None if a is None or a.dtype.kind not in "iu" else -a
        if kind == "StridedSlice":
            vals = [arg(i) for i in range(4)]
            if any(v is None for v in vals):
                return None
            return vals[0][_strided_index(op.attrs, *vals[1:])]
        return None


def _strided_index(attrs, begin, end, strides) -> tuple:
    """A StridedSlice's spec as a numpy index (TensorFlow modelled it on numpy's)."""
    index = []
    for i, (b, e, s) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
        bit = 1 << i
        if attrs["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif attrs["new_axis_mask"] & bit:
            index.append(None)
        elif attrs["shrink_axis_mask"] & bit:
            index.append(b)
        else:
            index.append(slice(None if attrs["begin_mask"] & bit else b,
                               None if attrs["end_mask"] & bit else e, s))  # fmt: skip
    return tuple(index)
