"""Helpers shared by kernel families: padding arithmetic, patch views, fused activations, and
the exact integer matrix product behind the int8 convolution and fully connected kernels."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rill.mobile.kernels import jit
from rill.mobile.quant import (
    Requantizer,
    activation_range_float,
    activation_range_quantized,
    quantize_multipliers,
)

__all__ = [
    "PADDING_SAME",
    "PADDING_VALID",
    "out_size",
    "pad_before",
    "patches",
    "exact_dtype",
    "float_activation",
    "quantized_activation",
    "OutputStage",
    "QuantizedGemm",
    "requant_arrays",
    "activation_mode",
]

PADDING_SAME, PADDING_VALID = 0, 1


def out_size(padding: int, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    """TFLite's ComputeOutSize."""
    eff = (filt - 1) * dilation + 1
    if padding == PADDING_SAME:
        return (size + stride - 1) // stride
    return max((size + stride - eff) // stride, 0)


def pad_before(size: int, filt: int, stride: int, dilation: int, out: int) -> tuple[int, int]:
    """(before, after) padding of one spatial axis, as TFLite's ComputePaddingWithOffset (the odd
    element goes after)."""
    eff = (filt - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def patches(x: np.ndarray, oh: int, ow: int, kh: int, kw: int, sh: int, sw: int,
            dh: int, dw: int) -> np.ndarray:  # fmt: skip
    """A read-only strided view [N, OH, OW, KH, KW, C] of the (already padded) NHWC array x."""
    n, _, _, c = x.shape
    s0, s1, s2, s3 = x.strides
    return as_strided(x, (n, oh, ow, kh, kw, c), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3),
                      writeable=False)  # fmt: skip


def exact_dtype(bound: float) -> np.dtype:
    """The cheapest type in which integer sums bounded by `bound` are computed exactly by BLAS:
    every partial sum is an integer below 2^24 (float32) or 2^53 (float64); int64 otherwise.

    Why that suffices, whatever order or blocking the BLAS uses: each term x_k · w_kc is a
    product of integers with |x_k| <= 128 (raw int8 codes, or the constant 1 of the bias column)
    and is itself below the bound; any partial sum over any subset of the terms is bounded by
    Σ |terms| <= 128 · Σ_k |w_kc| + |bias_c| = `bound` (callers pass exactly that). Every
    integer of magnitude below 2^p is representable in a format with a p-bit significand, so no
    product and no addition ever rounds: the float result is the integer accumulator of the
    reference kernel, bit for bit."""
    if bound < 2**24:
        return np.dtype(np.float32)
    if bound < 2**53:
        return np.dtype(np.float64)
    return np.dtype(np.int64)


def float_activation(kernel, act: int):
    """(lo, hi) of a fused activation on float outputs, or a PrepareError."""
    try:
        return activation_range_float(act)
    except ValueError as e:
        raise kernel.fail(str(e)) from None


def quantized_activation(kernel, act: int, out_spec) -> tuple[int, int]:
    try:
        return activation_range_quantized(act, out_spec.scale, out_spec.zero_point)
    except ValueError as e:
        raise kernel.fail(str(e)) from None


def apply_float_activation(out: np.ndarray, lo: float, hi: float) -> None:
    if lo == -np.inf and hi == np.inf:
        return
    if hi == np.inf:
        np.maximum(out, lo, out=out)
    else:
        np.clip(out, lo, hi, out=out)


def activation_mode(lo: float, hi: float) -> int:
    """How apply_float_activation clamps: 0 not at all, 1 np.maximum(lo), 2 np.clip(lo, hi)."""
    if lo == -np.inf and hi == np.inf:
        return 0
    return 1 if hi == np.inf else 2


def requant_arrays(multipliers, zero_point: int, channels: int, single_rounding: bool = False,
                   fixed: tuple[int, int] | None = None):  # fmt: skip
    """The per-channel int64 constants of the compiled output stage (kernels/_loops.py), the
    same integers quant.Requantizer uses: (M0 · 2^left, right shift, rounding addend + zp ·
    2^right, 1 where a negative value needs the ties-away correction); single rounding:
    (M0, 31 − shift, 2^(30 − shift) + zp · 2^(31 − shift), None). `fixed`: one (M0, shift)
    already in fixed point, for every channel."""
    if fixed is not None:
        m0 = np.full(channels, fixed[0], np.int64)
        shift = np.full(channels, fixed[1], np.int64)
    else:
        ms = np.broadcast_to(np.asarray(multipliers, np.float64).reshape(-1), (channels,))
        m0, shift = quantize_multipliers(np.ascontiguousarray(ms))
    zp = np.int64(zero_point)
    if single_rounding:
        right = 31 - shift
        add = (np.int64(1) << (right - 1)) + (zp << right)
        return m0, right, add, None
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    half = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0)
    return m0 << left, right, half + (zp << right), (right > 0).astype(np.int64)


