"""TensorFlow-1's `tf.metrics`: streaming metrics as local variables plus an update op.

Each metric returns `(value, update_op)`: `update_op` adds a batch to the metric's accumulators
(local variables in the `local_variables` and `metric_variables` collections, zero after
`local_variables_initializer()`) and returns the updated value; `value` reads the metric
without changing it.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     acc, update = accuracy(rg.constant([1, 0, 1]), rg.constant([1, 1, 1]))
...     s = Session()
...     _ = s.run(rg.local_variables_initializer())
...     _ = s.run(update)
...     round(float(s.run(acc)), 4)
0.6667
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, constant, convert_to_tensor
from rill.graph.ops import math_ops
from rill.graph.ops.array_ops import ones_like
from rill.graph.ops.grad_ops import unsorted_segment_sum
from rill.graph.ops.logic_ops import equal, greater, logical_and, logical_not, select_v2
from rill.graph.ops.reduction_ops import reduce_sum
from rill.graph.ops.reshape_ops import reshape
from rill.graph.ops.state_ops import Variable
from rill.train.variable_scope import GraphKeys, variable_scope

__all__ = [
    "mean",
    "accuracy",
    "mean_squared_error",
    "mean_absolute_error",
    "root_mean_squared_error",
    "true_positives",
    "false_positives",
    "true_negatives",
    "false_negatives",
    "precision",
    "recall",
    "auc",
    "mean_iou",
    "mean_tensor",
    "mean_relative_error",
    "mean_cosine_distance",
    "percentage_below",
    "mean_per_class_accuracy",
    "true_positives_at_thresholds",
    "false_positives_at_thresholds",
    "true_negatives_at_thresholds",
    "false_negatives_at_thresholds",
    "precision_at_thresholds",
    "recall_at_thresholds",
]

_COLLECTIONS = [GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES]


def _local(name: str, shape, dtype=dtypes.float32) -> Variable:
    zeros = np.zeros(shape, dtype.np)
    return Variable(zeros, trainable=False, collections=_COLLECTIONS, name=name, dtype=dtype)


def _safe_div(num, den, name=None) -> Tensor:
    """num / den, or 0 where den is 0 (TensorFlow's metrics' _safe_div)."""
    zero = constant(0.0, dtype=num.dtype)
    pos = greater(den, zero)
    safe = select_v2(pos, den, ones_like(den))
    return select_v2(pos, math_ops.truediv(num, safe), zero, name=name)


def _collect(value, update, metrics_collections, updates_collections):
    g = value.graph
    for key in metrics_collections or ():
        g.add_to_collection(key, value)
    for key in updates_collections or ():
        g.add_to_collection(key, update)
    return value, update


def _weights(values: Tensor, weights) -> Tensor:
    if weights is None:
        return ones_like(values)
    w = math_ops.cast(convert_to_tensor(weights), values.dtype)
    return math_ops.multiply(w, ones_like(values))


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen: total / count (`tf.metrics.mean`)."""
    with variable_scope(name, "mean", (values, weights)):
        values = math_ops.cast(convert_to_tensor(values), dtypes.float32)
        total = _local("total", [])
        count = _local("count", [])
        w = _weights(values, weights)
        update_total = total.assign_add(reduce_sum(math_ops.multiply(values, w)))
        update_count = count.assign_add(reduce_sum(w))
        value = _safe_div(total.read_value(), count.read_value(), name="value")
        update = _safe_div(update_total, update_count, name="update_op")
        return _collect(value, update, metrics_collections, updates_collections)


def _check_same_shape(labels: Tensor, predictions: Tensor, what: str) -> None:
    if not labels.shape.is_compatible_with(predictions.shape):
        raise ValueError(
            f"{what}: labels {labels.shape} and predictions {predictions.shape} must have the "
            "same shape"
        )


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):  # fmt: skip
    """The fraction of predictions equal to labels (`tf.metrics.accuracy`)."""
    with variable_scope(name, "accuracy", (labels, predictions, weights)):
        predictions = convert_to_tensor(predictions)
        labels = math_ops.cast(convert_to_tensor(labels), predictions.dtype)
        _check_same_shape(labels, predictions, "accuracy")
        hits = math_ops.cast(equal(labels, predictions), dtypes.float32)
        return mean(hits, weights, metrics_collections, updates_collections, name="mean")


