"""ONNX export of manip_ops' and diag_ops' rearrangements: MatrixBandPart (a mask of Range
comparisons, bands known or not), the MatrixDiag family on the main diagonal (k = 0: an eye
mask, or a Gather of the flattened matrix for the diagonal part), Roll (Slice and Concat per
axis) and SpaceToBatchND / BatchToSpaceND (Pad, Reshape, Transpose, Reshape, Slice; TensorFlow's
element order: the block offset is the outer part of the batch).

Each rule writes what the rill kernel computes for every element type ONNX's ops take; it
refuses (naming what it needs) a MatrixDiag*V3 off the main diagonal and shapes it cannot build
without static sizes.
"""

from __future__ import annotations

import numpy as np

from rill.graph.onnx.exporter import INT64_MAX
from rill.graph.onnx.registry import register_onnx_export


def _i64(ctx, values) -> str:
    return ctx.initializer(np.asarray(values, dtype=np.int64).reshape(-1))


def _scalar64(ctx, value) -> str:
    return ctx.initializer(np.array(value, np.int64))


def _dim(ctx, name: str, t, axis: int) -> str:
    """t's size along `axis` as an int64 scalar (an initializer when it is static)."""
    dims = t.shape.dims
    if dims is not None and dims[axis] is not None:
        return _scalar64(ctx, dims[axis])
    return ctx.node("Gather", [ctx.node("Shape", [name]), _scalar64(ctx, axis)], axis=0)


def _zero(ctx, t) -> str:
    if t.dtype.name == "string":
        ctx.unsupported("string matrices have no zero to fill with")
    return ctx.initializer(np.zeros((), t.dtype.np))


def _diagonal_offsets(ctx, rows: str, cols: str) -> str:
    """[rows, cols] int64 of j - i (0 on the main diagonal)."""
    one, zero = _scalar64(ctx, 1), _scalar64(ctx, 0)
    i = ctx.node("Unsqueeze", [ctx.node("Range", [zero, rows, one]), _i64(ctx, [-1])])
    j = ctx.node("Range", [zero, cols, one])
    return ctx.node("Sub", [j, i])


def _eye(ctx, rows: str, cols: str) -> str:
    """[rows, cols] bool, true on the main diagonal."""
    return ctx.node("Equal", [_diagonal_offsets(ctx, rows, cols), _scalar64(ctx, 0)])


@register_onnx_export("MatrixBandPart")
def matrix_band_part(ctx, op):
    """Where(keep, input, 0), keep = (num_lower < 0 or i - j <= num_lower) and (num_upper < 0 or
    j - i <= num_upper) over Range indices of the last two axes; a constant negative band drops
    its test."""
    x, lower, upper = op._inputs
    if x.shape.rank is not None and x.shape.rank < 2:
        ctx.unsupported("input must be at least a matrix")
    name = ctx.value(x)
    offsets = _diagonal_offsets(ctx, _dim(ctx, name, x, -2), _dim(ctx, name, x, -1))
    tests = []
    for band, d in ((lower, ctx.node("Neg", [offsets])), (upper, offsets)):
        v = ctx.const(band)
        if v is not None and int(v) < 0:
            continue
        b = ctx.int64(band)
        test = ctx.node("LessOrEqual", [d, b])
        if v is None:
            test = ctx.node("Or", [test, ctx.node("Less", [b, _scalar64(ctx, 0)])])
        tests.append(test)
    if not tests:
        ctx.node("Identity", [name], op.outputs[0])
        return
    keep = tests[0] if len(tests) == 1 else ctx.node("And", tests)
    ctx.node("Where", [keep, name, _zero(ctx, x)], op.outputs[0])


def _main_diagonal_only(ctx, k):
    v = ctx.const(k)
    if v is None or np.any(np.asarray(v) != 0):
        ctx.unsupported("only k = 0 (the main diagonal) exports; k must be a constant 0")


