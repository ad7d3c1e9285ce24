"""An unmodified TensorFlow client (`tf.compat.v1.Session("grpc://...")`) drives rill servers.

Runs only where a peer Python with TensorFlow is named by RILL_PEER_PYTHON (skipped otherwise):

    RILL_PEER_PYTHON=/work/peer/bin/python .venv/bin/python -m pytest -m distributed \\
        tests/distributed/test_tf_client.py
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from rill.distributed import Server

from ._core_tasks import free_ports

pytestmark = pytest.mark.distributed

_CLIENT = r"""
import json, sys
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

tf.compat.v1.disable_eager_execution()
target = sys.argv[1]
out = {}
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
    with tf.device("/job:ps/task:0"):
        w = tf.compat.v1.Variable([[1.0], [2.0]], name="w")
    y = tf.matmul(x, w, name="y")
    init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(target)
    sess.run(init)
    out["run"] = sess.run(y, {x: [[1.0, 1.0], [2.0, 3.0]]}).tolist()
    z = tf.add(y, 10.0, name="z")  # the graph grows after the first run: ExtendSession
    out["extend"] = sess.run(z, {x: [[1.0, 1.0]]}).tolist()
    out["make_callable"] = sess.make_callable(z, [x])([[0.0, 1.0]]).tolist()
    c = sess._make_callable_from_options(config_pb2.CallableOptions(feed=["x:0"], fetch=["z:0"]))
    out["callable_from_options"] = c(np.array([[1.0, 0.0]], np.float32))[0].tolist()
    del c  # ReleaseCallable
    a = tf.compat.v1.placeholder(tf.float32, [], name="a")
    b = tf.compat.v1.placeholder(tf.float32, [], name="b")
    r1 = tf.add(a, b, name="r1")
    r2 = tf.multiply(r1, 3.0, name="r2")
    h = sess.partial_run_setup([r1, r2], [a, b])
    out["partial"] = [float(sess.partial_run(h, r1, feed_dict={a: 1.0, b: 2.0})),
                      float(sess.partial_run(h, r2))]
    out["devices"] = sorted(d.name for d in sess.list_devices())
    u = tf.compat.v1.placeholder(tf.float32, None, name="u")
    bad = tf.reshape(u, [3], name="bad_reshape")
    try:
        sess.run(bad, {u: [1.0, 2.0, 3.0, 4.0]})
        out["error"] = None
    except tf.errors.OpError as e:
        out["error"] = [type(e).__name__, e.message]
    out["after_error"] = sess.run(y, {x: [[1.0, 1.0]]}).tolist()
    sess.close()
    tf.compat.v1.Session.reset(target)
print("RESULT " + json.dumps(out))
"""


def _peer() -> str:
    peer = os.environ.get("RILL_PEER_PYTHON")
    if not peer or not os.path.exists(peer):
        pytest.skip("set RILL_PEER_PYTHON to a Python with TensorFlow")
    probe = subprocess.run([peer, "-c", "import tensorflow"], capture_output=True, timeout=120)
    if probe.returncode:
        pytest.skip(f"{peer} has no TensorFlow")
    return peer


def test_tensorflow_client_drives_a_rill_cluster(tmp_path):
    peer = _peer()
    script = tmp_path / "tf_client.py"
    script.write_text(_CLIENT)
    ports = free_ports(2)
    spec = {"worker": [f"localhost:{ports[0]}"], "ps": [f"localhost:{ports[1]}"]}
    with Server(spec, "ps", 0), Server(spec, "worker", 0) as master:
        p = subprocess.run([peer, str(script), master.target], capture_output=True, text=True,
                           timeout=240)  # fmt: skip
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["run"] == [[3.0], [8.0]]
    assert out["extend"] == [[13.0]]
    assert out["make_callable"] == [[12.0]]
    assert out["callable_from_options"] == [[11.0]]
    assert out["partial"] == [3.0, 9.0]
    assert out["devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0",
    ]
    kind, message = out["error"]
    assert kind == "InvalidArgumentError"
    assert "bad_reshape" in message and "4 values" in message
    assert out["after_error"] == [[3.0]]
