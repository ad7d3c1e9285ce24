"""TensorArrays and TensorLists → ONNX sequences.

The loops `dynamic_rnn`, `map_fn`, `scan` and `foldl` build keep their per-step inputs and
outputs in TensorArrays: the array's *flow* tensor threads through the while loop, every write
returning a new flow. The export binds each flow (and each TensorList `variant` value) to an
ONNX tensor sequence, so a while loop that carries one becomes a Loop with a sequence-typed
loop-carried value (export_control_flow types those from `ExportContext.sequence_type`):

    TensorArrayV3(size)          SequenceEmpty (dynamic size), else `size` blank elements
                                 (SplitToSequence of a [size, 0] tensor)
    write(i, v)                  SequenceErase(i) + SequenceInsert(v, i) on a fixed-size array
                                 (any order: reverse scans write n−1 … 0); SequenceInsert(v, i)
                                 on a dynamic-size one (in order, as its writes must be)
    read(i)                      SequenceAt(i)
    unstack / scatter(range)     SplitToSequence(value, axis 0, keepdims 0); other
                                 indices: a Loop replacing one element a step
    stack / gather(indices)      ConcatFromSequence(new_axis 1) (+ Gather for other indices)
    size                         SequenceLength
    concat / split               ConcatFromSequence(axis 0) / SplitToSequence(lengths)

and the TensorList ops alike (EmptyTensorList, TensorListReserve / FromTensor / Stack /
ConcatV2 / Split / ScatterIntoExistingList / GetItem / SetItem / PushBack / PopBack / Length /
Gather; a SetItem that may grow the list, a dynamic-size TensorArray's write under while_v2,
appends as that write does). Sequences need opset 14 or newer (Identity, which the exported
subgraphs' outputs go through, takes sequences from opset 14).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export
from rill.graph.ops.tensor_array_ops import _creator
from rill.graph.shapes import TensorShape

__all__ = ["SEQUENCE_MIN_OPSET"]

SEQUENCE_MIN_OPSET = 14


def _check_opset(ctx) -> None:
    if ctx.opset < SEQUENCE_MIN_OPSET:
        ctx.unsupported(
            f"TensorArrays and TensorLists export as ONNX sequences, which need opset "
            f">= {SEQUENCE_MIN_OPSET} (this export is at opset {ctx.opset})"
        )


def _array(ctx, handle):
    """The TensorArrayV3 op behind a handle (through Enters and Identities)."""
    creator, _ = _creator(handle)
    if creator is None:
        ctx.unsupported("the TensorArray it uses is not created by a TensorArrayV3 op in the graph")
    return creator


def _seq(ctx, t) -> str:
    """The ONNX sequence bound to a flow or list value."""
    name = ctx.value(t)
    if ctx.sequence_type(name) is None:
        ctx.unsupported(f"{t.name} is not a TensorArray flow or TensorList this export tracks")
    return name


def _out_seq(ctx, t, name_op: str, inputs, elem: int, **attrs) -> str:
    """Writes one sequence-valued node bound to rill tensor t."""
    name = ctx.node(name_op, inputs, t, **attrs)
    ctx.mark_sequence(name, elem)
    return name


def _blank(ctx, size_name: str, elem: int, hint_t, elem_shape) -> str:
    """A sequence of `size` placeholder elements, to be overwritten by writes: zeros of the
    declared element shape (0 for its unknown dimensions, so the rank still matches what ONNX's
    shape inference sees of the later writes), or empty vectors when even the rank is unknown."""
    dims = None if elem_shape is None else elem_shape.dims
    tail = [0] if dims is None else [0 if d is None else int(d) for d in dims]
    n = ctx.node("Reshape", [size_name, ctx.initializer(np.array([1], np.int64))])
    if tail:
        shape = ctx.node("Concat", [n, ctx.initializer(np.array(tail, np.int64))], axis=0)
    else:
        shape = n
    blank = ctx.node("ConstantOfShape", [shape],
                     value=helper.make_tensor("v", elem, [1], [0]))  # fmt: skip
    return _out_seq(ctx, hint_t, "SplitToSequence", [blank], elem, axis=0, keepdims=0)


def _is_full_range(ctx, indices, value) -> bool:
    """Whether `indices` is range(len(value)) (an unstack) as far as export can tell."""
    v = ctx.const(indices)
    n = value.shape[0] if value.shape.rank else None
    if v is not None and n is not None:
        return np.array_equal(np.asarray(v).ravel(), np.arange(n))
    op = indices.op
    if op.type != "Range":
        return False
    start, delta = ctx.const(op._inputs[0]), ctx.const(op._inputs[2])
    return start is not None and delta is not None and int(start) == 0 and int(delta) == 1


def _stacked(ctx, seq: str, indices, out) -> None:
    """out = the elements at `indices` stacked along a new first axis."""
    v = ctx.const(indices)
    is_range = indices.op.type == "Range" and ctx.const(indices.op._inputs[0]) is not None and \
        int(ctx.const(indices.op._inputs[0])) == 0 and ctx.const(indices.op._inputs[2]) is not None \
        and int(ctx.const(indices.op._inputs[2])) == 1  # fmt: skip
    if is_range:  # stack(): every element, in order
        ctx.node("ConcatFromSequence", [seq], out, axis=0, new_axis=1)
        return
    stacked = ctx.node("ConcatFromSequence", [seq], axis=0, new_axis=1)
    idx = ctx.initializer(np.asarray(v, np.int64)) if v is not None else ctx.value(indices)
    ctx.node("Gather", [stacked, idx], out, axis=0)


def _length(ctx, seq: str, out) -> None:
    n = ctx.node("SequenceLength", [seq])
    ctx.node("Cast", [n], out, to=TensorProto.INT32)


# -- TensorArray ---------------------------------------------------------------------------------


def _element_shape(creator) -> TensorShape:
    """The array's element shape: as declared, else what its writes agree on."""
    declared = creator.attrs.get("element_shape")
    if declared is not None and declared.rank is not None:
        return declared
    shape = TensorShape(None)
    for o in creator.graph.get_operations():
        if o.type not in ("TensorArrayWriteV3", "TensorArrayScatterV3", "TensorArrayGatherV3"):
            continue
        if _creator(o._inputs[0])[0] is not creator:
            continue
        if o.type == "TensorArrayGatherV3":
            # The element shape a gather (stack) declares: TensorFlow's graphs give it where
            # the values written have lost theirs (a map_fn body read from another array).
            v = o.attrs.get("element_shape")
            if v is None or v.rank is None:
                continue
        else:
            v = o._inputs[2].shape
        if o.type == "TensorArrayScatterV3":
            v = TensorShape(None) if v.rank is None else TensorShape(v.dims[1:])
        if not shape.is_compatible_with(v):
            return TensorShape(None)
        shape = shape.merge_with(v)
    return shape


