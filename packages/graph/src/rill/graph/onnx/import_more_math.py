"""ONNX import rules: trigonometric and hyperbolic functions, bitwise ops and shifts, cumulative
products, sequence reversal, Compress, Det, CenterCropPad, and the deprecated Upsample and
Scatter."""

from __future__ import annotations
