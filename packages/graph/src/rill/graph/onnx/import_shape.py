"""ONNX import rules: shapes and data movement.

ONNX passes shapes, axes, pads and slice bounds as tensors. When they are constants of the model
(the usual case) the rules compute static attributes and shapes; when they arrive at run time
(as in onnx's node tests) the rules build the same computation from shape ops.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_linalg import _dim, _shape_tensor
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, with_rank
from rill.graph.onnx.import_util import as_i64 as _as_i64
from rill.graph.onnx.import_util import i64 as _i64

_BIG = np.iinfo(np.int64).max


def _rank(x, what: str) -> int:
    r = x.shape.rank
    if r is None:
        raise OnnxImportError(f"{what} needs an input of known rank")
    return r


def _shape64(x):
    return op("Shape", [x], {"out_type": dtypes.int64})


def _scatter_vector(indices, values, size, default: int):
    """A [size] int64 vector: `values` at `indices` (a 1-D tensor), `default` elsewhere.

    `size` is an int, or a [1] int64 tensor."""
    idx = op("Reshape", [_as_i64(indices), _i64([-1, 1])])
    vals = _as_i64(values)
    shape = _i64([size]) if isinstance(size, int) else size
    placed = op("ScatterNd", [idx, vals, shape])
    hit = op("ScatterNd", [idx, op("OnesLike", [vals]), shape])
    return op("SelectV2", [op("Greater", [hit, _i64(0)]), placed, _i64(default)])


def _norm_axes_tensor(axes, rank):
    """Negative axes made non-negative (tensor form)."""
    a = _as_i64(axes)
    return op("SelectV2", [op("Less", [a, _i64(0)]), op("AddV2", [a, rank]), a])


@register_onnx_import("Identity")
def identity(n, x):
    return op("Identity", [x])


@register_onnx_import("Shape")
def shape(n, x, *, start=0, end=None):
    s = _shape64(x)
    if start == 0 and end is None:
        return s
    attrs = {"begin_mask": 0, "end_mask": 1 if end is None else 0}
    return op("StridedSlice", [s, _i64([start]), _i64([end or 0]), _i64([1])], attrs)


@register_onnx_import("Size")
def size(n, x):
    return op("Size", [x], {"out_type": dtypes.int64})


@register_onnx_import("Reshape")
def reshape(n, x, shape, *, allowzero=0):
    """A 0 in `shape` copies the input's dimension (unless allowzero); -1 is inferred."""
    v = n.static(shape)
    if v is not None:
        v = [int(d) for d in np.asarray(v).reshape(-1)]
        if not allowzero and 0 in v:
            for i, d in enumerate(v):
                if d == 0:
                    known = x.shape[i] if x.shape.rank is not None and i < x.shape.rank else None
                    if known is None:
                        break
                    v[i] = known
            else:
                return op("Reshape", [x, _i64(v)])
        else:
            return op("Reshape", [x, _i64(v)])
    if allowzero:
        return op("Reshape", [x, _as_i64(shape)])
    s = _as_i64(op("Reshape", [shape, _i64([-1])]))
    k = s.shape[0]
    # Input dimensions under the zeros of `shape`: the input's shape padded or cut to its length.
    src = op("ConcatV2", [[_shape64(x), op("ZerosLike", [s])], const(0, dtypes.int32)])
    length = _i64([k]) if k is not None else op("Shape", [s], {"out_type": dtypes.int64})
    src = op("StridedSlice", [src, _i64([0]), length, _i64([1])])
    y = op("Reshape", [x, op("SelectV2", [op("Equal", [s, _i64(0)]), src, s])])
    return with_rank(y, k)


@register_onnx_import("Flatten")
def flatten(n, x, *, axis=1):
    r = _rank(x, "Flatten")
    a = axis % r if axis < 0 else axis
    dims = [_dim(x, i) for i in range(r)]
    outer = _prod_dims(dims[:a])
    inner = _prod_dims(dims[a:])
    # One side known lets -1 stand for the other; only both unknown needs shape arithmetic.
    if isinstance(inner, int) and not isinstance(outer, int) and inner > 0:
        outer = -1
    elif isinstance(outer, int) and not isinstance(inner, int) and outer > 0:
        inner = -1
    return op("Reshape", [x, _shape_tensor([outer, inner])])


def _prod_dims(dims):
    acc = 1
    for d in dims:
        if isinstance(acc, int) and isinstance(d, int):
            acc *= d
        else:
            acc = op("Mul", [_i64(acc) if isinstance(acc, int) else acc,
                             _i64(d) if isinstance(d, int) else d])  # fmt: skip
    return acc


