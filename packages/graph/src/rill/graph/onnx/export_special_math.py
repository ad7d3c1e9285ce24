"""ONNX export of the op families added for TensorFlow graphs: special_math_ops (the
trigonometric and hyperbolic functions, float classification, ClipByValue as Max then Min, the
*NoNan / Xlogy family as Where around the plain op), manip_ops' Einsum, linalg_ops'
MatrixDeterminant, segment_ops' TensorScatterUpdate, FusedBatchNorm(V2), and image_ops'
SpaceToDepth / DepthToSpace and resizes (in NCHW), Atan2 (Atan by quadrant), Erfc (1 - Erf) and
CheckNumerics (an Identity: ONNX cannot raise)."""

from __future__ import annotations

from rill.graph.onnx.registry import register_onnx_export

_UNARY = {
    "Sin": "Sin",
    "Tan": "Tan",
    "Asin": "Asin",
    "Acos": "Acos",
    "Atan": "Atan",
    "Sinh": "Sinh",
    "Cosh": "Cosh",
    "Asinh": "Asinh",
    "Acosh": "Acosh",
    "Atanh": "Atanh",
    "IsNan": "IsNaN",
    "IsInf": "IsInf",
}


def _unary_rule(onnx_type):
    return lambda ctx, op: ctx.unary(op, onnx_type)


for _rill, _onnx in _UNARY.items():
    register_onnx_export(_rill)(_unary_rule(_onnx))


@register_onnx_export("IsFinite")
def is_finite(ctx, op):
    """not (isnan(x) or isinf(x))"""
    name, layout = ctx.value_any(op._inputs[0])
    bad = ctx.node("Or", [ctx.node("IsNaN", [name]), ctx.node("IsInf", [name])])
    ctx.node("Not", [bad], op.outputs[0], layout=layout)


@register_onnx_export("ClipByValue")
def clip_by_value(ctx, op):
    """min(max(t, lo), hi), broadcasting the bounds"""
    names, layout = ctx.broadcast_values(list(op._inputs))
    low = ctx.node("Max", names[:2])
    ctx.node("Min", [low, names[2]], op.outputs[0], layout=layout)


@register_onnx_export("Einsum")
def einsum(ctx, op):
    """ONNX's Einsum has numpy's notation, so the equation carries over."""
    names = [ctx.value(t) for t in op._inputs]
    ctx.node("Einsum", names, op.outputs[0], equation=op.attrs["equation"].replace(" ", ""))


@register_onnx_export("MatrixDeterminant")
def matrix_determinant(ctx, op):
    """ONNX's Det takes the same batch of square matrices."""
    ctx.node("Det", [ctx.value(op._inputs[0])], op.outputs[0])


@register_onnx_export("TensorScatterUpdate")
def tensor_scatter_update(ctx, op):
    """ScatterND (no reduction): ONNX leaves repeated indices undefined, TensorFlow lets the last
    one win; the two agree whenever indices are distinct."""
    tensor, indices, updates = op._inputs
    ctx.node("ScatterND", [ctx.value(tensor), ctx.int64(indices), ctx.value(updates)],
             op.outputs[0])  # fmt: skip


def _register_batch_norm_v1() -> None:
    """FusedBatchNorm and FusedBatchNormV2 export as FusedBatchNormV3 does (same inputs; the
    outputs they share come first)."""
    from rill.graph.onnx.export_nn import fused_batch_norm

    for name in ("FusedBatchNorm", "FusedBatchNormV2"):
        register_onnx_export(name)(fused_batch_norm)


_register_batch_norm_v1()


def _zero_where(ctx, op, test_first: bool, value):
    """Where(input == 0, 0, value(x, y)): the *NoNan and x·log(y) ops, whose zero case ONNX
    has no op for. `test_first` tests x (Xlogy, Xdivy, Xlog1py), else y (DivNoNan, MulNoNan)."""
    import numpy as np

    names, layout = ctx.broadcast_values(list(op._inputs))
    x, y = names
    dt = op._inputs[0].dtype.np
    zero = ctx.initializer(np.zeros((), dt))
    is_zero = ctx.node("Equal", [x if test_first else y, zero])
    ctx.node("Where", [is_zero, zero, value(ctx, x, y)], op.outputs[0], layout=layout)


