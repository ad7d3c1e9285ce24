"""TF1's `tf.nn` statistics and sequence helpers, composed from rill's ops as TensorFlow composes
them: sufficient_statistics / normalize_moments / weighted_moments,
batch_norm_with_global_normalization, collapse_repeated and ctc_greedy_decoder."""

from __future__ import annotations

import rill.graph as rg
from rill.compat.v1._aliases import Assert
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.nn import batch_normalization
from rill.graph.ops.special_math_ops import div_no_nan

__all__ = [
    "batch_norm_with_global_normalization",
    "collapse_repeated",
    "ctc_greedy_decoder",
    "normalize_moments",
    "sufficient_statistics",
    "weighted_moments",
]


def _keep_dims(keep_dims, keepdims) -> bool:
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    value = keepdims if keepdims is not None else keep_dims
    return bool(value) if value is not None else False


def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """`tf.nn.sufficient_statistics`: (count, sum(x - shift), sum((x - shift)²), shift) over
    `axes`; the count is a constant when those dimensions are known."""
    axes = sorted(set(int(a) for a in axes))
    keep = _keep_dims(keep_dims, keepdims)
    with get_default_graph().name_scope(name or "sufficient_statistics"):
        x = convert_to_tensor(x, name="x")
        s = x.shape
        if s.rank is not None and all(s.dims[d] is not None for d in axes):
            count = 1
            for d in axes:
                count *= s.dims[d]
            counts = rg.constant(count, dtype=x.dtype)
        else:
            rank = rg.rank(x)
            positive = [a + rank if a < 0 else a for a in axes]
            dims = rg.gather(rg.cast(rg.shape(x), x.dtype), rg.stack(positive))
            counts = rg.reduce_prod(dims, name="count")
        if shift is not None:
            shift = convert_to_tensor(shift, name="shift")
            m_ss, v_ss = rg.subtract(x, shift), rg.squared_difference(x, shift)
        else:
            m_ss, v_ss = x, rg.square(x)
        m_ss = rg.reduce_sum(m_ss, axes, keepdims=keep, name="mean_ss")
        v_ss = rg.reduce_sum(v_ss, axes, keepdims=keep, name="var_ss")
    return counts, m_ss, v_ss, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """`tf.nn.normalize_moments`: (mean, variance) from sufficient statistics."""
    with get_default_graph().name_scope(name or "normalize"):
        divisor = rg.reciprocal(counts, name="divisor")
        if shift is not None:
            shifted_mean = rg.multiply(mean_ss, divisor, name="shifted_mean")
            mean = rg.add(shifted_mean, shift, name="mean")
        else:
            shifted_mean = rg.multiply(mean_ss, divisor, name="mean")
            mean = shifted_mean
        variance = rg.subtract(
            rg.multiply(variance_ss, divisor), rg.square(shifted_mean), name="variance"
        )
    return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """`tf.nn.weighted_moments`: the frequency-weighted mean and variance of x over axes (0
    where the weights sum to 0); float16 is computed in float32."""
    keep = _keep_dims(keep_dims, keepdims)
    with get_default_graph().name_scope(name or "weighted_moments"):
        x = convert_to_tensor(x, name="x")
        w = convert_to_tensor(frequency_weights, name="frequency_weights")
        needs_cast = x.dtype == rg.float16
        if needs_cast:
            x = rg.cast(x, rg.float32)
        if w.dtype != x.dtype:
            w = rg.cast(w, x.dtype)
        weighted_sum = rg.reduce_sum(w * x, axes, keepdims=True, name="weighted_input_sum")
        sum_of_weights = rg.reduce_sum(
            w + rg.zeros_like(x), axes, keepdims=True, name="sum_of_weights"
        )
        mean = div_no_nan(weighted_sum, sum_of_weights)
        distsq = rg.reduce_sum(
            w * rg.squared_difference(x, mean), axes, keepdims=True, name="weighted_distsq"
        )
        variance = div_no_nan(distsq, sum_of_weights)
        if not keep:
            mean, variance = rg.squeeze(mean, axis=axes), rg.squeeze(variance, axis=axes)
        if needs_cast:
            mean, variance = rg.cast(mean, rg.float16), rg.cast(variance, rg.float16)
        return mean, variance


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None,
                                         variance_epsilon=None, scale_after_normalization=None,
                                         name=None, input=None, mean=None,  # noqa: A002
                                         variance=None):  # fmt: skip
    """`tf.nn.batch_norm_with_global_normalization`: batch_normalization(t, m, v, beta, gamma)
    with gamma applied only when scale_after_normalization.

    Raises:
        ValueError: both spellings of an argument, or a missing one.
    """
    pairs = (("input", input, "t", t), ("mean", mean, "m", m), ("variance", variance, "v", v))
    for new_name, new, old_name, old in pairs:
        if new is not None and old is not None:
            raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    t = input if input is not None else t
    m = mean if mean is not None else m
    v = variance if variance is not None else v
    if any(a is None for a in (t, m, v, beta, gamma, variance_epsilon)):
        raise ValueError("batch_norm_with_global_normalization needs t, m, v, beta, gamma and "
                         "variance_epsilon")  # fmt: skip
    if scale_after_normalization is None:
        raise ValueError("batch_norm_with_global_normalization needs scale_after_normalization")
    return batch_normalization(
        t, m, v, beta, gamma if scale_after_normalization else None, variance_epsilon,
        name=name or "batchnorm",
    )  # fmt: skip


