"""ONNX import rules: If → cond, Loop and Scan → while_loop with TensorArrays.

Subgraphs are imported inside the branch or loop body, where rill's control-flow contexts bring
outer values in (Switch for a branch, Enter for a loop), so a subgraph may read any value of an
enclosing graph by name, as ONNX allows. A Loop's scan outputs and a Scan's inputs and outputs
go through TensorArrays, one element per iteration. Sequences and optionals (variant tensors)
may be branch outputs and loop variables; where ONNX lets a value switch between a sequence and
an optional sequence (branches, iterations), it is wrapped or unwrapped to one kind.
"""

from __future__ import annotations

import numpy as np
import onnx

from rill.graph import dtypes
from rill.graph.control_flow import cond, while_loop
from rill.graph.onnx.import_linalg import _dim
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_sequence import coerce
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype
from rill.graph.onnx.import_util import scalar as _scalar
from rill.graph.ops.tensor_array_ops import TensorArray
from rill.graph.shapes import TensorShape, unknown_shape


def _declared(vi: onnx.ValueInfoProto) -> TensorShape:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
        return unknown_shape()
    return TensorShape([d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim])


def _elem_dtype(vi: onnx.ValueInfoProto, what: str):
    if not vi.type.HasField("tensor_type"):
        kind = vi.type.WhichOneof("value") or "no type"
        raise OnnxImportError(f"{what} {vi.name!r} has ONNX type {kind}; rill imports tensors only")
    return rill_dtype(vi.type.tensor_type.elem_type, f"{what} {vi.name!r}: ")


def _invariant(initial: TensorShape, *declared: TensorShape) -> TensorShape:
    """The loop-variable shape that the initial value and every declared type agree on."""
    s = initial
    for d in declared:
        if d.rank is None:
            return unknown_shape()
        s = s.most_specific_compatible(d)
    return s


@register_onnx_import("If")
def if_(n, c, *, then_branch, else_branch):
    if len(then_branch.output) != len(else_branch.output):
        raise OnnxImportError(
            f"If branches have {len(then_branch.output)} and {len(else_branch.output)} outputs"
        )
    known = n.static(c)
    if known is not None:
        # A condition fixed when the graph is built: only the taken branch exists (the other may
        # not even be valid for these shapes).
        branch = then_branch if bool(np.asarray(known).reshape(-1)[0]) else else_branch
        return [op("Identity", [t]) for t in n.import_subgraph(branch, [])]
    pred = _scalar(c)
    if pred.dtype != dtypes.bool_:
        pred = op("Cast", [pred], {"DstT": dtypes.bool_})
    kinds = [n.declared_kind(i) for i in range(len(then_branch.output))]

    def branch(g):
        outs = n.import_subgraph(g, [])
        # Both branches give each output one kind: the declared one, else the then branch's.
        for i, t in enumerate(outs):
            outs[i] = coerce(n, t, kinds[i])
            kinds[i] = n.kind(outs[i])
        return outs

    outs = cond(pred, lambda: branch(then_branch), lambda: branch(else_branch), strict=True)
    return [n.mark(t, k) for t, k in zip(outs, kinds)]


@register_onnx_import("Loop")
def loop(n, m=None, c=None, *initial, body):
    """for (i = 0; (M absent or i < M) and cond; ++i) vars, scans[i] = body(i, cond, vars)."""
    nv = len(initial)
    if len(body.input) != nv + 2:
        raise OnnxImportError(f"Loop body takes {len(body.input)} inputs; expected {nv + 2}")
    n_scan = len(body.output) - 1 - nv
    if n_scan < 0:
        raise OnnxImportError(
            f"Loop body has {len(body.output)} outputs; expected >= {nv + 1} (the condition and "
            f"the {nv} loop-carried value(s))"
        )
    if n.num_outputs > nv + n_scan:
        raise OnnxImportError(
            f"Loop has {n.num_outputs} outputs but its body makes {len(body.output)} (the "
            f"condition, {nv} loop-carried value(s), {n_scan} scan output(s)): the body must "
            f"have 1 + {n.num_outputs} outputs"
        )
    trip = None if m is None else op("Cast", [_scalar(m)], {"DstT": dtypes.int64})
    keep = const(True, dtypes.bool_) if c is None else _scalar(c)
    scan_vis = list(body.output[1 + nv :])
    tas = [TensorArray(_elem_dtype(vi, "Loop scan output"), size=0, dynamic_size=True,
                       element_shape=_declared(vi), name="scan_output")
           for vi in scan_vis]  # fmt: skip

    def cond_fn(i, k, *rest):
        return k if trip is None else op("LogicalAnd", [op("Less", [i, trip]), k])

    kinds = [n.kind(v) for v in initial]

    def body_fn(i, k, *rest):
        vals, arrays = list(rest[:nv]), list(rest[nv:])
        outs = n.import_subgraph(body, [i, k, *vals])
        new_k = _scalar(outs[0])
        new_vals = [op("Identity", [coerce(n, o, kd)])
                    for o, kd in zip(outs[1 : 1 + nv], kinds)]  # fmt: skip
        new_arrays = [ta.write(op("Cast", [i], {"DstT": dtypes.int32}), s)
                      for ta, s in zip(arrays, outs[1 + nv:])]  # fmt: skip
        return [op("AddV2", [i, const(1, dtypes.int64)]), new_k, *new_vals, *new_arrays]

    invariants = [TensorShape([]), TensorShape([])]
    for v, vin, vout in zip(initial, body.input[2:], body.output[1 : 1 + nv]):
        if v.dtype is dtypes.variant:
            invariants.append(TensorShape([]))
        else:
            invariants.append(_invariant(v.shape, _declared(vin), _declared(vout)))
    invariants += [None] * n_scan
    res = while_loop(cond_fn, body_fn, [const(0, dtypes.int64), keep, *initial, *tas],
                     shape_invariants=invariants, name="loop")  # fmt: skip
    finals = [coerce(n, n.mark(op("Identity", [v]), kd), n.declared_kind(j))
              for j, (v, kd) in enumerate(zip(res[2 : 2 + nv], kinds))]  # fmt: skip
    return finals + [ta.stack() for ta in res[2 + nv :]]


