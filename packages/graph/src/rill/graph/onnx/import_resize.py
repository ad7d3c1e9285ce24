"""ONNX import rule: Resize (opsets 11–19 as they are; opset 10 through onnx's version
converter, which the importer runs on models older than opset 13).

Resizing is separable, so each resized axis is resized on its own, with what depends only on the
sizes computed while importing: for `nearest` one index per output position (a GatherV2, exact),
for `linear` and `cubic` an [out, in] interpolation matrix (a MatMul). The matrix rows hold
ONNX's tap weights at the taps' edge-clamped indices: cubic_coeff_a, exclude_outside (outside
taps dropped and the rest renormalized), antialias (the kernel stretched by 1/scale when
downsampling), and every coordinate_transformation_mode (half_pixel, half_pixel_symmetric,
pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize with its
roi and extrapolation_value) and nearest_mode (round_prefer_floor, round_prefer_ceil, floor,
ceil), plus axes and keep_aspect_ratio_policy. Integer inputs are interpolated in float32 and
rounded back, saturating.

The resized axes' input sizes, and the scales / sizes / roi, must be known while importing (they
are for models exported with fixed input shapes); otherwise the import is refused.
"""

from __future__ import annotations

import math

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, static


def _source_coords(mode, out_n: int, in_n: int, scale: float, roi):
    """The input coordinate of every output position along one axis (float64)."""
    y = np.arange(out_n, dtype=np.float64)
    out_f = scale * in_n
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = in_n / 2 * (1 - out_n / out_f)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return np.full(out_n, -0.5) if out_f == 1 else (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros(out_n) if out_f == 1 else y * (in_n - 1) / (out_f - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_f == 1:
            x = np.full(out_n, (end - start) * (in_n - 1) / 2)
        else:
            x = y * (end - start) * (in_n - 1) / (out_f - 1)
        return x + start * (in_n - 1)
    raise OnnxImportError(f"unknown coordinate_transformation_mode {mode!r}")


def _cubic(x, a: float):
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _taps(kind: str, ratio: float, scale: float, a: float, antialias: bool, nearest_mode: str):
    """The tap weights around one output position; ratio ∈ (0, 1] is the distance from the
    left neighbour (1 at an exact input position)."""
    if kind == "nearest":
        if ratio == 1:
            return np.array([0.0, 1.0])
        if nearest_mode == "round_prefer_floor":
            return np.array([ratio <= 0.5, ratio > 0.5], np.float64)
        if nearest_mode == "round_prefer_ceil":
            return np.array([ratio < 0.5, ratio >= 0.5], np.float64)
        if nearest_mode == "floor":
            return np.array([1.0, 0.0])
        if nearest_mode == "ceil":
            return np.array([0.0, 1.0])
        raise OnnxImportError(f"unknown nearest_mode {nearest_mode!r}")
    if kind == "linear":
        if not antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        w = np.clip(1 - np.abs((np.arange(start, 2 - start) - ratio) * s), 0, 1)
        return w / w.sum()
    if not antialias:
        return _cubic(np.array([ratio + 1, ratio, 1 - ratio, 2 - ratio]), a)
    s = min(scale, 1.0)
    start = int(np.floor(-2 / s) + 1)
    w = _cubic((np.arange(start, 2 - start) - ratio) * s, a)
    return w / w.sum()


def _axis_plan(kind, in_n, out_n, scale, coord_mode, roi, a, antialias, exclude_outside,
               nearest_mode):  # fmt: skip
    """(indices [out, taps] clamped into the input, weights [out, taps], outside [out] bool)."""
    x = _source_coords(coord_mode, out_n, in_n, scale, roi)
    outside = None
    if coord_mode == "tf_crop_and_resize":
        outside = (x < 0) | (x > in_n - 1)
    floor = np.floor(x)
    ratio = np.where(x == floor, 1.0, x - floor)
    weights = np.stack([_taps(kind, float(r), scale, a, antialias, nearest_mode) for r in ratio])
    k = weights.shape[1]
    # The k input positions nearest x (ties to the smaller), in edge-padded coordinates.
    pad = math.ceil(k / 2)
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if k % 2 == 0:
        start = p + np.where(frac == 0, -(k // 2), -(k // 2) + 1)
    else:
        start = p + np.where(frac <= 0.5, -((k - 1) // 2), -((k - 1) // 2) + 1)
    idx = start.astype(np.int64)[:, None] + np.arange(k)[None, :] - pad
    if exclude_outside:
        weights = np.where((idx < 0) | (idx >= in_n), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_n - 1), weights, outside


def _move_last(x, axis: int, rank: int):
    perm = [i for i in range(rank) if i != axis] + [axis]
    return op("Transpose", [x, const(perm, dtypes.int32)]), perm


def _apply_matrix(x, axis: int, matrix: np.ndarray, rank: int):
    """x with axis `axis` replaced by matrix @ x along it (matrix [out, in])."""
    xt, perm = _move_last(x, axis, rank) if axis != rank - 1 else (x, None)
    shp = op("Shape", [xt], {"out_type": dtypes.int32})
    lead = op("StridedSlice", [shp, const([0], dtypes.int32), const([-1], dtypes.int32),
                               const([1], dtypes.int32)])  # fmt: skip
    flat = op("Reshape", [xt, const([-1, matrix.shape[1]], dtypes.int32)])
    y = op("MatMul", [flat, const(np.ascontiguousarray(matrix.T).astype(x.dtype.np))])
    y = op("Reshape", [y, op("ConcatV2", [[lead, const([matrix.shape[0]], dtypes.int32)],
                                          const(0, dtypes.int32)])])  # fmt: skip
    if perm is None:
        return y
    return op("Transpose", [y, const(list(np.argsort(perm)), dtypes.int32)])


F64 = dtypes.float64


def _f64(v):
    return const(v, F64)


def _scalar_at(t, i: int, dtype):
    """t[i] of a 1-D tensor, cast to dtype."""
    v = op("GatherV2", [t, const(i, dtypes.int32), const(0, dtypes.int32)])
    return v if v.dtype is dtype else op("Cast", [v], {"DstT": dtype})


def _kernel(kind: str, d, scale):
    """ONNX's tap weight at signed distance d (F64), the kernel stretched by 1/scale."""
    z = op("Abs", [op("Mul", [d, scale])])
    if kind == "linear":
        return op("Maximum", [op("Sub", [_f64(1.0), z]), _f64(0.0)])
    return z  # cubic: finished by _cubic_graph


def _cubic_graph(z, a: float):
    near = op("AddV2", [op("Mul", [op("Mul", [op("Sub", [op("Mul", [_f64(a + 2), z]),
                                                          _f64(a + 3)]), z]), z]), _f64(1.0)])  # fmt: skip
    far = op("Sub", [op("Mul", [op("AddV2", [op("Mul", [op("Sub", [op("Mul", [_f64(a), z]),
                                                                    _f64(5 * a)]), z]),
                                             _f64(8 * a)]), z]), _f64(4 * a)])  # fmt: skip
    zero = op("ZerosLike", [z])
    return op("SelectV2", [op("LessEqual", [z, _f64(1.0)]), near,
                           op("SelectV2", [op("Less", [z, _f64(2.0)]), far, zero])])  # fmt: skip


def _dyn_coords(mode, out_n, in_f, scale, roi):
    """The input coordinate of every output position (F64 [out]) from run-time sizes."""
    y = op("Range", [_f64(0.0), op("Cast", [out_n], {"DstT": F64}), _f64(1.0)])
    out_f = op("Mul", [scale, in_f])
    half = op("Sub", [op("RealDiv", [op("AddV2", [y, _f64(0.5)]), scale]), _f64(0.5)])
    one_out = op("Equal", [out_f, _f64(1.0)])
    if mode == "half_pixel":
        return half
    if mode == "half_pixel_symmetric":
        adj = op("RealDiv", [op("Cast", [out_n], {"DstT": F64}), out_f])
        offset = op("Mul", [op("Mul", [in_f, _f64(0.5)]), op("Sub", [_f64(1.0), adj])])
        return op("AddV2", [offset, half])
    if mode == "pytorch_half_pixel":
        return op("SelectV2", [one_out, op("Fill", [op("Shape", [y]), _f64(-0.5)]), half])
    in_m1 = op("Sub", [in_f, _f64(1.0)])
    denom = op("Maximum", [op("Sub", [out_f, _f64(1.0)]), _f64(1e-300)])
    if mode == "align_corners":
        ac = op("RealDiv", [op("Mul", [y, in_m1]), denom])
        return op("SelectV2", [one_out, op("ZerosLike", [y]), ac])
    if mode == "asymmetric":
        return op("RealDiv", [y, scale])
    if mode == "tf_half_pixel_for_nn":
        return op("RealDiv", [op("AddV2", [y, _f64(0.5)]), scale])
    if mode == "tf_crop_and_resize":
        start, end = roi
        span = op("Mul", [op("Sub", [end, start]), in_m1])
        many = op("RealDiv", [op("Mul", [y, span]), denom])
        single = op("Fill", [op("Shape", [y]), op("Mul", [span, _f64(0.5)])])
        return op("AddV2", [op("SelectV2", [one_out, single, many]), op("Mul", [start, in_m1])])
    raise OnnxImportError(f"unknown coordinate_transformation_mode {mode!r}")


def _dyn_axis(y, a: int, r: int, in_n, out_n, scale, roi, p):
    """Resizes axis a of y with sizes known only at run time (in_n, out_n int32 scalars)."""
    in_f = op("Cast", [in_n], {"DstT": F64})
    x = _dyn_coords(p["coord"], out_n, in_f, scale, roi)
    fl = op("Floor", [x])
    ratio = op("SelectV2", [op("Equal", [x, fl]), op("OnesLike", [x]), op("Sub", [x, fl])])
    left = op("Sub", [x, ratio])  # the left neighbour (x − 1 at an exact position)
    in_last = op("Sub", [in_n, const(1, dtypes.int32)])
    kind = p["mode"]
    if kind == "nearest":
        nm = p["nearest_mode"]
        if nm == "round_prefer_floor":
            up = op("Greater", [ratio, _f64(0.5)])
        elif nm == "round_prefer_ceil":
            up = op("GreaterEqual", [ratio, _f64(0.5)])
        elif nm == "floor":
            up = op("Equal", [ratio, _f64(1.0)])
        elif nm == "ceil":
            up = op("GreaterEqual", [ratio, _f64(0.0)])
        else:
            raise OnnxImportError(f"unknown nearest_mode {nm!r}")
        pos = op("AddV2", [left, op("Cast", [up], {"DstT": F64})])
        idx = op("Cast", [pos], {"DstT": dtypes.int32})
        idx = op("Maximum", [op("Minimum", [idx, in_last]), const(0, dtypes.int32)])
        out = op("GatherV2", [y, idx, const(a, dtypes.int32)])
    else:
        support = 1.0 if kind == "linear" else 2.0
        s_eff = _f64(1.0)
        if p["antialias"]:
            s_eff = op("Minimum", [scale, _f64(1.0)])
        first = op("AddV2", [op("Floor", [op("RealDiv", [_f64(-support), s_eff])]), _f64(1.0)])
        j = op("Range", [first, op("Sub", [_f64(2.0), first]), _f64(1.0)])  # [k]
        dist = op("Sub", [op("ExpandDims", [j, const(0, dtypes.int32)]),
                          op("ExpandDims", [ratio, const(1, dtypes.int32)])])  # [out, k]  # fmt: skip
        w = _kernel(kind, dist, s_eff)
        if kind == "cubic":
            w = _cubic_graph(w, p["a"])
        taps = op("AddV2", [op("ExpandDims", [left, const(1, dtypes.int32)]),
                            op("ExpandDims", [j, const(0, dtypes.int32)])])  # fmt: skip
        taps = op("Cast", [taps], {"DstT": dtypes.int32})
        if p["exclude_outside"]:
            inside = op("LogicalAnd", [op("GreaterEqual", [taps, const(0, dtypes.int32)]),
                                       op("LessEqual", [taps, in_last])])  # fmt: skip
            w = op("SelectV2", [inside, w, op("ZerosLike", [w])])
        if p["antialias"] or p["exclude_outside"]:
            total = op("Sum", [w, const([1], dtypes.int32)], {"keep_dims": True})
            safe = op("SelectV2", [op("Equal", [total, _f64(0.0)]), op("OnesLike", [total]),
                                   total])  # fmt: skip
            w = op("RealDiv", [w, safe])
        taps = op("Maximum", [op("Minimum", [taps, in_last]), const(0, dtypes.int32)])
        g = op("GatherV2", [y, taps, const(a, dtypes.int32)])  # axis a → [out, k]
        wk = op("Cast", [w], {"DstT": y.dtype})
        wk = op("Reshape", [wk, op("ConcatV2", [[const([1] * a, dtypes.int32),
                                                op("Shape", [w], {"out_type": dtypes.int32}),
                                                const([1] * (r - a - 1), dtypes.int32)],
                                               const(0, dtypes.int32)])])  # fmt: skip
        out = op("Sum", [op("Mul", [g, wk]), const([a + 1], dtypes.int32)])
    if p["coord"] == "tf_crop_and_resize":
        outside = op("LogicalOr", [op("Less", [x, _f64(0.0)]),
                                   op("Greater", [x, op("Sub", [in_f, _f64(1.0)])])])  # fmt: skip
        shape = [1] * a + [-1] + [1] * (r - a - 1)
        mask = op("Reshape", [outside, const(shape, dtypes.int32)])
        mask = op("BroadcastTo", [mask, op("Shape", [out], {"out_type": dtypes.int32})])
        fill = op("Fill", [op("Shape", [out], {"out_type": dtypes.int32}),
                           const(p["extrapolation_value"], out.dtype)])  # fmt: skip
        out = op("SelectV2", [mask, fill, out])
    return out


def _present(t):
    """None for an omitted or empty optional input."""
    if t is None:
        return None
    v = static(t)
    if v is not None and np.asarray(v).size == 0:
        return None
    if t.shape.rank == 1 and t.shape[0] == 0:
        return None
    return t


@register_onnx_import("Resize")
def resize(n, x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None,
           coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=0,
           extrapolation_value=0.0, keep_aspect_ratio_policy="stretch", mode="nearest",
           nearest_mode="round_prefer_floor"):  # fmt: skip
    roi, scales, sizes = _present(roi), _present(scales), _present(sizes)
    if (scales is None) == (sizes is None):
        got = "both scales and sizes" if scales is not None else "neither scales nor sizes"
        raise OnnxImportError(f"Resize takes exactly one of scales and sizes, got {got}")
    if mode not in ("nearest", "linear", "cubic"):
        raise OnnxImportError(f"Resize mode {mode!r} is not nearest, linear or cubic")
    if keep_aspect_ratio_policy not in ("stretch", "not_larger", "not_smaller"):
        raise OnnxImportError(f"unknown keep_aspect_ratio_policy {keep_aspect_ratio_policy!r}")
    coord = coordinate_transformation_mode
    if coord == "tf_crop_and_resize" and roi is None:
        raise OnnxImportError("Resize with tf_crop_and_resize needs roi")
    r = x.shape.rank
    if r is None:
        raise OnnxImportError("Resize needs an input of known rank")
    axes = [int(a) % r for a in axes] if axes else list(range(r))
    given = scales if scales is not None else sizes
    if given.shape.rank == 1 and given.shape[0] is not None and given.shape[0] != len(axes):
        what = "scales" if scales is not None else "sizes"
        raise OnnxImportError(f"Resize {what} has {given.shape[0]} values for {len(axes)} axes")
    p = {"mode": mode, "coord": coord, "nearest_mode": nearest_mode, "a": float(cubic_coeff_a),
         "antialias": bool(antialias) and mode != "nearest",
         "exclude_outside": bool(exclude_outside),
         "extrapolation_value": float(extrapolation_value)}  # fmt: skip
    y = x
    if mode != "nearest" and not x.dtype.is_floating:
        y = op("Cast", [y], {"DstT": dtypes.float32})
    scales_v, sizes_v, roi_v = static(scales), static(sizes), static(roi)
    in_sizes = x.shape.as_list()
    static_ok = (
        (scales is None or scales_v is not None)
        and (sizes is None or sizes_v is not None)
        and (roi is None or roi_v is not None)
        and all(in_sizes[a] is not None for a in axes)
    )
    if static_ok:
        y = _static_resize(y, axes, r, in_sizes, scales_v, sizes_v, roi_v,
                           keep_aspect_ratio_policy, p)  # fmt: skip
    else:
        y = _dynamic_resize(y, x, axes, r, scales, sizes, roi, keep_aspect_ratio_policy, p)
    if y.dtype is not x.dtype:
        y = op("Round", [y])
        if x.dtype.is_integer:
            info = np.iinfo(x.dtype.np)
            y = op("Minimum", [op("Maximum", [y, const(info.min, y.dtype)]),
                               const(info.max, y.dtype)])  # fmt: skip
        y = op("Cast", [y], {"DstT": x.dtype})
    return y


def _full_roi(roi_v, axes, r):
    """roi over every axis ([starts..., ends...] of length 2r) from roi over `axes`."""
    if roi_v is None:
        return None
    roi_v = np.asarray(roi_v, np.float64).reshape(-1)
    if roi_v.size == 2 * r:
        return roi_v
    full = np.array([0.0] * r + [1.0] * r)
    for i, a in enumerate(axes):
        full[a], full[r + a] = roi_v[i], roi_v[len(axes) + i]
    return full


def _out_size(scale, in_n: int) -> int:
    """floor(in_n · scale), the product in float32 as onnxruntime computes it: a float32 scale
    of 13/7 (tf2onnx's for resizing 7 to 13) makes 12.9999996 in float64 but 13 in float32,
    the size the exporting framework meant. (onnx's ReferenceEvaluator multiplies in float64.)"""
    return int(np.floor(np.float32(scale) * np.float32(in_n)))


def _static_resize(y, axes, r, in_sizes, scales_v, sizes_v, roi_v, policy, p):
    roi_v = _full_roi(roi_v, axes, r)
    plan = {}
    if scales_v is not None:
        for a, s in zip(axes, np.asarray(scales_v).astype(np.float64).reshape(-1)):
            plan[a] = (float(s), _out_size(s, in_sizes[a]))
    else:
        outs = [int(o) for o in np.asarray(sizes_v).reshape(-1)]
        ratios = [o / in_sizes[a] for a, o in zip(axes, outs)]
        if policy != "stretch":
            s = (min if policy == "not_larger" else max)(ratios)
            plan = {a: (s, int(s * in_sizes[a] + 0.5)) for a in axes}
        else:
            plan = {a: (q, o) for a, q, o in zip(axes, ratios, outs)}
    for a in sorted(plan):
        scale, out_n = plan[a]
        in_n = in_sizes[a]
        if scale <= 0:
            raise OnnxImportError(f"Resize scale {scale} of axis {a} is not positive")
        axis_roi = None if roi_v is None else (float(roi_v[a]), float(roi_v[r + a]))
        if (math.isclose(scale, 1.0) and out_n == in_n
                and (axis_roi is None or (math.isclose(axis_roi[0], 0.0)
                                          and math.isclose(axis_roi[1], 1.0)))):  # fmt: skip
            continue
        idx, w, outside = _axis_plan(p["mode"], in_n, out_n, scale, p["coord"], axis_roi,
                                     p["a"], p["antialias"], p["exclude_outside"],
                                     p["nearest_mode"])  # fmt: skip
        if p["mode"] == "nearest":
            pick = idx[np.arange(out_n), np.argmax(w, axis=1)]
            y = op("GatherV2", [y, const(pick.astype(np.int64)), const(a, dtypes.int32)])
        else:
            matrix = np.zeros((out_n, in_n))
            for t in range(w.shape[1]):
                np.add.at(matrix, (np.arange(out_n), idx[:, t]), w[:, t])
            y = _apply_matrix(y, a, matrix, r)
        if outside is not None and outside.any():
            shape = [1] * r
            shape[a] = out_n
            target = op("Shape", [y], {"out_type": dtypes.int32})
            mask = op("BroadcastTo", [const(outside.reshape(shape)), target])
            fill = op("Fill", [target, const(p["extrapolation_value"], y.dtype)])
            y = op("SelectV2", [mask, fill, y])
    return y


def _dynamic_resize(y, x, axes, r, scales, sizes, roi, policy, p):
    shape = op("Shape", [x], {"out_type": dtypes.int32})
    in_ns = [_scalar_at(shape, a, dtypes.int32) for a in axes]
    if scales is not None:
        sc = [_scalar_at(scales, i, F64) for i in range(len(axes))]
        f32 = dtypes.float32  # the size's product in float32, as onnxruntime's (_out_size)
        outs = [op("Cast", [op("Floor", [op("Mul", [op("Cast", [s], {"DstT": f32}),
                                                    op("Cast", [i], {"DstT": f32})])])],
                   {"DstT": dtypes.int32}) for s, i in zip(sc, in_ns)]  # fmt: skip
    else:
        outs = [_scalar_at(sizes, i, dtypes.int32) for i in range(len(axes))]
        sc = [op("RealDiv", [op("Cast", [o], {"DstT": F64}), op("Cast", [i], {"DstT": F64})])
              for o, i in zip(outs, in_ns)]  # fmt: skip
        if policy != "stretch":
            stacked = op("Pack", [sc], {"axis": 0})
            red = "Min" if policy == "not_larger" else "Max"
            s = op(red, [stacked, const(0, dtypes.int32)])
            sc = [s] * len(axes)
            outs = [op("Cast", [op("Floor", [op("AddV2", [op("Mul", [s, op("Cast", [i], {
                "DstT": F64})]), _f64(0.5)])])], {"DstT": dtypes.int32}) for i in in_ns]  # fmt: skip
    rois = [None] * len(axes)
    if roi is not None:
        rv = op("Cast", [roi], {"DstT": F64}) if roi.dtype is not F64 else roi
        k = roi.shape[0] if roi.shape.rank == 1 else None
        for i, a in enumerate(axes):
            if k == 2 * r:
                rois[i] = (_scalar_at(rv, a, F64), _scalar_at(rv, r + a, F64))
            else:
                rois[i] = (_scalar_at(rv, i, F64), _scalar_at(rv, len(axes) + i, F64))
    for i, a in sorted(enumerate(axes), key=lambda t: t[1]):
        y = _dyn_axis(y, a, r, in_ns[i], outs[i], sc[i], rois[i], p)
    return y


def resize10_semantics(model) -> None:
    """Opset-10 Resize (and Upsample) sample at x_out / scale, rounding down for nearest; onnx's
    version converter carries them to opset 11+ without saying so, which would make them
    half_pixel. Run on the converted model of a model older than opset 11."""
    from onnx import helper

    def walk(graph):
        for n in graph.node:
            yield n
            for a in n.attribute:
                if a.type == a.GRAPH:
                    yield from walk(a.g)
                for g in a.graphs:
                    yield from walk(g)

    for n in walk(model.graph):
        if n.op_type != "Resize" or n.domain not in ("", "ai.onnx"):
            continue
        names = {a.name for a in n.attribute}
        if "coordinate_transformation_mode" not in names:
            n.attribute.append(helper.make_attribute("coordinate_transformation_mode",
                                                     "asymmetric"))  # fmt: skip
        if "nearest_mode" not in names:
            n.attribute.append(helper.make_attribute("nearest_mode", "floor"))
