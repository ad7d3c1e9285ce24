"""`rill-mobile convert`: GraphDef or text graph + checkpoint (+ calibration) → .tflite."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType

import rill.graph as rg
from rill.exec.checkpoint_format import write_checkpoint
from rill.mobile.convert.cli import main as convert_main

RNG = np.random.default_rng(5)


def _cli_entries():
    """The ways to run `convert`: alone, and through rill-mobile's CLI once it registers it."""
    entries = [("convert.cli", convert_main)]
    try:
        cli = importlib.import_module("rill.mobile.cli")
    except ImportError:
        return entries
    entries.append(("rill-mobile", lambda argv: cli.main(["convert", *argv])))
    return entries


@pytest.fixture(params=[name for name, _ in _cli_entries()])
def run_cli(request):
    return dict(_cli_entries())[request.param]


@pytest.fixture
def saved(tmp_path):
    """A small dense model as a GraphDef, its text form, a checkpoint and calibration data."""
    w1, b1 = (RNG.standard_normal((20, 16)) * 0.3).astype(np.float32), np.zeros(16, np.float32)
    w2, b2 = (RNG.standard_normal((16, 4)) * 0.3).astype(np.float32), np.ones(4, np.float32)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 20], name="x")
        v1 = rg.Variable(np.zeros((20, 16), np.float32), name="w1")
        c1 = rg.Variable(np.zeros(16, np.float32), name="b1")
        v2 = rg.Variable(np.zeros((16, 4), np.float32), name="w2")
        c2 = rg.Variable(np.zeros(4, np.float32), name="b2")
        h = rg.relu(rg.matmul(x, v1) + c1, name="hidden")
        rg.identity(rg.matmul(h, v2) + c2, name="y")
    (tmp_path / "model.pb").write_bytes(g.as_graph_def().SerializeToString())
    (tmp_path / "model.txt").write_text(g.to_text())
    write_checkpoint(str(tmp_path / "ckpt"), {"w1": w1, "b1": b1, "w2": w2, "b2": b2})
    data = RNG.standard_normal((64, 20)).astype(np.float32)
    np.savez(tmp_path / "cal.npz", **{"x:0": data})

    def reference(v):
        return np.maximum(v @ w1 + b1, 0) @ w2 + b2

    return tmp_path, data, reference


def _run(path, feed, ref=True):
    kind = OpResolverType.BUILTIN_REF if ref else OpResolverType.AUTO
    it = LiteRT(model_path=str(path), experimental_op_resolver_type=kind)
    d = it.get_input_details()[0]
    it.resize_tensor_input(d["index"], list(feed.shape))
    it.allocate_tensors()
    it.set_tensor(d["index"], feed)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("graph_file", ["model.pb", "model.txt"])
def test_float_conversion(saved, run_cli, graph_file, capsys):
    d, data, reference = saved
    out = d / "m.tflite"
    rc = run_cli([str(d / graph_file), "--inputs", "x:0", "--outputs", "y:0",
                  "--checkpoint", str(d / "ckpt"), "-o", str(out)])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and "FULLY_CONNECTED×2" in text
    assert "inputs:  x [-1, 20] float32" in text and "outputs: y [-1, 4] float32" in text
    got = _run(out, data[:5], ref=False)
    want = reference(data[:5])
    assert np.max(np.abs(got - want)) <= 1e-5 * np.abs(want).max()


