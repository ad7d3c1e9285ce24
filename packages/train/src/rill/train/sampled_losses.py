"""Sampled losses for large output vocabularies: `sampled_softmax_loss` and `nce_loss`
(TensorFlow's `tf.nn`), over output weights that may be sharded (a list or a
PartitionedVariable, read with embedding_lookup, so only the true and sampled rows move).

For a batch of `inputs` x (shape [batch, dim]) with `labels` (num_true true classes per row)
and S sampled classes s₁..s_S drawn by a candidate sampler with expected counts Q:

    logit(x, c) = w_c · x + b_c - log Q(c)           (subtract_log_q)
    sampled_softmax_loss = softmax cross entropy over [true logits, sampled logits] with
                           labels [1/num_true, ..., 0, ...]
    nce_loss             = Σ sigmoid cross entropy of the true logits against 1 and of the
                           sampled logits against 0

With `remove_accidental_hits`, a sampled class equal to one of the row's true classes gets
-FLT_MAX added to its logit (it does not count as a negative).

Full-softmax evaluation (what a sampled loss approximates in training):
`logits = matmul(inputs, weights, transpose_b=True) + biases` over every class — see
examples/word2vec.py, `full_softmax_loss`.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.ops import array_ops, gather_ops, math_ops, reshape_ops
from rill.graph.ops.candidate_sampling_ops import (
    compute_accidental_hits,
    log_uniform_candidate_sampler,
)
from rill.graph.ops.embedding_ops import embedding_lookup
from rill.graph.ops.matmul_ops import matmul
from rill.graph.ops.nn_ops import softmax_cross_entropy_with_logits_v2
from rill.graph.ops.reduction_ops import reduce_sum
from rill.graph.ops.slice_ops import slice as slice_op
from rill.train.losses import sigmoid_cross_entropy_with_logits

__all__ = ["compute_sampled_logits", "nce_loss", "sampled_softmax_loss"]


def compute_sampled_logits(
    weights,
    biases,
    labels,
    inputs,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values=None,
    subtract_log_q: bool = True,
    remove_accidental_hits: bool = False,
    partition_strategy: str = "mod",
    name: str | None = None,
    seed=None,
) -> tuple[Tensor, Tensor]:
    """(logits [batch, num_true + num_sampled], labels of the same shape): the true classes'
    logits first, then the sampled ones, as TensorFlow's `_compute_sampled_logits`.

    Args:
        weights: [num_classes, dim] output embeddings: a tensor, a list of shards or a
            PartitionedVariable.
        biases: [num_classes] biases, sharded like weights.
        labels: int [batch, num_true] true classes.
        inputs: [batch, dim] the layer below.
        sampled_values: a (sampled_candidates, true_expected_count, sampled_expected_count)
            triple; default: a LogUniformCandidateSampler with unique draws.
    """
    g = get_default_graph()
    with g.name_scope(name or "compute_sampled_logits"):
        labels = convert_to_tensor(labels, name="labels")
        if labels.dtype is not dtypes.int64:
            labels = math_ops.cast(labels, dtypes.int64)
        inputs = convert_to_tensor(inputs, name="inputs")
        labels_flat = reshape_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                labels, num_true, num_sampled, True, num_classes, seed=seed
            )
        sampled, true_expected, sampled_expected = (
            array_ops.stop_gradient(s) for s in sampled_values
        )
        sampled = math_ops.cast(sampled, dtypes.int64)
        all_ids = reshape_ops.concat([labels_flat, sampled], 0)
        # One lookup of the true and the sampled rows: each shard is read once.
        all_w = embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
        if all_w.dtype is not inputs.dtype:
            all_w = math_ops.cast(all_w, inputs.dtype)
        n_true = array_ops.size(labels_flat)
        true_w = slice_op(all_w, reshape_ops.stack([0, 0]), reshape_ops.stack([n_true, -1]))
        sampled_w = slice_op(all_w, reshape_ops.stack([n_true, 0]), [-1, -1])
        sampled_logits = matmul(inputs, sampled_w, transpose_b=True)
        all_b = embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype is not inputs.dtype:
            all_b = math_ops.cast(all_b, inputs.dtype)
        true_b = slice_op(all_b, reshape_ops.reshape(0, [1]), reshape_ops.reshape(n_true, [1]))
        sampled_b = slice_op(all_b, reshape_ops.reshape(n_true, [1]), [-1])
        # true logits: row i · each of its num_true true rows.
        dim = gather_ops.gather(array_ops.shape(true_w), [1])
        true_w = reshape_ops.reshape(true_w, reshape_ops.concat([[-1, num_true], dim], 0))
        true_logits = reduce_sum(reshape_ops.expand_dims(inputs, 1) * true_w, axis=2)
        true_logits = true_logits + reshape_ops.reshape(true_b, [-1, num_true])
        sampled_logits = sampled_logits + sampled_b
        if remove_accidental_hits:
            rows, cols, hit_weights = compute_accidental_hits(labels, sampled, num_true=num_true)
            where = reshape_ops.stack(
                [math_ops.cast(rows, dtypes.int64), math_ops.cast(cols, dtypes.int64)], axis=1
            )
            shape = math_ops.cast(array_ops.shape(sampled_logits), dtypes.int64)
            hits = gather_ops.scatter_nd(where, math_ops.cast(hit_weights, inputs.dtype), shape)
            sampled_logits = sampled_logits + hits
        if subtract_log_q:
            true_logits = true_logits - math_ops.log(math_ops.cast(true_expected, inputs.dtype))
            sampled_logits = sampled_logits - math_ops.log(
                math_ops.cast(sampled_expected, inputs.dtype)
            )
        logits = reshape_ops.concat([true_logits, sampled_logits], 1)
        out_labels = reshape_ops.concat(
            [
                array_ops.ones_like(true_logits) / np.array(num_true, inputs.dtype.np),
                array_ops.zeros_like(sampled_logits),
            ],
            1,
        )
        return logits, out_labels


def nce_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values=None,
    remove_accidental_hits: bool = False,
    partition_strategy: str = "mod",
    name: str = "nce_loss",
) -> Tensor:
    """Noise-contrastive estimation loss per example ([batch]): the sigmoid cross entropy of
    each true class against 1 and each sampled class against 0, on logits less log Q.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     w, b = rg.zeros([50, 8]), rg.zeros([50])
    ...     x = rg.placeholder(rg.float32, [None, 8])
    ...     nce_loss(w, b, [[3], [7]], x, num_sampled=5, num_classes=50).shape
    TensorShape([2])
    """
    logits, labels = compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name,
    )  # fmt: skip
    with get_default_graph().name_scope(name + "/"):
        losses = sigmoid_cross_entropy_with_logits(
            labels=labels, logits=logits, name="sampled_losses"
        )
        return reduce_sum(losses, axis=1)


def sampled_softmax_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values=None,
    remove_accidental_hits: bool = True,
    partition_strategy: str = "mod",
    name: str = "sampled_softmax_loss",
    seed=None,
) -> Tensor:
    """Sampled softmax loss per example ([batch]): the softmax cross entropy over the true and
    the sampled classes' logits (less log Q), with the true classes weighted 1/num_true."""
    logits, labels = compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name, seed=seed,
    )  # fmt: skip
    with get_default_graph().name_scope(name + "/"):
        return softmax_cross_entropy_with_logits_v2(
            labels=array_ops.stop_gradient(labels), logits=logits
        )
