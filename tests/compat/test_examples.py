"""The TF1 example programs (examples/tf1/) run unchanged on rill.compat.v1, on small data,
each in its own process started the way a user starts it (tf.app.run parses the flags)."""

import pathlib
import re
import subprocess
import sys

import pytest
from tensorboard.backend.event_processing import event_accumulator as ea

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(name: str, *flags: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tf1" / f"{name}.py"), *flags],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in output:\n{text}"
    return float(m.group(1))


def test_mlp_with_summaries(tmp_path):
    out = _run("mlp_summaries", "--steps=120", f"--logdir={tmp_path}")
    assert _number(r"test accuracy ([\d.]+)", out) > 0.8
    acc = ea.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [e.step for e in acc.Scalars("cross_entropy")] == [0, 50, 100]
    assert acc.Scalars("accuracy")[-1].value > acc.Scalars("accuracy")[0].value
    # The name scope "hidden/weights" is taken by the variable, so the tag gets "_1" (as in TF).
    assert acc.Tags()["histograms"] == ["hidden/weights_1"]
    assert any(n.name == "softmax/xw_plus_b" for n in acc.Graph().node)


@pytest.mark.slow  # about 10 s of CPU: the CI's slow run
def test_cnn_with_dropout():
    out = _run("cnn_dropout", "--steps=60")
    assert _number(r"test accuracy ([\d.]+)", out) > 0.6


@pytest.mark.slow
def test_dynamic_rnn_classifier():
    out = _run("rnn_classifier", "--steps=60")
    assert _number(r"test accuracy ([\d.]+)", out) > 0.5


def test_word2vec():
    out = _run("word2vec", "--steps=300")
    first = _number(r"loss ([\d.]+) ->", out)
    last = _number(r"-> ([\d.]+)", out)
    assert last < 0.7 * first
    assert re.search(r"nearest to king: .*queen", out)


def test_gan_with_two_optimizers():
    out = _run("gan", "--steps=400")
    assert abs(_number(r"generated mean ([-\d.]+)", out) - 3.0) < 0.5
    assert "D variables 4, G variables 4" in out


def test_queue_input_pipeline():
    out = _run("queue_input", "--num_epochs=10")
    # 10 epochs of 256 examples in batches of 32: 80 steps, then OutOfRangeError ends it.
    assert "done training after 80 steps" in out
    w = re.search(r"w \[ *([-\d.]+) +([-\d.]+) +([-\d.]+)\]", out)
    assert w and abs(float(w.group(1)) - 2.0) < 0.1 and abs(float(w.group(2)) + 1.0) < 0.1


def _loopback_cluster(name: str, *flags: str) -> list[str]:
    """Runs a TF1 example as a PS and two worker processes on loopback ports; the workers'
    outputs. Every process is killed at the end, whatever happened."""
    import socket

    socks = [socket.socket() for _ in range(3)]
    for s in socks:
        s.bind(("localhost", 0))
    ps, w0, w1 = (f"localhost:{s.getsockname()[1]}" for s in socks)
    for s in socks:
        s.close()
    script = str(ROOT / "examples" / "tf1" / f"{name}.py")
    common = [f"--ps_hosts={ps}", f"--worker_hosts={w0},{w1}", *flags]
    tasks = [("ps", 0, ["--ps_wait_secs=300"]), ("worker", 0, []), ("worker", 1, [])]
    procs = []
    try:
        for job, index, extra in tasks:
            args = [sys.executable, script, f"--job_name={job}", f"--task_index={index}"]
            procs.append(
                subprocess.Popen(
                    [*args, *extra, *common],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )  # fmt: skip
            )
        outs = []
        for p in procs[1:]:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out[-3000:]
            outs.append(out)
        return outs
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


@pytest.mark.distributed
def test_distributed_replicas_on_a_loopback_cluster():
    # TensorFlow 1.x's between-graph example: a PS task and two workers, each its own process.
    outs = _loopback_cluster("distributed_replicas", "--steps=200")
    steps = [_number(r"local steps (\d+)", o) for o in outs]
    accs = [_number(r"test accuracy ([\d.]+)", o) for o in outs]
    # Together the workers made the 200 global steps (how they split them is a race: on a fast
    # machine the chief may make them all before the other worker joins), and both read the
    # trained variables back from the PS.
    assert sum(steps) >= 200
    assert min(accs) > 0.8


@pytest.mark.distributed
def test_sync_replicas_with_supervisor_and_chief_queue_runner():
    # TensorFlow 1.x's distributed MNIST example's sync path: Supervisor, get_chief_queue_runner,
    # get_init_tokens_op, prepare_or_wait_for_session; a PS and two worker processes.
    outs = _loopback_cluster("sync_replicas_supervisor", "--train_steps=60")
    steps = [_number(r"global step (\d+)", o) for o in outs]
    accs = [_number(r"test accuracy ([\d.]+)", o) for o in outs]
    assert max(steps) >= 60
    assert min(accs) > 0.8


def test_mlp_from_a_tf_data_pipeline():
    out = _run("mlp_dataset", "--epochs=5")
    # 1400 examples in batches of 64 are 22 steps an epoch; the loop ends on OutOfRangeError.
    assert _number(r"steps (\d+)", out) == 110
    assert _number(r"-> ([\d.]+)", out) < 0.5 * _number(r"loss ([\d.]+) ->", out)
    assert _number(r"test accuracy ([\d.]+)", out) > 0.8
