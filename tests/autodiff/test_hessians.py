"""hessians (tf.hessians): the Hessian of sum(ys) with respect to each x, shaped x.shape +
x.shape, against analytic values; with an x of unknown shape, a variable, an unconnected x."""

from __future__ import annotations

import numpy as np

import rill.graph as rg
from rill.autodiff import hessians
from rill.exec import Session
from rill.graph.ops import special_math_ops

RNG = np.random.default_rng(11)


def test_quadratic_form_gives_a_plus_a_transposed():
    a = RNG.standard_normal((4, 4)).astype(np.float64)
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float64, [4])
        y = rg.reduce_sum(x * rg.reshape(rg.matmul(rg.constant(a), rg.reshape(x, [4, 1])), [4]))
        (h,) = hessians(y, [x])
    with Session(graph=g) as s:
        got = s.run(h, {x: RNG.standard_normal(4)})
    np.testing.assert_allclose(got, a + a.T, rtol=1e-12)


def test_elementwise_functions_of_a_matrix_of_unknown_shape():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, None)
        y = rg.reduce_sum(special_math_ops.sin(x) * x) + rg.reduce_sum(rg.exp(x)) * 0.5
        (h,) = hessians([y], x)
    xv = RNG.uniform(-2, 2, (2, 3)).astype(np.float32)
    with Session(graph=g) as s:
        got = s.run(h, {x: xv})
    assert got.shape == (2, 3, 2, 3)
    want = np.diag((2 * np.cos(xv) - xv * np.sin(xv) + 0.5 * np.exp(xv)).reshape(-1))
    np.testing.assert_allclose(got.reshape(6, 6), want, rtol=1e-5, atol=1e-6)


def test_a_variable_and_an_unconnected_input():
    g = rg.Graph()
    with g.as_default():
        v = rg.Variable(np.array([1.0, -2.0, 0.5]))
        w = rg.placeholder(rg.float64, [2])
        y = rg.reduce_sum(v * v * v) * rg.reduce_sum(v)
        hv, hw = hessians(y, [v, w])
        init = rg.global_variables_initializer()
    assert hw is None
    vv = np.array([1.0, -2.0, 0.5])
    with Session(graph=g) as s:
        s.run(init)
        got = s.run(hv)
    # y = c·s with c = Σv³, s = Σv: ∂²y/∂vi∂vj = 6vi·s·δij + 3vi² + 3vj²
    want = np.diag(6 * vv * vv.sum()) + 3 * vv[:, None] ** 2 + 3 * vv[None, :] ** 2
    np.testing.assert_allclose(got, want, rtol=1e-12)