@register_onnx_export("TensorArrayV3")
def tensor_array(ctx, op):
    _check_opset(ctx)
    elem = onnx_dtype(op.attrs["dtype"])
    size = ctx.const(op._inputs[0])
    flow = op.outputs[1]
    if op.attrs.get("dynamic_size") or (size is not None and int(size) == 0):
        _out_seq(ctx, flow, "SequenceEmpty", [], elem, dtype=elem)
        return
    _blank(ctx, ctx.int64(op._inputs[0]), elem, flow, _element_shape(op))


@register_onnx_export("TensorArrayWriteV3")
def tensor_array_write(ctx, op):
    arr = _array(ctx, op._inputs[0])
    seq = _seq(ctx, op._inputs[3])
    elem = ctx.sequence_type(seq)
    index, value = ctx.value(op._inputs[1]), ctx.value(op._inputs[2])
    if arr.attrs.get("dynamic_size"):
        _out_seq(ctx, op.outputs[0], "SequenceInsert", [seq, value, index], elem)
        return
    erased = ctx.node("SequenceErase", [seq, index])
    ctx.mark_sequence(erased, elem)
    _out_seq(ctx, op.outputs[0], "SequenceInsert", [erased, value, index], elem)


@register_onnx_export("TensorArrayReadV3")
def tensor_array_read(ctx, op):
    _array(ctx, op._inputs[0])
    ctx.node("SequenceAt", [_seq(ctx, op._inputs[2]), ctx.value(op._inputs[1])], op.outputs[0])


@register_onnx_export("TensorArrayGatherV3")
def tensor_array_gather(ctx, op):
    _array(ctx, op._inputs[0])
    _stacked(ctx, _seq(ctx, op._inputs[2]), op._inputs[1], op.outputs[0])


@register_onnx_export("TensorArrayScatterV3")
def tensor_array_scatter(ctx, op):
    _array(ctx, op._inputs[0])
    _scatter(ctx, _seq(ctx, op._inputs[3]), op._inputs[1], op._inputs[2], op.outputs[0])


