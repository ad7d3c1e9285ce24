"""The main demo: the paper's Figure 1 program trains on real handwritten digits.

1. Builds the Figure 1 MLP (784-100-10, ReLU, softmax cross-entropy, Adagrad) as one rill graph,
   prints its first lines in rill's text form and writes its GraphDef (readable by TensorFlow).
2. Trains it on the digits scikit-learn ships (upsampled to 28×28), with MonitoredTrainingSession
   (progress bar on a terminal, plain lines in demo_out/train.log), checkpointing as it goes.
3. Trains a small convolutional network on the same data.
4. Restores each checkpoint into a fresh session and checks that it evaluates identically.
5. Exports the trained CNN to TFLite (float and int8) and runs both models on the test split.
6. Starts a local cluster (1 PS + 2 workers, each a process) and trains the Figure 1 MLP on it
   with between-graph replication: one client per worker, variables on the PS, asynchronous
   updates; prints the global steps/s and shuts the cluster down.

    make demo          # or: python examples/demo.py [--out DIR] [--quick] [--no-distributed]
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import digits  # noqa: E402 - the examples folder's dataset helper

import rill.graph as rg  # noqa: E402
import rill.train as rt  # noqa: E402
from rill.exec import Session  # noqa: E402
from rill.graph.testing import assert_graphs_equal  # noqa: E402


def figure1(lr: float = 0.1, device=None):
    """The MLP of the paper's Figure 1 (with a small uniform init instead of U[0, 1)).

    `device`: a device function placing each op (section 6 puts variables on the PS)."""
    g = rg.Graph()
    with g.as_default(), g.device(device) if device else contextlib.nullcontext():
        g.seed = 1
        x = rg.placeholder(rg.float32, [None, 784], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")
        w_1 = rg.Variable(rg.random_uniform([784, 100], -0.08, 0.08), name="W_1")
        b_1 = rg.Variable(rg.zeros([100]), name="b_1")
        layer_1 = rg.relu(rg.matmul(x, w_1) + b_1, name="layer_1")
        w_2 = rg.Variable(rg.random_uniform([100, 10], -0.08, 0.08), name="W_2")
        b_2 = rg.Variable(rg.zeros([10]), name="b_2")
        layer_2 = rg.identity(rg.matmul(layer_1, w_2) + b_2, name="layer_2")
        loss = rg.reduce_mean(
            rg.softmax_cross_entropy_with_logits(labels=y, logits=layer_2), name="loss"
        )
        step = rt.get_or_create_global_step()
        train_op = rt.AdagradOptimizer(lr).minimize(loss, global_step=step)
        correct = rg.equal(rg.argmax(layer_2, 1), rg.argmax(y, 1))
        accuracy = rg.reduce_mean(rg.cast(correct, rg.float32), name="accuracy")
    return g, dict(x=x, y=y, logits=layer_2, loss=loss, train=train_op, accuracy=accuracy,
                   step=step)  # fmt: skip


def small_cnn(lr: float = 0.05):
    """conv 5×5×16 → max pool → conv 5×5×32 → max pool → dense 128 → dense 10, momentum SGD."""
    g = rg.Graph()
    with g.as_default():
        g.seed = 2
        x = rg.placeholder(rg.float32, [None, 784], name="x")
        y = rg.placeholder(rg.float32, [None, 10], name="y")
        images = rg.reshape(x, [-1, 28, 28, 1])
        h = rt.layers.conv2d(images, 16, 5, padding="same", activation=rg.relu, name="conv1")
        h = rt.layers.max_pooling2d(h, 2, 2, name="pool1")
        h = rt.layers.conv2d(h, 32, 5, padding="same", activation=rg.relu, name="conv2")
        h = rt.layers.max_pooling2d(h, 2, 2, name="pool2")
        h = rt.layers.flatten(h)
        h = rt.layers.dense(h, 128, activation=rg.relu, name="dense1")
        logits = rg.identity(rt.layers.dense(h, 10, name="dense2"), name="logits")
        loss = rt.losses.softmax_cross_entropy(y, logits)
        step = rt.get_or_create_global_step()
        train_op = rt.MomentumOptimizer(lr, 0.9).minimize(loss, global_step=step)
        correct = rg.equal(rg.argmax(logits, 1), rg.argmax(y, 1))
        accuracy = rg.reduce_mean(rg.cast(correct, rg.float32), name="accuracy")
    return g, dict(x=x, y=y, logits=logits, loss=loss, train=train_op, accuracy=accuracy,
                   step=step)  # fmt: skip


def train(name, g, m, train_set, test_set, steps, batch, out: pathlib.Path, log):
    ckpt_dir = out / f"{name}_ckpt"
    with g.as_default():
        hooks = [
            rt.StopAtStepHook(last_step=steps),
            rt.ProgressHook(
                last_step=steps, tensors={"loss": m["loss"]}, every_n_steps=50, log_file=str(log)
            ),  # fmt: skip
        ]
        source = digits.batches(train_set, batch, seed=3)
        t0 = time.perf_counter()
        with rt.MonitoredTrainingSession(checkpoint_dir=str(ckpt_dir), hooks=hooks,
                                         save_checkpoint_steps=steps,
                                         save_checkpoint_secs=None) as sess:  # fmt: skip
            while not sess.should_stop():
                xb, yb = next(source)
                sess.run(m["train"], {m["x"]: xb, m["y"]: np.eye(10, dtype=np.float32)[yb]})
        seconds = time.perf_counter() - t0
    latest = rt.latest_checkpoint(str(ckpt_dir))
    with g.as_default():
        saver = rt.Saver()
    feed = {m["x"]: test_set.images, m["y"]: test_set.one_hot}
    with Session(graph=g) as fresh:
        saver.restore(fresh, latest)
        acc, logits = fresh.run([m["accuracy"], m["logits"]], feed)
    with Session(graph=g) as again:
        saver.restore(again, latest)
        acc2, logits2 = again.run([m["accuracy"], m["logits"]], feed)
    identical = acc == acc2 and np.array_equal(logits, logits2)
    print(f"{name}: {steps} steps in {seconds:.1f} s ({steps / seconds:.0f} steps/s); "
          f"test accuracy {acc * 100:.2f}% on {len(test_set.labels)} held-out digits")  # fmt: skip
    print(f"{name}: checkpoint {latest} restored into fresh sessions: "
          f"{'identical' if identical else 'DIFFERENT'} evaluation")  # fmt: skip
    return acc, identical


# -- 5. mobile: the trained CNN as .tflite, float and int8 ------------------------------------------


def _tflite_runtime():
    """(name, factory(model_content) -> interpreter with intermediates readable)."""
    try:
        from rill.mobile import Interpreter

        def make(model_content):
            return Interpreter(model_content=model_content, experimental_preserve_all_tensors=True)

        return "rill's interpreter", make
    except ImportError:
        from ai_edge_litert.interpreter import Interpreter as LiteRT
        from ai_edge_litert.interpreter import OpResolverType

        def make(model_content):
            return LiteRT(
                model_content=model_content,
                experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                experimental_preserve_all_tensors=True,
            )

        return "LiteRT's reference kernels (rill.mobile.Interpreter is not available)", make


def _tflite_accuracy(make, model: bytes, test_set) -> float:
    it = make(model_content=model)
    inp, outp = it.get_input_details()[0], it.get_output_details()[0]
    it.resize_tensor_input(inp["index"], list(test_set.images.shape))
    it.allocate_tensors()
    it.set_tensor(inp["index"], test_set.images)
    it.invoke()
    return float(np.mean(np.argmax(it.get_tensor(outp["index"]), 1) == test_set.labels))


def mobile_export(g, m, train_set, test_set, out: pathlib.Path) -> bool:
    """Exports the CNN's inference graph from its checkpoint; True when the targets are met."""
    from rill.mobile.convert import Optimize, TFLiteConverter

    ckpt = rt.latest_checkpoint(str(out / "cnn_ckpt"))
    calibration = train_set.images[:500]  # representative data: a slice of the training digits

    def converter():
        return TFLiteConverter.from_graph(g, [m["x"]], [m["logits"]], checkpoint=ckpt)

    float_model = converter().convert()
    conv = converter()
    conv.optimizations = [Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([calibration[i : i + 100]] for i in range(0, 500, 100))
    int8_model = conv.convert()
    (out / "cnn_float.tflite").write_bytes(float_model)
    (out / "cnn_int8.tflite").write_bytes(int8_model)
    name, make = _tflite_runtime()
    acc_float = _tflite_accuracy(make, float_model, test_set)
    acc_int8 = _tflite_accuracy(make, int8_model, test_set)
    ratio = len(int8_model) / len(float_model)
    drop = (acc_float - acc_int8) * 100
    print(f"\n== mobile: the CNN as TFLite, run by {name} ==")
    print(
        f"float: {out / 'cnn_float.tflite'} {len(float_model):,} bytes; "
        f"test accuracy {acc_float * 100:.2f}%"
    )
    print(
        f"int8:  {out / 'cnn_int8.tflite'} {len(int8_model):,} bytes ({ratio:.1%} of float); "
        f"test accuracy {acc_int8 * 100:.2f}% (drop {drop:.2f} points)"
    )
    report = conv.quantization_report(interpreter=make)
    print("quantization report, the 3 layers furthest from float (rill op names):")
    print("\n".join("  " + line for line in report.format_table(limit=3).splitlines()))
    return ratio <= 0.27 and drop <= 1.0


# -- 6. distributed: a local cluster, between-graph replication ------------------------------------

_VARIABLE_OPS = {"VariableV2", "VarHandleOp", "Variable", "VariableV1"}


def _replica_device(worker: int):
    """Variables (and their optimizer slots) on the PS, everything else on this worker."""

    def device(op):
        return "/job:ps/task:0" if op.type in _VARIABLE_OPS else f"/job:worker/task:{worker}"

    return device


def distributed_training(train_set, test_set, steps: int, out: pathlib.Path) -> float:
    """Figure 1 trained asynchronously by 2 workers sharing variables on 1 PS; the accuracy."""
    from rill.distributed import local_cluster

    log_path = out / "cluster.log"
    print("\n== distributed: Figure 1 on a local cluster (1 PS + 2 workers), between-graph "
          "replication ==")  # fmt: skip
    with open(log_path, "w") as log, local_cluster(ps=1, workers=2, log=log) as cluster:
        print(f"cluster {cluster.cluster_spec.as_dict()} (task logs in {log_path})")
        replicas = []  # one client per worker, each with its own graph: between-graph
        for w in range(2):
            g, m = figure1(device=_replica_device(w))
            replicas.append((m, Session(cluster.target("worker", w), graph=g)))
        with replicas[0][1].graph.as_default():
            init = rg.global_variables_initializer()
        replicas[0][1].run(init)  # the chief initializes the PS's variables; worker 1 shares them

        done, errors = [0, 0], []
        feeds = [digits.batches(train_set, 100, seed=10 + w) for w in range(2)]

        def feed(w):
            xb, yb = next(feeds[w])
            m = replicas[w][0]
            return {m["x"]: xb, m["y"]: np.eye(10, dtype=np.float32)[yb]}

        for w, (m, sess) in enumerate(replicas):  # the first step registers the partitions
            sess.run(m["train"], feed(w))
        start = int(replicas[0][1].run(replicas[0][0]["step"]))

        def work(w):
            m, sess = replicas[w]
            try:
                while True:
                    _, step = sess.run([m["train"], m["step"]], feed(w))
                    done[w] += 1
                    if step >= steps:
                        return
            except Exception as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        seconds = time.perf_counter() - t0
        if errors or any(t.is_alive() for t in threads):
            raise RuntimeError(f"a worker failed: {errors[:1] or 'timed out'}")
        m, chief = replicas[0]
        final = int(chief.run(m["step"]))
        acc = float(chief.run(m["accuracy"], {m["x"]: test_set.images, m["y"]: test_set.one_hot}))
        for _, sess in replicas:
            sess.close()
    codes = set(cluster.stop().values())
    print(
        f"{final} global steps ({done[0]} by worker 0, {done[1]} by worker 1) in {seconds:.1f} s:"
        f" {(final - start) / seconds:.0f} global steps/s; test accuracy {acc * 100:.2f}%"
    )
    print(f"cluster shut down (task exit status {', '.join(map(str, sorted(codes)))})")
    return acc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="demo_out", help="where checkpoints, logs and graphs go")
    ap.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    ap.add_argument("--no-distributed", action="store_true", help="skip section 6 (the cluster)")
    ap.add_argument("--distributed-only", action="store_true", help="run section 6 only")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.distributed_only:
        train_set, test_set = digits.load()
        acc = distributed_training(train_set, test_set, 40 if args.quick else 200, out)
        return 0 if args.quick or acc >= 0.8 else 1
    for old in out.glob("*_ckpt"):
        for f in old.iterdir():
            f.unlink()

    g, m = figure1()
    text = g.to_text()
    print(f"== the Figure 1 program as a rill graph: {len(g)} ops; the forward pass ==")
    print("\n".join(line for line in text.splitlines() if "gradients" not in line
                    and "Adagrad" not in line)[:2500])  # fmt: skip
    (out / "figure1.txt").write_text(text + "\n")
    (out / "figure1.pb").write_bytes(g.as_graph_def().SerializeToString())
    g2 = rg.Graph()
    with g2.as_default():
        rg.import_graph_def((out / "figure1.pb").read_bytes(), name="")
    assert_graphs_equal(g, g2)
    print(f"... wrote {out / 'figure1.pb'} (GraphDef) and {out / 'figure1.txt'}; both read back\n")

    train_set, test_set = digits.load()
    log = out / "train.log"
    log.write_text("")
    mlp_steps, cnn_steps = (60, 40) if args.quick else (1500, 300)
    acc_mlp, ok_mlp = train("mlp", g, m, train_set, test_set, mlp_steps, 100, out, log)
    g, m = small_cnn()
    acc_cnn, ok_cnn = train("cnn", g, m, train_set, test_set, cnn_steps, 64, out, log)
    print(f"\nprogress lines were logged to {log}")
    if not (ok_mlp and ok_cnn):
        print("a restored model did not evaluate identically", file=sys.stderr)
        return 1
    if not args.quick and (acc_mlp < 0.95 or acc_cnn < 0.97):
        print("accuracy below the targets (MLP 95%, CNN 97%)", file=sys.stderr)
        return 1

    # 5. mobile: export the trained CNN to float and int8 .tflite and run both.
    if not mobile_export(g, m, train_set, test_set, out) and not args.quick:
        print("mobile targets missed (int8 at most 27% of float, drop at most 1 point)",
              file=sys.stderr)  # fmt: skip
        return 1

    # 6. distributed: the Figure 1 MLP on a local cluster, between-graph replication.
    if args.no_distributed:
        return 0
    acc_dist = distributed_training(train_set, test_set, 40 if args.quick else 200, out)
    if not args.quick and acc_dist < 0.8:
        print("distributed training below 80% test accuracy", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
