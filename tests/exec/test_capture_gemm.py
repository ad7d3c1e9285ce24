"""The capturable products' cuBLAS arguments (rill.exec.capture_gemm): for every operand layout a
kernel hands cupy.matmul (row-major, transposed views, row slices with a longer leading
dimension, degenerate rows and columns), the arguments `gemm_args` picks, run through a numpy
model of column-major gemm on the operands' own memory, give a @ b. The cuBLAS calls themselves
run in tests/gpu (marker gpu)."""

from __future__ import annotations

import numpy as np
import pytest

from rill.exec.capture_gemm import colmajor_gemm, gemm_args, operand


def _flat(x: np.ndarray) -> np.ndarray:
    """x's memory from its first element on, as a flat array (what a device pointer names)."""
    extent = 1 + sum((d - 1) * s for d, s in zip(x.shape, x.strides)) // x.itemsize
    return np.lib.stride_tricks.as_strided(x, (max(extent, 1),), (x.itemsize,))


def _layouts(rows, cols, rng, dt):
    base = rng.standard_normal((rows, cols)).astype(dt)
    yield "row-major", base
    yield "transposed view", np.ascontiguousarray(base.T).T
    wide = rng.standard_normal((rows, cols + 3)).astype(dt)
    wide[:, :cols] = base
    yield "row slice of a wider array", wide[:, :cols]
    tall = rng.standard_normal((cols, rows + 2)).astype(dt)
    tall[:, :rows] = base.T
    yield "transposed slice", tall[:, :rows].T


@pytest.mark.parametrize(
    "m,k,n", [(5, 4, 3), (1, 4, 3), (5, 1, 3), (5, 4, 1), (1, 1, 1), (7, 9, 2)]
)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_chosen_arguments_compute_the_product(m, k, n, dt):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    for la, a in _layouts(m, k, rng, dt):
        for lb, b in _layouts(k, n, rng, dt):
            args = gemm_args(a, b)
            assert args is not None, (la, lb)
            opb, opa, mm, nn, kk, first, ldb, second, lda, ldc = args
            assert (first, second, mm, nn, kk, ldc) == ("b", "a", n, m, k, n)
            out = np.full(m * n, np.nan, dt)
            colmajor_gemm(opb, opa, mm, nn, kk, _flat(b), ldb, _flat(a), lda, out, ldc)
            np.testing.assert_allclose(out.reshape(m, n), a @ b, rtol=1e-5, err_msg=f"{la} @ {lb}")


def test_operands_neither_row_nor_column_major_are_refused():
    x = np.zeros((4, 6), np.float32)[:, ::2]  # every other column
    assert operand(x.shape, x.strides, x.itemsize) is None
    assert gemm_args(x, np.zeros((3, 2), np.float32)) is None
    y = np.zeros((6, 4), np.float32)[::-1]  # negative row stride
    assert operand(y.shape, y.strides, y.itemsize) is None


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_joins_while_capturing_copy_each_part(axis):
    """xp.stack / xp.concatenate as install_joins wraps them (every kernel's joins on a GPU):
    while this thread captures, one copy into each part of the result (cupy's joins of many
    arrays copy a pointer table from the host, which a capture refuses), the same values as
    the module's own joins; otherwise the module's own joins."""
    import types

    from rill.exec import capture_gemm
    from rill.exec.simgpu import simcupy

    def refused(*args, **kw):
        raise RuntimeError("the module's own join")

    xp = types.ModuleType("xp")
    xp.stack, xp.concatenate, xp.empty = refused, refused, simcupy.empty
    capture_gemm.install_joins(xp)
    rng = np.random.default_rng(axis + 1)
    parts = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(9)]
    dev = [simcupy.asarray(p) for p in parts]
    cat_axis = min(axis, 1)
    with capture_gemm.capturing():
        assert capture_gemm.active()
        st = xp.stack(dev, axis=axis)
        cat = xp.concatenate(iter(dev), cat_axis)
    assert not capture_gemm.active()
    np.testing.assert_array_equal(st.get(), np.stack(parts, axis=axis))
    np.testing.assert_array_equal(cat.get(), np.concatenate(parts, axis=cat_axis))
    with pytest.raises(RuntimeError, match="own join"):
        xp.stack(dev, axis=axis)
