"""Fits the polynomial of the whole-subgraph programs' GELU (rill.mobile.kernels._program_math
.gelu_erf): erfc(a) = t · exp(-a² + P(t)) with t = 2 / (2 + a) on 0 <= a <= 10.5, P of degree
12, least squares at Chebyshev nodes against float64 math.erfc. Prints P's coefficients (lowest
degree first) and its largest relative error on a fine grid: python tools/fit_erfc.py"""

from __future__ import annotations

import math

import numpy as np

A, DEGREE, NODES = 10.5, 12, 4000


def main() -> None:
    lo = 2.0 / (2.0 + A)
    k = np.arange(NODES)
    t = 0.5 * (1.0 + lo) + 0.5 * (1.0 - lo) * np.cos(np.pi * (k + 0.5) / NODES)
    a = 2.0 / t - 2.0
    f = np.array([math.log(math.erfc(x) / s) + x * x for x, s in zip(a, t)])
    fit = np.polynomial.chebyshev.Chebyshev.fit(t, f, DEGREE, domain=[lo, 1.0])
    coef = fit.convert(kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1]).coef
    grid = np.linspace(0.0, A, 300001)
    tg = 2.0 / (2.0 + grid)
    p = np.zeros_like(tg)
    for c in coef[::-1]:
        p = p * tg + c
    exact = np.array([math.erfc(x) for x in grid])
    for c in coef:
        print(repr(float(c)))
    print("max relative error", float(np.max(np.abs(tg * np.exp(-grid * grid + p) / exact - 1))))


if __name__ == "__main__":
    main()
