"""The OSDI paper's word2vec skip-gram (§4.2, §6.4) on a synthetic Zipf corpus, with the
embedding sharded over four parameter servers.

- The corpus: a vocabulary whose word frequencies follow Zipf's law (id 0 the most frequent, as
  the log-uniform sampler expects); every word belongs to one of a few topics, and each
  sentence draws its words from one topic. Words of a topic therefore share contexts, and their
  embeddings should end up close — the nearest neighbours printed at the end show it.
- The model: input embeddings and output weights, each split in 4 shards
  (`fixed_size_partitioner`) placed on 4 devices (`local_device_setter`: CPU:0..3 of this
  process) or, with `--cluster`, on the 4 PS tasks of a local cluster (`replica_device_setter`).
  Every lookup is the paper's Figure 4 (DynamicPartition, a gather on each shard, DynamicStitch),
  the gradients stay sparse and SGD updates only the rows a batch touched.
- The loss: `nce_loss` or `sampled_softmax_loss` (log-uniform candidates). Evaluation uses the
  full softmax over every word — `full_softmax_loss` below, the path TensorFlow's docs left
  implicit: the logits of each shard are computed next to the shard, and only [batch, rows]
  logits travel.

    python examples/word2vec.py                       # 4 local devices, sampled softmax
    python examples/word2vec.py --loss nce --steps 3000
    python examples/word2vec.py --cluster             # 4 PS + 1 worker on loopback
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rill.graph as rg
import rill.train as rt
from rill.exec import ConfigProto, Session

NUM_SHARDS = 4


# -- the corpus ------------------------------------------------------------------------------------


def zipf_corpus(vocab: int, topics: int, sentences: int, length: int, seed: int = 0):
    """(sentences [n, length] of word ids, topic of each word id)."""
    rng = np.random.default_rng(seed)
    freq = 1.0 / np.arange(1, vocab + 1)  # Zipf: the k-th word is 1/k as frequent as the first
    topic = rng.permutation(np.arange(vocab) % topics)
    members = [np.flatnonzero(topic == t) for t in range(topics)]
    probs = [freq[m] / freq[m].sum() for m in members]
    # Each topic is chosen in proportion to its words' total frequency, so the corpus as a
    # whole keeps the Zipf law.
    weight = np.array([freq[m].sum() for m in members])
    chosen = rng.choice(topics, size=sentences, p=weight / weight.sum())
    text = np.stack([rng.choice(members[t], size=length, p=probs[t]) for t in chosen])
    return text, topic


def skipgram_pairs(text: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(center words, context words) for every word and each neighbour within `window`."""
    centers, contexts = [], []
    for offset in range(1, window + 1):
        for a, b in ((text[:, :-offset], text[:, offset:]), (text[:, offset:], text[:, :-offset])):
            centers.append(a.reshape(-1))
            contexts.append(b.reshape(-1))
    return np.concatenate(centers), np.concatenate(contexts)


# -- the model ---------------------------------------------------------------------------------------


def full_softmax_loss(inputs, weights, biases, labels):
    """The full-softmax loss over every class, for evaluation: each shard's logits are
    computed on the shard's device (matmul with its rows), then joined in class order — with
    "div" sharding, shard p holds the classes after those of shards 0..p-1."""
    g = rg.get_default_graph()
    parts = []
    for shard in weights:
        with g.colocate_with(shard):
            parts.append(rg.matmul(inputs, shard.value(), transpose_b=True))
    logits = rg.concat(parts, 1) + biases
    return rg.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def build(args, device_fn):
    g = rg.Graph()
    with g.as_default():
        rg.set_random_seed(args.seed)
        with g.device(device_fn):
            partitioner = rt.fixed_size_partitioner(NUM_SHARDS)
            scale = 0.5 / args.dim
            embeddings = rt.get_variable(
                "embeddings", [args.vocab, args.dim], partitioner=partitioner,
                initializer=rt.random_uniform_initializer(-scale, scale),
            )  # fmt: skip
            out_w = rt.get_variable(
                "out_weights", [args.vocab, args.dim], partitioner=partitioner,
                initializer=rt.truncated_normal_initializer(stddev=1.0 / np.sqrt(args.dim)),
            )  # fmt: skip
            out_b = rt.get_variable("out_biases", [args.vocab], initializer=rt.zeros_initializer())
            step = rt.get_or_create_global_step()
        centers = rg.placeholder(rg.int64, [None], name="centers")
        contexts = rg.placeholder(rg.int64, [None], name="contexts")
        embed = rg.embedding_lookup(embeddings, centers, partition_strategy="div")
        labels = rg.reshape(contexts, [-1, 1])
        loss_fn = rt.nce_loss if args.loss == "nce" else rt.sampled_softmax_loss
        loss = rg.reduce_mean(
            loss_fn(out_w, out_b, labels, embed, num_sampled=args.num_sampled,
                    num_classes=args.vocab, partition_strategy="div"),
            name="loss",
        )  # fmt: skip
        train = rt.GradientDescentOptimizer(args.lr).minimize(loss, global_step=step)
        eval_loss = rg.reduce_mean(full_softmax_loss(embed, out_w, out_b, contexts), name="eval")
        # Nearest neighbours by cosine similarity, over the joined (normalized) embedding.
        probe = rg.placeholder(rg.int64, [None], name="probe")
        table = rg.concat([v.value() for v in embeddings], 0)
        normalized = table / rg.sqrt(rg.reduce_sum(table * table, axis=1, keepdims=True))
        similarity = rg.matmul(rg.gather(normalized, probe), normalized, transpose_b=True)
        init = rg.global_variables_initializer()
    return g, dict(centers=centers, contexts=contexts, loss=loss, train=train,
                   eval_loss=eval_loss, probe=probe, similarity=similarity, init=init,
                   embeddings=embeddings)  # fmt: skip


