"""ONNX import rules: quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger)."""

from __future__ import annotations
