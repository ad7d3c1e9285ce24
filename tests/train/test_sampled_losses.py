"""sampled_softmax_loss and nce_loss against a numpy transcription of their formulas on fixed
samples (one or several true classes, accidental hits removed or not, sharded output weights),
and their gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
import rill.train as rt
from rill.autodiff.checker import compute_gradient_error
from rill.exec import Session

C, DIM, B, S = 13, 4, 3, 5
RNG = np.random.default_rng(7)
W = RNG.standard_normal((C, DIM)) * 0.5
BIAS = RNG.standard_normal(C) * 0.1
X = RNG.standard_normal((B, DIM))
LABELS = {1: np.array([[2], [7], [12]]), 2: np.array([[2, 4], [7, 0], [12, 3]])}
SAMPLED = np.array([4, 9, 2, 11, 0])  # 4, 2 and 0 are true classes of some rows
TRUE_Q = {k: RNG.uniform(0.1, 0.9, v.shape) for k, v in LABELS.items()}
SAMPLED_Q = RNG.uniform(0.1, 0.9, S)
FLT_MAX = float(np.finfo(np.float32).max)


def numpy_logits(num_true, remove_hits):
    labels = LABELS[num_true]
    true_logits = np.einsum("bd,btd->bt", X, W[labels]) + BIAS[labels] - np.log(TRUE_Q[num_true])
    sampled_logits = X @ W[SAMPLED].T + BIAS[SAMPLED] - np.log(SAMPLED_Q)
    if remove_hits:
        for i in range(B):
            for j, s in enumerate(SAMPLED):
                if s in labels[i]:
                    sampled_logits[i, j] += -FLT_MAX
    logits = np.concatenate([true_logits, sampled_logits], 1)
    targets = np.concatenate([np.full((B, num_true), 1.0 / num_true), np.zeros((B, S))], 1)
    return logits, targets


def numpy_sampled_softmax(num_true, remove_hits):
    logits, targets = numpy_logits(num_true, remove_hits)
    m = logits.max(1, keepdims=True)
    log_softmax = logits - m - np.log(np.exp(logits - m).sum(1, keepdims=True))
    return -(targets * log_softmax).sum(1)


def numpy_nce(num_true, remove_hits):
    x, z = numpy_logits(num_true, remove_hits)
    return (np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))).sum(1)


def build(loss_fn, num_true, remove_hits, shards, strategy="mod"):
    """(loss, [weight placeholders], bias placeholder, input placeholder, feeds)."""
    if shards == 1:
        w_parts, b_parts = [W], [BIAS]
    elif strategy == "mod":
        w_parts = [W[p::shards] for p in range(shards)]
        b_parts = [BIAS[p::shards] for p in range(shards)]
    else:
        cut = np.cumsum([5, 4])[: shards - 1]
        w_parts, b_parts = np.split(W, cut), np.split(BIAS, cut)
    w = [rg.placeholder(rg.float64, p.shape, name=f"w{i}") for i, p in enumerate(w_parts)]
    b = [rg.placeholder(rg.float64, p.shape, name=f"b{i}") for i, p in enumerate(b_parts)]
    x = rg.placeholder(rg.float64, X.shape, name="x")
    sampled = (
        rg.constant(SAMPLED.astype(np.int64)),
        rg.constant(TRUE_Q[num_true].astype(np.float32)),
        rg.constant(SAMPLED_Q.astype(np.float32)),
    )
    loss = loss_fn(
        w if shards > 1 else w[0], b if shards > 1 else b[0], LABELS[num_true], x,
        num_sampled=S, num_classes=C, num_true=num_true, sampled_values=sampled,
        remove_accidental_hits=remove_hits, partition_strategy=strategy,
    )  # fmt: skip
    feeds = {**dict(zip(w, w_parts)), **dict(zip(b, b_parts)), x: X}
    return loss, w, b, x, feeds


# The expected counts went through float32 in the graph (the sampler ops' type).
def _q32():
    for k in TRUE_Q:
        TRUE_Q[k] = TRUE_Q[k].astype(np.float32).astype(np.float64)
    global SAMPLED_Q
    SAMPLED_Q = SAMPLED_Q.astype(np.float32).astype(np.float64)


_q32()

LOSSES = {
    "sampled_softmax": (rt.sampled_softmax_loss, numpy_sampled_softmax),
    "nce": (rt.nce_loss, numpy_nce),
}


@pytest.mark.parametrize("which", sorted(LOSSES))
@pytest.mark.parametrize("num_true", [1, 2])
@pytest.mark.parametrize("remove_hits", [False, True])
@pytest.mark.parametrize("shards,strategy", [(1, "mod"), (3, "mod"), (3, "div"), (2, "div")])
def test_loss_matches_numpy(which, num_true, remove_hits, shards, strategy):
    fn, ref = LOSSES[which]
    with rg.Graph().as_default():
        loss, _, _, _, feeds = build(fn, num_true, remove_hits, shards, strategy)
        assert loss.shape.as_list() == [B]
        got = Session().run(loss, feeds)
    np.testing.assert_allclose(got, ref(num_true, remove_hits), rtol=1e-10)


@pytest.mark.parametrize("which", sorted(LOSSES))
@pytest.mark.parametrize("num_true,remove_hits", [(1, True), (2, False)])
def test_gradients_pass_the_numeric_checker(which, num_true, remove_hits):
    fn, _ = LOSSES[which]
    with rg.Graph().as_default():
        loss, w, b, x, feeds = build(fn, num_true, remove_hits, 3, "div")
        with Session().as_default():
            for t in [x, *w, *b]:
                others = {k: v for k, v in feeds.items() if k is not t}
                err = compute_gradient_error(
                    t, feeds[t].shape, loss, [B], x_init_value=feeds[t],
                    extra_feed_dict=others, delta=1e-6,
                )  # fmt: skip
                assert err < 1e-7, (t.name, err)


def test_default_sampler_is_log_uniform_and_seeded():
    with rg.Graph().as_default():
        rg.set_random_seed(5)
        x = rg.constant(X)
        loss = rt.sampled_softmax_loss(rg.constant(W), rg.constant(BIAS), LABELS[1], x, S, C)
        types = {op.type for op in rg.get_default_graph().get_operations()}
        assert {"LogUniformCandidateSampler", "ComputeAccidentalHits"} <= types
        a = Session().run(loss)
        b = Session().run(loss)
    np.testing.assert_array_equal(a, b)  # a seeded sampler draws the same in a fresh session
    assert np.all(np.isfinite(a)) and np.all(a > 0)
