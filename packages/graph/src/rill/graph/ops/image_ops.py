"""Image-layout and resizing ops: SpaceToDepth and DepthToSpace (blocks of pixels moved into
channels and back, NHWC or NCHW), SpaceToBatchND and BatchToSpaceND (blocks of the spatial
dimensions moved into the batch and back, with padding and cropping), ResizeBilinear and
ResizeNearestNeighbor (with TensorFlow's align_corners / half_pixel_centers pixel mappings) and
their gradients.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 4, 6, 3])
...     d = space_to_depth(x, 2)
...     s = depth_to_space(d, 2)
>>> d.shape, s.shape
(TensorShape([None, 2, 3, 12]), TensorShape([None, 4, 6, 3]))
"""

from __future__ import annotations

import numpy as np

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = [
    "space_to_depth",
    "depth_to_space",
    "space_to_batch_nd",
    "batch_to_space_nd",
    "resize_bilinear",
    "resize_nearest_neighbor",
    "resize_bicubic",
    "resize_area",
    "extract_image_patches",
    "crop_and_resize",
]

_FORMAT = 'data_format: {"NHWC", "NCHW", "NCHW_VECT_C"} = "NHWC"'


def _blocks_shape(to_depth: bool):
    def shape(op):
        s = op._inputs[0].shape
        if s.rank is None:
            return [unknown_shape()]
        if s.rank != 4:
            raise ValueError(f"input must have rank 4, got shape {s}")
        b, fmt = op.attrs["block_size"], op.attrs["data_format"]
        if fmt == "NCHW_VECT_C":
            raise ValueError("data_format NCHW_VECT_C is not supported")
        n, h, w, c = (s[0], s[1], s[2], s[3]) if fmt == "NHWC" else (s[0], s[2], s[3], s[1])
        if to_depth:
            for what, d in (("height", h), ("width", w)):
                if d is not None and d % b:
                    raise ValueError(f"{what} {d} is not divisible by block_size {b}")
            h, w, c = (None if h is None else h // b, None if w is None else w // b,
                       None if c is None else c * b * b)  # fmt: skip
        else:
            if c is not None and c % (b * b):
                raise ValueError(f"depth {c} is not divisible by block_size² = {b * b}")
            h, w, c = (None if h is None else h * b, None if w is None else w * b,
                       None if c is None else c // (b * b))  # fmt: skip
        return [TensorShape([n, h, w, c] if fmt == "NHWC" else [n, c, h, w])]

    return shape


defop(
    "SpaceToDepth",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "block_size: int >= 2", _FORMAT],
    shape=_blocks_shape(True),
    doc="Each block_size × block_size block of pixels becomes one pixel with its values as "
    "channels (row-major within the block, then the channels).",
)
defop(
    "DepthToSpace",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "block_size: int >= 2", _FORMAT],
    shape=_blocks_shape(False),
    doc="The inverse of SpaceToDepth.",
)