@register_onnx_export("MatrixDiag", "MatrixDiagV3")
def matrix_diag(ctx, op):
    """Where(eye, diagonal[..., :, None], padding): an [n, n] matrix, padded with padding_value
    to a constant num_rows x num_cols (one of which is n on the main diagonal)."""
    d = op._inputs[0]
    name = ctx.value(d)
    if op.type == "MatrixDiag":
        pad = _zero(ctx, d)
    else:
        _, k, num_rows, num_cols, padding = op._inputs
        _main_diagonal_only(ctx, k)
        pad = ctx.value(padding)
    n = _dim(ctx, name, d, -1)
    column = ctx.node("Unsqueeze", [name, _i64(ctx, [-1])])
    if op.type == "MatrixDiag":
        ctx.node("Where", [_eye(ctx, n, n), column, pad], op.outputs[0])
        return
    rows, cols = ctx.const(num_rows), ctx.const(num_cols)
    if rows is None or cols is None:
        ctx.unsupported("num_rows and num_cols must be known at export time")
    rows, cols = int(rows), int(cols)
    if rows == -1 and cols == -1:
        ctx.node("Where", [_eye(ctx, n, n), column, pad], op.outputs[0])
        return
    length = d.shape.dims[-1] if d.shape.dims is not None else None
    rank = d.shape.rank
    if length is None:
        ctx.unsupported("an explicit num_rows or num_cols needs the diagonal's length known")
    rows = length if rows == -1 else rows
    cols = length if cols == -1 else cols
    square = ctx.node("Where", [_eye(ctx, n, n), column, pad])
    pads = [0] * (2 * (rank + 1))
    pads[(rank + 1) + rank - 1] = rows - length
    pads[(rank + 1) + rank] = cols - length
    ctx.node("Pad", [square, _i64(ctx, pads), pad], op.outputs[0], mode="constant")


def _flat_matrices(ctx, name: str, t) -> str:
    """t [..., m, n] reshaped to [..., m·n]."""
    dims = t.shape.dims
    if dims is not None and None not in dims[:-2]:
        lead = _i64(ctx, [0 if d == 0 else d for d in dims[:-2]])
    else:
        shape = ctx.node("Shape", [name])
        lead = ctx.node("Slice", [shape, _i64(ctx, [0]), _i64(ctx, [-2]), _i64(ctx, [0])])
    m, n = _dim(ctx, name, t, -2), _dim(ctx, name, t, -1)
    mn = ctx.node("Reshape", [ctx.node("Mul", [m, n]), _i64(ctx, [1])])
    return ctx.node("Reshape", [name, ctx.node("Concat", [lead, mn], axis=0)])


@register_onnx_export("MatrixDiagPart", "MatrixDiagPartV3")
def matrix_diag_part(ctx, op):
    """input[..., i, i] for i < min(m, n): a Gather of the flattened matrices at i·(n + 1),
    exact for every type (padding_value never shows on the main diagonal)."""
    x = op._inputs[0]
    if op.type == "MatrixDiagPartV3":
        _main_diagonal_only(ctx, op._inputs[1])
    if x.shape.rank is None:
        ctx.unsupported("input needs a known rank")
    name = ctx.value(x)
    m, n = _dim(ctx, name, x, -2), _dim(ctx, name, x, -1)
    i = ctx.node("Range", [_scalar64(ctx, 0), ctx.node("Min", [m, n]), _scalar64(ctx, 1)])
    at = ctx.node("Mul", [i, ctx.node("Add", [n, _scalar64(ctx, 1)])])
    ctx.node("Gather", [_flat_matrices(ctx, name, x), at], op.outputs[0], axis=-1)


@register_onnx_export("MatrixSetDiag", "MatrixSetDiagV3")
def matrix_set_diag(ctx, op):
    """Where(eye, diagonal as a row (n <= m) or a column (m < n), input): needs the last two
    dimensions known, which pick the orientation."""
    x, d = op._inputs[:2]
    if op.type == "MatrixSetDiagV3":
        _main_diagonal_only(ctx, op._inputs[2])
    dims = x.shape.dims
    if dims is None or len(dims) < 2 or dims[-1] is None or dims[-2] is None:
        ctx.unsupported("input needs its last two dimensions known")
    m, n = dims[-2:]
    dval = ctx.node("Unsqueeze", [ctx.value(d), _i64(ctx, [-2 if n <= m else -1])])
    eye = _eye(ctx, _scalar64(ctx, m), _scalar64(ctx, n))
    ctx.node("Where", [eye, dval, ctx.value(x)], op.outputs[0])


