"""`tf.losses` of TensorFlow 1.x (rill.train.losses)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.train.losses import (
    Reduction,
    absolute_difference,
    add_loss,
    compute_weighted_loss,
    cosine_distance,
    get_losses,
    get_regularization_loss,
    get_regularization_losses,
    get_total_loss,
    hinge_loss,
    huber_loss,
    log_loss,
    mean_squared_error,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
    sparse_softmax_cross_entropy,
)
