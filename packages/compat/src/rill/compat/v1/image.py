"""`tf.image` of TensorFlow 1.x: rill.graph.image and rill.graph.image_adjust (no decoding)."""

# ruff: noqa: F401, F403, E402 - a namespace of re-exports

# issue 18's image ops under TensorFlow 1's tf.image names
from rill.compat.v1._ops18 import ResizeMethod, resize_images

# tf.compat.v1.image.resize is resize_images under a second name (TF 1.14+).
resize = resize_images
from rill.graph.image import *
from rill.graph.image_adjust import *
from rill.graph.ops.composite_ops import random_crop
from rill.graph.ops.image_ops import (
    crop_and_resize,
    extract_image_patches,
    resize_area,
    resize_bicubic,
    resize_bilinear,
    resize_nearest_neighbor,
)
from rill.graph.ops.nms_ops import (
    non_max_suppression,
    non_max_suppression_padded,
    non_max_suppression_with_scores,
)
