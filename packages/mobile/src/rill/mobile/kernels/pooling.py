"""MAX_POOL_2D and AVERAGE_POOL_2D, float32 and int8.

Windows are strided views of a padded copy the kernel owns. Padded positions never count: max
pooling pads with the lowest value; average pooling pads with 0 and divides by the number of
real elements in each window. int8 follows the reference kernels: input and output share
quantization, max pooling clamps to the fused activation's range, average pooling sums the raw
values in int32 and divides by the count rounding half away from zero.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.common import (
    PADDING_SAME,
    PADDING_VALID,
    apply_float_activation,
    float_activation,
    out_size,
    pad_before,
    patches,
    quantized_activation,
)

__all__ = ["MaxPool2D", "AveragePool2D"]


class _Pool(Kernel):
    def prepare(self, inputs, outputs):
        if not inputs or inputs[0] is None:
            raise self.fail("needs one input")
        x, out = inputs[0], outputs[0]
        if len(x.shape) != 4:
            raise self.fail(f"input {x} must be 4-D NHWC")
        o = self.options
        padding = o.get("padding", PADDING_SAME)
        if padding not in (PADDING_SAME, PADDING_VALID):
            raise self.fail(f"unknown padding {padding}")
        kh, kw = o.get("filter_height", 1), o.get("filter_width", 1)
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        if min(kh, kw, sh, sw) < 1:
            raise self.fail(f"filter {kh}x{kw} and strides {sh}x{sw} must be >= 1")
        n, h, w, c = x.shape
        oh, ow = out_size(padding, h, kh, sh), out_size(padding, w, kw, sw)
        if oh <= 0 or ow <= 0:
            raise self.fail(f"a {kh}x{kw} window does not fit the {h}x{w} input {x}")
        (pt, pb), (pl, pr) = pad_before(h, kh, sh, 1, oh), pad_before(w, kw, sw, 1, ow)
        self.expect_dtype(x, [np.float32, np.int8])
        self.expect_same_dtype(x, out)
        self.int8 = x.dtype == np.int8
        act = o.get("fused_activation_function", 0)
        if self.int8:
            self.expect_same_quant(x, out)
            self.lo, self.hi = quantized_activation(self, act, out)
        else:
            self.lo, self.hi = float_activation(self, act)
        self.geom = (n, h, w, c, oh, ow, kh, kw, sh, sw)
        self.pad = (pt, pl)
        self.padded = None
        if pt or pb or pl or pr:
            self.padded = self.persistent((n, h + pt + pb, w + pl + pr, c), x.dtype,
                                          self.pad_value(x))  # fmt: skip
        # Number of real (unpadded) elements under each window.
        rows = np.minimum(np.arange(oh) * sh - pt + kh, h) - np.maximum(np.arange(oh) * sh - pt, 0)
        cols = np.minimum(np.arange(ow) * sw - pl + kw, w) - np.maximum(np.arange(ow) * sw - pl, 0)
        self.counts = (rows[:, None] * cols[None, :]).reshape(1, oh, ow, 1)
        self.setup(x)
        return [(n, oh, ow, c)]

    def setup(self, x) -> None:
        pass

    def taps(self, x):
        """(interior to copy the input into or None, [one strided view per window tap])."""
        n, h, w, c, oh, ow, kh, kw, sh, sw = self.geom
        src, interior = x, None
        if self.padded is not None:
            pt, pl = self.pad
            src, interior = self.padded, self.padded[:, pt : pt + h, pl : pl + w, :]
        views = [src[:, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw, :]
                 for i in range(kh) for j in range(kw)]  # fmt: skip
        return interior, views


@register("MAX_POOL_2D", max_version=3)
class MaxPool2D(_Pool):
    """The maximum of the window's taps, one np.maximum per tap (faster than a reduction over
    a strided window view for the small windows pooling uses)."""

    def pad_value(self, x):
        return -np.inf if x.dtype == np.float32 else np.iinfo(np.int8).min

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        interior, taps = self.taps(x)
        lo, hi = self.lo, self.hi
        clamp = lo > (-np.inf if not self.int8 else -128) or hi < (np.inf if not self.int8 else 127)
        if len(taps) == 1:
            taps = [taps[0], taps[0]]
        first, second, rest = taps[0], taps[1], taps[2:]

        def run():
            if interior is not None:
                np.copyto(interior, x)
            np.maximum(first, second, out=out)
            for t in rest:
                np.maximum(out, t, out=out)
            if clamp:
                np.clip(out, lo, hi, out=out)

        return run


@register("AVERAGE_POOL_2D", max_version=3)
class AveragePool2D(_Pool):
    """The sum of the window's taps over the count of real elements. For int8 the sum is exact
    in float64 and so is the division's rounding: a quotient of integers that is exactly halfway
    is representable, and any other lies at least 1/(2·count) away from a halfway point."""

    def pad_value(self, x):
        return 0

    def setup(self, x):
        n, h, w, c, oh, ow = self.geom[:6]
        if self.int8:
            self.counts_f = self.counts.astype(np.float64)
            self.acc = self.scratch((n, oh, ow, c), np.float64)
            self.tmp = self.scratch((n, oh, ow, c), np.float64)
        else:
            self.counts_f = self.counts.astype(np.float32)

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        interior, taps = self.taps(x)
        lo, hi, counts = self.lo, self.hi, self.counts_f
        uniform = bool(np.all(counts == counts.flat[0]))
        if uniform:
            counts = float(counts.flat[0])
        first, rest = taps[0], taps[1:]
        n, h, w, c, oh, ow, kh, kw, sh, sw = self.geom
        src = x if self.padded is None else self.padded
        # Large windows (global pooling): one reduction over a strided window view instead of a
        # call per tap. int8 sums are exact in float64 whatever the order.
        window = patches(src, oh, ow, kh, kw, sh, sw, 1, 1) if len(taps) > 16 else None
        if not self.int8:

            def run():
                if interior is not None:
                    np.copyto(interior, x)
                if window is not None:
                    np.sum(window, axis=(3, 4), dtype=np.float32, out=out)
                else:
                    np.copyto(out, first)
                    for t in rest:
                        np.add(out, t, out=out)
                np.divide(out, counts, out=out)
                apply_float_activation(out, lo, hi)

            return run
        acc, tmp = scratch[self.acc], scratch[self.tmp]
        # An average of int8 values is an int8 value: only a fused activation can clamp.
        clamp = lo > -128 or hi < 127
        loops = jit.loops()
        if loops is not None and src.flags.c_contiguous and out.flags.c_contiguous:
            # The same exact sums and float64 rounding, one loop.
            loop, cnt = loops.avgpool_int8, np.ascontiguousarray(self.counts_f[0, :, :, 0])
            ilo, ihi = int(lo), int(hi)

            def run_compiled():
                if interior is not None:
                    np.copyto(interior, x)
                loop(src, cnt, kh, kw, sh, sw, ilo, ihi, out)

            return run_compiled

        def run():
            if interior is not None:
                np.copyto(interior, x)
            if window is not None:
                np.sum(window, axis=(3, 4), dtype=np.float64, out=acc)
            else:
                np.copyto(acc, first)
                for t in rest:
                    np.add(acc, t, out=acc)
            np.divide(acc, counts, out=acc)
            # C's (acc ± count/2) / count, truncating: round half away from zero.
            np.copysign(0.5, acc, out=tmp)
            np.add(acc, tmp, out=acc)
            np.trunc(acc, out=acc)
            if clamp:
                np.clip(acc, lo, hi, out=acc)
            np.copyto(out, acc, casting="unsafe")

        return run
