"""`tf.data.experimental`: the AUTOTUNE constant and the few helpers rill has."""

from rill.train.data.iterator import get_output_classes, get_output_shapes, get_output_types
from rill.train.data.transforms import AUTOTUNE

__all__ = ["AUTOTUNE", "get_output_classes", "get_output_shapes", "get_output_types"]