def _register_zero_where() -> None:
    import numpy as np

    def one(ctx, op):
        return ctx.initializer(np.ones((), op._inputs[0].dtype.np))

    rules = {
        "DivNoNan": (False, lambda ctx, x, y: ctx.node("Div", [x, y])),
        "MulNoNan": (False, lambda ctx, x, y: ctx.node("Mul", [x, y])),
        "Xlogy": (True, lambda ctx, x, y: ctx.node("Mul", [x, ctx.node("Log", [y])])),
        "Xdivy": (True, lambda ctx, x, y: ctx.node("Div", [x, y])),
    }
    for name, (test_first, value) in rules.items():
        register_onnx_export(name)(
            lambda ctx, op, t=test_first, v=value: _zero_where(ctx, op, t, v)
        )

    @register_onnx_export("Xlog1py")
    def xlog1py(ctx, op):
        """x·log(1 + y) (log1p's precision for |y| far below float epsilon is lost)"""
        _zero_where(ctx, op, True, lambda c, x, y: c.node(
            "Mul", [x, c.node("Log", [c.node("Add", [one(c, op), y])])]))  # fmt: skip


_register_zero_where()


def _blocks(onnx_type: str, **extra):
    """SpaceToDepth / DepthToSpace in ONNX's NCHW: both sides order a block's pixels row-major
    before the channels (ONNX's DepthToSpace mode DCR), so only the layout changes."""

    def rule(ctx, op):
        from rill.graph.onnx.export_nn import NCHW

        layout = None if op.attrs["data_format"] == "NCHW" else NCHW
        x = ctx.value(op._inputs[0], layout)
        ctx.node(onnx_type, [x], op.outputs[0], layout=layout,
                 blocksize=int(op.attrs["block_size"]), **extra)  # fmt: skip

    return rule


register_onnx_export("SpaceToDepth")(_blocks("SpaceToDepth"))
register_onnx_export("DepthToSpace")(_blocks("DepthToSpace", mode="DCR"))


def _resize(mode: str):
    """ResizeBilinear / ResizeNearestNeighbor / ResizeBicubic as ONNX Resize in NCHW, TensorFlow's
    pixel mapping named by coordinate_transformation_mode (and nearest_mode): legacy =
    asymmetric (floor), align_corners (round half up), half_pixel_centers = half_pixel.
    TensorFlow's bicubic reads its weights from a table of 1025 steps, ONNX computes them: the
    exported model's values differ from rill's by up to about 1e-3 of the image's range."""

    def rule(ctx, op):
        import numpy as np

        from rill.graph.onnx.export_nn import NCHW

        images, size = op._inputs
        dims = images.shape.dims
        hw = ctx.const(size)
        if dims is None or dims[0] is None or dims[3] is None or hw is None:
            ctx.unsupported("Resize needs the batch, channels and size known statically")
        if op.attrs["align_corners"]:
            coord, nearest = "align_corners", "round_prefer_ceil"
        elif op.attrs["half_pixel_centers"]:
            # nearest: floor((i + ½)·s) = round_prefer_ceil((i + ½)·s - ½), half_pixel's mapping
            coord, nearest = "half_pixel", "round_prefer_ceil"
        else:
            coord, nearest = "asymmetric", "floor"
        x = ctx.value(images, NCHW)
        if images.dtype is not op.outputs[0].dtype:
            from rill.graph.onnx.exporter import onnx_dtype

            x = ctx.node("Cast", [x], to=onnx_dtype(op.outputs[0].dtype))
        sizes = ctx.initializer(np.array([dims[0], dims[3], *np.asarray(hw).reshape(-1)], np.int64))
        extra = {"nearest_mode": nearest} if mode == "nearest" else {}
        if mode == "cubic":
            # TensorFlow's half-pixel bicubic is Keys' kernel (a = -1/2) with the taps outside
            # the image dropped and the rest renormalized; the legacy and align_corners ones
            # a = -3/4 with the taps clamped to the border.
            half = coord == "half_pixel"
            extra = {"cubic_coeff_a": -0.5 if half else -0.75, "exclude_outside": int(half)}
        ctx.node("Resize", [x, "", "", sizes], op.outputs[0], layout=NCHW, mode=mode,
                 coordinate_transformation_mode=coord, **extra)  # fmt: skip

    return rule


