"""LOG_SOFTMAX, L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION over the last axis, float32
(the int8 versions use fixed-point arithmetic not implemented here; such models are refused in
prepare with a clear error).

- LOG_SOFTMAX: x − max − log Σ exp(x − max);
- L2_NORMALIZATION: x / max(sqrt(Σ x²), 1e-6);
- LOCAL_RESPONSE_NORMALIZATION: x · (bias + alpha · Σ_{c − radius <= d < c + radius} x_d²)^(−beta)
  (LiteRT's reference window, whose end is exclusive).
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.base import Kernel, register

__all__ = ["LogSoftmax", "L2Normalization", "LocalResponseNormalization"]


class _LastAxis(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        if x is None or not x.shape:
            raise self.fail("needs an input of rank >= 1")
        if x.dtype != np.float32:
            raise self.fail(f"the input {x} is {x.type_name}; only FLOAT32 is implemented (the "
                            "quantized kernel's fixed-point arithmetic is not)")  # fmt: skip
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        x, out, fn = inputs[0], outputs[0], self.compute
        return lambda: np.copyto(out, fn(x))


@register("LOG_SOFTMAX", max_version=2)
class LogSoftmax(_LastAxis):
    @staticmethod
    def compute(x):
        shifted = x - x.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@register("L2_NORMALIZATION", max_version=2)
class L2Normalization(_LastAxis):
    @staticmethod
    def compute(x):
        norm = np.sqrt(np.square(x).sum(axis=-1, keepdims=True))
        return x / np.maximum(norm, np.float32(1e-6))


@register("LOCAL_RESPONSE_NORMALIZATION", max_version=1)
class LocalResponseNormalization(_LastAxis):
    def prepare(self, inputs, outputs):
        shapes = super().prepare(inputs, outputs)
        o = self.options
        self.radius = int(o.get("radius", 5))
        self.bias, self.alpha, self.beta = (np.float32(o.get(k, d)) for k, d in
                                            (("bias", 1.0), ("alpha", 1.0), ("beta", 0.5)))  # fmt: skip
        return shapes

    def compute(self, x):
        sq = np.square(x)
        c = x.shape[-1]
        csum = np.concatenate([np.zeros(x.shape[:-1] + (1,), np.float32),
                               np.cumsum(sq, axis=-1, dtype=np.float32)], axis=-1)  # fmt: skip
        idx = np.arange(c)
        # [c − radius, c + radius): the reference kernel's window (its end is exclusive).
        lo, hi = np.maximum(idx - self.radius, 0), np.minimum(idx + self.radius, c)
        accum = csum[..., hi] - csum[..., lo]
        return x * np.power(self.bias + self.alpha * accum, -self.beta)
