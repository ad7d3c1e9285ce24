"""ONNX import rules: Conv and pooling, in ONNX's own NCHW layout.

Convolutions become Conv2D / DepthwiseConv2dNative with data_format="NCHW", so activations are
never transposed; only the filter is (OIHW → HWIO), folded into the constant when it is one.
1-D convolutions and pools run as 2-D ones over a unit height; a 3-D convolution is the sum over
its depth taps of 2-D ones over the input's depth slices. Pooling maps to MaxPool / AvgPool
where TensorFlow's padding rules agree with ONNX's; otherwise (3-D, dilations, ceil_mode past
the input, counts that include or exclude padding in ways TF's AvgPool does not) it is built
from strided slices of the padded input, one per kernel tap, reduced together.
"""

from __future__ import annotations

import itertools

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op


def _ints(v, n: int, default: int) -> list[int]:
    return [default] * n if not v else [int(a) for a in v]


def _rank(x, what: str) -> int:
    r = x.shape.rank
    if r is None or r < 3:
        raise OnnxImportError(f"{what} needs an input of known rank >= 3, got shape {x.shape}")
    return r


def _static_spatial(x, what: str) -> list[int]:
    dims = x.shape.as_list()[2:]
    if any(d is None for d in dims):
        raise OnnxImportError(
            f"{what} needs the spatial dimensions of its input statically known, got {x.shape}"
        )
    return dims


