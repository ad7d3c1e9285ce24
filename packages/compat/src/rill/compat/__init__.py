"""rill's compatibility layers: `rill.compat.v1` is TensorFlow 1.x's API."""
