"""ONNX export of the math family: elementwise arithmetic, comparisons and logic, Cast, Select,
matrix products, reductions, ArgMax/ArgMin, Cumsum and Range, TruncateDiv / TruncateMod,
ApproximateEqual, Bucketize, LowerBound / UpperBound (searchsorted) and LinSpace.

Elementwise ops keep their inputs' layout (see exporter), reductions and ArgMax remap their
axes into it; everything else reads its inputs as they are in rill.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from rill.graph import dtypes
from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export

_UNARY = {
    "Abs": "Abs",
    "Neg": "Neg",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Floor": "Floor",
    "Ceil": "Ceil",
    "Round": "Round",  # both round half to even
    "Rint": "Round",  # tf.math.rint: half to even too
    "Sign": "Sign",
    "Reciprocal": "Reciprocal",
    "Erf": "Erf",
    "Cos": "Cos",
    "LogicalNot": "Not",
}
_BINARY = {
    "Add": "Add",
    "AddV2": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "RealDiv": "Div",
    "Div": "Div",  # integer Div truncates toward zero in both
    "Maximum": "Max",
    "Minimum": "Min",
    "Pow": "Pow",
    "Equal": "Equal",
    "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual",
    "Less": "Less",
    "LessEqual": "LessOrEqual",
    "LogicalAnd": "And",
    "LogicalOr": "Or",
}


def _unary_rule(onnx_type):
    return lambda ctx, op: ctx.unary(op, onnx_type)


def _binary_rule(onnx_type):
    return lambda ctx, op: ctx.elementwise(op, onnx_type)


for _rill, _onnx in _UNARY.items():
    register_onnx_export(_rill)(_unary_rule(_onnx))
for _rill, _onnx in _BINARY.items():
    register_onnx_export(_rill)(_binary_rule(_onnx))


@register_onnx_export("Rsqrt")
def rsqrt(ctx, op):
    name, layout = ctx.value_any(op._inputs[0])
    ctx.node("Reciprocal", [ctx.node("Sqrt", [name])], op.outputs[0], layout=layout)


@register_onnx_export("Square")
def square(ctx, op):
    name, layout = ctx.value_any(op._inputs[0])
    ctx.node("Mul", [name, name], op.outputs[0], layout=layout)


@register_onnx_export("Log1p")
def log1p(ctx, op):
    """log(1 + x): loses the precision of log1p for |x| far below float epsilon."""
    x = op._inputs[0]
    name, layout = ctx.value_any(x)
    ctx.node("Log", [ctx.node("Add", [name, ctx.scalar_like(1, x)])], op.outputs[0], layout=layout)


@register_onnx_export("SquaredDifference")
def squared_difference(ctx, op):
    diff, layout = ctx.broadcast_values(op._inputs)
    d = ctx.node("Sub", diff)
    ctx.node("Mul", [d, d], op.outputs[0], layout=layout)


@register_onnx_export("NotEqual")
def not_equal(ctx, op):
    names, layout = ctx.broadcast_values(op._inputs)
    ctx.node("Not", [ctx.node("Equal", names)], op.outputs[0], layout=layout)


@register_onnx_export("FloorMod")
def floor_mod(ctx, op):
    """Integers: ONNX Mod (fmod=0) already takes the divisor's sign. Floats: x - floor(x/y)·y."""
    (x, y), layout = ctx.broadcast_values(op._inputs)
    if op.attrs["T"].is_integer:
        ctx.node("Mod", [x, y], op.outputs[0], layout=layout, fmod=0)
        return
    q = ctx.node("Floor", [ctx.node("Div", [x, y])])
    ctx.node("Sub", [x, ctx.node("Mul", [q, y])], op.outputs[0], layout=layout)


