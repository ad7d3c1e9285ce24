"""16-bit activations with 8-bit weights (TensorFlow's 16x8 quantization) for FULLY_CONNECTED,
CONV_2D and DEPTHWISE_CONV_2D, as LiteRT's reference kernels compute them:

- int16 activations are symmetric (zero point 0), weights int8 per channel, bias int64;
- the accumulator Σ q_in · q_w + bias is an int64 (computed here in float64, exact: every
  partial sum stays far below 2^53 — |q_in| <= 2^15, |q_w| <= 127);
- it is rescaled with the int64 overload of MultiplyByQuantizedMultiplier, which first
  reduces the 31-bit multiplier to 16 bits, m16 = (M0 + 2^15) >> 16 (32767 when M0 >=
  0x7FFF0000), then rounds once: (acc · m16 + 2^(14 − shift)) >> (15 − shift) — except
  FULLY_CONNECTED, which LiteRT rounds once with the full 31-bit multiplier (as its int8 FC);
- plus the output zero point, clamped to the int16 activation range.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.common import patches
from rill.mobile.quant import ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1, quantize_multipliers

__all__ = ["Int16Stage", "int16_activation", "int16_fully_connected", "int16_conv",
           "int16_depthwise"]  # fmt: skip

I16_MIN, I16_MAX = -32768, 32767


def int16_activation(kernel, act: int, out) -> tuple[int, int]:
    s, zp = float(out.scale), int(out.zero_point)

    def q(v: float) -> int:
        return zp + int(np.trunc(v / s + np.copysign(0.5, v / s)))

    if act == ACT_NONE:
        return I16_MIN, I16_MAX
    if act == ACT_RELU:
        return max(I16_MIN, q(0.0)), I16_MAX
    if act == ACT_RELU6:
        return max(I16_MIN, q(0.0)), min(I16_MAX, q(6.0))
    if act == ACT_RELU_N1_TO_1:
        return max(I16_MIN, q(-1.0)), min(I16_MAX, q(1.0))
    raise kernel.fail(f"fused activation {act} is not supported on int16")


class Int16Stage:
    """int64 accumulator [rows, C] → int16 output, per-channel multipliers.

    full=False (CONV_2D, DEPTHWISE_CONV_2D): the 16-bit reduced multiplier, as above.
    full=True (FULLY_CONNECTED, measured against LiteRT): one rounding with the 31-bit M0,
    (acc · M0 + 2^(30 − shift)) >> (31 − shift), computed exactly in int64 by splitting acc
    into acc = hi · 2^20 + lo (0 <= lo < 2^20)."""

    def __init__(self, multipliers, zp_out: int, lo: int, hi: int, full: bool = False):
        m0, shift = quantize_multipliers(np.asarray(multipliers, np.float64))
        self.full = full
        if full:
            total = (31 - shift).astype(np.int64)
            if np.any(total < 21):
                raise ValueError(f"output multipliers {multipliers} are too large for int16")
            self.m0, self.total = m0.astype(np.int64), total
            self.round = np.left_shift(np.int64(1), total - 1)
        else:
            m16 = np.where(m0 < 0x7FFF0000, (m0 + (1 << 15)) >> 16, 0x7FFF).astype(np.int64)
            total = (15 - shift).astype(np.int64)
            self.m16, self.total = m16, total
            self.round = np.left_shift(np.int64(1), total - 1)
        self.zp, self.lo, self.hi = int(zp_out), int(lo), int(hi)

    def __call__(self, acc: np.ndarray, out: np.ndarray) -> None:
        if self.full:
            hi, lo = acc >> 20, acc & ((1 << 20) - 1)
            v = (hi * self.m0 + ((lo * self.m0 + self.round) >> 20)) >> (self.total - 20)
        else:
            v = (acc * self.m16 + self.round) >> self.total
        np.copyto(out, np.clip(v + self.zp, self.lo, self.hi), casting="unsafe")


def _stage(kernel, x, w, out, channels: int, act: int, full: bool = False) -> Int16Stage:
    for t in (x, out):
        kernel.expect_quantized(t)
    kernel.expect_quantized(w, per_channel_ok=True)
    ws = np.broadcast_to(w.quant.scale.astype(np.float64), (channels,))
    mult = np.float64(x.scale) * ws / np.float64(out.scale)
    lo, hi = int16_activation(kernel, act, out)
    try:
        return Int16Stage(mult, out.zero_point, lo, hi, full)
    except ValueError as e:
        raise kernel.fail(str(e)) from None


def _bias(kernel, b, channels: int) -> np.ndarray:
    if b is None:
        return np.zeros(channels, np.float64)
    kernel.expect_dtype(b, [np.int64, np.int32], "bias")
    return kernel.expect_const(b, "bias").astype(np.float64)


def int16_fully_connected(kernel, x, w, b, out, rows: int, k: int, act: int):
    """prepare → bind(x, out) → run, for FULLY_CONNECTED."""
    cout = w.shape[0]
    stage = _stage(kernel, x, w, out, cout, act, full=True)
    wk = np.ascontiguousarray(kernel.expect_const(w, "weights").astype(np.float64).T)
    bias = _bias(kernel, b, cout)

    def bind(xa, oa):
        x2d, o2d = xa.reshape(rows, k), oa.reshape(rows, -1)

        def run():
            acc = (x2d.astype(np.float64) @ wk + bias).astype(np.int64)
            stage(acc, o2d)

        return run

    return bind


def int16_conv(kernel, x, w, b, out, geom, pads, act: int):
    cout = w.shape[0]
    stage = _stage(kernel, x, w, out, cout, act)
    wk = np.ascontiguousarray(
        kernel.expect_const(w, "filter").reshape(cout, -1).T.astype(np.float64))  # fmt: skip
    bias = _bias(kernel, b, cout)
    n, h, w_, c, oh, ow, kh, kw, sh, sw, dh, dw = geom
    (pt, pb), (pl, pr) = pads

    def bind(xa, oa):
        o2d = oa.reshape(n * oh * ow, -1)

        def run():
            img = np.pad(xa.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            cols = patches(img, oh, ow, kh, kw, sh, sw, dh, dw).reshape(n * oh * ow, -1)
            stage((cols @ wk + bias).astype(np.int64), o2d)

        return run

    return bind


def int16_depthwise(kernel, x, w, b, out, geom, pads, mult: int, act: int):
    _, kh, kw, cout = w.shape
    stage = _stage(kernel, x, w, out, cout, act)
    wk = kernel.expect_const(w, "filter").reshape(kh, kw, cout // mult, mult).astype(np.float64)
    bias = _bias(kernel, b, cout)
    n, h, w_, c, oh, ow, _, _, sh, sw, dh, dw = geom
    (pt, pb), (pl, pr) = pads

    def bind(xa, oa):
        o2d = oa.reshape(n * oh * ow, -1)

        def run():
            img = np.pad(xa.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            win = patches(img, oh, ow, kh, kw, sh, sw, dh, dw)
            acc = np.einsum("nhwyxc,yxcm->nhwcm", win, wk).reshape(n * oh * ow, -1) + bias
            stage(acc.astype(np.int64), o2d)

        return run

    return bind
