"""ONNX import rules: signal processing (DFT, STFT, the Blackman, Hamming and Hann windows,
MelWeightMatrix)."""

from __future__ import annotations
