"""QUANTIZE (float32 → int8/int16, and int8/uint8/int16 → int8/int16 requantization) and DEQUANTIZE (int8/uint8 →
float32, per tensor or per channel; float16 → float32).

QUANTIZE follows the reference AffineQuantize: q = clamp(round(x / scale) + zp), the division in
float32 and the rounding half away from zero. Requantization is MultiplyByQuantizedMultiplier of
q − zp_in by s_in / s_out, + zp_out (a 256-entry table). DEQUANTIZE computes scale · (q − zp) in
double and rounds to float32 (a table too, for per-tensor int8).
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.jit import nan_cast
from rill.mobile.kernels.lut import table_from_int8, table_run
from rill.mobile.quant import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)

__all__ = ["Quantize", "Dequantize"]


@register("QUANTIZE", max_version=3)
class Quantize(Kernel):
    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        if x is None:
            raise self.fail("needs an input")
        self.expect_dtype(x, [np.float32, np.int8, np.uint8, np.int16])
        self.expect_dtype(out, [np.int8, np.int16], "output")
        self.expect_quantized(out)
        self.src = x.dtype
        info = np.iinfo(out.dtype)
        self.qmin, self.qmax = int(info.min), int(info.max)
        if x.dtype == np.float32:
            self.scale = np.float32(out.scale)
            self.zp = out.zero_point
            self.t32 = self.scratch(x.shape, np.float32)
            self.t64 = self.scratch(x.shape, np.float64)
            self.half = self.scratch(x.shape, np.float64)
        else:
            self.expect_quantized(x)
            m = quantize_multiplier(float(np.float64(x.scale) / np.float64(out.scale)))
            zp_in, zp_out = x.zero_point, out.zero_point
            if x.dtype == np.int16:  # 65536 entries, by uint16 bit pattern
                values = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16)
                values = values.astype(np.int64)
            else:
                values = np.arange(256, dtype=np.int64)  # uint8 bit patterns
                if x.dtype == np.int8:
                    values = values.astype(np.uint8).view(np.int8).astype(np.int64)
            y = multiply_by_quantized_multiplier(values - zp_in, *m) + zp_out
            self.table = np.clip(y, self.qmin, self.qmax).astype(out.dtype)
        return [x.shape]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if self.src != np.float32:
            return table_run(self.table, x, out)
        t32, t64, half = scratch[self.t32], scratch[self.t64], scratch[self.half]
        scale, zp = self.scale, float(self.zp)
        qmin, qmax = self.qmin, self.qmax
        loops = jit.loops()
        if loops is not None:  # the same operations, one loop
            loop, nan_value = loops.quantize_float, nan_cast(out.dtype)
            xf, of = x.reshape(-1), out.reshape(-1)
            return lambda: loop(xf, scale, zp, qmin, qmax, nan_value, of)

        def run():
            np.divide(x, scale, out=t32)  # in float32, as the reference kernel
            np.copyto(t64, t32)  # exact; the rounding below is then exact in float64
            np.copysign(0.5, t64, out=half)
            np.add(t64, half, out=t64)
            np.trunc(t64, out=t64)
            np.add(t64, zp, out=t64)
            np.clip(t64, qmin, qmax, out=t64)
            np.copyto(out, t64, casting="unsafe")

        return run


@register("DEQUANTIZE", max_version=6)
class Dequantize(Kernel):
    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        if x is None:
            raise self.fail("needs an input")
        self.expect_dtype(x, [np.int8, np.uint8, np.int16, np.float16])
        self.expect_dtype(out, [np.float32], "output")
        self.table = self.const = None
        if x.dtype == np.float16:
            pass
        else:
            self.expect_quantized(x, per_channel_ok=True)
            q = x.quant
            if q.per_channel:
                shape = [1] * len(x.shape)
                if not 0 <= q.quantized_dimension < len(x.shape):
                    raise self.fail(f"quantized dimension {q.quantized_dimension} of {x} is out "
                                    "of range")  # fmt: skip
                shape[q.quantized_dimension] = -1
                self.scales = q.scale.astype(np.float32).reshape(shape)
                self.zps = q.zero_point.astype(np.float32).reshape(shape)
            elif x.dtype == np.int8:
                s, z = np.float64(x.scale), x.zero_point
                self.table = table_from_int8(lambda v: s * (v - z), np.float32)
            else:
                self.scales, self.zps = np.float64(x.scale), x.zero_point
        if x.data is not None:  # constant weights: dequantized once, copied per run
            self.const = self._compute(x.data)
        return [x.shape]

    def _compute(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == np.float16:
            return x.astype(np.float32)
        if self.table is not None:
            return self.table[x.view(np.uint8)]
        if isinstance(self.scales, np.ndarray):
            return ((x.astype(np.float32) - self.zps) * self.scales).astype(np.float32)
        return (self.scales * (x.astype(np.float64) - self.zps)).astype(np.float32)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if self.const is not None:
            const = self.const
            return lambda: np.copyto(out, const)
        if self.table is not None:
            return table_run(self.table, x, out)
        compute = self._compute
        return lambda: np.copyto(out, compute(x))
