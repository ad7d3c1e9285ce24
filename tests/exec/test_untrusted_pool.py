"""Pooling windows far larger than the input (SAME padding) cost work bounded by the input."""

from __future__ import annotations

import time

import numpy as np

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.testing import run_kernel


def run_op(op_type, inputs, attrs):
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


def test_huge_ksize_pools_give_the_whole_input_window_in_bounded_time():
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 2)).astype(np.float32)
    dy = np.ones((1, 3, 4, 2), np.float32)
    results = {}
    for k in (7, 10**9):  # 7 already covers the whole input from every output position
        attrs = {"ksize": [1, k, k, 1], "strides": [1, 1, 1, 1], "padding": "SAME"}
        t0 = time.perf_counter()
        (mx,) = run_op("MaxPool", [x], attrs)
        (avg,) = run_op("AvgPool", [x], attrs)
        (dmax,) = run_op("MaxPoolGrad", [x, mx, dy], attrs)
        (davg,) = run_op("AvgPoolGrad", [np.array(x.shape, np.int32), dy], attrs)
        assert time.perf_counter() - t0 < 30  # linear in k, it would take hours
        results[k] = (mx, avg, dmax, davg)
    np.testing.assert_array_equal(results[7][0], np.broadcast_to(x.max(axis=(1, 2)), x.shape))
    np.testing.assert_allclose(results[7][1], np.broadcast_to(x.mean(axis=(1, 2)), x.shape),
                               rtol=1e-6)  # fmt: skip
    for a, b in zip(results[7], results[10**9]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