class OutputStage:
    """The int8 output stage of a per-channel accumulator: MultiplyByQuantizedMultiplier,
    + zero point, clamp, cast; set up in prepare, run in invoke on [rows, C] arrays.

    *Folded* (when every value below stays an integer under 2^53 in its channel's unit, checked
    from `bound[c]`, a bound on |acc| in channel c): the caller multiplies its weights by
    `fold[c]` and adds `bias_offset[c]` to its bias, so that the product P is exact in float64
    and the whole requantization is one floor, z = floor(P), then the clamp:

    - double rounding (the reference kernels' default), right shift r = −shift:
      y = floor(acc · M0 / 2^31 + 1/2) and z = RoundingDivideByPOT(y, r) + zp. For y >= 0 that
      is floor((y + 2^(r−1)) / 2^r) + zp, and since floor(floor(u) / 2^r) = floor(u / 2^r),
      z = floor(P) with P = (acc · M0 / 2^31 + 1/2 + 2^(r−1)) / 2^r + zp. Negative y rounds
      ties away from zero, i.e. one unit 2^-r lower before the floor: z = floor(P − 2^-r) when
      P < 1/2 + zp. When the clamp's lower bound is >= zp that case cannot show (every negative
      z is clamped to the same value), so a ReLU-fused layer needs no correction;
    - single rounding (FULLY_CONNECTED): z = floor(acc · M0 · 2^(shift − 31) + 1/2) + zp.

    Otherwise the accumulator goes through int64 and `Requantizer`; fold is None and
    bias_offset 0.
    """

    TILE_LIMIT = 1 << 16  # elements up to which per-channel constants are tiled to full arrays

    def __init__(self, kernel, multipliers, bound, zp_out: int, lo: int, hi: int,
                 shape: tuple[int, int], single_rounding: bool = False):  # fmt: skip
        m0, shift = quantize_multipliers(np.asarray(multipliers, np.float64))
        bound = np.broadcast_to(np.asarray(bound, np.float64), m0.shape)
        self.zp, self.lo, self.hi = float(zp_out), float(lo), float(hi)
        self.correct = False
        rows, c = shape
        m0f = m0.astype(np.float64)
        step = np.zeros(m0.shape)
        if single_rounding:
            unit = 31 - shift  # values in units of 2^-unit
            magnitude = bound * m0f + np.ldexp(1.0, unit - 1) + abs(self.zp) * np.ldexp(1.0, unit)
            fold, offset = np.ldexp(m0f, -unit), np.full(m0.shape, 0.5 + self.zp)
        else:
            m0f = (m0 << np.maximum(shift, 0)).astype(np.float64)
            r = np.maximum(-shift, 0)
            unit = 31 + r
            half = np.where(r > 0, np.ldexp(1.0, r - 1), 0.0)
            magnitude = (bound * m0f + 2.0**30 + half * 2.0**31 + 2.0**31
                         + abs(self.zp) * np.ldexp(1.0, unit))  # fmt: skip
            fold = np.ldexp(m0f, -unit)
            offset = (0.5 + half) * np.ldexp(1.0, -r) + self.zp
            # Negative y needs the correction unless the clamp hides it (see above).
            self.correct = self.lo < self.zp and bool(np.any(r > 0))
            step = np.where(r > 0, np.ldexp(1.0, -r), 0.0)
            if np.all(step == step[0]):
                self.step = float(step[0])
            elif rows * c <= self.TILE_LIMIT:
                # Same-shape operands keep numpy's inner loop long when C is small.
                self.step = np.ascontiguousarray(np.broadcast_to(step, (rows, c)))
            else:
                self.step = step
        self.folded = bool(np.all(magnitude < 2.0**53))
        self.compiled = jit.loops()
        if self.compiled is not None and np.max(bound, initial=0) < 2**53:
            # Compiled: the accumulator stays an integer in the cheapest exact type (float32
            # when every partial sum is below 2^24) and one loop requantizes it — by the folded
            # arithmetic above, P = acc · fold + offset (the same exact P the numpy path's
            # folded GEMM gives) and its floor, or else by the reference integer arithmetic.
            self.single = single_rounding
            self.ilo, self.ihi = int(lo), int(hi)
            self.cfold = None
            if self.folded:

                def per_channel(v):
                    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, np.float64), (c,)))

                self.cfold = (per_channel(fold), per_channel(offset), per_channel(step),
                              (0.5 + self.zp) * 2.0**31, self.correct)  # fmt: skip
            else:
                self.consts = requant_arrays(multipliers, zp_out, c, single_rounding)
            self.folded, self.fold, self.bias_offset = False, None, 0
            self.acc_dtype = exact_dtype(float(np.max(bound, initial=0)))
            return
        self.compiled = None
        if self.folded:
            self.fold, self.bias_offset = fold, offset
            self.acc_dtype = np.dtype(np.float64)
            if self.correct:
                self.tmp = kernel.scratch(shape, np.float64)
        else:
            self.fold, self.bias_offset = None, 0
            self.acc_dtype = exact_dtype(float(np.max(bound, initial=0)))
            self.requant = Requantizer(multipliers, zp_out, lo, hi, single_rounding=single_rounding)
            self.acc = kernel.scratch(shape, np.int64)
            self.tmp = kernel.scratch(shape, np.int64)

    def bind_with_bias(self, bias: np.ndarray):
        """The compiled folded stage's closure (acc, out) that adds the integer bias [C]
        (float64) to the exact accumulator first (QuantizedGemm.split_bias)."""
        fold, offset, step, threshold, correct = self.cfold
        loop, lo, hi = self.compiled.requant_folded_bias, self.lo, self.hi
        return lambda p, out: loop(p, bias, fold, offset, step, threshold, correct, lo, hi, out)

    def bind(self, scratch):
        """The closure acc → out (acc is consumed)."""
        lo, hi = self.lo, self.hi
        if self.compiled is not None and self.cfold is not None:
            fold, offset, step, threshold, correct = self.cfold
            loop = self.compiled.requant_folded
            return lambda p, out: loop(p, fold, offset, step, threshold, correct, lo, hi, out)
        if self.compiled is not None:
            m0, right, add, negfix = self.consts
            ilo, ihi = self.ilo, self.ihi
            if self.single:
                loop = self.compiled.requant_rows_single
                return lambda p, out: loop(p, m0, right, add, ilo, ihi, out)
            loop = self.compiled.requant_rows
            return lambda p, out: loop(p, m0, right, add, negfix, ilo, ihi, out)
        if self.folded and not self.correct:

            def run(p, out):  # p = P, see the class docstring
                np.floor(p, out=p)
                np.clip(p, lo, hi, out=p)
                np.copyto(out, p, casting="unsafe")

            return run
        if self.folded:
            tmp, step, threshold = scratch[self.tmp], self.step, (0.5 + self.zp) * 2.0**31

            def run(p, out):
                # step · [p < 1/2 + zp], exactly: (1/2 + zp − p) · 2^31 is at least 2^-r = step
                # when p is below (p is a multiple of 2^-(31 + r)) and <= 0 otherwise.
                np.multiply(p, -(2.0**31), out=tmp)
                np.add(tmp, threshold, out=tmp)
                np.maximum(tmp, 0.0, out=tmp)
                np.minimum(tmp, step, out=tmp)
                np.subtract(p, tmp, out=p)
                np.floor(p, out=p)
                np.clip(p, lo, hi, out=p)
                np.copyto(out, p, casting="unsafe")

            return run
        acc, tmp, requant = scratch[self.acc], scratch[self.tmp], self.requant

        def run(a, out):
            if a is not acc:
                np.copyto(acc, a, casting="unsafe")
            requant.apply(acc, tmp)
            np.copyto(out, acc, casting="unsafe")

        return run


