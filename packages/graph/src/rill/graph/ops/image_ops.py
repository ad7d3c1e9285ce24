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