def collapse_repeated(labels, seq_length, name=None):
    """`tf.nn.collapse_repeated`: each row of labels [batch, max_time] with runs of one label
    merged (within seq_length), left-aligned and zero-padded; returns (labels, new lengths)."""
    with get_default_graph().name_scope(name or "collapse_repeated_labels"):
        labels = convert_to_tensor(labels, name="labels")
        seq_length = convert_to_tensor(seq_length, name="seq_length")
        label_mask = rg.concat(
            [rg.ones_like(labels[:, :1], dtype=rg.bool_),
             rg.not_equal(labels[:, 1:], labels[:, :-1])],
            axis=1,
        )  # fmt: skip
        maxlen = labels.shape.dims[1] if labels.shape.rank == 2 else None
        maxlen = maxlen if maxlen is not None else rg.shape(labels)[1]
        label_mask = rg.logical_and(label_mask, rg.sequence_mask(seq_length, maxlen=maxlen))
        new_seq_len = rg.reduce_sum(rg.cast(label_mask, rg.int32), axis=1)
        new_maxlen = rg.reduce_max(new_seq_len)
        idx_mask = rg.sequence_mask(new_seq_len, maxlen=new_maxlen)
        flat_labels = rg.reshape(labels, [-1])
        flat_label_mask = rg.reshape(label_mask, [-1])
        flat_idx_mask = rg.reshape(idx_mask, [-1])
        idx = rg.range(rg.size(flat_idx_mask))
        flat = rg.scatter_nd(
            rg.expand_dims(rg.boolean_mask(idx, flat_idx_mask), axis=1),
            rg.boolean_mask(flat_labels, flat_label_mask),
            rg.shape(flat_idx_mask),
        )
        batch_size = rg.shape(labels)[0]
        out = rg.reshape(flat, rg.stack([batch_size, new_maxlen]))
        return out, rg.cast(new_seq_len, seq_length.dtype)


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True, blank_index=None):
    """`tf.nn.ctc_greedy_decoder`: best-path CTC decoding of time-major logits
    [max_time, batch, num_classes]: the top class per step, repeats merged when merge_repeated,
    blanks (blank_index, default num_classes - 1) dropped.

    Returns:
        ([decoded], neg_sum_logits): decoded an int64 SparseTensor [batch, longest decoding],
        neg_sum_logits [batch, 1] the negated sum of each step's top logit.

    Raises:
        InvalidArgumentError (at run time): a sequence_length above max_time.
    """
    g = get_default_graph()
    with g.name_scope("CTCGreedyDecoder"):
        x = convert_to_tensor(inputs, name="inputs")
        x.shape.with_rank(3)
        seq_len = rg.cast(convert_to_tensor(sequence_length, name="sequence_length"), rg.int64)
        shape = rg.shape(x, out_type=rg.int64)
        max_time, batch, num_classes = shape[0], shape[1], shape[2]
        check = Assert(
            rg.reduce_all(rg.less_equal(seq_len, max_time)),
            ["sequence_length(b) must be <= max_time; sequence_length:", seq_len,
             "max_time:", max_time],
        )  # fmt: skip
        with g.control_dependencies([check]):
            x = rg.identity(x)
        blank = num_classes - 1 if blank_index is None or blank_index == -1 else blank_index
        if blank_index is not None and blank_index < -1:
            blank = num_classes + blank_index
        blank = rg.cast(blank, rg.int64)
        cls = rg.argmax(x, axis=2, output_type=rg.int64)
        top = rg.reduce_max(x, axis=2)
        valid = rg.less(rg.expand_dims(rg.range(max_time), 1), rg.expand_dims(seq_len, 0))
        neg_sum = -rg.reduce_sum(rg.where(valid, top, rg.zeros_like(top)), axis=0)
        keep = rg.logical_and(valid, rg.not_equal(cls, blank))
        if merge_repeated:
            prev = rg.concat([rg.fill(rg.stack([1, batch]), rg.constant(-1, rg.int64)),
                              cls[:-1]], axis=0)  # fmt: skip
            keep = rg.logical_and(keep, rg.not_equal(cls, prev))
        keep_bt, cls_bt = rg.transpose(keep), rg.transpose(cls)
        where = rg.where(keep_bt)
        column = rg.cumsum(rg.cast(keep_bt, rg.int64), axis=1) - 1
        indices = rg.stack([where[:, 0], rg.gather_nd(column, where)], axis=1)
        values = rg.gather_nd(cls_bt, where)
        longest = rg.reduce_max(
            rg.concat([rg.reduce_sum(rg.cast(keep_bt, rg.int64), axis=1), [0]], axis=0)
        )
        decoded = rg.SparseTensor(indices, values, rg.stack([batch, longest]))
        return [decoded], rg.expand_dims(neg_sum, 1)
