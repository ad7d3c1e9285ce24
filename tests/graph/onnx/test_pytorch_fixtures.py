"""Models exported by PyTorch's two exporters (tests/fixtures/onnx, made by
tools/fixtures/make_onnx_fixtures.py), imported into rill and matched with onnxruntime's
recorded outputs: LSTM (one layer; two bidirectional layers with sequence lengths), GRU (two
bidirectional layers, initial state) and a U-Net with ConvTranspose and Resize, each from the
TorchScript exporter (opset 17) and the dynamo exporter (opset 20)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from rill.exec import Session
from rill.graph.onnx import import_onnx

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "onnx"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
CASES = [(m["model"], m["exporter"]) for m in MANIFEST]


def test_every_model_exported_with_both_exporters():
    assert {m["model"] for m in MANIFEST} == {"lstm", "lstm_bi_len", "gru", "unet"}
    for m in MANIFEST:
        assert "error" not in m, m
        assert m["opset"] == {"ts": 17, "dynamo": 20}[m["exporter"]]
        assert (FIXTURES / f"{m['model']}_{m['exporter']}.onnx").stat().st_size < 2_000_000
    ops = {(m["model"], m["exporter"]): set(m["ops"]) for m in MANIFEST}
    for e in ("ts", "dynamo"):
        assert "LSTM" in ops[("lstm", e)] and "GRU" in ops[("gru", e)]
        assert {"ConvTranspose", "Resize"} <= ops[("unet", e)]


@pytest.mark.parametrize("model,exporter", CASES)
def test_fixture_imports_and_matches_onnxruntime(model, exporter):
    path = FIXTURES / f"{model}_{exporter}.onnx"
    data = np.load(FIXTURES / f"{model}_{exporter}.npz", allow_pickle=False)
    entry = next(m for m in MANIFEST if (m["model"], m["exporter"]) == (model, exporter))
    g, inputs, outputs = import_onnx(str(path))
    feeds = {inputs[name]: data[f"input_{i}"] for i, name in enumerate(entry["inputs"])}
    with Session(graph=g) as s:
        got = s.run([outputs[name] for name in entry["outputs"]], feeds)
    for i, (name, a) in enumerate(zip(entry["outputs"], got)):
        want = data[f"output_{i}"]
        assert a.shape == want.shape and a.dtype == want.dtype, (name, a.shape, want.shape)
        np.testing.assert_allclose(a, want, rtol=1e-3, atol=1e-4, err_msg=f"{model} {name}")


def test_lengths_reach_the_lstm_in_the_torchscript_export():
    """pack_padded_sequence becomes LSTM's sequence_lens: outputs past a length are zero."""
    data = np.load(FIXTURES / "lstm_bi_len_ts.npz", allow_pickle=False)
    lengths, y = data["input_1"], data["output_0"]  # y [T, B, 2H]
    for b, n in enumerate(lengths):
        assert np.all(y[n:, b] == 0) and np.any(y[:n, b] != 0)
