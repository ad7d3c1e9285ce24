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


def feed_value(arrays, key, tmp=None):
    """An array of the fixture, the path of a file next to it ("path:<file>"), or the records of
    a TFRecord file next to it ("tfrecord:<file>", "tfrecord:<file>#<i>" for one record), read
    with rill's reader."""
    if key.startswith("path:"):  # a file next to the manifest, by its path
        return np.array(str(FIXTURES / key[len("path:") :]).encode(), dtype=object)
    if key.startswith("paths:"):  # files next to the manifest, by their paths
        names = key[len("paths:") :].split(",")
        return np.array([str(FIXTURES / n).encode() for n in names], dtype=object)
    if key == "tmpdir:":  # a fresh directory (a summary writer's logdir)
        return np.array(str(tmp).encode(), dtype=object)
    if key.startswith("sentinel:"):  # strings with trailing NULs (see recorded)
        return recorded(arrays, key)
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


def _local_paths(want: np.ndarray, there: str) -> np.ndarray:
    out = np.empty(want.shape, dtype=object)
    out.reshape(-1)[:] = [
        b.replace(there.encode(), str(FIXTURES).encode()) for b in want.reshape(-1)
    ]
    return out


def replay(m, g, arrays, sess, rtol=2e-5, atol=1e-6, tmp=None):
    if m.get("restore"):
        r = m["restore"]
        prefix = str(FIXTURES / r["checkpoint"])
        sess.run(
            g.get_operation_by_name(r["op"]), {g.get_tensor_by_name(r["filename_tensor"]): prefix}
        )
    for step in m["steps"]:
        feeds = {
            g.get_tensor_by_name(t): feed_value(arrays, k, tmp) for t, k in step["feeds"].items()
        }
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
            if want.dtype == object and m.get("fixture_dir"):  # paths TensorFlow saw
                want = _local_paths(want, m["fixture_dir"])
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
def test_tf_graph_runs_in_rill_like_tensorflow(name, tmp_path):
    m, g, arrays = load(name)
    tol = m.get("tolerance") or {}
    with Session(graph=g) as sess:
        replay(m, g, arrays, sess, **tol, tmp=tmp_path)


GRADIENT_MANIFESTS = [n for n in MANIFESTS
                      if "rill_gradients" in json.loads((FIXTURES / f"{n}.json").read_text())]  # fmt: skip


@pytest.mark.no_roundtrip("imported TensorFlow graphs")
@pytest.mark.parametrize("name", GRADIENT_MANIFESTS)
def test_rill_gradients_of_tf_graphs_match_tensorflows(name):
    """rill's own gradient functions, built on the imported forward graph, give what
    TensorFlow's gradient gave (recorded in the same fixture)."""
    from rill.autodiff import gradients

    m, g, arrays = load(name)
    tol = m.get("tolerance") or {}
    specs = m["rill_gradients"]
    with g.as_default():
        built = [gradients(g.get_tensor_by_name(s["y"]), [g.get_tensor_by_name(x) for x in s["xs"]])
                 for s in specs]  # fmt: skip
    with Session(graph=g) as sess:
        for s, grads in zip(specs, built):
            feeds = {g.get_tensor_by_name(t): feed_value(arrays, k) for t, k in s["feeds"].items()}
            for x, got, want in zip(s["xs"], sess.run(grads, feeds), s["want"]):
                np.testing.assert_allclose(got, arrays[want], rtol=tol.get("rtol", 2e-5),
                                           atol=tol.get("atol", 1e-6),
                                           err_msg=f"d{s['y']}/d{x}")  # fmt: skip


def _png_pixels(data: bytes) -> np.ndarray:
    """The rows of an 8-bit, non-interlaced PNG with filter type 0 or 1-4 undone (enough for
    the images TensorFlow and rill encode)."""
    import struct
    import zlib

    pos, idat, header = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, _, color, *_ = header
    c = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), np.int32)
    for r in range(h):
        f, line = raw[r, 0], raw[r, 1:].astype(np.int32)
        prev = out[r - 1] if r else np.zeros(w * c, np.int32)
        for i in range(w * c):
            a = out[r, i - c] if i >= c else 0
            b, d = prev[i], (prev[i - c] if i >= c else 0)
            pred = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(int(f))
            if pred is None:  # Paeth
                p = a + b - d
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else d
            out[r, i] = (line[i] + pred) & 0xFF
    return out.reshape(h, w, c)


@pytest.mark.no_roundtrip("imported TensorFlow graphs")
def test_summary_writer_events_match_tensorflows(tmp_path):
    """The TF2 summary writer graph run in rill writes, event for event, the summaries
    TensorFlow wrote: steps, tags, scalars, histograms, image pixels, audio and tensors."""
    from tensorboardX.proto import event_pb2, summary_pb2

    from rill.graph.graph_def import make_ndarray
    from rill.graph.proto import tensor_pb2

    def arr(t):
        return make_ndarray(tensor_pb2.TensorProto.FromString(t.SerializeToString()))

    m, g, arrays = load("summary_writer")
    with Session(graph=g) as sess:
        replay(m, g, arrays, sess, tmp=tmp_path)
    (path,) = tmp_path.glob("events.out.tfevents.*")
    events = [event_pb2.Event.FromString(r) for r in tf_record_iterator(path)]
    assert events[0].file_version == "brain.Event:2"
    # the write ops of one step run in any order (a tf.group): events compare by step and tag
    got = sorted((e.step, e.summary.value[0].tag, e.summary) for e in events
                 if e.HasField("summary"))  # fmt: skip
    want = []
    for w in m["events"]:
        s = summary_pb2.Summary.FromString(bytes(recorded(arrays, w["summary"])[()]))
        want.append((w["step"], s.value[0].tag, s))
    want.sort(key=lambda t: t[:2])
    assert [t[:2] for t in got] == [t[:2] for t in want]
    for (_, _, gs), (_, _, ws) in zip(got, want):
        assert [v.tag for v in gs.value] == [v.tag for v in ws.value]
        for a, b in zip(gs.value, ws.value):
            kind = b.WhichOneof("value")
            assert a.WhichOneof("value") == kind, b.tag
            if kind == "simple_value":
                np.testing.assert_allclose(a.simple_value, b.simple_value, rtol=1e-6)
            elif kind == "histo":
                for f in ("min", "max", "num", "sum", "sum_squares"):
                    np.testing.assert_allclose(getattr(a.histo, f), getattr(b.histo, f),
                                               rtol=1e-6, err_msg=f"{b.tag}: {f}")  # fmt: skip
                assert list(a.histo.bucket_limit) == list(b.histo.bucket_limit)
                assert list(a.histo.bucket) == list(b.histo.bucket)
            elif kind == "image":
                assert (a.image.height, a.image.width, a.image.colorspace) == (
                    b.image.height, b.image.width, b.image.colorspace)  # fmt: skip
                np.testing.assert_array_equal(_png_pixels(a.image.encoded_image_string),
                                              _png_pixels(b.image.encoded_image_string))  # fmt: skip
            elif kind == "audio":
                assert a.audio.sample_rate == b.audio.sample_rate
                assert a.audio.encoded_audio_string == b.audio.encoded_audio_string, b.tag
            else:
                assert kind == "tensor", kind
                assert a.metadata == b.metadata
                np.testing.assert_allclose(arr(a.tensor), arr(b.tensor),
                                           rtol=1e-6)  # fmt: skip