@register_onnx_import("Squeeze")
def squeeze(n, x, axes=None):
    if axes is None:
        return op("Squeeze", [x], {"squeeze_dims": []})
    v = n.static(axes)
    if v is not None:
        return op("Squeeze", [x], {"squeeze_dims": [int(a) for a in np.asarray(v).reshape(-1)]})
    r = _rank(x, "Squeeze with run-time axes")
    keep = op("Equal", [_scatter_vector(_norm_axes_tensor(axes, _i64(r)),
                                        op("OnesLike", [_as_i64(axes)]), r, 0), _i64(0)])  # fmt: skip
    kept = op("Reshape", [op("Where", [keep]), _i64([-1])])
    y = op("Reshape", [x, op("GatherV2", [_shape64(x), kept, const(0, dtypes.int32)])])
    k = axes.shape[0] if axes.shape.rank == 1 else None
    return with_rank(y, None if k is None else r - k)


@register_onnx_import("Unsqueeze")
def unsqueeze(n, x, axes):
    v = n.static(axes)
    r = x.shape.rank
    if v is not None and r is not None:
        out = r + v.size
        y = x
        for a in sorted(int(a) % out for a in np.asarray(v).reshape(-1)):
            y = op("ExpandDims", [y, const(a, dtypes.int32)])
        return y if y is not x else op("Identity", [x])
    # Run-time axes or rank: mark the inserted positions of the output shape; the k-th other
    # position takes input dimension k.
    if axes.shape.rank != 1:
        axes = op("Reshape", [axes, _i64([-1])])
    k = axes.shape[0]
    rank = _i64(r) if r is not None else op("Cast", [op("Rank", [x])], {"DstT": dtypes.int64})
    n_axes = _i64(k) if k is not None else op("Size", [axes], {"out_type": dtypes.int64})
    out = op("AddV2", [rank, n_axes])
    size = r + k if r is not None and k is not None else op("Reshape", [out, _i64([1])])
    ones = op("OnesLike", [_as_i64(axes)])
    inserted = _scatter_vector(_norm_axes_tensor(axes, out), ones, size, 0)
    src = op("Sub", [op("Cumsum", [op("Sub", [_i64(1), inserted]), const(0, dtypes.int32)]),
                     _i64(1)])  # fmt: skip
    top = op("Maximum", [op("Sub", [rank, _i64(1)]), _i64(0)])
    src = op("Maximum", [op("Minimum", [src, top]), _i64(0)])
    dims = op("ConcatV2", [[_shape64(x), _i64([1])], const(0, dtypes.int32)])
    picked = op("GatherV2", [dims, src, const(0, dtypes.int32)])
    y = op("Reshape", [x, op("SelectV2", [op("Greater", [inserted, _i64(0)]), _i64(1),
                                          picked])])  # fmt: skip
    return with_rank(y, size if isinstance(size, int) else None)


@register_onnx_import("Concat")
def concat(n, *xs, axis):
    if len(xs) == 1:  # TorchScript's export of torch.cat of one tensor
        if xs[0].shape.rank is not None and not -xs[0].shape.rank <= axis < xs[0].shape.rank:
            raise OnnxImportError(f"Concat axis {axis} is out of range for rank "
                                  f"{xs[0].shape.rank}")  # fmt: skip
        return op("Identity", [xs[0]])
    return op("ConcatV2", [list(xs), const(axis, dtypes.int64)])


