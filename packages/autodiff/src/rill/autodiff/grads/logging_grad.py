"""Gradients for rill.graph.ops.logging_ops, set_search_ops, image_ops and batch_norm_ops."""

from __future__ import annotations

from rill.autodiff.grads.math_grad import _dense
from rill.autodiff.registry import not_differentiable, register_gradient
from rill.graph.graph import get_default_graph
from rill.graph.ops import image_ops, logging_ops

not_differentiable(
    "Assert",
    "StringFormat",
    "PrintV2",
    "Bucketize",
    "UpperBound",
    "LowerBound",
    "ListDiff",
    "UniqueWithCounts",
    "Bincount",
    "DenseBincount",
    "HistogramFixedWidth",
)


@register_gradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    """dx = check_numerics(g): a NaN or Inf in the gradient fails as in the forward pass"""
    return logging_ops.check_numerics(
        _dense(grad),
        f"Not a number (NaN) or infinity (Inf) values detected in gradient. {op.attrs['message']}",
    )


@register_gradient("CheckNumericsV2")
def _check_numerics_v2_grad(op, grad):
    """dx = check_numerics(g)"""
    return _check_numerics_grad(op, grad)


@register_gradient("Print")
def _print_grad(op, *grads):
    """dinput = g; the printed data get no gradient"""
    return [grads[0]] + [None] * (len(op.inputs) - 1)


@register_gradient("SpaceToDepth")
def _space_to_depth_grad(op, grad):
    """dx = depth_to_space(g)"""
    return image_ops.depth_to_space(_dense(grad), op.attrs["block_size"], op.attrs["data_format"])


@register_gradient("DepthToSpace")
def _depth_to_space_grad(op, grad):
    """dx = space_to_depth(g)"""
    return image_ops.space_to_depth(_dense(grad), op.attrs["block_size"], op.attrs["data_format"])


def _fused_batch_norm_v1_grad(grad_op_type):
    def grad_fn(op, grad_y, *_unused):
        """dx, dscale, doffset = FusedBatchNormGrad(V2)(g_y, x, scale, mean, variance), with the
        batch's statistics in training and the given ones in inference"""
        x, scale = op.inputs[0], op.inputs[1]
        training = op.attrs["is_training"]
        mean, var = (op.outputs[3], op.outputs[4]) if training else (op.inputs[3], op.inputs[4])
        attrs = {k: op.attrs[k] for k in ("epsilon", "data_format", "is_training")}
        grad_op = get_default_graph().create_op(
            grad_op_type, [_dense(grad_y), x, scale, mean, var], attrs, name=grad_op_type
        )
        dx, dscale, doffset = grad_op.outputs[:3]
        return dx, dscale, doffset, None, None

    return grad_fn


register_gradient("FusedBatchNorm")(_fused_batch_norm_v1_grad("FusedBatchNormGrad"))
register_gradient("FusedBatchNormV2")(_fused_batch_norm_v1_grad("FusedBatchNormGradV2"))


@register_gradient("SpaceToBatchND")
def _space_to_batch_nd_grad(op, grad):
    """dx = batch_to_space_nd(g, block_shape, paddings)"""
    _, block, pads = op.inputs
    return image_ops.batch_to_space_nd(_dense(grad), block, pads), None, None


@register_gradient("BatchToSpaceND")
def _batch_to_space_nd_grad(op, grad):
    """dx = space_to_batch_nd(g, block_shape, crops)"""
    _, block, crops = op.inputs
    return image_ops.space_to_batch_nd(_dense(grad), block, crops), None, None


def _resize_attrs(op):
    return {k: op.attrs[k] for k in ("align_corners", "half_pixel_centers")}


@register_gradient("ResizeBilinear")
def _resize_bilinear_grad(op, grad):
    """dimages = ResizeBilinearGrad(g, images)"""
    g = get_default_graph().create_op(
        "ResizeBilinearGrad", [_dense(grad), op.inputs[0]], _resize_attrs(op)
    )
    return g.outputs[0], None


