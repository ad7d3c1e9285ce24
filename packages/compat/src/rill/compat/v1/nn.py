"""`tf.nn` of TensorFlow 1.x: rill.graph.nn's builders plus the ones rill.train owns (dropout,
RNNs, moments, sigmoid cross-entropy), with TF1's argument orders.

embedding_lookup (over one tensor, a list of shards or a PartitionedVariable; Figure 4 of the
paper) lives in rill.graph; nce_loss and sampled_softmax_loss in rill.train.
"""

# ruff: noqa: F401 - a namespace of re-exports

from __future__ import annotations

import numbers

from rill.compat.v1._nn_conv import (
    atrous_conv2d_transpose,
    avg_pool3d,
    avg_pool_v2,
    conv1d_transpose,
    conv3d,
    conv3d_backprop_filter_v2,
    conv3d_transpose,
    convolution,
    depth_to_space,
    max_pool3d,
    max_pool_v2,
    max_pool_with_argmax,
    pool,
    space_to_batch,
    space_to_depth,
    with_space_to_batch,
)
from rill.compat.v1._nn_stats import (
    batch_norm_with_global_normalization,
    collapse_repeated,
    ctc_greedy_decoder,
    normalize_moments,
    sufficient_statistics,
    weighted_moments,
)
from rill.graph.graph import convert_to_tensor
from rill.graph.nn import *  # noqa: F403
from rill.graph.nn import lrn
from rill.graph.ops import math_ops
from rill.graph.ops.candidate_sampling_ops import (  # noqa: F401 - tf.nn's names
    compute_accidental_hits,
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from rill.graph.ops.embedding_ops import (
    embedding_lookup,
    embedding_lookup_sparse,
    safe_embedding_lookup_sparse,
)
from rill.train import rnn_cell
from rill.train.layers.core import nn_dropout
from rill.train.layers.normalization import moments
from rill.train.losses import sigmoid_cross_entropy_with_logits
from rill.train.rnn import (
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)
from rill.train.rnn_raw import raw_rnn
from rill.train.sampled_losses import nce_loss, sampled_softmax_loss


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """TF1's `tf.nn.dropout(x, keep_prob)`: keeps each element with probability `keep_prob`
    and scales it by 1 / keep_prob; TF2's `rate` (= 1 - keep_prob) only as a keyword.

    Raises:
        ValueError: both or neither of keep_prob and rate, or a keep_prob outside (0, 1].
    """
    if (keep_prob is None) == (rate is None):
        raise ValueError(
            "dropout needs exactly one of keep_prob and rate; got "
            f"keep_prob={keep_prob!r}, rate={rate!r}"
        )
    if keep_prob is not None:
        if isinstance(keep_prob, numbers.Real) and not isinstance(keep_prob, bool):
            if not 0 < keep_prob <= 1:
                raise ValueError(
                    f"keep_prob must be a scalar tensor or a float in the range (0, 1], got "
                    f"{keep_prob!r}"
                )
            rate = 1.0 - float(keep_prob)
        else:
            keep = convert_to_tensor(keep_prob, dtype=convert_to_tensor(x).dtype)
            rate = math_ops.subtract(1.0, keep)
    return nn_dropout(x, rate=rate, noise_shape=noise_shape, seed=seed, name=name)
