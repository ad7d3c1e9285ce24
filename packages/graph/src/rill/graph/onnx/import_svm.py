"""ONNX import rules: ai.onnx.ml's SVMClassifier and SVMRegressor, as scikit-learn's SVC, SVR,
NuSVC, OneClassSVM and linear SVMs converted by skl2onnx use them.

The kernel values K(x, v) of every row against every support vector are TensorFlow ops (LINEAR
x·v, POLY (γ·x·v + c₀)^d, RBF exp(-γ·‖x - v‖²) from the differences themselves, as onnxruntime
computes it, SIGMOID tanh(γ·x·v + c₀)); the one-vs-one decision values are one float64 MatMul of
them with a [vectors, pairs] matrix built at import from the coefficients, plus rho. Probabilities
(prob_a, prob_b) come from rill's _OnnxSvmProbability. Labels and scores follow onnxruntime
(1.31/1.32), which the specification leaves open for two classes:

* no probabilities, more than two classes: the label with the most one-vs-one votes (pair (i, j)
  votes i where its value > 0; ties to the lower index); scores are the pair values, post
  transformed;
* no probabilities, two classes: one value s, labelled classlabels[0] where s > 0; scores [-s, s]
  under NONE, [1 - σ(s), σ(s)] under LOGISTIC and [1 - s, s] under SOFTMAX and SOFTMAX_ZERO;
  PROBIT is refused (onnxruntime leaves the second column unwritten);
* probabilities: the label still by votes; scores are the coupled probabilities, post
  transformed;
* no support vectors (liblinear form): scores x·wₖ + rho[0] per class, post transformed; two
  classes label classlabels[1] where the top raw score is ≥ 0.5 (coefficients all ≥ 0) or > 0
  (else), otherwise the top class.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_ml import _labels, _pick, _post_transform, _rows
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op

_ML = "ai.onnx.ml"
_F32, _F64 = dtypes.float32, dtypes.float64
_KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _width(x, what: str) -> int:
    if x.shape.rank != 2 or x.shape[1] is None:
        raise OnnxImportError(f"{what}: the feature count of X must be known at import")
    return int(x.shape[1])


def _kernel(x, vectors: np.ndarray, kernel_type: str, kernel_params, what: str):
    """K(x, v) [N, V] float32 for rows x [N, F] and support vectors [V, F]."""
    if kernel_type not in _KERNELS:
        raise OnnxImportError(f"{what}: kernel_type {kernel_type!r} is not one of {_KERNELS}")
    gamma, coef0, degree = (list(kernel_params or []) + [0.0, 0.0, 0.0])[:3]
    if kernel_type == "RBF":
        d = op("Sub", [op("ExpandDims", [x, const(1, dtypes.int32)]), const(vectors)])
        dist = op("Sum", [op("Square", [d]), const(-1, dtypes.int32)])
        return op("Exp", [op("Mul", [dist, const(-gamma, _F32)])])
    dot = op("MatMul", [x, const(np.ascontiguousarray(vectors.T))])
    if kernel_type == "LINEAR":
        return dot
    dot = op("AddV2", [op("Mul", [dot, const(gamma, _F32)]), const(coef0, _F32)])
    if kernel_type == "POLY":
        return op("Pow", [dot, const(degree, _F32)])
    return op("Tanh", [dot])


def _vectors(support_vectors, count: int, width: int, what: str) -> np.ndarray:
    sv = np.asarray(support_vectors or [], np.float32)
    if sv.size != count * width:
        raise OnnxImportError(
            f"{what}: {sv.size} support_vectors values for {count} vectors of {width} features"
        )
    return sv.reshape(count, width)


def _pairs(classes: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(classes) for j in range(i + 1, classes)]


@register_onnx_import("SVMClassifier", domain=_ML)
def svm_classifier(n, x, *, classlabels_ints=None, classlabels_strings=None, coefficients=None,
                   kernel_params=None, kernel_type="LINEAR", post_transform="NONE", prob_a=None,
                   prob_b=None, rho=None, support_vectors=None, vectors_per_class=None):  # fmt: skip
    what = "SVMClassifier"
    labels = _labels(classlabels_ints, classlabels_strings, what)
    classes = int(labels.shape[0])
    x = _rows(x)
    width = _width(x, what)
    coef = np.asarray(coefficients or [], np.float32)
    rho = list(rho or [])
    if coef.size == 0 or not rho:
        raise OnnxImportError(f"{what} needs coefficients and rho")
    if len(prob_a or []) != len(prob_b or []):
        raise OnnxImportError(f"{what}: {len(prob_a or [])} prob_a but {len(prob_b or [])} prob_b")
    per_class = list(vectors_per_class or [])
    count = sum(per_class)
    if count == 0:
        return _liblinear(x, coef, rho[0], labels, classes, width, post_transform, what)
    if len(per_class) != classes:
        raise OnnxImportError(f"{what}: vectors_per_class has {len(per_class)} entries for "
                              f"{classes} classes")  # fmt: skip
    pairs = _pairs(classes)
    if coef.size < (classes - 1) * count or len(rho) < len(pairs):
        raise OnnxImportError(
            f"{what}: {classes} classes and {count} support vectors need "
            f"{(classes - 1) * count} coefficients and {len(pairs)} rho, got {coef.size} and "
            f"{len(rho)}"
        )
    coef = coef[: (classes - 1) * count].reshape(classes - 1, count)
    start = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
    # Pair (i, j) weighs class i's vectors by coefficient row j - 1 and class j's by row i.
    w = np.zeros((count, len(pairs)), np.float64)
    for p, (i, j) in enumerate(pairs):
        w[start[i] : start[i + 1], p] = coef[j - 1, start[i] : start[i + 1]]
        w[start[j] : start[j + 1], p] = coef[i, start[j] : start[j + 1]]
    k = _kernel(x, _vectors(support_vectors, count, width, what), kernel_type, kernel_params, what)
    s = op("MatMul", [op("Cast", [k], {"DstT": _F64}), const(w)])
    s = op("Cast", [op("AddV2", [s, const(np.asarray(rho[: len(pairs)], np.float64))])],
           {"DstT": _F32})  # fmt: skip
    wins = np.zeros((len(pairs), classes), np.float32)
    losses = np.zeros((len(pairs), classes), np.float32)
    for p, (i, j) in enumerate(pairs):
        wins[p, i], losses[p, j] = 1, 1
    positive = op("Cast", [op("Greater", [s, const(0.0, _F32)])], {"DstT": _F32})
    votes = op("AddV2", [op("MatMul", [positive, const(wins)]),
                         op("MatMul", [op("Sub", [const(1.0, _F32), positive]), const(losses)])])  # fmt: skip
    label = _pick(labels, op("ArgMax", [votes, const(1, dtypes.int32)]))
    if prob_a:
        probs = op("_OnnxSvmProbability", [s], {"classes": classes, "prob_a": list(prob_a),
                                                "prob_b": list(prob_b)}, name="SvmProbability")  # fmt: skip
        return [label, _post_transform(probs, post_transform)]
    if classes > 2:
        return [label, _post_transform(s, post_transform)]
    if post_transform == "PROBIT":
        raise OnnxImportError(f"{what}: PROBIT of a two-class SVM without probabilities is "
                              "refused: onnxruntime leaves the second score column unwritten")  # fmt: skip
    if post_transform == "LOGISTIC":
        s = op("Sigmoid", [s])
    one = op("Neg", [s]) if post_transform == "NONE" else op("Sub", [const(1.0, _F32), s])
    return [label, op("ConcatV2", [[one, s], const(1, dtypes.int32)])]


def _liblinear(x, coef, bias, labels, classes, width, post_transform, what):
    if coef.size != classes * width:
        raise OnnxImportError(f"{what}: {coef.size} coefficients for {classes} classes of "
                              f"{width} features")  # fmt: skip
    raw = op("AddV2", [op("MatMul", [x, const(coef.reshape(classes, width).T.copy())]),
                       const(bias, _F32)])  # fmt: skip
    top = op("ArgMax", [raw, const(1, dtypes.int32)])
    if classes == 2:
        best = op("Max", [raw, const(1, dtypes.int32)])
        if bool(np.all(coef >= 0)):
            up = op("GreaterEqual", [best, const(0.5, _F32)])
        else:
            up = op("Greater", [best, const(0.0, _F32)])
        top = op(
            "SelectV2", [up, const(1, dtypes.int64), op("Cast", [top], {"DstT": dtypes.int64})]
        )
    return [_pick(labels, top), _post_transform(raw, post_transform)]


@register_onnx_import("SVMRegressor", domain=_ML)
def svm_regressor(n, x, *, coefficients=None, kernel_params=None, kernel_type="LINEAR",
                  n_supports=0, one_class=0, post_transform="NONE", rho=None,
                  support_vectors=None):  # fmt: skip
    what = "SVMRegressor"
    x = _rows(x)
    width = _width(x, what)
    coef = np.asarray(coefficients or [], np.float32)
    rho = list(rho or [])
    if coef.size == 0 or not rho:
        raise OnnxImportError(f"{what} needs coefficients and rho")
    if n_supports:
        if coef.size != n_supports:
            raise OnnxImportError(f"{what}: {coef.size} coefficients for {n_supports} vectors")
        sv = _vectors(support_vectors, n_supports, width, what)
        k = _kernel(x, sv, kernel_type, kernel_params, what)
        y = op("MatMul", [k, const(coef.reshape(-1, 1))])
    else:
        if coef.size != width:
            raise OnnxImportError(f"{what}: {coef.size} coefficients for {width} features")
        y = op("MatMul", [x, const(coef.reshape(-1, 1))])
    y = op("AddV2", [y, const(rho[0], _F32)])
    if one_class:
        y = op("SelectV2", [op("Greater", [y, const(0.0, _F32)]), const(1.0, _F32),
                            const(-1.0, _F32)])  # fmt: skip
    # onnxruntime ignores post_transform here.
    return y
