"""Bounded fuzz runs per format (slow suite): a fixed seed, a few hundred mutated inputs each,
run in forks under a 4 GiB / 10 s cap by tools/fuzz. No escape, hang, crash or blowup may occur;
classes not fixed yet are listed in KNOWN and make the test an explicit xfail."""

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

# Formats whose bounded run may still find defect classes that are not fixed yet (see the report
# of issue 22): the test runs and, when it finds any, xfails listing them.
KNOWN: dict[str, str] = {
    # Found by the field-level GraphDef mutator in the last campaign of issue 22 (reproducers in
    # tests/fixtures/fuzz/), not fixed yet: IndexError in function_lowering.py:273 (a function
    # call with fewer inputs than its signature), TypeError in graph_def.py:500 (a number attr
    # holding a list), TypeError in placer.py:100 (a device given as bytes), a 16 GB constant
    # declared by a Const's tensor_shape (MemoryError), a run past 30 s of wall time.
    "graphdef": "issue 22: 5 GraphDef defect classes open (see the comment above)",
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_bounded_fuzz(fmt):
    if fmt == "onnx":
        pytest.importorskip("onnx")
    tally, findings = campaign(fmt, CASES[fmt], seed=22)
    bad = {o: tally[o] for o in ("escape", "hang", "crash", "blowup") if tally[o]}
    report = "\n".join(f"{n} × {sig} | {d[:160]}" for sig, (n, d) in findings.items())
    if fmt in KNOWN and bad:
        pytest.xfail(f"{KNOWN[fmt]}\n{report}")
    assert not bad, f"{fmt}: {bad}\n{report}"
    assert tally["accepted"] + tally["clean"] == CASES[fmt]
