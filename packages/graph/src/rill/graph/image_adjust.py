"""The rest of TF1's `tf.image` that is a composition of other ops: brightness, contrast and gamma
(fixed and random), random flips, rotations, crops and pads to a box, central crops,
crop-or-pad resizing, grayscale conversion, total variation and image gradients (the CIFAR-10
style data augmentation of TF1 input pipelines). Images are [h, w, c] or [n, h, w, c]; as in
TensorFlow, brightness, contrast and grayscale work in float and convert back to the image's
dtype (saturating).

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     img = rg.reshape(rg.range(12.0), [2, 3, 2])
...     Session().run(crop_to_bounding_box(img, 1, 1, 1, 2))[..., 0]
array([[ 8., 10.]], dtype=float32)
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Tensor, constant, convert_to_tensor, get_default_graph
from rill.graph.image import _image, convert_image_dtype, flip_left_right, flip_up_down
from rill.graph.image import transpose_image as transpose

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "central_crop",
    "crop_to_bounding_box",
    "grayscale_to_rgb",
    "image_gradients",
    "pad_to_bounding_box",
    "random_brightness",
    "random_contrast",
    "random_flip_left_right",
    "random_flip_up_down",
    "resize_image_with_crop_or_pad",
    "resize_with_crop_or_pad",
    "rgb_to_grayscale",
    "rot90",
    "total_variation",
    "transpose",
]


def _rg():
    import rill.graph as rg

    return rg


def _in_float(image, fn, name: str) -> Tensor:
    """fn applied to the image as float32 (as is for float images), converted back."""
    with get_default_graph().name_scope(name):
        image = convert_to_tensor(image, name="image")
        orig = image.dtype
        flt = image if orig.is_floating else convert_image_dtype(image, dtypes.float32)
        out = fn(flt)
        return out if orig.is_floating else convert_image_dtype(out, orig, saturate=True)


def adjust_brightness(image, delta) -> Tensor:
    """image + delta, in float (integer images are scaled to [0, 1] and back)."""
    rg = _rg()
    return _in_float(image, lambda x: x + rg.cast(delta, x.dtype), "adjust_brightness")


def adjust_contrast(images, contrast_factor) -> Tensor:
    """(x - mean) * contrast_factor + mean, the mean per image and channel."""
    rg = _rg()

    def fn(x):
        mean = rg.reduce_mean(x, axis=[-3, -2], keepdims=True)
        return (x - mean) * rg.cast(contrast_factor, x.dtype) + mean

    return _in_float(images, fn, "adjust_contrast")


def adjust_gamma(image, gamma=1, gain=1) -> Tensor:
    """gain * image ** gamma, on [0, 1] (integer images scaled by their maximum and back)."""
    rg = _rg()
    with get_default_graph().name_scope("adjust_gamma"):
        image = convert_to_tensor(image, name="image")
        if isinstance(gamma, (int, float)) and gamma < 0:
            raise ValueError("Gamma should be a non-negative real number.")
        if image.dtype.is_floating:
            return rg.cast(gain, image.dtype) * rg.pow(image, rg.cast(gamma, image.dtype))
        scale = float(image.dtype.max)
        x = rg.cast(image, dtypes.float32) / scale
        out = scale * gain * rg.pow(x, rg.cast(gamma, dtypes.float32))
        return rg.cast(out, image.dtype)


def random_brightness(image, max_delta, seed=None) -> Tensor:
    """adjust_brightness by a delta drawn from [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    rg = _rg()
    delta = rg.random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


def random_contrast(image, lower, upper, seed=None) -> Tensor:
    """adjust_contrast by a factor drawn from [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    rg = _rg()
    factor = rg.random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


def _random_flip(image, seed, name: str, flip) -> Tensor:
    rg = _rg()
    with get_default_graph().name_scope(name):
        image, rank = _image(image, name)
        if rank == 3:
            coin = rg.less(rg.random_uniform([], 0, 1.0, seed=seed), 0.5)
            return rg.cond(coin, lambda: flip(image), lambda: image)
        n = rg.shape(image)[0]
        coins = rg.round(rg.random_uniform(rg.reshape(n, [1]), 0, 1.0, seed=seed))
        coins = rg.cast(rg.reshape(coins, [-1, 1, 1, 1]), image.dtype)
        return coins * flip(image) + (1 - coins) * image


def random_flip_left_right(image, seed=None) -> Tensor:
    """Each image mirrored left-right with probability 1/2."""
    return _random_flip(image, seed, "random_flip_left_right", flip_left_right)


def random_flip_up_down(image, seed=None) -> Tensor:
    """Each image flipped upside down with probability 1/2."""
    return _random_flip(image, seed, "random_flip_up_down", flip_up_down)


def rot90(image, k=1, name=None) -> Tensor:
    """The image rotated counter-clockwise by k quarter turns (k a Python int)."""
    rg = _rg()
    with get_default_graph().name_scope(name or "rot90"):
        image, rank = _image(image, "rot90")
        if not isinstance(k, int):
            raise TypeError("rot90: k must be a Python int in rill")
        h, w = rank - 3, rank - 2
        perm = list(range(rank))
        perm[h], perm[w] = perm[w], perm[h]
        k %= 4
        if k == 0:
            return image
        if k == 1:
            return rg.transpose(rg.reverse(image, [w]), perm)
        if k == 2:
            return rg.reverse(image, [h, w])
        return rg.reverse(rg.transpose(image, perm), [w])


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The [target_height, target_width] box of the image at (offset_height, offset_width)."""
    rg = _rg()
    with get_default_graph().name_scope("crop_to_bounding_box"):
        image, rank = _image(image, "crop_to_bounding_box")
        begin = [offset_height, offset_width, 0]
        size = [target_height, target_width, -1]
        if rank == 4:
            begin, size = [0, *begin], [-1, *size]
        return rg.slice(image, rg.stack(begin), rg.stack(size))


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The image in a zero [target_height, target_width] canvas at (offset_height,
    offset_width)."""
    rg = _rg()
    with get_default_graph().name_scope("pad_to_bounding_box"):
        image, rank = _image(image, "pad_to_bounding_box")
        shape = rg.shape(image)
        h, w = shape[rank - 3], shape[rank - 2]
        after_h = target_height - offset_height - h
        after_w = target_width - offset_width - w
        check = rg.assert_op(
            rg.reduce_all(
                rg.stack([after_h >= 0, after_w >= 0, offset_height >= 0, offset_width >= 0])
            ),  # fmt: skip
            ["pad_to_bounding_box: the target box must hold the image at the offset"],
        )
        rows = [rg.stack([offset_height, after_h]), rg.stack([offset_width, after_w]), [0, 0]]
        if rank == 4:
            rows = [[0, 0], *rows]
        with get_default_graph().control_dependencies([check]):
            return rg.pad(image, rg.stack([rg.cast(r, dtypes.int32) for r in rows]))


def resize_image_with_crop_or_pad(image, target_height, target_width) -> Tensor:
    """The image centred in a [target_height, target_width] box: cropped where it is larger,
    zero-padded where it is smaller."""
    rg = _rg()
    with get_default_graph().name_scope("resize_image_with_crop_or_pad"):
        image, rank = _image(image, "resize_image_with_crop_or_pad")
        shape = rg.shape(image)
        h, w = shape[rank - 3], shape[rank - 2]
        dh, dw = target_height - h, target_width - w
        crop_h, crop_w = rg.maximum(-dh // 2, 0), rg.maximum(-dw // 2, 0)
        pad_h, pad_w = rg.maximum(dh // 2, 0), rg.maximum(dw // 2, 0)
        cropped = crop_to_bounding_box(image, crop_h, crop_w, rg.minimum(target_height, h),
                                       rg.minimum(target_width, w))  # fmt: skip
        out = pad_to_bounding_box(cropped, pad_h, pad_w, target_height, target_width)
        if isinstance(target_height, int) and isinstance(target_width, int):
            static = [target_height, target_width, image.shape[-1]]
            out.set_shape([image.shape[0], *static] if rank == 4 else static)
        return out


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction) -> Tensor:
    """The central part of the image, central_fraction of its height and width (TF 1.15's
    rounding: the offset is truncated, the size what remains on both sides)."""
    if central_fraction <= 0.0 or central_fraction > 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    rg = _rg()
    with get_default_graph().name_scope("central_crop"):
        image, rank = _image(image, "central_crop")
        if central_fraction == 1.0:
            return image
        shape = rg.shape(image)
        h, w = shape[rank - 3], shape[rank - 2]
        hf, wf = rg.cast(h, dtypes.float64), rg.cast(w, dtypes.float64)
        top = rg.cast((hf - hf * central_fraction) / 2, dtypes.int32)
        left = rg.cast((wf - wf * central_fraction) / 2, dtypes.int32)
        return crop_to_bounding_box(image, top, left, h - 2 * top, w - 2 * left)


def rgb_to_grayscale(images, name=None) -> Tensor:
    """The luma of RGB images (ITU-R 601 weights), keeping a channel dimension of 1."""
    rg = _rg()

    def fn(x):
        weights = constant([0.2989, 0.5870, 0.1140], dtype=x.dtype)
        return rg.reduce_sum(x * weights, axis=-1, keepdims=True)

    return _in_float(images, fn, name or "rgb_to_grayscale")


def grayscale_to_rgb(images, name=None) -> Tensor:
    """A one-channel image repeated into three channels."""
    rg = _rg()
    with get_default_graph().name_scope(name or "grayscale_to_rgb"):
        images = convert_to_tensor(images, name="images")
        rank = images.shape.rank
        return rg.tile(images, [1] * (rank - 1) + [3])


def image_gradients(image) -> tuple[Tensor, Tensor]:
    """(dy, dx) of a batch of images: differences to the next row / column, 0 in the last."""
    rg = _rg()
    with get_default_graph().name_scope("image_gradients"):
        image, rank = _image(image, "image_gradients")
        if rank != 4:
            raise ValueError("image_gradients expects a 4-D batch [n, h, w, c]")
        dy = image[:, 1:, :, :] - image[:, :-1, :, :]
        dx = image[:, :, 1:, :] - image[:, :, :-1, :]
        dy = rg.concat([dy, rg.zeros_like(image[:, :1, :, :])], 1)
        dx = rg.concat([dx, rg.zeros_like(image[:, :, :1, :])], 2)
        return dy, dx


def total_variation(images, name=None) -> Tensor:
    """The sum of absolute differences of neighbouring pixels, per image (a scalar for one)."""
    rg = _rg()
    with get_default_graph().name_scope(name or "total_variation"):
        images, rank = _image(images, "total_variation")
        if rank == 3:
            dh = images[1:, :, :] - images[:-1, :, :]
            dw = images[:, 1:, :] - images[:, :-1, :]
            return rg.reduce_sum(rg.abs(dh)) + rg.reduce_sum(rg.abs(dw))
        dh = images[:, 1:, :, :] - images[:, :-1, :, :]
        dw = images[:, :, 1:, :] - images[:, :, :-1, :]
        return rg.reduce_sum(rg.abs(dh), axis=[1, 2, 3]) + rg.reduce_sum(rg.abs(dw), axis=[1, 2, 3])