def test_int8_with_calibration_fallback_and_report(saved, run_cli, capsys):
    d, data, reference = saved
    out = d / "q.tflite"
    argv = [str(d / "model.pb"), "--inputs", "x", "--outputs", "y", "--checkpoint", str(d / "ckpt"),
            "--quantize", "int8", "--calibration", str(d / "cal.npz"), "--calibration-batch",
            "16", "-o", str(out)]  # fmt: skip
    assert run_cli(argv) == 0
    assert "QUANTIZE, FULLY_CONNECTED×2, DEQUANTIZE" in capsys.readouterr().out
    got = _run(out, data[:8])
    want = reference(data[:8])
    assert np.max(np.abs(got - want)) < 0.05 * np.abs(want).max()
    assert run_cli([*argv, "--int8-io", "-o", str(d / "io.tflite")]) == 0
    assert "x [-1, 20] int8" in capsys.readouterr().out
    assert run_cli([*argv, "--float-fallback", "hidden", "-o", str(d / "fb.tflite")]) == 0
    assert "4 operators (FULLY_CONNECTED×2, QUANTIZE, DEQUANTIZE)" in capsys.readouterr().out
    try:
        importlib.import_module("rill.mobile").Interpreter  # noqa: B018
    except (ImportError, AttributeError):
        pytest.skip("the report runs rill.mobile.Interpreter, which is not there yet")
    assert run_cli([*argv, "--report"]) == 0
    text = capsys.readouterr().out
    assert "quantization report (4 calibration batches), worst first:" in text
    assert "layer (rill op)" in text and "MatMul" in text


def test_dynamic_range(saved, run_cli, capsys):
    d, data, reference = saved
    out = d / "dyn.tflite"
    rc = run_cli([str(d / "model.pb"), "--inputs", "x:0", "--outputs", "y:0", "--checkpoint",
                  str(d / "ckpt"), "--quantize", "dynamic", "-o", str(out)])  # fmt: skip
    assert rc == 0
    assert "4 operators (DEQUANTIZE×2, FULLY_CONNECTED×2)" in capsys.readouterr().out
    want = reference(data[:4])
    assert np.max(np.abs(_run(out, data[:4]) - want)) < 0.02 * np.abs(want).max()


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "outputs read variables that have no value: b1, b2, w1, w2"),
        (["--checkpoint", "CKPT", "--quantize", "int8"], "--quantize int8 needs --calibration"),
        (["--checkpoint", "CKPT", "--report"], "--report compares an int8 model"),
        (["--checkpoint", "CKPT", "--calibration", "CAL"], "only used with --quantize int8"),
        (["--checkpoint", "CKPT", "--int8-io"], "int8 inputs/outputs need full integer"),
    ],
)
def test_errors_are_one_line_on_stderr(saved, run_cli, capsys, extra, message):
    d, *_ = saved
    extra = [str(d / "ckpt") if a == "CKPT" else str(d / "cal.npz") if a == "CAL" else a
             for a in extra]  # fmt: skip
    rc = run_cli([str(d / "model.pb"), "--inputs", "x:0", "--outputs", "y:0", *extra,
                  "-o", str(d / "bad.tflite")])  # fmt: skip
    assert rc == 1
    err = capsys.readouterr().err
    assert err.startswith("rill-mobile convert: error: ") and message in err
    assert not (d / "bad.tflite").exists()


def test_unknown_tensor_and_missing_calibration_input(saved, run_cli, capsys, tmp_path):
    d, *_ = saved
    base = [str(d / "model.pb"), "--checkpoint", str(d / "ckpt"), "-o", str(tmp_path / "o")]
    assert run_cli([*base, "--inputs", "x:0", "--outputs", "nope:0"]) == 1
    assert "nope" in capsys.readouterr().err
    np.savez(tmp_path / "wrong.npz", z=np.zeros((4, 20), np.float32))
    rc = run_cli([*base, "--inputs", "x", "--outputs", "y", "--quantize", "int8",
                  "--calibration", str(tmp_path / "wrong.npz")])  # fmt: skip
    assert rc == 1
    assert "the inputs ['x'] have none" in capsys.readouterr().err


def test_unconvertible_op_names_op_and_line(tmp_path, run_cli, capsys):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 3], name="x")
        rg.softplus(x, name="total")
    (tmp_path / "g.pb").write_bytes(g.as_graph_def().SerializeToString())
    rc = run_cli([str(tmp_path / "g.pb"), "--inputs", "x:0", "--outputs", "total:0",
                  "-o", str(tmp_path / "o.tflite")])  # fmt: skip
    assert rc == 1
    err = capsys.readouterr().err
    assert "no rule for Softplus" in err and "op 'total' (Softplus)" in err
