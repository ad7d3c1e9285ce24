"""ONNX export rules for the internal ops the importer builds for ONNX ops TensorFlow has no
counterpart of (NonMaxSuppression, RoiAlign, GridSample, DeformConv, MaxRoiPool, and the string
ops RegexFullMatch, StringNormalizer, TfIdfVectorizer): each writes the ONNX op back. Also
TensorFlow's own NonMaxSuppressionV3/V4/V5, as ONNX's NonMaxSuppression.

These ops are NCHW like ONNX's, so their inputs are read as the rill tensors are (no layout).
Their attrs are the ONNX op's, less what the importer resolved: RoiAlign's
coordinate_transformation_mode is the `half_pixel` bool, GridSample's modes are opset 20's
names, a DeformConv without mask has a scalar mask of 1, and its bias is a separate AddV2 (which
exports as an Add). An op the target opset lacks, or lacks in the form the op needs, is refused
with the opset that has it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from rill.graph import dtypes
from rill.graph.onnx.export_gather import _i64
from rill.graph.onnx.registry import register_onnx_export

# ONNX's type names where they are not rill's dtype names.
_TYPE_NAMES = {"float32": "float", "float64": "double"}


def _schema(ctx, op_type: str, since: int):
    """The ONNX schema of op_type at the target opset; refuses below opset `since`."""
    if ctx.opset < since:
        ctx.unsupported(f"ONNX has {op_type} from opset {since} on, and this export targets "
                        f"opset {ctx.opset}; export with opset={since} or newer")  # fmt: skip
    return onnx.defs.get_schema(op_type, ctx.opset)


def _check_types(ctx, schema, tensors) -> None:
    """Refuses an input whose dtype the ONNX op at the target opset does not take."""
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    for formal, t in zip(schema.inputs, tensors):
        if t is None:
            continue
        ok = allowed.get(formal.type_str, [formal.type_str])
        name = f"tensor({_TYPE_NAMES.get(t.dtype.name, t.dtype.name)})"
        if name not in ok:
            ctx.unsupported(
                f"ONNX's {schema.name} (opset {schema.since_version} through {ctx.opset}) takes "
                f"{formal.name} of {', '.join(ok)}, not {t.dtype.name}"
            )


# -- detection and sampling ---------------------------------------------------------------------


@register_onnx_export("_OnnxNonMaxSuppression")
def non_max_suppression(ctx, op):
    """Boxes and scores are float32 in ONNX: float16 and bfloat16 widen exactly; float64 would
    round, which can change which boxes overlap, so it is refused. A score_threshold of -inf
    (the importer's for a missing one) is left out."""
    boxes, scores, limit, iou, score_threshold = op._inputs
    _schema(ctx, "NonMaxSuppression", 10)
    dt = op.attrs["T"]
    if dt == dtypes.float64:
        ctx.unsupported("ONNX's NonMaxSuppression takes float32 boxes and scores; rounding "
                        "float64 ones can change which boxes overlap")  # fmt: skip
    names = []
    for t in (boxes, scores):
        name = ctx.value(t)
        if dt != dtypes.float32:
            name = ctx.node("Cast", [name], to=TensorProto.FLOAT)
        names.append(name)
    names += [ctx.int64(limit), ctx.value(iou)]
    thr = ctx.const(score_threshold)
    if thr is None or not np.all(np.isneginf(thr)):
        names.append(ctx.value(score_threshold))
    cpb = op.attrs["center_point_box"]
    ctx.node("NonMaxSuppression", names, op.outputs[0], center_point_box=cpb or None)


def _tf_nms(ctx, op):
    """TensorFlow's NonMaxSuppressionV3/V4/V5 (one class of boxes [N, 4], scores [N]) as ONNX's
    over a batch of one and one class: the selected indices, int32, in selection order. ONNX
    drops a box whose IoU with a kept one exceeds iou_threshold, TensorFlow at or above it: at
    an IoU exactly equal to the threshold the two keep different boxes. V4/V5 pad with zeros to
    max_output_size where asked; V5's soft-NMS (sigma > 0) has no ONNX form and is refused."""
    boxes, scores, limit, iou, score_threshold = op._inputs[:5]
    _schema(ctx, "NonMaxSuppression", 10)
    if op.type == "NonMaxSuppressionV5":
        sigma = ctx.const(op._inputs[5])
        if sigma is None or float(np.asarray(sigma)) != 0.0:
            ctx.unsupported("soft-NMS (soft_nms_sigma > 0) has no ONNX NonMaxSuppression form")
    if boxes.dtype != dtypes.float32 and boxes.dtype != dtypes.float16:
        ctx.unsupported("ONNX's NonMaxSuppression takes float32 boxes and scores")
    f32 = TensorProto.FLOAT
    b = ctx.node("Unsqueeze", [ctx.node("Cast", [ctx.value(boxes)], to=f32), _i64(ctx, [0])])
    sc = ctx.node("Unsqueeze", [ctx.node("Cast", [ctx.value(scores)], to=f32), _i64(ctx, [0, 1])])
    names = [b, sc, ctx.node("Reshape", [ctx.int64(limit), _i64(ctx, [1])]),
             ctx.node("Reshape", [ctx.node("Cast", [ctx.value(iou)], to=f32), _i64(ctx, [1])])]  # fmt: skip
    thr = ctx.const(score_threshold)
    if thr is None or not np.all(np.isneginf(thr)):
        names.append(ctx.node("Reshape", [ctx.node("Cast", [ctx.value(score_threshold)], to=f32),
                                          _i64(ctx, [1])]))  # fmt: skip
    found = ctx.node("NonMaxSuppression", names)
    picked = ctx.node("Gather", [found, _i64(ctx, [2])], axis=1)
    picked = ctx.node("Reshape", [picked, _i64(ctx, [-1])])
    if op.type == "NonMaxSuppressionV3":
        ctx.node("Cast", [picked], op.outputs[0], to=TensorProto.INT32)
        return
    count = ctx.node("Shape", [picked])
    pad = bool(op.attrs.get("pad_to_max_output_size"))
    selected = picked
    if pad:
        n = ctx.node("Reshape", [ctx.int64(limit), _i64(ctx, [1])])
        selected = ctx.node("Pad", [picked, ctx.node("Concat", [_i64(ctx, [0]),
                                                                ctx.node("Sub", [n, count])],
                                                      axis=0)])  # fmt: skip
    ctx.node("Cast", [selected], op.outputs[0], to=TensorProto.INT32)
    if op.type == "NonMaxSuppressionV5":
        kept = ctx.node("Gather", [ctx.value(scores), picked], axis=0)
        if pad:
            kept = ctx.node("Pad", [kept, ctx.node("Concat", [_i64(ctx, [0]), ctx.node(
                "Sub", [ctx.node("Reshape", [ctx.int64(limit), _i64(ctx, [1])]), count])],
                axis=0)])  # fmt: skip
        ctx.node("Identity", [kept], op.outputs[1])
    valid = ctx.node("Reshape", [count, ctx.initializer(np.zeros(0, np.int64))])
    ctx.node("Cast", [valid], op.outputs[-1], to=TensorProto.INT32)


for _t in ("NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5"):
    register_onnx_export(_t)(_tf_nms)


@register_onnx_export("_OnnxRoiAlign")
def roi_align(ctx, op):
    """coordinate_transformation_mode exists from opset 16; before it RoiAlign behaved as
    output_half_pixel, so half_pixel (opset 16's default) needs opset 16."""
    x, rois, batch_indices = op._inputs
    a = op.attrs
    schema = _schema(ctx, "RoiAlign", 10)
    _check_types(ctx, schema, [x, rois, batch_indices])
    ctm = "half_pixel" if a["half_pixel"] else "output_half_pixel"
    if ctx.opset < 16:
        if a["half_pixel"]:
            ctx.unsupported(
                f"RoiAlign with half_pixel coordinates needs opset 16 or newer (this export "
                f"targets opset {ctx.opset}): before 16 RoiAlign has no "
                "coordinate_transformation_mode and always reads rois as output_half_pixel"
            )
        ctm = None
    ctx.node("RoiAlign", [ctx.value(x), ctx.value(rois), ctx.int64(batch_indices)],
             op.outputs[0], mode=a["mode"], output_height=a["output_height"],
             output_width=a["output_width"], sampling_ratio=a["sampling_ratio"],
             spatial_scale=float(a["spatial_scale"]),
             coordinate_transformation_mode=ctm)  # fmt: skip


_GRID_MODES_16 = {"linear": "bilinear", "cubic": "bicubic"}  # opsets 16 to 19 name them so


@register_onnx_export("_OnnxGridSample")
def grid_sample(ctx, op):
    """Opsets 16 to 19 sample 4-D inputs and name the modes bilinear and bicubic; opset 20 names
    them linear and cubic and samples N-D inputs."""
    x, grid = op._inputs
    a = op.attrs
    schema = _schema(ctx, "GridSample", 16)
    _check_types(ctx, schema, [x, grid])
    mode = a["mode"]
    if ctx.opset < 20:
        if x.shape.rank != 4:
            found = "of unknown rank" if x.shape.rank is None else f"{x.shape.rank}-D"
            ctx.unsupported(
                f"GridSample of an input {found} needs opset 20 or newer (this export targets "
                f"opset {ctx.opset}): opsets 16 to 19 sample 4-D inputs only"
            )
        mode = _GRID_MODES_16.get(mode, mode)
    ctx.node("GridSample", [ctx.value(x), ctx.value(grid)], op.outputs[0], mode=mode,
             padding_mode=a["padding_mode"], align_corners=int(a["align_corners"]))  # fmt: skip


@register_onnx_export("_OnnxMaxRoiPool")
def max_roi_pool(ctx, op):
    x, rois = op._inputs
    a = op.attrs
    _check_types(ctx, _schema(ctx, "MaxRoiPool", 1), [x, rois])
    ctx.node("MaxRoiPool", [ctx.value(x), ctx.value(rois)], op.outputs[0],
             pooled_shape=[a["pooled_height"], a["pooled_width"]],
             spatial_scale=float(a["spatial_scale"]))  # fmt: skip


@register_onnx_export("_OnnxDeformConv")
def deform_conv(ctx, op):
    """ONNX's mask is [N, offset_group · K, o...]; a scalar mask (the importer's 1 for a missing
    one) is left out, and one other than 1 scales the output instead (the output is linear in
    it)."""
    x, w, offset, mask = op._inputs
    a = op.attrs
    schema = _schema(ctx, "DeformConv", 19)
    _check_types(ctx, schema, [x, w, offset])
    names = [ctx.value(x), ctx.value(w), ctx.value(offset)]
    scale = None
    m = ctx.const(mask)
    if mask.shape.rank == 0 or (m is not None and m.ndim == 0):
        if m is None or float(m) != 1.0:
            scale = ctx.value(mask)
    else:
        names += ["", ctx.value(mask)]
    kernel = w.shape.as_list()[2:] if w.shape.rank is not None else None
    if kernel is not None and None in kernel:
        kernel = None
    attrs = dict(strides=list(a["strides"]), pads=list(a["pads"]),
                 dilations=list(a["dilations"]), group=a["group"],
                 offset_group=a["offset_group"], kernel_shape=kernel)  # fmt: skip
    if scale is None:
        ctx.node("DeformConv", names, op.outputs[0], **attrs)
    else:
        y = ctx.node("DeformConv", names, **attrs)
        ctx.node("Mul", [y, scale], op.outputs[0])


# -- strings ------------------------------------------------------------------------------------


@register_onnx_export("_OnnxRegexFullMatch")
def regex_full_match(ctx, op):
    """The op keeps the model's RE2 pattern (its kernel translates it to Python's re)."""
    _schema(ctx, "RegexFullMatch", 20)
    ctx.node("RegexFullMatch", [ctx.value(op._inputs[0])], op.outputs[0],
             pattern=op.attrs["pattern"])  # fmt: skip


@register_onnx_export("_OnnxStringNormalizer")
def string_normalizer(ctx, op):
    """No locale: rill changes case by Unicode's default mapping, which is every locale's but
    the Turkish, Azeri and Lithuanian ones the importer refuses."""
    a = op.attrs
    _schema(ctx, "StringNormalizer", 10)
    ctx.node("StringNormalizer", [ctx.value(op._inputs[0])], op.outputs[0],
             case_change_action=a["case_change_action"],
             is_case_sensitive=int(a["is_case_sensitive"]),
             stopwords=list(a["stopwords"]) or None)  # fmt: skip


@register_onnx_export("_OnnxTfIdfVectorizer")
def tfidf_vectorizer(ctx, op):
    """The pool is pool_strings for string input, pool_int64s for integers; no weights is all
    ones, ONNX's default. ONNX needs a pool, ngram_counts and ngram_indexes that are not empty."""
    a = op.attrs
    x = op._inputs[0]
    _check_types(ctx, _schema(ctx, "TfIdfVectorizer", 9), [x])
    pool_name = "pool_strings" if x.dtype == dtypes.string else "pool_int64s"
    pool = list(a[pool_name])
    if not (pool and a["ngram_counts"] and a["ngram_indexes"]):
        ctx.unsupported(f"ONNX's TfIdfVectorizer needs {pool_name}, ngram_counts and "
                        "ngram_indexes that are not empty; this one counts no n-gram")  # fmt: skip
    ctx.node("TfIdfVectorizer", [ctx.value(x)], op.outputs[0], mode=a["mode"],
             min_gram_length=a["min_gram_length"], max_gram_length=a["max_gram_length"],
             max_skip_count=a["max_skip_count"], ngram_counts=list(a["ngram_counts"]),
             ngram_indexes=list(a["ngram_indexes"]), weights=list(a["weights"]) or None,
             **{pool_name: pool})  # fmt: skip
