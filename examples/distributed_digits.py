"""Between-graph replicated training of the paper's Figure 1 MLP on the digits: TensorFlow's
classic "distributed MNIST replica" program, written against rill.

Every worker runs this program; each builds its own graph, with the variables on the PS tasks
and its computation on its own worker task, and trains through a MonitoredTrainingSession whose
master is its own task. Worker 0 is the chief: it initializes or restores the model, writes
checkpoints, and (with --sync) runs the SyncReplicasOptimizer's update. PS tasks are plain
servers (`rill-server`, or this program with --job_name=ps).

    # one PS and three workers on this machine, asynchronous:
    python examples/distributed_digits.py --ps_hosts=localhost:2222 \
        --worker_hosts=localhost:2223,localhost:2224,localhost:2225 --job_name=ps --task_index=0 &
    python examples/distributed_digits.py ... --job_name=worker --task_index=0   # and 1, 2

    # synchronous, 2 of 3 (one backup worker):
    ... --sync --replicas_to_aggregate=2

With --master grpc://host:port the worker does not start a server of its own but uses that task
(a server started by `rill-server` or rill.distributed.local_cluster).

Exit status: 0 when training finished (the chief reached --train_steps, or the barrier was
closed by the chief), 1 on an error.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import digits  # noqa: E402 - the example's data, next to this file

import rill.graph as rg  # noqa: E402
import rill.train as rt  # noqa: E402
from rill.graph.errors import OutOfRangeError  # noqa: E402
from rill.train.hooks import StopAtStepHook  # noqa: E402

log = logging.getLogger("distributed_digits")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ps_hosts", required=True, help="comma-separated host:port of the PS tasks")
    p.add_argument("--worker_hosts", required=True, help="comma-separated host:port of workers")
    p.add_argument("--job_name", choices=["ps", "worker"], required=True)
    p.add_argument("--task_index", type=int, required=True)
    p.add_argument("--master", default="", help="use this task's server instead of starting one")
    p.add_argument("--sync", action="store_true", help="SyncReplicasOptimizer")
    p.add_argument("--replicas_to_aggregate", type=int, default=None)
    p.add_argument("--train_steps", type=int, default=600, help="global steps to train")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--checkpoint_dir", default=None)
    p.add_argument("--save_checkpoint_steps", type=int, default=100)
    p.add_argument("--step_delay", type=float, default=0.0, help="seconds to sleep per step")
    p.add_argument("--barrier_timeout", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def ps_device_fn(num_ps: int, worker_device: str):
    """Variables (and their state) round-robin over the PS tasks; everything else on the worker."""
    counter = iter(range(1 << 30))

    def place(op):
        if op.type in ("VarHandleOp", "VariableV2"):
            return f"/job:ps/task:{next(counter) % num_ps}"
        return worker_device

    return place


def build(args, num_ps: int, num_workers: int):
    g = rg.Graph()
    worker_device = f"/job:worker/task:{args.task_index}"
    with g.as_default():
        g.seed = args.seed
        with g.device(ps_device_fn(num_ps, worker_device)):
            step = rt.get_or_create_global_step()
            x = rg.placeholder(rg.float32, [None, 784], name="x")
            y = rg.placeholder(rg.float32, [None, 10], name="y")
            w1 = rg.Variable(rg.random_uniform([784, 100], -0.08, 0.08), name="W_1")
            b1 = rg.Variable(rg.zeros([100]), name="b_1")
            h = rg.relu(rg.matmul(x, w1) + b1)
            w2 = rg.Variable(rg.random_uniform([100, 10], -0.08, 0.08), name="W_2")
            b2 = rg.Variable(rg.zeros([10]), name="b_2")
            logits = rg.matmul(h, w2) + b2
            loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=logits))
            correct = rg.equal(rg.argmax(logits, 1), rg.argmax(y, 1))
            accuracy = rg.reduce_mean(rg.cast(correct, rg.float32))
            opt = rt.AdagradOptimizer(args.learning_rate)
            if args.sync:
                opt = rt.SyncReplicasOptimizer(
                    opt,
                    replicas_to_aggregate=args.replicas_to_aggregate or num_workers,
                    total_num_replicas=num_workers,
                    replica_id=args.task_index,
                    barrier_timeout_secs=args.barrier_timeout,
                )
            train_op = opt.minimize(loss, global_step=step)
    return g, dict(x=x, y=y, loss=loss, accuracy=accuracy, train=train_op, step=step, opt=opt)


def run_worker(args, master: str, num_ps: int, num_workers: int) -> int:
    train_set, test_set = digits.load()
    g, m = build(args, num_ps, num_workers)
    is_chief = args.task_index == 0
    hooks = [StopAtStepHook(last_step=args.train_steps)]
    if args.sync:
        hooks.append(m["opt"].make_session_run_hook(is_chief))
    rng = np.random.default_rng(args.seed + 1000 * args.task_index)
    n = len(train_set.labels)
    onehot = train_set.one_hot
    steps, t0 = 0, time.monotonic()
    with g.as_default():
        sess = rt.MonitoredTrainingSession(
            master=master,
            is_chief=is_chief,
            checkpoint_dir=args.checkpoint_dir,
            hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps if args.checkpoint_dir else None,
            save_checkpoint_secs=None,
            log_step_count_steps=None,
        )
        with sess:
            try:
                while not sess.should_stop():
                    idx = rng.integers(0, n, args.batch_size)
                    _, gstep = sess.run(
                        [m["train"], m["step"]],
                        {m["x"]: train_set.images[idx], m["y"]: onehot[idx]},
                    )
                    steps += 1
                    if args.step_delay:
                        time.sleep(args.step_delay)
                    if steps % 50 == 0:
                        log.info("local step %d, global step %d", steps, gstep)
            except OutOfRangeError:
                log.info("the chief closed the barrier: training is over")
            rate = steps / max(time.monotonic() - t0, 1e-9)
            if is_chief:
                # Evaluated before the session closes: closing it ends the job (every task
                # of the cluster stops serving).
                feed = {m["x"]: test_set.images, m["y"]: test_set.one_hot}
                acc, gstep = sess.run_step_fn(
                    lambda ctx: ctx.session.run([m["accuracy"], m["step"]], feed)
                )
                print(f"final global step {int(gstep)}; test accuracy {float(acc):.4f}", flush=True)
    print(f"worker {args.task_index}: {steps} local steps, {rate:.1f} steps/s", flush=True)
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s worker{args.task_index} %(message)s"
    )
    ps_hosts = args.ps_hosts.split(",")
    worker_hosts = args.worker_hosts.split(",")
    master = args.master
    server = None
    if not master:
        from rill.distributed import Server

        server = Server({"ps": ps_hosts, "worker": worker_hosts}, args.job_name, args.task_index)
        if args.job_name == "ps":
            server.join()
            return 0
        master = server.target
    try:
        return run_worker(args, master, len(ps_hosts), len(worker_hosts))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
