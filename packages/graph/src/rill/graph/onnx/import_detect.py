"""ONNX import rules: scatters, detection and sampling (ScatterND, TensorScatter,
NonMaxSuppression, RoiAlign, GridSample, AffineGrid, Unique, Col2Im)."""

from __future__ import annotations