@register_onnx_export("Roll")
def roll(ctx, op):
    """Per axis (shifts on one axis add up), Concat(x[d - s:], x[:d - s]) with s = shift mod d,
    computed at run time where d is not static."""
    x, shift_t, axis_t = op._inputs
    shift, axis = ctx.const(shift_t), ctx.const(axis_t)
    if shift is None or axis is None:
        ctx.unsupported("shift and axis must be known at export time")
    rank = x.shape.rank
    if rank is None:
        ctx.unsupported("input needs a known rank")
    total: dict[int, int] = {}
    for s, a in zip(np.atleast_1d(shift).tolist(), np.atleast_1d(axis).tolist()):
        total[int(a) % rank] = total.get(int(a) % rank, 0) + int(s)
    name = ctx.value(x)
    dims = x.shape.dims
    for a, s in sorted(total.items()):
        if dims[a] is not None:
            if dims[a] == 0 or s % dims[a] == 0:
                continue
            split = _i64(ctx, [dims[a] - s % dims[a]])
        else:
            d = _dim(ctx, name, x, a)
            split = ctx.node("Sub", [d, ctx.node("Mod", [_scalar64(ctx, s), d])])
            split = ctx.node("Reshape", [split, _i64(ctx, [1])])
        ax = _i64(ctx, [a])
        tail = ctx.node("Slice", [name, split, _i64(ctx, [INT64_MAX]), ax])
        head = ctx.node("Slice", [name, _i64(ctx, [0]), split, ax])
        name = ctx.node("Concat", [tail, head], axis=a)
    ctx.node("Identity", [name], op.outputs[0])


def _blocks(ctx, op, what: str):
    x, block_t, pads_t = op._inputs
    block, pads = ctx.const(block_t), ctx.const(pads_t)
    if block is None or pads is None:
        ctx.unsupported(f"block_shape and {what} must be known at export time")
    block = [int(b) for b in np.asarray(block).reshape(-1)]
    pads = np.asarray(pads, np.int64).reshape(len(block), 2)
    dims = x.shape.dims
    if dims is None or None in dims[1:] or 0 in dims[1:]:
        ctx.unsupported("input needs every dimension but the batch known (and non-zero)")
    return x, block, pads, list(dims)


@register_onnx_export("SpaceToBatchND")
def space_to_batch_nd(ctx, op):
    """Pad, split each padded spatial axis into (size / block, block), move the block axes in
    front of the batch, and merge them into it: batch index = block offset·n + b."""
    x, block, pads, dims = _blocks(ctx, op, "paddings")
    m = len(block)
    name = ctx.value(x)
    if pads.any():
        width = np.zeros((2, len(dims)), np.int64)
        width[:, 1 : m + 1] = pads.T
        name = ctx.node("Pad", [name, _i64(ctx, width.reshape(-1))], mode="constant")
    padded = [dims[1 + i] + int(pads[i].sum()) for i in range(m)]
    if any(p % b for p, b in zip(padded, block)):
        ctx.unsupported(f"padded spatial sizes {padded} are not multiples of block {block}")
    rest = dims[m + 1 :]
    split = [0]
    for p, b in zip(padded, block):
        split += [p // b, b]
    y = ctx.node("Reshape", [name, _i64(ctx, split + rest)])
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = ctx.node("Transpose", [y], perm=perm)
    out = [-1] + [p // b for p, b in zip(padded, block)] + rest
    ctx.node("Reshape", [y, _i64(ctx, out)], op.outputs[0])


@register_onnx_export("BatchToSpaceND")
def batch_to_space_nd(ctx, op):
    """SpaceToBatchND's inverse: split the batch into (block..., n), interleave each block
    axis after its spatial axis, merge, and crop."""
    x, block, crops, dims = _blocks(ctx, op, "crops")
    m = len(block)
    spatial, rest = dims[1 : m + 1], dims[m + 1 :]
    y = ctx.node("Reshape", [ctx.value(x), _i64(ctx, block + [-1] + spatial + rest)])
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    y = ctx.node("Transpose", [y], perm=perm)
    full = [s * b for s, b in zip(spatial, block)]
    y = ctx.node("Reshape", [y, _i64(ctx, [-1] + full + rest)])
    if not crops.any():
        ctx.node("Identity", [y], op.outputs[0])
        return
    starts = [int(c[0]) for c in crops]
    ends = [f - int(c[1]) for f, c in zip(full, crops)]
    ctx.node("Slice", [y, _i64(ctx, starts), _i64(ctx, ends), _i64(ctx, range(1, m + 1))],
             op.outputs[0])  # fmt: skip
