"""TensorFlow's `tf.image` namespace: what rill.graph's ops can express (flips, transposes,
per-image standardization, dtype conversion). Resizing and cropping ops are not in rill's
catalogue yet.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     rg.image.flip_left_right(rg.ones([4, 5, 3])).shape
TensorShape([4, 5, 3])
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.ops import math_ops
from rill.graph.ops.array_ops import shape as shape_op
from rill.graph.ops.reduction_ops import reduce_mean, reduce_prod
from rill.graph.ops.reshape_ops import transpose
from rill.graph.ops.slice_ops import reverse_v2

__all__ = [
    "flip_left_right",
    "flip_up_down",
    "transpose_image",
    "per_image_standardization",
    "convert_image_dtype",
]


def _image(image, what: str) -> tuple[Tensor, int]:
    image = convert_to_tensor(image, name="image")
    rank = image.shape.rank
    if rank not in (3, 4):
        raise ValueError(
            f"{what}: image must be 3-D [h, w, c] or 4-D [n, h, w, c], got {image.shape}"
        )
    return image, rank


def flip_left_right(image, name=None) -> Tensor:
    """Reverses the width axis of an image or a batch of images."""
    g = get_default_graph()
    with g.name_scope(name or "flip_left_right"):
        image, rank = _image(image, "flip_left_right")
        return reverse_v2(image, [rank - 2])


def flip_up_down(image, name=None) -> Tensor:
    """Reverses the height axis of an image or a batch of images."""
    g = get_default_graph()
    with g.name_scope(name or "flip_up_down"):
        image, rank = _image(image, "flip_up_down")
        return reverse_v2(image, [rank - 3])


def transpose_image(image, name=None) -> Tensor:
    """Swaps height and width."""
    g = get_default_graph()
    with g.name_scope(name or "transpose_image"):
        image, rank = _image(image, "transpose_image")
        return transpose(image, [1, 0, 2] if rank == 3 else [0, 2, 1, 3])


def per_image_standardization(image, name=None) -> Tensor:
    """(x - mean) / max(stddev, 1/sqrt(N)) per image, N its number of elements."""
    g = get_default_graph()
    with g.name_scope(name or "per_image_standardization") as scope:
        image, rank = _image(image, "per_image_standardization")
        if not image.dtype.is_floating:
            image = math_ops.cast(image, dtypes.float32)
        axes = [-1, -2, -3]
        n = math_ops.cast(reduce_prod(shape_op(image)[-3:]), image.dtype)
        mean = reduce_mean(image, axes, keepdims=True)
        var = reduce_mean(math_ops.square(math_ops.subtract(image, mean)), axes, keepdims=True)
        adjusted = math_ops.maximum(math_ops.sqrt(var), math_ops.rsqrt(n))
        del rank
        return math_ops.truediv(math_ops.subtract(image, mean), adjusted, name=scope)


def convert_image_dtype(image, dtype, saturate: bool = False, name=None) -> Tensor:
    """Converts between float images in [0, 1] and integer images in [0, MAX], scaling as
    TensorFlow does (float -> float and int -> int of the same type are casts)."""
    g = get_default_graph()
    with g.name_scope(name or "convert_image") as scope:
        image = convert_to_tensor(image, name="image")
        dtype = dtypes.as_dtype(dtype)
        src = image.dtype
        if src is dtype:
            return math_ops.cast(image, dtype, name=scope)
        if src.is_floating and dtype.is_floating:
            return math_ops.cast(image, dtype, name=scope)
        if src.is_integer and dtype.is_floating:
            scale = constant(1.0 / src.max, dtype=dtype)
            return math_ops.multiply(math_ops.cast(image, dtype), scale, name=scope)
        if src.is_floating and dtype.is_integer:
            scaled = math_ops.multiply(image, constant(dtype.max + 0.5, dtype=src))
            if saturate:
                scaled = math_ops.minimum(
                    math_ops.maximum(scaled, constant(0.0, dtype=src)),
                    constant(float(dtype.max), dtype=src),
                )
            return math_ops.cast(scaled, dtype, name=scope)
        raise ValueError(f"convert_image_dtype: {src.name} to {dtype.name} is not supported")
