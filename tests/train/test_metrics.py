"""tf.metrics: local variables + update ops, streamed over batches and compared with
scikit-learn / numpy on the whole data."""

import numpy as np
import pytest
from sklearn import metrics as skm

import rill.graph as rg
from rill.exec import Session
from rill.train import metrics

rng = np.random.default_rng(5)


def _stream(build, batches):
    """Runs each metric's update op once per batch, then reads the values."""
    with rg.Graph().as_default():
        ph = [rg.placeholder(rg.as_dtype(b.dtype), [None]) for b in batches[0]]
        pairs = build(*ph)
        s = Session()
        s.run(rg.local_variables_initializer())
        last = None
        for batch in batches:
            last = s.run([u for _, u in pairs], dict(zip(ph, batch)))
        values = s.run([v for v, _ in pairs])
        assert all(v.name.split(":")[0] for v in rg.local_variables())
        assert not rg.trainable_variables()
        return values, last


def _split(*arrays):
    return [tuple(a[:60] for a in arrays), tuple(a[60:] for a in arrays)]


def test_classification_metrics_match_sklearn():
    labels = rng.integers(0, 2, 100).astype(np.int64)
    preds = rng.integers(0, 2, 100).astype(np.int64)

    def build(lab, pred):
        return [
            metrics.accuracy(lab, pred),
            metrics.precision(lab, pred),
            metrics.recall(lab, pred),
            metrics.true_positives(lab, pred),
            metrics.false_positives(lab, pred),
            metrics.true_negatives(lab, pred),
            metrics.false_negatives(lab, pred),
        ]

    values, last = _stream(build, _split(labels, preds))
    tn, fp, fn, tp = skm.confusion_matrix(labels, preds).ravel()
    want = [skm.accuracy_score(labels, preds), skm.precision_score(labels, preds),
            skm.recall_score(labels, preds), tp, fp, tn, fn]  # fmt: skip
    np.testing.assert_allclose(values, want, rtol=1e-6)
    np.testing.assert_allclose(last, want, rtol=1e-6)  # the last update returns the total


def test_regression_metrics_and_weighted_mean():
    y = rng.normal(size=100).astype(np.float32)
    p = (y + rng.normal(scale=0.3, size=100)).astype(np.float32)

    def build(a, b):
        return [
            metrics.mean_squared_error(a, b),
            metrics.mean_absolute_error(a, b),
            metrics.root_mean_squared_error(a, b),
            metrics.mean(a, weights=rg.abs(b)),
        ]

    values, _ = _stream(build, _split(y, p))
    mse = np.mean((y - p) ** 2)
    np.testing.assert_allclose(
        values,
        [mse, np.mean(np.abs(y - p)), np.sqrt(mse), np.average(y, weights=np.abs(p))],
        rtol=1e-5,
    )


def test_auc_roc_and_pr_close_to_sklearn():
    labels = rng.integers(0, 2, 100).astype(np.int64)
    scores = np.clip(labels * 0.3 + rng.uniform(size=100) * 0.7, 0, 1).astype(np.float32)

    def build(lab, sc):
        return [metrics.auc(lab, sc, num_thresholds=1000),
                metrics.auc(lab, sc, num_thresholds=1000, curve="PR")]  # fmt: skip

    (roc, pr), _ = _stream(build, _split(labels, scores))
    assert abs(roc - skm.roc_auc_score(labels, scores)) < 5e-3
    assert abs(pr - skm.average_precision_score(labels, scores)) < 3e-2
    with rg.Graph().as_default(), pytest.raises(ValueError, match="curve must be"):
        metrics.auc([1], [0.5], curve="XY")


def test_mean_iou_matches_sklearn_jaccard():
    labels = rng.integers(0, 4, 100).astype(np.int64)
    preds = np.where(rng.uniform(size=100) < 0.6, labels, rng.integers(0, 4, 100))

    (iou,), _ = _stream(lambda a, b: [metrics.mean_iou(a, b, 4)], _split(labels, preds))
    assert iou == pytest.approx(skm.jaccard_score(labels, preds, average="macro"), rel=1e-5)