register_onnx_export("ResizeBilinear")(_resize("linear"))
register_onnx_export("ResizeNearestNeighbor")(_resize("nearest"))
register_onnx_export("ResizeBicubic")(_resize("cubic"))


def _signbit(ctx, x: str, dt) -> str:
    """x < 0, or x is -0 (1/-0 = -inf): the sign bit of a float (False for NaN)."""
    import numpy as np

    zero = ctx.initializer(np.zeros((), dt))
    return ctx.node("Or", [ctx.node("Less", [x, zero]),
                           ctx.node("Less", [ctx.node("Reciprocal", [x]), zero])])  # fmt: skip


@register_onnx_export("Atan2")
def atan2(ctx, op):
    """atan2(y, x) = atan(y / x), plus π (y ≥ +0) or -π (y ≤ -0) where x ≤ -0: C's atan2 by
    quadrant, signed zeros and infinities included. IEEE division already gives ±π/2 at x = ±0;
    where both are zero, x is replaced by ±1 (atan(±0) = ±0 before the quadrant shift), where
    both are infinite, both by ±1 (±π/4). The signed values stay in Where's second branch:
    onnxruntime's Where loses the sign of a zero it takes from the first. bfloat16, which ONNX's
    Atan does not take, is computed in float32."""
    import numpy as np
    from onnx import TensorProto

    from rill.graph import dtypes

    (y, x), layout = ctx.broadcast_values(list(op._inputs))
    wide = op.attrs["T"] is dtypes.bfloat16
    if wide:
        y, x = (ctx.node("Cast", [v], to=TensorProto.FLOAT) for v in (y, x))
    dt = np.float32 if wide else op.attrs["T"].np

    def c(v):
        return ctx.initializer(np.array(v, dt))

    def unit(neg):
        return ctx.node("Where", [neg, c(-1), c(1)])

    x_neg, y_neg = _signbit(ctx, x, dt), _signbit(ctx, y, dt)
    both_zero = ctx.node("And", [ctx.node("Equal", [x, c(0)]), ctx.node("Equal", [y, c(0)])])
    both_inf = ctx.node("And", [ctx.node("IsInf", [x]), ctx.node("IsInf", [y])])
    x = ctx.node("Where", [ctx.node("Or", [both_zero, both_inf]), unit(x_neg), x])
    y = ctx.node("Where", [both_inf, unit(y_neg), y])
    q = ctx.node("Atan", [ctx.node("Div", [y, x])])
    turn = ctx.node("Add", [q, ctx.node("Where", [y_neg, c(-np.pi), c(np.pi)])])
    if not wide:
        ctx.node("Where", [x_neg, turn, q], op.outputs[0], layout=layout)
        return
    out = ctx.node("Where", [x_neg, turn, q])
    ctx.node("Cast", [out], op.outputs[0], layout=layout, to=TensorProto.BFLOAT16)


@register_onnx_export("Erfc")
def erfc(ctx, op):
    """1 - erf(x): absolute error within float rounding, but the relative precision of the upper
    tail is lost (erfc(x) below float epsilon comes out 0)."""
    import numpy as np

    name, layout = ctx.value_any(op._inputs[0])
    one = ctx.initializer(np.ones((), op.attrs["T"].np))
    ctx.node("Sub", [one, ctx.node("Erf", [name])], op.outputs[0], layout=layout)


@register_onnx_export("CheckNumerics", "CheckNumericsV2")
def check_numerics(ctx, op):
    """An Identity: ONNX has no way to raise an error, so the exported model passes NaN and Inf
    on where rill raises InvalidArgumentError (test with IsNaN / IsInf outputs if it matters)."""
    ctx.bind(op.outputs[0], *ctx.value_any(op._inputs[0]))


