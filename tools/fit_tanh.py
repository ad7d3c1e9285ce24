"""Fits the polynomial of rill.exec's float32 tanh32 (rill.exec.kernels._exp_tanh_loops) for
|x| < TANH_SMALL: tanh(x) = x + x·x²·P(x²), P of degree 4 in s = x², least squares at Chebyshev
nodes on [0, 0.625²], weighted for tanh's relative error, against float64 tanh (its series
where s is tiny). Prints P's coefficients rounded to float32 (lowest degree first) and the
largest error, in float32 ulp, of the polynomial evaluated in float32 with fused multiply-adds
as tanh32 does: python tools/fit_tanh.py"""

from __future__ import annotations

import numpy as np

SMALL, DEGREE, NODES = 0.625, 4, 3000


def main() -> None:
    k = np.arange(NODES)
    s = 0.5 * SMALL * SMALL * (1.0 + np.cos(np.pi * (k + 0.5) / NODES))
    x = np.sqrt(s)
    series = -1 / 3 + 2 * s / 15 - 17 * s**2 / 315 + 62 * s**3 / 2835 - 1382 * s**4 / 155925
    with np.errstate(all="ignore"):
        g = np.where(s > 1e-3, (np.tanh(x) / x - 1) / s, series)
        weight = np.maximum(np.where(s > 0, s * x / np.tanh(x), 0.0), 1e-6)
    vander = np.vander(s, DEGREE + 1, increasing=True)
    coef = np.linalg.lstsq(vander * weight[:, None], g * weight, rcond=None)[0].astype(np.float32)
    # The polynomial as tanh32 evaluates it: Horner's steps and x·s·P + x fused (float64
    # products of float32 values are exact, so one rounding each).
    xs = np.linspace(0.0, SMALL, 2_000_001).astype(np.float32)
    ss = xs * xs
    p = np.full_like(ss, coef[-1])
    for c in coef[-2::-1]:
        p = (p.astype(np.float64) * ss + np.float64(c)).astype(np.float32)
    got = ((xs * ss).astype(np.float64) * p + xs).astype(np.float32)
    exact = np.tanh(xs.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    for c in coef:
        print(repr(float(c)))
    print("max error, ulp", float(np.max(np.abs(got - exact) / ulp)))


if __name__ == "__main__":
    main()