class QuantizedGemm:
    """out[m, c] = requantize(Σ_k (x[m, k] − zp_in) · w[k, c] + bias[c]) for int8 x and w.

    Built in prepare. The caller copies the raw int8 values into `fill`, a view of the im2col
    matrix `cols` [M, K+1] (or its transpose [K+1, M], faster to fill from windows with few
    channels; a scratch buffer in the arena) whose extra column is 1; the weights get one more
    row holding bias − zp_in · Σ_k w[k, c], so one BLAS product gives the int32 accumulator of
    the reference kernel — exactly: it is computed in a type in which no partial sum can round
    (see OutputStage, which may also fold the requantization multiplier into the weights).
    """

    def __init__(self, kernel, w_kc: np.ndarray, bias: np.ndarray | None, zp_in: int, rows: int,
                 multipliers, zp_out: int, lo: int, hi: int, transposed: bool = False,
                 single_rounding: bool = False):  # fmt: skip
        w = np.asarray(w_kc, np.int64)
        k, c = w.shape
        b = np.zeros(c, np.int64) if bias is None else np.asarray(bias, np.int64)
        b = b - zp_in * w.sum(axis=0)
        bound = 128 * np.abs(w).sum(axis=0) + np.abs(b)
        mult = np.broadcast_to(np.asarray(multipliers, np.float64), (c,))
        self.stage = OutputStage(kernel, mult, bound, zp_out, lo, hi, (rows, c), single_rounding)
        self.dtype = self.stage.acc_dtype
        self.k, self.transposed = k, transposed
        self.acc = kernel.scratch((rows, c), self.dtype)
        # The compiled folded stage adds the integer bias itself (exactly, in float64): no
        # column of ones, a product one row shorter.
        self.split_bias = self.stage.compiled is not None and self.stage.cfold is not None
        if self.split_bias:
            self.w = w.astype(self.dtype)
            self.bias = b.astype(np.float64)
            self.cols = kernel.scratch((k, rows) if transposed else (rows, k), self.dtype)
            return
        wb = np.vstack([w, b[None, :]]).astype(np.float64)
        if self.stage.fold is not None:
            wb = wb * self.stage.fold[None, :]  # exact: see OutputStage
            wb[-1] += self.stage.bias_offset
        self.w = wb.astype(self.dtype)
        self.cols = kernel.scratch((k + 1, rows) if transposed else (rows, k + 1), self.dtype)

    def bind(self, scratch, out2d: np.ndarray):
        """(the view of cols the caller fills, the closure cols → out2d)."""
        cols, k = scratch[self.cols], self.k
        if self.split_bias:
            a, w, acc, bias = (
                (cols.T if self.transposed else cols),
                self.w,
                scratch[self.acc],
                self.bias,
            )
            stage = self.stage.bind_with_bias(bias)

            def run_split():
                np.matmul(a, w, out=acc)
                stage(acc, out2d)

            return cols, run_split
        fill, ones = (cols[:k], cols[k]) if self.transposed else (cols[:, :k], cols[:, k])
        a = cols.T if self.transposed else cols
        w, acc, stage = self.w, scratch[self.acc], self.stage.bind(scratch)

        def run():
            ones.fill(1)  # the arena is shared: the bias column is rewritten every run
            np.matmul(a, w, out=acc)
            stage(acc, out2d)

        return fill, run
