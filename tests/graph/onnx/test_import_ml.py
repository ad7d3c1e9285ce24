"""import_onnx of the ai.onnx.ml domain (import_ml): small hand-built models, checked against
onnxruntime (and onnx's ReferenceEvaluator where the two agree) on several inputs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from rill.graph.onnx.import_util import OnnxImportError
from tests.onnx_run import run_ort, run_ref, run_rill

_ML = "ai.onnx.ml"
_rng = np.random.default_rng(7)


def _model(node, inputs, outputs, ml=3):
    g = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(_ML, ml)])  # fmt: skip
    m.ir_version = 10  # onnxruntime's newest
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _close(got, want, tol=1e-5):
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        if w.dtype.kind in "OSU":
            assert [str(v, "utf-8") if isinstance(v, bytes) else v for v in g.ravel()] == \
                [str(v) for v in w.ravel()]  # fmt: skip
        else:
            assert g.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _check(m, feeds, ref=False, tol=1e-5):
    got = run_rill(m, feeds)
    _close(got, run_ort(m, feeds), tol)
    if ref:
        _close(got, run_ref(m, feeds), tol)


def _x(n=16, f=3):
    x = _rng.normal(size=(n, f)).astype(np.float32)
    x[::5, 0] = 0.5  # on a threshold
    return x


# -- simple ops ---------------------------------------------------------------------------------


def test_binarizer_scaler_normalizer_imputer():
    x = _x()
    node = helper.make_node("Binarizer", ["x"], ["y"], domain=_ML, threshold=0.5)
    _check(_model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 3])]), {"x": x}, ref=True)
    x[1, 1] = np.nan
    for node, ref in [
        (helper.make_node("Scaler", ["x"], ["y"], domain=_ML, offset=[0.5, 1, -1],
                          scale=[2.0, 0.5, 3]), True),
        (helper.make_node("Scaler", ["x"], ["y"], domain=_ML, offset=[0.25], scale=[2.0]), True),
        (helper.make_node("Imputer", ["x"], ["y"], domain=_ML, replaced_value_float=np.nan,
                          imputed_value_floats=[7.0, 8.0, 9.0]), True),
        (helper.make_node("Imputer", ["x"], ["y"], domain=_ML, replaced_value_float=0.5,
                          imputed_value_floats=[-1.0]), True),
    ]:  # fmt: skip
        m = _model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 3])])
        _check(m, {"x": x}, ref=ref)
    x = np.abs(_x()) + 0.1
    for norm in ("MAX", "L1", "L2"):
        node = helper.make_node("Normalizer", ["x"], ["y"], domain=_ML, norm=norm)
        m = _model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 3])])
        _check(m, {"x": x}, ref=True)


def test_array_feature_extractor_and_feature_vectorizer():
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=_ML)
    m = _model(node, [_vi("x", 1, [None, 3]), _vi("i", 7, [2])], [_vi("y", 1, [None, 2])])
    _check(m, {"x": _x(), "i": np.array([2, 0], np.int64)}, ref=True)
    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain=_ML,
                            inputdimensions=[3, 2])  # fmt: skip
    m = _model(node, [_vi("a", 1, [None, 3]), _vi("b", 1, [None, 2])], [_vi("y", 1, [None, 5])])
    _check(m, {"a": _x(4), "b": _x(4, 2)}, ref=True)


def test_one_hot_encoder_and_category_mapper():
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=_ML, cats_int64s=[1, 3, 5])
    m = _model(node, [_vi("x", 7, [None])], [_vi("y", 1, [None, 3])])
    _check(m, {"x": np.array([1, 5, 2, 3, 3], np.int64)})
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=_ML, cats_strings=["a", "b"])
    m = _model(node, [_vi("x", 8, [None, 2])], [_vi("y", 1, [None, 2, 2])])
    _check(m, {"x": np.array([["a", "c"], ["b", "a"]], object)})
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain=_ML, cats_strings=["a", "b"],
                            cats_int64s=[7, 9], default_int64=-3)  # fmt: skip
    m = _model(node, [_vi("x", 8, [None])], [_vi("y", 7, [None])])
    _check(m, {"x": np.array(["b", "z", "a"], object)})
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain=_ML, cats_strings=["a", "b"],
                            cats_int64s=[7, 9], default_string="?")  # fmt: skip
    m = _model(node, [_vi("x", 7, [None])], [_vi("y", 8, [None])])
    _check(m, {"x": np.array([9, 1, 7], np.int64)})


@pytest.mark.parametrize("keys, values, x", [
    (dict(keys_int64s=[3, 1, 2]), dict(values_floats=[0.5, 1.5, 2.5]), np.array([1, 4, 3, 2])),
    (dict(keys_floats=[0.5, np.nan, 2.0]), dict(values_strings=["a", "n", "c"]),
     np.array([2.0, np.nan, 0.5, 9.0], np.float32)),
    (dict(keys_strings=["x", "y"]), dict(values_strings=["X", "Y"]), np.array(["y", "q", "x"])),
    (dict(keys_int64s=[5, 6]), dict(values_int64s=[50, 60], default_int64=-9),
     np.array([[5, 7], [6, 6]])),
])  # fmt: skip
def test_label_encoder(keys, values, x):
    x = x.astype(object) if x.dtype.kind == "U" else x
    elem = {"O": 8, "f": 1, "i": 7}[x.dtype.kind]
    out = 1 if "values_floats" in values else 8 if "values_strings" in values else 7
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=_ML, **keys, **values)
    m = _model(node, [_vi("x", elem, None)], [_vi("y", out, None)], ml=2)
    _check(m, {"x": x}, ref=True)


# -- linear models ------------------------------------------------------------------------------


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("one_row", [True, False])
def test_linear_classifier(post, classes, one_row):
    if one_row and classes == 3:
        return
    rows = 1 if one_row else classes
    coef = _rng.normal(size=rows * 3).round(2).tolist()
    labels = {"classlabels_ints": [4, 8, 9][:classes]} if post != "NONE" else \
        {"classlabels_strings": ["a", "b", "c"][:classes]}  # fmt: skip
    node = helper.make_node("LinearClassifier", ["x"], ["label", "p"], domain=_ML,
                            coefficients=coef, intercepts=[0.1] * rows, post_transform=post,
                            **labels)  # fmt: skip
    lab = 8 if "classlabels_strings" in labels else 7
    m = _model(node, [_vi("x", 1, [None, 3])], [_vi("label", lab, [None]), _vi("p", 1, None)])
    x = _x() / 3 if post == "PROBIT" else _x()
    if post == "PROBIT":
        x = np.clip(x, 0.05, 0.3)
    if one_row and post == "PROBIT":
        with pytest.raises(OnnxImportError, match="PROBIT of a one-score binary"):
            run_rill(m, {"x": x})
        return
    _check(m, {"x": x}, tol=1e-4)


def test_linear_regressor():
    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain=_ML, targets=2,
                            coefficients=[1, 2, 3, -1, 0.5, 0.25], intercepts=[0.5, -0.5])  # fmt: skip
    m = _model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 2])])
    _check(m, {"x": _x()}, ref=True)
