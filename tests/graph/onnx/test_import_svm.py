"""import_onnx of ai.onnx.ml's SVMClassifier and SVMRegressor (import_svm): small hand-built
models, every kernel, two and three classes, with and without probabilities, checked against
onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from rill.graph.onnx.import_util import OnnxImportError
from tests.graph.onnx.test_import_ml import _check, _model, _vi
from tests.onnx_run import run_rill

_ML = "ai.onnx.ml"
_KERNELS = {"LINEAR": [0.0], "POLY": [0.5, 1.0, 3.0], "RBF": [0.7], "SIGMOID": [0.3, -0.2]}


def _x(n=40, f=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, f)).astype(np.float32)


def _svc(classes, kernel, post="NONE", proba=False, strings=False, per_class=(2, 3, 1), seed=1):
    rng = np.random.default_rng(seed)
    per_class = list(per_class[:classes])
    count = sum(per_class)
    pairs = classes * (classes - 1) // 2
    params = _KERNELS[kernel]
    kw = dict(kernel_type=kernel, support_vectors=rng.normal(size=count * 3).round(3).tolist(),
              vectors_per_class=per_class, post_transform=post,
              coefficients=rng.normal(size=(classes - 1) * count).round(3).tolist(),
              rho=rng.normal(size=pairs).round(3).tolist())  # fmt: skip
    kw["kernel_params"] = (params + [0.0, 0.0, 0.0])[:3]
    if proba:
        kw["prob_a"] = (-1 - rng.random(pairs)).round(3).tolist()
        kw["prob_b"] = rng.normal(size=pairs).round(3).tolist() if proba else None
    if strings:
        kw["classlabels_strings"] = ["a", "b", "c", "d"][:classes]
    else:
        kw["classlabels_ints"] = [4, 7, 9, 2][:classes]
    node = helper.make_node("SVMClassifier", ["x"], ["label", "p"], domain=_ML, **kw)
    return _model(node, [_vi("x", 1, [None, 3])],
                  [_vi("label", 8 if strings else 7, [None]), _vi("p", 1, None)], ml=1)  # fmt: skip


@pytest.mark.parametrize("kernel", list(_KERNELS))
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("proba", [False, True])
def test_svm_classifier(kernel, classes, proba):
    for strings in (False, True):
        _check(_svc(classes, kernel, proba=proba, strings=strings), {"x": _x()}, tol=1e-4)


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("classes", [2, 3])
def test_svm_classifier_post_transforms(post, classes):
    _check(_svc(classes, "RBF", post=post), {"x": _x()}, tol=1e-4)


def test_svm_classifier_vote_ties():
    """Four classes, six pairs: rows where two classes share the most votes take the first."""
    m = _svc(4, "LINEAR", per_class=(1, 1, 1, 1), seed=3)
    _check(m, {"x": _x(200)}, tol=1e-4)


def test_svm_classifier_two_class_probit_refused():
    with pytest.raises(OnnxImportError, match="PROBIT of a two-class SVM"):
        run_rill(_svc(2, "RBF", post="PROBIT"), {"x": _x()})


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("positive", [False, True])
def test_svm_classifier_liblinear(classes, positive):
    rng = np.random.default_rng(classes)
    coef = rng.normal(size=classes * 3).round(3)
    coef = np.abs(coef) / 4 if positive else coef
    node = helper.make_node("SVMClassifier", ["x"], ["label", "p"], domain=_ML,
                            coefficients=coef.tolist(), rho=[0.1], kernel_type="LINEAR",
                            kernel_params=[0.0, 0.0, 0.0],
                            classlabels_ints=[4, 7, 9][:classes])  # fmt: skip
    m = _model(node, [_vi("x", 1, [None, 3])], [_vi("label", 7, [None]), _vi("p", 1, None)], ml=1)
    _check(m, {"x": _x()}, tol=1e-4)


@pytest.mark.parametrize("kernel", list(_KERNELS))
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel, one_class):
    rng = np.random.default_rng(5)
    kw = dict(kernel_type=kernel, n_supports=4, support_vectors=rng.normal(size=12).tolist(),
              coefficients=rng.normal(size=4).tolist(), rho=[0.25], one_class=one_class)  # fmt: skip
    kw["kernel_params"] = (_KERNELS[kernel] + [0.0, 0.0, 0.0])[:3]
    node = helper.make_node("SVMRegressor", ["x"], ["y"], domain=_ML, **kw)
    m = _model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 1])], ml=1)
    _check(m, {"x": _x()}, tol=1e-4)
    node = helper.make_node("SVMRegressor", ["x"], ["y"], domain=_ML, coefficients=[1.0, -2, 0.5],
                            rho=[0.3], one_class=one_class, kernel_params=[0.0, 0.0, 0.0])  # fmt: skip
    _check(_model(node, [_vi("x", 1, [None, 3])], [_vi("y", 1, [None, 1])], ml=1), {"x": _x()})
