"""TensorFlow-made TF1 graphs (tests/fixtures/tf_graphs/export_*, written by
tools/fixtures/tf_graph_fixture_export.py) imported, exported to ONNX and run in onnxruntime:
the outputs TensorFlow recorded. Their control flow is TensorFlow's own: v1 Switch / Merge /
TensorArrays, and v2 If / While / Case / TensorLists as rill's importer lowers them. The
issue-18 fixtures with functional control flow (functional_v2: a variable read in If, While
and Case; frozen_tf2*) export too."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx

ort = pytest.importorskip("onnxruntime")

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "tf_graphs"
EXPORT = sorted(p.stem for p in FIXTURES.glob("export_*.json"))
NAMES = EXPORT + ["functional_v2", "frozen_tf2", "frozen_tf2_functional"]


def test_the_fixtures_are_there():
    assert len(EXPORT) == 9


@pytest.mark.parametrize("name", NAMES)
def test_tensorflow_graph_exports_and_runs_in_onnxruntime(name):
    m = json.loads((FIXTURES / f"{name}.json").read_text())
    arrays = np.load(FIXTURES / f"{name}.npz")
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def((FIXTURES / m["graph"]).read_bytes(), name="")
    session = Session(graph=g)  # variables (functional_v2's) are frozen from it
    for step in m["steps"]:
        if step["targets"]:  # the initializer
            session.run([g.get_operation_by_name(t) for t in step["targets"]])
            continue
        ins = list(step["feeds"])
        outs = list(step["fetches"])
        model = export_onnx(g, [g.get_tensor_by_name(t) for t in ins],
                            [g.get_tensor_by_name(t) for t in outs], session=session)  # fmt: skip
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {i.name: np.asarray(arrays[step["feeds"][t]]) for i, t in
                 zip(sess.get_inputs(), ins)}  # fmt: skip
        for t, got in zip(outs, sess.run(None, feeds)):
            want = arrays[step["fetches"][t]]
            assert got.shape == want.shape, f"{step['name']}: {t}"
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{step['name']}: {t}")  # fmt: skip
