"""`rill-mobile inspect` and `rill-mobile run` (the converter's `convert` subcommand is tested
with the converter)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from mobile.tflite_builder import Op, T, build

from rill.mobile.cli import main

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


def test_inspect(capsys):
    assert main(["inspect", str(FIXTURES / "depthwise_int8.tflite"), "--tensors"]) == 0
    out = capsys.readouterr().out
    assert "schema version 3" in out
    assert "DEPTHWISE_CONV_2D v3" in out and "fused_activation_function=RELU" in out
    assert "padding=SAME" in out
    assert "input  #0 'serving_default_x:0' FLOAT32[?,16,16,3]" in out
    assert "q=per-channel(dim 3, 6 scales" in out
    assert "signature 'serving_default'" in out
    assert "arena:" in out and "all operators supported" in out


def test_inspect_lists_unsupported(tmp_path, capsys):
    model = build([T((3,)), T((3,)), T((3,))], [Op("SVDF", [0], [1]), Op("RELU", [1], [2], version=9)],
                  [0], [2])  # fmt: skip
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    assert main(["inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "unsupported operators:" in out
    assert "SVDF version 1 (operators #0)" in out and "RELU version 9 (operators #1)" in out


def test_inspect_bad_file(tmp_path, capsys):
    path = tmp_path / "bad.tflite"
    path.write_bytes((FIXTURES / "cnn_float.tflite").read_bytes()[:300])
    assert main(["inspect", str(path)]) == 1
    assert "truncated/corrupt .tflite" in capsys.readouterr().err


def test_run_npy_to_npz(tmp_path, capsys):
    data = np.load(FIXTURES / "cnn_int8.npz")
    x = tmp_path / "x.npy"
    np.save(x, data["input_0"][:2])
    out = tmp_path / "out.npz"
    assert main(["run", str(FIXTURES / "cnn_int8.tflite"), "--input", str(x), "-o", str(out)]) == 0
    with np.load(out) as z:
        got = z["probs"]
    assert got.shape == (2, 10)
    np.testing.assert_array_equal(got, data["ref_output_0"][:2])
    assert "wrote 1 array(s)" in capsys.readouterr().out


def test_run_prints_and_all_tensors(tmp_path, capsys):
    data = np.load(FIXTURES / "depthwise_float.npz")
    x = tmp_path / "x.npz"
    np.savez(x, x=data["input_0"][:1])
    out = tmp_path / "all.npz"
    model = str(FIXTURES / "depthwise_float.tflite")
    assert main(["run", model, "-i", str(x), "--all-tensors", "-o", str(out)]) == 0
    with np.load(out) as z:
        assert {"probs", "feat", "concat", "Mean"} <= set(z.files)
    assert main(["run", model, "-i", str(x)]) == 0
    assert "probs: float32[1, 4]" in capsys.readouterr().out


def test_run_wrong_input_shape(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 28, 28, 1), np.float64))
    assert main(["run", str(FIXTURES / "cnn_float.tflite"), "-i", str(x)]) == 1
    assert "Got value of type FLOAT64 but expected type FLOAT32" in capsys.readouterr().err


def test_console_script_help():
    exe = pathlib.Path(sys.executable).parent / "rill-mobile"
    proc = subprocess.run([str(exe), "-h"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "inspect" in proc.stdout and "run" in proc.stdout and "convert" in proc.stdout


def test_convert_subcommand_is_dispatched_to_the_converter(capsys):
    with pytest.raises(SystemExit) as e:
        main(["convert", "-h"])
    assert e.value.code == 0
    assert "--quantize" in capsys.readouterr().out