def _pointwise(fn, default, labels, predictions, weights, mc, uc, name):
    with variable_scope(name, default, (labels, predictions, weights)):
        predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
        labels = math_ops.cast(convert_to_tensor(labels), dtypes.float32)
        _check_same_shape(labels, predictions, default)
        return mean(fn(labels, predictions), weights, mc, uc, name="mean")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):  # fmt: skip
    """The running mean of (labels - predictions)² (`tf.metrics.mean_squared_error`)."""
    return _pointwise(
        math_ops.squared_difference, "mean_squared_error", labels, predictions, weights,
        metrics_collections, updates_collections, name,
    )  # fmt: skip


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):  # fmt: skip
    """The running mean of |labels - predictions| (`tf.metrics.mean_absolute_error`)."""
    return _pointwise(
        lambda a, b: math_ops.abs(math_ops.subtract(a, b)), "mean_absolute_error", labels,
        predictions, weights, metrics_collections, updates_collections, name,
    )  # fmt: skip


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):  # fmt: skip
    """sqrt of the running mean squared error (`tf.metrics.root_mean_squared_error`)."""
    with variable_scope(name, "root_mean_squared_error", (labels, predictions, weights)):
        mse, update = mean_squared_error(labels, predictions, weights, name="mse")
        value, update = math_ops.sqrt(mse), math_ops.sqrt(update)
        return _collect(value, update, metrics_collections, updates_collections)


def _bool(x) -> Tensor:
    x = convert_to_tensor(x)
    return x if x.dtype is dtypes.bool_ else math_ops.cast(x, dtypes.bool_)


def _count(default, cond_fn, labels, predictions, weights, mc, uc, name):
    with variable_scope(name, default, (labels, predictions, weights)):
        labels, predictions = _bool(labels), _bool(predictions)
        _check_same_shape(labels, predictions, default)
        hit = math_ops.cast(cond_fn(labels, predictions), dtypes.float32)
        count = _local("count", [])
        update = count.assign_add(reduce_sum(math_ops.multiply(hit, _weights(hit, weights))))
        return _collect(count.read_value(), update, mc, uc)


def true_positives(labels, predictions, weights=None, metrics_collections=None,
                   updates_collections=None, name=None):  # fmt: skip
    """The (weighted) count of labels and predictions both true."""
    return _count("true_positives", logical_and, labels, predictions, weights,
                  metrics_collections, updates_collections, name)  # fmt: skip


def false_positives(labels, predictions, weights=None, metrics_collections=None,
                    updates_collections=None, name=None):  # fmt: skip
    """The (weighted) count of predictions true where labels are false."""
    return _count("false_positives", lambda a, b: logical_and(logical_not(a), b), labels,
                  predictions, weights, metrics_collections, updates_collections, name)  # fmt: skip


def true_negatives(labels, predictions, weights=None, metrics_collections=None,
                   updates_collections=None, name=None):  # fmt: skip
    """The (weighted) count of labels and predictions both false."""
    return _count("true_negatives", lambda a, b: logical_and(logical_not(a), logical_not(b)),
                  labels, predictions, weights, metrics_collections, updates_collections,
                  name)  # fmt: skip


def false_negatives(labels, predictions, weights=None, metrics_collections=None,
                    updates_collections=None, name=None):  # fmt: skip
    """The (weighted) count of predictions false where labels are true."""
    return _count("false_negatives", lambda a, b: logical_and(a, logical_not(b)), labels,
                  predictions, weights, metrics_collections, updates_collections, name)  # fmt: skip


def _ratio(default, second, labels, predictions, weights, mc, uc, name):
    with variable_scope(name, default, (labels, predictions, weights)):
        tp, tp_up = true_positives(labels, predictions, weights, name="true_positives")
        other, other_up = second(labels, predictions, weights)
        value = _safe_div(tp, math_ops.add(tp, other), name="value")
        update = _safe_div(tp_up, math_ops.add(tp_up, other_up), name="update_op")
        return _collect(value, update, mc, uc)


def precision(labels, predictions, weights=None, metrics_collections=None,
              updates_collections=None, name=None):  # fmt: skip
    """tp / (tp + fp) over everything seen (`tf.metrics.precision`)."""
    return _ratio("precision", false_positives, labels, predictions, weights,
                  metrics_collections, updates_collections, name)  # fmt: skip


