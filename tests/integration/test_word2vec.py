"""examples/word2vec.py runs small on four local devices: the training loss falls with both
sampled losses, the full-softmax evaluation improves, and neighbours share their topic."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _example():
    spec = importlib.util.spec_from_file_location("word2vec", ROOT / "examples" / "word2vec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SMALL = ["--vocab", "400", "--sentences", "800", "--steps", "240", "--report", "60",
         "--batch", "64", "--num-sampled", "16"]  # fmt: skip


@pytest.mark.parametrize("loss", ["sampled_softmax", "nce"])
def test_word2vec_small_loss_falls(loss):
    lines = []
    result = _example().main([*SMALL, "--loss", loss], out=lines.append)
    text = "\n".join(lines)
    assert "embeddings/part_3 on /device:CPU:3" in text
    assert len(result["losses"]) == 4
    assert result["losses"][-1] < 0.8 * result["losses"][0], text
    if loss == "sampled_softmax":
        assert result["eval_after"] < result["eval_before"], text
    assert result["same_topic"] > 0.5, text  # chance is 1/8
    assert "neighbours in the same topic" in text
