"""Bounded fuzz runs per format (slow suite): a fixed seed, a few hundred mutated inputs each,
run in forks under a 4 GiB / 10 s cap by tools/fuzz. No escape, hang, crash or blowup may occur."""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.fuzz.campaign import campaign  # noqa: E402

pytestmark = pytest.mark.slow

CASES = {"graphdef": 300, "text": 300, "onnx": 200, "tflite": 300, "checkpoint": 300}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_bounded_fuzz(fmt):
    if fmt == "onnx":
        pytest.importorskip("onnx")
    tally, findings = campaign(fmt, CASES[fmt], seed=22)
    bad = {o: tally[o] for o in ("escape", "hang", "crash", "blowup") if tally[o]}
    report = "\n".join(f"{n} × {sig} | {d[:160]}" for sig, (n, d) in findings.items())
    assert not bad, f"{fmt}: {bad}\n{report}"
    assert tally["accepted"] + tally["clean"] == CASES[fmt]
