"""ONNX import rules: random generators (RandomNormal, RandomUniform and their Like forms,
Bernoulli, Multinomial) and other remaining ops (BitCast, GlobalLpPool, MaxRoiPool, DeformConv)."""

from __future__ import annotations