def test_metric_collections_and_reset():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None])
        m, up = metrics.mean(x, metrics_collections=["m"], updates_collections=["u"])
        assert rg.get_default_graph().get_collection("m") == [m]
        assert rg.get_default_graph().get_collection("u") == [up]
        assert len(rg.get_default_graph().get_collection("metric_variables")) == 2
        s = Session()
        s.run(rg.local_variables_initializer())
        s.run(up, {x: [1.0, 3.0]})
        assert float(s.run(m)) == 2.0
        s.run(rg.local_variables_initializer())
        assert float(s.run(m)) == 0.0
        with pytest.raises(ValueError, match="same shape"):
            metrics.accuracy(rg.constant([1, 2]), rg.constant([1, 2, 3]))


def test_threshold_and_per_class_metrics():
    labels = rng.integers(0, 2, 100).astype(np.int64)
    scores = rng.uniform(size=100).astype(np.float32)
    th = [0.25, 0.5, 0.75]

    def build(lab, sc):
        return [
            metrics.true_positives_at_thresholds(lab, sc, th),
            metrics.false_positives_at_thresholds(lab, sc, th),
            metrics.true_negatives_at_thresholds(lab, sc, th),
            metrics.false_negatives_at_thresholds(lab, sc, th),
            metrics.precision_at_thresholds(lab, sc, th),
            metrics.recall_at_thresholds(lab, sc, th),
            metrics.percentage_below(sc, 0.5),
        ]

    (tp, fp, tn, fn, prec, rec, below), _ = _stream(build, _split(labels, scores))
    for i, t in enumerate(th):
        pred = scores > t
        assert tp[i] == np.sum(pred & (labels == 1)) and fp[i] == np.sum(pred & (labels == 0))
        assert tn[i] == np.sum(~pred & (labels == 0)) and fn[i] == np.sum(~pred & (labels == 1))
        assert prec[i] == pytest.approx(skm.precision_score(labels, pred), rel=1e-5)
        assert rec[i] == pytest.approx(skm.recall_score(labels, pred), rel=1e-5)
    assert below == pytest.approx(np.mean(scores < 0.5))

    classes = rng.integers(0, 3, 100).astype(np.int64)
    guess = np.where(rng.uniform(size=100) < 0.7, classes, rng.integers(0, 3, 100))
    (mpca,), _ = _stream(lambda a, b: [metrics.mean_per_class_accuracy(a, b, 3)],
                         _split(classes, guess))  # fmt: skip
    per_class = [np.mean(guess[classes == c] == c) for c in range(3)]
    assert mpca == pytest.approx(np.mean(per_class), rel=1e-5)


def test_mean_tensor_relative_error_and_cosine_distance():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [2])
        m, up = metrics.mean_tensor(x)
        lab = rg.placeholder(rg.float32, [None])
        pred = rg.placeholder(rg.float32, [None])
        rel, rel_up = metrics.mean_relative_error(lab, pred, lab)
        a = rg.placeholder(rg.float32, [None, 2])
        b = rg.placeholder(rg.float32, [None, 2])
        cos, cos_up = metrics.mean_cosine_distance(a, b, dim=1)
        s = Session()
        s.run(rg.local_variables_initializer())
        s.run(up, {x: [1.0, 2.0]})
        s.run(up, {x: [3.0, 6.0]})
        np.testing.assert_allclose(s.run(m), [2.0, 4.0])
        s.run(rel_up, {lab: [2.0, 4.0], pred: [1.0, 5.0]})
        assert float(s.run(rel)) == pytest.approx(np.mean([0.5, 0.25]))
        s.run(cos_up, {a: [[1.0, 0.0], [0.0, 1.0]], b: [[1.0, 0.0], [1.0, 0.0]]})
        assert float(s.run(cos)) == pytest.approx(0.5)