@register_onnx_export("FloorDiv")
def floor_div(ctx, op):
    """Floats: floor(x / y). Integers: (x - mod(x, y)) / y, exact, so truncation is floor."""
    (x, y), layout = ctx.broadcast_values(op._inputs)
    if op.attrs["T"].is_integer:
        r = ctx.node("Mod", [x, y], fmod=0)
        ctx.node("Div", [ctx.node("Sub", [x, r]), y], op.outputs[0], layout=layout)
        return
    ctx.node("Floor", [ctx.node("Div", [x, y])], op.outputs[0], layout=layout)


@register_onnx_export("AddN")
def add_n(ctx, op):
    if len(op._inputs) == 1:
        ctx.bind(op.outputs[0], *ctx.value_any(op._inputs[0]))
        return
    ctx.elementwise(op, "Sum")


# The opset that first has each narrow type (float8_e4m3b11fnuz is not an ONNX type).
_NARROW_SINCE = {
    "float8_e4m3fn": 19, "float8_e4m3fnuz": 19, "float8_e5m2": 19, "float8_e5m2fnuz": 19,
    "int4": 21, "uint4": 21, "float4_e2m1fn": 23, "float8_e8m0fnu": 24, "int2": 25, "uint2": 25,
}  # fmt: skip


@register_onnx_export("Cast")
def cast(ctx, op):
    src, dst = op.attrs["SrcT"], op.attrs["DstT"]
    if dst.is_complex or src.is_complex:
        ctx.unsupported("ONNX runtimes have no complex tensors (ONNX Cast does not take them)")
    for t in (src, dst):
        since = _NARROW_SINCE.get(t.name, 0) if t.is_narrow else 0
        if ctx.opset < since:
            ctx.unsupported(f"ONNX has {t.name} from opset {since}; the export asked for "
                            f"opset {ctx.opset}")  # fmt: skip
    if dst is src:
        ctx.bind(op.outputs[0], *ctx.value_any(op._inputs[0]))
        return
    # rill's Cast does not saturate: overflow gives NaN (Inf for float8_e5m2), ONNX's saturate=0;
    # to float8_e8m0fnu it rounds to the nearer power of two, ties up.
    attrs = {}
    if dst.is_narrow and dst.is_floating and dst is not dtypes.float4_e2m1fn:
        attrs["saturate"] = 0
    if dst is dtypes.float8_e8m0fnu:
        attrs["round_mode"] = "nearest"
    ctx.unary(op, "Cast", to=onnx_dtype(dst), **attrs)


@register_onnx_export("SelectV2")
def select_v2(ctx, op):
    ctx.elementwise(op, "Where")


@register_onnx_export("Select")
def select(ctx, op):
    """Select's condition may be a vector picking rows of higher-rank t and e."""
    cond, t = op._inputs[0], op._inputs[1]
    rc, rt = cond.shape.rank, t.shape.rank
    if rc == 1 and rt is not None and rt > 1:
        axes = ctx.initializer(np.arange(1, rt, dtype=np.int64))
        c = ctx.node("Unsqueeze", [ctx.value(cond), axes])
        ctx.node("Where", [c, ctx.value(t), ctx.value(op._inputs[2])], op.outputs[0])
        return
    if rc == 1 and rt is None:
        ctx.unsupported("a vector condition needs the rank of t known")
    ctx.elementwise(op, "Where")


# -- matrix products ---------------------------------------------------------------------------


@register_onnx_export("MatMul")
def matmul(ctx, op):
    a, b = op._inputs
    ta, tb = int(op.attrs["transpose_a"]), int(op.attrs["transpose_b"])
    if op.attrs["T"] in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16):
        # A Gemm takes the transposes (and later a bias, see export_passes).
        ctx.node("Gemm", [ctx.value(a), ctx.value(b)], op.outputs[0],
                 transA=ta or None, transB=tb or None)  # fmt: skip
        return
    ins = [_transposed(ctx, a, 2) if ta else ctx.value(a),
           _transposed(ctx, b, 2) if tb else ctx.value(b)]  # fmt: skip
    ctx.node("MatMul", ins, op.outputs[0])