@register_onnx_import("Scan")
def scan(n, *args, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):  # fmt: skip
    """Iterates body over slices of the scan inputs along their scan axes, carrying states."""
    m = int(num_scan_inputs)
    states, xs = list(args[: len(args) - m]), list(args[len(args) - m :])
    ns = len(states)
    k = len(body.output) - ns
    in_axes = list(scan_input_axes or [0] * m)
    in_dirs = list(scan_input_directions or [0] * m)
    out_axes = list(scan_output_axes or [0] * k)
    out_dirs = list(scan_output_directions or [0] * k)
    in_tas = []
    length = None
    for x, a, d in zip(xs, in_axes, in_dirs):
        r = x.shape.rank
        if r is None:
            raise OnnxImportError("Scan needs scan inputs of known rank")
        a %= r
        if a:
            perm = [a] + [i for i in range(r) if i != a]
            x = op("Transpose", [x, const(perm, dtypes.int32)])
        if d:
            x = op("ReverseV2", [x, const([0], dtypes.int32)])
        if length is None:
            length = _dim(x, 0)
        in_tas.append(TensorArray(x.dtype, size=op("Cast", [const(length, dtypes.int64)
                                                            if isinstance(length, int)
                                                            else length], {"DstT": dtypes.int32}),
                                  name="scan_input").unstack(x))  # fmt: skip
    n_iter = (
        const(length, dtypes.int32)
        if isinstance(length, int)
        else op("Cast", [length], {"DstT": dtypes.int32})
    )
    out_vis = list(body.output[ns:])
    out_tas = [TensorArray(_elem_dtype(vi, "Scan output"), size=n_iter,
                           element_shape=_declared(vi), name="scan_output")
               for vi in out_vis]  # fmt: skip

    def cond_fn(t, *rest):
        return op("Less", [t, n_iter])

    def body_fn(t, *rest):
        st, arrays = list(rest[:ns]), list(rest[ns:])
        slices = [ta.read(t) for ta in in_tas]
        outs = n.import_subgraph(body, [*st, *slices])
        new_st = [op("Identity", [o]) for o in outs[:ns]]
        new_arrays = [ta.write(t, s) for ta, s in zip(arrays, outs[ns:])]
        return [op("AddV2", [t, const(1, dtypes.int32)]), *new_st, *new_arrays]

    invariants = [TensorShape([])]
    for v, vin, vout in zip(states, body.input[:ns], body.output[:ns]):
        invariants.append(_invariant(v.shape, _declared(vin), _declared(vout)))
    invariants += [None] * k
    res = while_loop(cond_fn, body_fn, [const(0, dtypes.int32), *states, *out_tas],
                     shape_invariants=invariants, name="scan")  # fmt: skip
    outs = [op("Identity", [v]) for v in res[1 : 1 + ns]]
    for ta, a, d in zip(res[1 + ns :], out_axes, out_dirs):
        y = ta.stack()
        if d:
            y = op("ReverseV2", [y, const([0], dtypes.int32)])
        r = y.shape.rank
        if a and r is not None:
            a %= r
            perm = list(range(1, a + 1)) + [0] + list(range(a + 1, r))
            y = op("Transpose", [y, const(np.asarray(perm), dtypes.int32)])
        outs.append(y)
    return outs
