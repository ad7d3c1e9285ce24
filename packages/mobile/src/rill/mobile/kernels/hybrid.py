"""Dynamic-range ("hybrid") kernels: float activations, int8 weights, LiteRT's arithmetic.

LiteRT does not dequantize the weights of a hybrid model: at every run it quantizes the float
activations to int8 on the fly, computes the integer product, and scales the int32 result back
to float. Here the same steps, in the same float32 operations, so that hybrid models agree with
LiteRT's reference kernels to float rounding:

- **quantizing** (tensor_utils::AsymmetricQuantizeFloats / SymmetricQuantizeFloats): per batch
  row (FULLY_CONNECTED, BATCH_MATMUL: each row of the flattened input; CONV_2D,
  DEPTHWISE_CONV_2D: each image). Asymmetric: rmin = min(0, min x), rmax = max(0, max x),
  scale = (rmax − rmin) / 255 in double, the zero point of the smaller error nudged into
  [−128, 127], then q = round(zp + x · (1 / scale)) in float32. Symmetric: scale = max|x| / 127,
  q = round(x · 127 / max|x|) clamped to ±127. An all-zero row gets scale 1 and q = 0;
- **the integer product**: Σ q_w · (q_x − zp_x) — exact here, computed in float64 products of
  small integers (|sum| far below 2^53), padding taps contributing nothing;
- **scaling back**, float32: FULLY_CONNECTED bias + acc · (s_x · s_w[c]); CONV_2D
  (acc · s_w[c]) · s_x + bias; DEPTHWISE_CONV_2D acc · (s_w[c] · s_x) + bias; BATCH_MATMUL
  acc · (s_x · s_w); then the fused activation.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.common import apply_float_activation, patches

__all__ = ["quantize_rows", "HybridFullyConnected", "HybridConv", "HybridDepthwise",
           "HybridBatchMatMul"]  # fmt: skip

F32 = np.float32


def _round(v: np.ndarray) -> np.ndarray:
    """TfLiteRound (std::round): half away from zero."""
    return np.trunc(v + np.copysign(v.dtype.type(0.5), v))


def quantize_rows(x: np.ndarray, asymmetric: bool):
    """(q − zp as float64 [rows, n], scale float32 [rows], zero point int [rows]) of a float32
    [rows, n] array, row by row as LiteRT quantizes hybrid inputs."""
    x = np.asarray(x, F32)
    rows = x.shape[0]
    if x.shape[1] == 0:
        return np.zeros(x.shape), np.ones(rows, F32), np.zeros(rows, np.int64)
    lo = x.min(axis=1)
    hi = x.max(axis=1)
    if asymmetric:
        rmin = np.minimum(F32(0), lo).astype(np.float64)
        rmax = np.maximum(F32(0), hi).astype(np.float64)
        flat = rmin == rmax
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = (rmax - rmin) / 255.0
            zmin = -128.0 - rmin / scale
            zmax = 127.0 - rmax / scale
            emin = 128.0 + np.abs(rmin / scale)
            emax = 127.0 + np.abs(rmax / scale)
        zpd = np.where(emin < emax, zmin, zmax)
        zp = np.where(zpd <= -128.0, -128, np.where(zpd >= 127.0, 127,
                                                    _round(np.nan_to_num(zpd))))  # fmt: skip
        zp = np.where(flat, 0, zp).astype(np.int64)
        sf = np.where(flat, 1.0, scale).astype(F32)
        inv = (F32(1) / sf).astype(F32)
        v = (zp.astype(F32)[:, None] + x * inv[:, None]).astype(F32)
        q = np.clip(_round(v), -128, 127)
        q[flat] = 0
        return q.astype(np.float64) - zp[:, None], sf, zp
    rng = np.maximum(np.abs(lo), np.abs(hi)).astype(F32)
    flat = rng == 0
    safe = np.where(flat, F32(1), rng)
    sf = np.where(flat, F32(1), (safe / F32(127)).astype(F32)).astype(F32)
    inv = (F32(127) / safe).astype(F32)
    q = np.clip(_round((x * inv[:, None]).astype(F32)), -127, 127)
    q[flat] = 0
    return q.astype(np.float64), sf, np.zeros(rows, np.int64)


def _channel_scales(w, channels: int) -> np.ndarray:
    return np.broadcast_to(w.quant.scale.astype(F32), (channels,)).astype(F32)


class HybridFullyConnected:
    def __init__(self, kernel, w, bias, rows: int, k: int, lo: float, hi: float):
        cout = w.shape[0]
        self.w = np.ascontiguousarray(w.data.astype(np.float64).T)  # [K, C]
        self.row_sums = w.data.astype(np.int64).sum(axis=1).astype(np.float64)
        self.scales = _channel_scales(w, cout)
        self.bias = None if bias is None else bias.astype(F32)
        self.asym = bool(kernel.options.get("asymmetric_quantize_inputs", False))
        self.rows, self.k, self.lo, self.hi = rows, k, lo, hi

    def bind(self, x, out):
        x2d, out2d = x.reshape(self.rows, self.k), out.reshape(self.rows, -1)
        w, bias, scales, lo, hi, asym = self.w, self.bias, self.scales, self.lo, self.hi, self.asym

        def run():
            q, sf, _ = quantize_rows(x2d, asym)
            acc = (q @ w).astype(F32)  # (q − zp) · W: the reference's dot − row_sum · zp
            v = acc * (sf[:, None] * scales[None, :]).astype(F32)
            if bias is not None:
                v = bias + v
            np.copyto(out2d, v)
            apply_float_activation(out2d, lo, hi)

        return run


class HybridConv:
    """CONV_2D: the image quantized as a whole, padding taps contributing nothing; with
    `groups`, each group's output channels the product of its own input channels."""

    def __init__(self, kernel, w, bias, geom, pads, lo: float, hi: float, groups: int = 1):
        cout = w.shape[0]
        self.groups = groups
        # [groups, KH·KW·C_g, C_out / groups]
        self.w = np.ascontiguousarray(
            w.data.reshape(groups, cout // groups, -1).transpose(0, 2, 1).astype(np.float64)
        )
        self.scales = _channel_scales(w, cout)
        self.bias = None if bias is None else bias.astype(F32)
        self.geom, self.pads, self.lo, self.hi = geom, pads, lo, hi

    def bind(self, x, out):
        n, h, w_, c, oh, ow, kh, kw, sh, sw, dh, dw = self.geom
        (pt, pb), (pl, pr) = self.pads
        wk, scales, bias, lo, hi = self.w, self.scales, self.bias, self.lo, self.hi
        groups = self.groups
        out2d = out.reshape(n * oh * ow, -1)

        def run():
            q, sf, _ = quantize_rows(x.reshape(n, -1), True)
            img = np.pad(q.reshape(n, h, w_, c), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            win = patches(img, oh, ow, kh, kw, sh, sw, dh, dw)
            if groups == 1:
                acc = win.reshape(n * oh * ow, -1) @ wk[0]
            else:  # [rows, taps, groups, C_g] → per group [rows, taps·C_g] · [taps·C_g, C_o/g]
                win = win.reshape(n * oh * ow, kh * kw, groups, c // groups)
                acc = np.concatenate([win[:, :, g].reshape(n * oh * ow, -1) @ wk[g]
                                      for g in range(groups)], axis=1)  # fmt: skip
            acc = acc.astype(F32).reshape(n, oh * ow, -1)
            v = ((acc * scales) * sf[:, None, None]).astype(F32).reshape(n * oh * ow, -1)
            if bias is not None:
                v = v + bias
            np.copyto(out2d, v)
            apply_float_activation(out2d, lo, hi)

        return run


class HybridDepthwise:
    def __init__(self, kernel, w, bias, geom, pads, mult: int, lo: float, hi: float):
        _, kh, kw, cout = w.shape
        self.w = w.data.reshape(kh, kw, cout // mult, mult).astype(np.float64)
        self.scales = _channel_scales(w, cout)
        self.bias = None if bias is None else bias.astype(F32)
        self.geom, self.pads, self.mult, self.lo, self.hi = geom, pads, mult, lo, hi

    def bind(self, x, out):
        n, h, w_, c, oh, ow, kh, kw, sh, sw, dh, dw = self.geom
        (pt, pb), (pl, pr) = self.pads
        wk, scales, bias, lo, hi = self.w, self.scales, self.bias, self.lo, self.hi

        def run():
            q, sf, _ = quantize_rows(x.reshape(n, -1), True)
            img = np.pad(q.reshape(n, h, w_, c), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            win = patches(img, oh, ow, kh, kw, sh, sw, dh, dw)
            acc = np.einsum("nhwyxc,yxcm->nhwcm", win, wk).reshape(n, oh, ow, -1).astype(F32)
            mul = (scales[None, :] * sf[:, None]).astype(F32)[:, None, None, :]
            v = (acc * mul).astype(F32)
            if bias is not None:
                v = v + bias
            np.copyto(out, v)
            apply_float_activation(out, lo, hi)

        return run


class HybridBatchMatMul:
    """lhs float [..., M, K] (each row quantized) times constant int8 rhs [..., K, N]."""

    def __init__(self, kernel, rhs, adj_y: bool):
        r = rhs.data.astype(np.float64)
        self.rhs = np.swapaxes(r, -1, -2) if adj_y else r
        self.scale = F32(rhs.quant.scale[0])
        self.asym = bool(kernel.options.get("asymmetric_quantize_inputs", False))

    def bind(self, lhs, out, adj_x: bool):
        rhs, scale, asym = self.rhs, self.scale, self.asym

        def run():
            a = np.swapaxes(lhs, -1, -2) if adj_x else lhs
            k = a.shape[-1]
            q, sf, _ = quantize_rows(np.ascontiguousarray(a).reshape(-1, k), asym)
            sf = (sf * scale).astype(F32).reshape(a.shape[:-1] + (1,))
            acc = np.matmul(q.reshape(a.shape), rhs).astype(F32)
            np.copyto(out, (sf * acc).astype(F32))

        return run
