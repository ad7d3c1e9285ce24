"""MatMul's small products (below two GEMM_GRAIN pieces): numpy's one call, and for 2-32 rows
times a transposed row-major matrix (an imported Gemm's transB weight) the product's transpose
b · xᵀ copied back — the same values as the plain product, a C-contiguous result of the op's
dtype, whatever the rows."""

from __future__ import annotations

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session

RNG = np.random.default_rng(31)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 2, 8, 32, 33])
@pytest.mark.parametrize("transpose_b", [True, False])
def test_small_products_match_numpy(rows, transpose_b, dtype):
    w = RNG.standard_normal((40, 24) if transpose_b else (24, 40)).astype(dtype)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, 24])
        y = rg.matmul(x, rg.constant(w), transpose_b=transpose_b)
    xv = RNG.standard_normal((rows, 24)).astype(dtype)
    xv[0, 0] = np.inf
    with Session(graph=g) as s, np.errstate(invalid="ignore"):
        got = s.run(y, {x: xv})
        want = xv @ (w.T if transpose_b else w)
    assert got.dtype == dtype and got.shape == (rows, 40) and got.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
