"""export_onnx's default opset: never one the installed onnxruntime refuses."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx, versions

ort = pytest.importorskip("onnxruntime")


def _model(opset=None):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
        y = rg.tanh(x * 2.0 + 1.0, name="y")
    return g, x, y, export_onnx(g, [x], [y], opset=opset)


def _loads(model) -> bool:
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001
        return False
    return True


def test_default_is_the_newest_opset_onnxruntime_loads():
    g, x, y, m = _model()
    opset = m.opset_import[0].version
    assert opset == versions.runtime_max_opset(13)
    assert m.ir_version == onnx.helper.find_min_ir_version_for(list(m.opset_import))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = sess.run(None, {sess.get_inputs()[0].name: v})
    np.testing.assert_allclose(got, Session(graph=g).run(y, {x: v}), rtol=1e-6)
    # ... and it is the newest: the next one up (when onnx ships it) is refused.
    if opset < onnx.defs.onnx_opset_version():
        assert not _loads(_model(opset + 1)[3])


def test_without_onnxruntime_the_default_is_the_conservative_opset(monkeypatch):
    versions.runtime_max_opset.cache_clear()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    try:
        assert versions.runtime_max_opset(13) is None
        m = _model()[3]
        assert m.opset_import[0].version == versions.CONSERVATIVE_OPSET == 21
        assert m.ir_version == 10
    finally:
        versions.runtime_max_opset.cache_clear()
    assert _loads(m)  # and the installed onnxruntime (>= 1.20) loads it


def test_an_explicit_opset_still_wins():
    assert _model(17)[3].opset_import[0].version == 17