class _Geometry:
    """Per spatial dimension: kernel, stride, dilation, ONNX pads, output size, ceil extension.

    With unknown input sizes (`in_sizes` None) only what does not depend on them is known:
    explicit or VALID pads (begin/end), no ceil extension; SAME pads and output sizes are None.
    """

    def __init__(self, in_sizes, kernel, strides, dilations, pads, auto_pad, ceil_mode):
        nd = len(kernel)
        self.kernel, self.strides, self.dilations = kernel, strides, dilations
        self.in_sizes, self.auto_pad = in_sizes, auto_pad
        eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", ""):
            raise OnnxImportError(f"unknown auto_pad {auto_pad!r}")
        self.begin = self.end = self.out = None
        self.extra = [0] * nd
        if auto_pad == "VALID":
            self.begin, self.end = [0] * nd, [0] * nd
        elif auto_pad in ("NOTSET", ""):
            p = _ints(pads, 2 * nd, 0)
            self.begin, self.end = p[:nd], p[nd:]
        if in_sizes is None:
            if ceil_mode:
                raise OnnxImportError("ceil_mode needs the input's spatial sizes statically known")
            return
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = [-(-i // s) for i, s in zip(in_sizes, strides)]
            total = [max(0, (o - 1) * s + e - i) for o, s, e, i in zip(out, strides, eff, in_sizes)]
            small = [t // 2 for t in total]
            big = [t - t // 2 for t in total]
            self.begin, self.end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        elif auto_pad == "VALID":
            out = [(i - e) // s + 1 for i, e, s in zip(in_sizes, eff, strides)]
        else:
            out = []
            for i, b, e, k, s in zip(in_sizes, self.begin, self.end, eff, strides):
                span = i + b + e - k
                o = (-(-span // s) if ceil_mode else span // s) + 1
                if ceil_mode and (o - 1) * s >= i + b:
                    o -= 1  # a last window starting in the end padding is dropped
                out.append(o)
        if any(o <= 0 for o in out):
            raise OnnxImportError(f"the window does not fit: output sizes would be {out}")
        self.out = out
        required = [(o - 1) * s + e for o, s, e in zip(out, strides, eff)]
        self.extra = [
            max(0, r - (i + b + e)) for r, i, b, e in zip(required, in_sizes, self.begin, self.end)
        ]

    def tf_same(self) -> bool:
        """Whether the padding is the one TensorFlow's SAME would choose."""
        if self.auto_pad == "SAME_UPPER":
            return True
        if self.in_sizes is None or self.begin is None:
            return False
        for i, k, s, d, b, e in zip(self.in_sizes, self.kernel, self.strides, self.dilations,
                                    self.begin, self.end):  # fmt: skip
            o = -(-i // s)
            total = max(0, (o - 1) * s + (k - 1) * d + 1 - i)
            if (b, e) != (total // 2, total - total // 2):
                return False
        return True

    def static(self, what: str) -> None:
        """Refuses the slice-based pooling when the geometry is not fully known."""
        if self.out is None:
            raise OnnxImportError(
                f"{what} needs the spatial dimensions of its input statically known for this "
                f"window (auto_pad={self.auto_pad}, dilations {self.dilations})"
            )


def _expand_1d(x):
    return op("ExpandDims", [x, const(2, dtypes.int32)])


def _squeeze_1d(y):
    return op("Squeeze", [y], {"squeeze_dims": [2]})


def _filter_hwio(w, group: int, in_channels: int | None):
    """ONNX's [M, C/group, kh, kw] filter as Conv2D's HWIO, or depthwise's [kh, kw, C, M/C]."""
    depthwise = group > 1 and in_channels == group
    wv = None if w.op.type != "Const" else np.asarray(w.op.attrs["value"])
    if depthwise:
        if wv is not None:
            m = wv.shape[0]
            v = wv.reshape(group, m // group, *wv.shape[2:]).transpose(2, 3, 0, 1)
            return const(np.ascontiguousarray(v)), True
        shp = op("Shape", [w], {"out_type": dtypes.int32})
        kh_kw = op("StridedSlice", [shp, const([2], dtypes.int32), const([4], dtypes.int32),
                                     const([1], dtypes.int32)])  # fmt: skip
        new = op("ConcatV2", [[const([group, -1], dtypes.int32), kh_kw], const(0, dtypes.int32)])
        w4 = op("Reshape", [w, new])
        return op("Transpose", [w4, const([2, 3, 0, 1], dtypes.int32)]), True
    if wv is not None:
        return const(np.ascontiguousarray(wv.transpose(2, 3, 1, 0))), False
    return op("Transpose", [w, const([2, 3, 1, 0], dtypes.int32)]), False


@register_onnx_import("Conv")
def conv(n, x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None):  # fmt: skip
    r = _rank(x, "Conv")
    nd = r - 2
    if nd not in (1, 2, 3):
        raise OnnxImportError(
            f"rill imports 1-D to 3-D convolutions; this Conv is {nd}-D (input {x.shape})"
        )
    if kernel_shape is None:
        ks = w.shape.as_list()[2:]
        if any(k is None for k in ks):
            raise OnnxImportError("Conv needs kernel_shape or a filter of known shape")
        kernel_shape = ks
    kernel = [int(k) for k in kernel_shape]
    strides = _ints(strides, nd, 1)
    dilations = _ints(dilations, nd, 1)
    if nd == 3:
        return _conv3d(n, x, w, b, auto_pad, dilations, int(group), kernel, pads, strides)
    if auto_pad == "SAME_LOWER":
        geo = _Geometry(_static_spatial(x, "Conv with SAME_LOWER"), kernel, strides, dilations,
                        None, auto_pad, 0)  # fmt: skip
        pads = geo.begin + geo.end
        auto_pad = "NOTSET"
    p = _ints(pads, 2 * nd, 0)
    if nd == 1:
        x, w = _expand_1d(x), _expand_1d(w)
        strides, dilations, p = [1, *strides], [1, *dilations], [0, p[0], 0, p[1]]
    attrs = {"strides": [1, 1, *strides], "dilations": [1, 1, *dilations],
             "data_format": "NCHW"}  # fmt: skip
    if auto_pad == "SAME_UPPER":
        attrs["padding"] = "SAME"
    elif auto_pad == "VALID" or not any(p):
        attrs["padding"] = "VALID"
    else:
        attrs["padding"] = "EXPLICIT"
        attrs["explicit_paddings"] = [0, 0, 0, 0, p[0], p[2], p[1], p[3]]
    c_in = x.shape[1]
    if c_in is None and w.shape.rank == 4 and w.shape[1] is not None:
        c_in = w.shape[1] * group
    filt, depthwise = _filter_hwio(w, int(group), c_in)
    if depthwise:
        y = op("DepthwiseConv2dNative", [x, filt], attrs)
    else:
        y = op("Conv2D", [x, filt], attrs)
    if b is not None:
        y = op("BiasAdd", [y, b], {"data_format": "NCHW"})
    return _squeeze_1d(y) if nd == 1 else y


def _conv3d(n, x, w, b, auto_pad, dilations, group, kernel, pads, strides):
    """A 3-D Conv as the sum over its depth taps kd of 2-D convolutions (this rule's, so
    grouped and depthwise ones too) of the input's depth slices kd·dilation + stride·od, all
    output depths od at once as a batch of N·D_out images."""
    sizes = _static_spatial(x, "a 3-D Conv")
    geo = _Geometry(sizes, kernel, strides, dilations, pads, auto_pad or "NOTSET", 0)
    (d_b, h_b, w_b), (d_e, h_e, w_e) = geo.begin, geo.end
    od = geo.out[0]
    if od <= 0 or any(o <= 0 for o in geo.out):
        raise OnnxImportError(f"Conv: the output size {geo.out} of the input {x.shape} is empty")
    c = x.shape[1] if x.shape[1] is not None else w.shape[1] * group
    if c is None:
        raise OnnxImportError("a 3-D Conv needs the input's channels or the filter's known")
    xt = op("Transpose", [x, const([0, 2, 1, 3, 4], dtypes.int32)])  # [N, D, C, H, W]
    if d_b or d_e:
        xt = op("Pad", [xt, const([[0, 0], [d_b, d_e], [0, 0], [0, 0], [0, 0]], dtypes.int32)])
    wv = None if w.op.type != "Const" else np.asarray(w.op.attrs["value"])
    total = None
    for kd in range(kernel[0]):
        start = kd * dilations[0]
        taps = op("StridedSlice", [xt, const([0, start, 0, 0, 0], dtypes.int32),
                                   const([0, start + (od - 1) * strides[0] + 1, 0, 0, 0],
                                         dtypes.int32),
                                   const([1, strides[0], 1, 1, 1], dtypes.int32)],
                  {"begin_mask": 0b11101, "end_mask": 0b11101})  # fmt: skip
        x4 = op("Reshape", [taps, const([-1, c, sizes[1], sizes[2]], dtypes.int32)])
        if wv is not None:
            w4 = const(np.ascontiguousarray(wv[:, :, kd]))
        else:
            w4 = op("GatherV2", [w, const(kd, dtypes.int32), const(2, dtypes.int32)])
        y4 = conv(n, x4, w4, None, dilations=dilations[1:], group=group,
                  kernel_shape=kernel[1:], pads=[h_b, w_b, h_e, w_e], strides=strides[1:])  # fmt: skip
        total = y4 if total is None else op("AddV2", [total, y4])
    m = w.shape[0] if w.shape[0] is not None else -1
    y5 = op("Reshape", [total, const([-1, od, m, geo.out[1], geo.out[2]], dtypes.int32)])
    y = op("Transpose", [y5, const([0, 2, 1, 3, 4], dtypes.int32)])
    if b is not None:
        y = op("AddV2", [y, op("Reshape", [b, const([1, -1, 1, 1, 1], dtypes.int32)])])
    return y


# -- pooling ---------------------------------------------------------------------------------------


def _lowest(dt: dtypes.DType):
    if dt.is_floating:
        return -np.inf
    return np.iinfo(dt.np).min


def _window_stack(x, geo: _Geometry, pad_value):
    """[K, N, C, out...]: the input under each of the K kernel taps, padded with pad_value."""
    nd = len(geo.kernel)
    pads = np.zeros((nd + 2, 2), np.int64)
    for i in range(nd):
        pads[i + 2] = (geo.begin[i], geo.end[i] + geo.extra[i])
    xp = x
    if pads.any():
        xp = op("PadV2", [x, const(pads, dtypes.int64), const(pad_value, x.dtype)])
    taps = []
    for offsets in itertools.product(*[range(k) for k in geo.kernel]):
        begin = [0, 0] + [o * d for o, d in zip(offsets, geo.dilations)]
        end = [0, 0] + [o * d + (m - 1) * s + 1
                        for o, d, m, s in zip(offsets, geo.dilations, geo.out, geo.strides)]  # fmt: skip
        taps.append(op("StridedSlice", [xp, const(begin, dtypes.int64), const(end, dtypes.int64),
                                        const([1, 1, *geo.strides], dtypes.int64)],
                       {"begin_mask": 3, "end_mask": 3}))  # fmt: skip
    return op("Pack", [taps], {"axis": 0}), len(taps)


def _avg_counts(geo: _Geometry, include_pad: bool) -> np.ndarray:
    """How many taps of each output window ONNX averages over (a [out...] array)."""
    per_dim = []
    for i, b, e, k, s, d, o in zip(geo.in_sizes, geo.begin, geo.end, geo.kernel, geo.strides,
                                   geo.dilations, geo.out):  # fmt: skip
        taps = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d  # padded coordinates
        lo, hi = (0, i + b + e) if include_pad else (b, b + i)
        per_dim.append(((taps >= lo) & (taps < hi)).sum(axis=1))
    counts = per_dim[0]
    for c in per_dim[1:]:
        counts = np.multiply.outer(counts, c)
    return counts


def _argmax_indices(x, geo: _Geometry, storage_order: int) -> np.ndarray:
    """[K, N, C, out...] int64: the flat input index under each tap (-1 in padding)."""
    shape = x.shape.as_list()
    if shape[0] is None or shape[1] is None:
        raise OnnxImportError("MaxPool's Indices output needs a statically known input shape")
    nb, nc = shape[0], shape[1]
    sp = geo.in_sizes
    out = []
    for offsets in itertools.product(*[range(k) for k in geo.kernel]):
        coords = np.meshgrid(*[np.arange(m) * s + o * d - b
                               for m, s, o, d, b in zip(geo.out, geo.strides, offsets,
                                                        geo.dilations, geo.begin)],
                             indexing="ij")  # fmt: skip
        valid = np.ones(coords[0].shape, bool)
        for c, size in zip(coords, sp):
            valid &= (c >= 0) & (c < size)
        flat = np.zeros(coords[0].shape, np.int64)
        order = range(len(sp)) if storage_order == 0 else reversed(range(len(sp)))
        for i in order:
            flat = flat * sp[i] + coords[i]
        flat = np.where(valid, flat, -1)
        out.append(flat)
    spatial = int(np.prod(sp))
    base = (np.arange(nb * nc, dtype=np.int64) * spatial).reshape(nb, nc, *[1] * len(sp))
    taps = np.stack(out)[:, None, None]
    return np.where(taps >= 0, taps + base[None], -1)


def _pool_params(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode, what):
    r = _rank(x, what)
    nd = r - 2
    kernel = [int(k) for k in kernel_shape]
    if len(kernel) != nd:
        raise OnnxImportError(f"kernel_shape {kernel} does not match the {nd}-D input {x.shape}")
    sizes = x.shape.as_list()[2:]
    geo = _Geometry(None if None in sizes else sizes, kernel, _ints(strides, nd, 1),
                    _ints(dilations, nd, 1), pads, auto_pad or "NOTSET", ceil_mode)  # fmt: skip
    return nd, geo


def _native_pool(tf_op: str, x, geo: _Geometry, padding: str, pads=None):
    """MaxPool/AvgPool over 1-D or 2-D windows, NCHW."""
    nd = len(geo.kernel)
    k, s = list(geo.kernel), list(geo.strides)
    if nd == 1:
        x = _expand_1d(x)
        k, s = [1, *k], [1, *s]
        pads = None if pads is None else [(0, 0), *pads]
    attrs = {"ksize": [1, 1, *k], "strides": [1, 1, *s], "padding": padding,
             "data_format": "NCHW"}  # fmt: skip
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, 0, 0, *pads[0], *pads[1]]
    y = op(tf_op, [x], attrs)
    return _squeeze_1d(y) if nd == 1 else y


_MAXPOOL_TYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int32,
                  dtypes.int64, dtypes.uint8, dtypes.int16, dtypes.int8, dtypes.uint16)  # fmt: skip


@register_onnx_import("MaxPool")
def max_pool(n, x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
             storage_order=0, strides=None):  # fmt: skip
    nd, geo = _pool_params(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode,
                           "MaxPool")  # fmt: skip
    want_indices = n.output_used(1)
    if (
        not want_indices
        and nd <= 2
        and all(d == 1 for d in geo.dilations)
        and (x.dtype in _MAXPOOL_TYPES)
    ):
        if geo.auto_pad == "SAME_UPPER":
            return _native_pool("MaxPool", x, geo, "SAME")
        if geo.begin is not None:
            pairs = [(b, e + ex) for b, e, ex in zip(geo.begin, geo.end, geo.extra)]
            if not any(b or e for b, e in pairs):
                return _native_pool("MaxPool", x, geo, "VALID")
            if all(b < k and e < k for (b, e), k in zip(pairs, geo.kernel)):
                return _native_pool("MaxPool", x, geo, "EXPLICIT", pairs)
    geo.static("MaxPool")
    stack, k = _window_stack(x, geo, _lowest(x.dtype))
    y = op("Max", [stack, const(0, dtypes.int32)])
    if not want_indices:
        return y
    taps = _argmax_indices(x, geo, storage_order)
    am = op("ArgMax", [stack, const(0, dtypes.int32)], {"output_type": dtypes.int64})
    hot = op("OneHot", [am, const(k, dtypes.int32), const(1, dtypes.int64),
                        const(0, dtypes.int64)], {"axis": 0})  # fmt: skip
    idx = op("Sum", [op("Mul", [hot, const(taps)]), const(0, dtypes.int32)])
    return [y, idx]


@register_onnx_import("AveragePool")
def average_pool(n, x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
                 dilations=None, pads=None, strides=None):  # fmt: skip
    nd, geo = _pool_params(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode,
                           "AveragePool")  # fmt: skip
    padded = any(geo.begin) or any(geo.end)
    if (
        nd <= 2
        and all(d == 1 for d in geo.dilations)
        and not any(geo.extra)
        and x.dtype in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
    ):
        if not padded:
            return _native_pool("AvgPool", x, geo, "VALID")
        if count_include_pad:
            p = np.zeros((nd + 2, 2), np.int64)
            p[2:] = list(zip(geo.begin, geo.end))
            return _native_pool("AvgPool", op("Pad", [x, const(p, dtypes.int64)]), geo, "VALID")
        if geo.tf_same():
            return _native_pool("AvgPool", x, geo, "SAME")
    stack, _ = _window_stack(x, geo, 0)
    total = op("Sum", [stack, const(0, dtypes.int32)])
    counts = _avg_counts(geo, bool(count_include_pad)).astype(x.dtype.np)
    return op("RealDiv", [total, const(counts)])


@register_onnx_import("GlobalAveragePool")
def global_average_pool(n, x):
    r = _rank(x, "GlobalAveragePool")
    return op("Mean", [x, const(list(range(2, r)), dtypes.int32)], {"keep_dims": True})


@register_onnx_import("GlobalMaxPool")
def global_max_pool(n, x):
    r = _rank(x, "GlobalMaxPool")
    return op("Max", [x, const(list(range(2, r)), dtypes.int32)], {"keep_dims": True})