def recall(labels, predictions, weights=None, metrics_collections=None,
           updates_collections=None, name=None):  # fmt: skip
    """tp / (tp + fn) over everything seen (`tf.metrics.recall`)."""
    return _ratio("recall", false_negatives, labels, predictions, weights,
                  metrics_collections, updates_collections, name)  # fmt: skip


def auc(labels, predictions, weights=None, num_thresholds: int = 200, metrics_collections=None,
        updates_collections=None, curve: str = "ROC", name=None,
        summation_method: str = "trapezoidal", thresholds=None):  # fmt: skip
    """The area under the ROC or PR curve, from confusion counts at `num_thresholds` evenly
    spaced thresholds in [0, 1] (`tf.metrics.auc`, trapezoidal rule)."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be 'ROC' or 'PR', got {curve!r}")
    if summation_method != "trapezoidal":
        raise ValueError(
            f"summation_method {summation_method!r} is not supported; rill implements 'trapezoidal'"
        )
    if thresholds is None:
        if num_thresholds < 2:
            raise ValueError(f"num_thresholds must be > 1, got {num_thresholds}")
        eps = 1e-7
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        thresholds = [0.0 - eps, *inner, 1.0 + eps]
    n = len(thresholds)
    with variable_scope(name, "auc", (labels, predictions, weights)):
        predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
        labels = _bool(labels)
        _check_same_shape(labels, predictions, "auc")
        pred = reshape(predictions, [-1, 1])
        lab = math_ops.cast(reshape(labels, [-1, 1]), dtypes.float32)
        w = reshape(_weights(predictions, weights), [-1, 1])
        above = math_ops.cast(greater(pred, constant(np.array([thresholds], np.float32))),
                              dtypes.float32)  # fmt: skip
        below = math_ops.subtract(constant(1.0), above)
        neg = math_ops.subtract(constant(1.0), lab)
        counts = {}
        updates = {}
        for key, a, b in (("tp", lab, above), ("fn", lab, below), ("tn", neg, below),
                          ("fp", neg, above)):  # fmt: skip
            var = _local(f"{'true' if key[0] == 't' else 'false'}_"
                         f"{'positives' if key[1] == 'p' else 'negatives'}", [n])  # fmt: skip
            batch = reduce_sum(math_ops.multiply(math_ops.multiply(a, b), w), 0)
            updates[key] = var.assign_add(batch)
            counts[key] = var.read_value()

        def area(c):
            eps = constant(1e-7)
            rec = math_ops.truediv(math_ops.add(c["tp"], eps),
                                   math_ops.add(math_ops.add(c["tp"], c["fn"]), eps))  # fmt: skip
            if curve == "ROC":
                x = math_ops.truediv(c["fp"], math_ops.add(math_ops.add(c["fp"], c["tn"]), eps))
                y = rec
            else:
                x = rec
                y = math_ops.truediv(math_ops.add(c["tp"], eps),
                                     math_ops.add(math_ops.add(c["tp"], c["fp"]), eps))  # fmt: skip
            dx = math_ops.subtract(x[: n - 1], x[1:])
            mid = math_ops.multiply(math_ops.add(y[: n - 1], y[1:]), constant(0.5))
            return reduce_sum(math_ops.multiply(dx, mid))

        value, update = area(counts), area(updates)
        return _collect(value, update, metrics_collections, updates_collections)


def mean_iou(labels, predictions, num_classes: int, weights=None, metrics_collections=None,
             updates_collections=None, name=None):  # fmt: skip
    """The mean over classes of intersection / union, from a running confusion matrix
    (`tf.metrics.mean_iou`); classes never seen are left out of the mean."""
    with variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions = math_ops.cast(reshape(convert_to_tensor(predictions), [-1]), dtypes.int64)
        labels = math_ops.cast(reshape(convert_to_tensor(labels), [-1]), dtypes.int64)
        k = int(num_classes)
        cm = _local("total_confusion_matrix", [k, k], dtypes.float64)
        w = (ones_like(math_ops.cast(labels, dtypes.float64)) if weights is None else
             math_ops.cast(reshape(convert_to_tensor(weights), [-1]), dtypes.float64))  # fmt: skip
        flat = math_ops.add(math_ops.multiply(labels, constant(np.int64(k))), predictions)
        batch = reshape(unsorted_segment_sum(w, flat, k * k), [k, k])
        update_cm = cm.assign_add(batch)

        def compute(m):
            rows = reduce_sum(m, 0)
            cols = reduce_sum(m, 1)
            diag = reduce_sum(math_ops.multiply(m, constant(np.eye(k))), 1)
            den = math_ops.subtract(math_ops.add(rows, cols), diag)
            seen = math_ops.cast(greater(den, constant(0.0, dtypes.float64)), dtypes.float64)
            iou = _safe_div(diag, den)
            return math_ops.cast(_safe_div(reduce_sum(iou), reduce_sum(seen)), dtypes.float32)

        value, update = compute(cm.read_value()), compute(update_cm)
        return _collect(value, update, metrics_collections, updates_collections)


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None,
                name=None):  # fmt: skip
    """The element-wise running mean of `values` (a tensor of a fixed shape)."""
    with variable_scope(name, "mean", (values, weights)):
        values = math_ops.cast(convert_to_tensor(values), dtypes.float32)
        if not values.shape.is_fully_defined():
            raise ValueError(f"mean_tensor needs values of a known shape, got {values.shape}")
        total = _local("total_tensor", values.shape.as_list())
        count = _local("count_tensor", values.shape.as_list())
        w = _weights(values, weights)
        up_total = total.assign_add(math_ops.multiply(values, w))
        up_count = count.assign_add(w)
        value = _safe_div(total.read_value(), count.read_value(), name="value")
        update = _safe_div(up_total, up_count, name="update_op")
        return _collect(value, update, metrics_collections, updates_collections)


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):  # fmt: skip
    """The running mean of |labels - predictions| / normalizer (0 where normalizer is 0)."""
    with variable_scope(name, "mean_relative_error", (predictions, labels, weights)):
        predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
        labels = math_ops.cast(convert_to_tensor(labels), dtypes.float32)
        _check_same_shape(labels, predictions, "mean_relative_error")
        norm = math_ops.cast(convert_to_tensor(normalizer), dtypes.float32)
        rel = _safe_div(math_ops.abs(math_ops.subtract(labels, predictions)),
                        math_ops.multiply(norm, ones_like(labels)))  # fmt: skip
        return mean(rel, weights, metrics_collections, updates_collections, name="mean")


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):  # fmt: skip
    """The running mean of 1 - sum(labels · predictions, dim) (unit-normalized inputs)."""
    with variable_scope(name, "mean_cosine_distance", (predictions, labels, weights)):
        predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
        labels = math_ops.cast(convert_to_tensor(labels), dtypes.float32)
        _check_same_shape(labels, predictions, "mean_cosine_distance")
        dist = math_ops.subtract(
            constant(1.0), reduce_sum(math_ops.multiply(labels, predictions), dim, keepdims=True)
        )
        return mean(dist, weights, metrics_collections, updates_collections, name="mean")


def percentage_below(values, threshold, weights=None, metrics_collections=None,
                     updates_collections=None, name=None):  # fmt: skip
    """The fraction of values below `threshold`."""
    from rill.graph.ops.logic_ops import less

    with variable_scope(name, "percentage_below_threshold", (values, weights)):
        values = math_ops.cast(convert_to_tensor(values), dtypes.float32)
        below = math_ops.cast(less(values, constant(float(threshold))), dtypes.float32)
        return mean(below, weights, metrics_collections, updates_collections, name="mean")


def mean_per_class_accuracy(labels, predictions, num_classes: int, weights=None,
                            metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """The mean over classes of each class's accuracy (classes never seen count 0, as in
    TensorFlow)."""
    with variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = math_ops.cast(reshape(convert_to_tensor(labels), [-1]), dtypes.int64)
        predictions = math_ops.cast(reshape(convert_to_tensor(predictions), [-1]), dtypes.int64)
        k = int(num_classes)
        total = _local("total", [k])
        count = _local("count", [k])
        w = (ones_like(math_ops.cast(labels, dtypes.float32)) if weights is None else
             math_ops.cast(reshape(convert_to_tensor(weights), [-1]), dtypes.float32))  # fmt: skip
        hit = math_ops.multiply(math_ops.cast(equal(labels, predictions), dtypes.float32), w)
        up_total = total.assign_add(unsorted_segment_sum(w, labels, k))
        up_count = count.assign_add(unsorted_segment_sum(hit, labels, k))

        def compute(tot, cnt):
            return reduce_sum(_safe_div(cnt, tot)) * (1.0 / k)

        value = compute(total.read_value(), count.read_value())
        update = compute(up_total, up_count)
        return _collect(value, update, metrics_collections, updates_collections)


def _at_thresholds(keys, labels, predictions, thresholds, weights):
    """Local [len(thresholds)] counts of the confusion entries `keys` and their updates."""
    predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
    labels = _bool(labels)
    _check_same_shape(labels, predictions, "metrics at thresholds")
    pred = reshape(predictions, [-1, 1])
    lab = math_ops.cast(reshape(labels, [-1, 1]), dtypes.float32)
    w = reshape(_weights(predictions, weights), [-1, 1])
    above = math_ops.cast(greater(pred, constant(np.array([thresholds], np.float32))),
                          dtypes.float32)  # fmt: skip
    below = math_ops.subtract(constant(1.0), above)
    neg = math_ops.subtract(constant(1.0), lab)
    parts = {"tp": (lab, above), "fn": (lab, below), "tn": (neg, below), "fp": (neg, above)}
    names = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
             "fp": "false_positives"}  # fmt: skip
    values, updates = {}, {}
    for key in keys:
        a, b = parts[key]
        var = _local(names[key], [len(thresholds)])
        updates[key] = var.assign_add(reduce_sum(math_ops.multiply(math_ops.multiply(a, b), w), 0))
        values[key] = var.read_value()
    return values, updates


def _count_at_thresholds(key, default, labels, predictions, thresholds, weights, mc, uc, name):
    with variable_scope(name, default, (predictions, labels, weights)):
        values, updates = _at_thresholds([key], labels, predictions, list(thresholds), weights)
        return _collect(values[key], updates[key], mc, uc)


def true_positives_at_thresholds(labels, predictions, thresholds, weights=None,
                                 metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Per threshold t, the (weighted) count of positive labels with prediction > t."""
    return _count_at_thresholds("tp", "true_positives", labels, predictions, thresholds,
                                weights, metrics_collections, updates_collections, name)  # fmt: skip