@register_onnx_import("Split")
def split(n, x, split=None, *, axis=0, num_outputs=None):
    k = n.num_outputs
    ax = const(axis, dtypes.int32)
    if split is None:
        d = x.shape[axis] if x.shape.rank is not None else None
        if num_outputs is not None and d is not None and d % k:
            # opset 18: uneven splits give ceil(d / k) to every piece but the last.
            size = -(-d // k)
            sizes = [size] * (k - 1) + [d - size * (k - 1)]
            return op("SplitV", [x, _i64(sizes), ax], {"num_split": k})
        res = op("Split", [ax, x], {"num_split": k})
        return [res] if k == 1 else res
    v = n.static(split)
    sizes = _i64([int(s) for s in v]) if v is not None else _as_i64(split)
    res = op("SplitV", [x, sizes, ax], {"num_split": k})
    return [res] if k == 1 else res


@register_onnx_import("Slice")
def slice_(n, x, starts, ends, axes=None, steps=None):
    """ONNX's bounds clamp as Python slices do, which is StridedSlice's rule too."""
    r = x.shape.rank
    # tf2onnx's CropAndResize loop slices with the scalar loop counter as starts (onnxruntime
    # takes a scalar for a one-element list)
    starts, ends, axes, steps = (t if t is None or t.shape.rank != 0
                                 else op("Reshape", [t, _i64([1])])
                                 for t in (starts, ends, axes, steps))  # fmt: skip
    if axes is not None:
        va = n.static(axes)
    elif starts.shape.rank == 1 and starts.shape[0] is not None:
        va = np.arange(starts.shape[0])
    else:
        va = None
    if va is not None:
        va = np.asarray(va, np.int64).reshape(-1)
        if r is not None:
            va = va % r
        elif (va < 0).any():
            raise OnnxImportError("Slice with negative axes needs an input of known rank")
        length = r if r is not None else int(va.max(initial=-1)) + 1
        # Axes not sliced are masked: StridedSlice then takes them whole.
        mask = (1 << length) - 1
        for a in va:
            mask &= ~(1 << int(a))
        vs, ve = n.static(starts), n.static(ends)
        vst = n.static(steps) if steps is not None else np.ones(len(va), np.int64)
        if vs is not None and ve is not None and vst is not None:
            begin, end, stride = [0] * length, [0] * length, [1] * length
            for a, b, e, st in zip(va, vs.reshape(-1), ve.reshape(-1), vst.reshape(-1)):
                begin[a], end[a], stride[a] = int(b), int(e), int(st)
            vecs = [_i64(begin), _i64(end), _i64(stride)]
        else:
            st = steps if steps is not None else _i64(vst)
            vecs = [_scatter_vector(_i64(va), t, length, 1) for t in (starts, ends, st)]
        y = op("StridedSlice", [x, *vecs], {"begin_mask": mask, "end_mask": mask})
        return with_rank(y, r)
    r = _rank(x, "Slice with run-time axes")
    if axes is None:  # starts of a length known only at run time: the leading axes
        axes = op("Range", [_i64(0), op("Size", [starts], {"out_type": dtypes.int64}), _i64(1)])
    ax = _norm_axes_tensor(axes, _i64(r))
    st = steps if steps is not None else op("OnesLike", [_as_i64(starts)])
    begin = _scatter_vector(ax, starts, r, 0)
    end = _scatter_vector(ax, ends, r, _BIG)
    stride = _scatter_vector(ax, st, r, 1)
    return with_rank(op("StridedSlice", [x, begin, end, stride]), r)


@register_onnx_import("Transpose")
def transpose(n, x, *, perm=None):
    if perm is None:
        r = _rank(x, "Transpose without perm")
        perm = list(range(r))[::-1]
    return op("Transpose", [x, const([int(p) for p in perm], dtypes.int32)])


@register_onnx_import("Tile")
def tile(n, x, repeats):
    return op("Tile", [x, repeats])


@register_onnx_import("Expand")
def expand(n, x, shape):
    """Bidirectional broadcasting: the result's shape is broadcast(x.shape, shape). Where x's
    rank or the shape's length is known only at run time (a Scan body's untyped state), the
    result's shape is BroadcastArgs of the two."""
    v = n.static(shape)
    if v is not None and x.shape.is_fully_defined():
        out = np.broadcast_shapes(tuple(x.shape.as_list()), tuple(int(d) for d in v))
        return op("BroadcastTo", [x, _i64(list(out))])
    if shape.shape.rank is not None and shape.shape.rank != 1:
        raise OnnxImportError(f"Expand needs a 1-D shape input, got rank {shape.shape.rank}")
    r = x.shape.rank
    if r is None or shape.shape[0] is None:
        out = op("BroadcastArgs", [_shape64(x), _as_i64(shape)])
        return op("BroadcastTo", [x, out])
    k = shape.shape[0]
    m = max(r, k)
    xs = _shape64(x)
    if r < m:
        xs = op("ConcatV2", [[_i64([1] * (m - r)), xs], const(0, dtypes.int32)])
    s = _as_i64(shape)
    if k < m:
        s = op("ConcatV2", [[_i64([1] * (m - k)), s], const(0, dtypes.int32)])
    out = op("SelectV2", [op("Equal", [s, _i64(1)]), xs, s])
    return with_rank(op("BroadcastTo", [x, out]), m)


def _gather_pad(x, pads, mode: str, r: int):
    """edge/wrap padding as a gather of clamped/wrapped indices along each padded axis.

    `pads` is an [r, 2] array, or a (begin, end) pair of [r] tensors known at run time."""
    y = x
    for a in range(r):
        d = _dim(x, a)
        if isinstance(pads, np.ndarray) and isinstance(d, int):
            b, e = int(pads[a][0]), int(pads[a][1])
            if not b and not e:
                continue
            idx = np.arange(-b, d + e)
            idx = _i64(np.clip(idx, 0, d - 1) if mode == "edge" else np.mod(idx, d))
        else:
            if isinstance(pads, np.ndarray):
                b, e = _i64(int(pads[a][0])), _i64(int(pads[a][1]))
            else:
                b, e = (op("GatherV2", [v, _i64(a), const(0, dtypes.int32)]) for v in pads)
            dt = _i64(d) if isinstance(d, int) else d
            idx = op("Range", [op("Neg", [b]), op("AddV2", [dt, e]), _i64(1)])
            if mode == "edge":
                idx = op("Maximum", [op("Minimum", [idx, op("Sub", [dt, _i64(1)])]), _i64(0)])
            else:
                idx = op("FloorMod", [idx, dt])
        y = op("GatherV2", [y, idx, const(a, dtypes.int32)])
    return with_rank(y, r)


@register_onnx_import("Pad")
def pad(n, x, pads, constant_value=None, axes=None, *, mode="constant", value=None):
    # onnx's version converter moves an opset-2 Pad's `value` into constant_value only for
    # constant pads, and leaves it on edge and reflect pads, where it means nothing.
    r = _rank(x, "Pad")
    vp = n.static(pads)
    va = n.static(axes) if axes is not None else np.arange(r)
    if vp is not None and va is not None:
        vp = np.asarray(vp, np.int64).reshape(-1)
        k = len(va)
        pairs = np.zeros((r, 2), np.int64)
        for i, a in enumerate(np.asarray(va).reshape(-1)):
            pairs[int(a) % r] = (vp[i], vp[i + k])
        if (pairs < 0).any():
            # Negative pads crop: pad the positive parts, then slice the negative ones off.
            crop = np.minimum(pairs, 0)
            x = pad(n, x, _i64(np.maximum(pairs, 0).T.reshape(-1)), constant_value, None,
                    mode=mode)  # fmt: skip
            begin = -crop[:, 0]
            end = np.where(crop[:, 1] < 0, crop[:, 1], 0)
            emask = sum(1 << i for i in range(r) if crop[i, 1] == 0)
            return op("StridedSlice", [x, _i64(begin), _i64(end), _i64([1] * r)],
                      {"end_mask": emask})  # fmt: skip
        paddings = _i64(pairs)
    else:
        p = op("Reshape", [_as_i64(pads), _i64([2, -1])])
        begin = op("GatherV2", [p, _i64(0), const(0, dtypes.int32)])
        end = op("GatherV2", [p, _i64(1), const(0, dtypes.int32)])
        if axes is not None:
            ax = _norm_axes_tensor(axes, _i64(r))
            begin = _scatter_vector(ax, begin, r, 0)
            end = _scatter_vector(ax, end, r, 0)
        paddings = op("Pack", [[begin, end]], {"axis": 1})
        pairs = (begin, end)
    if mode == "constant":
        if constant_value is None:
            return op("Pad", [x, paddings])
        cv = op("Reshape", [constant_value, const([], dtypes.int32)])
        return op("PadV2", [x, paddings, cv])
    if mode == "reflect":
        return op("MirrorPad", [x, paddings], {"mode": "REFLECT"})
    if mode in ("edge", "wrap"):
        return _gather_pad(x, pairs, mode, r)
    raise OnnxImportError(f"unknown Pad mode {mode!r}")


@register_onnx_import("DepthToSpace")
def depth_to_space(n, x, *, blocksize, mode="DCR"):
    b = int(blocksize)
    nb, c, h, w = (_dim(x, i) for i in range(4))
    if not all(isinstance(d, int) for d in (c, h, w)):
        raise OnnxImportError("DepthToSpace needs statically known C, H and W")
    nb = -1
    if mode == "DCR":
        t = op("Reshape", [x, _i64([nb, b, b, c // (b * b), h, w])])
        t = op("Transpose", [t, const([0, 3, 4, 1, 5, 2], dtypes.int32)])
    else:
        t = op("Reshape", [x, _i64([nb, c // (b * b), b, b, h, w])])
        t = op("Transpose", [t, const([0, 1, 4, 2, 5, 3], dtypes.int32)])
    return op("Reshape", [t, _i64([nb, c // (b * b), h * b, w * b])])


@register_onnx_import("SpaceToDepth")
def space_to_depth(n, x, *, blocksize, mode="DCR"):
    b = int(blocksize)
    _, c, h, w = (_dim(x, i) for i in range(4))
    if not all(isinstance(d, int) for d in (c, h, w)):
        raise OnnxImportError("SpaceToDepth needs statically known C, H and W")
    t = op("Reshape", [x, _i64([-1, c, h // b, b, w // b, b])])
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    t = op("Transpose", [t, const(perm, dtypes.int32)])
    return op("Reshape", [t, _i64([-1, c * b * b, h // b, w // b])])
