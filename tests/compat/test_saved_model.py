"""tf.saved_model: export with simple_save / SavedModelBuilder, load with loader.load, in both
directions with TensorFlow (its SavedModel loads in rill; rill's loads in TensorFlow where a peer
Python with TensorFlow is named by RILL_PEER_PYTHON, skipped otherwise)."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import rill.compat.v1 as tf

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf" / "saved_model_tf1"


def _export(export_dir):
    rng = np.random.RandomState(3)
    xs = rng.rand(6, 4).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        h = tf.layers.dense(x, 5, activation=tf.nn.relu, name="hidden")
        probs = tf.nn.softmax(tf.layers.dense(h, 3, name="out"), name="probs")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            want = sess.run(probs, {x: xs})
            tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"probs": probs})
    return xs, want


def _serve(export_dir, xs):
    with tf.Graph().as_default():
        with tf.Session() as sess:
            meta = tf.saved_model.loader.load(
                sess, [tf.saved_model.tag_constants.SERVING], export_dir
            )
            sig = meta.signature_def[tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
            assert sig.method_name == tf.saved_model.PREDICT_METHOD_NAME
            return sess.run(sig.outputs["probs"].name, {sig.inputs["x"].name: xs})


def test_rill_export_loads_in_rill(tmp_path):
    export_dir = str(tmp_path / "export" / "1")
    xs, want = _export(export_dir)
    assert tf.saved_model.contains_saved_model(export_dir)
    assert os.path.isfile(os.path.join(export_dir, "variables", "variables.index"))
    np.testing.assert_array_equal(_serve(export_dir, xs), want)
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(RuntimeError, match=r"tags \['train'\] could not be found.*\['serve'\]"):
            tf.saved_model.loader.load(sess, ["train"], export_dir)
    with pytest.raises(AssertionError, match="already exists, and isn't empty"):
        tf.saved_model.builder.SavedModelBuilder(export_dir)
    with pytest.raises(ValueError, match="Prediction inputs cannot be None or empty"):
        tf.saved_model.predict_signature_def({}, {"y": tf.constant(1.0)})


def test_tensorflow_made_saved_model_loads_in_rill():
    io = np.load(FIXTURE / "io.npz")
    np.testing.assert_allclose(_serve(str(FIXTURE), io["x"]), io["probs"], rtol=1e-6)


def test_builder_with_two_tag_sets_shares_the_variables(tmp_path):
    export_dir = str(tmp_path / "m")
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        tf.identity(v * 2.0, name="doubled")
        b = tf.saved_model.builder.SavedModelBuilder(export_dir)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(v.assign([3.0, 4.0]))
            b.add_meta_graph_and_variables(sess, ["train"])
        b.add_meta_graph(["serve", "gpu"])
        path = b.save(as_text=True)
    assert path.endswith("saved_model.pbtxt")
    for tags in (["train"], ["gpu", "serve"]):
        with tf.Graph().as_default(), tf.Session() as sess:
            tf.saved_model.loader.load(sess, tags, export_dir)
            np.testing.assert_array_equal(sess.run("doubled:0"), [6.0, 8.0])


_TF_LOAD = """
import json, sys
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
export_dir, npz = sys.argv[1], sys.argv[2]
xs = np.load(npz)["x"]
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
    sig = meta.signature_def["serving_default"]
    out = sess.run(sig.outputs["probs"].name, {sig.inputs["x"].name: xs})