def _scatter(ctx, seq: str, indices, value, out) -> None:
    """out = seq with element indices[k] replaced by value[k]: every element in order (an
    unstack) is the value split; other indices a Loop replacing one element a step."""
    elem = ctx.sequence_type(seq)
    if _is_full_range(ctx, indices, value):
        _out_seq(ctx, out, "SplitToSequence", [ctx.value(value)], elem, axis=0, keepdims=0)
        return
    idx, val = ctx.int64(indices), ctx.value(value)
    m = ctx.model
    step, go, acc = m.fresh("scatter/step"), m.fresh("scatter/go"), m.fresh("scatter/acc")
    at, item, cut, put, keep = (m.fresh(f"scatter/{k}") for k in ("at", "item", "cut", "put",
                                                                    "keep"))  # fmt: skip
    body = helper.make_graph(
        [
            helper.make_node("Gather", [idx, step], [at], axis=0),
            helper.make_node("Gather", [val, step], [item], axis=0),
            helper.make_node("SequenceErase", [acc, at], [cut]),
            helper.make_node("SequenceInsert", [cut, item, at], [put]),
            helper.make_node("Identity", [go], [keep]),
        ],
        "scatter_body",
        [
            helper.make_tensor_value_info(step, TensorProto.INT64, []),
            helper.make_tensor_value_info(go, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(acc, elem, None),
        ],
        [
            helper.make_tensor_value_info(keep, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(put, elem, None),
        ],
    )
    count = ctx.node("Size", [idx])
    # An explicit true condition: onnx's ReferenceEvaluator runs no step when it is left out.
    true = ctx.initializer(np.array(True))
    _out_seq(ctx, out, "Loop", [count, true, seq], elem, body=body)


@register_onnx_export("TensorArraySizeV3")
def tensor_array_size(ctx, op):
    _array(ctx, op._inputs[0])
    _length(ctx, _seq(ctx, op._inputs[1]), op.outputs[0])


@register_onnx_export("TensorArrayConcatV3")
def tensor_array_concat(ctx, op):
    _array(ctx, op._inputs[0])
    if any(c for c in op.outputs[1].consumers() if c in ctx.model.tree.needed):
        ctx.unsupported("its lengths output has no ONNX sequence equivalent")
    ctx.node("ConcatFromSequence", [_seq(ctx, op._inputs[1])], op.outputs[0], axis=0, new_axis=0)


@register_onnx_export("TensorArraySplitV3")
def tensor_array_split(ctx, op):
    _array(ctx, op._inputs[0])
    seq = _seq(ctx, op._inputs[3])
    _out_seq(ctx, op.outputs[0], "SplitToSequence", [ctx.value(op._inputs[1]),
                                                     ctx.int64(op._inputs[2])],
             ctx.sequence_type(seq), axis=0, keepdims=1)  # fmt: skip


@register_onnx_export("TensorArrayCloseV3")
def tensor_array_close(ctx, op):
    """Nothing to write: a sequence needs no closing."""


# -- TensorList ----------------------------------------------------------------------------------


def _list_elem(ctx, op) -> int:
    return onnx_dtype(op.attrs["element_dtype"])


@register_onnx_export("EmptyTensorList")
def empty_tensor_list(ctx, op):
    _check_opset(ctx)
    elem = _list_elem(ctx, op)
    _out_seq(ctx, op.outputs[0], "SequenceEmpty", [], elem, dtype=elem)


def _shape_arg(ctx, t) -> TensorShape:
    """A TensorList op's element_shape argument (-1: unknown rank; -1 dims: unknown)."""
    shape = ctx.const(t)
    if shape is None or np.ndim(shape) != 1:
        return TensorShape(None)
    return TensorShape([None if d < 0 else int(d) for d in np.asarray(shape)])


# Ops a TensorList passes through unchanged on its way to its uses (loop and cond plumbing).
_LIST_PASSES = ("Enter", "Exit", "Merge", "Switch", "Identity", "NextIteration")


def _list_uses_shape(ctx, t) -> TensorShape:
    """The element shape the uses of list `t` agree on (through loops and conds): the items
    set into it, the shapes its reads and stacks declare. TensorFlow's while_v2 reserves its
    output lists with an unknown element shape (-1) and states it only where they are used."""
    shape, seen, stack = TensorShape(None), set(), [t]
    while stack:
        t = stack.pop()
        for c in t.consumers():
            if c in seen:
                continue
            seen.add(c)
            if c.type in ("TensorListSetItem", "TensorListPushBack"):
                if c._inputs[0] is not t:
                    continue
                v = c._inputs[2 if c.type == "TensorListSetItem" else 1].shape
                stack.append(c.outputs[0])
            elif c.type in ("TensorListStack", "TensorListGetItem", "TensorListGather"):
                v = _shape_arg(ctx, c._inputs[-1])
            elif c.type in _LIST_PASSES:
                stack.extend(o for o in c.outputs if o.dtype.name == "variant")
                continue
            else:
                continue
            if not shape.is_compatible_with(v):
                return TensorShape(None)
            shape = shape.merge_with(v)
    return shape


@register_onnx_export("TensorListReserve")
def tensor_list_reserve(ctx, op):
    _check_opset(ctx)
    elem_shape = _shape_arg(ctx, op._inputs[0])
    if elem_shape.rank is None:
        elem_shape = _list_uses_shape(ctx, op.outputs[0])
    elem_shape = None if elem_shape.rank is None else elem_shape
    _blank(ctx, ctx.int64(op._inputs[1]), _list_elem(ctx, op), op.outputs[0], elem_shape)


@register_onnx_export("TensorListFromTensor")
def tensor_list_from_tensor(ctx, op):
    _check_opset(ctx)
    _out_seq(ctx, op.outputs[0], "SplitToSequence", [ctx.value(op._inputs[0])],
             _list_elem(ctx, op), axis=0, keepdims=0)  # fmt: skip


@register_onnx_export("TensorListStack")
def tensor_list_stack(ctx, op):
    ctx.node("ConcatFromSequence", [_seq(ctx, op._inputs[0])], op.outputs[0], axis=0, new_axis=1)


@register_onnx_export("TensorListScatterIntoExistingList")
def tensor_list_scatter_into(ctx, op):
    _scatter(ctx, _seq(ctx, op._inputs[0]), op._inputs[2], op._inputs[1], op.outputs[0])


@register_onnx_export("TensorListSplit")
def tensor_list_split(ctx, op):
    """A list of pieces of the tensor along its first axis, of the given lengths."""
    _check_opset(ctx)
    _out_seq(ctx, op.outputs[0], "SplitToSequence", [ctx.value(op._inputs[0]),
                                                     ctx.int64(op._inputs[2])],
             _list_elem(ctx, op), axis=0, keepdims=1)  # fmt: skip


@register_onnx_export("TensorListConcatV2")
def tensor_list_concat(ctx, op):
    """The elements joined along their first axis (TensorArray.concat under while_v2)."""
    if any(c for c in op.outputs[1].consumers() if c in ctx.model.tree.needed):
        ctx.unsupported("its lengths output has no ONNX sequence equivalent")
    ctx.node("ConcatFromSequence", [_seq(ctx, op._inputs[0])], op.outputs[0], axis=0, new_axis=0)


@register_onnx_export("TensorListGetItem")
def tensor_list_get_item(ctx, op):
    ctx.node("SequenceAt", [_seq(ctx, op._inputs[0]), ctx.value(op._inputs[1])], op.outputs[0])


@register_onnx_export("TensorListSetItem")
def tensor_list_set_item(ctx, op):
    seq = _seq(ctx, op._inputs[0])
    elem = ctx.sequence_type(seq)
    index = ctx.value(op._inputs[1])
    if op.attrs.get("resize_if_index_out_of_bounds"):
        # A dynamic-size TensorArray's write under while_v2: its writes come in order, each
        # one past the end (as TensorArrayWriteV3 on a dynamic-size array exports).
        _out_seq(ctx, op.outputs[0], "SequenceInsert", [seq, ctx.value(op._inputs[2]), index],
                 elem)  # fmt: skip
        return
    erased = ctx.node("SequenceErase", [seq, index])
    ctx.mark_sequence(erased, elem)
    _out_seq(ctx, op.outputs[0], "SequenceInsert", [erased, ctx.value(op._inputs[2]), index],
             elem)  # fmt: skip


@register_onnx_export("TensorListPushBack")
def tensor_list_push_back(ctx, op):
    seq = _seq(ctx, op._inputs[0])
    _out_seq(ctx, op.outputs[0], "SequenceInsert", [seq, ctx.value(op._inputs[1])],
             ctx.sequence_type(seq))  # fmt: skip


@register_onnx_export("TensorListPopBack")
def tensor_list_pop_back(ctx, op):
    seq = _seq(ctx, op._inputs[0])
    last = ctx.initializer(np.array(-1, np.int64))
    _out_seq(ctx, op.outputs[0], "SequenceErase", [seq, last], ctx.sequence_type(seq))
    ctx.node("SequenceAt", [seq, last], op.outputs[1])


@register_onnx_export("TensorListLength")
def tensor_list_length(ctx, op):
    _length(ctx, _seq(ctx, op._inputs[0]), op.outputs[0])


@register_onnx_export("TensorListGather")
def tensor_list_gather(ctx, op):
    _stacked(ctx, _seq(ctx, op._inputs[0]), op._inputs[1], op.outputs[0])
