"""Stateless random ops: the V2 ops on the key and counter StatelessRandomGetKeyCounter makes
from a seed give what the V1 ops give on that seed (the V1 ops are checked against TensorFlow in
the stateless_random fixture), and an unsupported algorithm is refused."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops import stateless_random_ops as sr


def _v2(op_type, shape, key, counter, alg, dtype):
    g = rg.get_default_graph()
    return g.create_op(op_type, [rg.constant(shape), key, counter, rg.constant(alg)],
                       {"dtype": dtype}).outputs[0]  # fmt: skip


@pytest.mark.parametrize("dtype", [rg.float32, rg.float64, rg.float16])
def test_v2_ops_on_the_scrambled_key_counter_equal_the_v1_ops(dtype):
    with rg.Graph().as_default() as g:
        seed = rg.constant([123456789, -987654321], rg.int64)
        kc = g.create_op("StatelessRandomGetKeyCounter", [seed]).outputs
        u1 = sr.stateless_random_uniform([3, 5], seed, dtype)
        n1 = sr.stateless_random_normal([7], seed, dtype)
        u2 = _v2("StatelessRandomUniformV2", [3, 5], kc[0], kc[1], 1, dtype)
        n2 = _v2("StatelessRandomNormalV2", [7], kc[0], kc[1], 3, dtype)
        bad = _v2("StatelessRandomUniformV2", [2], kc[0], kc[1], 2, dtype)
    with Session(graph=g) as s:
        a, b, c, d = s.run([u1, u2, n1, n2])
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, d)
        assert a.dtype == dtype.np and a.min() >= 0 and a.max() < 1
        with pytest.raises(InvalidArgumentError, match="unsupported RNG algorithm 2"):
            s.run(bad)


def test_parameterized_samplers_have_the_right_moments_and_respect_seeds():
    g = rg.Graph()
    with g.as_default():
        shape = rg.constant([20000])
        gamma = g.create_op("RandomGamma", [shape, rg.constant([2.0, 0.5], rg.float64)],
                            {"seed": 3, "seed2": 4}).outputs[0]  # fmt: skip
        pois = g.create_op("RandomPoissonV2", [shape, rg.constant([3.0], rg.float64)],
                           {"seed": 3, "seed2": 4}).outputs[0]  # fmt: skip
        ptn = g.create_op("ParameterizedTruncatedNormal",
                          [rg.constant([2, 20000]), rg.constant([0.0, 5.0]), rg.constant([1.0, 2.0]),
                           rg.constant([-0.5, 4.0]), rg.constant([2.0, 9.0])],
                          {"seed": 1, "seed2": 2}).outputs[0]  # fmt: skip
    with Session(graph=g) as s:
        ga, po, tn = s.run([gamma, pois, ptn])
    assert ga.shape == (20000, 2) and po.shape == (20000, 1) and po.dtype == np.int64
    np.testing.assert_allclose(ga.mean(axis=0), [2.0, 0.5], rtol=0.05)
    np.testing.assert_allclose(ga.var(axis=0), [2.0, 0.5], rtol=0.1)
    assert abs(po.mean() - 3.0) < 0.1
    assert tn.shape == (2, 20000)
    assert tn[0].min() >= -0.5 and tn[0].max() <= 2.0 and tn[1].min() >= 4.0 and tn[1].max() <= 9.0
    # N(0,1) truncated to [-0.5, 2]: mean (φ(-0.5) - φ(2)) / (Φ(2) - Φ(-0.5)) ≈ 0.4535
    assert abs(tn[0].mean() - 0.4535) < 0.03
