"""ONNX export rules: bitwise ops and shifts, cumulative products, Expm1, the TensorScatter
reductions, string joins and splits, and the internal ops of ONNX's BitCast, Unique, Col2Im and
DFT that the importer builds."""

from __future__ import annotations
