"""ONNX import rules: more normalizations, pooling and losses (GroupNormalization,
RMSNormalization, RotaryEmbedding, LpPool, MaxUnpool, NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss)."""

from __future__ import annotations
