"""Kernels for rill.graph.ops.batch_norm_ops: FusedBatchNorm(V2) and their gradients, as the
V3 kernels of nn_kernels without the third reserve space."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.nn_kernels import fused_batch_norm_grad_v3, fused_batch_norm_v3


def _forward(epsilon, exponential_avg_factor, data_format, is_training):
    inner = fused_batch_norm_v3(epsilon, exponential_avg_factor, data_format, is_training)

    def compute(x, scale, offset, mean, variance):
        return inner(x, scale, offset, mean, variance)[:5]

    return compute


def _backward(epsilon, data_format, is_training):
    inner = fused_batch_norm_grad_v3(epsilon, data_format, is_training)

    def compute(y_backprop, x, scale, reserve_space_1, reserve_space_2):
        empty = np.zeros([0], reserve_space_1.dtype)
        return inner(y_backprop, x, scale, reserve_space_1, reserve_space_2, empty)

    return compute


for _name in ("FusedBatchNorm", "FusedBatchNormV2"):
    register_kernel(_name, expensive=True)(_forward)
for _name in ("FusedBatchNormGrad", "FusedBatchNormGradV2"):
    register_kernel(_name, expensive=True)(_backward)
