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


def test_stateless_categorical_checks_its_input_and_takes_integer_logits():
    """(Bit-for-bit agreement with TensorFlow is the stateless_sampling fixture's.) Integer
    logits, which TensorFlow's OpDef allows but its CPU kernel lacks, sample as their float
    values; bad shapes are refused with the op's canonical errors."""
    with rg.Graph().as_default() as g:
        seed = rg.constant([5, 6], rg.int64)
        ints = sr.stateless_categorical(rg.constant([[0, 2, -1], [3, 3, 3]], rg.int32), 20, seed)
        floats = sr.stateless_categorical(rg.constant([[0.0, 2.0, -1.0], [3.0, 3.0, 3.0]]), 20,
                                          seed, dtype=rg.int32)  # fmt: skip
        vec = rg.placeholder(rg.float32)
        n = rg.placeholder(rg.int32)
        bad = g.create_op("StatelessMultinomial", [vec, n, seed]).outputs[0]
    with Session(graph=g) as s:
        a, b = s.run([ints, floats])
        np.testing.assert_array_equal(a, b)
        assert a.dtype == np.int64 and b.dtype == np.int32 and a.shape == (2, 20)
        assert set(a[1]) <= {0, 1, 2} and len(set(a[1])) > 1
        with pytest.raises(InvalidArgumentError, match="logits should be a matrix"):
            s.run(bad, {vec: np.zeros(3, np.float32), n: 2})
        with pytest.raises(InvalidArgumentError, match="num_samples should be nonnegative"):
            s.run(bad, {vec: np.zeros((1, 3), np.float32), n: -1})


def test_stateless_parameterized_truncated_normal_refuses_bad_parameters():
    with rg.Graph().as_default() as g:
        shape = rg.placeholder(rg.int32, [None])
        sd = rg.placeholder(rg.float32)
        out = sr.stateless_parameterized_truncated_normal(shape, [1, 2], means=[0.0, 1.0],
                                                          stddevs=sd, minvals=-1.0, maxvals=1.0)  # fmt: skip
    with Session(graph=g) as s:
        got = s.run(out, {shape: [300, 2], sd: 1.0})
        assert got.shape == (300, 2) and got.min() >= -1.0 and got.max() <= 1.0
        np.testing.assert_array_equal(got, s.run(out, {shape: [300, 2], sd: 1.0}))
        with pytest.raises(InvalidArgumentError, match="must end with broadcasted shape"):
            s.run(out, {shape: [2, 3], sd: 1.0})
        with pytest.raises(InvalidArgumentError, match="Invalid parameters.*batch 1"):
            s.run(out, {shape: [4, 2], sd: [1.0, -2.0]})


def test_builders_give_tensorflows_numbers():
    """rill's tf.random.stateless_* builders (rill.compat.v1.random's names) on the inputs the
    stateless_sampling fixture gave TensorFlow's own API reproduce its recorded outputs."""
    import json
    import pathlib

    import rill.compat.v1 as tf

    fx = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"
    fetches = json.loads((fx / "stateless_sampling.json").read_text())["steps"][0]["fetches"]
    arrays = np.load(fx / "stateless_sampling.npz")

    def want(k):
        return arrays[fetches[f"out/{k}:0"]]

    with rg.Graph().as_default() as g:
        seed = rg.constant([123456789, -987654321], rg.int64)
        got = {
            "shuffle_api": sr.stateless_shuffle(rg.reshape(rg.range(30), [10, 3]), seed=[1, 2]),
            "poisson_api": tf.random.stateless_poisson([7, 3], seed=[1, 2], lam=[0.1, 7.0, 50.0]),
            "gamma_api": tf.random.stateless_gamma(
                [7, 3],
                seed=[1, 2],
                alpha=[0.1, 1.0, 50.0],
                beta=[[2.0], [0.5], [1], [1], [3], [1], [1]],
            ),  # fmt: skip
            "gamma_api_tiny": tf.random.stateless_gamma([40], seed=[3, 4], alpha=0.01),
            "binomial_api": tf.random.stateless_binomial(
                [9, 2], seed=[1, 2], counts=[5.0, 80.0], probs=0.4
            ),
            "ptn_api": tf.random.stateless_parameterized_truncated_normal(
                [50, 2],
                seed,
                means=[0.5, -1.0],
                stddevs=[1.0, 3.0],
                minvals=-1.0,
                maxvals=[2.0, 0.0],
            ),  # fmt: skip
        }
    with Session(graph=g) as s:
        for k, v in s.run(got).items():
            assert v.dtype == want(k).dtype, k
            np.testing.assert_array_equal(v, want(k), err_msg=k)


def test_stateless_sample_distorted_bounding_box_refuses_bad_input():
    with rg.Graph().as_default() as g:
        size = rg.placeholder(rg.int32)
        boxes = rg.placeholder(rg.float32)
        begin, extent, box = sr.stateless_sample_distorted_bounding_box(size, boxes, [3, 4])
    with Session(graph=g) as s:
        b, e, bb = s.run([begin, extent, box],
                         {size: [50, 40, 3], boxes: [[[0.0, 0.0, 1.0, 1.0]]]})  # fmt: skip
        assert b[2] == 0 and e[2] == -1 and b[0] + e[0] <= 50 and b[1] + e[1] <= 40
        np.testing.assert_allclose(bb[0, 0], [b[0] / 50, b[1] / 40, (b[0] + e[0]) / 50,
                                              (b[1] + e[1]) / 40], rtol=1e-6)  # fmt: skip
        with pytest.raises(InvalidArgumentError, match=r"must be in \[0.0, 1.0\]: 1.5"):
            s.run(begin, {size: [50, 40, 3], boxes: [[[0.0, 0.0, 1.5, 1.0]]]})
        with pytest.raises(InvalidArgumentError, match="No bounding boxes provided"):
            s.run(begin, {size: [50, 40, 3], boxes: np.zeros((1, 0, 4))})
        with pytest.raises(InvalidArgumentError, match="3 elements"):
            s.run(begin, {size: [50, 40], boxes: [[[0.0, 0.0, 1.0, 1.0]]]})