def train(args, sess, m, pairs, heldout, out=print) -> dict:
    c, x = pairs
    rng = np.random.default_rng(args.seed)
    sess.run(m["init"])
    feeds = {m["centers"]: heldout[0], m["contexts"]: heldout[1]}
    eval_before = float(sess.run(m["eval_loss"], feeds))
    losses, window = [], []
    t0 = time.perf_counter()
    for i in range(1, args.steps + 1):
        pick = rng.integers(0, len(c), args.batch)
        _, value = sess.run(
            [m["train"], m["loss"]], {m["centers"]: c[pick], m["contexts"]: x[pick]}
        )
        window.append(value)
        if i % args.report == 0 or i == args.steps:
            losses.append(float(np.mean(window)))
            window = []
            out(f"step {i:6d}  {args.loss} loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - t0
    eval_after = float(sess.run(m["eval_loss"], feeds))
    out(f"{args.steps} steps in {elapsed:.1f} s ({1000 * elapsed / args.steps:.2f} ms/step)")
    out(f"full-softmax loss on held-out pairs: {eval_before:.4f} -> {eval_after:.4f}")
    return dict(losses=losses, eval_before=eval_before, eval_after=eval_after)


def neighbours(args, sess, m, topic, out=print) -> float:
    """Prints the nearest neighbours of some frequent words; returns the share of neighbours
    (over those words) that belong to the word's topic."""
    probe = np.arange(0, min(args.vocab, 40), 5)
    sim = sess.run(m["similarity"], {m["probe"]: probe})
    same = []
    for word, row in zip(probe, sim):
        row[word] = -np.inf
        near = np.argsort(-row)[:5]
        same.extend(topic[near] == topic[word])
        shown = ", ".join(f"w{n}(t{topic[n]})" for n in near)
        out(f"  w{word}(t{topic[word]}): {shown}")
    share = float(np.mean(same))
    out(f"neighbours in the same topic: {100 * share:.0f}% (chance: {100 / args.topics:.0f}%)")
    return share


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loss", choices=["nce", "sampled_softmax"], default="sampled_softmax")
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--topics", type=int, default=8)
    p.add_argument("--sentences", type=int, default=4000)
    p.add_argument("--length", type=int, default=12)
    p.add_argument("--window", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--num-sampled", type=int, default=32)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--report", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cluster", action="store_true", help="4 PS + 1 worker on loopback")
    return p.parse_args(argv)


def main(argv=None, out=print) -> dict:
    args = parse(argv)
    text, topic = zipf_corpus(args.vocab, args.topics, args.sentences, args.length, args.seed)
    c, x = skipgram_pairs(text, args.window)
    order = np.random.default_rng(args.seed).permutation(len(c))
    held = order[:2000]
    pairs, heldout = (c[order[2000:]], x[order[2000:]]), (c[held], x[held])
    out(f"corpus: {text.size} words, vocabulary {args.vocab}, {len(c)} skip-gram pairs")
    if args.cluster:
        return _main_cluster(args, pairs, heldout, topic, out)
    g, m = build(args, rt.local_device_setter(NUM_SHARDS))
    out("shards: " + ", ".join(f"{v.op.name} on {v.device}" for v in m["embeddings"]))
    with Session(graph=g, config=ConfigProto(device_count={"CPU": NUM_SHARDS})) as sess:
        result = train(args, sess, m, pairs, heldout, out)
        result["same_topic"] = neighbours(args, sess, m, topic, out)
    return result


def _main_cluster(args, pairs, heldout, topic, out) -> dict:
    try:
        from rill.distributed import local_cluster
    except ImportError as e:
        raise SystemExit(f"--cluster needs rill.distributed's local_cluster: {e}") from None
    with local_cluster(ps=NUM_SHARDS, workers=1) as cluster:
        setter = rt.replica_device_setter(
            cluster=cluster.cluster_spec, worker_device="/job:worker/task:0",
            ps_strategy=rt.GreedyLoadBalancingStrategy(NUM_SHARDS, rt.byte_size_load_fn),
        )  # fmt: skip
        g, m = build(args, setter)
        out("shards: " + ", ".join(f"{v.op.name} on {v.device}" for v in m["embeddings"]))
        with Session(cluster.target("worker", 0), graph=g) as sess:
            result = train(args, sess, m, pairs, heldout, out)
            result["same_topic"] = neighbours(args, sess, m, topic, out)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