@register_onnx_export("CropAndResize")
def crop_and_resize(ctx, op):
    """tf.image.crop_and_resize: each box's sample grid, y = y1·(H - 1) + i·(y2 - y1)·(H - 1) /
    (ch - 1) (the box's centre for one row), computed as the kernel rounds it, then the image's
    four neighbours of every sample (GatherND over (box image, row, column)) blended bilinearly,
    or the nearest one; samples outside the image take extrapolation_value. The crop size must
    be known while exporting."""
    import numpy as np
    from onnx import TensorProto

    from rill.graph import dtypes

    image, boxes, box_ind, crop_size = op._inputs
    size = ctx.const(crop_size)
    dims = image.shape.dims
    if size is None or dims is None or dims[1] is None or dims[2] is None:
        ctx.unsupported("CropAndResize needs the crop size and the image's height and width "
                        "known while exporting")  # fmt: skip
    ch, cw = (int(v) for v in np.asarray(size).reshape(-1))
    h, w = dims[1], dims[2]
    f32, f64, i64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64

    def init(v, dt):
        return ctx.initializer(np.asarray(v, dt))

    img = ctx.value(image)
    if image.dtype is not dtypes.float32:
        img = ctx.node("Cast", [img], to=f32)
    bx = ctx.node("Cast", [ctx.value(boxes)], to=f32)

    def column(j):
        return ctx.node("Gather", [bx, init([j], np.int64)], axis=1)  # [N, 1]

    def coords(lo, hi, size, crop):
        """[N, crop] float32 sample positions along one axis, and whether each is inside."""
        span = init(size - 1, np.float32)
        if crop > 1:
            scale = ctx.node("Div", [ctx.node("Mul", [ctx.node("Sub", [hi, lo]), span]),
                                     init(crop - 1, np.float32)])  # fmt: skip
            start = ctx.node("Cast", [ctx.node("Mul", [lo, span])], to=f64)
            steps = init(np.arange(crop, dtype=np.float64)[None, :], np.float64)
            pos = ctx.node("Add", [start, ctx.node("Mul", [steps, ctx.node("Cast", [scale],
                                                                           to=f64)])])  # fmt: skip
            pos = ctx.node("Cast", [pos], to=f32)
        else:
            mid = ctx.node("Mul", [ctx.node("Mul", [init(0.5, np.float32),
                                                    ctx.node("Add", [lo, hi])]), span])  # fmt: skip
            pos = mid
        inside = ctx.node("And", [ctx.node("GreaterOrEqual", [pos, init(0, np.float32)]),
                                  ctx.node("LessOrEqual", [pos, span])])  # fmt: skip
        return pos, inside

    ys, yok = coords(column(0), column(2), h, ch)  # [N, ch]
    xs, xok = coords(column(1), column(3), w, cw)  # [N, cw]

    def index(v, top):
        """v (float32) floored to int64 and clipped to [0, top]."""
        c = ctx.node("Clip", [v, init(0, np.float32), init(top, np.float32)])
        return ctx.node("Cast", [c], to=i64)

    n_ind = ctx.node("Reshape", [ctx.int64(box_ind), init([-1, 1, 1, 1], np.int64)])
    # [N, ch, cw, 1], N from the boxes
    n = ctx.node("Slice", [ctx.node("Shape", [bx]), init([0], np.int64), init([1], np.int64)])
    grid = ctx.node("Concat", [n, init([ch, cw, 1], np.int64)], axis=0)

    def pick(yi, xi):
        """image[box_ind, yi, xi, :] for yi [N, ch] and xi [N, cw] int64: [N, ch, cw, C]."""
        parts = [ctx.node("Expand", [n_ind, grid]),
                 ctx.node("Expand", [ctx.node("Unsqueeze", [yi, init([2, 3], np.int64)]), grid]),
                 ctx.node("Expand", [ctx.node("Unsqueeze", [xi, init([1, 3], np.int64)]), grid])]  # fmt: skip
        return ctx.node("GatherND", [img, ctx.node("Concat", parts, axis=3)])

    if op.attrs["method"] == "bilinear":
        yf, xf = ctx.node("Floor", [ys]), ctx.node("Floor", [xs])
        y0, y1 = index(yf, h - 1), index(ctx.node("Ceil", [ys]), h - 1)
        x0, x1 = index(xf, w - 1), index(ctx.node("Ceil", [xs]), w - 1)
        ly = ctx.node("Unsqueeze", [ctx.node("Sub", [ys, yf]), init([2, 3], np.int64)])
        lx = ctx.node("Unsqueeze", [ctx.node("Sub", [xs, xf]), init([1, 3], np.int64)])
        tl, tr, bl, br = pick(y0, x0), pick(y0, x1), pick(y1, x0), pick(y1, x1)
        top = ctx.node("Add", [tl, ctx.node("Mul", [ctx.node("Sub", [tr, tl]), lx])])
        bottom = ctx.node("Add", [bl, ctx.node("Mul", [ctx.node("Sub", [br, bl]), lx])])
        v = ctx.node("Add", [top, ctx.node("Mul", [ctx.node("Sub", [bottom, top]), ly])])
    else:
        half = init(0.5, np.float32)
        v = pick(index(ctx.node("Floor", [ctx.node("Add", [ys, half])]), h - 1),
                 index(ctx.node("Floor", [ctx.node("Add", [xs, half])]), w - 1))  # fmt: skip
    ok = ctx.node("And", [ctx.node("Unsqueeze", [yok, init([2, 3], np.int64)]),
                          ctx.node("Unsqueeze", [xok, init([1, 3], np.int64)])])  # fmt: skip
    ext = init(op.attrs["extrapolation_value"], np.float32)
    ctx.node("Where", [ok, v, ext], op.outputs[0])


