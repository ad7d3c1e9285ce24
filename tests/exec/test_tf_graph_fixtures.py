"""TensorFlow-made graphs for issue 18's op families (tools/fixtures/make_tf_graph_fixtures.py)
run in rill and match what TensorFlow recorded.

Each manifest's steps run in order in one rill Session on the imported GraphDef; a manifest
with `restore` first runs the graph's own restore op on the TensorFlow checkpoint next to it
(what tf.compat.v1.train.Saver.restore does), so "trained in TensorFlow, continued in rill"
is checked step by step.
"""

import json
import pathlib

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec.tfrecord import tf_record_iterator
from rill.graph.proto import graph_pb2

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"
MANIFESTS = sorted(p.stem for p in FIXTURES.glob("*.json"))


def load(name: str):
    m = json.loads((FIXTURES / f"{name}.json").read_text())
    gd = graph_pb2.GraphDef()
    gd.ParseFromString((FIXTURES / m["graph"]).read_bytes())
    arrays = np.load(FIXTURES / f"{name}.npz")
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def(gd, name="")
    return m, g, arrays


def feed_value(arrays, key):
    """An array of the fixture, the path of a file next to it ("path:<file>"), or the records of
    a TFRecord file next to it ("tfrecord:<file>", "tfrecord:<file>#<i>" for one record), read
    with rill's reader."""
    if key.startswith("path:"):  # a file next to the manifest, by its path
        return np.array(str(FIXTURES / key[len("path:") :]).encode(), dtype=object)
    if not key.startswith("tfrecord:"):
        return arrays[key]
    name, _, index = key[len("tfrecord:") :].partition("#")
    records = list(tf_record_iterator(FIXTURES / name))
    if index:
        return np.array(records[int(index)], dtype=object)
    out = np.empty(len(records), dtype=object)
    out[:] = records
    return out


def recorded(arrays, key):
    """A recorded array; "sentinel:<k>" holds strings stored with one extra byte each (npz's
    fixed-width bytes would drop their trailing NULs)."""
    if not key.startswith("sentinel:"):
        return arrays[key]
    raw = arrays[key[len("sentinel:") :]]
    out = np.empty(raw.shape, dtype=object)
    out.reshape(-1)[:] = [bytes(x)[:-1] for x in raw.reshape(-1)]
    return out


def replay(m, g, arrays, sess, rtol=2e-5, atol=1e-6):
    if m.get("restore"):
        r = m["restore"]
        prefix = str(FIXTURES / r["checkpoint"])
        sess.run(
            g.get_operation_by_name(r["op"]), {g.get_tensor_by_name(r["filename_tensor"]): prefix}
        )
    for step in m["steps"]:
        feeds = {g.get_tensor_by_name(t): feed_value(arrays, k) for t, k in step["feeds"].items()}
        names = list(step["fetches"])
        fetches = [g.get_tensor_by_name(t) for t in names]
        targets = [g.get_operation_by_name(t) for t in step["targets"]]
        out = sess.run([fetches, targets], feeds)[0]
        for name, got in zip(names, out):
            want = recorded(arrays, step["fetches"][name])
            # A scalar string comes back as bytes (as from TensorFlow's Session).
            got = np.asarray(got, dtype=object) if isinstance(got, bytes) else np.asarray(got)
            if want.dtype.kind == "S":  # strings: numpy's npz keeps bytes as fixed-width
                want = want.astype(object)
            assert got.dtype == want.dtype, (
                f"{step['name']}: {name} is {got.dtype}, TF gave {want.dtype}"
            )
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                           err_msg=f"step {step['name']!r}: {name}")  # fmt: skip
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"step {step['name']!r}: {name}")


@pytest.mark.no_roundtrip("imported TensorFlow graphs")
@pytest.mark.parametrize("name", MANIFESTS)
def test_tf_graph_runs_in_rill_like_tensorflow(name):
    m, g, arrays = load(name)
    tol = m.get("tolerance") or {}
    with Session(graph=g) as sess:
        replay(m, g, arrays, sess, **tol)