def _transposed(ctx, t, rank):
    """t with its last two axes swapped (a constant is swapped at export time)."""
    v = ctx.const(t)
    if v is not None:
        return ctx.initializer(np.ascontiguousarray(np.swapaxes(v, -1, -2)))
    if rank is None:
        ctx.unsupported(f"an adjoint of {t.name} needs its rank known")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ctx.node("Transpose", [ctx.value(t)], perm=perm)


@register_onnx_export("BatchMatMulV2")
def batch_matmul(ctx, op):
    x, y = op._inputs
    ins = [_transposed(ctx, x, x.shape.rank) if op.attrs["adj_x"] else ctx.value(x),
           _transposed(ctx, y, y.shape.rank) if op.attrs["adj_y"] else ctx.value(y)]  # fmt: skip
    ctx.node("MatMul", ins, op.outputs[0])


# -- reductions --------------------------------------------------------------------------------

# ReduceSum takes its axes as an input from opset 13, the others from 18.
_AXES_INPUT_FROM = {"ReduceSum": 13}


def reduce(ctx, op, onnx_type, x_name=None, layout=None, out="op"):
    """Op's reduction (input 0 over the axes of input 1) as an ONNX Reduce* node. Binds the
    op's output, or with out=None returns the (name, layout) of a fresh value."""
    x, axes_t = op._inputs[0], op._inputs[1]
    keep = bool(op.attrs["keep_dims"])
    target = op.outputs[0] if out == "op" else None
    if x_name is None:
        x_name, layout = ctx.value_any(x)
    axes_input = ctx.opset >= _AXES_INPUT_FROM.get(onnx_type, 18)
    axes = ctx.const(axes_t)
    if axes is None:
        if not axes_input:
            ctx.unsupported(f"{onnx_type} at opset {ctx.opset} needs constant axes "
                            "(they are an input from opset 18)")  # fmt: skip
        if layout is not None:
            x_name = ctx.node("Transpose", [x_name], perm=list(_inverse(layout)))
        flat = ctx.node("Reshape", [ctx.int64(axes_t), ctx.initializer(np.array([-1], np.int64))])
        name = ctx.node(onnx_type, [x_name, flat], target, keepdims=int(keep),
                        noop_with_empty_axes=1)  # fmt: skip
        return name, None
    axes = [int(a) for a in np.asarray(axes).reshape(-1)]
    if not axes:
        return ctx.node("Identity", [x_name], target, layout=layout), layout
    rank = x.shape.rank
    out_layout = None
    if layout is not None:
        axes = sorted({a % rank for a in axes})
        onnx_axes = sorted(layout.index(a) for a in axes)
        if keep:
            out_layout = layout
        else:
            left = [a for a in range(rank) if a not in axes]
            out_layout = tuple(left.index(layout[j]) for j in range(rank) if j not in onnx_axes)
        axes = onnx_axes
    elif rank is not None:
        axes = sorted({a % rank for a in axes})
    if axes_input:
        ins = [x_name, ctx.initializer(np.array(axes, np.int64))]
        name = ctx.node(onnx_type, ins, target, layout=out_layout, keepdims=int(keep))
    else:
        name = ctx.node(onnx_type, [x_name], target, layout=out_layout, axes=axes,
                        keepdims=int(keep))  # fmt: skip
    return name, out_layout


def reduce_static(ctx, onnx_type, name, axes, keepdims):
    """An ONNX reduction over constant `axes` in the form the target opset defines."""
    if ctx.opset >= _AXES_INPUT_FROM.get(onnx_type, 18):
        return ctx.node(onnx_type, [name, ctx.initializer(np.array(axes, np.int64))],
                        keepdims=keepdims)  # fmt: skip
    return ctx.node(onnx_type, [name], axes=list(axes), keepdims=keepdims)


def _inverse(perm):
    return [perm.index(i) for i in range(len(perm))]


_REDUCTIONS = {"Sum": "ReduceSum", "Mean": "ReduceMean", "Max": "ReduceMax",
               "Min": "ReduceMin", "Prod": "ReduceProd"}  # fmt: skip