def space_to_depth(input, block_size: int, data_format: str = "NHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"block_size": int(block_size), "data_format": data_format}
    return (
        get_default_graph()
        .create_op("SpaceToDepth", [input], attrs, name=name or "SpaceToDepth")
        .outputs[0]
    )


def depth_to_space(input, block_size: int, data_format: str = "NHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"block_size": int(block_size), "data_format": data_format}
    return (
        get_default_graph()
        .create_op("DepthToSpace", [input], attrs, name=name or "DepthToSpace")
        .outputs[0]
    )


def _space_batch_shape(to_batch: bool):
    def shape(op):
        x, bs, pads = op._inputs[0].shape, op._inputs[1].shape, op._inputs[2].shape
        if bs.rank not in (None, 1):
            raise ValueError(f"block_shape must be a vector, got shape {bs}")
        if pads.rank not in (None, 2) or (pads.rank == 2 and pads[1] not in (None, 2)):
            raise ValueError(f"paddings/crops must have shape [M, 2], got {pads}")
        block = constant_value(op._inputs[1])
        amounts = constant_value(op._inputs[2])
        if x.rank is None or block is None:
            return [unknown_shape() if x.rank is None else TensorShape([None] * x.rank)]
        block = [int(b) for b in np.asarray(block).reshape(-1)]
        m = len(block)
        if any(b < 1 for b in block):
            raise ValueError(f"block_shape must be positive, got {block}")
        if x.rank < m + 1:
            raise ValueError(f"input must have rank >= {m + 1}, got shape {x}")
        prod = int(np.prod(block))
        dims = list(x.dims)
        if amounts is None:
            spatial = [None] * m
        else:
            a = np.asarray(amounts).reshape(m, 2)
            spatial = []
            for i, (d, b) in enumerate(zip(dims[1 : m + 1], block)):
                if d is None:
                    spatial.append(None)
                elif to_batch:
                    padded = d + int(a[i, 0]) + int(a[i, 1])
                    if padded % b:
                        raise ValueError(
                            f"padded spatial dimension {i} ({padded}) is not divisible by "
                            f"block_shape[{i}] = {b}"
                        )
                    spatial.append(padded // b)
                else:
                    spatial.append(d * b - int(a[i, 0]) - int(a[i, 1]))
        n = dims[0]
        if to_batch:
            n = None if n is None else n * prod
        elif n is not None:
            if n % prod:
                raise ValueError(f"batch {n} is not divisible by prod(block_shape) = {prod}")
            n //= prod
        return [TensorShape([n, *spatial, *dims[m + 1 :]])]

    return shape


defop(
    "SpaceToBatchND",
    inputs=["input: T", "block_shape: Tblock_shape", "paddings: Tpaddings"],
    outputs=["output: T"],
    attrs=["T: type", "Tblock_shape: {int32, int64} = int32", "Tpaddings: {int32, int64} = int32"],
    shape=_space_batch_shape(True),
    doc="The spatial dimensions, padded, cut into block_shape blocks that move into the batch.",
)
defop(
    "BatchToSpaceND",
    inputs=["input: T", "block_shape: Tblock_shape", "crops: Tcrops"],
    outputs=["output: T"],
    attrs=["T: type", "Tblock_shape: {int32, int64} = int32", "Tcrops: {int32, int64} = int32"],
    shape=_space_batch_shape(False),
    doc="The inverse of SpaceToBatchND: batch blocks back into space, then cropped.",
)


def _resize_shape(op):
    x, size = op._inputs[0].shape, op._inputs[1]
    if x.rank not in (None, 4):
        raise ValueError(f"images must have rank 4 (NHWC), got shape {x}")
    if size.shape.rank not in (None, 1) or (
        size.shape.rank == 1 and size.shape[0] not in (None, 2)
    ):
        raise ValueError(f"size must be a vector of 2 values, got shape {size.shape}")
    v = constant_value(size)
    h, w = (None, None) if v is None else (int(v[0]), int(v[1]))
    if x.rank is None:
        return [TensorShape([None, h, w, None])]
    return [TensorShape([x[0], h, w, x[3]])]


_RESIZE_ATTRS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]
defop(
    "ResizeBilinear",
    inputs=["images: T", "size: int32"],
    outputs=["resized_images: float32"],
    attrs=[
        "T: {int8, uint8, int16, uint16, int32, int64, bfloat16, float16, float32, float64}",
        *_RESIZE_ATTRS,
    ],  # fmt: skip
    shape=_resize_shape,
    doc="Images resized to `size` by bilinear interpolation (float32 output).",
)
defop(
    "ResizeNearestNeighbor",
    inputs=["images: T", "size: int32"],
    outputs=["resized_images: T"],
    attrs=[
        "T: {int8, uint8, int16, uint16, int32, int64, float16, float32, float64, bfloat16}",
        *_RESIZE_ATTRS,
    ],  # fmt: skip
    shape=_resize_shape,
    doc="Images resized to `size` by taking the nearest pixel.",
)


def _resize_bilinear_grad_shape(op):
    return [op._inputs[1].shape]


defop(
    "ResizeBilinearGrad",
    inputs=["grads: float32", "original_image: T"],
    outputs=["output: T"],
    attrs=["T: {float32, bfloat16, float16, float64}", *_RESIZE_ATTRS],
    shape=_resize_bilinear_grad_shape,
    doc="The gradient of ResizeBilinear with respect to its images.",
)
defop(
    "ResizeNearestNeighborGrad",
    inputs=["grads: T", "size: int32"],
    outputs=["output: T"],
    attrs=["T: {uint8, int8, int32, float16, float32, float64, bfloat16}", *_RESIZE_ATTRS],
    shape=_resize_shape,
    doc="The gradient of ResizeNearestNeighbor: gradients summed back onto the pixels they "
    "were taken from (size is the original images' height and width).",
)


defop(
    "ResizeBicubic",
    inputs=["images: T", "size: int32"],
    outputs=["resized_images: float32"],
    attrs=[
        "T: {int8, uint8, int16, uint16, int32, int64, float16, float32, float64, bfloat16}",
        *_RESIZE_ATTRS,
    ],  # fmt: skip
    shape=_resize_shape,
    doc="Images resized by cubic convolution (Keys' a = -0.75, or -0.5 with half_pixel_centers, "
    "where taps outside the image are dropped and the weights renormalized).",
)
defop(
    "ResizeBicubicGrad",
    inputs=["grads: float32", "original_image: T"],
    outputs=["output: T"],
    attrs=["T: {float32, float64}", *_RESIZE_ATTRS],
    shape=_resize_bilinear_grad_shape,
    doc="The gradient of ResizeBicubic with respect to its images.",
)
defop(
    "ResizeArea",
    inputs=["images: T", "size: int32"],
    outputs=["resized_images: float32"],
    attrs=[
        "T: {int8, uint8, int16, uint16, int32, int64, float16, float32, float64, bfloat16}",
        "align_corners: bool = false",
    ],  # fmt: skip
    shape=_resize_shape,
    doc="Images resized by area averaging: each output pixel is the mean of the input area it "
    "covers, partial pixels weighted by their covered fraction.",
)


def space_to_batch_nd(input, block_shape, paddings, name=None) -> Tensor:  # noqa: A002
    return get_default_graph().create_op("SpaceToBatchND", [input, block_shape, paddings],
                                         name=name or "SpaceToBatchND").outputs[0]  # fmt: skip


def batch_to_space_nd(input, block_shape, crops, name=None) -> Tensor:  # noqa: A002
    return get_default_graph().create_op("BatchToSpaceND", [input, block_shape, crops],
                                         name=name or "BatchToSpaceND").outputs[0]  # fmt: skip


def _resize(op_type):
    def build(images, size, align_corners=False, half_pixel_centers=False, name=None) -> Tensor:
        attrs = {"align_corners": align_corners, "half_pixel_centers": half_pixel_centers}
        return get_default_graph().create_op(op_type, [images, size], attrs,
                                             name=name or op_type).outputs[0]  # fmt: skip

    build.__doc__ = f"{op_type}(images, size) (tf.compat.v1.image's resize)."
    return build


resize_bilinear = _resize("ResizeBilinear")
resize_nearest_neighbor = _resize("ResizeNearestNeighbor")
resize_bicubic = _resize("ResizeBicubic")


def resize_area(images, size, align_corners=False, name=None) -> Tensor:
    return get_default_graph().create_op("ResizeArea", [images, size],
                                         {"align_corners": align_corners},
                                         name=name or "ResizeArea").outputs[0]  # fmt: skip


# -- patches and crops ----------------------------------------------------------------------------


def _patches_shape(op):
    from rill.graph.ops.conv_ops import windowed_output_size

    x = op._inputs[0].shape.with_rank(4)
    a = op.attrs
    for name in ("ksizes", "strides", "rates"):
        v = a[name]
        if len(v) != 4 or v[0] != 1 or v[3] != 1:
            raise ValueError(f"{name} must be [1, r, c, 1], got {list(v)}")
    kh, kw = a["ksizes"][1:3]
    sh, sw = a["strides"][1:3]
    rh, rw = a["rates"][1:3]
    oh = windowed_output_size(x[1], kh, sh, rh, a["padding"], (0, 0))[0]
    ow = windowed_output_size(x[2], kw, sw, rw, a["padding"], (0, 0))[0]
    depth = None if x[3] is None else x[3] * kh * kw
    return [TensorShape([x[0], oh, ow, depth])]


defop(
    "ExtractImagePatches",
    inputs=["images: T"],
    outputs=["patches: T"],
    attrs=["ksizes: list(int) >= 4", "strides: list(int) >= 4", "rates: list(int) >= 4",
           "T: {bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
           "uint32, uint64, complex64, complex128, bool}", 'padding: {"SAME", "VALID"}'],
    shape=_patches_shape,
    doc="Each ksizes window (dilated by rates) flattened into the depth: patches[n, i, j] = the "
    "window's pixels in row-major order, channels innermost; SAME padding reads zeros.",
)  # fmt: skip
defop(
    "_ExtractImagePatchesGrad",
    inputs=["grad: T", "images: T"],
    outputs=["output: T"],
    attrs=["ksizes: list(int) >= 4", "strides: list(int) >= 4", "rates: list(int) >= 4",
           "T: {bfloat16, float16, float32, float64}", 'padding: {"SAME", "VALID"}'],
    shape=lambda op: [op._inputs[1].shape],
    doc="rill's gradient of ExtractImagePatches: each patch element added back onto its pixel.",
)  # fmt: skip


def _crop_shape(op):
    image, boxes, box_ind, size = (t.shape for t in op._inputs)
    image = image.with_rank(4)
    if boxes.rank not in (None, 2) or (boxes.rank == 2 and boxes[1] not in (None, 4)):
        raise ValueError(f"boxes must have shape [num_boxes, 4], got {boxes}")
    if box_ind.rank not in (None, 1):
        raise ValueError(f"box_ind must be a vector, got shape {box_ind}")
    v = constant_value(op._inputs[3])
    h, w = (None, None) if v is None else (int(v[0]), int(v[1]))
    n = boxes[0] if boxes.rank == 2 else None
    return [TensorShape([n, h, w, image[3]])]


_METHOD = 'method: {"bilinear", "nearest"} = "bilinear"'
defop(
    "CropAndResize",
    inputs=["image: T", "boxes: float32", "box_ind: int32", "crop_size: int32"],
    outputs=["crops: float32"],
    attrs=["T: {uint8, uint16, int8, int16, int32, int64, float16, float32, float64}", _METHOD,
           "extrapolation_value: float = 0.0"],
    shape=_crop_shape,
    doc="Each box (normalized y1, x1, y2, x2) of image box_ind, resized to crop_size; samples "
    "outside the image get extrapolation_value.",
)  # fmt: skip


def _crop_grad_image_shape(op):
    v = constant_value(op._inputs[3])
    if v is None:
        return [TensorShape([None] * 4)]
    return [TensorShape([int(d) for d in v])]


defop(
    "CropAndResizeGradImage",
    inputs=["grads: float32", "boxes: float32", "box_ind: int32", "image_size: int32"],
    outputs=["output: T"],
    attrs=["T: {float32, float16, float64}", _METHOD],
    shape=_crop_grad_image_shape,
    doc="CropAndResize's gradient with respect to the image.",
)
defop(
    "CropAndResizeGradBoxes",
    inputs=["grads: float32", "image: T", "boxes: float32", "box_ind: int32"],
    outputs=["output: float32"],
    attrs=["T: {uint8, uint16, int8, int16, int32, int64, float16, float32, float64}",
           'method: {"bilinear"} = "bilinear"'],
    shape=lambda op: [op._inputs[2].shape],
    doc="CropAndResize's gradient with respect to the boxes.",
)  # fmt: skip


def extract_image_patches(images, ksizes, strides, rates, padding, name=None) -> Tensor:
    attrs = {"ksizes": tuple(ksizes), "strides": tuple(strides), "rates": tuple(rates),
             "padding": padding}  # fmt: skip
    return get_default_graph().create_op("ExtractImagePatches", [images], attrs,
                                         name=name or "ExtractImagePatches").outputs[0]  # fmt: skip


def crop_and_resize(image, boxes, box_ind, crop_size, method="bilinear", extrapolation_value=0.0,
                    name=None) -> Tensor:  # fmt: skip
    attrs = {"method": method, "extrapolation_value": float(extrapolation_value)}
    return get_default_graph().create_op("CropAndResize", [image, boxes, box_ind, crop_size],
                                         attrs, name=name or "CropAndResize").outputs[0]  # fmt: skip