print(json.dumps(out.tolist()))
"""


def test_rill_export_loads_in_tensorflow(tmp_path):
    peer = os.environ.get("RILL_PEER_PYTHON")
    if not peer or not os.path.exists(peer):
        pytest.skip("set RILL_PEER_PYTHON to a Python with TensorFlow")
    export_dir = str(tmp_path / "export")
    xs, want = _export(export_dir)
    np.savez(tmp_path / "in.npz", x=xs)
    script = tmp_path / "load.py"
    script.write_text(_TF_LOAD)
    proc = subprocess.run(
        [peer, str(script), export_dir, str(tmp_path / "in.npz")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if "No module named 'tensorflow'" in proc.stderr:
        pytest.skip(f"{peer} has no TensorFlow")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.array(json.loads(proc.stdout.strip().splitlines()[-1]), np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_tensorflows_own_sharded_saver_ops_save_and_restore_in_rill(tmp_path):
    # TensorFlow's Saver graph: StringJoin + ShardedFilename + SaveV2 into a temporary
    # directory, MergeV2Checkpoints into the prefix, StaticRegexFullMatch on the path.
    io = np.load(FIXTURE / "io.npz")
    with tf.Graph().as_default(), tf.Session() as sess:
        meta = tf.saved_model.loader.load(sess, ["serve"], str(FIXTURE))
        saver = tf.train.Saver(saver_def=meta.saver_def)
        prefix = saver.save(sess, str(tmp_path / "tfsaver"), write_meta_graph=False)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "checkpoint",
            "tfsaver.data-00000-of-00001",
            "tfsaver.index",
        ]  # fmt: skip  (the shard's temporary directory is gone)
        sess.run("w/Assign", {"w/initial_value:0": np.zeros((4, 3), np.float32)})
        saver.restore(sess, prefix)
        got = sess.run("probs:0", {"x:0": io["x"]})
    np.testing.assert_allclose(got, io["probs"], rtol=1e-6)


def test_regex_full_match_and_sharded_names():
    with tf.Graph().as_default(), tf.Session() as sess:
        s = tf.constant([b"s3://bucket/x", b"/tmp/x", b"s3:/"])
        dyn = tf.placeholder(tf.string, [])
        g = tf.get_default_graph()
        static = g.create_op("StaticRegexFullMatch", [s], {"pattern": "^s3://.*"}).outputs[0]
        dynamic = g.create_op("RegexFullMatch", [s, dyn]).outputs[0]
        name = g.create_op(
            "ShardedFilename", [tf.constant("ckpt/part"), tf.constant(3), tf.constant(12)]
        ).outputs[0]
        spec = g.create_op("ShardedFilespec", [tf.constant("ckpt/part"), tf.constant(12)]).outputs[
            0
        ]
        got = sess.run([static, dynamic, name, spec], {dyn: "/tmp/.*"})
    assert got[0].tolist() == [True, False, False]
    assert got[1].tolist() == [False, True, False]
    assert got[2] == b"ckpt/part-00003-of-00012" and got[3] == b"ckpt/part-?????-of-00012"


def test_tensorflow2_saved_model_loads_runs_and_exports_to_onnx():
    """tf.saved_model.save from TensorFlow 2.21: a tf.Module's variables and its serving
    tf.function (a cond inside), the function library, and the restore functions that hold
    DisableCopyOnRead (TF 2.13+)."""
    fixture = FIXTURE.parent / "saved_model_tf2"
    io = np.load(fixture / "io.npz")
    with tf.Graph().as_default(), tf.Session() as sess:
        meta = tf.saved_model.loader.load(sess, ["serve"], str(fixture))
        sig = meta.signature_def["serving_default"]
        x = sess.graph.get_tensor_by_name(sig.inputs["x"].name)
        y = sess.graph.get_tensor_by_name(sig.outputs["probs"].name)
        for xs, want in ((io["x"], io["probs"]), (io["x_neg"], io["probs_neg"])):
            np.testing.assert_allclose(sess.run(y, {x: xs}), want, rtol=1e-6, atol=1e-7)
        ort = pytest.importorskip("onnxruntime")
        from rill.graph.onnx import export_onnx

        model = export_onnx(sess.graph, [x], [y], session=sess)
    run = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for xs, want in ((io["x"], io["probs"]), (io["x_neg"], io["probs_neg"])):
        got = run.run(None, {run.get_inputs()[0].name: xs})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