for _rill, _onnx in _REDUCTIONS.items():
    register_onnx_export(_rill)(lambda ctx, op, _t=_onnx: reduce(ctx, op, _t))


@register_onnx_export("All", "Any")
def all_any(ctx, op):
    """Over booleans as int32: All is a min, Any a max."""
    name, layout = ctx.value_any(op._inputs[0])
    as_int = ctx.node("Cast", [name], to=TensorProto.INT32)
    kind = "ReduceMin" if op.type == "All" else "ReduceMax"
    r, r_layout = reduce(ctx, op, kind, as_int, layout, out=None)
    ctx.node("Cast", [r], op.outputs[0], layout=r_layout, to=TensorProto.BOOL)


@register_onnx_export("ArgMax", "ArgMin")
def arg_max(ctx, op):
    x = op._inputs[0]
    axis = int(ctx.require_const(op._inputs[1], "dimension"))
    name, layout = ctx.value_any(x)
    rank = x.shape.rank
    out_layout = None
    if layout is not None:
        axis %= rank
        left = [a for a in range(rank) if a != axis]
        out_layout = tuple(left.index(layout[j]) for j in range(rank) if layout[j] != axis)
        axis = layout.index(axis)
    want = op.attrs["output_type"]
    kind = op.type
    if want is dtypes.int64:
        ctx.node(kind, [name], op.outputs[0], layout=out_layout, axis=axis, keepdims=0)
        return
    idx = ctx.node(kind, [name], axis=axis, keepdims=0)
    ctx.node("Cast", [idx], op.outputs[0], layout=out_layout, to=onnx_dtype(want))


@register_onnx_export("Cumsum")
def cumsum(ctx, op):
    x, axis = op._inputs
    ctx.node("CumSum", [ctx.value(x), ctx.int64(axis)], op.outputs[0],
             exclusive=int(op.attrs["exclusive"]), reverse=int(op.attrs["reverse"]))  # fmt: skip


@register_onnx_export("Range")
def range_(ctx, op):
    ctx.node("Range", [ctx.value(t) for t in op._inputs], op.outputs[0])


# -- truncating division, approximate equality, searches, LinSpace -----------------------------


def _no_complex(ctx, op):
    if op.attrs["T"].is_complex:
        ctx.unsupported("ONNX runtimes have no complex tensors")


@register_onnx_export("TruncateDiv")
def truncate_div(ctx, op):
    """Integers: ONNX's integer Div already truncates toward zero (8- and 16-bit integers, which
    Div takes from opset 14, are divided in int32 below it). Floats: trunc(x / y), as ceil
    below zero and floor above."""
    _no_complex(ctx, op)
    (x, y), layout = ctx.broadcast_values(op._inputs)
    t = op.attrs["T"]
    if t.is_integer and ctx.opset < 14 and t.np.itemsize < 4:
        x, y = (ctx.node("Cast", [v], to=TensorProto.INT32) for v in (x, y))
        q = ctx.node("Div", [x, y])
        ctx.node("Cast", [q], op.outputs[0], layout=layout, to=onnx_dtype(t))
        return
    if t.is_integer:
        ctx.node("Div", [x, y], op.outputs[0], layout=layout)
        return
    q = ctx.node("Div", [x, y])
    below = ctx.node("Less", [q, ctx.initializer(np.zeros((), op.attrs["T"].np))])
    ctx.node("Where", [below, ctx.node("Ceil", [q]), ctx.node("Floor", [q])], op.outputs[0],
             layout=layout)  # fmt: skip


@register_onnx_export("TruncateMod")
def truncate_mod(ctx, op):
    """C's fmod, the remainder taking the dividend's sign: ONNX Mod with fmod=1, for integers
    as for floats (fmod=0 on integers would be the floor remainder, FloorMod's)."""
    (x, y), layout = ctx.broadcast_values(op._inputs)
    ctx.node("Mod", [x, y], op.outputs[0], layout=layout, fmod=1)