@register_onnx_export("ExtractImagePatches")
def extract_image_patches(ctx, op):
    """Each output position's window (rows, columns, then channels, as TensorFlow orders the
    patch's depth): the padded image sliced once per tap at the strides and the taps
    concatenated along the channels. Values are copied, so exact. The image's height and
    width must be known under SAME padding."""
    import math

    import numpy as np

    (x,) = op._inputs
    _, kh, kw, _ = op.attrs["ksizes"]
    _, sh, sw, _ = op.attrs["strides"]
    _, rh, rw, _ = op.attrs["rates"]
    dims = x.shape.dims
    name = ctx.value(x)
    eh, ew = (kh - 1) * rh + 1, (kw - 1) * rw + 1
    if op.attrs["padding"] == "SAME":
        if dims is None or dims[1] is None or dims[2] is None:
            ctx.unsupported("ExtractImagePatches with SAME padding needs the image's height and "
                            "width known while exporting")  # fmt: skip
        pads = []
        for n, k, s in ((dims[1], eh, sh), (dims[2], ew, sw)):
            total = max((math.ceil(n / s) - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        (t, b), (le, r) = pads
        if t or b or le or r:
            name = ctx.node("Pad", [name, ctx.initializer(np.array([0, t, le, 0, 0, b, r, 0],
                                                                   np.int64))])  # fmt: skip
    taps = []
    big = np.iinfo(np.int64).max
    for i in range(kh):
        for j in range(kw):
            # rows i·rh, i·rh + sh, ... while a whole window fits: end at the window's last start
            starts = [i * rh, j * rw]
            ends = [-(eh - 1 - i * rh) if eh - 1 - i * rh else big,
                    -(ew - 1 - j * rw) if ew - 1 - j * rw else big]  # fmt: skip
            taps.append(ctx.node("Slice", [name, ctx.initializer(np.array(starts, np.int64)),
                                           ctx.initializer(np.array(ends, np.int64)),
                                           ctx.initializer(np.array([1, 2], np.int64)),
                                           ctx.initializer(np.array([sh, sw], np.int64))]))  # fmt: skip
    if len(taps) == 1:
        ctx.node("Identity", taps, op.outputs[0])
    else:
        ctx.node("Concat", taps, op.outputs[0], axis=3)
