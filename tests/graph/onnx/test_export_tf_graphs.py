"""TensorFlow-made TF1 graphs (tests/fixtures/tf_graphs/export_*, written by
tools/fixtures/tf_graph_fixture_export.py) imported, exported to ONNX and run in onnxruntime:
the outputs TensorFlow recorded. Their control flow is TensorFlow's own: v1 Switch / Merge /
TensorArrays, and v2 If / While / TensorLists as rill's importer lowers them."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import pytest

import rill.graph as rg
from rill.graph.onnx import export_onnx

ort = pytest.importorskip("onnxruntime")

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "tf_graphs"
NAMES = sorted(p.stem for p in FIXTURES.glob("export_*.json"))


def test_the_fixtures_are_there():
    assert len(NAMES) == 6


@pytest.mark.parametrize("name", NAMES)
def test_tensorflow_graph_exports_and_runs_in_onnxruntime(name):
    m = json.loads((FIXTURES / f"{name}.json").read_text())
    arrays = np.load(FIXTURES / f"{name}.npz")
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def((FIXTURES / m["graph"]).read_bytes(), name="")
    for step in m["steps"]:
        ins = list(step["feeds"])
        outs = list(step["fetches"])
        model = export_onnx(g, [g.get_tensor_by_name(t) for t in ins],
                            [g.get_tensor_by_name(t) for t in outs])  # fmt: skip
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {i.name: np.asarray(arrays[step["feeds"][t]]) for i, t in
                 zip(sess.get_inputs(), ins)}  # fmt: skip
        for t, got in zip(outs, sess.run(None, feeds)):
            want = arrays[step["fetches"][t]]
            assert got.shape == want.shape, f"{step['name']}: {t}"
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{step['name']}: {t}")  # fmt: skip