@register_onnx_export("ApproximateEqual")
def approximate_equal(ctx, op):
    """|x - y| < tolerance; integers are subtracted in float64 (no wrap-around, no unsigned
    underflow), floats in their own type against the tolerance rounded to it."""
    _no_complex(ctx, op)
    t = op.attrs["T"]
    (x, y), layout = ctx.broadcast_values(op._inputs)
    if t.is_integer:
        x, y = (ctx.node("Cast", [v], to=TensorProto.DOUBLE) for v in (x, y))
    tol = ctx.initializer(np.array(op.attrs["tolerance"], np.float64 if t.is_integer else t.np))
    d = ctx.node("Abs", [ctx.node("Sub", [x, y])])
    ctx.node("Less", [d, tol], op.outputs[0], layout=layout)


@register_onnx_export("Bucketize")
def bucketize(ctx, op):
    """The number of boundaries b with not (x < b), counted in float64 as the kernel compares;
    NaN lands past the last boundary, as TensorFlow's upper_bound puts it."""
    x = op._inputs[0]
    bounds = np.asarray(op.attrs["boundaries"], np.float64).reshape(-1)
    if bounds.size == 0:
        ctx.node("ConstantOfShape", [ctx.node("Shape", [ctx.value(x)])], op.outputs[0],
                 value=numpy_helper.from_array(np.zeros(1, np.int32)))  # fmt: skip
        return
    xd = ctx.node("Cast", [ctx.value(x)], to=TensorProto.DOUBLE)
    col = ctx.node("Unsqueeze", [xd, ctx.initializer(np.array([-1], np.int64))])
    past = ctx.node("Not", [ctx.node("Less", [col, ctx.initializer(bounds)])])
    ctx.node("ReduceSum", [ctx.node("Cast", [past], to=TensorProto.INT32),
                           ctx.initializer(np.array([-1], np.int64))], op.outputs[0],
             keepdims=0)  # fmt: skip


@register_onnx_export("LowerBound", "UpperBound")
def search_sorted(ctx, op):
    """Per row, the number of sorted_inputs elements below each value (LowerBound: s < v,
    UpperBound: not v < s), counted over a [..., M, N] comparison: O(M·N) per row."""
    s, v = op._inputs
    rows = ctx.node("Unsqueeze", [ctx.value(s), ctx.initializer(np.array([-2], np.int64))])
    cols = ctx.node("Unsqueeze", [ctx.value(v), ctx.initializer(np.array([-1], np.int64))])
    if op.type == "LowerBound":
        below = ctx.node("Less", [rows, cols])
    else:
        below = ctx.node("Not", [ctx.node("Less", [cols, rows])])
    count = ctx.node("ReduceSum", [ctx.node("Cast", [below], to=TensorProto.INT64),
                                   ctx.initializer(np.array([-1], np.int64))], keepdims=0)  # fmt: skip
    want = op.attrs["out_type"]
    if want is dtypes.int64:
        ctx.node("Identity", [count], op.outputs[0])
    else:
        ctx.node("Cast", [count], op.outputs[0], to=onnx_dtype(want))


@register_onnx_export("LinSpace")
def lin_space(ctx, op):
    """start + i·(stop - start)/(num - 1) for i in [0, num), in float64 as the kernel computes
    it, then cast to T (num = 1 gives [start])."""
    start, stop, num = op._inputs
    f64 = TensorProto.DOUBLE
    a = ctx.node("Cast", [ctx.value(start)], to=f64)
    b = ctx.node("Cast", [ctx.value(stop)], to=f64)
    n = ctx.node("Cast", [ctx.value(num)], to=f64)
    one = ctx.initializer(np.ones((), np.float64))
    steps = ctx.node("Max", [ctx.node("Sub", [n, one]), one])
    step = ctx.node("Div", [ctx.node("Sub", [b, a]), steps])
    i = ctx.node("Range", [ctx.initializer(np.zeros((), np.float64)), n, one])
    out = ctx.node("Add", [a, ctx.node("Mul", [i, step])])
    ctx.node("Cast", [out], op.outputs[0], to=onnx_dtype(op.attrs["T"]))