def false_positives_at_thresholds(labels, predictions, thresholds, weights=None,
                                  metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Per threshold t, the count of negative labels with prediction > t."""
    return _count_at_thresholds("fp", "false_positives", labels, predictions, thresholds,
                                weights, metrics_collections, updates_collections, name)  # fmt: skip


def true_negatives_at_thresholds(labels, predictions, thresholds, weights=None,
                                 metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Per threshold t, the count of negative labels with prediction <= t."""
    return _count_at_thresholds("tn", "true_negatives", labels, predictions, thresholds,
                                weights, metrics_collections, updates_collections, name)  # fmt: skip


def false_negatives_at_thresholds(labels, predictions, thresholds, weights=None,
                                  metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Per threshold t, the count of positive labels with prediction <= t."""
    return _count_at_thresholds("fn", "false_negatives", labels, predictions, thresholds,
                                weights, metrics_collections, updates_collections, name)  # fmt: skip


def _ratio_at_thresholds(other, default, labels, predictions, thresholds, weights, mc, uc, name):
    with variable_scope(name, default, (predictions, labels, weights)):
        values, updates = _at_thresholds(["tp", other], labels, predictions, list(thresholds),
                                         weights)  # fmt: skip
        eps = constant(1e-7)

        def ratio(c):
            return math_ops.truediv(c["tp"], math_ops.add(math_ops.add(c["tp"], c[other]), eps))

        return _collect(ratio(values), ratio(updates), mc, uc)


def precision_at_thresholds(labels, predictions, thresholds, weights=None,
                            metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Per threshold, tp / (tp + fp) (`tf.metrics.precision_at_thresholds`)."""
    return _ratio_at_thresholds("fp", "precision_at_thresholds", labels, predictions,
                                thresholds, weights, metrics_collections, updates_collections,
                                name)  # fmt: skip


def recall_at_thresholds(labels, predictions, thresholds, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):  # fmt: skip
    """Per threshold, tp / (tp + fn) (`tf.metrics.recall_at_thresholds`)."""
    return _ratio_at_thresholds("fn", "recall_at_thresholds", labels, predictions, thresholds,
                                weights, metrics_collections, updates_collections, name)  # fmt: skip
