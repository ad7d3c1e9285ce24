"""scikit-learn models converted by skl2onnx (tests/fixtures/sklearn, made by
tools/fixtures/make_sklearn_fixtures.py), imported into rill and matched with onnxruntime's
recorded outputs: labels exactly, scores, probabilities and predictions to rtol 1e-4, atol 1e-5.
Random forests, gradient boosting, a decision tree, a scaled logistic regression, LinearSVC,
SVC (RBF one-vs-one, and Platt probabilities), SVR, k-nearest neighbours and Gaussian naive
Bayes; the random-forest inputs hold NaN in some rows. Two text pipelines (TF-IDF + logistic
regression, word and bigram counts + multinomial naive Bayes) take strings through
StringNormalizer, onnxruntime's com.microsoft Tokenizer and TfIdfVectorizer; their recorded
outputs are scikit-learn's own (onnxruntime's StringNormalizer needs a locale many machines
lack), one test text holding no vocabulary word."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from rill.exec import Session
from rill.graph.onnx import import_onnx

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sklearn"
NAMES = [
    "rf_binary_nan", "rf_3class_nan", "gb_binary", "gb_3class", "gb_regressor", "rf_regressor",
    "dt_binary", "scaler_logreg_binary", "linear_svc_binary", "svc_rbf_3class",
    "svc_proba_binary", "svr", "knn_3class", "gaussian_nb_3class", "tfidf_logreg_text",
    "count_bigram_nb_text",
]  # fmt: skip


def _manifest() -> dict:
    path = FIXTURES / "MANIFEST.json"
    return {m["name"]: m for m in json.loads(path.read_text())} if path.exists() else {}


def test_fixtures_are_small():
    sizes = [p.stat().st_size for p in FIXTURES.glob("*") if p.suffix in (".onnx", ".npz")]
    assert sum(sizes) < 1_000_000


@pytest.mark.parametrize("name", NAMES)
def test_fixture_imports_and_matches_onnxruntime(name):
    entry = _manifest().get(name)
    if entry is None or not (FIXTURES / f"{name}.onnx").exists():
        pytest.skip(f"fixture {name} is missing: run tools/fixtures/make_sklearn_fixtures.py "
                    "with the peer Python (it needs scikit-learn and skl2onnx)")  # fmt: skip
    data = np.load(FIXTURES / f"{name}.npz", allow_pickle=False)
    g, inputs, outputs = import_onnx(str(FIXTURES / f"{name}.onnx"))
    with Session(graph=g) as s:
        got = s.run([outputs[o] for o in entry["outputs"]],
                    {inputs[entry["inputs"][0]]: data["input_0"]})  # fmt: skip
    x = data["input_0"]
    if name.endswith("_nan"):
        assert np.isnan(x).any(axis=1).sum() >= 3
    for i, (out, a) in enumerate(zip(entry["outputs"], got, strict=True)):
        want = data[f"output_{i}"]
        a = np.asarray(a)
        assert a.shape == want.shape, (name, out, a.shape, want.shape)
        if want.dtype.kind in "iuOSU":
            np.testing.assert_array_equal(a.astype(want.dtype), want, err_msg=f"{name} {out}")
        else:
            np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} {out}")