@register_gradient("ResizeNearestNeighbor")
def _resize_nearest_neighbor_grad(op, grad):
    """dimages = ResizeNearestNeighborGrad(g, images' height and width)"""
    from rill.graph.ops import array_ops, slice_ops

    hw = slice_ops.strided_slice(array_ops.shape(op.inputs[0]), [1], [3], [1])
    g = get_default_graph().create_op(
        "ResizeNearestNeighborGrad", [_dense(grad), hw], _resize_attrs(op)
    )
    return g.outputs[0], None


not_differentiable("ResizeBilinearGrad", "ResizeNearestNeighborGrad")


not_differentiable("NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5")


@register_gradient("ExtractImagePatches")
def _extract_image_patches_grad(op, grad):
    """dimages = every patch element of g added back onto the pixel it copied"""
    a = {k: op.attrs[k] for k in ("ksizes", "strides", "rates", "padding")}
    return (
        get_default_graph()
        .create_op(
            "_ExtractImagePatchesGrad",
            [_dense(grad), op.inputs[0]],
            a,
            name="ExtractImagePatchesGrad",
        )
        .outputs[0]
    )


@register_gradient("CropAndResize")
def _crop_and_resize_grad(op, grad):
    """dimage = CropAndResizeGradImage(g, boxes, box_ind, shape(image)); dboxes =
    CropAndResizeGradBoxes(g, image, boxes, box_ind) (bilinear only, as TensorFlow)"""
    from rill.graph.ops import array_ops

    image, boxes, box_ind, _ = op.inputs
    g = get_default_graph()
    grad = _dense(grad)
    method = op.attrs["method"]
    gi = None
    if image.dtype.name in ("float32", "float16", "float64"):
        gi = g.create_op(
            "CropAndResizeGradImage", [grad, boxes, box_ind, array_ops.shape(image)],
            {"method": method, "T": image.dtype},
        ).outputs[0]  # fmt: skip
    gb = None
    if method == "bilinear":
        gb = g.create_op("CropAndResizeGradBoxes", [grad, image, boxes, box_ind]).outputs[0]
    return gi, gb, None, None


not_differentiable("_ExtractImagePatchesGrad", "CropAndResizeGradImage", "CropAndResizeGradBoxes")


not_differentiable("ParseExampleV2", "ParseSingleExample")


not_differentiable(
    "HashTableV2",
    "MutableHashTableV2",
    "LookupTableFindV2",
    "LookupTableInsertV2",
    "LookupTableSizeV2",
    "LookupTableImportV2",
    "LookupTableExportV2",
    "InitializeTableV2",
    "InitializeTableFromTextFileV2",
)


not_differentiable(
    "StringJoin",
    "StringSplitV2",
    "Substr",
    "RegexReplace",
    "StaticRegexReplace",
    "StringToHashBucketStrong",
    "StringToHashBucketFast",
    "AsString",
    "StringToNumber",
    "StringLength",
    "StringLower",
    "StringUpper",
    "ReduceJoin",
    "DecodeRaw",
    "DecodeCSV",
)


not_differentiable(
    "StatelessRandomUniform",
    "StatelessRandomNormal",
    "StatelessRandomGetKeyCounter",
    "StatelessRandomUniformV2",
    "StatelessRandomNormalV2",
)


# RandomGamma's gradient is in random_grad.py.
not_differentiable("RandomPoisson", "RandomPoissonV2", "ParameterizedTruncatedNormal")


@register_gradient("ResizeBicubic")
def _resize_bicubic_grad(op, grad):
    """dimages = ResizeBicubicGrad(g, images)"""
    g = get_default_graph().create_op(
        "ResizeBicubicGrad", [_dense(grad), op.inputs[0]], _resize_attrs(op)
    )
    return g.outputs[0], None


not_differentiable("ResizeBicubicGrad", "ResizeArea")
