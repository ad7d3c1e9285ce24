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


def _dropout_model(opset=None):
    """A dropout whose keep probability is fed (1.0 by default; tf.nn.dropout's mask): random
    ops in the model."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        keep = rg.placeholder_with_default(np.float32(1.0), [], name="keep")
        y = x * rg.floor(keep + rg.random_uniform(rg.shape(x))) / keep
    return g, x, y, export_onnx(g, [x], [y], opset=opset)


def test_the_default_steps_down_to_an_opset_whose_random_kernels_onnxruntime_has():
    g, x, y, m = _dropout_model()
    opset = m.opset_import[0].version
    assert opset <= versions.runtime_max_opset(13)
    types = {n.op_type for n in m.graph.node}
    assert types & versions.PROBED.keys()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    v = np.arange(12, dtype=np.float32).reshape(2, 6)
    with Session(graph=g) as s:
        want = s.run(y, {x: v})
    np.testing.assert_allclose(sess.run(None, {"x": v})[0], want, rtol=1e-6)
    if _loads(_dropout_model(versions.runtime_max_opset(13))[3]):
        assert opset == versions.runtime_max_opset(13)  # a runtime that has them: no step


def test_kernel_opset_takes_the_newest_opset_with_every_probed_kernel(monkeypatch):
    have = {"RandomUniformLike": 21, "Multinomial": 19}
    monkeypatch.setattr(versions, "_runtime_has_kernel", lambda t, o: o <= have[t])
    assert versions.kernel_opset({"Relu", "RandomUniformLike"}, 24) == 21
    assert versions.kernel_opset({"RandomUniformLike", "Multinomial"}, 24) == 19
    assert versions.kernel_opset({"Relu", "Add"}, 24) == 24  # nothing probed
    have["Multinomial"] = 0  # no opset in range: left as it was
    assert versions.kernel_opset({"Multinomial"}, 24) == 24


def test_an_explicit_opset_is_kept_even_where_a_kernel_is_missing():
    newest = versions.runtime_max_opset(13)
    m = _dropout_model(newest)[3]
    assert m.opset_import[0].version == newest
